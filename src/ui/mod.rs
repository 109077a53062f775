//! Terminal rendering and the `--json` event stream. The agent reports [`Event`]s; a [`Sink`] shows them.
//!
//! Human output goes to stderr (the final answer alone goes to stdout, so `ask ... > answer.md` works); with
//! `--json`, stdout carries one JSON object per event and nothing else (DESIGN section 5).

use std::io::{self, BufRead, IsTerminal, Write};

use serde_json::json;

use crate::protocol::{
    Approval, ApprovalFuture, ApprovalRequest, Approver, Event, Never, Sink, Usage,
};

/// Builds the sink for `ask`: JSON lines, or the human renderer.
pub fn sink(json: bool) -> Box<dyn Sink> {
    if json {
        Box::new(JsonSink { out: io::stdout() })
    } else {
        Box::new(HumanSink::new())
    }
}

/// Builds the approver for `ask`: a y/n/always question on the terminal when stdin and stderr are terminals
/// and neither `--yes` nor `--json` was given, else [`Never`] (refuse what would need asking, and say so).
pub fn approver(yes: bool, json: bool) -> Box<dyn Approver> {
    if !yes && !json && io::stdin().is_terminal() && io::stderr().is_terminal() {
        Box::new(TerminalApprover)
    } else {
        Box::new(Never)
    }
}

/// Asks on the terminal: the reason, the command, `[y]es / [n]o / [a]lways`. Anything else is a no.
pub struct TerminalApprover;

impl Approver for TerminalApprover {
    fn approve<'a>(&'a mut self, request: &'a ApprovalRequest) -> ApprovalFuture<'a> {
        let question = format!(
            "\n{}\n  {}\nrun it? [y]es / [n]o / [a]lways: ",
            neutralize(&request.reason),
            neutralize(&request.subject)
        );
        Box::pin(async move {
            let mut err = io::stderr();
            let _ = write!(err, "{question}");
            let _ = err.flush();
            // Off the runtime's thread, so Ctrl-C (which the agent selects against) still gets through.
            let line = tokio::task::spawn_blocking(|| {
                let mut line = String::new();
                io::stdin().lock().read_line(&mut line).map(|_| line)
            })
            .await;
            match line {
                Ok(Ok(line)) => parse_answer(&line),
                _ => Approval::Reject,
            }
        })
    }
}

fn parse_answer(line: &str) -> Approval {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Approval::Once,
        "a" | "always" => Approval::Always,
        _ => Approval::Reject,
    }
}

/// One JSON object per line on stdout.
pub struct JsonSink {
    out: io::Stdout,
}

impl Sink for JsonSink {
    fn emit(&mut self, event: &Event<'_>) {
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
            Event::Reasoning(_) => return,
            Event::ToolCall {
                id, name, input, ..
            } => {
                json!({"type": "tool_call", "id": id, "name": name, "input": input})
            }
            Event::ToolResult { id, ok, summary } => {
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
            Event::RequestUsage { request, usage: u } => json!({
                "type": "usage",
                "scope": "request",
                "request": request,
                "input_tokens": u.input_tokens,
                "output_tokens": u.output_tokens,
                "cached_tokens": u.cached_tokens,
            }),
            Event::Usage(u) => json!({
                "type": "usage",
                "scope": "session",
                "input_tokens": u.input_tokens,
                "output_tokens": u.output_tokens,
                "cached_tokens": u.cached_tokens,
            }),
            Event::Done {
                status,
                answer,
                exit_code,
            } => {
                json!({"type": "done", "status": status.as_str(), "answer": answer, "exit_code": exit_code})
            }
            Event::Error(message) => json!({"type": "error", "message": message}),
            // Not part of the JSON contract (DESIGN section 5): scripts see the outcome, not the retries; the
            // summary repeats `usage` and `done` for a person.
            Event::Warning(_) | Event::Summary { .. } => return,
        };
        let mut out = self.out.lock();
        // A closed stdout (e.g. `| head`) must not kill the session; the work is in git either way.
        let _ = writeln!(out, "{value}");
        let _ = out.flush();
    }
}

/// Streams text and one line per tool call to stderr; colours only when stderr is a terminal.
pub struct HumanSink {
    err: io::Stderr,
    color: bool,
    /// True while the cursor is in the middle of streamed text (so the next tool line starts on a new line).
    mid_line: bool,
    answer_on_stdout: bool,
    /// Characters of reasoning in the current run, shown collapsed as one line.
    thinking: usize,
}

impl HumanSink {
    fn new() -> Self {
        let err = io::stderr();
        let color = err.is_terminal() && std::env::var_os("NO_COLOR").is_none();
        // When stdout is the same terminal, the streamed text already showed the answer: do not print it twice.
        let answer_on_stdout = !(io::stdout().is_terminal() && err.is_terminal());
        HumanSink {
            err,
            color,
            mid_line: false,
            answer_on_stdout,
            thinking: 0,
        }
    }

    fn thinking_line(&self) -> String {
        self.paint("2", &format!("thinking… ({} chars)", self.thinking))
    }

    /// Shows reasoning as one dim line that counts up on a terminal, so it never mixes with the answer.
    fn reasoning(&mut self, text: &str) {
        let first = self.thinking == 0;
        self.thinking += text.chars().count();
        if !self.color {
            return;
        }
        let line = self.thinking_line();
        let mut err = self.err.lock();
        if first && self.mid_line {
            let _ = writeln!(err);
        }
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
        self.mid_line = false;
    }

