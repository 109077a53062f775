//! The turn loop: send the conversation and tool schemas, stream the reply, run the tools the model picked,
//! commit what changed as one step on the session's branch, feed the results back, and repeat until the model
//! answers without tool calls or a guard stops it.

mod context;
mod guards;
mod instructions;
pub mod journal;
pub mod plan;
mod prompt;
mod trim;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

use crate::config::ModelConfig;
use crate::model::retry::RetryPolicy;
use crate::model::{Client, FinishReason, ModelError, Request, Response, StreamEvent};
use crate::protocol::{
    Approval, ApprovalRequest, Approver, Event, Message, Sink, Status, ToolCall, ToolSchema, Usage,
};
use crate::safety::guard::GuardEnv;
use crate::safety::redact;
use crate::safety::rules::Rules;
use crate::safety::sandbox::{Sandbox, SandboxConfig};
use crate::safety::{Answer, Policy};
use crate::store::{ChangeTracker, Meta, Session, SessionLog, Store, StoreError, Withheld};
use crate::tools::{self, SessionState, Tool, ToolContext, ToolOutput};
use context::ContextState;
pub use context::Settings as ContextSettings;
use guards::{Budget, Guards, Verdict};
use instructions::Instructions;
use journal::Event as LogEvent;
use plan::{Finish, Plan};

/// Exit code when the task stopped unfinished (budget, loop guard, blocked).
pub const EXIT_UNFINISHED: i32 = 3;
/// Exit code when the user interrupted.
pub const EXIT_INTERRUPTED: i32 = 130;

/// Options of one `ask`.
#[derive(Debug)]
pub struct AskOptions {
    pub prompt: String,
    pub model: ModelConfig,
    pub max_steps: u32,
    /// Stop (exit 3) once this much time has passed.
    pub max_time: Option<Duration>,
    /// Stop (exit 3) once the session's requests used this many tokens (input plus output).
    pub max_tokens: Option<u64>,
    pub run_timeout: Duration,
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
    pub retry: RetryPolicy,
    pub safety: SafetyOptions,
    /// Continue an earlier session instead of starting one.
    pub resume: Option<Resume>,
    /// Work in the user's own work tree (`--here`) instead of a linked checkout; steps still go to `agent/<id>`.
    pub here: bool,
}

/// Which session `--resume` / `--continue` means.
#[derive(Debug, Clone)]
pub enum Resume {
    /// A session id or unique prefix.
    Id(String),
    /// The newest session.
    Latest,
}

/// Permission rules and sandbox of one session (approvals are the front-end's [`Approver`]).
#[derive(Debug, Default)]
pub struct SafetyOptions {
    pub rules: Rules,
    pub sandbox: SandboxConfig,
}

/// The error returned by [`ask()`]: host failures that end the session. Failures the model can fix are tool
/// results, never errors.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("{source}")]
    Auth {
        source: ModelError,
        env: String,
        provider: String,
    },
    #[error("{source}")]
    Unreachable { source: ModelError, env: String },
    #[error("a tool task failed: {0}")]
    Join(String),
}

impl AgentError {
    /// What the user can do about it, apart from the message (printed as `hint:` lines).
    pub fn hints(&self) -> Vec<String> {
        match self {
            AgentError::Auth { env, provider, .. } => {
                vec![format!("check {env}, the API key of the '{provider}' provider")]
            }
            AgentError::Unreachable { env, .. } => vec![format!(
                "is the model server running? The endpoint comes from {env} (or the provider's default)"
            )],
            _ => Vec::new(),
        }
    }
}

