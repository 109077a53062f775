//! Keeping the conversation inside the model's context window: token accounting, pruning of old tool output,
//! and compaction of older messages into a structured summary.
//!
//! The order of defences, cheapest first:
//! 1. **Pruning** (every request): tool results older than the last few turns become one-line stubs naming the
//!    call and the size cut. Old file contents and command output are what fills a window; the model's own
//!    reasoning and the user's messages are small and stay. A pruned stub never changes again, so the prompt
//!    prefix before the newest stub stays cacheable.
//! 2. **Compaction** (when the next request would pass the threshold, 80% of the window by default): the older
//!    messages are summarised by the model into goal / done so far (with commits) / confirmed facts / guesses /
//!    open questions / next step, and replaced by that summary plus the plan; the recent tail is kept verbatim,
//!    starting at a user or assistant message (a tool result without its call would be refused). The
//!    replacement is recorded in the session log, so `--resume` continues from the compacted state.
//! 3. **Dropping** (when summarising fails, or the threshold is passed again right after a compaction): the
//!    oldest messages go, with a note saying so. Compaction never runs twice in a row, so a tail that is itself
//!    too large cannot make the session summarise in a loop.
//!
//! Token counts are estimates (4 bytes a token) calibrated by the provider's reported prompt tokens whenever a
//! reply carries usage, so the estimate tracks the real tokenizer without shipping one.

use crate::config::ModelConfig;
use crate::protocol::{Message, ToolSchema, Usage};

/// Tool results in this many most recent assistant turns are never pruned.
const KEEP_TURNS: usize = 3;
/// Tool results shorter than this are not worth a stub.
const PRUNE_MIN_CHARS: usize = 400;
/// The share of the window the kept tail may use after a compaction.
const TAIL_SHARE: f64 = 0.3;
/// The share of the window the transcript sent to the summariser may use.
const SUMMARISE_SHARE: f64 = 0.5;
/// Requests that must pass after a compaction before the model is asked to summarise again.
const COMPACT_COOLDOWN: u32 = 3;
/// The window assumed for a model the table does not know and no setting names.
pub const DEFAULT_WINDOW: u64 = 32_768;
/// The smallest window an endpoint's report is waited for: a conversation below this window's threshold
/// fits whatever the probe answers, so its requests go out without waiting for the answer (taken when in).
pub const SMALLEST_WINDOW: u64 = 4_096;
/// The first line of a compaction summary or drop note in the conversation.
pub const SUMMARY_MARK: &str = "[Context summary]";
/// The first line of a pruned tool result.
const PRUNED_MARK: &str = "[output pruned";

/// How the context is managed for one session.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// The model's context window in tokens.
    pub window: u64,
    /// Compact when the next request would pass this share of the window.
    pub threshold: f64,
    pub prune: bool,
    pub compact: bool,
}

impl Settings {
    /// The one place the context settings come from. The window: `GIT_AGENT_CONTEXT_WINDOW`, else the config's
    /// `context_window` (the provider's table, else the top level), else the table of known models, else what
    /// the endpoint `reports` (awaited only when nothing before it names a window), else [`DEFAULT_WINDOW`]
    /// (and a context-overflow error lowers it for the rest of the session). The share at which to compact:
    /// `GIT_AGENT_COMPACT_AT`, else the config's `compact_at`, else 0.8. `GIT_AGENT_PRUNE=0` and
    /// `GIT_AGENT_COMPACT=0` (or `prune = false`, `compact = false` in the config) turn the two off.
    pub async fn resolve(
        model: &ModelConfig,
        reports: impl std::future::Future<Output = Option<u64>>,
    ) -> Settings {
        let window = match Settings::named_window(model) {
            Some(window) => window,
            None => reports.await.unwrap_or(DEFAULT_WINDOW),
        };
        Settings::with_window(model, window)
    }

