//! What the agent records in the session log, and how a conversation is rebuilt from it for `--resume`.
//!
//! The store keeps opaque JSON lines ([`crate::store::SessionLog`]); this module owns their meaning. The
//! system prompt is not recorded: it names the checkout's absolute path, and a session pushed to another
//! machine must still make sense there, so it is rebuilt on resume. Paths in events are repository-relative.

use serde::{Deserialize, Serialize};

use super::plan::{Item as PlanItem, Plan};
use crate::protocol::{self, MemoryItem, Message, Sink, ThinkingBlock, ToolCall};
use crate::store::{SessionLog, StoreError};

/// One event of a session, as stored (each line also carries `seq` and `ts`, added by the store).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A prompt from the user (the first one, or one given with `--resume`).
    User { content: String },
    /// A model reply: its text and the tool calls it asked for.
    Assistant {
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        thinking: Vec<ThinkingBlock>,
    },
    /// The result of one tool call, as the model saw it. The lines [`record()`] writes name the call `id`
    /// and the content `output`, and leave the tool's name to the call.
    ToolResult {
        #[serde(alias = "id")]
        tool_call_id: String,
        #[serde(default)]
        name: String,
        ok: bool,
        summary: String,
        #[serde(alias = "output")]
        content: String,
    },
    /// A step commit on the session's branch.
    Step {
        step: u32,
        commit: String,
        files: Vec<String>,
    },
    /// What the language servers found new after the call `id`, stored as `protocol::Event::Diagnostics`.
    Diagnostics {
        id: String,
        summary: String,
        errors: usize,
        warnings: usize,
        errors_left: usize,
        lines: Vec<String>,
    },
    /// Token usage of one model request.
    Usage {
        input_tokens: u64,
        output_tokens: u64,
        #[serde(default, skip_serializing_if = "crate::store::is_zero")]
        cached_tokens: u64,
        /// What the request cost in USD; absent when its model has no price.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
    },
    /// The end of a turn.
    End { status: String, answer: String },
    /// The session was resumed by another run.
    Resume {},
    /// `git agent undo`: the branch moved from `from` back to `to`.
    Undo {
        from: String,
        to: String,
        steps: u32,
    },
    /// `git agent discard`: checkout and branch removed (the branch pointed at `tip`).
    Discard { tip: String },
    /// A message the agent itself added to the conversation (as a user message): `kind` is `instructions`
    /// (a deeper AGENTS.md, `path` names it), `reminder` (a loop or plan guard) or `plan` (re-stated on resume).
    Context {
        kind: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        path: String,
        content: String,
    },
    /// The plan after a `plan_update`; kept here, outside the conversation, so compaction cannot lose it.
    Plan { items: Vec<PlanItem> },
    /// A run of the project's check (`git agent fix`, the hooks): attempt 0 is the run that found the
    /// failure, before the session started; then one after each of the model's attempts. `tree` says what
    /// was checked (`the working tree`, `the staged tree`, `commit 1a2b3c4`, `agent/<id>`); `output` is the
    /// head and tail of what it printed.
    Check {
        attempt: u32,
        command: String,
        tree: String,
        passed: bool,
        end: String,
        /// `exit_code` in the lines [`record()`] writes.
        #[serde(default, alias = "exit_code", skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
        duration_ms: u64,
        output: String,
    },
    /// Everything before the last `kept` messages was replaced by one user message holding `summary`
    /// (a model-written summary, or a note that messages were dropped when `fallback`).
    Compaction {
        summary: String,
        kept: u64,
        replaced: u64,
        #[serde(default)]
        fallback: bool,
        tokens_before: u64,
        tokens_after: u64,
    },
    /// Project memory given to the model at the session's start (the message itself follows as a `context`
    /// event of kind `memory`): the entries, the tokens they took of the `budget`, and how many active
    /// entries were ranked.
    Memory {
        entries: Vec<MemoryItem>,
        tokens: u64,
        budget: u64,
        candidates: u64,
    },
    /// A `remember` proposal: written to memory when the session completes (or by `git agent memory accept`).
    /// `step` and `commit` are where the branch stood when it was made.
    Remember {
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tags: Vec<String>,
        kind: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        why: String,
        step: u32,
        commit: String,
    },
    /// The proposal recorded at `proposal` (its `seq`) written to memory: `action` is `added`, `updated` (a
    /// near-duplicate took its source) or `skipped` (it repeats a forgotten entry).
    MemoryWrite {
        proposal: u64,
        id: String,
        action: String,
        text: String,
    },
    /// An event of the child loop of the `explore` call `parent` (its task as `user`, its replies, tool
    /// results and usage); never part of the session's own conversation.
    Explore { parent: String, event: Box<Event> },
    /// An event hook ran (issue 26): [`protocol::Event::Hook`] as stored (see [`record`]).
    Hook {
        event: String,
        command: String,
        source: String,
        outcome: String,
        duration_ms: u64,
    },
}

