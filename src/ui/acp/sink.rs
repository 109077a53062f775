//! The session's events as ACP `session/update` notifications: streamed text and reasoning as message and
//! thought chunks, each tool call as `tool_call` then `tool_call_update`s, the plan, context usage, and
//! warnings as notices (or on stderr when the client takes no notices).
//!
//! A tool call the client saw always gets a final update: `completed` or `failed` from its result, or
//! `failed` from [`AcpSink::close_open`] when the turn ends without one (cancelled, a host error, a session
//! that died mid-call in a replayed log). Editors that wait for a final status otherwise show a spinner
//! forever.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::wire::Peer;
use crate::protocol::{Event, Location, McpServerState, PlanItem, PlanStatus, Sink, ToolKind};

/// Streams one session's events to the client.
pub struct AcpSink {
    peer: Peer,
    session: String,
    /// The session's checkout: ACP wants absolute paths, the agent's are checkout-relative.
    root: PathBuf,
    /// The model's context window, the `size` of `usage_update`.
    window: u64,
    /// The client shows `notice` updates (it advertised `session.notices`).
    notices: bool,
    /// Tool calls shown and not finished yet, in order.
    open: Vec<OpenCall>,
    /// Text streamed since the last tool call: the answer, unless the turn ends with another one.
    reply: String,
    /// Text streamed since the last reply event: its text was sent as chunks already.
    streamed: bool,
    /// A stored session is being replayed (`session/load`): its prompts are sent too.
    replaying: bool,
}

struct OpenCall {
    id: String,
    /// `diff` content from the call's [`Event::Diff`]s, sent with its final update.
    diffs: Vec<Value>,
    locations: Vec<Value>,
}

impl AcpSink {
    pub fn new(peer: Peer, session: &str, root: &Path, window: u64, notices: bool) -> AcpSink {
        AcpSink {
            peer,
            session: session.to_owned(),
            root: root.to_path_buf(),
            window,
            notices,
            open: Vec::new(),
            reply: String::new(),
            streamed: false,
            replaying: false,
        }
    }

    /// Starts or ends the replay of a stored session: live, the client sent the prompts itself.
    pub fn replaying(&mut self, on: bool) {
        self.replaying = on;
    }

    /// The model changed (`/model`): usage is measured against its window from now on.
    pub fn set_window(&mut self, window: u64) {
        self.window = window;
    }

    /// Sends one `session/update`.
    pub fn update(&self, update: Value) {
        self.peer.notify(
            "session/update",
            json!({"sessionId": self.session, "update": update}),
        );
    }

    /// An agent message chunk (a command's answer, an answer that was not streamed).
    pub fn message(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.reply.push_str(text);
        self.update(json!({"sessionUpdate": "agent_message_chunk", "content": text_block(text)}));
    }

    /// How much of the context window the conversation uses.
    pub fn usage(&self, used: u64) {
        self.update(json!({"sessionUpdate": "usage_update", "used": used, "size": self.window}));
    }

    /// Gives every tool call still open its final update, `failed` with `why`; the turn is over.
    pub fn close_open(&mut self, why: &str) {
        for call in std::mem::take(&mut self.open) {
            let mut content = call.diffs;
            content.push(json!({"type": "content", "content": text_block(why)}));
            self.update(json!({
                "sessionUpdate": "tool_call_update",
                "toolCallId": call.id,
                "status": "failed",
                "content": content,
            }));
        }
        self.reply.clear();
    }

    /// Something the user should know: a `notice` when the client shows them, else a line on stderr (an
    /// agent message would become part of the conversation the client keeps).
    pub fn notice(&self, severity: &str, text: &str) {
        if self.notices {
            let title = text.lines().next().unwrap_or(text);
            let mut notice =
                json!({"sessionUpdate": "notice", "severity": severity, "title": title});
            if title.len() < text.len() {
                notice["description"] = json!(text);
            }
            self.update(notice);
        } else {
            // Notices carry editor- and server-supplied text (MCP server names, their errors): made inert
            // before they reach a terminal (issue 23, finding 16).
            eprintln!("git-agent acp: {severity}: {}", crate::ui::neutralize(text));
        }
    }

    fn tool_call(
        &mut self,
        id: &str,
        kind: ToolKind,
        label: &str,
        input: &Value,
        at: Option<&Location>,
    ) {
        let locations: Vec<Value> = at
            .map(|at| self.location(&at.path, at.line))
            .into_iter()
            .collect();
        self.update(json!({
            "sessionUpdate": "tool_call",
            "toolCallId": id,
            "title": label,
            "kind": kind_name(kind),
            "status": "pending",
            "rawInput": input,
            "locations": locations,
        }));
        self.open.push(OpenCall {
            id: id.to_owned(),
            diffs: Vec::new(),
            locations,
        });
        self.reply.clear();
    }