/// Runs one task to completion in a new session and returns the process exit code.
pub async fn ask(
    cwd: &std::path::Path,
    opts: AskOptions,
    sink: &mut dyn Sink,
    approver: &mut dyn Approver,
) -> Result<i32, AgentError> {
    let client = Client::new_tuned(
        opts.model.wire,
        opts.model.base_url.clone(),
        opts.model.api_key.clone(),
        opts.connect_timeout,
        opts.idle_timeout,
        opts.model.tuning.clone(),
    )?;
    let store = Store::open(cwd)?;
    // Known secrets are registered before anything can be written into refs (step 0 included).
    if let Some(key) = &opts.model.api_key {
        redact::register(key, &opts.model.api_key_env);
    }
    if let Ok(mut r) = redact::global().write() {
        r.add_dotenv_files(store.workdir());
    }
    let resumed = opts.resume.is_some();
    let started = Instant::now();
    let (session, log, events) = match &opts.resume {
        None => {
            let id = store.new_session_id();
            let session = if opts.here {
                store.start_here(&id)?
            } else {
                store.start_session(&id, true)?
            };
            let meta = Meta {
                id: id.clone(),
                prompt: opts.prompt.clone(),
                model: opts.model.display_name(),
                branch: session.branch.clone(),
                base: session.base.to_string(),
                step0: session.step0.map(|c| c.to_string()),
                status: Status::Running,
                here: opts.here,
                ..Meta::default()
            };
            let log = match store.create_log(meta) {
                Ok(log) => log,
                Err(err) => {
                    let _ = store.rollback_session(&session);
                    return Err(err.into());
                }
            };
            (session, log, Vec::new())
        }
        Some(which) => {
            let prefix = match which {
                Resume::Id(prefix) => Some(prefix.as_str()),
                Resume::Latest => None,
            };
            let id = store.resolve_session(prefix)?;
            let mut log = store.open_log(&id)?;
            if opts.here && !log.meta.here {
                return Err(StoreError::Refused(format!(
                    "session {id} works in its own checkout, not in your working tree: resume it without --here"
                ))
                .into());
            }
            let session = store.reopen_session(&log.meta)?;
            let events = store.read_log(&id)?.events;
            log.append(LogEvent::Resume {}.to_json())?;
            log.meta.status = Status::Running;
            log.fold(&store)?;
            (session, log, events)
        }
    };
    let id = session.id.clone();
    let (policy, sandbox) = safety_for(&store, &session, opts.safety);
    if let Some(warning) = &sandbox.fallback {
        sink.emit(&Event::Warning(warning));
    }
    let (cancel, cancelled) = interrupt_flag();
    let changes = ChangeTracker::new(session.root());
    let tool_state = Arc::new(SessionState::new(
        Some(store.common_dir().join("agent").join("output").join(&id)),
        vec![opts.model.api_key_env.to_string()],
    ));
    let ollama = opts.model.provider == "ollama";
    let reported = client.context_window(&opts.model.model, ollama);
    let settings = context::Settings::resolve(&opts.model, reported).await;
    let mut schemas: Vec<_> = tools::registry().iter().map(|t| t.schema()).collect();
    schemas.extend(plan::schemas());
    let mut instructions = Instructions::new(session.root());
    for path in journal::loaded_instructions(&events) {
        instructions.already_loaded(&path);
    }
    let goal = if resumed {
        format!("{}\n\n(continued with:) {}", log.meta.prompt, opts.prompt)
    } else {
        opts.prompt.clone()
    };
    let mut turn = Turn {
        context: ContextState::new(settings, &schemas),
        schemas,
        plan: journal::plan(&events),
        step_lines: journal::step_lines(&events),
        guards: Guards::default(),
        instructions,
        cwd: relative_cwd(&store, cwd),
        goal,
        budget: Budget {
            max_steps: opts.max_steps,
            deadline: opts.max_time.map(|t| started + t),
            max_time: opts.max_time,
            max_tokens: opts.max_tokens,
        },
        spent: 0,
        tool_state,
        store,
        client,
        session,
        sink,
        approver,
        retry: opts.retry,
        tools: Arc::new(tools::registry()),
        cancel,
        cancelled,
        usage: Usage::default(),
        changes,
        requests: 0,
        partial: String::new(),
        announced: false,
        model: opts.model,
        run_timeout: opts.run_timeout,
        policy,
        sandbox: Arc::new(sandbox),
        log,
        why: String::new(),
    };
    let history = journal::rebuild(&events);
    let result = turn.run(&opts.prompt, history, resumed).await;
    // Background jobs (dev servers) never outlive the session, however it ended.
    turn.tool_state.shutdown();
    if result.is_err() {
        turn.log.meta.status = Status::Error;
        turn.log.meta.steps = turn.session.steps;
        // Best effort: the error itself is what the user needs to see.
        let _ = turn.log.fold(&turn.store);
    }
    if let Err(AgentError::Model(err)) = result {
        if !turn.announced && !resumed {
            // The model never answered: leave no trace of a session that never started (no partial refs).
            // Best effort: the model error is what the user needs to see.
            let _ = turn.store.rollback_session(&turn.session);
            let _ = turn.store.delete_log(&turn.session.id);
        }
        return Err(match err {
            ModelError::Auth { .. } => AgentError::Auth {
                source: err,
                env: turn.model.api_key_env.clone(),
                provider: turn.model.provider.clone(),
            },
            ModelError::Connect { refused: true, .. } => AgentError::Unreachable {
                source: err,
                env: turn.model.base_url_env.clone(),
            },
            err => AgentError::Model(err),
        });
    }
    if let Some(tmp) = &turn.sandbox.tmpdir {
        // Best effort: it is the session's scratch space in the system temp dir.
        let _ = std::fs::remove_dir_all(tmp);
    }
    let outcome = result?;
    Ok(turn.finish(outcome))
}

/// The policy and sandbox of a session: the guard's view of the repository, and where commands may write.
fn safety_for(store: &Store, session: &Session, opts: SafetyOptions) -> (Policy, Sandbox) {
    let checkout =
        std::fs::canonicalize(session.root()).unwrap_or_else(|_| session.root().to_path_buf());
    let guard = GuardEnv {
        checkout: checkout.clone(),
        repo_root: store.workdir().to_path_buf(),
        common_dir: store.common_dir().to_path_buf(),
        home: dirs::home_dir(),
        session_branch: session.branch.trim_start_matches("refs/heads/").to_string(),
    };
    let tmpdir = std::env::temp_dir().join(format!("git-agent-{}", session.id));
    let tmpdir = std::fs::create_dir_all(&tmpdir).ok().map(|_| tmpdir);
    let sandbox = Sandbox::new(&opts.sandbox, &checkout, store.common_dir(), tmpdir);
    (Policy::new(opts.rules, guard), sandbox)
}

