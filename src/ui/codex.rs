//! The JSONL events of `codex exec --experimental-json`, for `git agent exec`: what `@openai/codex-sdk` (and
//! any orchestrator written against Codex's exec stream) reads from the process it spawns.
//!
//! A run is one turn of one thread, and the thread id is the session id, so the SDK's `resumeThread(id)` comes
//! back as `exec resume <id>` on the same `agent/<id>` branch. The shapes follow the SDK's own types
//! (`ThreadEvent`, `ThreadItem` in its `index.d.ts`): `thread.started`, `turn.started`, `item.started` /
//! `item.updated` / `item.completed`, `turn.completed` with usage or `turn.failed`, and `error`. How our events
//! become theirs:
//!
//! - streamed text becomes an `agent_message` item once the model moves on (a tool call, the end); the final
//!   answer is the last `agent_message`, which is what the SDK's `run()` returns as `finalResponse`;
//! - reasoning becomes a `reasoning` item the same way;
//! - a shell command (`run`) is a `command_execution` item, started when called, completed with its output
//!   and exit code;
//! - every step commit is a `file_change` item naming the files it changed (added, updated or deleted, as the
//!   commit says), whichever tool made it; a failed edit is a `file_change` with status `failed`;
//! - the plan is a `todo_list` item, started by the first `plan_update`, updated by the next ones and
//!   completed with the turn;
//! - an MCP tool (`mcp__server__tool`) is an `mcp_tool_call` item; our other tools (reading, searching,
//!   `web_fetch`, `explore`, ...) have no item type of their own in Codex's stream and are `mcp_tool_call`
//!   items of the server `git-agent`, so an orchestrator still sees every call;
//! - warnings and notices are `error` items (Codex's non-fatal errors); a host error is `turn.failed` once the
//!   turn started, else a top-level `error` event, and goes to stderr too (the SDK puts stderr in the error
//!   it throws when the process fails).

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::protocol::{Event, PlanStatus, Sink, Status, ToolKind, Usage};

/// The kinds of a step commit's files: `(path, status)` with git's `--name-status` letters (`A`, `M`, `D`,
/// `T`), or `None` when they cannot be read (the files are then reported as updated). The command edge
/// supplies it (it has the repository; a front-end does not).
pub type StepChanges = Box<dyn FnMut(&str) -> Option<Vec<(String, char)>> + Send>;

pub use super::jsonl::Out;

/// Renders a session's events as Codex's exec JSONL; see the module docs.
pub struct CodexSink {
    out: Out,
    step_changes: Option<StepChanges>,
    next_item: u64,
    turn: TurnState,
    text: String,
    reasoning: String,
    /// The text of the last `agent_message` item, so the answer is not repeated when it was the streamed text.
    last_message: Option<String>,
    /// Items started by a tool call and not yet completed, by call id.
    open: HashMap<String, OpenItem>,
    todo: Option<Todo>,
    usage: Usage,
    /// Why the turn is stopping, when the agent said so before `done` (a budget, a loop guard).
    failure: Option<String>,
}

/// Where the turn stands: the SDK expects `turn.started` once, before any item, and one end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TurnState {
    NotStarted,
    Running,
    Ended,
}

/// An item a tool call opened.
enum OpenItem {
    Command {
        id: String,
        command: String,
    },
    Tool {
        item: Value,
    },
    /// An editing call: no item until its step commit (or its failure).
    Edit {
        path: String,
    },
    /// A call of the agent's own (`plan_update`, `finish`, `remember`): shown through other events.
    Own,
}

/// The running `todo_list` item.
struct Todo {
    id: String,
    items: Value,
}

/// Tools that are the agent's own bookkeeping, not work an orchestrator follows as items.
const OWN_TOOLS: &[&str] = &["plan_update", "finish", "remember"];

impl CodexSink {
    /// A sink writing to `out`; `step_changes` reads what a step commit changed.
    pub fn new(out: Out, step_changes: Option<StepChanges>) -> CodexSink {
        CodexSink {
            out,
            step_changes,
            next_item: 0,
            turn: TurnState::NotStarted,
            text: String::new(),
            reasoning: String::new(),
            last_message: None,
            open: HashMap::new(),
            todo: None,
            usage: Usage::default(),
            failure: None,
        }
    }

    /// A sink on stdout.
    pub fn stdout(step_changes: Option<StepChanges>) -> CodexSink {
        CodexSink::new(Box::new(std::io::stdout()), step_changes)
    }

    fn write(&mut self, value: &Value) {
        super::jsonl::write_line(&mut self.out, value);
    }

    fn item_id(&mut self) -> String {
        let id = format!("item_{}", self.next_item);
        self.next_item += 1;
        id
    }

    fn item(&mut self, event: &str, item: Value) {
        self.write(&json!({"type": event, "item": item}));
    }

