//! The shared vocabulary, a leaf that depends on nothing else in the crate.
//!
//! The conversation ([`Message`], [`ToolCall`], [`ThinkingBlock`]), what a tool looks like to the model
//! ([`ToolSchema`]), token [`Usage`], the agent's output [`Event`]s and the question a risky call puts to the
//! user ([`ApprovalRequest`] / [`Approval`]). The model clients, the tools, the front-ends and the agent speak
//! these types and none of each other's, so a new front-end (chat, ACP, a hook) needs nothing but this module
//! to listen to a session ([`Sink`]) and answer its questions ([`Approver`]). Text from outside is shown
//! through [`Untrusted`].

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

/// One tool call requested by the model, with its arguments as the raw JSON text the model produced.
///
/// The text is parsed by the agent only once the call is complete, so malformed arguments can be reported
/// back to the model instead of aborting the turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One message of the conversation, provider-neutral.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// The model's reasoning blocks, which Anthropic requires back unchanged next to the tool calls they
        /// led to; other providers ignore them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        thinking: Vec<ThinkingBlock>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
    /// An image for a vision model: one given by the user (`--image`), or one a tool returned (`read_file`
    /// of a PNG, an MCP tool). It belongs to the message before it; the wire formats place it where their
    /// API allows (after the run of tool results it follows).
    Image {
        image: Image,
    },
}

/// An image as the model gets it: its type, sniffed from the bytes, and the bytes in base64 (what both wire
/// formats carry).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    /// The bytes, base64 (standard alphabet, padded); empty until loaded from the session log on resume.
    pub data: String,
    /// Where it came from, for people and the model: a path, `read_file assets/logo.png`, an MCP tool.
    pub source: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// The git blob holding it in the session log (hex), once recorded there.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub blob: String,
}

/// One reasoning block of an Anthropic reply, kept verbatim (its signature covers the text) so it can be
/// sent back; serialized exactly as the Messages API spells it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ThinkingBlock {
    Thinking {
        thinking: String,
        signature: String,
    },
    /// Reasoning the provider flagged and encrypted; `data` is opaque.
    RedactedThinking {
        data: String,
    },
}

/// What the model is told about one tool: its name, what it does and a JSON schema of its arguments.
///
/// Owned strings: tools from MCP servers are named at run time.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSchema {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

/// Token usage reported by the provider for one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_tokens += other.cached_tokens;
    }
}

/// Money spent on model requests, in USD. Once one request's model had no price the total is unknown:
/// a partial sum would read as the whole cost (issue 28: never a made-up number).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost {
    pub usd: f64,
    pub unknown: bool,
}

impl Cost {
    /// A total of `usd`, or an unknown one.
    pub fn of(usd: Option<f64>) -> Cost {
        Cost {
            usd: usd.unwrap_or(0.0),
            unknown: usd.is_none(),
        }
    }

    /// Adds one request's cost (`None`: its model has no price).
    pub fn add_request(&mut self, usd: Option<f64>) {
        match usd {
            Some(usd) => self.usd += usd,
            None => self.unknown = true,
        }
    }

    pub fn add(&mut self, other: &Cost) {
        self.usd += other.usd;
        self.unknown |= other.unknown;
    }

    /// The total, or `None` when it is unknown.
    pub fn known(&self) -> Option<f64> {
        (!self.unknown).then_some(self.usd)
    }
}

/// A cost in USD for people: cents for amounts of a dollar or more, four decimals below; `unknown` for none.
pub fn format_usd(cost: Option<f64>) -> String {
    match cost {
        None => "unknown".to_owned(),
        Some(usd) if usd >= 1.0 => format!("${usd:.2}"),
        Some(usd) => format!("${usd:.4}"),
    }
}

/// How a session stands, as its log records it.
///
/// Serialised to the strings logs have always held (`running`, `done`, ...), so older logs still read; a
/// string this version does not know reads as [`Status::Other`] rather than failing the whole log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Status {
    /// A turn is in progress (or the process died during one).
    #[default]
    Running,
    /// The model answered or called `finish` with `completed`.
    Done,
    /// The model called `finish` with `blocked`.
    Blocked,
    /// `--max-steps` was reached.
    MaxSteps,
    /// `--max-time` was reached.
    MaxTime,
    /// `--max-tokens` was reached.
    MaxTokens,
    /// `--max-cost` was reached.
    MaxCost,
    /// A loop guard stopped the session.
    Loop,
    /// The user interrupted (Ctrl-C).
    Interrupted,
    /// SIGTERM or SIGHUP ended the session (a cancelled CI job, `timeout`, a closed terminal).
    Terminated,
    /// A host failure ended the session.
    Error,
    /// `git agent discard` removed its branch and checkout (the log stays).
    Discarded,
    /// `git agent fix` ran out of attempts or budget with the check still failing (the branch keeps the work).
    CheckFailed,
    /// A status written by another version.
    Other(String),
}

