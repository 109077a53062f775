//! One agent session held open by a front-end: opened once (a new session, or an earlier one resumed), then any
//! number of turns on the same branch and checkout, then closed.
//!
//! ```text
//! let mut session = AgentSession::open(cwd, options, sink).await?;
//! let end = session.turn(prompt, sink, approver, &control).await?;   // as often as the front-end likes
//! session.close();
//! ```
//!
//! `ask` is exactly that with one turn; chat sends turn after turn; ACP keeps one per editor session. Every turn
//! is recorded in the session log as `ask` and `--resume` record theirs, so `show`, `log` and a later `--resume`
//! see a chat's turns like any other.
//!
//! What a session's turns work on is cut into parts that change for different reasons, [`SessionParts`] in
//! [`super::parts`]: [`Workspace`] (the repository, the branch and checkout, the log), [`ModelLink`] (the
//! client and how to reach it), [`Toolbox`] (tools, policy, sandbox, change tracking), [`Conversation`]
//! (messages, plan, goal, instructions) and the context accounting. What lives for one turn only (budget,
//! guards, the front-end's sink and approver) is in [`super::turn`]; a turn borrows the parts, never the
//! session.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::config::ModelConfig;
use crate::model::retry::RetryPolicy;
use crate::model::Client;
use crate::protocol::{Approver, Event, Message, Never, Sink, Status, ToolSchema, Usage};
use crate::safety::guard::GuardEnv;
use crate::safety::redact;
use crate::safety::rules::Rules;
use crate::safety::sandbox::{Sandbox, SandboxConfig};
use crate::safety::scratch::ScratchDir;
use crate::safety::Policy;
use crate::store::{
    ChangeTracker, Checkout, Meta, ObjectId, Session, SessionLog, StartFrom, StartOptions, Store,
    StoreError, DEFAULT_MAX_CAPTURE_SIZE,
};
use crate::tools::mcp::servers::{Servers, Status as McpStatus};
use crate::tools::mcp::ServerSpec;
use crate::tools::{Registry, SessionState};

use super::context::{ContextState, Settings};
use super::control::TurnControl;
use super::error::AgentError;
use super::explore::Explorer;
use super::instructions::{self, Instructions};
use super::journal;
use super::parts::{
    add_spend, offered, short_branch, start_mcp, Conversation, Limits, McpPlan, ModelLink,
    Narrowing, Probe, SessionParts, Toolbox, Workspace,
};
use super::plan::Plan;
use super::skills::SessionSkills;
use super::start::{self as starting, Pending, Starting};
use super::stream::SessionLine;
use super::turn::{Turn, TurnEnd};
use super::{date, prompt};

/// How to open a session.
#[derive(Debug)]
pub struct SessionOptions {
    pub model: ModelConfig,
    /// Stop a turn (exit 3) after this many model requests.
    pub max_steps: u32,
    /// Stop a turn (exit 3) once this much time has passed since it began.
    pub max_time: Option<Duration>,
    /// Stop a turn (exit 3) once its requests used this many tokens (input plus output).
    pub max_tokens: Option<u64>,
    /// Stop a turn (exit 3) once its requests cost this many USD; the model must have a price.
    pub max_cost: Option<f64>,
    pub run_timeout: Duration,
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
    pub retry: RetryPolicy,
    pub safety: SafetyOptions,
    /// Continue an earlier session instead of starting one.
    pub resume: Option<Resume>,
    /// Work in the user's own work tree (`--here`) instead of a linked checkout; steps still go to `agent/<id>`.
    pub here: bool,
    /// What `git agent log` lists a new session as from its start (`ask` gives its prompt). `None` (a chat
    /// opened before its first prompt): the first turn's prompt. Ignored on resume.
    pub title: Option<String>,
    /// Project memory's settings; `None` turns memory off for the run (`--no-memory`).
    pub memory: Option<crate::config::memory::MemorySettings>,
    /// The settings files as the front-end loaded them for the model: the session takes the rest of its
    /// settings (MCP servers, language servers, hooks, caps) from the same reading rather than reading the
    /// files again, so one run reads each file once and a file's warning is printed once.
    pub settings: crate::config::Settings,
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

/// An open session; see the module docs.
pub struct AgentSession {
    /// What its turns work on.
    pub(super) parts: SessionParts,
    /// The skills the session sees, and which were loaded this turn.
    pub(super) skills: SessionSkills,
    /// How `explore` calls run.
    pub(super) explore: Explorer,
    /// Commands defined in files: a prompt `/name args` runs one.
    file_commands: Vec<crate::config::agent_files::FileCommand>,
    /// A new session in which nothing happened but model requests that never got an answer: closing it
    /// leaves no trace (no branch, checkout or log), as if it had never started.
    pub(super) untouched: bool,
    /// The log's status before this process set it to running (restored when no turn ran).
    prior_status: Status,
    /// Tokens of this process's turns.
    usage: Usage,
}

/// What [`AgentSession::undo()`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Undone {
    /// The tip it moved away from (to redo: move the branch back there).
    pub from: ObjectId,
    pub to: ObjectId,
    /// The step the branch is at now.
    pub steps: u32,
}

impl AgentSession {
    /// Starts a new session (branch `agent/<id>`, its checkout or `--here`, step 0, the log) or reopens the
    /// one `options.resume` names, and gets everything its turns need: policy and sandbox, tool state, context
    /// settings (which may ask the endpoint for its window), the conversation so far and the system prompt.
    /// `sink` hears warnings (a sandbox that fell back).
    pub async fn open(
        cwd: &Path,
        options: SessionOptions,
        sink: &mut dyn Sink,
    ) -> Result<AgentSession, AgentError> {
        Self::open_from(cwd, options, StartFrom::WorkTree, sink).await
    }