    fn start_turn(&mut self, thread_id: &str) {
        if self.turn != TurnState::NotStarted {
            return;
        }
        self.turn = TurnState::Running;
        self.write(&json!({"type": "thread.started", "thread_id": thread_id}));
        self.write(&json!({"type": "turn.started"}));
    }

    fn running(&self) -> bool {
        self.turn == TurnState::Running
    }

    /// Streamed reasoning and text become items when the model moves on.
    fn flush_reasoning(&mut self) {
        if self.reasoning.trim().is_empty() {
            self.reasoning.clear();
            return;
        }
        let text = std::mem::take(&mut self.reasoning);
        let id = self.item_id();
        self.item(
            "item.completed",
            json!({"id": id, "type": "reasoning", "text": text.trim()}),
        );
    }

    fn flush_text(&mut self) {
        self.flush_reasoning();
        let text = std::mem::take(&mut self.text);
        let text = text.trim();
        if !text.is_empty() {
            self.message(text.to_owned());
        }
    }

    fn message(&mut self, text: String) {
        let id = self.item_id();
        self.item(
            "item.completed",
            json!({"id": id, "type": "agent_message", "text": text}),
        );
        self.last_message = Some(text);
    }

    fn tool_call(&mut self, call_id: &str, name: &str, kind: ToolKind, input: &Value) {
        self.flush_text();
        let command = input.get("command").and_then(Value::as_str);
        let open = if OWN_TOOLS.contains(&name) {
            OpenItem::Own
        } else if let (ToolKind::Execute, Some(command)) = (kind, command) {
            let id = self.item_id();
            self.item(
                "item.started",
                json!({"id": id, "type": "command_execution", "command": command,
                       "aggregated_output": "", "status": "in_progress"}),
            );
            OpenItem::Command {
                id,
                command: command.to_owned(),
            }
        } else if kind == ToolKind::Edit {
            let path = input.get("path").and_then(Value::as_str).unwrap_or(name);
            OpenItem::Edit {
                path: path.to_owned(),
            }
        } else {
            let id = self.item_id();
            let (server, tool) = mcp_names(name);
            let item = json!({"id": id, "type": "mcp_tool_call", "server": server, "tool": tool,
                              "arguments": input, "status": "in_progress"});
            self.item("item.started", item.clone());
            OpenItem::Tool { item }
        };
        self.open.insert(call_id.to_owned(), open);
    }

    fn tool_result(&mut self, call_id: &str, ok: bool, summary: &str, output: &str) {
        let status = if ok { "completed" } else { "failed" };
        match self.open.remove(call_id) {
            Some(OpenItem::Command { id, command }) => {
                let mut item = json!({"id": id, "type": "command_execution", "command": command,
                                      "aggregated_output": command_output(output), "status": status});
                if let Some(code) = exit_code(summary) {
                    item["exit_code"] = json!(code);
                }
                self.item("item.completed", item);
            }
            Some(OpenItem::Tool { mut item, .. }) => {
                item["status"] = json!(status);
                if ok {
                    item["result"] = json!({"content": [{"type": "text", "text": output}],
                                            "structured_content": null});
                } else {
                    item["error"] = json!({"message": first_line_or(output, summary)});
                }
                self.item("item.completed", item);
            }
            // A successful edit shows as the step commit that follows it.
            Some(OpenItem::Edit { path }) if !ok => {
                let id = self.item_id();
                self.item(
                    "item.completed",
                    json!({"id": id, "type": "file_change",
                           "changes": [{"path": path, "kind": "update"}], "status": "failed"}),
                );
            }
            Some(OpenItem::Edit { .. }) | Some(OpenItem::Own) | None => {}
        }
    }

    fn step(&mut self, commit: &str, files: &[std::path::PathBuf]) {
        self.flush_text();
        let kinds = self
            .step_changes
            .as_mut()
            .and_then(|read| read(commit))
            .unwrap_or_default();
        let changes: Vec<Value> = files
            .iter()
            .map(|file| {
                let path = file.to_string_lossy();
                let kind = match kinds.iter().find(|(p, _)| *p == path) {
                    Some((_, 'A')) => "add",
                    Some((_, 'D')) => "delete",
                    _ => "update",
                };
                json!({"path": path, "kind": kind})
            })
            .collect();
        let id = self.item_id();
        self.item(
            "item.completed",
            json!({"id": id, "type": "file_change", "changes": changes, "status": "completed"}),
        );
    }