impl Status {
    pub fn as_str(&self) -> &str {
        match self {
            Status::Running => "running",
            Status::Done => "done",
            Status::Blocked => "blocked",
            Status::MaxSteps => "max_steps",
            Status::MaxTime => "max_time",
            Status::MaxTokens => "max_tokens",
            Status::MaxCost => "max_cost",
            Status::Loop => "loop",
            Status::Interrupted => "interrupted",
            Status::Terminated => "terminated",
            Status::Error => "error",
            Status::Discarded => "discarded",
            Status::CheckFailed => "check_failed",
            Status::Other(s) => s,
        }
    }

    pub fn parse(text: &str) -> Status {
        match text {
            "running" => Status::Running,
            "done" => Status::Done,
            "blocked" => Status::Blocked,
            "max_steps" => Status::MaxSteps,
            "max_time" => Status::MaxTime,
            "max_tokens" => Status::MaxTokens,
            "max_cost" => Status::MaxCost,
            "loop" => Status::Loop,
            "interrupted" => Status::Interrupted,
            "terminated" => Status::Terminated,
            "error" => Status::Error,
            "discarded" => Status::Discarded,
            "check_failed" => Status::CheckFailed,
            other => Status::Other(other.to_string()),
        }
    }

    /// True when the session stopped without finishing its task (exit code 3).
    pub fn is_unfinished(&self) -> bool {
        matches!(
            self,
            Status::Blocked
                | Status::MaxSteps
                | Status::MaxTime
                | Status::MaxTokens
                | Status::MaxCost
                | Status::Loop
                | Status::CheckFailed
        )
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Status {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Status {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Status, D::Error> {
        let text = String::deserialize(d)?;
        Ok(Status::parse(&text))
    }
}

/// What kind of thing a tool does, for front-ends that show calls by kind (ACP's `ToolKind`) and for the
/// loop's decisions (is it a command whose changes must be found by a scan?).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    Read,
    Search,
    Edit,
    Execute,
    Think,
    Other,
}

/// How one MCP server of a session stands, for [`Event::Mcp`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct McpServerState {
    pub name: String,
    /// `starting`, `connected` or `failed`.
    pub state: &'static str,
    /// Tools it offers (when connected).
    pub tools: usize,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its last stderr lines, when it failed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stderr: Vec<String>,
}

impl<'de> Deserialize<'de> for McpServerState {
    /// Reads a stored state back; its `state` is one of the three names, and anything else (written by a
    /// newer version) reads as `failed`, the state that claims nothing.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<McpServerState, D::Error> {
        #[derive(Deserialize)]
        struct Stored {
            name: String,
            state: String,
            tools: usize,
            #[serde(default)]
            error: Option<String>,
            #[serde(default)]
            stderr: Vec<String>,
        }
        let stored = Stored::deserialize(d)?;
        Ok(McpServerState {
            name: stored.name,
            state: match stored.state.as_str() {
                "starting" => "starting",
                "connected" => "connected",
                _ => "failed",
            },
            tools: stored.tools,
            error: stored.error,
            stderr: stored.stderr,
        })
    }
}

/// One project-memory entry as front-ends show it, for [`Event::Memory`] (and as the session log records
/// the entries a session was given).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryItem {
    /// The entry's id in `refs/agent/memory` (8 hex characters).
    pub id: String,
    /// `fact`, `convention`, `pitfall` or `command`.
    pub kind: String,
    pub text: String,
    pub confidence: f64,
}