    /// The window a setting or the table of known models names for `model`, if any (then nobody is asked).
    pub fn named_window(model: &ModelConfig) -> Option<u64> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        var("GIT_AGENT_CONTEXT_WINDOW")
            .and_then(|v| v.trim().parse().ok())
            .or(model.context.context_window)
            .filter(|w: &u64| *w > 0)
            .or_else(|| known_window(&model.model))
    }

    /// The settings for `model` with the given window (the rest as [`Settings::resolve()`] says).
    pub fn with_window(model: &ModelConfig, window: u64) -> Settings {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let config = &model.context;
        let threshold = var("GIT_AGENT_COMPACT_AT")
            .and_then(|v| v.trim().parse().ok())
            .filter(|t: &f64| *t > 0.1 && *t <= 1.0)
            .or(config.compact_at)
            .unwrap_or(0.8);
        // A variable that is set wins over the file; any value but an "off" word means on, as before.
        let switch = |name: &str, file: Option<bool>| {
            var(name)
                .map(|v| !matches!(v.trim(), "0" | "off" | "false" | "no"))
                .or(file)
                .unwrap_or(true)
        };
        Settings {
            window,
            threshold,
            prune: switch("GIT_AGENT_PRUNE", config.prune),
            compact: switch("GIT_AGENT_COMPACT", config.compact),
        }
    }
}

/// Context windows of well-known model families, matched on the model name without its provider.
pub fn known_window(model: &str) -> Option<u64> {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    const TABLE: &[(&str, u64)] = &[
        ("gpt-4.1", 1_047_576),
        ("gpt-5", 400_000),
        ("gpt-4o", 128_000),
        ("o4-mini", 200_000),
        ("o3", 200_000),
        ("claude", 200_000),
        ("gemini", 1_048_576),
        ("deepseek", 128_000),
        ("mistral-large", 128_000),
        ("codestral", 256_000),
        ("llama3.1", 131_072),
        ("llama-3.1", 131_072),
        ("qwen3", 40_960),
        ("qwen2.5-coder", 32_768),
    ];
    TABLE
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|(_, window)| *window)
}

/// Token accounting: a byte-count estimate, calibrated against what the provider reported.
#[derive(Debug, Clone)]
pub struct Accounting {
    /// Reported prompt tokens / estimated tokens of the last request that carried usage.
    ratio: f64,
    /// Estimated tokens of the tool schemas (sent with every request).
    schema_tokens: u64,
}

impl Accounting {
    pub fn new(schemas: &[ToolSchema]) -> Accounting {
        let bytes: usize = schemas
            .iter()
            .map(|s| s.name.len() + s.description.len() + s.parameters.to_string().len() + 40)
            .sum();
        Accounting {
            ratio: 1.0,
            schema_tokens: (bytes / 4) as u64,
        }
    }

    /// The tool schemas changed (an MCP server joined): the estimate keeps its calibration.
    pub fn set_schemas(&mut self, schemas: &[ToolSchema]) {
        self.schema_tokens = Accounting::new(schemas).schema_tokens;
    }

    /// Estimated prompt tokens of a request carrying `messages` (and the schemas).
    pub fn tokens(&self, messages: &[Message]) -> u64 {
        ((self.raw(messages) as f64) * self.ratio).ceil() as u64
    }

    fn raw(&self, messages: &[Message]) -> u64 {
        self.schema_tokens + messages.iter().map(message_tokens).sum::<u64>()
    }

    /// Learns from the provider's count for the request that carried `messages`. The ratio is bounded so one
    /// odd report (a server that counts nothing, or caches) cannot make the estimate absurd.
    pub fn calibrate(&mut self, messages: &[Message], usage: &Usage) {
        let raw = self.raw(messages);
        let reported = usage.input_tokens + usage.cached_tokens.min(usage.input_tokens / 2);
        if raw > 0 && usage.input_tokens > 0 {
            self.ratio = (reported as f64 / raw as f64).clamp(0.5, 2.0);
        }
    }
}

/// The tokens one image is assumed to take.
const IMAGE_TOKENS: u64 = 1600;