    fn plan(&mut self, items: &[crate::protocol::PlanItem]) {
        self.flush_text();
        let items: Value = items
            .iter()
            .map(|i| json!({"text": i.step, "completed": i.status == PlanStatus::Done}))
            .collect();
        match &mut self.todo {
            Some(todo) => {
                todo.items = items.clone();
                let id = todo.id.clone();
                self.item(
                    "item.updated",
                    json!({"id": id, "type": "todo_list", "items": items}),
                );
            }
            None => {
                let id = self.item_id();
                self.todo = Some(Todo {
                    id: id.clone(),
                    items: items.clone(),
                });
                self.item(
                    "item.started",
                    json!({"id": id, "type": "todo_list", "items": items}),
                );
            }
        }
    }

    fn error_item(&mut self, message: &str) {
        let id = self.item_id();
        self.item(
            "item.completed",
            json!({"id": id, "type": "error", "message": message}),
        );
    }

    /// The end of the turn: what is still streamed or open, then `turn.completed` or `turn.failed`.
    fn done(&mut self, status: &Status, answer: &str) {
        self.flush_text();
        let answer = answer.trim();
        if !answer.is_empty() && self.last_message.as_deref() != Some(answer) {
            self.message(answer.to_owned());
        }
        self.close_open_items();
        if *status == Status::Done {
            let u = self.usage;
            self.write(&json!({"type": "turn.completed", "usage": {
                "input_tokens": u.input_tokens,
                "cached_input_tokens": u.cached_tokens,
                "output_tokens": u.output_tokens,
                "reasoning_output_tokens": 0,
            }}));
        } else {
            let message = match self.failure.take() {
                Some(reason) => reason,
                None if !answer.is_empty() => format!("{status}: {answer}"),
                None => format!("the turn stopped unfinished ({status})"),
            };
            self.write(&json!({"type": "turn.failed", "error": {"message": message}}));
        }
        self.turn = TurnState::Ended;
    }

    /// Items a cut-short turn left open end as failed: the SDK's consumers wait for a terminal state. The
    /// plan's list completes as it stands.
    fn close_open_items(&mut self) {
        if let Some(todo) = self.todo.take() {
            self.item(
                "item.completed",
                json!({"id": todo.id, "type": "todo_list", "items": todo.items}),
            );
        }
        let mut open: Vec<(String, OpenItem)> = self.open.drain().collect();
        open.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, item) in open {
            match item {
                OpenItem::Command { id, command } => self.item(
                    "item.completed",
                    json!({"id": id, "type": "command_execution", "command": command,
                           "aggregated_output": "", "status": "failed"}),
                ),
                OpenItem::Tool { mut item, .. } => {
                    item["status"] = json!("failed");
                    item["error"] = json!({"message": "the turn ended before the call did"});
                    self.item("item.completed", item);
                }
                OpenItem::Edit { .. } | OpenItem::Own => {}
            }
        }
    }

    /// A host error: the end of a running turn, else a top-level `error` event; on stderr too.
    fn error(&mut self, message: &str) {
        let mut lines = message.lines();
        if let Some(first) = lines.next() {
            eprintln!("error: {}", crate::protocol::neutralize(first));
        }
        for line in lines {
            eprintln!("{}", crate::protocol::neutralize(line));
        }
        match self.turn {
            // The agent explains a stop before `done`, which ends the turn with it.
            TurnState::Running if self.failure.is_none() => {
                self.failure = Some(message.to_owned());
            }
            _ => self.write(&json!({"type": "error", "message": message})),
        }
    }
}

/// A turn that a host error cut short (a model error mid-turn: no `done` follows the `error`) still ends in
/// the stream, when the command lets go of its sink.
impl Drop for CodexSink {
    fn drop(&mut self) {
        if !self.running() {
            return;
        }
        self.flush_text();
        self.close_open_items();
        let message = self
            .failure
            .take()
            .unwrap_or_else(|| "the turn ended without an answer".to_owned());
        self.write(&json!({"type": "turn.failed", "error": {"message": message}}));
        self.turn = TurnState::Ended;
    }
}

impl Sink for CodexSink {
    fn emit(&mut self, event: &Event) {
        match event {
            Event::Session { id, .. } => self.start_turn(id),
            Event::Text { delta } if self.running() => {
                if !self.reasoning.is_empty() {
                    self.flush_reasoning();
                }
                self.text.push_str(delta);
            }
            Event::Reasoning { delta } if self.running() => self.reasoning.push_str(delta),
            Event::ToolCall {
                id,
                name,
                kind,
                input,
                ..
            } if self.running() => self.tool_call(id, name, *kind, input),
            Event::ToolResult {
                id,
                ok,
                summary,
                output,
            } if self.running() => self.tool_result(id, *ok, summary, output),
            Event::Step { commit, files, .. } if self.running() => self.step(commit, files),
            Event::Plan { items, .. } if self.running() => self.plan(items),
            Event::Usage { usage, .. } => self.usage = *usage,
            Event::Done { status, answer, .. } if self.running() => self.done(status, answer),
            Event::Warning { message } if self.running() => self.error_item(message),
            Event::Notice { message, .. } => {
                eprintln!("warning: {}", crate::protocol::neutralize(message));
                if self.running() {
                    self.error_item(message);
                }
            }
            Event::Warning { message } => {
                eprintln!("warning: {}", crate::protocol::neutralize(message));
            }
            Event::Error { message } => self.error(message),
            // The rest is for people (summary, progress), editors (diffs), the log (transcript events), or
            // inside a subagent, whose call is already an item.
            _ => {}
        }
    }
}