impl Event {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Parses one stored line; `None` for events this version does not know (written by a newer one).
    pub fn from_json(value: &serde_json::Value) -> Option<Event> {
        serde_json::from_value(value.clone()).ok()
    }
}

/// Emits one fact once: appends `event` to the session log, then hands the same event to the front-end, so
/// the log and the screen get it in the same order (issue 24: the agent wrote each fact twice by hand).
/// Facts move here one kind at a time (steps, plans and checks so far); [`Event`] still reads their lines,
/// which have the fields it has always read.
pub fn record(
    log: &mut SessionLog,
    sink: &mut dyn Sink,
    event: protocol::Event,
) -> Result<(), StoreError> {
    log.append(serde_json::to_value(&event).unwrap_or(serde_json::Value::Null))?;
    sink.emit(&event);
    Ok(())
}

/// What a tool call that never got its result is told on resume.
pub const INTERRUPTED: &str =
    "error: interrupted: the session stopped before this call finished, so its \
result is unknown; check the files it would have touched before repeating it";

/// The conversation (without the system prompt) recorded in `events`. Tool calls that have no result (the
/// session died mid-step) get a synthetic "interrupted" result, so providers accept the history.
pub fn rebuild(events: &[serde_json::Value]) -> Vec<Message> {
    let mut messages = Vec::new();
    let mut open: Vec<String> = Vec::new();
    for event in events.iter().filter_map(Event::from_json) {
        match event {
            Event::User { content } => {
                close_open(&mut messages, &mut open);
                messages.push(Message::User { content });
            }
            Event::Assistant {
                content,
                tool_calls,
                thinking,
            } => {
                close_open(&mut messages, &mut open);
                open = tool_calls.iter().map(|c| c.id.clone()).collect();
                messages.push(Message::Assistant {
                    content,
                    tool_calls,
                    thinking,
                });
            }
            Event::ToolResult {
                tool_call_id,
                content,
                ..
            } => {
                let Some(pos) = open.iter().position(|id| *id == tool_call_id) else {
                    continue; // a result without its call cannot be sent; never happens in logs we write
                };
                open.remove(pos);
                messages.push(Message::Tool {
                    tool_call_id,
                    content,
                });
            }
            Event::Context { content, .. } => {
                close_open(&mut messages, &mut open);
                messages.push(Message::User { content });
            }
            Event::Compaction { summary, kept, .. } => {
                close_open(&mut messages, &mut open);
                let kept = usize::try_from(kept)
                    .unwrap_or(usize::MAX)
                    .min(messages.len());
                let tail = messages.split_off(messages.len() - kept);
                messages.clear();
                messages.push(Message::User { content: summary });
                messages.extend(tail);
            }
            _ => {}
        }
    }
    close_open(&mut messages, &mut open);
    messages
}

/// The session's plan: the last one recorded.
pub fn plan(events: &[serde_json::Value]) -> Plan {
    events
        .iter()
        .rev()
        .filter_map(Event::from_json)
        .find_map(|e| match e {
            Event::Plan { items } => Some(Plan { items }),
            _ => None,
        })
        .unwrap_or_default()
}

