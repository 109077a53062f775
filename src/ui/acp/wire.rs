//! JSON-RPC 2.0 over newline-delimited stdio, the way ACP frames it: one message a line, UTF-8, no embedded
//! newlines (serde_json escapes them).
//!
//! One writer: every message of the process goes through [`Peer`] into one channel, drained by one thread
//! that owns the output, so lines never interleave and a client that reads slowly blocks that thread only,
//! never the runtime. Requests to the client (`session/request_permission`) get ids of our own and a
//! oneshot channel each; [`Peer::resolve`] hands the client's answer to whoever asked.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::oneshot;

pub use crate::protocol::rpc_code as code;
pub use crate::protocol::RpcError;

/// What one line from the client is.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// The answer to one of our requests.
    Response {
        id: Value,
        result: Result<Value, RpcError>,
    },
    /// Not a JSON-RPC message; `id` is the request's when one could be read (else the answer goes to `null`).
    Invalid {
        id: Value,
        error: RpcError,
    },
}

impl Incoming {
    /// Reads one line.
    pub fn parse(line: &str) -> Incoming {
        let value: Value = match serde_json::from_str(line) {
            Ok(value) => value,
            Err(err) => {
                return Incoming::Invalid {
                    id: Value::Null,
                    error: RpcError::new(code::PARSE_ERROR, format!("not JSON: {err}")),
                }
            }
        };
        let id = value.get("id").cloned();
        let method = value.get("method").and_then(Value::as_str);
        let params = value.get("params").cloned().unwrap_or(Value::Null);
        if value.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Incoming::Invalid {
                id: id.unwrap_or(Value::Null),
                error: RpcError::new(
                    code::INVALID_REQUEST,
                    "not JSON-RPC 2.0 (\"jsonrpc\": \"2.0\" is missing)",
                ),
            };
        }
        match (method, id) {
            (Some(method), Some(id)) => Incoming::Request {
                id,
                method: method.to_owned(),
                params,
            },
            (Some(method), None) => Incoming::Notification {
                method: method.to_owned(),
                params,
            },
            (None, Some(id)) if value.get("result").is_some() || value.get("error").is_some() => {
                let result = match value.get("error") {
                    Some(error) => Err(RpcError::from_json(error)),
                    None => Ok(value.get("result").cloned().unwrap_or(Value::Null)),
                };
                Incoming::Response { id, result }
            }
            (None, id) => Incoming::Invalid {
                id: id.unwrap_or(Value::Null),
                error: RpcError::new(
                    code::INVALID_REQUEST,
                    "neither a request, a notification nor a response",
                ),
            },
        }
    }
}

/// Answers waited for, by the id we gave the request.
type Pending = HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>;

/// The one way out to the client; clones share the writer and the table of pending requests.
#[derive(Clone)]
pub struct Peer {
    out: mpsc::Sender<String>,
    pending: Arc<Mutex<Pending>>,
    next_id: Arc<AtomicU64>,
}

impl Peer {
    /// A peer writing to `output` from a thread of its own, which ends when every clone is dropped or the
    /// client stops reading (then messages are dropped: the client is gone).
    pub fn spawn(output: impl Write + Send + 'static) -> (Peer, std::thread::JoinHandle<()>) {
        let (out, lines) = mpsc::channel::<String>();
        let writer = std::thread::spawn(move || {
            let mut output = std::io::BufWriter::new(output);
            let mut next = lines.recv();
            while let Ok(line) = next {
                // The empty line is `finish`: everything sent before it is out.
                if line.is_empty() {
                    let _ = output.flush();
                    return;
                }
                if output.write_all(line.as_bytes()).is_err() {
                    return;
                }
                // Queued lines go out in one write; the client sees each as soon as it is flushed.
                next = match lines.try_recv() {
                    Ok(line) => Ok(line),
                    Err(_) if output.flush().is_err() => return,
                    Err(_) => lines.recv(),
                };
            }
        });
        let peer = Peer {
            out,
            pending: Arc::new(Mutex::new(HashMap::new())),
            next_id: Arc::new(AtomicU64::new(0)),
        };
        (peer, writer)
    }