    /// [`AgentSession::open()`] for a new session that starts from `from`: the user's work tree (what
    /// `open` does), the staged tree as step 0, or a commit as the base (`git agent fix --staged` and
    /// `--commit`). Ignored on resume.
    pub async fn open_from(
        cwd: &Path,
        options: SessionOptions,
        from: StartFrom,
        sink: &mut dyn Sink,
    ) -> Result<AgentSession, AgentError> {
        // What the start shows (warnings, notices) is recorded once the log exists, below.
        let mut heard = journal::Heard::new(sink);
        let sink: &mut dyn Sink = &mut heard;
        let mut model = options.model;
        if !options.safety.sandbox.network {
            // The provider's own search is network use we could not refuse call by call.
            model.tuning.server_tools.clear();
        }
        let client = Client::new_tuned(
            model.wire,
            model.base_url.clone(),
            model.api_key.clone(),
            options.connect_timeout,
            options.idle_timeout,
            model.tuning.clone(),
        )?;
        super::footprint::mark("client");
        let opening = crate::sys::timings::begin();
        let store = Store::open(cwd)?;
        crate::sys::timings::end("store open", opening, &[]);
        // Files of the repository skipped as too large (instructions, `.mcp.json`, hooks, agents) are warned
        // about as this session's events, so its log and `--json` have them too.
        let file_warnings = crate::safety::bounded::WarningScope::under(vec![
            store.workdir().to_path_buf(),
            store.common_dir().to_path_buf(),
            cwd.to_path_buf(),
        ]);
        super::footprint::mark("repository");
        register_secrets(&model, &store);
        let env = |name: &str| crate::safety::secrets::var(name);
        let settings = options.settings;
        let max_capture = settings
            .max_capture_size()
            .unwrap_or(DEFAULT_MAX_CAPTURE_SIZE);
        let timeouts = (options.connect_timeout, options.idle_timeout);
        let explore = Explorer::new(&settings, &model, timeouts)?;
        let caps = settings.catalog_caps();
        let resumed = options.resume.is_some();
        let (session, mut log, events, prior_status, pending) = match &options.resume {
            None => {
                let title = options.title.unwrap_or_default();
                let (session, log, pending) =
                    start(&store, &model, title, options.here, from, max_capture, sink)?;
                (session, log, Vec::new(), Status::Running, pending)
            }
            Some(which) => {
                let (session, log, events, prior) = reopen(&store, which, options.here)?;
                (session, log, events, prior, None)
            }
        };
        let (safety, run_timeout) = (options.safety, options.run_timeout);
        // A new session's own checkout is made meanwhile: its sandbox does not wait for the isolation probe.
        let unprobed = pending.is_some() && !session.checkout.is_here();
        let mut tools = Toolbox::new(
            &store,
            &session,
            &model,
            safety,
            run_timeout,
            unprobed,
            sink,
        );
        // The backend's web_search only where the provider searches nothing itself.
        if model.tuning.server_tools.is_empty() {
            if let Some(backend) = settings.user.web_search.backend(&env) {
                tools
                    .registry
                    .add(Arc::new(crate::tools::web_search::WebSearch {
                        backend,
                        network: tools.sandbox_config.network,
                    }));
            }
        }
        tools.memory = super::memory::SessionMemory::load(options.memory, &events);
        let own_hooks = settings.user.event_hooks.as_ref();
        let (hooks, notices) =
            super::event_hooks::SessionHooks::load(store.workdir(), store.common_dir(), own_hooks);
        for message in &notices {
            sink.emit(&Event::Notice {
                topic: "event-hooks".to_owned(),
                message: message.clone(),
            });
        }
        let home = dirs::home_dir();
        let (agents, problems) =
            crate::config::agent_files::load_agents(store.workdir(), home.as_deref());
        for problem in &problems {
            sink.emit(&Event::Warning {
                message: format!("subagent skipped: {problem}"),
            });
        }
        let file_commands =
            crate::config::agent_files::load_commands(store.workdir(), home.as_deref());
        let skills = SessionSkills::load(&store, caps, sink);
        if let Some(tool) = skills.tool() {
            tools.registry.add(tool);
        }
        // Language servers too run in the checkout, and only start when a tool touches a file of theirs.
        let lsp = super::lsp::plan(&settings, store.common_dir(), sink);
        lsp.offer(store.workdir(), &mut tools.registry);
        if pending.is_some() && !session.checkout.is_here() {
            tools.lsp_later = Some(lsp);
        } else {
            lsp.attach(session.root(), &tools.sandbox, &tools.state);
        }
        // MCP servers run in the checkout: for a new session they start once it exists (`adopt`); they never
        // block a request either way, their tools join as each server is ready.
        let mcp = McpPlan::read(&settings, &store);
        if pending.is_some() && !session.checkout.is_here() {
            tools.mcp_configured = mcp.has_servers();
            tools.mcp_later = Some(mcp);
        } else {
            tools.mcp = start_mcp(mcp, &store, &session, &tools.registry, &tools.sandbox, sink);
        }
        let (context, probe) = resolve_context(&client, &model);
        // A new session's checkout may still be being written: its instructions are read from the user's work
        // tree, which step 0 captures, and the checkout takes over once it exists (`adopt`).
        let instructions_root = match (&pending, &session.checkout) {
            (Some(_), Checkout::Linked(_)) => store.workdir().to_path_buf(),
            _ => session.root().to_path_buf(),
        };
        let conv = Conversation::load(
            &store,
            &session,
            offered(&tools, &agents),
            &events,
            cwd,
            &instructions_root,
            &skills.section(),
        );
        let line = SessionLine {
            id: session.id.clone(),
            branch: short_branch(&session).to_owned(),
            base: session.base.to_string(),
            model: model.display_name(),
        };
        for message in file_warnings.take() {
            sink.emit(&Event::Warning { message });
        }
        heard.record_into(&mut log);
        super::footprint::mark("open");
        let parts = SessionParts {
            context: ContextState::new(context, &conv.schemas),
            conv,
            work: Workspace {
                step_lines: journal::step_lines(&events),
                store,
                session,
                log,
                start: pending.map_or(Starting::Done, Starting::Underway),
                max_capture,
            },
            model: ModelLink {
                client,
                config: model,
                probe,
                retry: options.retry,
                connect_timeout: options.connect_timeout,
                idle_timeout: options.idle_timeout,
            },
            tools,
            limits: Limits {
                max_steps: options.max_steps,
                max_time: options.max_time,
                max_tokens: options.max_tokens,
                max_cost: options.max_cost,
            },
            line,
            hooks,
            agents,
            turn_tools: None,
            announced: false,
            resumed,
            turns: 0,
            images: Vec::new(),
            start_failed: false,
        };
        Ok(AgentSession {
            parts,
            skills,
            explore,
            file_commands,
            untouched: !resumed,
            prior_status,
            usage: Usage::default(),
        })
    }