/// Something that happened in a session, in order. The agent emits them; a [`Sink`] shows them.
///
/// Owned and serialisable, so it can be stored and replayed: its serialised form (a `type` tag and the fields
/// named as DESIGN section 5 names them) reads back as the same event. `--json` prints that form
/// ([`Event::to_json`]), except that the two usage events share the type `usage` there and are told apart
/// by `scope`, and a subagent's event is printed as the event itself with a `parent` member.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    Session {
        id: String,
        branch: String,
        base: String,
        model: String,
    },
    /// Streamed assistant text: the live preview of the [`Event::Reply`] that follows it.
    Text {
        delta: String,
    },
    /// A model reply as the conversation keeps it (what `--resume` sends back): its text, the tool calls it
    /// asked for and its reasoning blocks. Recorded once the reply is complete, after its text streamed as
    /// [`Event::Text`]; a renderer shows its text only when it saw no such deltas (a replay), and its calls
    /// through their own [`Event::ToolCall`]s. Not in the JSON contract (`text` and `tool_call` are).
    Reply {
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        thinking: Vec<ThinkingBlock>,
    },
    /// Streamed reasoning (not the answer; not in the JSON contract).
    Reasoning {
        delta: String,
    },
    ToolCall {
        id: String,
        name: String,
        /// What the tool is (ACP shows calls by kind); [`ToolKind::Other`] for a call naming no tool.
        kind: ToolKind,
        label: String,
        input: serde_json::Value,
        /// The file or directory the call works on, as the model named it (checkout-relative), if it names one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        location: Option<Location>,
    },
    /// What an editing call did to one text file, just before its [`Event::ToolResult`]; only for a sink that
    /// [wants diffs](Sink::wants_diffs) (ACP shows edits as diffs). Not in the JSON contract.
    Diff {
        id: String,
        /// Checkout-relative.
        path: PathBuf,
        /// The file as the step before left it; `None` when the call created it.
        old: Option<String>,
        new: String,
    },
    ToolResult {
        id: String,
        ok: bool,
        summary: String,
        /// What the model got back (capped as the tool caps it); editors show it under the call. Not in the
        /// `--json` contract, which names the result only.
        #[serde(default)]
        output: String,
    },
    /// The safety decision on a tool call, made before it runs (audit: refused calls are recorded too).
    Permission {
        id: String,
        tool: String,
        /// `allow`, `deny` or `approved`.
        decision: String,
        /// The rule that decided (`Run(cargo test*)`, `guard:git-force-push`, `default`, ...).
        rule: String,
        reason: String,
    },
    Step {
        commit: String,
        step: u32,
        files: Vec<PathBuf>,
    },
    /// The usage of one model request (`request` counts from 1), as soon as it is known, with what the
    /// request cost in USD (`None`: the model has no price) and what the session has cost so far.
    RequestUsage {
        request: u32,
        #[serde(flatten)]
        usage: Usage,
        #[serde(rename = "cost_usd")]
        cost: Option<f64>,
        #[serde(rename = "session_cost_usd")]
        session_cost: Option<f64>,
    },
    /// The session's total usage and cost (`None`: unknown), once at the end.
    Usage {
        #[serde(flatten)]
        usage: Usage,
        #[serde(rename = "cost_usd")]
        cost: Option<f64>,
    },
    /// The end-of-session lines for a person: branch, steps, tokens and how to review (not in `--json`).
    Summary {
        branch: String,
        steps: u32,
        /// The commit the review starts from (step 0 or the base), abbreviated.
        base: String,
        usage: Usage,
        requests: u32,
        /// What the session cost in USD; `None` when a request's model had no price.
        cost: Option<f64>,
    },
    Done {
        status: Status,
        answer: String,
        exit_code: i32,
    },
    /// How the session's MCP servers stand: once when they start, then when one fails or all have settled
    /// (`N of M servers connected`); `untrusted` says that a project's `.mcp.json` was skipped and how to
    /// trust it.
    Mcp {
        connected: usize,
        total: usize,
        servers: Vec<McpServerState>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        untrusted: Option<String>,
    },
    /// Project memory: `action` is `injected` (entries given to the model at the session's start), `added` or
    /// `updated` (proposals of a completed session written as entries), `skipped` (a proposal that repeats a
    /// forgotten entry) or `proposed` (proposals kept for `git agent memory accept`, with `memory.auto = false`).
    Memory {
        action: String,
        entries: Vec<MemoryItem>,
    },
    /// A `remember` proposal, kept in the session log only (the call shows it): written to memory when the
    /// session completes (or by `git agent memory accept`). `step` and `commit` are where the branch stood
    /// when it was made. Renderers skip it.
    MemoryProposal {
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tags: Vec<String>,
        kind: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        why: String,
        step: u32,
        commit: String,
    },
    /// The proposal recorded at log line `proposal` (its `seq`) was written to memory as entry `id`: `action`
    /// is `added`, `updated` or `skipped`. Kept in the session log only, so a resumed session does not write
    /// it twice; the [`Event::Memory`] beside it is what is shown. Renderers skip it.
    MemoryWritten {
        proposal: u64,
        id: String,
        action: String,
        text: String,
    },
    /// Long work under way (a checkout of a large tree): `done` of `total` items. Sent after the first second
    /// of such work, a few times a second, and once more when it ends (`done == total`).
    Progress {
        /// What is being done: `checkout`.
        what: String,
        done: u64,
        total: u64,
    },
    /// The project's check is about to run (`git agent fix`, the hooks) on `tree` (`the staged tree`,
    /// `agent/<id>`, ...); attempt 0 is the first run, before any fix.
    CheckStarted {
        attempt: u32,
        command: String,
        tree: String,
    },
    /// How a run of the check ended: `end` in words (`exit 1`, `timed out after 30m`), `code` when it exited,
    /// `output` the head and tail of what it printed.
    Check {
        attempt: u32,
        command: String,
        tree: String,
        passed: bool,
        end: String,
        // `code` in lines logged before the check was stored as this event.
        #[serde(rename = "exit_code", alias = "code")]
        code: Option<i32>,
        duration_ms: u64,
        output: String,
    },
    /// How `git agent fix` ended: whether the check passes on `branch`, after how many of the model's
    /// attempts and steps, and the signs that the fix weakened the check (`path: what`). Before `done`.
    #[serde(rename = "fix")]
    Fixed {
        passed: bool,
        branch: String,
        attempts: u32,
        steps: u32,
        findings: Vec<String>,
    },
    /// Something the user should know that does not end the session (e.g. a retried request).
    Warning {
        message: String,
    },
    /// A warning scripts see too (`--json` type `notice`): a safety measure that could not be applied and
    /// what stands in for it. `topic` names the measure (`isolation`, `sandbox`).
    Notice {
        topic: String,
        message: String,
    },
    Error {
        message: String,
    },
    // What a session's log holds besides the live events, so a transcript (`git agent show`) is rendered by
    // the same code as a live session. None is in the JSON contract.
    /// A prompt from the user (the first one, one given with `--resume`, or text that steered a turn).
    Prompt {
        content: String,
    },
    /// A message the agent itself added to the conversation: `kind` is `instructions` (a deeper AGENTS.md,
    /// named by `path`), `reminder` (a loop or plan guard) or `plan` (re-stated on resume).
    Context {
        kind: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        path: String,
        content: String,
    },
    /// The plan after an update: `done` of `total` items, the plan as text, one line per item, and its items
    /// (for front-ends that show a plan as a list). Emitted live after each `plan_update`, and by transcripts.
    Plan {
        done: usize,
        total: usize,
        text: String,
        items: Vec<PlanItem>,
    },
    /// Older messages were replaced by a summary (or dropped, when no summary could be made) to fit the
    /// context window: everything before the last `kept` messages became one user message holding
    /// `summary` (what `--resume` rebuilds; renderers show the counts).
    Compaction {
        #[serde(default)]
        summary: String,
        #[serde(default)]
        kept: u64,
        replaced: u64,
        // `fallback` in lines logged before the compaction was stored as this event.
        #[serde(default, alias = "fallback")]
        dropped: bool,
        tokens_before: u64,
        tokens_after: u64,
    },
    /// A turn ended with `status` and `answer` (the reply, a `finish` summary or a stop report; what `pr`
    /// and `accept` take as the session's summary).
    TurnEnd {
        status: Status,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        answer: String,
    },
    /// Another run continued the session.
    Resumed,
    /// `git agent undo` moved the branch back `steps` steps, to commit `to`, from commit `from`.
    Undone {
        steps: u32,
        to: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        from: String,
    },
    /// `git agent discard` removed the session's checkout and branch, which pointed at `tip` (empty when
    /// unknown); kept so the branch can be restored from the log.
    Discarded {
        #[serde(default, skip_serializing_if = "String::is_empty")]
        tip: String,
    },
    /// What the language servers found new after a file-changing call (`id`), shown under its result:
    /// `summary` (`2 new errors`), the counts before any cap, the errors the changed files still have, and
    /// the listed problems as `path:line:col severity message`.
    Diagnostics {
        id: String,
        summary: String,
        errors: usize,
        warnings: usize,
        errors_left: usize,
        lines: Vec<String>,
    },
    /// An event of a subagent (the child loop of an `explore` call), marked with the id of the call that
    /// started it: its tool calls and results, and the usage of its requests.
    Nested {
        parent: String,
        event: Box<Event>,
    },
    /// An event hook ran (issue 26; not git's hooks): the session event it ran at (`PreToolUse`, ...), its
    /// command and the file it comes from, how it ended in words (`ok`, `blocked: <reason>`, `exit 1: ...`,
    /// `timed out after 5s`) and how long it took.
    Hook {
        event: String,
        command: String,
        source: String,
        outcome: String,
        duration_ms: u64,
    },
    /// An image given to the model: by the user (`--image`, a path in chat) or by a tool's result (`call`
    /// names the call). Live and in transcripts.
    /// The session log stores it with `blob`, the git blob holding the image (see `store::session_log`);
    /// `--json` prints it too.
    Image {
        source: String,
        media_type: String,
        bytes: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call: Option<String>,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        blob: String,
    },
    /// What a web search found: the provider's own search (Anthropic's server tool), shown as it streams;
    /// `web_search` through a configured backend is an ordinary tool call.
    WebResults {
        query: String,
        results: Vec<WebResult>,
    },
}

