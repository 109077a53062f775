//! A scripted model server: OpenAI Chat Completions over SSE on loopback, one scripted [`Reply`] per request.
//!
//! Every request is recorded, so a test can assert on what the agent sent back after a tool ran (the
//! follow-up request carries the tool's output), as codex's test server does. Replies are streamed in many
//! small TCP writes, each event split in two, so the client's SSE decoder really sees partial reads.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use serde_json::{json, Value};

/// One tool call the scripted model makes; `id` is unique in the test process so tests can find its result.
#[derive(Clone, Debug)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A tool call with JSON arguments.
pub fn call(name: &str, args: Value) -> ToolCall {
    raw_call(name, &args.to_string())
}

/// A tool call whose arguments text is sent verbatim (for malformed-JSON tests).
pub fn raw_call(name: &str, arguments: &str) -> ToolCall {
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    let id = format!("call_{}", NEXT.fetch_add(1, Ordering::SeqCst));
    ToolCall {
        id,
        name: name.to_string(),
        arguments: arguments.to_string(),
    }
}

/// What the server answers to one chat-completions request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A 200 event stream; each string is the payload of one TCP write, sent as is.
    Sse(Vec<String>),
    /// A plain HTTP error with a JSON body `{"error":{"message":...}}`.
    Status(u16, String),
}

impl Reply {
    /// An answer streamed as several `delta.content` chunks, finishing with `stop`.
    pub fn text(text: &str) -> Reply {
        let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        for piece in pieces_of(text, 8) {
            events.push(chunk(json!({"content": piece}), None));
        }
        finish(events, "stop")
    }

    /// Several tool calls in one response: per call, a first chunk with id, type and name, then its
    /// arguments split across at least three further events.
    pub fn tool_calls(calls: Vec<ToolCall>) -> Reply {
        let mut events = vec![chunk(json!({"role": "assistant", "content": null}), None)];
        for (index, c) in calls.iter().enumerate() {
            let first = json!({"index": index, "id": c.id, "type": "function",
                               "function": {"name": c.name, "arguments": ""}});
            events.push(chunk(json!({"tool_calls": [first]}), None));
            for part in split_n(&c.arguments, 3) {
                let more = json!({"index": index, "function": {"arguments": part}});
                events.push(chunk(json!({"tool_calls": [more]}), None));
            }
        }
        finish(events, "tool_calls")
    }

    /// Text first (the model saying why), then tool calls, in one response.
    pub fn text_and_tool_calls(text: &str, calls: Vec<ToolCall>) -> Reply {
        let Reply::Sse(writes) = Reply::tool_calls(calls) else {
            unreachable!("tool_calls always streams")
        };
        let intro = format!(
            "data: {}\n\n",
            chunk(json!({"role": "assistant", "content": text}), None)
        );
        Reply::Sse(std::iter::once(intro).chain(writes).collect())
    }

    /// One tool call whose arguments are sent verbatim, e.g. `"{not json"`.
    pub fn raw_tool_call(name: &str, arguments: &str) -> Reply {
        Reply::tool_calls(vec![raw_call(name, arguments)])
    }

    /// A plain HTTP error, e.g. `Reply::status(401, "Incorrect API key provided")`.
    pub fn status(code: u16, message: &str) -> Reply {
        Reply::Status(code, message.to_string())
    }

    /// The escape hatch: exactly these bytes, one TCP write per string, in a 200 `text/event-stream`.
    pub fn sse_raw(writes: Vec<String>) -> Reply {
        Reply::Sse(writes)
    }
}

fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000, "model": "test-model",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})
}

/// Token figures every streamed reply reports.
pub const PROMPT_TOKENS: u64 = 11;
pub const COMPLETION_TOKENS: u64 = 7;