/// Estimated tokens of one message: its text and tool-call arguments at 4 bytes a token, plus overhead.
fn message_tokens(message: &Message) -> u64 {
    let bytes = match message {
        Message::System { content } | Message::User { content } => content.len(),
        Message::Tool {
            content,
            tool_call_id,
        } => content.len() + tool_call_id.len(),
        // What a provider charges for an image depends on its pixels (Anthropic: about 1,600 tokens for a
        // megapixel, its largest size before scaling); the bytes say little, so the largest is assumed.
        Message::Image { .. } => IMAGE_TOKENS as usize * 4,
        Message::Assistant {
            content,
            tool_calls,
            thinking,
        } => {
            content.len()
                + tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.len() + c.id.len() + 30)
                    .sum::<usize>()
                + thinking
                    .iter()
                    .map(|t| serde_json::to_string(t).map_or(0, |s| s.len()))
                    .sum::<usize>()
        }
    };
    (bytes / 4) as u64 + 8
}

/// Replaces tool results older than the last [`KEEP_TURNS`] assistant turns by one-line stubs; returns how
/// many it replaced (0 when there was nothing new to prune).
pub fn prune(messages: &mut [Message]) -> usize {
    let turns: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(m, Message::Assistant { .. }))
        .map(|(i, _)| i)
        .collect();
    let Some(&cut) = turns
        .len()
        .checked_sub(KEEP_TURNS)
        .and_then(|i| turns.get(i))
    else {
        return 0;
    };
    let mut calls = std::collections::HashMap::new();
    for message in &messages[..cut] {
        if let Message::Assistant { tool_calls, .. } = message {
            for call in tool_calls {
                calls.insert(call.id.clone(), call.clone());
            }
        }
    }
    let mut pruned = 0;
    for message in &mut messages[..cut] {
        let Message::Tool {
            tool_call_id,
            content,
        } = message
        else {
            continue;
        };
        if content.len() < PRUNE_MIN_CHARS || content.starts_with(PRUNED_MARK) {
            continue;
        }
        let call = calls
            .get(tool_call_id)
            .map(|c| {
                format!(
                    "{} {}",
                    c.name,
                    crate::tools::short(c.arguments.trim(), 160)
                )
            })
            .unwrap_or_else(|| "this call".to_owned());
        *content = format!(
            "{PRUNED_MARK} to save context: {call} returned {} bytes ({} lines); make the call again if you \
             need it]",
            content.len(),
            content.lines().count()
        );
        pruned += 1;
    }
    pruned
}

/// Where the kept tail starts: the earliest user or assistant message such that everything from it fits in
/// `budget` tokens, never before index 2 (the system prompt and one message are always replaced). `None` when
/// there is nothing older to replace.
fn tail_start(messages: &[Message], acct: &Accounting, budget: u64) -> Option<usize> {
    let mut used = 0u64;
    let mut start = messages.len();
    for (i, message) in messages.iter().enumerate().rev() {
        used += (message_tokens(message) as f64 * acct.ratio) as u64;
        if used > budget || i < 2 {
            break;
        }
        start = i;
    }
    // A tail must begin with a call's assistant message or a user message, never with a tool result.
    while start < messages.len() && matches!(messages[start], Message::Tool { .. }) {
        start += 1;
    }
    if start >= messages.len() {
        // Even the newest turn does not fit: keep it anyway, the model needs the results of its last calls.
        start = messages
            .iter()
            .rposition(|m| !matches!(m, Message::Tool { .. }))?;
    }
    (start >= 2).then_some(start)
}

/// Replaces `messages[1..start]` by one user message holding `text`.
fn replace_prefix(messages: &mut Vec<Message>, start: usize, text: String) {
    let tail = messages.split_off(start);
    messages.truncate(1);
    messages.push(Message::User { content: text });
    messages.extend(tail);
}

/// The instructions of the summarising request.
const SUMMARISER: &str = "\
You summarise the earlier part of a coding agent's session so the agent can continue without it. The agent will \
see only your summary, its plan and the most recent messages. Be specific: file paths, function names, commands, \
error messages, commit ids. Write exactly these sections in Markdown:

## Goal
The user's goal, in their words where possible.
## Done so far
What was changed and verified, with the step commit ids given below.
## Confirmed facts
Only what tool output showed (file contents, test results). 
## Guesses
Beliefs not yet verified; label them as such.
## Open questions
## Next step
The single next action.";