    /// Runs one turn: `prompt` joins the conversation and the loop goes on until the model answers without
    /// tool calls, calls `finish`, a budget or loop guard stops it, or `control` cancels it. Runnable any
    /// number of times; each turn starts on the branch's current tip. Host failures are errors (the turn is
    /// recorded with status `error` and the session stays usable); everything the model can fix is a tool
    /// result.
    pub async fn turn(
        &mut self,
        prompt: &str,
        sink: &mut dyn Sink,
        approver: &mut dyn Approver,
        control: &TurnControl,
    ) -> Result<TurnEnd, AgentError> {
        let (expanded, tools) = self.expand_command(prompt).unzip();
        let prompt = expanded.as_deref().unwrap_or(prompt);
        self.parts.turn_tools = tools.flatten();
        self.begin(prompt)?;
        let mut turn = Turn::new(&mut self.parts, &self.explore, sink, approver, control);
        let result = match turn.run(prompt).await {
            // The turn's end is recorded with step 0 known: a start still under way is waited for.
            Ok(outcome) => match turn.s.ready(&mut *turn.sink).await {
                Ok(ready) => Ok(turn.finish(outcome, ready)),
                Err(err) => Err(err),
            },
            Err(err) => Err(err),
        };
        // A server that failed or joined while the last request ran is shown now rather than never.
        self.parts.refresh_mcp(sink);
        let status = result
            .as_ref()
            .map_or(Status::Error, |end| end.status.clone());
        let work = &self.parts.work;
        if let Some(warning) = self
            .skills
            .count_turn(&work.store, &work.session.id, &status)
        {
            self.parts.record_or_show(sink, warning);
        }
        match result {
            Ok(end) => {
                self.untouched = false;
                self.usage.add(&end.usage);
                Ok(end)
            }
            Err(err) => Err(self.failed(err)),
        }
    }

    /// The largest image the session's model is sent, in bytes (`max_image_size`).
    pub fn max_image_size(&self) -> u64 {
        self.parts.model.config.max_image_size
    }

    /// Gives the next turn `images` (checked by [`crate::tools::image`]), sent to the model after its prompt.
    /// A model whose provider says `vision = false` refuses them here, before any request.
    pub fn attach_images(&mut self, images: Vec<crate::protocol::Image>) -> Result<(), AgentError> {
        if !images.is_empty() && !self.parts.model.config.vision {
            return Err(AgentError::Config(
                crate::tools::image::ImageError::NoVision {
                    model: self.parts.model.config.display_name(),
                }
                .to_string(),
            ));
        }
        self.parts.images.extend(images);
        Ok(())
    }

    /// Compacts the conversation now, whatever its size (`/compact [focus]`): the model summarises all but the
    /// newest exchange, with `focus` as the user's emphasis. False when there was nothing older to replace.
    pub async fn compact(
        &mut self,
        focus: Option<&str>,
        sink: &mut dyn Sink,
        control: &TurnControl,
    ) -> Result<bool, AgentError> {
        self.parts.settle_window(true).await;
        let mut never = Never;
        let mut turn = Turn::new(&mut self.parts, &self.explore, sink, &mut never, control);
        let compacted = turn.compact(true, focus).await?;
        let (usage, cost) = (turn.usage(), turn.cost());
        let meta = &mut self.parts.work.log.meta;
        meta.input_tokens += usage.input_tokens;
        meta.output_tokens += usage.output_tokens;
        add_spend(meta, &usage, &cost);
        self.usage.add(&usage);
        self.parts.work.log.fold(&self.parts.work.store)?;
        Ok(compacted)
    }