/// The working directory relative to the repository root (where project instructions are looked up to).
fn relative_cwd(store: &Store, cwd: &std::path::Path) -> PathBuf {
    let root = std::fs::canonicalize(store.workdir()).unwrap_or_else(|_| store.workdir().into());
    let cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.into());
    cwd.strip_prefix(&root)
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// How a session ended.
enum Outcome {
    /// Plain text without tool calls.
    Answered(String),
    /// The `finish` tool.
    Finished(Finish),
    /// A budget or a loop guard; `status` is what the log records (`max_steps`, `loop`, ...).
    Stopped {
        status: Status,
        reason: String,
    },
    Interrupted(String),
}

struct Turn<'s> {
    /// Window, accounting, compaction state.
    context: ContextState,
    /// What the model is offered: the registry's tools, then `plan_update` and `finish`.
    schemas: Vec<ToolSchema>,
    /// The plan, kept outside the conversation (see [`plan`]).
    plan: Plan,
    /// `step N: <commit> (files)` for summaries and stop reports.
    step_lines: Vec<String>,
    guards: Guards,
    instructions: Instructions,
    /// The working directory relative to the repository root.
    cwd: PathBuf,
    /// The user's goal, restated in every compaction summary.
    goal: String,
    budget: Budget,
    /// Tokens used by the session's requests: the provider's figures, or estimates where it gave none.
    spent: u64,
    /// Shared by the session's tool calls: read fingerprints, saved output, background jobs.
    tool_state: Arc<SessionState>,
    store: Store,
    client: Client,
    retry: RetryPolicy,
    session: Session,
    sink: &'s mut dyn Sink,
    /// Answers the risky calls no rule settles (terminal, editor, or never).
    approver: &'s mut dyn Approver,
    tools: Arc<Vec<Box<dyn Tool>>>,
    cancel: Arc<AtomicBool>,
    cancelled: watch::Receiver<bool>,
    usage: Usage,
    /// What `run` commands changed in the checkout (inotify, or a stat scan).
    changes: ChangeTracker,
    requests: u32,
    /// The answer text streamed by the request in flight, kept when Ctrl-C cuts it off.
    partial: String,
    /// The session line is shown once the model first answers, so a session that fails to reach the model
    /// leaves one clean error line and no refs.
    announced: bool,
    model: ModelConfig,
    run_timeout: Duration,
    policy: Policy,
    sandbox: Arc<Sandbox>,
    /// The session log: every message, tool result and step is appended as it happens.
    log: SessionLog,
    /// The model's text before the tool calls being run, for the step notes.
    why: String,
}

