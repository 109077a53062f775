//! The one human renderer of a session: streamed text, one line per tool call and result, step commits, and
//! the markers of a session's history. `ask` renders live to stderr; `git agent show` replays a stored
//! session through the same code to stdout, so both neutralise what the model and its tools wrote in the same
//! way (a transcript once let OSC 52 clipboard writes and screen clears through), and print the same bytes
//! (issue 24: a test holds `show` to what `ask` printed). The only difference between the two is where they
//! write: a replay sends nothing to stdout on its own and never draws a counter in place.
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
    /// Text is being written (the next text goes on; anything else ends it).
    in_text: bool,
    /// Text or reasoning streamed since the last reply: live, the reply's own event does not show it again.
    streamed: bool,
    /// The attempt of the check whose start was shown; a stored check result without its start shows both.
    check_started: Option<u32>,
    /// A prompt not shown yet: it waits for what follows it, so a run that fails before anything else
    /// happens leaves nothing but its error, and the session line (shown once the model first answers)
    /// comes before it.
    prompt: Option<String>,
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
            in_text: false,
            streamed: false,
            check_started: None,
            prompt: None,
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
            in_text: false,
            streamed: false,
            check_started: None,
            prompt: None,
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
            in_text: false,
            streamed: false,
            check_started: None,
            prompt: None,
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
        self.show_prompt();
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
        self.show_prompt();
        self.streamed = true;
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

    /// Writes `text` (already neutralised) as whole lines, after ending streamed text (and the prompt that
    /// waits for what follows it).
    fn line(&mut self, text: &str) {
        self.show_prompt();
        self.put_line(text);
    }

    /// [`Self::line`], leaving a waiting prompt waiting.
    fn put_line(&mut self, text: &str) {
        if self.mid_line {
            let _ = writeln!(self.out);
        }
        let _ = writeln!(self.out, "{text}");
        let _ = self.out.flush();
        self.mid_line = false;
        self.in_text = false;
    }

    /// Long work, as one line that counts up in place on a terminal (nothing elsewhere: a log file gets the
    /// outcome, not a counter).
    fn progress(&mut self, what: &str, done: u64, total: u64) {
        if !self.tty {
            return;
        }
        self.show_prompt();
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
        self.show_prompt();
        self.streamed = true;
        if !self.in_text {
            // A reply's text is set off from what came before.
            self.in_text = true;
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

    /// A complete reply: live, its text and reasoning have streamed already; replayed, they are shown now, as
    /// they streamed (the text without trailing blanks, which streamed or not print the same).
    fn reply(&mut self, content: &str, thinking: &[crate::protocol::ThinkingBlock]) {
        if !self.streamed {
            for block in thinking {
                if let crate::protocol::ThinkingBlock::Thinking { thinking, .. } = block {
                    self.reasoning(thinking);
                }
            }
            if !content.trim().is_empty() {
                self.end_reasoning();
                self.text(content.trim_end());
            }
        }
        self.streamed = false;
        self.in_text = false;
    }

    /// `memory: injected 3 entries (3f9a1c2e, 5b10d4aa, c0ffee12)`, then each entry's text.
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
        for entry in entries.iter().filter(|e| !e.text.is_empty()) {
            let first = entry.text.lines().next().unwrap_or_default();
            let text = format!("   {} {}", neutralize(&entry.id), neutralize(first));
            self.line(&text);
        }
    }

    /// A subagent's event: each of its tool calls as a dim line under the call that started it.
    fn nested(&mut self, event: &Event) {
        let Event::ToolCall { label, .. } = event else {
            return;
        };
        let text = self.paint("2", &format!("  ┊ {}", neutralize(label)));
        self.line(&text);
    }

    fn step(&mut self, commit: &str, step: u32, files: &[std::path::PathBuf]) {
        let short = commit.get(..7).unwrap_or(commit);
        // A long list would scroll the session away (`git agent diff` has them all).
        let mut names: Vec<String> = files
            .iter()
            .take(STEP_FILES)
            .map(|f| f.display().to_string())
            .collect();
        if files.len() > STEP_FILES {
            names.push(format!("{} more", files.len() - STEP_FILES));
        }
        let what = names.join(", ");
        let text = format!("  ⎿ step {step}: {short} ({})", neutralize(&what));
        let painted = self.paint("32", &text);
        self.line(&painted);
    }

    /// `● check `cargo test` on the staged tree` (`attempt N` after the first run).
    fn check_started(&mut self, attempt: u32, command: &str, tree: &str) {
        self.check_started = Some(attempt);
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

    /// The prompt waiting to be shown, if any: a blank line, then `> ` before each of its lines.
    fn show_prompt(&mut self) {
        let Some(text) = self.prompt.take() else {
            return;
        };
        let mut lines = String::from("\n");
        for line in text.lines() {
            lines.push_str("> ");
            lines.push_str(&neutralize(line));
            lines.push('\n');
        }
        self.line(lines.trim_end_matches('\n'));
    }

    fn history(&mut self, event: &Event) {
        match event {
            Event::Context {
                kind,
                path,
                content,
            } => {
                let text = match kind.as_str() {
                    // Listed entry by entry by its `memory` event.
                    "memory" => return,
                    "instructions" => format!("instructions from {path}"),
                    _ => format!("{kind}: {}", first_line(content, 100)),
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
                ..
            } => {
                let how = if *dropped { "dropped" } else { "summarised" };
                self.marker(&format!(
                    "context: {replaced} older messages {how} ({tokens_before} → {tokens_after} tokens)"
                ));
            }
            Event::TurnEnd { status, .. } => self.marker(status.as_str()),
            Event::Resumed => {
                self.line("");
                self.marker("resumed");
            }
            Event::Undone { steps, to, .. } => {
                let short = to.get(..7).unwrap_or(to);
                self.marker(&format!(
                    "undo {steps} step{} (now at {short})",
                    plural(*steps as usize)
                ));
            }
            Event::Discarded { .. } => self.marker("discarded (checkout and branch removed)"),
            _ => {}
        }
    }
}

impl<W: Write + Send> Sink for HumanSink<W> {
    fn emit(&mut self, event: &Event) {
        if let Event::Prompt { content } = event {
            self.show_prompt();
            self.prompt = Some(content.clone());
            return;
        }
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
                // Before the prompt it answers: the line says where the session's output begins.
                self.put_line(&painted);
            }
            Event::Text { delta } => self.text(delta),
            Event::Reply {
                content, thinking, ..
            } => self.reply(content, thinking),
            Event::Reasoning { .. } | Event::RequestUsage { .. } | Event::Usage { .. } => {}
            // `fix` prints its own ending, with the commands that take the fix.
            Event::Fixed { .. } => {}
            // The terminal shows the tool line and its result; diffs are for editors (`git agent diff`
            // shows the change).
            Event::Diff { .. } => {}
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
                // Said in words too, not only in red: a pipe, a file and NO_COLOR have no colours.
                let mark = if *ok { "" } else { "error: " };
                let text = format!("  ⎿ {mark}{}", neutralize(&first_line(summary, 120)));
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
                if self.check_started != Some(*attempt) {
                    // Stored without its start (as `fix` records it): the result stands for both.
                    self.check_started(*attempt, command, tree);
                }
                self.check_started = None;
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
                // Not after a waiting prompt: a run that fails at its first request prints one error line.
                self.put_line(&text);
            }
            Event::Memory { action, entries } => self.memory(action, entries),
            Event::Nested { event, .. } => self.nested(event),
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
            Event::Image {
                source,
                media_type,
                bytes,
                ..
            } => {
                let text = format!(
                    "image {} ({media_type}, {}) sent to the model",
                    neutralize(source),
                    image_size(*bytes)
                );
                let painted = self.paint("2", &text);
                self.line(&painted);
            }
            Event::WebResults { query, results } => {
                let text = web_results_text(query, results);
                let painted = self.paint("2", &neutralize(&text));
                self.line(&painted);
            }
            Event::Prompt { .. }
            | Event::Context { .. }
            | Event::Plan { .. }
            | Event::Compaction { .. }
            | Event::TurnEnd { .. }
            | Event::Resumed
            | Event::Undone { .. }
            | Event::Discarded { .. } => self.history(event),
            // Proposals and writes are kept for memory's bookkeeping; the `remember` call and the memory
            // event beside them are what was shown.
            Event::MemoryProposal { .. } | Event::MemoryWritten { .. } => {}
        }
    }
}