    /// Moves the session's branch back `n` steps and its checkout with it (`/undo`), recorded in the log; the
    /// next turn commits on the new tip.
    pub fn undo(&mut self, n: u32) -> Result<Undone, AgentError> {
        self.parts.ready_blocking()?;
        let work = &mut self.parts.work;
        let from = record_undo(&work.store, &mut work.log, &mut work.session, n)?;
        let steps = work.session.steps;
        // The summaries and stop reports must not cite what was undone.
        work.step_lines
            .retain(|line| journal::step_of_line(line).is_some_and(|step| step <= steps));
        Ok(Undone {
            from,
            to: work.session.tip,
            steps,
        })
    }

    /// Switches the model for the next turns (`/model`): a new client, the context window resolved for the new
    /// model, and its key registered for redaction. The conversation stays.
    pub async fn set_model(&mut self, mut model: ModelConfig) -> Result<(), AgentError> {
        if !self.parts.tools.sandbox_config.network {
            model.tuning.server_tools.clear();
        }
        let link = &mut self.parts.model;
        link.client = Client::new_tuned(
            model.wire,
            model.base_url.clone(),
            model.api_key.clone(),
            link.connect_timeout,
            link.idle_timeout,
            model.tuning.clone(),
        )?;
        register_secrets(&model, &self.parts.work.store);
        let ollama = model.provider == "ollama";
        let reported = link.client.context_window(&model.model, ollama);
        let settings = Settings::resolve(&model, reported).await;
        if let Some(Probe::Asking(task)) = link.probe.take() {
            task.abort();
        }
        self.parts
            .context
            .switch_model(settings, &self.parts.conv.schemas);
        self.parts.line.model = model.display_name();
        link.config = model;
        Ok(())
    }

    /// Keeps a new session when it closes even if no turn ran, instead of rolling it back: an editor's
    /// `session/new` handed out its id, and the editor may load it later. Until a turn runs it is listed as
    /// `done` with no steps.
    pub fn keep(&mut self) {
        if self.untouched {
            self.untouched = false;
            self.prior_status = Status::Done;
        }
    }

    /// Starts more MCP servers for this session (those an editor passes with ACP's `session/new`, as
    /// `config::mcp::parse_acp` reads them); they join in the background like the configured ones, and an
    /// entry that cannot be used counts as a failed server.
    pub fn add_mcp_servers(&mut self, servers: Vec<(String, Result<ServerSpec, String>)>) {
        self.parts.add_mcp_servers(servers);
    }

    /// How the session's MCP servers stand.
    pub fn mcp_status(&self) -> McpStatus {
        self.parts.tools.mcp.status()
    }

    /// Stops the session's MCP servers gracefully (stdio: close stdin, SIGTERM, SIGKILL; HTTP: end the
    /// session). [`AgentSession::close`] stops any left without waiting on the runtime.
    pub async fn shutdown_mcp(&self) {
        let servers = &self.parts.tools.mcp;
        if servers.is_empty() {
            return;
        }
        let stopping = crate::sys::timings::begin();
        servers.shutdown().await;
        let count = crate::sys::timings::Detail::Count(servers.status().total() as u64);
        crate::sys::timings::end("mcp shutdown", stopping, &[("servers", count)]);
    }

    /// Ends the session: background jobs stopped, the sandbox's temp dir removed, and the log left as the last
    /// turn recorded it. A new session nothing happened in is rolled back instead (no branch, checkout or log).
    pub fn close(mut self) {
        super::footprint::mark("close");
        // Background jobs (dev servers) and MCP servers never outlive the session, however it ended.
        self.parts.tools.state.shutdown();
        self.parts.tools.mcp.stop_blocking();
        if let Some(pool) = self.parts.tools.state.lsp() {
            pool.shutdown();
        }
        // A start still under way is finished first, so what it made is kept or rolled back as a whole.
        let _ = self.parts.ready_blocking();
        self.session_end_hooks();
        let work = &mut self.parts.work;
        if self.parts.start_failed {
            // Best effort: the start's own error is what the user needs to see; it cleaned up after itself.
            let _ = work.store.delete_log(&work.session.id);
            let _ = work.store.forget_local(&work.session.id);
        } else if self.untouched {
            // Best effort: the model error is what the user needs to see.
            let _ = work.store.rollback_session(&work.session);
            let _ = work.store.delete_log(&work.session.id);
        } else if work.log.meta.status == Status::Running && self.parts.turns == 0 {
            // Resumed, and closed without a turn: the session stands where it stood.
            work.log.meta.status = std::mem::take(&mut self.prior_status);
            let _ = work.log.fold(&work.store);
        }
        if let Some(scratch) = self.parts.tools.scratch.take() {
            scratch.remove();
        }
    }

    /// Runs the `SessionEnd` hooks of a session that did something (their answers cannot change it any
    /// more: they are run, not read).
    fn session_end_hooks(&self) {
        use crate::config::event_hooks::HookEvent;
        if self.untouched || self.parts.start_failed || !self.parts.hooks.has(HookEvent::SessionEnd)
        {
            return;
        }
        let hooks = self.parts.hooks.matching(HookEvent::SessionEnd, &["other"]);
        let session = &self.parts.work.session;
        let base = super::event_hooks::Base {
            session_id: &session.id,
            cwd: session.root(),
            agent_branch: short_branch(session),
            step_commit: session.tip.to_string(),
        };
        let input = base.input(
            HookEvent::SessionEnd,
            serde_json::json!({"reason": "other"}),
        );
        super::event_hooks::run_all(
            hooks,
            &input,
            session.root(),
            Some(&self.parts.tools.sandbox),
        );
    }

