//! The one human renderer of a session: streamed text, one line per tool call and result, step commits, and
//! the markers of a session's history. `ask` renders live to stderr; `git agent show` replays a stored
//! session through the same code to stdout, so both neutralise what the model and its tools wrote in the same
//! way (a transcript once let OSC 52 clipboard writes and screen clears through).
//!
//! Colours only when the output is a terminal and `NO_COLOR` is unset.

use std::io::{self, IsTerminal, Write};

use crate::protocol::neutralize;
use crate::protocol::{Event, Sink, Usage};

/// Renders events for a person into `out`.
pub struct HumanSink<W: Write + Send> {
    out: W,
    color: bool,
    /// True while the cursor is in the middle of streamed text (so the next line starts on a new line).
    mid_line: bool,
    /// Live only: the final answer also goes to stdout (when stdout is not the same terminal).
    answer_on_stdout: bool,
    /// Characters of reasoning in the current run, shown collapsed as one line.
    thinking: usize,
    /// Replaying a stored session: each text is a whole reply (set off by a blank line), step lines name
    /// their files, and nothing goes to stdout on its own.
    replay: bool,
    /// Replaying: the tools a subagent called, by the call that started it, shown collapsed as one line
    /// before that call's result.
    nested: Vec<(String, Vec<String>)>,
    /// The output is a terminal (progress counts up in place).
    tty: bool,
}

