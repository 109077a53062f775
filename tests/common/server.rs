//! A scripted model server on loopback, one scripted [`Reply`] per request, speaking OpenAI Chat Completions
//! (`POST /v1/chat/completions`) and Anthropic Messages (`POST /v1/messages`) over SSE.
//!
//! Every request is recorded, so a test can assert on what the agent sent back after a tool ran (the
//! follow-up request carries the tool's output), as codex's test server does. Replies are streamed in many
//! small TCP writes, each event split in two, so the client's SSE decoder really sees partial reads.
//! `Reply::text` and `Reply::tool_calls` are rendered in the wire format of the route that was called, so
//! one script drives either provider. Faults of the real network can be scripted too: a connection that
//! drops mid-stream, a stall, any status with any headers.
//!
//! The metadata routes a client may ask before the session (llama.cpp's `GET /props`, `GET /v1/models`,
//! Ollama's `POST /api/show`) answer 404 unless a test sets them ([`Server::props`], [`Server::models`],
//! [`Server::ollama_show`]); they take no reply from the script and are recorded apart, in
//! [`Server::probes`], so [`Server::requests`] holds the model requests only.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

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

/// What the server answers to one model request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A 200 event stream; each string is the payload of one TCP write, sent as is.
    Sse(Vec<String>),
    /// A plain HTTP error with a JSON body `{"error":{"message":...}}` (Anthropic's shape on its route).
    Status(u16, String),
    /// An answer, streamed in the wire format of the route called.
    Text(String),
    /// Tool calls, streamed in the wire format of the route called.
    ToolCalls(Vec<ToolCall>),
    /// Text, then tool calls, in one response.
    TextAndToolCalls(String, Vec<ToolCall>),
    /// Any status with extra headers and a body sent verbatim.
    StatusWith {
        code: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// `reply`, held back until the test opens `gate` (a model that takes its time, for as long as the test
    /// needs: no timing involved).
    Held { gate: Gate, reply: Box<Reply> },
    /// The first `after` writes of `reply`'s event stream, then `fault`.
    Cut {
        reply: Box<Reply>,
        after: usize,
        fault: Fault,
    },
}

/// What a [`Reply::Held`] waits for: [`Gate::open`] (or a minute, so a failing test cannot hang the server).
#[derive(Clone, Debug, Default)]
pub struct Gate(Arc<(Mutex<bool>, std::sync::Condvar)>);

impl Gate {
    pub fn new() -> Gate {
        Gate::default()
    }

    /// Lets the held reply go.
    pub fn open(&self) {
        let (open, wake) = &*self.0;
        *open.lock().expect("no panics while holding the lock") = true;
        wake.notify_all();
    }

    fn wait(&self) {
        let (open, wake) = &*self.0;
        let guard = open.lock().expect("no panics while holding the lock");
        let _ = wake
            .wait_timeout_while(guard, Duration::from_secs(60), |open| !*open)
            .expect("no panics while holding the lock");
    }
}

/// What happens to a stream cut short by [`Reply::Cut`].
#[derive(Clone, Debug)]
pub enum Fault {
    /// The connection is closed without ending the body, as a dropped network connection looks.
    Drop,
    /// No byte for this long (the server notices if the client hangs up meanwhile), then a drop.
    Stall(Duration),
}

impl Reply {
    /// An answer streamed as several content chunks, finishing with `stop` (`end_turn`).
    pub fn text(text: &str) -> Reply {
        Reply::Text(text.to_string())
    }

    /// Several tool calls in one response: per call, a first chunk with id, type and name, then its
    /// arguments split across at least three further events.
    pub fn tool_calls(calls: Vec<ToolCall>) -> Reply {
        Reply::ToolCalls(calls)
    }

    /// Text first (the model saying why), then tool calls, in one response.
    pub fn text_and_tool_calls(text: &str, calls: Vec<ToolCall>) -> Reply {
        Reply::TextAndToolCalls(text.to_string(), calls)
    }

    /// One tool call whose arguments are sent verbatim, e.g. `"{not json"`.
    pub fn raw_tool_call(name: &str, arguments: &str) -> Reply {
        Reply::tool_calls(vec![raw_call(name, arguments)])
    }

    /// A plain HTTP error, e.g. `Reply::status(401, "Incorrect API key provided")`.
    pub fn status(code: u16, message: &str) -> Reply {
        Reply::Status(code, message.to_string())
    }

    /// Any status with extra headers, e.g. a 429 with `Retry-After`.
    pub fn status_with(code: u16, headers: &[(&str, &str)], body: &str) -> Reply {
        Reply::StatusWith {
            code,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            body: body.to_string(),
        }
    }