/// The deeper instruction files already added to the conversation.
pub fn loaded_instructions(events: &[serde_json::Value]) -> Vec<String> {
    events
        .iter()
        .filter_map(Event::from_json)
        .filter_map(|e| match e {
            Event::Context { kind, path, .. } if kind == "instructions" => Some(path),
            _ => None,
        })
        .collect()
}

/// The step commits, as `step N: <short id> (files)` lines for summaries.
pub fn step_lines(events: &[serde_json::Value]) -> Vec<String> {
    events
        .iter()
        .filter_map(Event::from_json)
        .filter_map(|e| match e {
            Event::Step {
                step,
                commit,
                files,
            } => Some(step_line(step, &commit, &files)),
            _ => None,
        })
        .collect()
}

/// One step commit as a line: `step 3: 1a2b3c4 (src/a.rs, src/b.rs)`.
pub fn step_line(step: u32, commit: &str, files: &[String]) -> String {
    format!(
        "step {step}: {} ({})",
        commit.get(..7).unwrap_or(commit),
        files.join(", ")
    )
}

/// The step number of a line made by [`step_line()`].
pub fn step_of_line(line: &str) -> Option<u32> {
    line.strip_prefix("step ")?.split(':').next()?.parse().ok()
}

fn close_open(messages: &mut Vec<Message>, open: &mut Vec<String>) {
    for id in open.drain(..) {
        messages.push(Message::Tool {
            tool_call_id: id,
            content: INTERRUPTED.to_owned(),
        });
    }
}

/// The note for a step commit: which tool call made it, with what, and why (the model's preceding text).
pub fn step_note(step: u32, call: &ToolCall, label: &str, why: &str) -> String {
    let args = crate::tools::short(call.arguments.trim(), 300);
    let why = why.trim();
    let why = if why.is_empty() {
        "(the model gave no reason before the call)".to_owned()
    } else if why.chars().count() > 2000 {
        format!("{}…", why.chars().take(2000).collect::<String>())
    } else {
        why.to_owned()
    };
    // The label already names the action (`edit src/a.rs`, `run cargo test`); the call line names the tool.
    format!(
        "step {step}: {label}\ncall: {} {args}\nwhy: {why}\n",
        call.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: "{}".into(),
        }
    }

    #[test]
    fn calls_without_results_get_an_interrupted_result() {
        let events: Vec<serde_json::Value> = [
            Event::User {
                content: "goal".into(),
            },
            Event::Assistant {
                content: "".into(),
                tool_calls: vec![call("a"), call("b")],
                thinking: vec![],
            },
            Event::ToolResult {
                tool_call_id: "a".into(),
                name: "read_file".into(),
                ok: true,
                summary: "1 line".into(),
                content: "x".into(),
            },
        ]
        .iter()
        .map(Event::to_json)
        .collect();
        let messages = rebuild(&events);
        assert_eq!(messages.len(), 4);
        assert_eq!(
            messages[3],
            Message::Tool {
                tool_call_id: "b".into(),
                content: INTERRUPTED.into()
            }
        );
    }

    #[test]
    fn compaction_replaces_all_but_the_kept_tail() {
        let user = |c: &str| Event::User { content: c.into() };
        let events: Vec<serde_json::Value> = [
            user("goal"),
            Event::Assistant {
                content: "".into(),
                tool_calls: vec![call("a")],
                thinking: vec![],
            },
            user("more"),
            Event::Context {
                kind: "reminder".into(),
                path: String::new(),
                content: "careful".into(),
            },
            Event::Compaction {
                summary: "S".into(),
                kept: 2,
                replaced: 3,
                fallback: false,
                tokens_before: 10,
                tokens_after: 5,
            },
            user("after"),
        ]
        .iter()
        .map(Event::to_json)
        .collect();
        let contents: Vec<String> = rebuild(&events)
            .into_iter()
            .map(|m| match m {
                Message::User { content } => content,
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(contents, ["S", "more", "careful", "after"]);
    }
}
