//! `git agent skill distill`: a completed session's transcript turned into a `SKILL.md` by the model (seed
//! article 7.4: experience distilled into reusable skills).
//!
//! The model gets the session as text (prompts, replies, tool calls with their arguments, results cut short,
//! step commits) and the format's rules, and writes one `SKILL.md`. It is checked with the same parser and
//! rules as `skill add` (including "no fields beyond the format's six"); if it breaks one, the model is told
//! which and gets one more try. The caller stores the result as a proposal the user reviews and accepts
//! with `skill add`: nothing the model writes becomes a skill on its own.

use crate::model::retry::RetryPolicy;
use crate::model::{Client, ModelError, Request};
use crate::protocol::{Message, Usage};
use crate::store::skills::format::{self, SkillDoc};

use crate::protocol::Event;

/// The most transcript text sent (the start and, mostly, the end are kept).
const MAX_TRANSCRIPT: usize = 80 * 1024;
/// How much of one tool result the transcript keeps.
const RESULT_HEAD: usize = 600;

/// What the model wrote.
#[derive(Debug)]
pub struct Distilled {
    /// The `SKILL.md` text as written (code fences around it removed).
    pub text: String,
    /// The parsed skill, or the rule it breaks after the second try.
    pub doc: Result<SkillDoc, String>,
    pub usage: Usage,
}

const SYSTEM: &str = "\
You turn the transcript of a coding session that succeeded into a reusable skill in the Agent Skills format: \
one SKILL.md file. Write only the file's content, starting with the line ---, nothing before or after it.

The file: YAML front matter between two --- lines, then a Markdown body.
- name: 1 to 64 characters of a-z, 0-9 and -, not starting or ending with -, no --. It names the kind of task \
(for example fix-flaky-test, add-cli-flag), not this one instance.
- description: at most 1024 characters, in double quotes: what the skill does and when to use it, so an agent \
that sees only the name and the description knows when to load it.
- optionally license, compatibility (what it needs, at most 500 characters) and metadata (a mapping of text \
values). No other fields.
The body: when to use the skill; the steps that worked, concretely (commands, files, functions, as the session \
found them); the checks that proved the work (tests, builds); pitfalls the session ran into and how it got past \
them. Keep what generalises to the next task of this kind, drop what was specific to this one. Never include \
secrets, keys or tokens.";

/// Asks the model for a `SKILL.md` distilled from `events` (a session log), retrying once when the answer
/// breaks the format.
pub async fn distill(
    client: &Client,
    model: &str,
    retry: &RetryPolicy,
    session: &str,
    events: &[serde_json::Value],
) -> Result<Distilled, ModelError> {
    let mut messages = vec![
        Message::System {
            content: SYSTEM.to_owned(),
        },
        Message::User {
            content: format!(
                "The transcript of session {session}, which ended done:\n\n{}",
                transcript(events)
            ),
        },
    ];
    let mut usage = Usage::default();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let request = Request {
            model,
            messages: &messages,
            tools: &[],
            max_tokens: Some(4000),
        };
        let response = client.send(&request, retry).response().await?;
        if let Some(u) = &response.usage {
            usage.add(u);
        }
        let text = unfence(&response.text);
        let doc = checked(&text);
        match doc {
            Err(rule) if attempt == 1 => {
                messages.push(Message::Assistant {
                    content: response.text,
                    tool_calls: Vec::new(),
                    thinking: Vec::new(),
                });
                messages.push(Message::User {
                    content: format!(
                        "That SKILL.md breaks a rule of the format: {rule}. Write the whole file again, fixed."
                    ),
                });
            }
            doc => return Ok(Distilled { text, doc, usage }),
        }
    }
}

/// The rules `skill add` applies, but for the folder (a proposal's folder is named after it).
fn checked(text: &str) -> Result<SkillDoc, String> {
    let doc = format::parse(text).map_err(|e| e.to_string())?;
    doc.check_strict().map_err(|e| e.to_string())?;
    Ok(doc)
}

/// The text without a Markdown code fence around it (models like to add one).
fn unfence(text: &str) -> String {
    let trimmed = text.trim();
    let inner = trimmed
        .strip_prefix("```")
        .and_then(|rest| rest.split_once('\n'))
        .and_then(|(_, rest)| rest.trim_end().strip_suffix("```"));
    let body = inner.unwrap_or(trimmed).trim();
    format!("{body}\n")
}