/// One web search result, for [`Event::WebResults`] and the `web_search` tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebResult {
    pub title: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub snippet: String,
}

impl Event {
    /// The `--json` line of this event (DESIGN section 5): its serialised form, `None` for events outside
    /// the contract. A request's usage says `scope: request`, the session's `scope: session`; a subagent's
    /// event is the event itself with a `parent` member.
    pub fn to_json(&self) -> Option<serde_json::Value> {
        match self {
            Event::Nested { parent, event } => {
                let mut value = event.to_json()?;
                value["parent"] = serde_json::json!(parent);
                return Some(value);
            }
            // Not part of the JSON contract (DESIGN section 5): reasoning is not the answer, scripts see the
            // outcome and not the retries, the summary repeats `usage` and `done` for a person, diffs are for
            // editors, a check's result says all a script needs of its start, and a transcript's history
            // markers are not emitted live.
            Event::Reasoning { .. }
            | Event::Reply { .. }
            | Event::Warning { .. }
            | Event::Summary { .. }
            | Event::Diff { .. }
            | Event::CheckStarted { .. }
            | Event::Prompt { .. }
            | Event::Context { .. }
            | Event::Plan { .. }
            | Event::Compaction { .. }
            | Event::TurnEnd { .. }
            | Event::Resumed
            | Event::Undone { .. }
            | Event::Discarded { .. }
            | Event::MemoryProposal { .. }
            | Event::MemoryWritten { .. } => return None,
            _ => {}
        }
        let mut value = serde_json::to_value(self).ok()?;
        match self {
            Event::RequestUsage { .. } => {
                value["type"] = "usage".into();
                value["scope"] = "request".into();
            }
            Event::Usage { .. } => value["scope"] = "session".into(),
            Event::ToolResult { .. } => {
                if let Some(fields) = value.as_object_mut() {
                    fields.remove("output");
                }
            }
            _ => {}
        }
        Some(value)
    }
}