/// How many of a failed check's last output lines are shown (the session log and `--json` have more).
const CHECK_LINES: usize = 12;

/// How many of a step's files its line names.
const STEP_FILES: usize = 10;

/// The first line of `text`, cut to `max` characters; `…` says something was left out.
fn first_line(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or_default();
    if first.chars().count() > max || first.len() < text.trim_end().len() {
        let cut: String = first.chars().take(max).collect();
        format!("{cut}…")
    } else {
        first.to_string()
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

/// An image's size in words: bytes, KB or MB (powers of 1024, as the size cap is given).
fn image_size(bytes: u64) -> String {
    match bytes {
        0..1024 => format!("{bytes} bytes"),
        1024..1_048_576 => format!("{:.1} KB", bytes as f64 / 1024.0),
        _ => format!("{:.1} MB", bytes as f64 / 1_048_576.0),
    }
}

/// A web search's results as lines for people: the query, then each title and URL (outside text: the caller
/// neutralises it).
pub(crate) fn web_results_text(query: &str, results: &[crate::protocol::WebResult]) -> String {
    let mut text = format!("web search \"{query}\": {} results", results.len());
    for result in results {
        text.push_str(&format!("\n  {} <{}>", result.title, result.url));
    }
    text
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

    /// A reply shown as it streamed (reasoning, then text deltas, then the reply event) prints what the
    /// reply event alone prints when replayed: `show` holds to the live run byte for byte.
    #[test]
    fn a_streamed_reply_and_its_replay_print_the_same() {
        let thinking = vec![crate::protocol::ThinkingBlock::Thinking {
            thinking: "let me see".into(),
            signature: "s".into(),
        }];
        let reply = Event::Reply {
            content: "Hello there.\n".into(),
            tool_calls: Vec::new(),
            thinking: thinking.clone(),
        };
        let prompt = Event::Prompt {
            content: "hi".into(),
        };
        let live = replayed(&[
            prompt.clone(),
            Event::Reasoning {
                delta: "let ".into(),
            },
            Event::Reasoning {
                delta: "me see".into(),
            },
            Event::Text {
                delta: "Hello ".into(),
            },
            Event::Text {
                delta: "there.\n".into(),
            },
            reply.clone(),
        ]);
        let stored = replayed(&[prompt, reply]);
        assert_eq!(live, stored);
        assert_eq!(stored, "\n> hi\nthinking… (10 chars)\n\nHello there.\n");
        // A reply of tool calls only: its reasoning streamed, and is not counted twice.
        let calls_only = Event::Reply {
            content: String::new(),
            tool_calls: Vec::new(),
            thinking,
        };
        let live = replayed(&[
            Event::Reasoning {
                delta: "let me see".into(),
            },
            calls_only.clone(),
        ]);
        assert_eq!(live, replayed(&[calls_only]));
        assert_eq!(live, "thinking… (10 chars)\n");
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
                answer: String::new(),
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
