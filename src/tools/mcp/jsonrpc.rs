//! JSON-RPC 2.0 as MCP uses it: building our requests, notifications and responses, and sorting what a
//! server sends into responses, server requests and notifications.
//!
//! On stdio every message is one line of JSON (a compact serialisation never contains a raw newline, since
//! newlines inside strings are escaped); over Streamable HTTP a message is a POST body or one SSE event.
//! Either way the same [`parse`] applies. A server may send a batch (a JSON array, allowed before
//! 2025-06-18), so [`parse`] always returns a list.

use serde_json::{json, Value};

pub use crate::protocol::rpc_code::METHOD_NOT_FOUND;
pub use crate::protocol::RpcError;

/// One message from the server, sorted.
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    /// The answer to one of our requests; our ids are always numbers.
    Response {
        id: Value,
        result: Result<Value, RpcError>,
    },
    /// The server asks us something (`ping`, `roots/list`, ...); the answer must carry `id` back verbatim.
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
}

/// A request of ours.
pub fn request(id: u64, method: &str, params: Option<Value>) -> Value {
    let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
    if let Some(params) = params {
        message["params"] = params;
    }
    message
}

/// A notification of ours (no id, no answer).
pub fn notification(method: &str, params: Option<Value>) -> Value {
    let mut message = json!({"jsonrpc": "2.0", "method": method});
    if let Some(params) = params {
        message["params"] = params;
    }
    message
}

/// The numeric `id` near the start of a message too big to parse (`{"jsonrpc":"2.0","id":7,"result":...`),
/// so the request it answers can fail at once instead of at its timeout. Only the part before `result` or
/// `error` is looked at: an `"id"` inside the result's text proves nothing.
pub fn leading_id(head: &[u8]) -> Option<u64> {
    let head = &head[..head.len().min(1024)];
    let text = String::from_utf8_lossy(head);
    let end = ["\"result\"", "\"error\""]
        .iter()
        .filter_map(|k| text.find(k))
        .min()
        .unwrap_or(text.len());
    let before = &text[..end];
    let at = before.find("\"id\"")? + 4;
    let rest = before[at..].trim_start().strip_prefix(':')?.trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Our successful answer to a server request.
pub fn response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// Our error answer to a server request.
pub fn error_response(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// One message as a stdio line: compact JSON and `\n`.
pub fn encode_line(message: &Value) -> Vec<u8> {
    let mut line = message.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// Parses one message (or a batch) from its text. Blank text is no message; anything else that is not a
/// JSON-RPC message is an error naming what was wrong, for the server's diagnostics.
pub fn parse(text: &[u8]) -> Result<Vec<Incoming>, String> {
    let text = text.trim_ascii();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let value: Value = serde_json::from_slice(text).map_err(|err| {
        format!(
            "not JSON ({err}): {}",
            String::from_utf8_lossy(&text[..text.len().min(120)])
        )
    })?;
    match value {
        Value::Array(batch) => batch.into_iter().map(sort).collect(),
        single => sort(single).map(|message| vec![message]),
    }
}

/// Sorts one message by the fields it carries: a method makes it a request (with an id) or a notification;
/// otherwise it must be a response with `result` or `error`.
fn sort(mut value: Value) -> Result<Incoming, String> {
    let Some(object) = value.as_object_mut() else {
        return Err(format!("not a JSON-RPC message: {}", short(&value)));
    };
    let id = object.remove("id").filter(|id| !id.is_null());
    let params = object.remove("params").unwrap_or(Value::Null);
    if let Some(method) = object.get("method").and_then(Value::as_str) {
        let method = method.to_string();
        return Ok(match id {
            Some(id) => Incoming::Request { id, method, params },
            None => Incoming::Notification { method, params },
        });
    }
    let Some(id) = id else {
        // An error answer to a message the server could not parse carries a null id.
        if let Some(error) = object.get("error") {
            return Err(format!(
                "the server reported an error: {}",
                RpcError::from_json(error)
            ));
        }
        return Err(format!("a message without method or id: {}", short(&value)));
    };
    let result = match (object.remove("result"), object.remove("error")) {
        (_, Some(error)) => Err(RpcError::from_json(&error)),
        (Some(result), None) => Ok(result),
        (None, None) => return Err(format!("a response without result or error (id {id})")),
    };
    Ok(Incoming::Response { id, result })
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(120) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_messages_are_one_line_each() {
        let message = request(
            7,
            "tools/call",
            Some(json!({"arguments": {"text": "a\nb"}})),
        );
        let line = encode_line(&message);
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
        assert_eq!(line.last(), Some(&b'\n'));
        let back: Value = serde_json::from_slice(&line).expect("valid JSON");
        assert_eq!(back["id"], 7);
        assert_eq!(back["jsonrpc"], "2.0");
        assert_eq!(back["params"]["arguments"]["text"], "a\nb");
        let note = notification("notifications/initialized", None);
        assert!(note.get("id").is_none() && note.get("params").is_none());
    }

    #[test]
    fn sorts_responses_requests_and_notifications() {
        let got = parse(br#"{"result":{"tools":[]},"jsonrpc":"2.0","id":3}"#).expect("parses");
        assert_eq!(
            got,
            vec![Incoming::Response {
                id: json!(3),
                result: Ok(json!({"tools": []}))
            }]
        );
        // A server request may reuse a number we use too: the method tells them apart.
        let got =
            parse(b"{\"method\":\"roots/list\",\"jsonrpc\":\"2.0\",\"id\":0}\r\n").expect("parses");
        assert_eq!(
            got,
            vec![Incoming::Request {
                id: json!(0),
                method: "roots/list".into(),
                params: Value::Null
            }]
        );
        let got = parse(
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#,
        )
        .expect("parses");
        assert!(matches!(&got[0], Incoming::Notification { method, params }
            if method == "notifications/progress" && params["progress"] == 1));
        let got = parse(br#"{"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"bad"}}"#)
            .expect("parses");
        assert!(matches!(&got[0], Incoming::Response { result: Err(e), .. }
            if e.code == -32602 && e.message == "bad"));
    }

    #[test]
    fn batches_blank_lines_and_garbage() {
        let got =
            parse(br#"[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":1,"result":{}}]"#)
                .expect("a batch");
        assert_eq!(got.len(), 2);
        assert_eq!(parse(b"  \r\n").expect("blank"), vec![]);
        let err = parse(b"Starting server on stdio...").unwrap_err();
        assert!(err.starts_with("not JSON"), "{err}");
        let err = parse(
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
        )
        .unwrap_err();
        assert!(err.contains("Parse error"), "{err}");
        assert!(parse(br#"{"jsonrpc":"2.0","id":2}"#).is_err());
        assert!(parse(b"42").is_err());
    }

    #[test]
    fn answers_carry_the_id_back_verbatim() {
        let id = json!("req-9");
        assert_eq!(response(&id, json!({}))["id"], "req-9");
        let err = error_response(&id, METHOD_NOT_FOUND, "no");
        assert_eq!(err["error"]["code"], -32601);
        assert_eq!(err["id"], "req-9");
    }

    #[test]
    fn ids_are_found_before_the_result() {
        assert_eq!(
            leading_id(br#"{"jsonrpc":"2.0","id": 7,"result":{"content"#),
            Some(7)
        );
        assert_eq!(leading_id(br#"{"result":{"id":3}"#), None);
        assert_eq!(leading_id(br#"{"jsonrpc":"2.0","id":"x","result""#), None);
    }
}