    /// Ends the reasoning line before anything else is shown.
    fn end_reasoning(&mut self) {
        if self.thinking == 0 {
            return;
        }
        let line = self.thinking_line();
        let mut err = self.err.lock();
        if self.color {
            let _ = writeln!(err);
        } else {
            if self.mid_line {
                let _ = writeln!(err);
            }
            let _ = writeln!(err, "{line}");
        }
        self.mid_line = false;
        self.thinking = 0;
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    fn line(&mut self, text: &str) {
        let mut err = self.err.lock();
        if self.mid_line {
            let _ = writeln!(err);
        }
        let _ = writeln!(err, "{text}");
        self.mid_line = false;
    }
}

impl Sink for HumanSink {
    fn emit(&mut self, event: &Event<'_>) {
        if let Event::Reasoning(text) = event {
            self.reasoning(text);
            return;
        }
        if !matches!(event, Event::RequestUsage { .. } | Event::Usage(_)) {
            self.end_reasoning();
        }
        match event {
            Event::Session {
                id, branch, model, ..
            } => {
                let text = format!(
                    "session {id} on {} ({model})",
                    branch.trim_start_matches("refs/heads/")
                );
                let painted = self.paint("2", &text);
                self.line(&painted);
            }
            Event::Text(delta) => {
                let clean = neutralize(delta);
                let mut err = self.err.lock();
                let _ = err.write_all(clean.as_bytes());
                let _ = err.flush();
                self.mid_line = !clean.ends_with('\n');
            }
            Event::Reasoning(_) | Event::RequestUsage { .. } => {}
            Event::ToolCall { label, .. } => {
                let bullet = self.paint("36", "●");
                self.line(&format!("{bullet} {}", neutralize(label)));
            }
            // Refusals show up as the tool result; the terminal only names the rule.
            Event::Permission { decision, rule, .. } => {
                if *decision != "allow" {
                    let text = format!("  ⎿ {decision} ({})", neutralize(rule));
                    let painted = self.paint("33", &text);
                    self.line(&painted);
                }
            }
            Event::ToolResult { ok, summary, .. } => {
                let text = format!("  ⎿ {}", neutralize(summary));
                let painted = if *ok {
                    self.paint("2", &text)
                } else {
                    self.paint("31", &text)
                };
                self.line(&painted);
            }
            Event::Step {
                commit,
                step,
                files,
            } => {
                let short = &commit[..commit.len().min(7)];
                let text = format!(
                    "  ⎿ step {step}: {short} ({} file{})",
                    files.len(),
                    plural(files.len())
                );
                let painted = self.paint("32", &text);
                self.line(&painted);
            }
            Event::Usage(_) => {}
            Event::Summary {
                branch,
                steps,
                base,
                usage,
                requests,
            } => {
                let text = format!(
                    "\n{branch}: {steps} step{} · {}\nreview: git log -p {base}..{branch}",
                    plural(*steps as usize),
                    usage_line(usage, *requests),
                );
                self.line(&text);
            }
            Event::Done { answer, .. } => {
                if self.mid_line {
                    self.line("");
                }
                if self.answer_on_stdout && !answer.is_empty() {
                    let mut out = io::stdout().lock();
                    // Raw into a file or pipe (`> answer.md`), neutralised on a terminal.
                    let answer = if out.is_terminal() {
                        neutralize(answer)
                    } else {
                        (*answer).into()
                    };
                    let _ = writeln!(out, "{}", answer.trim_end());
                    let _ = out.flush();
                }
            }
            Event::Warning(message) => {
                let text = self.paint("33", &format!("warning: {}", neutralize(message)));
                self.line(&text);
            }
            Event::Error(message) => {
                let text = format!("error: {}", neutralize(message));
                self.line(&text);
            }
        }
    }
}

/// Writes an informational line to stderr (not part of the JSON stream).
pub fn note(json: bool, text: &str) {
    if !json {
        let _ = writeln!(io::stderr(), "{text}");
    }
}

/// "tokens 5120 in (4096 cached), 312 out over 3 requests", for the end of a session.
fn usage_line(usage: &Usage, requests: u32) -> String {
    let cached = if usage.cached_tokens > 0 {
        format!(" ({} cached)", usage.cached_tokens)
    } else {
        String::new()
    };
    format!(
        "tokens {} in{cached}, {} out over {requests} request{}",
        usage.input_tokens,
        usage.output_tokens,
        if requests == 1 { "" } else { "s" }
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Replaces control characters (ANSI escapes included, C1 controls too) and bidirectional overrides with
/// U+FFFD, so text from the model or a tool cannot drive the terminal (retitle it, clear it, hide text) or
/// make displayed text read differently from what it is ("Trojan Source"); newlines and tabs stay.
pub fn neutralize(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return std::borrow::Cow::Borrowed(text);
    }
    text.chars()
        .map(|c| if is_unsafe(c) { '\u{fffd}' } else { c })
        .collect::<String>()
        .into()
}

fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::neutralize;

    #[test]
    fn escape_sequences_are_neutralized() {
        assert_eq!(neutralize("a\x1b[31mb\tc\n"), "a\u{fffd}[31mb\tc\n");
        assert!(matches!(neutralize("plain"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(neutralize("a\u{9b}31mb"), "a\u{fffd}31mb");
        assert_eq!(neutralize("x\u{202e}y\r"), "x\u{fffd}y\u{fffd}");
        assert_eq!(neutralize("naïve — ok"), "naïve — ok");
    }
}
