//! The `--json` event stream: one JSON object per event on stdout and nothing else (DESIGN section 5).

use std::io::{self, Write};

use serde_json::json;

use crate::protocol::{Event, Sink};

/// One JSON object per line on stdout.
pub struct JsonSink {
    pub(super) out: io::Stdout,
}

impl Sink for JsonSink {
    fn emit(&mut self, event: &Event<'_>) {
        let Some(value) = value(event) else {
            return;
        };
        // Model and tool text may hold C1 and bidi controls, which serde_json writes raw; escaped, the line still
        // decodes to the same text but cannot drive the terminal of whoever watches the stream.
        let line = crate::protocol::json_for_terminal(value.to_string());
        let mut out = self.out.lock();
        // A closed stdout (e.g. `| head`) must not kill the session; the work is in git either way.
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

/// The JSON object of an event, `None` for events outside the contract.
fn value(event: &Event<'_>) -> Option<serde_json::Value> {
    let value = match event {
        Event::Session {
            id,
            branch,
            base,
            model,
        } => {
            json!({"type": "session", "id": id, "branch": branch, "base": base, "model": model})
        }
        Event::Text(delta) => json!({"type": "text", "delta": delta}),
        // Reasoning is not the answer and not in the JSON contract (DESIGN section 5).
        Event::Reasoning(_) => return None,
        Event::ToolCall {
            id, name, input, ..
        } => {
            json!({"type": "tool_call", "id": id, "name": name, "input": input})
        }
        Event::ToolResult {
            id, ok, summary, ..
        } => {
            json!({"type": "tool_result", "id": id, "ok": ok, "summary": summary})
        }
        Event::Permission {
            id,
            tool,
            decision,
            rule,
            reason,
        } => {
            json!({"type": "permission", "id": id, "tool": tool, "decision": decision, "rule": rule, "reason": reason})
        }
        Event::Step {
            commit,
            step,
            files,
        } => {
            json!({"type": "step", "commit": commit, "step": step, "files": files})
        }
        // Costs in USD; null when the model has no price (never a made-up number).
        Event::RequestUsage {
            request,
            usage: u,
            cost,
            session_cost,
        } => json!({
            "type": "usage",
            "scope": "request",
            "request": request,
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cached_tokens": u.cached_tokens,
            "cost_usd": cost,
            "session_cost_usd": session_cost,
        }),
        Event::Usage(u, cost) => json!({
            "type": "usage",
            "scope": "session",
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cached_tokens": u.cached_tokens,
            "cost_usd": cost,
        }),
        Event::Done {
            status,
            answer,
            exit_code,
        } => {
            json!({"type": "done", "status": status.as_str(), "answer": answer, "exit_code": exit_code})
        }
        Event::Error(message) => json!({"type": "error", "message": message}),
        Event::Notice { topic, message } => {
            // Diagnostics go to stderr as without --json; scripts get the event as well.
            eprintln!("warning: {}", crate::protocol::neutralize(message));
            json!({"type": "notice", "topic": topic, "message": message})
        }
        Event::Check {
            attempt,
            command,
            tree,
            passed,
            end,
            code,
            duration_ms,
            output,
        } => json!({
            "type": "check",
            "attempt": attempt,
            "command": command,
            "tree": tree,
            "passed": passed,
            "end": end,
            "exit_code": code,
            "duration_ms": duration_ms,
            "output": output,
        }),
        Event::Fixed {
            passed,
            branch,
            attempts,
            steps,
            findings,
        } => json!({
            "type": "fix",
            "passed": passed,
            "branch": branch,
            "attempts": attempts,
            "steps": steps,
            "findings": findings,
        }),
        // The result says all of it; a script has nothing to do while the check runs.
        Event::CheckStarted { .. } => return None,
        Event::Progress { what, done, total } => {
            json!({"type": "progress", "what": what, "done": done, "total": total})
        }
        Event::Mcp {
            connected,
            total,
            servers,
            untrusted,
        } => {
            let mut value =
                json!({"type": "mcp", "connected": connected, "total": total, "servers": servers});
            if let Some(notice) = untrusted {
                value["untrusted"] = json!(notice);
            }
            value
        }
        Event::Memory { action, entries } => {
            json!({"type": "memory", "action": action, "entries": entries})
        }
        Event::Image {
            source,
            media_type,
            bytes,
            call,
        } => {
            json!({"type": "image", "source": source, "media_type": media_type, "bytes": bytes, "call": call})
        }
        Event::WebResults { query, results } => {
            json!({"type": "web_results", "query": query, "results": results})
        }
        // A subagent's event is the event itself, marked with the call that started the subagent.
        Event::Nested { parent, event } => {
            let mut value = value(event)?;
            value["parent"] = json!(parent);
            value
        }
        // Not part of the JSON contract (DESIGN section 5): scripts see the outcome, not the retries; the
        // summary repeats `usage` and `done` for a person.
        Event::Warning(_) | Event::Summary { .. } => return None,
        // For editors (ACP), not in the contract either.
        Event::Diff { .. } => return None,
        // A transcript's events: `ask` does not emit them, and they are not in the contract either.
        Event::Prompt(_)
        | Event::Context { .. }
        | Event::Plan { .. }
        | Event::Compaction { .. }
        | Event::TurnEnd(_)
        | Event::Resumed
        | Event::Undone { .. }
        | Event::Discarded => return None,
    };
    Some(value)
}