/// Where a tool call works: a path as the model gave it (checkout-relative) and, when the tool takes one,
/// the line it starts at (1-based).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    pub path: String,
    pub line: Option<u32>,
}

/// One item of the plan, for [`Event::Plan`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanItem {
    pub step: String,
    pub status: PlanStatus,
    /// Why it is blocked, or what is left (may be empty).
    pub note: String,
}

/// Where one plan item stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Pending,
    InProgress,
    Done,
    Blocked,
}

/// Where a session's events go: the terminal, `--json` lines, an editor.
pub trait Sink: Send {
    fn emit(&mut self, event: &Event);

    /// True when the sink shows what editing calls did as diffs ([`Event::Diff`]); the agent reads the files
    /// for that only then.
    fn wants_diffs(&self) -> bool {
        false
    }
}

/// A risky call that the rules neither allow nor deny: the user decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// The tool call this is about (a front-end has already been shown it as [`Event::ToolCall`]).
    pub call_id: String,
    pub tool: String,
    /// What would run, as the user should read it (the command line).
    pub subject: String,
    /// Why it needs approval, in a sentence.
    pub reason: String,
}

/// The user's answer to an [`ApprovalRequest`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approval {
    /// Run it this once.
    Once,
    /// Run it, and the same call again this session without asking.
    Always,
    /// Do not run it (the model is told it was refused).
    Reject,
    /// The front-end cannot ask (no terminal, `--yes`, a hook): refused, and the refusal says so.
    CannotAsk,
    /// The user cancelled the turn while the question was open.
    Cancelled,
}

/// The future an [`Approver`] returns.
pub type ApprovalFuture<'a> = Pin<Box<dyn Future<Output = Approval> + Send + 'a>>;

/// Answers approval requests; each front-end has its own (terminal y/n/always, an editor's permission
/// dialog, [`Never`] for `--yes`, `--json`, hooks and CI).
pub trait Approver: Send {
    fn approve<'a>(&'a mut self, request: &'a ApprovalRequest) -> ApprovalFuture<'a>;
}

/// The approver of runs that must never block on a question.
#[derive(Clone, Copy, Debug, Default)]
pub struct Never;

impl Approver for Never {
    fn approve<'a>(&'a mut self, _request: &'a ApprovalRequest) -> ApprovalFuture<'a> {
        Box::pin(std::future::ready(Approval::CannotAsk))
    }
}

