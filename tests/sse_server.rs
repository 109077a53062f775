//! Tests of the scripted model server itself, with a raw TCP client, so the agent tests can trust it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use serde_json::{json, Value};

use crate::common::{call, Reply, Server};

/// A response as a raw client saw it.
struct Raw {
    status: u16,
    head: String,
    /// The body with the chunked framing removed.
    body: String,
    /// How many `read` calls returned data.
    reads: usize,
}

/// Sends one request with `Connection: close` and reads the response until the server closes.
fn post(server: &Server, path: &str, body: &str) -> Raw {
    let mut stream = TcpStream::connect(server.addr()).expect("connect to the server");
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("send the request");
    let (mut bytes, mut reads, mut buf) = (Vec::new(), 0, [0; 4096]);
    loop {
        let n = stream.read(&mut buf).expect("read the response");
        if n == 0 {
            break;
        }
        reads += 1;
        bytes.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8(bytes).expect("the response is UTF-8");
    let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status code");
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Raw {
        status,
        head: head.to_string(),
        body,
        reads,
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n").expect("a chunk size line");
        let size = usize::from_str_radix(size, 16).expect("a hex chunk size");
        if size == 0 {
            return body;
        }
        body.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
}

/// The `data:` payloads of an SSE body, in order.
fn data_events(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            e.strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data event: {e:?}"))
                .to_string()
        })
        .collect()
}

fn json_events(body: &str) -> Vec<Value> {
    let events = data_events(body);
    assert_eq!(
        events.last().map(String::as_str),
        Some("[DONE]"),
        "the stream ends with [DONE]"
    );
    events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).expect("an event is JSON"))
        .collect()
}

/// The `tool_calls` delta entries for call `index`, in order.
fn tool_deltas(events: &[Value], index: u64) -> Vec<Value> {
    events
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["tool_calls"].as_array())
        .flatten()
        .filter(|c| c["index"] == index)
        .cloned()
        .collect()
}