    /// A prompt `/name args` naming a command defined in a file: its expanded prompt, and the tools it
    /// allows (with the command, for refusals); `None` for any other prompt.
    fn expand_command(&self, prompt: &str) -> Option<(String, Option<Narrowing>)> {
        let rest = prompt.trim().strip_prefix('/')?;
        let (name, args) = match rest.find(char::is_whitespace) {
            Some(at) => (&rest[..at], rest[at..].trim()),
            None => (rest, ""),
        };
        let command = self.file_commands.iter().find(|c| c.name == name)?;
        let tools = command.allowed_tools.clone().map(|tools| Narrowing {
            by: format!("/{name}"),
            tools,
        });
        Some((command.expand(args), tools))
    }

    /// The commands defined in files (`.claude/commands`, `.agents/commands`, repository and home).
    pub fn file_commands(&self) -> &[crate::config::agent_files::FileCommand] {
        &self.file_commands
    }

    /// The subagents defined in files.
    pub fn agents(&self) -> &[crate::config::agent_files::AgentDef] {
        &self.parts.agents
    }

    /// The session's id (6 hex characters).
    pub fn id(&self) -> &str {
        &self.parts.work.session.id
    }

    /// The session's branch without `refs/heads/`: `agent/<id>`.
    pub fn branch(&self) -> &str {
        short_branch(&self.parts.work.session)
    }

    /// The store-level session: base, step 0, tip, steps, checkout (for `/diff`: `git diff base...tip`).
    pub fn session(&self) -> &Session {
        &self.parts.work.session
    }

    /// The repository, for front-ends that read it between turns (diffs, logs).
    pub fn store(&self) -> &Store {
        &self.parts.work.store
    }

    /// Step commits on the branch (step 0 not counted).
    pub fn steps(&self) -> u32 {
        self.parts.work.session.steps
    }

    /// Tokens of the session's requests as its log counts them (earlier runs included); cached tokens of this
    /// process's turns.
    pub fn usage(&self) -> Usage {
        let meta = &self.parts.work.log.meta;
        Usage {
            input_tokens: meta.input_tokens,
            output_tokens: meta.output_tokens,
            cached_tokens: self.usage.cached_tokens,
        }
    }

    /// What the session's requests cost in USD (earlier runs included), as of its last turn; `None` when one
    /// of them had no price.
    pub fn cost(&self) -> Option<f64> {
        self.parts.work.log.meta.cost_usd
    }

    /// Project memory in this session: the entries it was given, its proposals not written yet.
    pub fn memory(&self) -> &super::memory::SessionMemory {
        &self.parts.tools.memory
    }

    /// The skills the session sees: usable ones with their counts, shadowed ones, and the problems of those
    /// left out (chat's `/skills`).
    pub fn skills(&self) -> &crate::store::skills::sources::Catalog {
        self.skills.catalog()
    }

    /// The plan the model keeps with `plan_update` (chat's `/plan`).
    pub fn plan(&self) -> &Plan {
        &self.parts.conv.plan
    }

    /// `provider/model`.
    pub fn model_name(&self) -> String {
        self.parts.model.config.display_name()
    }

    /// Estimated tokens the next request would carry (conversation and tool schemas), for a status line.
    pub fn context_used(&self) -> u64 {
        self.parts.context.tokens(&self.parts.conv.messages)
    }

    /// The model's context window as the session knows it (learned smaller after an overflow).
    pub fn context_window(&self) -> u64 {
        self.parts.context.settings.window
    }

    /// Gets a turn going: the branch's current tip, the title, the goal, and the status `running`.
    fn begin(&mut self, prompt: &str) -> Result<(), AgentError> {
        let first = !self.parts.resumed && self.parts.turns == 0;
        self.parts.turns += 1;
        if !self.parts.work.start.is_underway() {
            self.follow_branch()?;
        }
        let meta = &mut self.parts.work.log.meta;
        let mut changed = false;
        if meta.prompt.is_empty() {
            meta.prompt = prompt.to_owned();
            changed = true;
        }
        self.parts.conv.goal = if first {
            prompt.to_owned()
        } else {
            format!("{}\n\n(continued with:) {prompt}", meta.prompt)
        };
        if meta.status != Status::Running {
            meta.status = Status::Running;
            changed = true;
        }
        if changed {
            self.parts.work.log.fold(&self.parts.work.store)?;
        }
        Ok(())
    }

    /// Takes the branch as it stands if something outside the session moved it since the last turn (as
    /// `--resume` would), so the next step commits on the right parent.
    fn follow_branch(&mut self) -> Result<(), AgentError> {
        let work = &mut self.parts.work;
        let tip = work
            .store
            .branch_tip(&work.session.branch)?
            .ok_or_else(|| StoreError::Discarded {
                id: work.session.id.clone(),
                branch: short_branch(&work.session).to_owned(),
            })?;
        if tip != work.session.tip {
            work.session.steps = work.store.step_of(tip)?;
            work.session.tip = tip;
        }
        Ok(())
    }