/// JSON-RPC 2.0's error codes, and ACP's own; MCP and ACP both speak JSON-RPC.
pub mod rpc_code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// ACP: the session (or another resource) does not exist.
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
}

/// A JSON-RPC error object: ours (ACP answers) or a peer's (an MCP server's, an editor's).
#[derive(Clone, Debug, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<serde_json::Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The `error` member of a response.
    pub fn to_json(&self) -> serde_json::Value {
        let mut error = serde_json::json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }

    /// Reads an `error` member; what is missing reads as code 0 and "(no message)".
    pub fn from_json(value: &serde_json::Value) -> RpcError {
        RpcError {
            code: value
                .get("code")
                .and_then(serde_json::Value::as_i64)
                .unwrap_or(0),
            message: value
                .get("message")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("(no message)")
                .to_owned(),
            data: value.get("data").cloned(),
        }
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (JSON-RPC error {})", self.message, self.code)
    }
}

/// Text from outside the user's hands (model output, tool results, anything pulled from a remote), shown: the
/// one neutraliser. `Display` replaces control characters (C0 and C1, so ESC and with it every CSI, OSC,
/// OSC 52 and DCS sequence, BEL, CR) and the bidirectional controls with U+FFFD, so such text cannot drive the
/// terminal (clear it, retitle it, write the clipboard, hide text) or read differently from what it is
/// ("Trojan Source"). Printing through this type, rather than calling a function, is what keeps a new printer
/// from forgetting it (issue 22, finding 8). Newlines and tabs stay unless it is an [`Untrusted::name()`].
#[derive(Clone, Copy, Debug)]
pub struct Untrusted<'a> {
    text: &'a str,
    one_line: bool,
}

impl<'a> Untrusted<'a> {
    /// Text that may span lines (an answer, a description).
    pub fn text(text: &'a str) -> Self {
        Untrusted {
            text,
            one_line: false,
        }
    }

    /// A name or id shown inside a line of ours (a skill folder, a memory id): newlines and tabs are made
    /// visible too, so it cannot forge the next line.
    pub fn name(text: &'a str) -> Self {
        Untrusted {
            text,
            one_line: true,
        }
    }
}

impl std::fmt::Display for Untrusted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut rest = self.text;
        while let Some((at, c)) = rest.char_indices().find(|&(_, c)| self.is_unsafe(c)) {
            f.write_str(&rest[..at])?;
            f.write_str("\u{fffd}")?;
            rest = &rest[at + c.len_utf8()..];
        }
        f.write_str(rest)
    }
}

impl Untrusted<'_> {
    fn is_unsafe(&self, c: char) -> bool {
        is_unsafe_char(c) || (self.one_line && (c == '\n' || c == '\t'))
    }
}

/// `text` as [`Untrusted`] displays it, borrowed when nothing needed replacing.
pub fn neutralize(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(Untrusted::text(text).to_string())
}

/// Control characters other than newline and tab, and the bidirectional controls: embeddings and
/// overrides (U+202A-U+202E), isolates (U+2066-U+2069), the marks (U+200E, U+200F, U+061C).
fn is_unsafe_char(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || is_bidi_control(c)
}

fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}'
    )
}

// Text from outside, committed: model text made into commit-message prose so that git-agent's trailers are the
// only trailers a commit has (issue 22, finding 9), and JSON output made safe for a terminal.