/// `mcp__server__tool` as its server and tool; our own tools as tools of the server `git-agent`.
fn mcp_names(name: &str) -> (&str, &str) {
    name.strip_prefix("mcp__")
        .and_then(|rest| rest.split_once("__"))
        .unwrap_or(("git-agent", name))
}

/// The exit code in a `run` result's summary (`exit 3`).
fn exit_code(summary: &str) -> Option<i32> {
    summary.strip_prefix("exit ")?.trim().parse().ok()
}

/// What a command printed, without the status line the `run` tool adds for the model (`[exit 0 after 0.1 s]`)
/// and its `(no output)` placeholder: Codex's `aggregated_output` is the output alone.
fn command_output(content: &str) -> String {
    let mut lines: Vec<&str> = content.lines().collect();
    if lines
        .last()
        .is_some_and(|l| l.starts_with('[') && l.ends_with(']'))
    {
        lines.pop();
    }
    if lines == ["(no output)"] {
        return String::new();
    }
    let mut text = lines.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    text
}

fn first_line_or<'a>(text: &'a str, fallback: &'a str) -> &'a str {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(fallback)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::jsonl::testing::{lines, Buffer};

    fn session(sink: &mut CodexSink) {
        sink.emit(&Event::Session {
            id: "abc123".into(),
            branch: "agent/abc123".into(),
            base: "0000000".into(),
            model: "openai/test".into(),
        });
    }

    #[test]
    fn a_command_then_an_answer() {
        let buffer = Buffer::default();
        let mut sink = CodexSink::new(Box::new(buffer.clone()), None);
        session(&mut sink);
        sink.emit(&Event::Text {
            delta: "Running it.".into(),
        });
        let input = json!({"command": "echo hi"});
        sink.emit(&Event::ToolCall {
            id: "c1".into(),
            name: "run".into(),
            kind: ToolKind::Execute,
            label: "echo hi".into(),
            input,
            location: None,
        });
        sink.emit(&Event::ToolResult {
            id: "c1".into(),
            ok: true,
            summary: "exit 0".into(),
            output: "hi\n[exit 0 after 0.0 s]\n".into(),
        });
        sink.emit(&Event::Text {
            delta: "Done.".into(),
        });
        let usage = Usage {
            input_tokens: 10,
            output_tokens: 3,
            cached_tokens: 4,
        };
        sink.emit(&Event::Usage { usage, cost: None });
        sink.emit(&Event::Done {
            status: Status::Done,
            answer: "Done.".into(),
            exit_code: 0,
        });
        let events = lines(&buffer);
        let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "thread.started",
                "turn.started",
                "item.completed",
                "item.started",
                "item.completed",
                "item.completed",
                "turn.completed"
            ]
        );
        assert_eq!(events[0]["thread_id"], "abc123");
        assert_eq!(events[2]["item"]["text"], "Running it.");
        assert_eq!(events[4]["item"]["aggregated_output"], "hi\n");
        assert_eq!(events[4]["item"]["exit_code"], 0);
        assert_eq!(events[4]["item"]["id"], events[3]["item"]["id"]);
        assert_eq!(events[5]["item"]["text"], "Done.");
        assert_eq!(events[6]["usage"]["cached_input_tokens"], 4);
    }

    #[test]
    fn an_unfinished_turn_fails_with_the_agents_reason() {
        let buffer = Buffer::default();
        let mut sink = CodexSink::new(Box::new(buffer.clone()), None);
        session(&mut sink);
        sink.emit(&Event::Error {
            message: "the step limit (1) was reached".into(),
        });
        sink.emit(&Event::Done {
            status: Status::MaxSteps,
            answer: String::new(),
            exit_code: 3,
        });
        let events = lines(&buffer);
        let last = events.last().unwrap();
        assert_eq!(last["type"], "turn.failed");
        assert_eq!(last["error"]["message"], "the step limit (1) was reached");
    }

    #[test]
    fn names_and_output() {
        assert_eq!(mcp_names("mcp__git__git_status"), ("git", "git_status"));
        assert_eq!(mcp_names("read_file"), ("git-agent", "read_file"));
        assert_eq!(exit_code("exit 3"), Some(3));
        assert_eq!(exit_code("timed out"), None);
        assert_eq!(command_output("(no output)\n[exit 0 after 0.1 s]\n"), "");
    }
}