    /// Records a turn that failed with a host error, and adds the hint the user needs to the error.
    fn failed(&mut self, err: AgentError) -> AgentError {
        // What the start made is known before the failure is recorded (or rolled back at close).
        let _ = self.parts.ready_blocking();
        let never_answered = matches!(err, AgentError::Model(_)) && !self.parts.announced;
        if !never_answered {
            self.untouched = false;
        }
        let work = &mut self.parts.work;
        work.log.meta.status = Status::Error;
        work.log.meta.steps = work.session.steps;
        // Best effort: the error itself is what the user needs to see.
        let _ = work.log.fold(&work.store);
        match err {
            AgentError::Model(err)
                if super::error::refused_an_image(&err, &self.parts.conv.messages) =>
            {
                AgentError::ImageRefused {
                    source: err,
                    provider: self.parts.model.config.provider.clone(),
                    model: self.parts.model.config.display_name(),
                }
            }
            AgentError::Model(err) => super::error::with_hint(err, &self.parts.model.config),
            err => err,
        }
    }
}

impl Toolbox {
    /// The session's tools, policy and sandbox (a sandbox that fell back is a warning for `sink`), its tool
    /// state and change tracker. `unprobed`: the sandbox does not wait for the isolation probe, and what it
    /// says about isolation is said once the checkout exists (`adopt`), before the first command.
    fn new(
        store: &Store,
        session: &Session,
        model: &ModelConfig,
        safety: SafetyOptions,
        run_timeout: Duration,
        unprobed: bool,
        sink: &mut dyn Sink,
    ) -> Toolbox {
        let sandbox_config = safety.sandbox.clone();
        let (policy, sandbox, scratch) = safety_for(store, session, safety, unprobed);
        if !unprobed {
            super::parts::show_notices(&sandbox, sink);
        }
        let output = store
            .common_dir()
            .join("agent")
            .join("output")
            .join(&session.id);
        let mut registry = Registry::builtin();
        // Refused at call time without the network (rather than hidden), so the model learns why.
        registry.add(Arc::new(crate::tools::web_fetch::WebFetch {
            rules: policy.rules.clone(),
            network: sandbox_config.network,
        }));
        Toolbox {
            registry,
            policy,
            sandbox: Arc::new(sandbox),
            sandbox_config,
            state: Arc::new(
                SessionState::new(Some(output), vec![model.api_key_env.to_string()]).with_images(
                    crate::tools::image::ImagePolicy {
                        vision: model.vision,
                        max_size: model.max_image_size,
                    },
                ),
            ),
            changes: ChangeTracker::new(session.root()),
            run_timeout,
            mcp: Servers::none(),
            mcp_shown: None,
            scratch,
            mcp_later: None,
            memory: super::memory::SessionMemory::off(),
            mcp_added: Vec::new(),
            mcp_configured: false,
            lsp_later: None,
            notices_later: unprobed,
        }
    }
}

impl Conversation {
    /// The conversation as the session's recorded `events` left it, after a fresh system prompt (the one
    /// for this checkout, with the project instructions from the root down to `cwd`), offering `schemas`.
    fn load(
        store: &Store,
        session: &Session,
        schemas: Vec<ToolSchema>,
        events: &[serde_json::Value],
        cwd: &Path,
        instructions_root: &Path,
        skills: &str,
    ) -> Conversation {
        let mut instructions = Instructions::new(instructions_root);
        for path in journal::loaded_instructions(events) {
            instructions.already_loaded(&path);
        }
        let lsp = schemas.iter().any(|s| s.name == "lsp");
        let system = system_prompt(
            session,
            &mut instructions,
            &relative_cwd(store, cwd),
            skills,
            lsp,
        );
        let mut messages = vec![Message::System { content: system }];
        messages.extend(journal::rebuild(events));
        journal::load_images(&mut messages, &|blob| store.read_image(blob));
        Conversation {
            messages,
            schemas,
            plan: journal::plan(events),
            goal: String::new(),
            instructions,
        }
    }
}

/// Moves `session`'s branch back `n` steps with its checkout and records it in the log (`undo` and `/undo`).
/// Returns the tip it moved away from.
pub fn record_undo(
    store: &Store,
    log: &mut SessionLog,
    session: &mut Session,
    n: u32,
) -> Result<ObjectId, StoreError> {
    let old = store.undo(session, n)?;
    let event = Event::Undone {
        steps: n,
        to: session.tip.to_string(),
        from: old.to_string(),
    };
    log.meta.steps = session.steps;
    journal::keep(log, &event)?;
    log.fold(store)?;
    Ok(old)
}

/// Known secrets are registered before anything can be written into refs (step 0 included).
fn register_secrets(model: &ModelConfig, store: &Store) {
    if let Some(key) = &model.api_key {
        redact::register(key, &model.api_key_env);
    }
    if let Ok(mut r) = redact::global().write() {
        r.add_dotenv_files(store.workdir());
    }
}