/// The older messages as text for the summariser, each tool result cut, the whole at most `max` bytes (the
/// middle goes first: the start holds the goal, the end the latest state).
fn transcript(messages: &[Message], max: usize) -> String {
    let mut out = String::new();
    for message in messages {
        match message {
            Message::System { .. } => {}
            Message::User { content } => out.push_str(&format!("[user]\n{content}\n\n")),
            Message::Assistant {
                content,
                tool_calls,
                ..
            } => {
                out.push_str("[assistant]\n");
                if !content.trim().is_empty() {
                    out.push_str(content.trim());
                    out.push('\n');
                }
                for call in tool_calls {
                    out.push_str(&format!(
                        "call {} {}\n",
                        call.name,
                        crate::tools::short(call.arguments.trim(), 300)
                    ));
                }
                out.push('\n');
            }
            Message::Tool { content, .. } => {
                out.push_str(&format!("[tool result]\n{}\n\n", head_tail(content, 1500)));
            }
            Message::Image { image } => {
                out.push_str(&format!("[image: {}]\n\n", image.source));
            }
        }
    }
    head_tail(&out, max)
}

/// At most `max` bytes of `text`: its head and tail with a marker between them.
fn head_tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let half = max / 2;
    let mut head = half;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - half;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}\n[… {} bytes cut …]\n{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

/// What the session knows outside the conversation, re-stated in every summary.
pub struct Facts<'a> {
    pub goal: &'a str,
    pub plan: &'a super::plan::Plan,
    /// `step N: <commit> (files)` lines.
    pub steps: &'a [String],
}

/// The message that replaces the older part of the conversation.
fn summary_message(how: &str, body: &str, facts: &Facts<'_>) -> String {
    let mut out = format!(
        "{SUMMARY_MARK}\n{how}\n\nThe user's goal (verbatim):\n{}\n",
        facts.goal.trim()
    );
    if !body.trim().is_empty() {
        out.push_str(&format!("\n{}\n", body.trim()));
    }
    if !facts.plan.is_empty() {
        out.push_str(&format!(
            "\nYour plan (from plan_update):\n{}",
            facts.plan.render()
        ));
    }
    if !facts.steps.is_empty() {
        out.push_str("\nStep commits so far:\n");
        for step in facts.steps {
            out.push_str(&format!("- {step}\n"));
        }
    }
    out
}

/// The body of an earlier summary, so a drop note does not lose it.
fn earlier_summary(messages: &[Message]) -> Option<String> {
    match messages.get(1) {
        Some(Message::User { content }) if content.starts_with(SUMMARY_MARK) => {
            Some(content.clone())
        }
        _ => None,
    }
}

/// The context management of one session: its settings, the token accounting, and when it last compacted.
///
/// It works on the conversation it is given and never talks to the model: when a compaction is due
/// ([`ContextState::prepare()`]), the caller sends the summarising request ([`ContextState::summary_request()`])
/// and hands the answer (or `None`) to [`ContextState::apply()`].
#[derive(Debug)]
pub struct ContextState {
    pub settings: Settings,
    pub accounting: Accounting,
    /// The request count at the last compaction or drop.
    last_compaction: Option<u32>,
    /// The session's model requests so far (summaries not counted), for the cooldown.
    requests: u32,
}

/// A compaction found due by [`ContextState::prepare()`]: `messages[1..start]` are to be replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    start: usize,
    /// The last compaction was too recent to summarise again: the older messages are dropped instead.
    recent: bool,
    /// Estimated tokens before.
    before: u64,
}

/// What a compaction did, for the session log and the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    /// The message that replaced the older ones.
    pub summary: String,
    /// Messages kept after the summary.
    pub kept: u64,
    pub replaced: u64,
    /// Dropped with a note rather than summarised.
    pub fallback: bool,
    pub tokens_before: u64,
    pub tokens_after: u64,
}

impl ContextState {
    pub fn new(settings: Settings, schemas: &[ToolSchema]) -> ContextState {
        ContextState {
            settings,
            accounting: Accounting::new(schemas),
            last_compaction: None,
            requests: 0,
        }
    }

    /// Counts one model request of the session, before it is sent.
    pub fn count_request(&mut self) {
        self.requests += 1;
    }

    /// The session's model requests in this process so far (summaries not counted).
    pub fn requests(&self) -> u32 {
        self.requests
    }