impl Turn<'_> {
    async fn run(
        &mut self,
        prompt: &str,
        history: Vec<Message>,
        resumed: bool,
    ) -> Result<Outcome, AgentError> {
        let mut messages = vec![Message::System {
            content: self.system_prompt(),
        }];
        messages.extend(history);
        if resumed && !self.plan.is_empty() {
            let text = format!(
                "Your plan so far (from plan_update):\n{}",
                self.plan.render()
            );
            self.add_context(&mut messages, "plan", "", text)?;
        }
        messages.push(Message::User {
            content: prompt.into(),
        });
        self.log.append(
            LogEvent::User {
                content: prompt.into(),
            }
            .to_json(),
        )?;
        let schemas = self.schemas.clone();
        self.turns(&mut messages, &schemas).await
    }

    /// The loop proper: one model request and its tool calls per round.
    async fn turns(
        &mut self,
        messages: &mut Vec<Message>,
        schemas: &[ToolSchema],
    ) -> Result<Outcome, AgentError> {
        let model = self.model.model.clone();
        let mut trimmed = false;
        loop {
            if let Some((status, reason)) = self.budget.exceeded(self.requests, self.spent) {
                return Ok(Outcome::Stopped { status, reason });
            }
            if !trimmed {
                // Not on the retry after an overflow: room was just made for it.
                self.manage_context(messages).await?;
            }
            let request = Request {
                model: &model,
                messages,
                tools: schemas,
                max_tokens: None,
            };
            let response = match self.request(&request).await {
                // The conversation outgrew the model, so the window is smaller than the settings say: learn it
                // for the rest of the session, make room at once (trim old tool output; compact if there is
                // none), and try again, once.
                Err(AgentError::Model(err)) if err.is_context_overflow() && !trimmed => {
                    trimmed = true;
                    self.learn_window(messages);
                    if !trim::old_tool_results(messages) && !self.make_room(messages).await? {
                        return Err(err.into());
                    }
                    let message = format!("{err}; made room in the context and trying again");
                    self.sink.emit(&Event::Warning(&message));
                    continue;
                }
                result => result?,
            };
            trimmed = false;
            let response = match response {
                Some(response) => response,
                None => return Ok(Outcome::Interrupted(std::mem::take(&mut self.partial))),
            };
            self.count_tokens(messages, &response);
            let calls = response.tool_calls.clone();
            let cut_off = response.finish_reason == Some(FinishReason::Length);
            self.record_reply(&response)?;
            self.why = response.text.clone();
            messages.push(Message::Assistant {
                content: response.text.clone(),
                tool_calls: calls.clone(),
                thinking: response.thinking.clone(),
            });
            if calls.is_empty() {
                // Plain text ends the task, unless the plan still has open items (one reminder).
                match self.guards.may_finish(&self.plan) {
                    Ok(()) => return Ok(Outcome::Answered(response.text)),
                    Err(reminder) => {
                        self.add_context(messages, "reminder", "", reminder)?;
                        continue;
                    }
                }
            }
            let mut round = Round::default();
            for (i, call) in calls.iter().enumerate() {
                // With finish_reason `length`, the last call's arguments may have been cut off mid-way: never run
                // something that merely looks complete.
                let truncated = cut_off && i + 1 == calls.len();
                let output = if self.is_cancelled() {
                    ToolOutput::error("interrupted by the user before this call ran")
                } else if round.stop.is_some() {
                    ToolOutput::error("not run: the loop guard stopped the session")
                } else {
                    self.dispatch(call, truncated, &mut round).await?
                };
                self.push_result(messages, call, output)?;
            }
            for (kind, path, text) in std::mem::take(&mut round.context) {
                self.add_context(messages, kind, &path, text)?;
            }
            if let Some(reason) = round.stop {
                return Ok(Outcome::Stopped {
                    status: Status::Loop,
                    reason,
                });
            }
            if self.is_cancelled() {
                return Ok(Outcome::Interrupted(response.text));
            }
            if let Some(finish) = round.finish {
                return Ok(Outcome::Finished(finish));
            }
            if let Some(reminder) = self.guards.stale_plan(&self.plan) {
                self.add_context(messages, "reminder", "", reminder)?;
            }
        }
    }

    /// The system prompt: fixed sections, the project instructions found from the root down to the working
    /// directory, the environment.
    fn system_prompt(&mut self) -> String {
        let checkout = self.session.root().display().to_string();
        let branch = self.short_branch();
        let base = self.session.base.to_string();
        let env = prompt::Environment {
            checkout: &checkout,
            branch: &branch,
            base: &base,
            date: &today(),
            here: self.session.checkout.is_here(),
        };
        let cwd = self.cwd.clone();
        let files = self.instructions.initial(&cwd);
        let section = if files.is_empty() {
            String::new()
        } else {
            instructions::section(&files)
        };
        prompt::system_prompt(&env, &section)
    }

    /// Runs one call: the agent's own tools (plan, finish) here, the others through the guards and the
    /// registry. What the round must do afterwards (reminders, instructions, stop, finish) goes into `round`.
    async fn dispatch(
        &mut self,
        call: &ToolCall,
        truncated: bool,
        round: &mut Round,
    ) -> Result<ToolOutput, AgentError> {
        if call.name == plan::PLAN_TOOL || call.name == plan::FINISH_TOOL {
            return self.own_tool(call, truncated, round);
        }
        match self.guards.before_call(call) {
            Verdict::Run => {}
            Verdict::Remind(text) => self.remind(round, text),
            Verdict::Stop(reason) => {
                round.stop = Some(reason.clone());
                return Ok(ToolOutput::error(format!("not run: {reason}")));
            }
        }
        let output = self.call_tool(call, truncated).await?;
        match self
            .guards
            .after_call(call, output.is_error, &output.content)
        {
            Verdict::Run => {}
            Verdict::Remind(text) => self.remind(round, text),
            Verdict::Stop(reason) => round.stop = Some(reason),
        }
        if !output.is_error {
            self.touch_for_instructions(call, round);
        }
        Ok(output)
    }

    fn remind(&mut self, round: &mut Round, text: String) {
        let first = text.lines().next().unwrap_or_default().to_owned();
        self.sink.emit(&Event::Warning(&first));
        round.context.push(("reminder", String::new(), text));
    }

    /// `plan_update` and `finish`: session state, not files, so no policy check, sandbox or step commit.
    fn own_tool(
        &mut self,
        call: &ToolCall,
        truncated: bool,
        round: &mut Round,
    ) -> Result<ToolOutput, AgentError> {
        let args = match parse_args(call, truncated) {
            Ok(args) => args,
            Err(message) => return Ok(self.own_result(call, ToolOutput::error(message))),
        };
        let label = match call.name.as_str() {
            plan::PLAN_TOOL => "plan".to_owned(),
            _ => format!("finish {}", args["status"].as_str().unwrap_or("?")),
        };
        self.sink.emit(&Event::ToolCall {
            id: &call.id,
            name: &call.name,
            label: &label,
            input: &args,
        });
        let output = if call.name == plan::PLAN_TOOL {
            match Plan::from_args(&args) {
                Ok(plan) => {
                    self.log.append(
                        LogEvent::Plan {
                            items: plan.items.clone(),
                        }
                        .to_json(),
                    )?;
                    self.plan = plan;
                    self.guards.plan_updated();
                    let summary = format!("{} of {} done", self.plan.done(), self.plan.items.len());
                    ToolOutput::ok(format!("plan updated: {summary}"), summary)
                }
                Err(message) => ToolOutput::error(message),
            }
        } else {
            match Finish::from_args(&args) {
                Ok(finish) => {
                    let reminder = if finish.completed {
                        self.guards.may_finish(&self.plan).err()
                    } else {
                        None
                    };
                    match reminder {
                        // Refused once: the reminder is the result, and the model goes on.
                        Some(reminder) => ToolOutput::error(reminder),
                        None => {
                            round.finish = Some(finish);
                            ToolOutput::ok("finished", "finished")
                        }
                    }
                }
                Err(message) => ToolOutput::error(message),
            }
        };
        Ok(self.own_result(call, output))
    }

    fn own_result(&mut self, call: &ToolCall, output: ToolOutput) -> ToolOutput {
        self.report(call, &output);
        output
    }

    /// A file tool touched a directory: bring in project instructions found there for the first time.
    fn touch_for_instructions(&mut self, call: &ToolCall, round: &mut Round) {
        if !matches!(
            call.name.as_str(),
            "read_file" | "list_files" | "search" | "edit_file" | "write_file"
        ) {
            return;
        }
        let Ok(args) = serde_json::from_str::<serde_json::Value>(&call.arguments) else {
            return;
        };
        let Some(path) = args.get("path").and_then(|p| p.as_str()) else {
            return;
        };
        for file in self.instructions.touch(path) {
            let text = instructions::message(&file);
            round.context.push(("instructions", file.path, text));
        }
    }

    /// Appends a tool result to the conversation and the log.
    fn push_result(
        &mut self,
        messages: &mut Vec<Message>,
        call: &ToolCall,
        output: ToolOutput,
    ) -> Result<(), AgentError> {
        let (ok, summary) = (!output.is_error, output.summary.clone());
        let content = model_view(output);
        self.log.append(
            LogEvent::ToolResult {
                tool_call_id: call.id.clone(),
                name: call.name.clone(),
                ok,
                summary,
                content: content.clone(),
            }
            .to_json(),
        )?;
        messages.push(Message::Tool {
            tool_call_id: call.id.clone(),
            content,
        });
        Ok(())
    }

    /// Adds a message of the agent's own (instructions, a reminder, the plan) to the conversation and the log.
    fn add_context(
        &mut self,
        messages: &mut Vec<Message>,
        kind: &str,
        path: &str,
        content: String,
    ) -> Result<(), AgentError> {
        self.log.append(
            LogEvent::Context {
                kind: kind.into(),
                path: path.into(),
                content: content.clone(),
            }
            .to_json(),
        )?;
        messages.push(Message::User { content });
        Ok(())
    }

    /// Calibrates the estimate with the provider's figures and counts the request against `--max-tokens`.
    fn count_tokens(&mut self, messages: &[Message], response: &Response) {
        match &response.usage {
            Some(usage) => {
                self.context.accounting.calibrate(messages, usage);
                self.spent += usage.input_tokens + usage.output_tokens;
            }
            None => {
                let output = (response.text.len()
                    + response
                        .tool_calls
                        .iter()
                        .map(|c| c.arguments.len())
                        .sum::<usize>())
                    / 4;
                self.spent += self.context.accounting.tokens(messages) + output as u64;
            }
        }
    }

    /// Sends one request, streaming text to the sink. `None` when the user interrupted (the connection is
    /// dropped at once so the provider stops generating).
    async fn request(&mut self, request: &Request<'_>) -> Result<Option<Response>, AgentError> {
        self.requests += 1;
        let announcement = (!self.announced).then(|| self.session_event_fields());
        // Both callbacks write to the sink; the future must stay `Send`, hence a mutex rather than a RefCell.
        let sink = std::sync::Mutex::new(&mut *self.sink);
        let mut pending = announcement.clone();
        // The text of the attempt in flight; a retried attempt's text belongs to a discarded reply.
        let partial = std::sync::Mutex::new(String::new());
        let mut on_event = |event: &StreamEvent| {
            let Ok(mut sink) = sink.lock() else { return };
            if let Some(fields) = pending.take() {
                fields.emit(*sink);
            }
            match event {
                StreamEvent::TextDelta(text) => {
                    if let Ok(mut partial) = partial.lock() {
                        partial.push_str(text);
                    }
                    sink.emit(&Event::Text(text));
                }
                StreamEvent::ReasoningDelta(text) => sink.emit(&Event::Reasoning(text)),
                StreamEvent::ToolCallStart { .. } | StreamEvent::Usage(_) => {}
            }
        };
        let mut on_retry = |err: &ModelError, wait: Duration, attempt: u32| {
            let Ok(mut sink) = sink.lock() else { return };
            if let Ok(mut partial) = partial.lock() {
                partial.clear();
            }
            let message = format!(
                "model request failed ({err}); retrying in {:.1} s (attempt {} of {})",
                wait.as_secs_f64(),
                attempt + 1,
                self.retry.max_attempts,
            );
            sink.emit(&Event::Warning(&message));
        };
        let mut cancelled = self.cancelled.clone();
        let response = tokio::select! {
            response = self.client.stream_with_retries(request, &mut on_event, &self.retry, &mut on_retry) => response?,
            _ = cancelled.wait_for(|c| *c) => {
                self.partial = partial.lock().map(|text| text.clone()).unwrap_or_default();
                return Ok(None);
            }
        };
        if let Some(fields) = pending {
            if let Ok(mut sink) = sink.lock() {
                fields.emit(*sink);
            }
        }
        self.announced = true;
        if let Some(usage) = &response.usage {
            self.usage.add(usage);
            self.sink.emit(&Event::RequestUsage {
                request: self.requests,
                usage,
            });
        }
        Ok(Some(response))
    }

    /// Runs one tool call and commits what it changed. Failures the model can fix come back as error output.
    async fn call_tool(
        &mut self,
        call: &ToolCall,
        truncated: bool,
    ) -> Result<ToolOutput, AgentError> {
        let parsed = parse_call(&self.tools, call, truncated);
        let (index, args) = match parsed {
            Ok(found) => found,
            Err(message) => {
                let label = format!("{} (rejected)", call.name);
                self.sink.emit(&Event::ToolCall {
                    id: &call.id,
                    name: &call.name,
                    label: &label,
                    input: &serde_json::Value::Null,
                });
                let output = ToolOutput::error(message);
                self.report(call, &output);
                return Ok(output);
            }
        };
        let tools = Arc::clone(&self.tools);
        let tool = &tools[index];
        let label = tool.label(&args);
        self.sink.emit(&Event::ToolCall {
            id: &call.id,
            name: tool.name(),
            label: &label,
            input: &args,
        });
        let mut decision = self.policy.check(tool.name(), &args);
        if decision.needs_approval() {
            let request = ApprovalRequest {
                call_id: call.id.clone(),
                tool: tool.name().to_string(),
                subject: args["command"].as_str().unwrap_or(&label).to_string(),
                reason: decision.reason.clone(),
            };
            let answer = self.ask_user(&request).await;
            decision = self.policy.settle(&request.subject, decision, answer);
        }
        self.sink.emit(&Event::Permission {
            id: &call.id,
            tool: tool.name(),
            decision: decision.outcome.as_str(),
            rule: &decision.rule,
            reason: &decision.reason,
        });
        if decision.is_denied() {
            let output = ToolOutput::error(decision.message_for_model());
            self.report(call, &output);
            return Ok(output);
        }
        let is_run = tool.name() == "run";
        if is_run {
            self.changes.before_run()?;
        }
        let mut output = self.execute(index, args).await?;
        self.report(call, &output);
        let changed = if is_run {
            self.changes.after_run()?
        } else {
            std::mem::take(&mut output.changed)
        };
        if !changed.is_empty() {
            self.commit(call, &label, &changed)?;
        }
        Ok(output)
    }

    /// Puts a question to the front-end's approver; Ctrl-C while it is open cancels it.
    async fn ask_user(&mut self, request: &ApprovalRequest) -> Answer {
        let mut cancelled = self.cancelled.clone();
        let approval = tokio::select! {
            answer = self.approver.approve(request) => answer,
            _ = cancelled.wait_for(|c| *c) => Approval::Cancelled,
        };
        match approval {
            Approval::Once => Answer::Once,
            Approval::Always => Answer::Always,
            Approval::Reject => Answer::Declined,
            Approval::Cancelled => Answer::Cancelled,
            Approval::CannotAsk => Answer::CannotAsk,
        }
    }

    /// Appends a model reply and its usage to the session log.
    fn record_reply(&mut self, response: &Response) -> Result<(), AgentError> {
        self.log.append(
            LogEvent::Assistant {
                content: response.text.clone(),
                tool_calls: response.tool_calls.clone(),
                thinking: response.thinking.clone(),
            }
            .to_json(),
        )?;
        if let Some(usage) = &response.usage {
            self.log_usage(usage)?;
        }
        Ok(())
    }

    /// Records one request's token usage in the session log.
    fn log_usage(&mut self, usage: &Usage) -> Result<(), AgentError> {
        let event = LogEvent::Usage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
        };
        self.log.append(event.to_json())?;
        Ok(())
    }

    async fn execute(
        &self,
        index: usize,
        args: serde_json::Value,
    ) -> Result<ToolOutput, AgentError> {
        let tools = Arc::clone(&self.tools);
        let ctx = ToolContext {
            root: self.session.root().to_path_buf(),
            run_timeout: self.run_timeout,
            cancel: Arc::clone(&self.cancel),
            session: Arc::clone(&self.tool_state),
            sandbox: Arc::clone(&self.sandbox),
        };
        // Tools block (file I/O, child processes); Ctrl-C reaches them through `ctx.cancel`.
        tokio::task::spawn_blocking(move || tools[index].execute(&ctx, &args))
            .await
            .map_err(|e| AgentError::Join(e.to_string()))
    }

    fn report(&mut self, call: &ToolCall, output: &ToolOutput) {
        self.sink.emit(&Event::ToolResult {
            id: &call.id,
            ok: !output.is_error,
            summary: &output.summary,
        });
    }

    fn commit(
        &mut self,
        call: &ToolCall,
        label: &str,
        changed: &[PathBuf],
    ) -> Result<(), AgentError> {
        // The store decides what is withheld; we only say so.
        let step = self
            .store
            .commit_step(&mut self.session, changed, |withheld| {
                step_message(label, withheld)
            })?;
        for w in &step.withheld {
            let warning = format!(
                "{} was not committed: {}; it stays in the checkout ({})",
                w.path.display(),
                w.reason,
                self.session.root().display()
            );
            self.sink.emit(&Event::Warning(&warning));
        }
        let changed = &step.committed[..];
        if let Some(commit) = step.commit {
            let hex = commit.to_string();
            let step = self.session.steps;
            self.log.append(
                LogEvent::Step {
                    step,
                    commit: hex.clone(),
                    files: changed.iter().map(|p| p.display().to_string()).collect(),
                }
                .to_json(),
            )?;
            let files: Vec<String> = changed.iter().map(|p| p.display().to_string()).collect();
            self.step_lines.push(journal::step_line(step, &hex, &files));
            let note = journal::step_note(step, call, label, &self.why);
            self.store.add_note(commit, &note)?;
            self.sink.emit(&Event::Step {
                commit: &hex,
                step,
                files: changed,
            });
        }
        Ok(())
    }

    fn session_event_fields(&self) -> SessionLine {
        SessionLine {
            id: self.session.id.clone(),
            branch: self.short_branch(),
            base: self.session.base.to_string(),
            model: self.model.display_name(),
        }
    }

    fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
    }

    fn short_branch(&self) -> String {
        self.session
            .branch
            .trim_start_matches("refs/heads/")
            .to_string()
    }

    /// Records the end of the turn in the session log and folds it into the ref.
    fn close_log(&mut self, status: &Status, answer: &str) -> Result<(), StoreError> {
        self.log.append(
            LogEvent::End {
                status: status.to_string(),
                answer: answer.into(),
            }
            .to_json(),
        )?;
        let meta = &mut self.log.meta;
        meta.status = status.clone();
        meta.steps = self.session.steps;
        meta.input_tokens += self.usage.input_tokens;
        meta.output_tokens += self.usage.output_tokens;
        self.log.fold(&self.store)
    }

    /// The answer of a stopped session: why, what was committed, and the plan.
    fn stop_report(&self, reason: &str) -> String {
        let mut out = format!("Stopped unfinished: {reason}.\n");
        if self.step_lines.is_empty() {
            out.push_str("\nNo step was committed.\n");
        } else {
            out.push_str(&format!("\nCommitted on {}:\n", self.short_branch()));
            for line in &self.step_lines {
                out.push_str(&format!("- {line}\n"));
            }
        }
        if !self.plan.is_empty() {
            out.push_str(&format!("\nPlan:\n{}", self.plan.render()));
        }
        out
    }

    /// Reports the end of the session and returns the exit code.
    fn finish(&mut self, outcome: Outcome) -> i32 {
        let (status, answer, code) = match outcome {
            Outcome::Answered(answer) => (Status::Done, answer, 0),
            Outcome::Finished(Finish {
                completed: true,
                summary,
            }) => (Status::Done, summary, 0),
            Outcome::Finished(Finish {
                completed: false,
                summary,
            }) => (Status::Blocked, summary, EXIT_UNFINISHED),
            Outcome::Stopped { status, reason } => {
                let message = format!("{reason}; the work so far is on {}", self.short_branch());
                self.sink.emit(&Event::Error(&message));
                (status, self.stop_report(&reason), EXIT_UNFINISHED)
            }
            Outcome::Interrupted(partial) => (Status::Interrupted, partial, EXIT_INTERRUPTED),
        };
        if let Err(err) = self.close_log(&status, &answer) {
            // The work is on the branch and the events are in the journal; the next start folds them.
            let message = format!("could not save the session log: {err}");
            self.sink.emit(&Event::Warning(&message));
        }
        self.sink.emit(&Event::Usage(&self.usage));
        let branch = self.short_branch();
        let steps = self.session.steps;
        let base = self
            .session
            .step0
            .unwrap_or(self.session.base)
            .to_hex_with_len(7)
            .to_string();
        self.sink.emit(&Event::Summary {
            branch: &branch,
            steps,
            base: &base,
            usage: &self.usage,
            requests: self.requests,
        });
        self.sink.emit(&Event::Done {
            status: &status,
            answer: &answer,
            exit_code: code,
        });
        code
    }
}