/// Adds the finish, usage and `[DONE]` events and cuts every event in two writes.
fn finish(mut events: Vec<Value>, reason: &str) -> Reply {
    events.push(chunk(json!({}), Some(reason)));
    events.push(json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000,
                       "model": "test-model", "choices": [],
                       "usage": {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS,
                                 "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS}}));
    let mut writes = Vec::new();
    let usage = events.len() - 1;
    for (i, event) in events.into_iter().enumerate() {
        let line = format!("data: {event}\n\n");
        if i == usage {
            // Whole, so the server can put the real prompt size in (see `Server::count_prompt_tokens`).
            writes.push(line);
        } else {
            writes.extend(split_n(&line, 2).into_iter().map(str::to_string));
        }
    }
    writes.push("data: [DONE]\n\n".to_string());
    Reply::Sse(writes)
}

/// `s` cut into `n` nearly equal pieces at char boundaries (fewer when `s` has fewer chars).
fn split_n(s: &str, n: usize) -> Vec<&str> {
    let chars = s.chars().count();
    pieces_of(s, chars.div_ceil(n).max(1))
}

/// `s` cut into pieces of at most `size` chars; an empty `s` gives one empty piece.
fn pieces_of(s: &str, size: usize) -> Vec<&str> {
    let bounds: Vec<usize> = s
        .char_indices()
        .map(|(i, _)| i)
        .step_by(size)
        .chain([s.len()])
        .collect();
    let pieces: Vec<&str> = bounds.windows(2).map(|w| &s[w[0]..w[1]]).collect();
    if pieces.is_empty() {
        vec![s]
    } else {
        pieces
    }
}

/// One request as the server received it.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Header names lowercased, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON, `Null` when it is not JSON.
    pub body: Value,
    pub raw_body: String,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn messages(&self) -> &[Value] {
        self.body["messages"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// The system message's text (empty if none).
    pub fn system(&self) -> String {
        self.messages()
            .iter()
            .find(|m| m["role"] == "system")
            .map(|m| content_text(&m["content"]))
            .unwrap_or_default()
    }

    /// The text of every `role: user` message, in order (the prompt, and messages the agent adds).
    pub fn user_texts(&self) -> Vec<String> {
        self.messages()
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| content_text(&m["content"]))
            .collect()
    }

    /// Whether the request offered tools (the agent's summarising requests offer none).
    pub fn has_tools(&self) -> bool {
        self.body.get("tools").is_some()
    }

    /// `(tool_call_id, content)` of every `role: tool` message, in conversation order.
    pub fn tool_results(&self) -> Vec<(String, String)> {
        self.messages()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                (
                    m["tool_call_id"].as_str().unwrap_or_default().to_string(),
                    content_text(&m["content"]),
                )
            })
            .collect()
    }

    /// The content of the tool message answering `call_id`; panics with the whole conversation if none.
    pub fn tool_result(&self, call_id: &str) -> String {
        match self
            .tool_results()
            .into_iter()
            .find(|(id, _)| id == call_id)
        {
            Some((_, content)) => content,
            None => panic!(
                "no tool message for {call_id} in {:#}",
                self.body["messages"]
            ),
        }
    }
}

/// The prompt size the server reports for `request` under [`Server::count_prompt_tokens`]: body bytes / 4.
pub fn prompt_tokens(request: &Request) -> u64 {
    request.raw_body.len() as u64 / 4
}

/// A message content as text: either a string or an array of `{type:"text", text}` parts.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        other => other.to_string(),
    }
}

struct Shared {
    script: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Request>>,
    stop: AtomicBool,
    /// Report `prompt_tokens` as the request body's bytes / 4 instead of [`PROMPT_TOKENS`].
    count_tokens: AtomicBool,
    /// The answer to requests that offer no tools (the agent's summarising requests), outside the script.
    summary: Mutex<Option<Reply>>,
}