/// A new session: its id claimed and its log created (listed at once), with step 0, the branch and the
/// checkout (or the user's work tree) under way on a thread of their own (see `start`). A log that cannot be
/// created takes the rest with it.
fn start(
    store: &Store,
    model: &ModelConfig,
    title: String,
    here: bool,
    from: StartFrom,
    max_capture: u64,
    sink: &mut dyn Sink,
) -> Result<(Session, SessionLog, Option<Pending>), AgentError> {
    let id = store.claim_session_id(here)?;
    let repository_fsmonitor_trusted =
        from == StartFrom::WorkTree && starting::fsmonitor_trusted(store, sink);
    let options = StartOptions {
        capture: true,
        here,
        max_capture_size: max_capture,
        from,
        repository_fsmonitor_trusted,
    };
    // `done`: made in full already (a repository without commits, whose base is step 0 itself).
    let made = match store.head_commit_if_any() {
        Ok(None) | Err(_) => store
            .start(&id, &options, &crate::store::Progress::default())
            .map(|started| {
                starting::announce(&started, max_capture, sink);
                (started.session, true)
            }),
        Ok(Some(head)) => Ok((store.planned_session(&id, here, from.base(head)), false)),
    };
    let (session, done) = match made {
        Ok(made) => made,
        Err(err) => {
            let _ = store.forget_local(&id);
            return Err(err.into());
        }
    };
    let meta = Meta {
        id: id.clone(),
        prompt: title,
        model: model.display_name(),
        branch: session.branch.clone(),
        base: session.base.to_string(),
        step0: session.step0.map(|c| c.to_string()),
        status: Status::Running,
        here,
        // Nothing spent yet is a known cost; a request without a price makes it unknown.
        cost_usd: Some(0.0),
        ..Meta::default()
    };
    // The log first: it takes the session's lock, so the checkout being made is known to belong to a live
    // session, and `log` lists the session at once.
    let log = match store.create_log(meta) {
        Ok(log) => log,
        Err(err) => {
            if done {
                let _ = store.rollback_session(&session);
            }
            let _ = store.forget_local(&id);
            return Err(err.into());
        }
    };
    if done {
        return Ok((session, log, None));
    }
    match store
        .for_thread()
        .and_then(|handle| Pending::spawn(handle, id.clone(), options))
    {
        Ok(pending) => Ok((session, log, Some(pending))),
        Err(err) => {
            drop(log);
            let _ = store.delete_log(&id);
            let _ = store.forget_local(&id);
            Err(err.into())
        }
    }
}

/// An earlier session, locked for this process and marked running, with its recorded events and the status
/// it had.
fn reopen(
    store: &Store,
    which: &Resume,
    here: bool,
) -> Result<(Session, SessionLog, Vec<serde_json::Value>, Status), AgentError> {
    let prefix = match which {
        Resume::Id(prefix) => Some(prefix.as_str()),
        Resume::Latest => None,
    };
    let id = store.resolve_session(prefix)?;
    let mut log = store.open_log(&id)?;
    // Whether it worked in the user's tree is this repository's own record, never the (pushable) log's.
    if here && !store.is_here(&id) {
        return Err(StoreError::NotHere(id).into());
    }
    let session = store.reopen_session(&log.meta)?;
    let mut events = store.read_log(&id)?.events;
    journal::keep(&mut log, &Event::Resumed)?;
    // Review comments the model has not heard yet join the conversation before the prompt (issue 13):
    // recorded as a context event, so `show` and later resumes see them, then marked sent.
    let from = session.step0.unwrap_or(session.base);
    let unresolved = store.unresolved_review(&id, from, session.tip)?;
    if !unresolved.is_empty() {
        let origins = store.review_origins(&unresolved)?;
        let content = crate::store::review::feedback_message(&unresolved, &origins);
        let kind = "review".to_owned();
        let event = serde_json::to_value(Event::Context {
            kind,
            path: String::new(),
            content,
        })
        .unwrap_or(serde_json::Value::Null);
        log.append(event.clone())?;
        events.push(event);
        store.mark_review_sent(&id, &unresolved)?;
    }
    let prior = std::mem::replace(&mut log.meta.status, Status::Running);
    log.fold(store)?;
    Ok((session, log, events, prior))
}

/// The context settings for `model` at once, without waiting for the network: the window a setting or the
/// table names, else the one the endpoint reported earlier (cached a day for the user: [`super::window_cache`]),
/// else the default until the endpoint is asked, which happens once the first reply is in, beside the tool
/// calls and on the same connection ([`AgentSession::start_window_probe()`]); its answer is cached and
/// taken before the next request ([`AgentSession::settle_window()`]). The first request of a new session
/// carries only the system prompt and the prompt, which no window smaller than them could hold anyway
/// (issue 16: the probe cost every run a round trip before its first request).
fn resolve_context(client: &Client, model: &ModelConfig) -> (Settings, Option<Probe>) {
    use super::context::DEFAULT_WINDOW;
    if let Some(window) = Settings::named_window(model) {
        return (Settings::with_window(model, window), None);
    }
    let key = format!("{} {}", client.endpoint(), model.model);
    if let Some(cached) = super::window_cache::cached(&key) {
        let window = cached.unwrap_or(DEFAULT_WINDOW);
        return (Settings::with_window(model, window), None);
    }
    let ollama = model.provider == "ollama";
    let probe = client.context_window_task(&model.model, ollama).map(|ask| {
        Probe::Unasked(Box::pin(async move {
            let window = ask.await;
            super::window_cache::remember(&key, window);
            window
        }))
    });
    (Settings::with_window(model, DEFAULT_WINDOW), probe)
}

/// The policy and sandbox of a session: the guard's view of the repository, and where commands may write;
/// `unprobed`, a sandbox that takes the isolation probe's answer only when it needs it.
fn safety_for(
    store: &Store,
    session: &Session,
    opts: SafetyOptions,
    unprobed: bool,
) -> (Policy, Sandbox, Option<ScratchDir>) {
    let checkout =
        std::fs::canonicalize(session.root()).unwrap_or_else(|_| session.root().to_path_buf());
    let guard = GuardEnv {
        checkout: checkout.clone(),
        repo_root: store.workdir().to_path_buf(),
        common_dir: store.common_dir().to_path_buf(),
        home: dirs::home_dir(),
        session_branch: short_branch(session).to_string(),
    };
    // Without one (a full or read-only temp dir) commands keep the TMPDIR they would have had.
    let scratch = ScratchDir::create(&std::env::temp_dir(), &session.id).ok();
    let tmpdir = scratch.as_ref().map(|s| s.path().to_path_buf());
    let sandbox = if unprobed {
        Sandbox::unprobed(&opts.sandbox, &checkout, store.common_dir(), tmpdir)
    } else {
        Sandbox::new(&opts.sandbox, &checkout, store.common_dir(), tmpdir)
    };
    (Policy::new(opts.rules, guard), sandbox, scratch)
}