/// What one round of tool calls leaves for the loop to do once every call has its result.
#[derive(Default)]
struct Round {
    /// Messages to add after the results: `(kind, path, text)` as in [`LogEvent::Context`].
    context: Vec<(&'static str, String, String)>,
    /// The loop guard's reason to stop.
    stop: Option<String>,
    finish: Option<Finish>,
}

/// The fields of the `session` event, kept until it is shown.
#[derive(Clone)]
struct SessionLine {
    id: String,
    branch: String,
    base: String,
    model: String,
}

impl SessionLine {
    fn emit(&self, sink: &mut dyn Sink) {
        sink.emit(&Event::Session {
            id: &self.id,
            branch: &self.branch,
            base: &self.base,
            model: &self.model,
        });
    }
}

/// Finds the tool and parses the arguments, or says what is wrong in words the model can act on.
fn parse_call(
    tools: &[Box<dyn Tool>],
    call: &ToolCall,
    truncated: bool,
) -> Result<(usize, serde_json::Value), String> {
    let index = tools
        .iter()
        .position(|t| t.name() == call.name)
        .ok_or_else(|| {
            let names: Vec<_> = tools.iter().map(|t| t.name()).collect();
            format!(
                "unknown tool '{}'; available tools: {}",
                call.name,
                names.join(", ")
            )
        })?;
    Ok((index, parse_args(call, truncated)?))
}

/// Parses a call's arguments as a JSON object, or says what is wrong.
fn parse_args(call: &ToolCall, truncated: bool) -> Result<serde_json::Value, String> {
    if truncated {
        return Err(format!(
            "the arguments of this {} call were cut off by the output token limit, so it was not run; \
             make the call again with shorter arguments (e.g. split a large write into several edits)",
            call.name
        ));
    }
    let text = call.arguments.trim();
    let args = if text.is_empty() {
        serde_json::Value::Object(Default::default())
    } else {
        serde_json::from_str(text)
            .map_err(|e| format!("the arguments are not valid JSON ({e}); send a JSON object"))?
    };
    if !args.is_object() {
        return Err("the arguments must be a JSON object".to_string());
    }
    Ok(args)
}

/// What the model sees of a tool result: errors are marked as such, so it cannot mistake them for output.
fn model_view(output: ToolOutput) -> String {
    if output.is_error && !output.content.starts_with("error") {
        format!("error: {}", output.content)
    } else {
        output.content
    }
}

/// A flag set on Ctrl-C, and a receiver that resolves when it is set.
fn interrupt_flag() -> (Arc<AtomicBool>, watch::Receiver<bool>) {
    let flag = Arc::new(AtomicBool::new(false));
    let (tx, rx) = watch::channel(false);
    let task_flag = Arc::clone(&flag);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            task_flag.store(true, Ordering::SeqCst);
            let _ = tx.send(true);
        }
    });
    (flag, rx)
}