    fn running(&self, id: &str) {
        if self.open.iter().any(|c| c.id == id) {
            self.update(json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "in_progress"}));
        }
    }

    fn diff(&mut self, id: &str, path: &Path, old: Option<&str>, new: &str) {
        let line = first_changed_line(old.unwrap_or(""), new);
        let location = self.location(&path.to_string_lossy(), Some(line));
        let abs = self.root.join(path).to_string_lossy().into_owned();
        let Some(call) = self.open.iter_mut().find(|c| c.id == id) else {
            return;
        };
        call.diffs
            .push(json!({"type": "diff", "path": abs, "oldText": old, "newText": new}));
        // The edit's own line says more than the path the call named.
        call.locations.retain(|l| l["path"] != location["path"]);
        call.locations.push(location);
    }

    fn result(&mut self, id: &str, ok: bool, summary: &str, output: &str) {
        let Some(at) = self.open.iter().position(|c| c.id == id) else {
            return;
        };
        let call = self.open.remove(at);
        let mut content = call.diffs;
        // The diff shows an edit better than the tool's words about it; other calls show what they gave back.
        let text = if output.trim().is_empty() || !content.is_empty() {
            summary
        } else {
            output
        };
        if !text.is_empty() {
            content.push(json!({"type": "content", "content": text_block(text)}));
        }
        self.update(json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": id,
            "status": if ok { "completed" } else { "failed" },
            "content": content,
            "locations": call.locations,
            "rawOutput": {"ok": ok, "summary": summary},
        }));
    }

    fn plan(&self, items: &[PlanItem]) {
        let entries: Vec<Value> = items
            .iter()
            .map(|item| {
                let (status, content) = match item.status {
                    PlanStatus::Pending => ("pending", item.step.to_owned()),
                    PlanStatus::InProgress => ("in_progress", item.step.to_owned()),
                    PlanStatus::Done => ("completed", item.step.to_owned()),
                    // ACP knows no blocked item: it stays open, and says why.
                    PlanStatus::Blocked if item.note.is_empty() => {
                        ("pending", format!("{} (blocked)", item.step))
                    }
                    PlanStatus::Blocked => {
                        ("pending", format!("{} (blocked: {})", item.step, item.note))
                    }
                };
                json!({"content": content, "priority": "medium", "status": status})
            })
            .collect();
        self.update(json!({"sessionUpdate": "plan", "entries": entries}));
    }

    fn mcp(
        &self,
        connected: usize,
        total: usize,
        servers: &[McpServerState],
        untrusted: Option<&str>,
    ) {
        if let Some(notice) = untrusted {
            self.notice("info", notice);
        }
        let failed: Vec<String> = servers
            .iter()
            .filter(|s| s.state == "failed")
            .map(|s| {
                let mut line = format!("{}: {}", s.name, s.error.as_deref().unwrap_or("failed"));
                if let Some(last) = s.stderr.last() {
                    line.push_str(&format!(" (stderr: {last})"));
                }
                line
            })
            .collect();
        let starting = servers.iter().any(|s| s.state == "starting");
        if failed.is_empty() && starting {
            return;
        }
        let mut text = format!("MCP: {connected} of {total} servers connected");
        for line in failed {
            text.push('\n');
            text.push_str(&line);
        }
        let severity = if connected < total && !starting {
            "warning"
        } else {
            "info"
        };
        self.notice(severity, &text);
    }

    fn location(&self, path: &str, line: Option<u32>) -> Value {
        let abs = self.root.join(path).to_string_lossy().into_owned();
        match line {
            Some(line) => json!({"path": abs, "line": line}),
            None => json!({"path": abs}),
        }
    }
}