/// A session log as text for the model: prompts, replies, tool calls and (the start of) their results,
/// steps and turn ends; the explorer's own steps are left out (its summary is the call's result).
pub fn transcript(events: &[serde_json::Value]) -> String {
    let mut out = String::new();
    // The calls' tool names by id: a result names its call only.
    let mut names: Vec<(String, String)> = Vec::new();
    for event in super::journal::events(events) {
        match event {
            Event::Prompt { content } => out.push_str(&format!("\n## User\n{}\n", content.trim())),
            Event::Reply {
                content,
                tool_calls,
                ..
            } => {
                if !content.trim().is_empty() {
                    out.push_str(&format!("\n## Assistant\n{}\n", content.trim()));
                }
                for call in tool_calls {
                    let args = crate::tools::short(call.arguments.trim(), 400);
                    out.push_str(&format!("-> {} {args}\n", call.name));
                    names.push((call.id, call.name));
                }
            }
            Event::ToolResult {
                id,
                ok,
                summary,
                output,
            } => {
                let name = names
                    .iter()
                    .find(|(called, _)| *called == id)
                    .map_or("?", |(_, name)| name.as_str());
                let head = head(&output, RESULT_HEAD);
                let mark = if ok { "ok" } else { "failed" };
                out.push_str(&format!("<- {name} {mark}: {summary}\n{head}\n"));
            }
            Event::Step {
                step,
                commit,
                files,
            } => {
                let files: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
                out.push_str(&format!(
                    "[{}]\n",
                    super::journal::step_line(step, &commit, &files)
                ));
            }
            Event::TurnEnd { status, .. } => out.push_str(&format!("[turn ended: {status}]\n")),
            _ => {}
        }
    }
    if out.len() <= MAX_TRANSCRIPT {
        return out;
    }
    let start = floor(&out, MAX_TRANSCRIPT / 4);
    let end = ceil(&out, out.len() - MAX_TRANSCRIPT * 3 / 4);
    format!(
        "{}\n[... {} bytes of the middle left out ...]\n{}",
        &out[..start],
        end - start,
        &out[end..]
    )
}

fn head(text: &str, max: usize) -> String {
    let text = text.trim_end();
    if text.len() <= max {
        return text.to_owned();
    }
    format!("{} [...]", &text[..floor(text, max)])
}

fn floor(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    // Lines in the shapes logs had before every fact was stored as a protocol event, which still read.
    use serde_json::json;

    #[test]
    fn the_transcript_has_the_story_and_fences_come_off() {
        let events = [
            json!({"type": "user", "content": "fix the test"}),
            json!({"type": "assistant", "content": "Looking.", "tool_calls": [
                {"id": "1", "name": "run", "arguments": r#"{"command":"cargo test"}"#}
            ]}),
            json!({"type": "tool_result", "tool_call_id": "1", "name": "run", "ok": false,
                "summary": "exit 101", "content": "x".repeat(2000)}),
            json!({"type": "end", "status": "done", "answer": "fixed"}),
        ];
        let text = transcript(&events);
        assert!(text.contains("## User\nfix the test"));
        assert!(text.contains("-> run {\"command\":\"cargo test\"}"));
        assert!(text.contains("<- run failed: exit 101"));
        assert!(
            text.contains("[...]") && text.len() < 1000,
            "results are cut"
        );
        assert!(text.contains("[turn ended: done]"));
        assert_eq!(
            unfence("```markdown\n---\nname: a\n---\n```\n"),
            "---\nname: a\n---\n"
        );
        assert_eq!(unfence("---\nx\n"), "---\nx\n");
    }

    /// A result recorded as the screen showed it (`id`, `output`, no tool name) is named by its call.
    #[test]
    fn a_result_recorded_as_shown_is_named_by_its_call() {
        let call = json!({"type": "assistant", "content": "", "tool_calls": [
            {"id": "7", "name": "search", "arguments": "{}"}
        ]});
        let shown = crate::protocol::Event::ToolResult {
            id: "7".into(),
            ok: true,
            summary: "2 matches".into(),
            output: "a.rs:1".into(),
        };
        let events = [call, serde_json::to_value(&shown).unwrap_or_default()];
        assert!(transcript(&events).contains("<- search ok: 2 matches\na.rs:1"));
    }
}
