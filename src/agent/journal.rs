//! What the agent records in the session log, how a log reads back as events, and how a conversation is
//! rebuilt from it for `--resume`.
//!
//! The store keeps opaque JSON lines ([`crate::store::SessionLog`]); this module owns their meaning. Every
//! fact is stored as the [`protocol::Event`] the front-end is shown ([`record()`]: log, then sink), so `show`
//! and ACP's `session/load` replay a log through the live renderers ([`events()`]). Lines written before that
//! (issue 24: prompts as `user`, replies as `assistant`, ends as `end`, ...) are decoded into the same events
//! by [`legacy`], the one place that knows those shapes; every reader of the log ([`decode()`] a line,
//! [`events()`] a log) sees protocol events only. The system prompt is not recorded: it names the
//! checkout's absolute path, and a session pushed to another machine must still make sense there, so it is
//! rebuilt on resume. Paths in events are repository-relative.

use serde::{Deserialize, Serialize};

use super::plan::{Item as PlanItem, OwnTool, Plan};
use crate::protocol::{
    self, Image, MemoryItem, Message, Sink, Status, ThinkingBlock, ToolCall, ToolKind,
};
use crate::store::{SessionLog, StoreError};

/// Emits one fact once: appends `event` to the session log, then hands the same event to the front-end, so
/// the log and the screen get it in the same order (issue 24: the agent wrote each fact twice by hand).
/// Every fact of a turn goes through here, but the few [`keep()`] names.
pub fn record(
    log: &mut SessionLog,
    sink: &mut dyn Sink,
    event: protocol::Event,
) -> Result<(), StoreError> {
    log.append(serde_json::to_value(&event).unwrap_or(serde_json::Value::Null))?;
    sink.emit(&event);
    Ok(())
}

/// The sink a session's start shows through: shows every event at once and keeps the warnings, notices and
/// MCP status, which the start emits before its log exists (or, for a new session's checkout, from code that
/// has no log at hand), so that they are recorded once the log can take them ([`Heard::record_into()`]) and
/// `show` prints them where the live run did (a skipped subagent, an untrusted `.mcp.json`, a sandbox that
/// fell back).
pub struct Heard<'s> {
    sink: &'s mut dyn Sink,
    kept: Vec<protocol::Event>,
}

impl<'s> Heard<'s> {
    pub fn new(sink: &'s mut dyn Sink) -> Heard<'s> {
        Heard {
            sink,
            kept: Vec::new(),
        }
    }

    /// Appends what was kept to `log`, without showing it again (it was shown as it happened). Best effort:
    /// the user has seen the warnings, and a log that cannot be written fails at its next write.
    pub fn record_into(self, log: &mut SessionLog) {
        for event in &self.kept {
            if keep(log, event).is_err() {
                return;
            }
        }
    }
}

impl Sink for Heard<'_> {
    fn emit(&mut self, event: &protocol::Event) {
        if matches!(
            event,
            protocol::Event::Warning { .. }
                | protocol::Event::Notice { .. }
                | protocol::Event::Mcp { .. }
        ) {
            self.kept.push(event.clone());
        }
        self.sink.emit(event);
    }

    fn wants_diffs(&self) -> bool {
        self.sink.wants_diffs()
    }
}

/// The events of a stored log, in order: what the front-ends were shown live, for `show` and ACP's
/// `session/load` to replay through the same renderers. Lines this version does not know (written by a
/// newer one) are skipped.
pub fn events(lines: &[serde_json::Value]) -> Vec<protocol::Event> {
    let mut events: Vec<protocol::Event> = lines.iter().flat_map(decode).collect();
    // Older logs have a step just before the result of the call that made it; the screen showed the result
    // first, as the log now has it.
    for at in 1..events.len() {
        if matches!(events[at - 1], protocol::Event::Step { .. })
            && matches!(events[at], protocol::Event::ToolResult { .. })
        {
            events.swap(at - 1, at);
        }
    }
    events
}

/// One stored line as events: a line written as a [`protocol::Event`] is that event; an older line is
/// decoded by [`legacy::decode`]. For readers that need the line's own `seq` or `ts` beside its events.
pub fn decode(line: &serde_json::Value) -> Vec<protocol::Event> {
    if let Some(events) = legacy::decode(line) {
        return events;
    }
    serde_json::from_value(line.clone()).map_or_else(|_| Vec::new(), |event| vec![event])
}