    /// The escape hatch: exactly these bytes, one TCP write per string, in a 200 `text/event-stream`.
    pub fn sse_raw(writes: Vec<String>) -> Reply {
        Reply::Sse(writes)
    }

    /// This reply, sent once `gate` is opened.
    pub fn held(self, gate: &Gate) -> Reply {
        Reply::Held {
            gate: gate.clone(),
            reply: Box::new(self),
        }
    }

    /// This reply's first `writes` writes, then the connection drops.
    pub fn dropped_after(self, writes: usize) -> Reply {
        Reply::Cut {
            reply: Box::new(self),
            after: writes,
            fault: Fault::Drop,
        }
    }

    /// This reply's first `writes` writes, then silence for `stall`, then a drop.
    pub fn stalled_after(self, writes: usize, stall: Duration) -> Reply {
        Reply::Cut {
            reply: Box::new(self),
            after: writes,
            fault: Fault::Stall(stall),
        }
    }
}

/// The wire format of a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    OpenAi,
    Anthropic,
}

/// A reply made concrete for one route.
enum Rendered {
    Sse(Vec<String>),
    Status {
        code: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
}

fn render(reply: &Reply, wire: Wire) -> Rendered {
    match (reply, wire) {
        (Reply::Sse(writes), _) => Rendered::Sse(writes.clone()),
        (Reply::Text(text), Wire::OpenAi) => Rendered::Sse(openai_text(text)),
        (Reply::ToolCalls(calls), Wire::OpenAi) => Rendered::Sse(openai_tool_calls("", calls)),
        (Reply::TextAndToolCalls(text, calls), Wire::OpenAi) => {
            Rendered::Sse(openai_tool_calls(text, calls))
        }
        (Reply::TextAndToolCalls(text, calls), Wire::Anthropic) => {
            Rendered::Sse(anthropic::text_and_tool_calls(text, calls))
        }
        (Reply::Text(text), Wire::Anthropic) => Rendered::Sse(anthropic::text(text)),
        (Reply::ToolCalls(calls), Wire::Anthropic) => {
            Rendered::Sse(anthropic::text_and_tool_calls("", calls))
        }
        (Reply::Status(code, message), _) => {
            let body = match wire {
                Wire::OpenAi => {
                    json!({"error": {"message": message, "type": "test_error", "code": null}})
                }
                Wire::Anthropic => {
                    json!({"type": "error", "error": {"type": "test_error", "message": message}})
                }
            };
            Rendered::Status {
                code: *code,
                headers: Vec::new(),
                body: body.to_string(),
            }
        }
        (
            Reply::StatusWith {
                code,
                headers,
                body,
            },
            _,
        ) => Rendered::Status {
            code: *code,
            headers: headers.clone(),
            body: body.clone(),
        },
        (Reply::Cut { reply, .. } | Reply::Held { reply, .. }, _) => render(reply, wire),
    }
}

fn openai_text(text: &str) -> Vec<String> {
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    for piece in pieces_of(text, 8) {
        events.push(chunk(json!({"content": piece}), None));
    }
    finish(events, "stop")
}

fn openai_tool_calls(text: &str, calls: &[ToolCall]) -> Vec<String> {
    let content = if text.is_empty() {
        Value::Null
    } else {
        text.into()
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": content}),
        None,
    )];
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

/// OpenAI chunks as SSE writes, for tests that script a stream event by event: each value becomes one
/// `data:` event, followed by `[DONE]`.
pub fn openai_events(chunks: &[Value]) -> Vec<String> {
    chunks
        .iter()
        .map(|c| format!("data: {c}\n\n"))
        .chain(["data: [DONE]\n\n".to_string()])
        .collect()
}

/// An OpenAI chunk with one choice carrying `delta` (and a finish reason).
pub fn openai_chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    chunk(delta, finish_reason)
}

/// The Anthropic Messages event stream.
pub mod anthropic {
    use super::{pieces_of, split_n, ToolCall, COMPLETION_TOKENS, PROMPT_TOKENS};
    use serde_json::{json, Value};

    /// One SSE event as the API sends it: `event:` line naming the type, then the data.
    pub fn event(data: &Value) -> String {
        let kind = data["type"].as_str().unwrap_or("unknown");
        format!("event: {kind}\ndata: {data}\n\n")
    }