/// True when `stream` should get colours: it is a terminal and the user did not ask for none.
pub fn use_color(stream: &impl IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

impl HumanSink<io::Stderr> {
    /// The live renderer of `ask`: stderr, and the final answer on stdout.
    pub fn live() -> Self {
        let err = io::stderr();
        let color = use_color(&err);
        let tty = err.is_terminal();
        // When stdout is the same terminal, the streamed text already showed the answer: do not print it twice.
        let answer_on_stdout = !(io::stdout().is_terminal() && err.is_terminal());
        HumanSink {
            out: err,
            color,
            mid_line: false,
            answer_on_stdout,
            thinking: 0,
            replay: false,
            nested: Vec::new(),
            tty,
        }
    }
}

impl<W: Write + Send> HumanSink<W> {
    /// The renderer of a stored session (`git agent show`) into `out`.
    pub fn replay(out: W, color: bool) -> Self {
        HumanSink {
            out,
            color,
            mid_line: false,
            answer_on_stdout: false,
            thinking: 0,
            replay: true,
            nested: Vec::new(),
            tty: false,
        }
    }

    /// A live renderer into `out` alone (the chat's screen): the streamed text is the answer, nothing goes
    /// to stdout.
    pub fn live_into(out: W, color: bool) -> Self {
        HumanSink {
            out,
            color,
            mid_line: false,
            answer_on_stdout: false,
            thinking: 0,
            replay: false,
            nested: Vec::new(),
            // The chat's screen has its own status line; a counter drawn with `\r` would fight it.
            tty: false,
        }
    }

    /// A line of its own (a transcript's heading), neutralised like everything else.
    pub fn write_line(&mut self, text: &str) {
        let clean = neutralize(text);
        self.line(&clean);
    }

    /// Ends the last line and returns the output.
    pub fn finish(mut self) -> W {
        self.end_reasoning();
        if self.mid_line {
            let _ = writeln!(self.out);
        }
        let _ = self.out.flush();
        self.out
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
        if first && self.mid_line {
            let _ = writeln!(self.out);
        }
        let _ = write!(self.out, "\r\x1b[2K{line}");
        let _ = self.out.flush();
        self.mid_line = false;
    }

    /// Ends the reasoning line before anything else is shown.
    fn end_reasoning(&mut self) {
        if self.thinking == 0 {
            return;
        }
        let line = self.thinking_line();
        if self.color {
            let _ = writeln!(self.out);
        } else {
            if self.mid_line {
                let _ = writeln!(self.out);
            }
            let _ = writeln!(self.out, "{line}");
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

    /// Writes `text` (already neutralised) as whole lines, after ending streamed text.
    fn line(&mut self, text: &str) {
        if self.mid_line {
            let _ = writeln!(self.out);
        }
        let _ = writeln!(self.out, "{text}");
        let _ = self.out.flush();
        self.mid_line = false;
    }

    /// Long work, as one line that counts up in place on a terminal (nothing elsewhere: a log file gets the
    /// outcome, not a counter).
    fn progress(&mut self, what: &str, done: u64, total: u64) {
        if !self.tty {
            return;
        }
        let verb = if what == "checkout" {
            "checking out"
        } else {
            what
        };
        let line = self.paint("2", &format!("{verb}: {done} of {total} files"));
        if self.mid_line {
            let _ = writeln!(self.out);
            self.mid_line = false;
        }
        if done >= total {
            let _ = writeln!(self.out, "\r\x1b[2K{line}");
        } else {
            let _ = write!(self.out, "\r\x1b[2K{line}");
        }
        let _ = self.out.flush();
    }

    /// A dim `-- ...` line about the session rather than the conversation.
    fn marker(&mut self, text: &str) {
        let painted = self.paint("2", &format!("-- {}", neutralize(text)));
        self.line(&painted);
    }

    fn text(&mut self, delta: &str) {
        if self.replay {
            // A whole reply, set off from what came before.
            if self.mid_line {
                let _ = writeln!(self.out);
            }
            let _ = writeln!(self.out);
        }
        let clean = neutralize(delta);
        let _ = self.out.write_all(clean.as_bytes());
        let _ = self.out.flush();
        self.mid_line = !clean.ends_with('\n');
    }

    /// `MCP: 1 of 2 servers connected`, then each failed server with its error and last stderr lines (server
    /// output, so neutralised), and the notice of a skipped `.mcp.json`.
    fn mcp(
        &mut self,
        connected: usize,
        total: usize,
        servers: &[crate::protocol::McpServerState],
        untrusted: Option<&str>,
    ) {
        if total > 0 {
            let starting = servers.iter().filter(|s| s.state == "starting").count();
            let mut line = format!(
                "MCP: {connected} of {total} server{} connected",
                plural(total)
            );
            if starting > 0 {
                line.push_str(&format!(" ({starting} starting)"));
            }
            let text = self.paint("2", &line);
            self.line(&text);
        }
        for server in servers.iter().filter(|s| s.state == "failed") {
            let error = server.error.as_deref().unwrap_or("failed");
            let text = self.paint(
                "33",
                &format!(
                    "warning: MCP server '{}' failed: {}",
                    neutralize(&server.name),
                    neutralize(error)
                ),
            );
            self.line(&text);
            for line in &server.stderr {
                let text = self.paint("2", &format!("  {}", neutralize(line)));
                self.line(&text);
            }
        }
        if let Some(notice) = untrusted {
            for line in notice.lines() {
                let line = neutralize(line);
                let text = if line.starts_with("hint:") {
                    line.to_string()
                } else {
                    self.paint("33", &format!("warning: {line}"))
                };
                self.line(&text);
            }
        }
    }

    /// `memory: injected 3 entries (3f9a1c2e, 5b10d4aa, c0ffee12)`; a transcript lists each entry's text too.
    /// Entries may come from someone else's push, so their text is neutralised.
    fn memory(&mut self, action: &str, entries: &[crate::protocol::MemoryItem]) {
        let ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
        let line = format!(
            "memory: {action} {} entr{} ({})",
            entries.len(),
            if entries.len() == 1 { "y" } else { "ies" },
            neutralize(&ids.join(", "))
        );
        let text = self.paint("2", &line);
        self.line(&text);
        if self.replay {
            for entry in entries.iter().filter(|e| !e.text.is_empty()) {
                let first = entry.text.lines().next().unwrap_or_default();
                let text = format!("   {} {}", neutralize(&entry.id), neutralize(first));
                self.line(&text);
            }
        }
    }

    /// A subagent's event: live, each of its tool calls as a dim line under the call that started it; in a
    /// replay, counted and shown as one line before that call's result.
    fn nested(&mut self, parent: &str, event: &Event) {
        let Event::ToolCall { name, label, .. } = event else {
            return;
        };
        if self.replay {
            match self.nested.iter_mut().find(|(p, _)| p == parent) {
                Some((_, names)) => names.push(name.to_string()),
                None => self
                    .nested
                    .push((parent.to_owned(), vec![name.to_string()])),
            }
            return;
        }
        let text = self.paint("2", &format!("  ┊ {}", neutralize(label)));
        self.line(&text);
    }

    /// The collapsed line of the subagent started by call `id`, if it made tool calls.
    fn collapsed(&mut self, id: &str) {
        let Some(at) = self.nested.iter().position(|(p, _)| p == id) else {
            return;
        };
        let (_, names) = self.nested.remove(at);
        let mut counts: Vec<(String, usize)> = Vec::new();
        for name in names.iter() {
            match counts.iter_mut().find(|(n, _)| n == name) {
                Some((_, count)) => *count += 1,
                None => counts.push((name.clone(), 1)),
            }
        }
        let parts: Vec<String> = counts.iter().map(|(n, c)| format!("{n} ×{c}")).collect();
        let text = format!(
            "  ┊ explorer: {} tool call{} ({})",
            names.len(),
            plural(names.len()),
            neutralize(&parts.join(", "))
        );
        let painted = self.paint("2", &text);
        self.line(&painted);
    }

    fn step(&mut self, commit: &str, step: u32, files: &[std::path::PathBuf]) {
        let short = commit.get(..7).unwrap_or(commit);
        // Live, a long list would scroll the session away; the transcript is the full record.
        let what = if self.replay {
            let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
            names.join(", ")
        } else {
            format!("{} file{}", files.len(), plural(files.len()))
        };
        let text = format!("  ⎿ step {step}: {short} ({})", neutralize(&what));
        let painted = self.paint("32", &text);
        self.line(&painted);
    }

    /// `● check `cargo test` on the staged tree` (`attempt N` after the first run).
    fn check_started(&mut self, attempt: u32, command: &str, tree: &str) {
        let bullet = self.paint("36", "●");
        let again = if attempt > 0 {
            format!(" (after attempt {attempt})")
        } else {
            String::new()
        };
        let text = format!(
            "{bullet} check `{}` on {}{again}",
            neutralize(command),
            neutralize(tree)
        );
        self.line(&text);
    }

    /// `⎿ passed (exit 0, 0.4 s)`, or `⎿ failed: exit 1 after 3.2 s` with the output's last lines.
    fn check(&mut self, passed: bool, end: &str, duration_ms: u64, output: &str) {
        let secs = duration_ms as f64 / 1000.0;
        if passed {
            let text = self.paint("32", &format!("  ⎿ passed ({secs:.1} s)"));
            self.line(&text);
            return;
        }
        let text = self.paint(
            "31",
            &format!("  ⎿ failed: {} after {secs:.1} s", neutralize(end)),
        );
        self.line(&text);
        let lines: Vec<&str> = output.trim_end().lines().collect();
        for line in &lines[lines.len().saturating_sub(CHECK_LINES)..] {
            let text = self.paint("2", &format!("    {}", neutralize(line)));
            self.line(&text);
        }
    }

    fn done(&mut self, answer: &str) {
        if self.mid_line {
            self.line("");
        }
        if self.answer_on_stdout && !answer.is_empty() {
            let mut out = io::stdout().lock();
            // Raw into a file or pipe (`> answer.md`), neutralised on a terminal.
            let answer = if out.is_terminal() {
                neutralize(answer)
            } else {
                answer.into()
            };
            let _ = writeln!(out, "{}", answer.trim_end());
            let _ = out.flush();
        }
    }

    fn history(&mut self, event: &Event) {
        match event {
            Event::Prompt { content: text } => {
                let mut lines = String::from("\n");
                for line in text.lines() {
                    lines.push_str("> ");
                    lines.push_str(&neutralize(line));
                    lines.push('\n');
                }
                self.line(lines.trim_end_matches('\n'));
            }
            Event::Context {
                kind,
                path,
                content,
            } => {
                let text = if *kind == "instructions" {
                    format!("instructions from {path}")
                } else {
                    format!("{kind}: {content}")
                };
                self.marker(&text);
            }
            Event::Plan {
                done, total, text, ..
            } => {
                self.marker(&format!("plan ({done} of {total} done)"));
                for line in text.lines() {
                    let indented = format!("   {}", neutralize(line));
                    self.line(&indented);
                }
            }
            Event::Compaction {
                replaced,
                dropped,
                tokens_before,
                tokens_after,
            } => {
                let how = if *dropped { "dropped" } else { "summarised" };
                self.marker(&format!(
                    "context: {replaced} older messages {how} ({tokens_before} → {tokens_after} tokens)"
                ));
            }
            Event::TurnEnd { status } => self.marker(status.as_str()),
            Event::Resumed => {
                self.line("");
                self.marker("resumed");
            }
            Event::Undone { steps, to } => {
                let short = to.get(..7).unwrap_or(to);
                self.marker(&format!(
                    "undo {steps} step{} (now at {short})",
                    plural(*steps as usize)
                ));
            }
            Event::Discarded => self.marker("discarded (checkout and branch removed)"),
            _ => {}
        }
    }
}

impl<W: Write + Send> Sink for HumanSink<W> {
    fn emit(&mut self, event: &Event) {
        if let Event::Reasoning { delta: text } = event {
            self.reasoning(text);
            return;
        }
        if !matches!(event, Event::RequestUsage { .. } | Event::Usage { .. }) {
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
                let painted = self.paint("2", &neutralize(&text));
                self.line(&painted);
            }
            Event::Text { delta } => self.text(delta),
            Event::Reasoning { .. } | Event::RequestUsage { .. } | Event::Usage { .. } => {}
            // `fix` prints its own ending, with the commands that take the fix.
            Event::Fixed { .. } => {}
            // The terminal shows the tool line and its result; diffs are for editors (`git agent diff`
            // shows the change).
            Event::Diff { .. } => {}
            // Live, the `plan` tool line says it changed (`/plan` and `show` print it); a transcript lists it.
            Event::Plan { .. } if !self.replay => {}
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
            Event::ToolResult {
                id, ok, summary, ..
            } => {
                self.collapsed(id);
                // Said in words too, not only in red: a pipe, a file and NO_COLOR have no colours.
                let mark = if *ok { "" } else { "error: " };
                let text = format!("  ⎿ {mark}{}", neutralize(summary));
                let painted = self.paint(if *ok { "2" } else { "31" }, &text);
                self.line(&painted);
            }
            Event::Step {
                commit,
                step,
                files,
            } => self.step(commit, *step, files),
            Event::Diagnostics { summary, .. } => {
                // One dim line under the tool line; the problems themselves are in the result.
                let text = format!("  ⎿ {}", neutralize(summary));
                let painted = self.paint("2", &text);
                self.line(&painted);
            }
            Event::Summary {
                branch,
                steps,
                base,
                usage,
                requests,
                cost,
            } => {
                let text = format!(
                    "\n{branch}: {steps} step{} · {} · cost {}\nreview: git log -p {base}..{branch}",
                    plural(*steps as usize),
                    usage_line(usage, *requests),
                    crate::protocol::format_usd(*cost),
                );
                self.line(&text);
            }
            Event::Done { answer, .. } => self.done(answer),
            Event::Warning { message } | Event::Notice { message, .. } => {
                let text = self.paint("33", &format!("warning: {}", neutralize(message)));
                self.line(&text);
            }
            Event::Progress { what, done, total } => self.progress(what, *done, *total),
            Event::CheckStarted {
                attempt,
                command,
                tree,
            } => self.check_started(*attempt, command, tree),
            Event::Check {
                attempt,
                command,
                tree,
                passed,
                end,
                duration_ms,
                output,
                ..
            } => {
                if self.replay {
                    // A transcript has no separate start event: the result stands for both.
                    self.check_started(*attempt, command, tree);
                }
                self.check(*passed, end, *duration_ms, output);
            }
            Event::Mcp {
                connected,
                total,
                servers,
                untrusted,
            } => self.mcp(*connected, *total, servers, untrusted.as_deref()),
            Event::Error { message } => {
                let text = format!("error: {}", neutralize(message));
                self.line(&text);
            }
            Event::Memory { action, entries } => self.memory(action, entries),
            Event::Nested { parent, event } => self.nested(parent, event),
            Event::Hook {
                event,
                command,
                outcome,
                duration_ms,
                ..
            } => {
                // One dim line: hooks are the user's own machinery, worth seeing but not reading.
                let command: String = command
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .take(60)
                    .collect();
                let line = format!("hook {event} `{command}`: {outcome} ({duration_ms} ms)");
                let text = self.paint("2", &neutralize(&line));
                self.line(&text);
            }
            Event::Prompt { .. }
            | Event::Context { .. }
            | Event::Plan { .. }
            | Event::Compaction { .. }
            | Event::TurnEnd { .. }
            | Event::Resumed
            | Event::Undone { .. }
            | Event::Discarded => self.history(event),
        }
    }
}

/// How many of a failed check's last output lines are shown (the session log and `--json` have more).
const CHECK_LINES: usize = 12;

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
        plural(requests as usize)
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replayed(events: &[Event]) -> String {
        let mut sink = HumanSink::replay(Vec::new(), false);
        for event in events {
            sink.emit(event);
        }
        String::from_utf8(sink.finish()).expect("the renderer writes UTF-8")
    }

    #[test]
    fn a_replay_sets_replies_and_prompts_apart_and_names_step_files() {
        let files = vec![std::path::PathBuf::from("a.txt"), "b\u{1b}[2J.txt".into()];
        let text = replayed(&[
            Event::Prompt {
                content: "goal\nsecond".into(),
            },
            Event::Text {
                delta: "I will.".into(),
            },
            Event::ToolCall {
                id: "1".into(),
                name: "write_file".into(),
                kind: crate::protocol::ToolKind::Edit,
                label: "write a.txt".into(),
                input: serde_json::Value::Null,
                location: None,
            },
            Event::ToolResult {
                id: "1".into(),
                ok: false,
                summary: "no \u{7}bell".into(),
                output: String::new(),
            },
            Event::Step {
                commit: "0123456789".into(),
                step: 1,
                files,
            },
            Event::TurnEnd {
                status: crate::protocol::Status::Done,
            },
            Event::Resumed,
            Event::Text {
                delta: "tail".into(),
            },
        ]);
        let expected = [
            "",
            "> goal",
            "> second",
            "",
            "I will.",
            "● write a.txt",
            "  ⎿ error: no \u{fffd}bell",
            "  ⎿ step 1: 0123456 (a.txt, b\u{fffd}[2J.txt)",
            "-- done",
            "",
            "-- resumed",
            "",
            "tail",
        ];
        assert_eq!(text, expected.map(|l| format!("{l}\n")).concat());
    }
}