/// The lines of logs written before every fact was stored as a [`protocol::Event`], as those events. This
/// is the only mapping between the two, and [`Line`](legacy::Line) the only other type of a stored line:
/// it is read here and never written.
mod legacy {
    use super::*;

    /// A line of a log written before every fact was stored as a [`protocol::Event`] (each line also carries
    /// `seq` and `ts`, added by the store). Only read, never written.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    pub(super) enum Line {
        /// A prompt from the user (the first one, or one given with `--resume`); stored as `prompt` now.
        User { content: String },
        /// A model reply: its text and the tool calls it asked for; stored as `reply` now.
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
        /// The end of a turn; stored as `turn_end` now.
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
        /// An image given to the model after the message before it: by the user (`--image`) or by the tool call
        /// `call`, as the protocol event `image` stores it. The bytes are the git blob `blob`, kept in the log's
        /// tree (`images/<blob>`).
        Image {
            #[serde(default)]
            blob: String,
            media_type: String,
            source: String,
            bytes: u64,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            call: Option<String>,
        },
        /// A search the provider ran itself while writing the reply that follows (Anthropic's server tool), as
        /// the protocol event `web_results` stores it.
        WebResults {
            query: String,
            results: Vec<crate::protocol::WebResult>,
        },
        /// An event of the child loop of the `explore` call `parent` (its task as `user`, its replies, tool
        /// results and usage); never part of the session's own conversation.
        Explore { parent: String, event: Box<Line> },
        /// An event hook ran (issue 26): [`protocol::Event::Hook`] as stored (see [`record`]).
        Hook {
            event: String,
            command: String,
            source: String,
            outcome: String,
            duration_ms: u64,
        },
    }

    impl Line {
        /// The line as it was written; tests make old logs with it.
        #[cfg(test)]
        pub(super) fn to_json(&self) -> serde_json::Value {
            serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
        }

        /// Parses one stored line; `None` for events this version does not know (written by a newer one).
        pub(super) fn from_json(value: &serde_json::Value) -> Option<Line> {
            serde_json::from_value(value.clone()).ok()
        }
    }

    /// `None` when `line` is not in an older shape (so it is a protocol event, or unknown).
    pub(super) fn decode(line: &serde_json::Value) -> Option<Vec<protocol::Event>> {
        let kind = line.get("type")?.as_str()?;
        let is_old = match kind {
            "user" | "assistant" | "usage" | "end" | "resume" | "undo" | "discard"
            | "memory_write" | "remember" | "explore" => true,
            // Same names as protocol events, other shapes.
            "tool_result" => line.get("tool_call_id").is_some(),
            "memory" => line.get("action").is_none(),
            "plan" => line.get("done").is_none(),
            _ => false,
        };
        if !is_old {
            return None;
        }
        Some(Line::from_json(line).map(events).unwrap_or_default())
    }

    /// The events an old line stands for; `nested` for a subagent's (only its calls and results are shown).
    fn events(event: Line) -> Vec<protocol::Event> {
        use protocol::Event as E;
        match event {
            Line::User { content } => vec![E::Prompt { content }],
            Line::Assistant {
                content,
                tool_calls,
                thinking,
            } => {
                // The calls were shown as the tool labelled them; the label is not stored in these lines.
                let calls: Vec<E> = tool_calls.iter().map(tool_call).collect();
                let mut out = vec![E::Reply {
                    content,
                    tool_calls,
                    thinking,
                }];
                out.extend(calls);
                out
            }
            Line::ToolResult {
                tool_call_id,
                ok,
                summary,
                content,
                ..
            } => vec![E::ToolResult {
                id: tool_call_id,
                ok,
                summary,
                output: content,
            }],
            Line::Usage {
                input_tokens,
                output_tokens,
                cached_tokens,
                cost_usd,
            } => vec![E::RequestUsage {
                // Not stored in these lines; no renderer shows it.
                request: 0,
                usage: protocol::Usage {
                    input_tokens,
                    output_tokens,
                    cached_tokens,
                },
                cost: cost_usd,
                session_cost: None,
            }],
            Line::End { status, answer } => vec![E::TurnEnd {
                status: Status::parse(&status),
                answer,
            }],
            Line::Resume {} => vec![E::Resumed],
            Line::Undo { from, to, steps } => vec![E::Undone { steps, to, from }],
            Line::Discard { tip } => vec![E::Discarded { tip }],
            Line::Memory { entries, .. } => vec![E::Memory {
                action: "injected".to_owned(),
                entries,
            }],
            Line::MemoryWrite {
                proposal,
                id,
                action,
                text,
            } => vec![
                E::MemoryWritten {
                    proposal,
                    id: id.clone(),
                    action: action.clone(),
                    text: text.clone(),
                },
                E::Memory {
                    action,
                    entries: vec![MemoryItem {
                        id,
                        kind: String::new(),
                        text,
                        confidence: 0.0,
                    }],
                },
            ],
            Line::Remember {
                text,
                tags,
                kind,
                why,
                step,
                commit,
            } => vec![E::MemoryProposal {
                text,
                tags,
                kind,
                why,
                step,
                commit,
            }],
            Line::Plan { items } => vec![Plan { items }.event()],
            Line::Explore { parent, event } => nested(*event)
                .into_iter()
                .map(|event| E::Nested {
                    parent: parent.clone(),
                    event: Box::new(event),
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// What a subagent's line showed: its calls and their results (its task, replies and usage were not).
    fn nested(event: Line) -> Vec<protocol::Event> {
        match event {
            Line::Assistant { tool_calls, .. } => tool_calls.iter().map(tool_call).collect(),
            event @ Line::ToolResult { .. } => events(event),
            _ => Vec::new(),
        }
    }

    /// The `tool_call` event of a stored call, labelled as the tool labels it live.
    fn tool_call(call: &ToolCall) -> protocol::Event {
        let input = serde_json::from_str::<serde_json::Value>(&call.arguments).ok();
        let tool = crate::tools::find(&call.name);
        let own = OwnTool::find(&call.name);
        // The tools a session makes for itself are not built in: their labels are asked for by name.
        let own_label = |args: &serde_json::Value| match call.name.as_str() {
            // As `explore::label` made it when these lines were written (and no import of the explorer,
            // which writes the log through this module: a cycle).
            "explore" => Some(format!(
                "explore \"{}\"",
                crate::tools::short(args["task"].as_str().unwrap_or("?"), 60)
            )),
            crate::tools::skill::NAME => Some(crate::tools::skill::label(args)),
            _ => own.map(|own| own.label(args)),
        };
        let label = input
            .as_ref()
            .and_then(|args| {
                tool.map(|tool| tool.label(args))
                    .or_else(|| own_label(args))
            })
            .unwrap_or_else(|| {
                format!("{} {}", call.name, crate::tools::short(&call.arguments, 80))
            });
        let input = input.unwrap_or(serde_json::Value::Null);
        protocol::Event::ToolCall {
            id: call.id.clone(),
            name: call.name.clone(),
            kind: tool
                .map(|t| t.kind())
                .or_else(|| own.map(OwnTool::kind))
                .unwrap_or(ToolKind::Other),
            label,
            location: tool.and_then(|t| t.location(&input)),
            input,
        }
    }
}

/// Appends `event` to the session log without showing it: a fact the front-end saw by another path as it
/// happened (a provider's web search, shown as it streamed), or one it must not see (the result of a call it
/// was never shown: cancelled or stopped by a guard before it ran).
pub fn keep(log: &mut SessionLog, event: &protocol::Event) -> Result<(), StoreError> {
    log.append(serde_json::to_value(event).unwrap_or(serde_json::Value::Null))
}

/// What a tool call that never got its result is told on resume.
pub const INTERRUPTED: &str =
    "error: interrupted: the session stopped before this call finished, so its \
result is unknown; check the files it would have touched before repeating it";

/// The conversation (without the system prompt) recorded in `events`. Tool calls that have no result (the
/// session died mid-step) get a synthetic "interrupted" result, so providers accept the history.
pub fn rebuild(lines: &[serde_json::Value]) -> Vec<Message> {
    use protocol::Event as E;
    let mut messages = Vec::new();
    let mut open: Vec<String> = Vec::new();
    for event in events(lines) {
        match event {
            E::Prompt { content } | E::Context { content, .. } => {
                close_open(&mut messages, &mut open);
                messages.push(Message::User { content });
            }
            E::Reply {
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
            E::ToolResult { id, output, .. } => {
                let Some(pos) = open.iter().position(|open| *open == id) else {
                    continue; // a result without its call cannot be sent; never happens in logs we write
                };
                open.remove(pos);
                messages.push(Message::Tool {
                    tool_call_id: id,
                    content: output,
                });
            }
            // Its data is loaded from the blob by the caller, which has the store ([`load_images()`]).
            E::Image {
                blob,
                media_type,
                source,
                bytes,
                call,
            } => {
                if call.is_none() {
                    close_open(&mut messages, &mut open);
                }
                messages.push(Message::Image {
                    image: Image {
                        media_type,
                        data: String::new(),
                        source,
                        bytes,
                        blob,
                    },
                });
            }
            E::Compaction { summary, kept, .. } => {
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

/// Fills in the data of the images [`rebuild()`] left empty, from their blobs (`read` gives a blob's
/// bytes); an image whose blob is gone becomes a note saying so, so the conversation still makes sense.
pub fn load_images(messages: &mut [Message], read: &dyn Fn(&str) -> Option<Vec<u8>>) {
    for message in messages.iter_mut() {
        let Message::Image { image } = message else {
            continue;
        };
        if !image.data.is_empty() {
            continue;
        }
        match read(&image.blob) {
            Some(bytes) => image.data = crate::tools::image::encode(&bytes),
            None => {
                *message = Message::User {
                    content: format!(
                        "[image {} is missing from the session log (blob {})]",
                        image.source, image.blob
                    ),
                }
            }
        }
    }
}

/// The session's plan: the last one recorded.
pub fn plan(events: &[serde_json::Value]) -> Plan {
    events
        .iter()
        .rev()
        .flat_map(decode)
        .find_map(|e| match e {
            protocol::Event::Plan { items, .. } => Some(Plan {
                items: items.into_iter().map(plan_item).collect(),
            }),
            _ => None,
        })
        .unwrap_or_default()
}

/// A plan item as the plan keeps it, from the event that showed it.
fn plan_item(item: protocol::PlanItem) -> PlanItem {
    use super::plan::Status;
    use protocol::PlanStatus;
    PlanItem {
        step: item.step,
        status: match item.status {
            PlanStatus::Pending => Status::Pending,
            PlanStatus::InProgress => Status::InProgress,
            PlanStatus::Done => Status::Done,
            PlanStatus::Blocked => Status::Blocked,
        },
        note: item.note,
    }
}

/// The deeper instruction files already added to the conversation.
pub fn loaded_instructions(events: &[serde_json::Value]) -> Vec<String> {
    events
        .iter()
        .flat_map(decode)
        .filter_map(|e| match e {
            protocol::Event::Context { kind, path, .. } if kind == "instructions" => Some(path),
            _ => None,
        })
        .collect()
}

/// The step commits, as `step N: <short id> (files)` lines for summaries.
pub fn step_lines(events: &[serde_json::Value]) -> Vec<String> {
    events
        .iter()
        .flat_map(decode)
        .filter_map(|e| match e {
            protocol::Event::Step {
                step,
                commit,
                files,
            } => {
                let files: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
                Some(step_line(step, &commit, &files))
            }
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
            legacy::Line::User {
                content: "goal".into(),
            },
            legacy::Line::Assistant {
                content: "".into(),
                tool_calls: vec![call("a"), call("b")],
                thinking: vec![],
            },
            legacy::Line::ToolResult {
                tool_call_id: "a".into(),
                name: "read_file".into(),
                ok: true,
                summary: "1 line".into(),
                content: "x".into(),
            },
        ]
        .iter()
        .map(legacy::Line::to_json)
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
        let user = |c: &str| legacy::Line::User { content: c.into() };
        let events: Vec<serde_json::Value> = [
            user("goal"),
            legacy::Line::Assistant {
                content: "".into(),
                tool_calls: vec![call("a")],
                thinking: vec![],
            },
            user("more"),
            legacy::Line::Context {
                kind: "reminder".into(),
                path: String::new(),
                content: "careful".into(),
            },
            legacy::Line::Compaction {
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
        .map(legacy::Line::to_json)
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