/// Serialised JSON made safe to print: serde_json writes C1 controls (U+0080-U+009F, of which U+009B is a
/// CSI to some terminals) and the bidirectional controls raw; each becomes its `\uXXXX` escape, which
/// decodes to the same string. Outside strings JSON is ASCII, so only string contents change.
pub fn json_for_terminal(json: String) -> String {
    if !json.chars().any(|c| is_unsafe_char(c) && !c.is_ascii()) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_unsafe_char(c) && !c.is_ascii() {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Model text made fit for a commit message's subject or body: control and bidirectional characters
/// removed (a tab becomes a space), trailing blanks cut, and each line that git would read as something else
/// indented by two spaces: a trailer (`Signed-off-by: x`), the `---` that starts a patch, a scissors line, a
/// `#` comment. An indented line is a continuation to `git interpret-trailers`, never a trailer of its own,
/// and the divider and comment rules only look at a line's first column.
pub fn commit_prose(text: &str) -> String {
    let clean: String = text
        .chars()
        .filter_map(|c| match c {
            '\t' => Some(' '),
            '\n' => Some('\n'),
            c if is_unsafe_char(c) => None,
            c => Some(c),
        })
        .collect();
    let lines: Vec<String> = clean
        .lines()
        .map(|line| {
            let line = line.trim_end();
            if reads_as_git_syntax(line) {
                format!("  {line}")
            } else {
                line.to_owned()
            }
        })
        .collect();
    lines.join("\n").trim_matches('\n').to_owned()
}

/// A subject line from model text: the first line, control and bidirectional characters removed. Git
/// never reads the subject as a trailer, so a `fix: x` subject stays as written.
pub fn commit_subject(text: &str) -> String {
    let first = text.lines().next().unwrap_or_default();
    first
        .chars()
        .filter(|&c| !is_unsafe_char(c))
        .collect::<String>()
        .replace('\t', " ")
        .trim()
        .trim_start_matches('#')
        .trim_start()
        .to_owned()
}

/// True for a line git gives a meaning in a commit message: a trailer (`token: value`, the token made of
/// letters, digits and `-`, as `git interpret-trailers --parse` accepts it, spaces before the colon included),
/// the patch divider (`---`), a scissors line (`>8`/`8<`) or a comment.
fn reads_as_git_syntax(line: &str) -> bool {
    if line.starts_with("---") || line.starts_with('#') {
        return true;
    }
    if line.contains(">8") || line.contains("8<") {
        return true;
    }
    let Some((token, _)) = line.split_once(':') else {
        return false;
    };
    let token = token.trim_end();
    !token.is_empty() && token.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `--json` lines are the serialised events, with the names and types DESIGN section 5 and the
    /// tests promise (they were a hand mapping before issue 24).
    #[test]
    fn json_lines_are_the_serialised_events() {
        let usage = Usage {
            input_tokens: 10,
            output_tokens: 2,
            cached_tokens: 0,
        };
        let request = Event::RequestUsage {
            request: 1,
            usage,
            cost: None,
            session_cost: Some(0.5),
        };
        assert_eq!(
            request.to_json(),
            Some(
                serde_json::json!({"type": "usage", "scope": "request", "request": 1,
                "input_tokens": 10, "output_tokens": 2, "cached_tokens": 0,
                "cost_usd": null, "session_cost_usd": 0.5})
            )
        );
        let total = Event::Usage { usage, cost: None };
        assert_eq!(
            total.to_json(),
            Some(
                serde_json::json!({"type": "usage", "scope": "session", "input_tokens": 10,
                "output_tokens": 2, "cached_tokens": 0, "cost_usd": null})
            )
        );
        let result = Event::ToolResult {
            id: "c1".into(),
            ok: true,
            summary: "3 lines".into(),
            output: "the whole output".into(),
        };
        let nested = Event::Nested {
            parent: "c0".into(),
            event: Box::new(result),
        };
        assert_eq!(
            nested.to_json(),
            Some(
                serde_json::json!({"type": "tool_result", "id": "c1", "ok": true,
                "summary": "3 lines", "parent": "c0"})
            )
        );
        let done = Event::Done {
            status: Status::MaxSteps,
            answer: "a".into(),
            exit_code: 3,
        };
        assert_eq!(
            done.to_json(),
            Some(
                serde_json::json!({"type": "done", "status": "max_steps", "answer": "a",
                "exit_code": 3})
            )
        );
        let check = Event::Check {
            attempt: 0,
            command: "make".into(),
            tree: "the working tree".into(),
            passed: false,
            end: "exit 2".into(),
            code: Some(2),
            duration_ms: 5,
            output: "x".into(),
        };
        let check = check.to_json().unwrap_or_default();
        assert_eq!(
            (&check["type"], &check["exit_code"]),
            (&"check".into(), &2.into())
        );
        let error = Event::Error {
            message: "m".into(),
        };
        assert_eq!(
            error.to_json(),
            Some(serde_json::json!({"type": "error", "message": "m"}))
        );
        for outside in [
            Event::Reasoning { delta: "r".into() },
            Event::Warning {
                message: "w".into(),
            },
            Event::Resumed,
        ] {
            assert_eq!(outside.to_json(), None, "{outside:?}");
        }
    }

    /// What is stored reads back as the same event, every variant with data in it included.
    #[test]
    fn events_read_back_as_they_were_written() {
        let usage = Usage {
            input_tokens: 7,
            output_tokens: 1,
            cached_tokens: 3,
        };
        let events = [
            Event::Text { delta: "hi".into() },
            Event::ToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                kind: ToolKind::Read,
                label: "read a.rs".into(),
                input: serde_json::json!({"path": "a.rs"}),
                location: Some(Location {
                    path: "a.rs".into(),
                    line: Some(1),
                }),
            },
            Event::ToolResult {
                id: "c1".into(),
                ok: true,
                summary: "1 line".into(),
                output: "x".into(),
            },
            Event::RequestUsage {
                request: 2,
                usage,
                cost: Some(0.25),
                session_cost: None,
            },
            Event::Usage { usage, cost: None },
            Event::Mcp {
                connected: 1,
                total: 1,
                servers: vec![McpServerState {
                    name: "git".into(),
                    state: "connected",
                    tools: 3,
                    error: None,
                    stderr: vec![],
                }],
                untrusted: None,
            },
            Event::Plan {
                done: 0,
                total: 1,
                text: "[ ] a".into(),
                items: vec![PlanItem {
                    step: "a".into(),
                    status: PlanStatus::InProgress,
                    note: String::new(),
                }],
            },
            Event::TurnEnd {
                status: Status::Loop,
                answer: "stopped".into(),
            },
            Event::Resumed,
            Event::Nested {
                parent: "c0".into(),
                event: Box::new(Event::Step {
                    commit: "abc".into(),
                    step: 1,
                    files: vec!["a.rs".into()],
                }),
            },
        ];
        for event in events {
            let stored = serde_json::to_string(&event).unwrap_or_default();
            let read: Event =
                serde_json::from_str(&stored).unwrap_or(Event::Discarded { tip: String::new() });
            assert_eq!(read, event, "{stored}");
        }
    }

    #[test]
    fn amounts_for_people() {
        assert_eq!(format_usd(None), "unknown");
        assert_eq!(format_usd(Some(0.01234)), "$0.0123");
        assert_eq!(format_usd(Some(12.345)), "$12.35");
    }

    #[test]
    fn status_keeps_the_strings_logs_hold() {
        for text in [
            "running",
            "done",
            "blocked",
            "max_steps",
            "max_time",
            "max_tokens",
            "max_cost",
            "loop",
            "interrupted",
            "error",
            "discarded",
            "check_failed",
            "something-newer",
        ] {
            let status = Status::parse(text);
            assert_eq!(status.as_str(), text);
            let json = serde_json::to_string(&status).expect("a string serialises");
            assert_eq!(json, format!("\"{text}\""));
            let back: Status = serde_json::from_str(&json).expect("a string deserialises");
            assert_eq!(back, status);
        }
        assert!(Status::MaxSteps.is_unfinished());
        assert!(!Status::Done.is_unfinished());
    }
}

#[cfg(test)]
mod untrusted_tests {
    use super::*;
    use std::borrow::Cow;

    #[test]
    fn display_makes_escapes_and_bidi_visible() {
        let hostile =
            "a\x1b]52;c;aGk=\x07b\x1b[2J\r\x1b[Kc\u{202e}d\u{2066}\u{200f}\u{061c}\u{9b}e\tf\n";
        let shown = Untrusted::text(hostile).to_string();
        assert_eq!(
            shown,
            "a\u{fffd}]52;c;aGk=\u{fffd}b\u{fffd}[2J\u{fffd}\u{fffd}[Kc\u{fffd}d\u{fffd}\u{fffd}\u{fffd}\u{fffd}e\tf\n"
        );
        assert_eq!(
            Untrusted::name("x\ny\tz").to_string(),
            "x\u{fffd}y\u{fffd}z"
        );
        assert_eq!(Untrusted::text("naïve — ok").to_string(), "naïve — ok");
        assert!(matches!(neutralize("plain"), Cow::Borrowed(_)));
        assert_eq!(neutralize("x\u{202e}y\r"), "x\u{fffd}y\u{fffd}");
    }

    #[test]
    fn json_keeps_its_value_and_loses_raw_controls() {
        let value = serde_json::json!({"path": "a\u{202e}b\u{9b}2J\u{1b}c"});
        let line = json_for_terminal(value.to_string());
        assert_eq!(line, r#"{"path":"a\u202eb\u009b2J\u001bc"}"#);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&line).unwrap(),
            value
        );
    }

    #[test]
    fn commit_prose_strips_controls_and_defuses_trailers() {
        let prose = commit_prose(
            "Fix it\x1b[31m now\u{202e}\n\nBody\tline\r\n---\nSigned-off-by: Mallory <m@x>\nAgent-Session : 1\n# note\n",
        );
        assert_eq!(
            prose,
            "Fix it[31m now\n\nBody line\n  ---\n  Signed-off-by: Mallory <m@x>\n  Agent-Session : 1\n  # note"
        );
        assert_eq!(
            commit_prose("Note: a colon in prose"),
            "  Note: a colon in prose"
        );
        assert_eq!(
            commit_prose("a sentence: with a colon"),
            "a sentence: with a colon"
        );
        assert_eq!(commit_subject("fix: it\x1b[2J\nmore"), "fix: it[2J");
        assert_eq!(commit_subject("# heading\t"), "heading");
    }
}