    /// Estimated prompt tokens of a request carrying `messages`.
    pub fn tokens(&self, messages: &[Message]) -> u64 {
        self.accounting.tokens(messages)
    }

    /// Whether the window an endpoint reports could change what the next request needs: the conversation is
    /// past the threshold of the [`SMALLEST_WINDOW`].
    pub fn window_matters(&self, messages: &[Message]) -> bool {
        let floor = (SMALLEST_WINDOW as f64 * self.settings.threshold) as u64;
        self.accounting.tokens(messages) > floor
    }

    /// Called before every request: prunes, and says whether the older messages must be compacted (the next
    /// request would pass the threshold). `force` (the user asked) compacts whatever the size and settings,
    /// keeping only the newest exchange.
    pub fn prepare(&self, messages: &mut [Message], force: bool) -> Option<Pending> {
        let settings = &self.settings;
        if settings.prune {
            prune(messages);
        }
        let limit = (settings.window as f64 * settings.threshold) as u64;
        let before = self.accounting.tokens(messages);
        if !force && (!settings.compact || before <= limit) {
            return None;
        }
        let recent = !force
            && self
                .last_compaction
                .is_some_and(|at| self.requests < at + COMPACT_COOLDOWN);
        let tail_budget = if force {
            0
        } else {
            (settings.window as f64 * TAIL_SHARE) as u64
        };
        let start = tail_start(messages, &self.accounting, tail_budget)?;
        Some(Pending {
            start,
            recent,
            before,
        })
    }

    /// The request (system and user message) that asks the model to summarise what `pending` replaces, with
    /// the step commits `steps` to cite and an optional `focus` from the user; `None` when the messages are to
    /// be dropped without asking (a compaction just happened).
    pub fn summary_request(
        &self,
        pending: &Pending,
        messages: &[Message],
        steps: &[String],
        focus: Option<&str>,
    ) -> Option<[Message; 2]> {
        if pending.recent {
            return None;
        }
        let older = &messages[1..pending.start];
        let max_bytes =
            (self.settings.window as f64 * SUMMARISE_SHARE / self.accounting.ratio * 4.0) as usize;
        let mut text = format!(
            "The session so far:\n\n{}",
            transcript(older, max_bytes.max(2000))
        );
        if !steps.is_empty() {
            text.push_str("\nStep commits (use these ids):\n");
            for step in steps {
                text.push_str(&format!("- {step}\n"));
            }
        }
        if let Some(focus) = focus.map(str::trim).filter(|f| !f.is_empty()) {
            text.push_str(&format!(
                "\nThe user asks the summary to focus on: {focus}\n"
            ));
        }
        Some([
            Message::System {
                content: SUMMARISER.to_owned(),
            },
            Message::User { content: text },
        ])
    }

    /// Replaces the older messages by the model's `summary`, or by a note that they were dropped when there is
    /// none (summarising failed, or was not asked for); the goal, plan and steps in `facts` are restated.
    pub fn apply(
        &mut self,
        messages: &mut Vec<Message>,
        pending: Pending,
        summary: Option<String>,
        facts: &Facts<'_>,
    ) -> Compacted {
        let start = pending.start;
        let (text, fallback) = match summary {
            Some(body) => (
                summary_message(
                    "Earlier messages of this session were replaced by this summary.",
                    &body,
                    facts,
                ),
                false,
            ),
            None => {
                let how = format!(
                    "{} earlier messages were dropped to fit the context window{}.",
                    start - 1,
                    if pending.recent {
                        ""
                    } else {
                        " (summarising them failed)"
                    }
                );
                let body = earlier_summary(messages).unwrap_or_default();
                (summary_message(&how, &body, facts), true)
            }
        };
        let replaced = start - 1;
        replace_prefix(messages, start, text.clone());
        let after = self.accounting.tokens(messages);
        self.last_compaction = Some(self.requests);
        Compacted {
            summary: text,
            kept: (messages.len() - 2) as u64,
            replaced: replaced as u64,
            fallback,
            tokens_before: pending.before,
            tokens_after: after,
        }
    }