    pub fn message_start() -> Value {
        json!({"type": "message_start", "message": {"id": "msg_test", "type": "message", "role": "assistant",
               "model": "test-model", "content": [], "stop_reason": null,
               "usage": {"input_tokens": PROMPT_TOKENS, "output_tokens": 1}}})
    }

    pub fn end(stop_reason: &str) -> Vec<Value> {
        vec![
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                   "usage": {"output_tokens": COMPLETION_TOKENS}}),
            json!({"type": "message_stop"}),
        ]
    }

    /// Each event cut in two writes, as the OpenAI replies are.
    pub fn writes(events: &[Value]) -> Vec<String> {
        events
            .iter()
            .flat_map(|e| {
                split_n(&event(e), 2)
                    .into_iter()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    pub fn text(text: &str) -> Vec<String> {
        let mut events = vec![
            message_start(),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "ping"}),
        ];
        for piece in pieces_of(text, 8) {
            events.push(json!({"type": "content_block_delta", "index": 0,
                               "delta": {"type": "text_delta", "text": piece}}));
        }
        events.push(json!({"type": "content_block_stop", "index": 0}));
        events.extend(end("end_turn"));
        writes(&events)
    }

    pub fn text_and_tool_calls(text: &str, calls: &[ToolCall]) -> Vec<String> {
        let mut events = vec![message_start()];
        let first = usize::from(!text.is_empty());
        if !text.is_empty() {
            events.push(json!({"type": "content_block_start", "index": 0,
                               "content_block": {"type": "text", "text": ""}}));
            events.push(json!({"type": "content_block_delta", "index": 0,
                               "delta": {"type": "text_delta", "text": text}}));
            events.push(json!({"type": "content_block_stop", "index": 0}));
        }
        for (index, c) in (first..).zip(calls) {
            events.push(json!({"type": "content_block_start", "index": index,
                               "content_block": {"type": "tool_use", "id": c.id, "name": c.name, "input": {}}}));
            for part in split_n(&c.arguments, 3) {
                events.push(json!({"type": "content_block_delta", "index": index,
                                   "delta": {"type": "input_json_delta", "partial_json": part}}));
            }
            events.push(json!({"type": "content_block_stop", "index": index}));
        }
        events.extend(end("tool_use"));
        writes(&events)
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
fn finish(mut events: Vec<Value>, reason: &str) -> Vec<String> {
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
    writes
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
    /// When the request arrived.
    pub at: Instant,
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

    /// The system prompt's text: OpenAI's `role: system` message or Anthropic's `system` blocks.
    pub fn system(&self) -> String {
        match &self.body["system"] {
            Value::Null => self
                .messages()
                .iter()
                .find(|m| m["role"] == "system")
                .map(|m| content_text(&m["content"]))
                .unwrap_or_default(),
            system => content_text(system),
        }
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

    /// `(tool_call_id, content)` of every tool result, in conversation order: OpenAI's `role: tool`
    /// messages or Anthropic's `tool_result` blocks.
    pub fn tool_results(&self) -> Vec<(String, String)> {
        let mut results = Vec::new();
        for m in self.messages() {
            if m["role"] == "tool" {
                results.push((
                    m["tool_call_id"].as_str().unwrap_or_default().to_string(),
                    content_text(&m["content"]),
                ));
            }
            for block in m["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_result" {
                    results.push((
                        block["tool_use_id"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        content_text(&block["content"]),
                    ));
                }
            }
        }
        results
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
    /// Stalled replies whose client hung up before the stall ended.
    hangups: AtomicUsize,
    /// Connections accepted.
    connections: AtomicUsize,
    /// Report `prompt_tokens` as the request body's bytes / 4 instead of [`PROMPT_TOKENS`] (OpenAI wire).
    count_tokens: AtomicBool,
    /// The answer to requests that offer no tools (the agent's summarising requests), outside the script.
    summary: Mutex<Option<Reply>>,
    /// Metadata requests received, apart from the model requests.
    probes: Mutex<Vec<Request>>,
    /// JSON bodies of the metadata routes, by path; a route not here answers 404.
    metadata: Mutex<Vec<(String, Value)>>,
    /// Scripts of their own for conversations whose first user message contains the marker (a subagent's
    /// conversation, whose requests interleave with others'), tried before the main script.
    routes: Mutex<Vec<(String, VecDeque<Reply>)>>,
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
            hangups: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            count_tokens: AtomicBool::new(false),
            summary: Mutex::new(None),
            probes: Mutex::new(Vec::new()),
            metadata: Mutex::new(Vec::new()),
            routes: Mutex::new(Vec::new()),
        });
        let accept = thread::spawn({
            let shared = Arc::clone(&shared);
            move || {
                for stream in listener.incoming() {
                    if shared.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        shared.connections.fetch_add(1, Ordering::SeqCst);
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

    /// Makes every OpenAI reply report the request's real size as its prompt tokens (body bytes / 4, see
    /// [`prompt_tokens`]), so token accounting and context limits can be tested.
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

    /// Answers the requests of every conversation whose first user message contains `marker` from
    /// `replies`, in order, instead of from the main script: concurrent conversations (explore subagents)
    /// then get their own replies whatever order their requests arrive in.
    pub fn script_for(&self, marker: &str, replies: Vec<Reply>) {
        self.shared
            .routes
            .lock()
            .expect("no panics while holding the lock")
            .push((marker.to_string(), replies.into()));
    }

    /// Serves llama.cpp's `GET /props` with the context of each request (`default_generation_settings.n_ctx`).
    pub fn props(&self, n_ctx: u64) {
        let props = json!({
            "default_generation_settings": {"n_ctx": n_ctx, "n_predict": -1, "temperature": 0.8},
            "total_slots": 1,
            "chat_template": "{{ messages }}",
        });
        self.set_metadata("/props", props);
    }

    /// Serves `GET /v1/models` (and `/models`) listing `entries`, e.g. `json!({"id": "test-model",
    /// "max_model_len": 8192})` as vLLM lists a model.
    pub fn models(&self, entries: Vec<Value>) {
        let list = json!({"object": "list", "data": entries});
        self.set_metadata("/v1/models", list.clone());
        self.set_metadata("/models", list);
    }

    /// Serves Ollama's `POST /api/show` with `body`, whatever model is asked about.
    pub fn ollama_show(&self, body: Value) {
        self.set_metadata("/api/show", body);
    }

    fn set_metadata(&self, path: &str, body: Value) {
        let mut routes = self
            .shared
            .metadata
            .lock()
            .expect("no panics while holding the lock");
        routes.retain(|(p, _)| p != path);
        routes.push((path.to_string(), body));
    }

    /// The metadata requests received so far (`/props`, `/v1/models`, `/api/show`), in order.
    pub fn probes(&self) -> Vec<Request> {
        self.shared
            .probes
            .lock()
            .expect("no panics while holding the lock")
            .clone()
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

    /// How many stalled replies saw the client close the connection before the stall was over.
    pub fn hangups(&self) -> usize {
        self.shared.hangups.load(Ordering::SeqCst)
    }

    /// Waits (up to 10 s) until `n` stalled replies have seen their client hang up, and returns the count;
    /// the server notices a hang-up within one poll of its stall loop, not at the instant it happens.
    pub fn wait_for_hangups(&self, n: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.hangups() < n && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        self.hangups()
    }

    /// How many connections the server accepted (keep-alive reuse shows as fewer than requests).
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// `http://127.0.0.1:PORT`, as `ANTHROPIC_BASE_URL` is usually spelt (`base_url()` works too).
    pub fn root_url(&self) -> String {
        format!("http://{}", self.addr)
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
        if is_metadata(&request) {
            let reply = metadata_reply(&request, shared);
            shared
                .probes
                .lock()
                .expect("no panics while holding the lock")
                .push(request);
            write_reply(&mut out, &reply, close)?;
            if close {
                break;
            }
            continue;
        }
        let wire = match (request.method.as_str(), request.path.as_str()) {
            ("POST", "/v1/chat/completions" | "/chat/completions") => Some(Wire::OpenAi),
            ("POST", "/v1/messages") => Some(Wire::Anthropic),
            _ => None,
        };
        let tokens = prompt_tokens(&request);
        let first_user = request.user_texts().into_iter().next().unwrap_or_default();
        let routed = shared
            .routes
            .lock()
            .expect("no panics while holding the lock")
            .iter_mut()
            .find(|(marker, _)| first_user.contains(marker.as_str()))
            .map(|(_, replies)| {
                replies
                    .pop_front()
                    .unwrap_or_else(|| Reply::text("(route exhausted)"))
            });
        let summary = if routed.is_some() {
            None
        } else if request.body.get("tools").is_none() {
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
        let (reply, wire) = match (wire, summary) {
            (Some(wire), _) if routed.is_some() => {
                (routed.unwrap_or_else(|| Reply::text("")), wire)
            }
            (Some(wire), Some(summary)) => (summary, wire),
            (Some(wire), None) => {
                let next = shared
                    .script
                    .lock()
                    .expect("no panics while holding the lock")
                    .pop_front();
                (
                    next.unwrap_or_else(|| Reply::text("(script exhausted)")),
                    wire,
                )
            }
            (None, _) => (
                Reply::status(404, "no such route on the scripted test server"),
                Wire::OpenAi,
            ),
        };
        let reply = match reply {
            Reply::Held { gate, reply } => {
                gate.wait();
                *reply
            }
            reply => reply,
        };
        if let Reply::Cut { after, fault, .. } = &reply {
            let writes = match render(&reply, wire) {
                Rendered::Sse(writes) => writes,
                Rendered::Status { .. } => panic!("only event streams can be cut"),
            };
            let cut = &writes[..(*after).min(writes.len())];
            write_sse_head(&mut out, "")?;
            write_chunks(&mut out, cut)?;
            if let Fault::Stall(stall) = fault {
                if wait_for_hangup(&out, *stall) {
                    shared.hangups.fetch_add(1, Ordering::SeqCst);
                }
            }
            // Dropping the socket without the final chunk is what a broken connection looks like.
            let _ = out.shutdown(std::net::Shutdown::Both);
            break;
        }
        let rendered = match render(&reply, wire) {
            Rendered::Sse(writes) if shared.count_tokens.load(Ordering::SeqCst) => {
                let from = format!("\"prompt_tokens\":{PROMPT_TOKENS},");
                let to = format!("\"prompt_tokens\":{tokens},");
                Rendered::Sse(writes.iter().map(|w| w.replace(&from, &to)).collect())
            }
            rendered => rendered,
        };
        write_reply(&mut out, &rendered, close)?;
        if close {
            break;
        }
    }
    Ok(())
}

/// A request for what the server runs rather than for the model: any GET, and Ollama's `/api/show`.
fn is_metadata(request: &Request) -> bool {
    request.method == "GET" || request.path == "/api/show"
}

/// The JSON a test set for the route, else a 404 such as servers that lack the route send.
fn metadata_reply(request: &Request, shared: &Shared) -> Rendered {
    let routes = shared
        .metadata
        .lock()
        .expect("no panics while holding the lock");
    match routes.iter().find(|(path, _)| *path == request.path) {
        Some((_, body)) => Rendered::Status {
            code: 200,
            headers: Vec::new(),
            body: body.to_string(),
        },
        None => Rendered::Status {
            code: 404,
            headers: Vec::new(),
            body: json!({"error": {"message": "File Not Found", "type": "not_found_error"}})
                .to_string(),
        },
    }
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
        at: Instant::now(),
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

fn write_reply(out: &mut TcpStream, reply: &Rendered, close: bool) -> io::Result<()> {
    let connection = if close { "Connection: close\r\n" } else { "" };
    match reply {
        Rendered::Status {
            code,
            headers,
            body,
        } => {
            let extra: String = headers
                .iter()
                .map(|(n, v)| format!("{n}: {v}\r\n"))
                .collect();
            write!(
                out,
                "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}{connection}\r\n{body}",
                reason(*code),
                body.len()
            )?;
            out.flush()
        }
        Rendered::Sse(writes) => {
            write_sse_head(out, connection)?;
            write_chunks(out, writes)?;
            out.write_all(b"0\r\n\r\n")?;
            out.flush()
        }
    }
}

fn write_sse_head(out: &mut TcpStream, connection: &str) -> io::Result<()> {
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
         Transfer-Encoding: chunked\r\n{connection}\r\n"
    )?;
    out.flush()
}

fn write_chunks(out: &mut TcpStream, writes: &[String]) -> io::Result<()> {
    // An empty chunk would end the body early, so empty writes are skipped.
    let writes: Vec<&String> = writes.iter().filter(|w| !w.is_empty()).collect();
    for (n, payload) in writes.iter().enumerate() {
        write!(out, "{:x}\r\n{payload}\r\n", payload.len())?;
        out.flush()?;
        // Lets each write leave as its own segment, so the client reads events in pieces; after the last
        // one there is nothing left to separate, and the body's end follows at once, as real servers do.
        if n + 1 < writes.len() {
            thread::sleep(Duration::from_millis(1));
        }
    }
    Ok(())
}

/// Waits up to `stall`; true if the client closed the connection meanwhile.
fn wait_for_hangup(out: &TcpStream, stall: Duration) -> bool {
    let deadline = Instant::now() + stall;
    let mut byte = [0; 1];
    while Instant::now() < deadline {
        let _ = out.set_read_timeout(Some(Duration::from_millis(20)));
        match out.peek(&mut byte) {
            Ok(0) => return true,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return true,
            _ => {}
        }
    }
    false
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}
