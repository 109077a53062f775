//! `ask --output-format stream-json` (and `json`): Claude Code's print-mode output, for scripts and
//! orchestrators written against `claude -p --output-format stream-json`.
//!
//! The stream: a `system` message (`subtype: init`, with the session id, model and working directory) once
//! the model first answers, then `assistant` messages with one content block each (`text`, `thinking`,
//! `tool_use` with our tool's name and input), a `user` message with a `tool_result` block after each call,
//! and a final `result` (`subtype` `success`, `error_max_turns` or `error_during_execution`, `result` the
//! answer, `session_id`, `num_turns`, `duration_ms`, `total_cost_usd`, `usage`). `json` prints the `result`
//! alone. An error before the session started is a `result` with `is_error` and no session id, and an
//! `error:` line on stderr.

use std::time::Instant;

use serde_json::{json, Value};

use crate::protocol::{Event, Sink, Status, Usage};

pub use super::jsonl::Out;

/// Renders a session's events as Claude Code's stream-json; see the module docs.
pub struct StreamJsonSink {
    out: Out,
    /// False for `--output-format json`: the `result` line only.
    stream: bool,
    cwd: String,
    started: Instant,
    session: Option<String>,
    model: String,
    text: String,
    thinking: String,
    next_message: u64,
    requests: u32,
    usage: Usage,
    cost: Option<f64>,
    /// The agent's reason for stopping, said before `done`.
    failure: Option<String>,
    ended: bool,
}

impl StreamJsonSink {
    /// A sink writing to `out`; `stream` false prints the final `result` only; `cwd` goes into `init`.
    pub fn new(out: Out, stream: bool, cwd: &std::path::Path) -> StreamJsonSink {
        StreamJsonSink {
            out,
            stream,
            cwd: cwd.display().to_string(),
            started: Instant::now(),
            session: None,
            model: String::new(),
            text: String::new(),
            thinking: String::new(),
            next_message: 0,
            requests: 0,
            usage: Usage::default(),
            cost: None,
            failure: None,
            ended: false,
        }
    }

    /// A sink on stdout.
    pub fn stdout(stream: bool, cwd: &std::path::Path) -> StreamJsonSink {
        StreamJsonSink::new(Box::new(std::io::stdout()), stream, cwd)
    }

    fn write(&mut self, value: &Value) {
        super::jsonl::write_line(&mut self.out, value);
    }

    fn streamed(&mut self, value: &Value) {
        if self.stream {
            self.write(value);
        }
    }

    fn init(&mut self, id: &str, model: &str) {
        if self.session.is_some() {
            return;
        }
        self.session = Some(id.to_owned());
        self.model = model.to_owned();
        let init = json!({"type": "system", "subtype": "init", "cwd": self.cwd, "session_id": id,
                          "model": model, "permissionMode": "default", "apiKeySource": "none"});
        self.streamed(&init);
    }

    /// One assistant message holding `block`.
    fn assistant(&mut self, block: Value) {
        let id = format!("msg_{}", self.next_message);
        self.next_message += 1;
        let message = json!({"type": "assistant", "message": {
            "id": id, "type": "message", "role": "assistant", "model": self.model,
            "content": [block], "stop_reason": null, "stop_sequence": null,
        }, "parent_tool_use_id": null, "session_id": self.session});
        self.streamed(&message);
    }

    fn flush(&mut self) {
        let thinking = std::mem::take(&mut self.thinking);
        if !thinking.trim().is_empty() {
            self.assistant(json!({"type": "thinking", "thinking": thinking}));
        }
        let text = std::mem::take(&mut self.text);
        if !text.trim().is_empty() {
            self.assistant(json!({"type": "text", "text": text}));
        }
    }