/// Today's date (UTC) as YYYY-MM-DD, without a calendar crate.
fn today() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 to a (year, month, day) date (H. Hinnant's algorithm).
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A step's commit message: the call's label, then the files withheld from the commit and why (the store
/// redacts the whole message before writing it).
fn step_message(label: &str, withheld: &[Withheld]) -> String {
    let mut message = label.to_owned();
    if !withheld.is_empty() {
        message.push_str("\n\nWithheld from this commit (they stay in the checkout):\n");
        for w in withheld {
            message.push_str(&format!("- {}: {}\n", w.path.display(), w.reason));
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_787), (2026, 11, 30));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn bad_calls_become_messages_for_the_model() {
        let tools = tools::registry();
        let call = |name: &str, args: &str| ToolCall {
            id: "1".into(),
            name: name.into(),
            arguments: args.into(),
        };
        let err = parse_call(&tools, &call("nope", "{}"), false).unwrap_err();
        assert!(err.contains("unknown tool 'nope'"), "{err}");
        let err = parse_call(&tools, &call("read_file", "{\"path\": "), false).unwrap_err();
        assert!(err.contains("not valid JSON"), "{err}");
        let err = parse_call(&tools, &call("read_file", "[1]"), false).unwrap_err();
        assert!(err.contains("JSON object"), "{err}");
        let err = parse_call(&tools, &call("read_file", "{\"path\":\"a\"}"), true).unwrap_err();
        assert!(err.contains("cut off"), "{err}");
        let (_, args) = parse_call(&tools, &call("read_file", ""), false).unwrap();
        assert!(args.as_object().is_some_and(|o| o.is_empty()));
    }
}