/// The system prompt: fixed sections, the project instructions found from the root down to the working
/// directory `cwd` (repository-relative), the skill catalog `skills`, the environment.
fn system_prompt(
    session: &Session,
    instructions: &mut Instructions,
    cwd: &Path,
    skills: &str,
    lsp: bool,
) -> String {
    let checkout = session.root().display().to_string();
    let base = session.base.to_string();
    let env = prompt::Environment {
        checkout: &checkout,
        branch: short_branch(session),
        base: &base,
        date: &date::today(),
        here: session.checkout.is_here(),
        lsp,
    };
    let files = instructions.initial(cwd);
    let mut section = if files.is_empty() {
        String::new()
    } else {
        instructions::section(&files)
    };
    // The catalog changes less often than the environment, more often than the instructions.
    if !skills.is_empty() {
        if !section.is_empty() {
            section.push_str("\n\n");
        }
        section.push_str(skills);
    }
    prompt::system_prompt(&env, &section)
}

/// The working directory relative to the repository root (where project instructions are looked up to).
fn relative_cwd(store: &Store, cwd: &Path) -> PathBuf {
    let root = std::fs::canonicalize(store.workdir()).unwrap_or_else(|_| store.workdir().into());
    let cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.into());
    cwd.strip_prefix(&root)
        .map(PathBuf::from)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::test_git::git;
    use crate::protocol::ToolCall;

    use super::super::call::Round;

    /// Keeps what the front-end would have been shown.
    struct Shown(Vec<Event>);

    impl Sink for Shown {
        fn emit(&mut self, event: &Event) {
            self.0.push(event.clone());
        }
    }

    /// The pipeline on its own, without a model: a call refused at the policy stage (here by a command's
    /// `allowed-tools`) comes back as the refusal, is shown and recorded once, never runs, and makes no step
    /// (the branch stays where it was).
    #[test]
    fn the_pipeline_reports_a_refused_call_and_makes_no_step() {
        let dir = tempfile::tempdir().expect("temp dir");
        git(dir.path(), &["init", "-q", "-b", "main"]);
        std::fs::write(dir.path().join("a.txt"), "a\n").expect("write");
        git(dir.path(), &["add", "a.txt"]);
        git(dir.path(), &["commit", "-q", "-m", "one"]);
        let env = |name: &str| (name == "OPENAI_API_KEY").then(|| "sk-unit-test".to_owned());
        let model = crate::config::Settings::default()
            .resolve(Some("openai/gpt-4.1"), &env)
            .expect("a model");
        let options = SessionOptions {
            model,
            max_steps: 5,
            max_time: None,
            max_tokens: None,
            max_cost: None,
            run_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
            retry: RetryPolicy::default(),
            safety: SafetyOptions::default(),
            resume: None,
            here: false,
            title: None,
            memory: None,
            settings: crate::config::Settings::default(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let mut shown = Shown(Vec::new());
            let mut session = AgentSession::open(dir.path(), options, &mut shown)
                .await
                .expect("a session");
            let ready = session.parts.ready(&mut shown).await.expect("its checkout");
            let tip = session.parts.work.session.tip;
            session.parts.turn_tools = Some(Narrowing {
                by: "/review".into(),
                tools: vec!["read_file".into()],
            });
            let control = TurnControl::new();
            let mut never = Never;
            let mut turn = Turn::new(
                &mut session.parts,
                &session.explore,
                &mut shown,
                &mut never,
                &control,
            );
            let call = ToolCall {
                id: "c1".into(),
                name: "write_file".into(),
                arguments: r#"{"path": "b.txt", "content": "x"}"#.into(),
            };
            let mut round = Round::default();
            let output = turn
                .pipeline()
                .dispatch(&call, false, &mut round, ready)
                .await
                .expect("no host failure");
            assert!(output.is_error, "{}", output.content);
            assert!(output.content.contains("allows only read_file"), "{}", output.content);
            assert_eq!(turn.recorded, ["c1"], "recorded when shown");
            assert!(round.stop.is_none() && round.finish.is_none());
            drop(turn);
            let parts = &session.parts;
            assert_eq!(parts.work.session.tip, tip, "no step");
            assert_eq!(parts.work.session.steps, 0);
            assert!(!parts.work.session.root().join("b.txt").exists(), "never ran");
            let results: Vec<&Event> = shown
                .0
                .iter()
                .filter(|e| matches!(e, Event::ToolResult { id, ok: false, .. } if id == "c1"))
                .collect();
            assert_eq!(results.len(), 1, "{:?}", shown.0);
            assert!(
                shown.0.iter().any(
                    |e| matches!(e, Event::Permission { id, decision, rule, .. } if id == "c1" && decision == "deny" && rule == "allowed-tools")
                ),
                "{:?}",
                shown.0
            );
            assert!(!shown.0.iter().any(|e| matches!(e, Event::Step { .. })));
            session.close();
        });
    }
}