/// The running server; dropping it stops accepting connections.
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    pub fn start(script: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener
            .local_addr()
            .expect("a bound listener has an address");
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into()),
            requests: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            count_tokens: AtomicBool::new(false),
            summary: Mutex::new(None),
        });
        let accept = thread::spawn({
            let shared = Arc::clone(&shared);
            move || {
                for stream in listener.incoming() {
                    if shared.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        let shared = Arc::clone(&shared);
                        thread::spawn(move || {
                            let _ = serve(stream, &shared);
                        });
                    }
                }
            }
        });
        Server {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/v1`, as `OPENAI_BASE_URL` expects it.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.shared
            .requests
            .lock()
            .expect("no panics while holding the lock")
            .clone()
    }

    /// Makes every reply report the request's real size as its prompt tokens (body bytes / 4), so token
    /// accounting and context limits can be tested; the figure is [`prompt_tokens`] of the request.
    pub fn count_prompt_tokens(&self) {
        self.shared.count_tokens.store(true, Ordering::SeqCst);
    }

    /// Answers requests that carry no tools (the agent's summarising requests) with `reply`, every time,
    /// without taking a reply from the script.
    pub fn answer_summaries(&self, reply: Reply) {
        *self
            .shared
            .summary
            .lock()
            .expect("no panics while holding the lock") = Some(reply);
    }

    /// How many scripted replies are still unused.
    pub fn remaining(&self) -> usize {
        self.shared
            .script
            .lock()
            .expect("no panics while holding the lock")
            .len()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees `stop`.
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// Serves one connection: requests in a loop (keep-alive) until the client closes or asks to.
fn serve(stream: TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_nodelay(true)?;
    // A client that never closes its pooled connection must not pin this thread forever.
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    while let Some(request) = read_request(&mut reader)? {
        let close = request
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let is_chat = request.method == "POST"
            && (request.path == "/v1/chat/completions" || request.path == "/chat/completions");
        let tokens = prompt_tokens(&request);
        let summary = if request.body.get("tools").is_none() {
            shared
                .summary
                .lock()
                .expect("no panics while holding the lock")
                .clone()
        } else {
            None
        };
        shared
            .requests
            .lock()
            .expect("no panics while holding the lock")
            .push(request);
        let reply = if let (true, Some(summary)) = (is_chat, summary) {
            summary
        } else if is_chat {
            let next = shared
                .script
                .lock()
                .expect("no panics while holding the lock")
                .pop_front();
            next.unwrap_or_else(|| Reply::text("(script exhausted)"))
        } else {
            Reply::status(404, "no such route on the scripted test server")
        };
        let reply = match reply {
            Reply::Sse(writes) if shared.count_tokens.load(Ordering::SeqCst) => {
                let from = format!("\"prompt_tokens\":{PROMPT_TOKENS},");
                let to = format!("\"prompt_tokens\":{tokens},");
                Reply::Sse(writes.iter().map(|w| w.replace(&from, &to)).collect())
            }
            reply => reply,
        };
        write_reply(&mut out, &reply, close)?;
        if close {
            break;
        }
    }
    Ok(())
}

fn read_request(reader: &mut BufReader<TcpStream>) -> io::Result<Option<Request>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let header = line.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let value_of = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.to_ascii_lowercase())
    };
    let body = if value_of("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        read_chunked(reader)?
    } else {
        let length = value_of("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        body
    };
    Ok(Some(Request {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        raw_body: String::from_utf8_lossy(&body).into_owned(),
    }))
}

fn read_chunked(reader: &mut BufReader<TcpStream>) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let size = line.trim().split(';').next().unwrap_or_default();
        let size = usize::from_str_radix(size, 16)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        if size == 0 {
            // Trailers, then the blank line that ends the body.
            loop {
                line.clear();
                if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        let mut crlf = [0; 2];
        reader.read_exact(&mut crlf)?;
    }
}

fn write_reply(out: &mut TcpStream, reply: &Reply, close: bool) -> io::Result<()> {
    let connection = if close { "Connection: close\r\n" } else { "" };
    match reply {
        Reply::Status(code, message) => {
            let body = json!({"error": {"message": message, "type": "test_error", "code": null}})
                .to_string();
            write!(
                out,
                "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{connection}\r\n{body}",
                reason(*code),
                body.len()
            )?;
            out.flush()
        }
        Reply::Sse(writes) => {
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
                 Transfer-Encoding: chunked\r\n{connection}\r\n"
            )?;
            out.flush()?;
            // An empty chunk would end the body early, so empty writes are skipped.
            for payload in writes.iter().filter(|w| !w.is_empty()) {
                write!(out, "{:x}\r\n{payload}\r\n", payload.len())?;
                out.flush()?;
                // Lets each write leave as its own segment, so the client reads events in pieces.
                thread::sleep(Duration::from_millis(1));
            }
            out.write_all(b"0\r\n\r\n")?;
            out.flush()
        }
    }
}

fn reason(code: u16) -> &'static str {
    match code {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