    fn send(&self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        // The writer is gone only when the client stopped reading: nobody is left to tell.
        let _ = self.out.send(line);
    }

    pub fn notify(&self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    pub fn respond(&self, id: &Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    pub fn fail(&self, id: &Value, error: &RpcError) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()}));
    }

    /// Sends a request; the receiver gets the client's answer (or is dropped if the connection ends first).
    pub fn request(
        &self,
        method: &str,
        params: Value,
    ) -> oneshot::Receiver<Result<Value, RpcError>> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        rx
    }

    /// Hands the client's answer to the request it answers; false when no request of ours has that id.
    pub fn resolve(&self, id: &Value, result: Result<Value, RpcError>) -> bool {
        let Some(tx) = id.as_u64().and_then(|id| lock(&self.pending).remove(&id)) else {
            return false;
        };
        // The asker may have stopped waiting (the turn was cancelled meanwhile).
        let _ = tx.send(result);
        true
    }

    /// Ends the writer once everything sent so far is written (the process is about to exit).
    pub fn finish(&self) {
        let _ = self.out.send(String::new());
    }

    /// Drops every pending request: the client is gone, nobody will answer.
    pub fn abandon(&self) {
        lock(&self.pending).clear();
    }
}

/// A poisoned lock only means a thread panicked mid-insert; the table stays usable.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_as_jsonrpc_messages() {
        assert_eq!(
            Incoming::parse(
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#
            ),
            Incoming::Request {
                id: json!(1),
                method: "initialize".into(),
                params: json!({"protocolVersion": 1})
            }
        );
        assert!(matches!(
            Incoming::parse(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"a"}}"#),
            Incoming::Notification { method, .. } if method == "session/cancel"
        ));
        assert_eq!(
            Incoming::parse(r#"{"jsonrpc":"2.0","id":"x","error":{"code":-32603,"message":"no"}}"#),
            Incoming::Response {
                id: json!("x"),
                result: Err(RpcError::new(-32603, "no"))
            }
        );
        assert!(matches!(
            Incoming::parse("{not json"),
            Incoming::Invalid { id: Value::Null, error } if error.code == code::PARSE_ERROR
        ));
        assert!(matches!(
            Incoming::parse(r#"{"id":3,"method":"x"}"#),
            Incoming::Invalid { id, error } if id == json!(3) && error.code == code::INVALID_REQUEST
        ));
        assert!(matches!(
            Incoming::parse(r#"{"jsonrpc":"2.0","id":4}"#),
            Incoming::Invalid { error, .. } if error.code == code::INVALID_REQUEST
        ));
    }

    #[test]
    fn answers_reach_the_request_they_answer_and_lines_stay_whole() {
        let (out_tx, out_rx) = std::sync::mpsc::channel::<Vec<u8>>();
        struct Chan(std::sync::mpsc::Sender<Vec<u8>>);
        impl Write for Chan {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                let _ = self.0.send(buf.to_vec());
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let (peer, writer) = Peer::spawn(Chan(out_tx));
        let mut first = peer.request("session/request_permission", json!({"a": "line\nbreak"}));
        let second = peer.request("session/request_permission", json!({}));
        peer.notify("session/update", json!({}));
        assert!(peer.resolve(&json!(1), Ok(json!({"outcome": {"outcome": "cancelled"}}))));
        assert!(!peer.resolve(&json!(1), Ok(json!(null))), "answered once");
        assert!(
            !peer.resolve(&json!("1"), Ok(json!(null))),
            "not an id of ours"
        );
        assert!(first.try_recv().is_err(), "request 0 is still waiting");
        let answer = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(second)
            .unwrap();
        assert_eq!(answer, Ok(json!({"outcome": {"outcome": "cancelled"}})));
        drop(peer);
        writer.join().unwrap();
        let text = String::from_utf8(out_rx.try_iter().flatten().collect()).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(lines[0]["id"], 0);
        assert_eq!(lines[0]["params"]["a"], "line\nbreak");
        assert_eq!(lines[2]["method"], "session/update");
        assert!(lines.iter().all(|l| l["jsonrpc"] == "2.0"));
    }
}