    /// Another model takes over (`/model`): its settings, and an estimate calibrated anew for its tokenizer.
    pub fn switch_model(&mut self, settings: Settings, schemas: &[ToolSchema]) {
        self.settings = settings;
        self.accounting = Accounting::new(schemas);
    }

    /// The provider refused `messages` as too long: the window is at most their size, whatever the settings
    /// say, and an overflow is not a compaction loop, so the cooldown starts over.
    pub fn learn_window(&mut self, messages: &[Message]) {
        let refused = self.accounting.tokens(messages);
        let window = &mut self.settings.window;
        *window = (*window).min(refused).max(1024);
        self.last_compaction = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ToolCall;

    fn turn(id: &str, output: &str) -> Vec<Message> {
        vec![
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: id.into(),
                    name: "read_file".into(),
                    arguments: format!(r#"{{"path":"{id}.rs"}}"#),
                }],
                thinking: vec![],
            },
            Message::Tool {
                tool_call_id: id.into(),
                content: output.into(),
            },
        ]
    }

    fn conversation(turns: usize, size: usize) -> Vec<Message> {
        let mut m = vec![
            Message::System {
                content: "sys".into(),
            },
            Message::User {
                content: "goal".into(),
            },
        ];
        for i in 0..turns {
            m.extend(turn(&format!("c{i}"), &"x".repeat(size)));
        }
        m
    }

    #[test]
    fn pruning_keeps_the_last_turns_and_names_the_call() {
        let mut m = conversation(5, 1000);
        assert_eq!(prune(&mut m), 2);
        assert_eq!(prune(&mut m), 0, "idempotent");
        let Message::Tool { content, .. } = &m[3] else {
            panic!()
        };
        assert!(content.starts_with(PRUNED_MARK), "{content}");
        assert!(
            content.contains(r#"read_file {"path":"c0.rs"}"#),
            "{content}"
        );
        assert!(content.contains("1000 bytes"), "{content}");
        let Message::Tool { content, .. } = &m[7] else {
            panic!()
        };
        assert_eq!(content.len(), 1000, "the last three turns stay");
    }

    #[test]
    fn the_tail_never_starts_at_a_tool_result() {
        let m = conversation(10, 400);
        let acct = Accounting::new(&[]);
        for budget in [0, 50, 150, 250, 400, 10_000] {
            if let Some(start) = tail_start(&m, &acct, budget) {
                assert!(start >= 2);
                assert!(matches!(
                    m[start],
                    Message::Assistant { .. } | Message::User { .. }
                ));
            }
        }
        // Nothing fits: the newest turn is kept anyway.
        assert_eq!(tail_start(&m, &acct, 0), Some(m.len() - 2));
        let mut m = m;
        replace_prefix(&mut m, 18, "summary".into());
        assert_eq!(m.len(), 1 + 1 + 4);
        assert!(matches!(&m[1], Message::User { content } if content == "summary"));
    }

    #[test]
    fn calibration_follows_the_provider() {
        let m = conversation(2, 4000);
        let mut acct = Accounting::new(&[]);
        let estimate = acct.tokens(&m);
        acct.calibrate(
            &m,
            &Usage {
                input_tokens: estimate * 3 / 2,
                ..Usage::default()
            },
        );
        let calibrated = acct.tokens(&m);
        assert!(calibrated > estimate * 14 / 10 && calibrated < estimate * 16 / 10);
        acct.calibrate(
            &m,
            &Usage {
                input_tokens: 1,
                ..Usage::default()
            },
        );
        assert!(acct.tokens(&m) >= estimate / 2, "bounded");
    }

    #[test]
    fn known_windows() {
        assert_eq!(known_window("claude-sonnet-4-5"), Some(200_000));
        assert_eq!(
            known_window("openrouter/anthropic/claude-3.7"),
            Some(200_000)
        );
        assert_eq!(known_window("qwen3:8b"), Some(40_960));
        assert_eq!(known_window("test-model"), None);
    }

    #[test]
    fn transcripts_are_capped_in_the_middle() {
        let m = conversation(40, 3000);
        let t = transcript(&m[1..], 5000);
        assert!(t.len() < 5100);
        assert!(t.starts_with("[user]\ngoal"));
        assert!(t.contains("bytes cut"));
    }
}