fn finish_reasons(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| {
            e["choices"][0]["finish_reason"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

#[test]
fn tool_call_arguments_arrive_split_across_events_and_reads() {
    let read = call("read_file", json!({"path": "src/main.rs", "limit": 40}));
    let run = call("run", json!({"command": "cargo test"}));
    let server = Server::start(vec![Reply::tool_calls(vec![read.clone(), run.clone()])]);

    let raw = post(
        &server,
        "/v1/chat/completions",
        r#"{"model":"m","stream":true}"#,
    );

    assert_eq!(raw.status, 200);
    assert!(raw.head.contains("text/event-stream"), "{}", raw.head);
    assert!(
        raw.reads > 5,
        "the stream should arrive in many reads, got {}",
        raw.reads
    );
    let events = json_events(&raw.body);
    for (index, expected) in [(0, &read), (1, &run)] {
        let deltas = tool_deltas(&events, index);
        assert_eq!(deltas[0]["id"], expected.id.as_str());
        assert_eq!(deltas[0]["type"], "function");
        assert_eq!(deltas[0]["function"]["name"], expected.name.as_str());
        let pieces: Vec<&str> = deltas
            .iter()
            .filter_map(|d| d["function"]["arguments"].as_str())
            .filter(|a| !a.is_empty())
            .collect();
        assert!(
            pieces.len() >= 3,
            "arguments should be split into 3+ events: {pieces:?}"
        );
        assert_eq!(pieces.concat(), expected.arguments);
        assert!(
            deltas[1..].iter().all(|d| d.get("id").is_none()),
            "only the first chunk carries the id"
        );
    }
    assert_eq!(finish_reasons(&events), ["tool_calls"]);
    let usage = events.last().expect("a usage event");
    assert_eq!(usage["choices"], json!([]));
    assert!(
        usage["usage"]["prompt_tokens"].as_u64().is_some()
            && usage["usage"]["completion_tokens"].as_u64().is_some()
    );
}

#[test]
fn text_reply_streams_several_deltas() {
    let server = Server::start(vec![Reply::text(
        "Hello from the scripted model, ünïcode included.",
    )]);

    let raw = post(&server, "/v1/chat/completions", "{}");

    let events = json_events(&raw.body);
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .filter(|c| !c.is_empty())
        .collect();
    assert!(deltas.len() >= 3, "{deltas:?}");
    assert_eq!(
        deltas.concat(),
        "Hello from the scripted model, ünïcode included."
    );
    assert_eq!(finish_reasons(&events), ["stop"]);
}

#[test]
fn requests_are_recorded_with_headers_and_json_body() {
    let server = Server::start(vec![Reply::text("one"), Reply::text("two")]);
    let body = json!({"model": "test-model", "messages": [{"role": "tool", "tool_call_id": "call_9", "content": "result text"}]});

    post(&server, "/v1/chat/completions", &body.to_string());
    // The same endpoint without the version prefix is served too, with the next reply.
    let second = post(&server, "/chat/completions", r#"{"model":"other"}"#);

    assert!(
        second.body.contains(r#""content":"t"#),
        "second reply comes from the script: {}",
        second.body
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].method, "POST");
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("Authorization"), Some("Bearer k"));
    assert_eq!(requests[0].body, body);
    assert_eq!(requests[0].tool_result("call_9"), "result text");
    assert_eq!(requests[1].path, "/chat/completions");
    assert_eq!(requests[1].body["model"], "other");
    assert_eq!(server.remaining(), 0);
}

#[test]
fn status_reply_is_a_plain_http_error_with_json_body() {
    let server = Server::start(vec![Reply::status(401, "Incorrect API key provided")]);

    let raw = post(&server, "/v1/chat/completions", "{}");

    assert_eq!(raw.status, 401);
    let body: Value = serde_json::from_str(&raw.body).expect("the error body is JSON");
    assert_eq!(body["error"]["message"], "Incorrect API key provided");
}

#[test]
fn raw_tool_call_sends_arguments_verbatim() {
    let server = Server::start(vec![Reply::raw_tool_call("edit_file", "{not json")]);

    let raw = post(&server, "/v1/chat/completions", "{}");

    let deltas = tool_deltas(&json_events(&raw.body), 0);
    let args: String = deltas
        .iter()
        .filter_map(|d| d["function"]["arguments"].as_str())
        .collect();
    assert_eq!(args, "{not json");
}

#[test]
fn sse_raw_sends_exact_bytes() {
    let writes = vec![
        "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n".to_string(),
        "\n: comment\n\ndata: [DONE]\n\n".to_string(),
    ];
    let server = Server::start(vec![Reply::sse_raw(writes.clone())]);

    let raw = post(&server, "/v1/chat/completions", "{}");

    assert_eq!(raw.status, 200);
    assert_eq!(raw.body, writes.concat());
}

#[test]
fn exhausted_script_answers_with_a_placeholder_text() {
    let server = Server::start(vec![]);

    let raw = post(&server, "/v1/chat/completions", "{}");

    let text: String = json_events(&raw.body)
        .iter()
        .filter_map(|e| {
            e["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(text, "(script exhausted)");
}

#[test]
fn keep_alive_connection_serves_several_requests_and_chunked_bodies() {
    let server = Server::start(vec![Reply::text("first"), Reply::status(429, "slow down")]);
    let mut stream = TcpStream::connect(server.addr()).expect("connect to the server");
    let mut reader = BufReader::new(stream.try_clone().expect("clone the stream"));

    // A chunked request body, kept alive.
    stream
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n")
        .expect("send the first request");
    let mut seen = String::new();
    while !seen.ends_with("\r\n0\r\n\r\n") {
        let n = reader
            .read_line(&mut seen)
            .expect("read the first response");
        assert!(n > 0, "the server closed a keep-alive connection: {seen}");
    }
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");

    // The second request on the same connection.
    stream.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}").expect("send the second request");
    let mut rest = String::new();
    reader
        .read_to_string(&mut rest)
        .expect("read the second response");
    assert!(rest.starts_with("HTTP/1.1 429"), "{rest}");

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body, json!({"a": 1}));
}

#[test]
fn unknown_routes_get_404_and_do_not_consume_the_script() {
    let server = Server::start(vec![Reply::text("kept")]);

    let raw = post(&server, "/v1/embeddings", "{}");

    assert_eq!(raw.status, 404);
    assert_eq!(server.remaining(), 1);
    assert_eq!(server.requests()[0].path, "/v1/embeddings");
}