impl Sink for AcpSink {
    fn emit(&mut self, event: &Event) {
        match event {
            Event::Text { delta } => {
                self.streamed = true;
                self.reply.push_str(delta);
                self.update(
                    json!({"sessionUpdate": "agent_message_chunk", "content": text_block(delta)}),
                );
            }
            Event::Reasoning { delta } => self.update(
                json!({"sessionUpdate": "agent_thought_chunk", "content": text_block(delta)}),
            ),
            Event::Prompt { content: text } => {
                if self.replaying {
                    self.update(
                        json!({"sessionUpdate": "user_message_chunk", "content": text_block(text)}),
                    );
                }
                self.reply.clear();
            }
            // Live, its text streamed as chunks; a replayed one sends it now.
            Event::Reply { content, .. } => {
                if !self.streamed && !content.trim().is_empty() {
                    self.message(content.trim_end());
                }
                self.streamed = false;
            }
            Event::ToolCall {
                id,
                kind,
                label,
                input,
                location,
                ..
            } => self.tool_call(id, *kind, label, input, location.as_ref()),
            Event::Permission { id, decision, .. } if *decision != "deny" => self.running(id),
            Event::Permission { .. } => {}
            Event::Diff { id, path, old, new } => self.diff(id, path, old.as_deref(), new),
            Event::ToolResult {
                id,
                ok,
                summary,
                output,
            } => self.result(id, *ok, summary, output),
            Event::Plan { items, .. } => self.plan(items),
            Event::RequestUsage { usage, .. } => {
                self.usage(usage.input_tokens + usage.output_tokens)
            }
            Event::Done { answer, .. } => {
                // A `finish` summary or a stop report was never streamed; a plain answer was.
                let answer = answer.trim();
                if !answer.is_empty() && !self.reply.trim_end().ends_with(answer) {
                    let text = if self.reply.trim().is_empty() {
                        answer.to_owned()
                    } else {
                        format!("\n\n{answer}")
                    };
                    self.message(&text);
                }
            }
            // Before `done` live (whose answer is measured against the streamed reply, so a turn without
            // open calls keeps it); in a replayed log, what closes the calls of a session that died.
            Event::TurnEnd { .. } if !self.open.is_empty() => {
                self.close_open("the session stopped before this call finished")
            }
            Event::TurnEnd { .. } => {}
            Event::Warning { message: text } | Event::Notice { message: text, .. } => {
                self.notice("warning", text)
            }
            Event::Error { message: text } => self.notice("error", text),
            Event::Mcp {
                connected,
                total,
                servers,
                untrusted,
            } => self.mcp(*connected, *total, servers, untrusted.as_deref()),
            // The branch and its commits are the client's to look at with git; the rest is for a terminal
            // or the session log.
            Event::Session { .. }
            | Event::Progress { .. }
            | Event::Step { .. }
            | Event::Diagnostics { .. }
            | Event::Usage { .. }
            | Event::Summary { .. }
            | Event::Context { .. }
            | Event::Compaction { .. }
            | Event::Resumed
            | Event::Undone { .. }
            | Event::Discarded { .. } => {}
            // An explorer's own calls: the editor sees the `explore` call and its summary, as the model does.
            Event::Nested { .. } | Event::Hook { .. } => {}
            // `git agent fix`'s check runs; an ACP session never runs that loop, so they do not arise here.
            Event::CheckStarted { .. } | Event::Check { .. } | Event::Fixed { .. } => {}
            // Which memory entries were given or written is in the session log (`git agent show`).
            Event::Memory { .. } | Event::MemoryProposal { .. } | Event::MemoryWritten { .. } => {}
            // The editor gave the images or sees the call that read one; the result text names it.
            Event::Image { .. } => {}
            Event::WebResults { query, results } => {
                let text = crate::ui::human::web_results_text(query, results);
                self.notice("web search", &text)
            }
        }
    }

    fn wants_diffs(&self) -> bool {
        true
    }
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// ACP's name of a tool kind.
fn kind_name(kind: ToolKind) -> &'static str {
    match kind {
        ToolKind::Read => "read",
        ToolKind::Search => "search",
        ToolKind::Edit => "edit",
        ToolKind::Execute => "execute",
        ToolKind::Think => "think",
        ToolKind::Other => "other",
    }
}

/// The first line (1-based) where `new` differs from `old`: where an editor should jump to see the edit.
fn first_changed_line(old: &str, new: &str) -> u32 {
    let same = old
        .split_inclusive('\n')
        .zip(new.split_inclusive('\n'))
        .take_while(|(a, b)| a == b)
        .count();
    u32::try_from(same + 1).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_changed_line_is_the_first_that_differs() {
        assert_eq!(first_changed_line("a\nb\nc\n", "a\nB\nc\n"), 2);
        assert_eq!(first_changed_line("", "new\n"), 1);
        assert_eq!(first_changed_line("a\nb\n", "a\nb\nc\n"), 3);
        assert_eq!(first_changed_line("a\nb", "a\nbc"), 2);
    }
}