    fn tool_result(&mut self, id: &str, ok: bool, output: &str) {
        let message = json!({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": output, "is_error": !ok}
        ]}, "parent_tool_use_id": null, "session_id": self.session});
        self.streamed(&message);
    }

    fn result(&mut self, status: Option<&Status>, answer: &str) {
        if self.ended {
            return;
        }
        self.ended = true;
        self.flush();
        let subtype = match status {
            Some(Status::Done) => "success",
            Some(Status::MaxSteps) => "error_max_turns",
            _ => "error_during_execution",
        };
        let is_error = status != Some(&Status::Done);
        let result = match (&self.failure, is_error) {
            (Some(reason), true) if answer.trim().is_empty() => reason.clone(),
            _ => answer.to_owned(),
        };
        let u = self.usage;
        let elapsed = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let value = json!({
            "type": "result", "subtype": subtype, "is_error": is_error,
            "duration_ms": elapsed, "num_turns": self.requests, "result": result,
            "session_id": self.session, "total_cost_usd": self.cost,
            "usage": {"input_tokens": u.input_tokens, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": u.cached_tokens, "output_tokens": u.output_tokens},
        });
        self.write(&value);
    }

    fn error(&mut self, message: &str) {
        let mut lines = message.lines();
        if let Some(first) = lines.next() {
            eprintln!("error: {}", crate::protocol::neutralize(first));
        }
        for line in lines {
            eprintln!("{}", crate::protocol::neutralize(line));
        }
        if self.session.is_some() && !self.ended {
            // The agent explains a stop before `done`, whose result carries it.
            self.failure.get_or_insert_with(|| message.to_owned());
        } else {
            self.result(None, message);
        }
    }
}

/// A session that a host error cut short (a model error mid-turn: no `done` follows the `error`) still ends
/// with its `result`, when the command lets go of its sink.
impl Drop for StreamJsonSink {
    fn drop(&mut self) {
        if self.session.is_some() && !self.ended {
            let reason = self.failure.take().unwrap_or_default();
            self.result(None, &reason);
        }
    }
}

impl Sink for StreamJsonSink {
    fn emit(&mut self, event: &Event) {
        match event {
            Event::Session { id, model, .. } => self.init(id, model),
            Event::Text { delta } => {
                if !self.thinking.is_empty() {
                    self.flush();
                }
                self.text.push_str(delta);
            }
            Event::Reasoning { delta } => self.thinking.push_str(delta),
            Event::ToolCall {
                id, name, input, ..
            } => {
                self.flush();
                self.assistant(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
            }
            Event::ToolResult { id, ok, output, .. } => self.tool_result(id, *ok, output),
            Event::RequestUsage { .. } => self.requests += 1,
            Event::Usage { usage, cost } => {
                self.usage = *usage;
                self.cost = *cost;
            }
            Event::Done { status, answer, .. } => self.result(Some(status), answer),
            Event::Error { message } => self.error(message),
            Event::Warning { message } | Event::Notice { message, .. } => {
                eprintln!("warning: {}", crate::protocol::neutralize(message));
            }
            // For people (summary, progress), editors (diffs), the log, or inside a subagent.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::jsonl::testing::{lines, Buffer};

    #[test]
    fn json_prints_the_result_alone_and_an_early_error_is_a_result() {
        let buffer = Buffer::default();
        let mut sink =
            StreamJsonSink::new(Box::new(buffer.clone()), false, std::path::Path::new("/r"));
        sink.emit(&Event::Session {
            id: "abc123".into(),
            branch: "agent/abc123".into(),
            base: "0".into(),
            model: "openai/m".into(),
        });
        sink.emit(&Event::Text { delta: "hi".into() });
        sink.emit(&Event::Done {
            status: Status::Done,
            answer: "hi".into(),
            exit_code: 0,
        });
        let out = lines(&buffer);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0]["subtype"], "success");
        assert_eq!(out[0]["session_id"], "abc123");

        let buffer = Buffer::default();
        let mut sink =
            StreamJsonSink::new(Box::new(buffer.clone()), true, std::path::Path::new("/r"));
        sink.emit(&Event::Error {
            message: "no model endpoint configured".into(),
        });
        let out = lines(&buffer);
        assert_eq!(out[0]["type"], "result");
        assert_eq!(out[0]["is_error"], true);
        assert_eq!(out[0]["session_id"], Value::Null);
    }
}
