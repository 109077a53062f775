//! Front-ends that listen: the terminal renderer ([`HumanSink`], live for `ask` and replaying for `show`), the
//! `--json` event stream ([`JsonSink`]), the terminal's approval question ([`TerminalApprover`]), the
//! interactive chat's terminal ([`chat`]: line editor, screen, status line, its sink and approver), the
//! Agent Client Protocol's updates and permission requests ([`acp`]), and the streams other agents' clients
//! read: Codex's exec JSONL for `exec` ([`codex`]) and Claude Code's stream-json for `ask --output-format`
//! ([`stream_json`]).
//!
//! Human output of `ask` goes to stderr (the final answer alone goes to stdout, so `ask ... > answer.md`
//! works); with `--json`, stdout carries one JSON object per event and nothing else (DESIGN section 5).
//! Everything the model or a tool wrote passes [`neutralize`] before it reaches a terminal.

pub mod acp;
pub mod chat;
pub mod codex;
mod human;
mod json;
mod jsonl;
pub mod stream_json;

use std::io::{self, BufRead, IsTerminal, Write};

pub use human::{use_color, HumanSink};
pub use json::JsonSink;

use crate::protocol::{Approval, ApprovalFuture, ApprovalRequest, Approver, Never, Sink};

/// Builds the sink for `ask`: JSON lines, or the live human renderer.
pub fn sink(json: bool) -> Box<dyn Sink> {
    if json {
        Box::new(JsonSink { out: io::stdout() })
    } else {
        Box::new(HumanSink::live())
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

/// Text from the model, a tool or a remote as it may be shown: the one neutraliser,
/// [`crate::protocol::Untrusted`], whose `Display` replaces control characters (escape sequences
/// included) and bidirectional controls with U+FFFD; newlines and tabs stay.
pub fn neutralize(text: &str) -> std::borrow::Cow<'_, str> {
    crate::protocol::neutralize(text)
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
