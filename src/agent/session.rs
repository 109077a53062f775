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
//! What a session holds is cut into parts that change for different reasons: [`Workspace`] (the repository,
//! the branch and checkout, the log), [`ModelLink`] (the client and how to reach it), [`Toolbox`] (tools,
//! policy, sandbox, change tracking), [`Conversation`] (messages, plan, goal, instructions) and the context
//! accounting. What lives for one turn only (budget, guards, the front-end's sink and approver) is in
//! [`super::turn`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::config::ModelConfig;
use crate::model::retry::RetryPolicy;
use crate::model::Client;
use crate::protocol::{Approver, Cost, Event, Message, Never, Sink, Status, ToolSchema, Usage};
use crate::safety::guard::GuardEnv;
use crate::safety::redact;
use crate::safety::rules::Rules;
use crate::safety::sandbox::{Sandbox, SandboxConfig};
use crate::safety::scratch::ScratchDir;
use crate::safety::Policy;
use crate::store::{
    ChangeTracker, Checkout, Meta, ObjectId, Session, SessionLog, StartFrom, StartOptions, Started,
    Store, StoreError, DEFAULT_MAX_CAPTURE_SIZE,
};
use crate::tools::mcp::servers::{Servers, Status as McpStatus, STARTUP_WAIT};
use crate::tools::mcp::ServerSpec;
use crate::tools::{Registry, SessionState};

use super::context::{ContextState, Settings};
use super::control::TurnControl;
use super::error::AgentError;
use super::explore::{self, Explorer};
use super::instructions::{self, Instructions};
use super::journal::{self, Event as LogEvent};
use super::plan::{self, Plan};
use super::skills::SessionSkills;
use super::start::{self as starting, Pending, Ready, Starting};
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
}

/// Adds a turn's cached tokens and cost to the session's summary (the callers add its input and output tokens).
pub(super) fn add_spend(meta: &mut Meta, usage: &Usage, cost: &Cost) {
    meta.cached_tokens += usage.cached_tokens;
    let mut total = Cost::of(meta.cost_usd);
    total.add(cost);
    meta.cost_usd = total.known();
}

/// The tools a turn may use, as a command's `allowed-tools` names them.
#[derive(Clone, Debug)]
pub(super) struct Narrowing {
    /// What narrowed them, for refusals: `/fix-issue`.
    pub by: String,
    pub tools: Vec<String>,
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
    pub(super) work: Workspace,
    pub(super) model: ModelLink,
    pub(super) tools: Toolbox,
    pub(super) conv: Conversation,
    pub(super) context: ContextState,
    pub(super) limits: Limits,
    /// The skills the session sees, and which were loaded this turn.
    pub(super) skills: SessionSkills,
    /// How `explore` calls run.
    pub(super) explore: Explorer,
    /// The event hooks the session runs (issue 26).
    pub(super) hooks: super::event_hooks::SessionHooks,
    /// Subagents defined in files, which the `agent` tool hands tasks to.
    pub(super) agents: Vec<crate::config::agent_files::AgentDef>,
    /// Commands defined in files: a prompt `/name args` runs one.
    file_commands: Vec<crate::config::agent_files::FileCommand>,
    /// The tools this turn may use (a command's `allowed-tools`): `None` for all.
    pub(super) turn_tools: Option<Narrowing>,
    /// The `session` event, shown once the model first answers.
    pub(super) line: SessionLine,
    /// The model has answered at least once in this process.
    pub(super) announced: bool,
    /// Opened with `--resume`.
    pub(super) resumed: bool,
    /// Turns begun in this process.
    pub(super) turns: u32,
    /// Images the user gave for the next turn (`ask --image`, a path in chat), sent after its prompt.
    pub(super) images: Vec<crate::protocol::Image>,
    /// A new session in which nothing happened but model requests that never got an answer: closing it
    /// leaves no trace (no branch, checkout or log), as if it had never started.
    pub(super) untouched: bool,
    /// The start of a new session could not be finished (step 0, branch or checkout): closing removes
    /// what was made of it (its log and local record).
    start_failed: bool,
    /// The log's status before this process set it to running (restored when no turn ran).
    prior_status: Status,
    /// Tokens of this process's turns.
    usage: Usage,
}

/// Where the session's work is kept: the repository, the session's branch and checkout, and its log.
pub(super) struct Workspace {
    pub store: Store,
    pub session: Session,
    /// Every message, tool result and step is appended as it happens.
    pub log: SessionLog,
    /// `step N: <commit> (files)` for summaries and stop reports.
    pub step_lines: Vec<String>,
    /// Step 0, the branch and the checkout of a new session while they are being made (see `start`).
    pub start: Starting,
    /// `max_capture_size`, for the warnings about files left out of step 0.
    pub max_capture: u64,
}

/// The model and how to reach it.
pub(super) struct ModelLink {
    pub client: Client,
    pub config: ModelConfig,
    /// The server's context window, to be asked once the first reply is in (see `resolve_context`).
    pub probe: Option<Probe>,
    pub retry: RetryPolicy,
    connect_timeout: Duration,
    idle_timeout: Duration,
}

impl ModelLink {
    /// The connect and idle timeouts the session's clients are made with.
    pub(super) fn timeouts(&self) -> (Duration, Duration) {
        (self.connect_timeout, self.idle_timeout)
    }
}

/// What tool calls run with.
pub(super) struct Toolbox {
    pub registry: Registry,
    pub policy: Policy,
    pub sandbox: Arc<Sandbox>,
    /// What the sandbox was made from: it is made again once a new session's checkout exists (it grants
    /// writes to the checkout's registration, which it finds through the checkout).
    pub sandbox_config: SandboxConfig,
    /// Shared by the session's tool calls: read fingerprints, saved output, background jobs.
    pub state: Arc<SessionState>,
    /// What commands changed in the checkout (inotify, or a stat scan).
    pub changes: ChangeTracker,
    pub run_timeout: Duration,
    /// The session's MCP servers, joining in the background.
    pub mcp: Servers,
    /// Their status as last shown, so each change is shown once.
    pub mcp_shown: Option<McpStatus>,
    /// The commands' private `TMPDIR`, locked while the session lives and removed when it closes.
    pub scratch: Option<ScratchDir>,
    /// The settings to start the MCP servers with once a new session's checkout exists (they run in it).
    pub mcp_later: Option<Result<crate::config::Settings, crate::config::ConfigError>>,
    /// Project memory: what the session was given and proposed (`remember` runs with it).
    pub memory: super::memory::SessionMemory,
    /// Servers an editor added before the checkout existed; they start with the configured ones.
    pub mcp_added: Vec<(String, Result<ServerSpec, String>)>,
    /// Whether `mcp_later` has servers to start: then the first request waits for the checkout, so they
    /// can start and be waited for (see [`AgentSession::await_mcp`]).
    pub mcp_configured: bool,
    /// The language servers to attach once a new session's checkout exists (they run in it).
    pub lsp_later: Option<super::lsp::LspPlan>,
}

/// The conversation and what the agent keeps beside it.
pub(super) struct Conversation {
    /// The system prompt, then the conversation as the model sees it.
    pub messages: Vec<Message>,
    /// What the model is offered: the registry's tools, then `plan_update` and `finish`.
    pub schemas: Vec<ToolSchema>,
    /// The plan, kept outside the conversation (see [`plan`]).
    pub plan: Plan,
    /// The user's goal, restated in every compaction summary.
    pub goal: String,
    pub instructions: Instructions,
}

/// Asking the endpoint for its context window: the question, then the task asking it.
pub(super) enum Probe {
    /// Not asked yet: the question, to be sent beside a request or awaited.
    Unasked(std::pin::Pin<Box<dyn std::future::Future<Output = Option<u64>> + Send>>),
    Asking(tokio::task::JoinHandle<Option<u64>>),
}

/// The budgets every turn starts with.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub max_steps: u32,
    pub max_time: Option<Duration>,
    pub max_tokens: Option<u64>,
    pub max_cost: Option<f64>,
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
        super::footprint::mark("repository");
        register_secrets(&model, &store);
        let env = |name: &str| crate::safety::secrets::var(name);
        // The front-end loaded the settings for the model already; a file that broke since costs only what
        // it sets here (MCP servers, the step-0 size limit).
        let settings = crate::config::Settings::load(cwd, &env);
        let max_capture = settings
            .as_ref()
            .ok()
            .and_then(|s| s.max_capture_size())
            .unwrap_or(DEFAULT_MAX_CAPTURE_SIZE);
        // The agent's own settings, from the same files (defaults when they broke since).
        let defaults = crate::config::Settings::default();
        let own = settings.as_ref().unwrap_or(&defaults);
        let timeouts = (options.connect_timeout, options.idle_timeout);
        let explore = Explorer::new(own, &model, timeouts)?;
        let caps = own.catalog_caps();
        let resumed = options.resume.is_some();
        let (session, log, events, prior_status, pending) = match &options.resume {
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
        let mut tools = Toolbox::new(&store, &session, &model, safety, run_timeout, sink);
        // The backend's web_search only where the provider searches nothing itself.
        if model.tuning.server_tools.is_empty() {
            if let Some(backend) = own.user.web_search.backend(&env) {
                tools
                    .registry
                    .add(Arc::new(crate::tools::web_search::WebSearch {
                        backend,
                        network: tools.sandbox_config.network,
                    }));
            }
        }
        tools.memory = super::memory::SessionMemory::load(options.memory, &events);
        let own_hooks = settings
            .as_ref()
            .ok()
            .and_then(|s| s.user.event_hooks.as_ref());
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
        if pending.is_some() && !session.checkout.is_here() {
            // Reading the servers' config registers their secrets (env values, tokens) with the redactor; that
            // must happen now, before the first event is logged, not when they start.
            if let Ok(settings) = &settings {
                let user = &settings.user;
                let repo = Some((store.workdir(), store.common_dir()));
                let config = crate::config::mcp::load(&user.mcp_servers, &user.path, repo, &env);
                tools.mcp_configured = config.to_start().next().is_some();
            }
            tools.mcp_later = Some(settings);
        } else {
            tools.mcp = start_mcp(settings, &store, &session, &tools.registry, sink);
        }
        let (context, probe) = resolve_context(&client, &model, store.common_dir());
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
        super::footprint::mark("open");
        Ok(AgentSession {
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
            skills,
            explore,
            hooks,
            agents,
            file_commands,
            turn_tools: None,
            announced: false,
            resumed,
            turns: 0,
            images: Vec::new(),
            untouched: !resumed,
            start_failed: false,
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
        self.turn_tools = tools.flatten();
        self.begin(prompt)?;
        let mut turn = Turn::new(self, sink, approver, control);
        let result = match turn.run(prompt).await {
            // The turn's end is recorded with step 0 known: a start still under way is waited for.
            Ok(outcome) => match turn.s.ready(&mut *turn.sink).await {
                Ok(ready) => Ok(turn.finish(outcome, ready)),
                Err(err) => Err(err),
            },
            Err(err) => Err(err),
        };
        // A server that failed or joined while the last request ran is shown now rather than never.
        self.refresh_mcp(sink);
        let status = result
            .as_ref()
            .map_or(Status::Error, |end| end.status.clone());
        self.skills
            .count_turn(&self.work.store, &self.work.session.id, &status, sink);
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
        self.model.config.max_image_size
    }

    /// Gives the next turn `images` (checked by [`crate::tools::image`]), sent to the model after its prompt.
    /// A model whose provider says `vision = false` refuses them here, before any request.
    pub fn attach_images(&mut self, images: Vec<crate::protocol::Image>) -> Result<(), AgentError> {
        if !images.is_empty() && !self.model.config.vision {
            return Err(AgentError::Config(
                crate::tools::image::ImageError::NoVision {
                    model: self.model.config.display_name(),
                }
                .to_string(),
            ));
        }
        self.images.extend(images);
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
        self.settle_window(true).await;
        let mut never = Never;
        let mut turn = Turn::new(self, sink, &mut never, control);
        let compacted = turn.compact(true, focus).await?;
        let (usage, cost) = (turn.usage(), turn.cost());
        let meta = &mut self.work.log.meta;
        meta.input_tokens += usage.input_tokens;
        meta.output_tokens += usage.output_tokens;
        add_spend(meta, &usage, &cost);
        self.usage.add(&usage);
        self.work.log.fold(&self.work.store)?;
        Ok(compacted)
    }

    /// Moves the session's branch back `n` steps and its checkout with it (`/undo`), recorded in the log; the
    /// next turn commits on the new tip.
    pub fn undo(&mut self, n: u32) -> Result<Undone, AgentError> {
        self.ready_blocking()?;
        let work = &mut self.work;
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
        if !self.tools.sandbox_config.network {
            model.tuning.server_tools.clear();
        }
        let link = &mut self.model;
        link.client = Client::new_tuned(
            model.wire,
            model.base_url.clone(),
            model.api_key.clone(),
            link.connect_timeout,
            link.idle_timeout,
            model.tuning.clone(),
        )?;
        register_secrets(&model, &self.work.store);
        let ollama = model.provider == "ollama";
        let reported = link.client.context_window(&model.model, ollama);
        let settings = Settings::resolve(&model, reported).await;
        if let Some(Probe::Asking(task)) = link.probe.take() {
            task.abort();
        }
        self.context.switch_model(settings, &self.conv.schemas);
        self.line.model = model.display_name();
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
        if self.tools.mcp_later.is_some() {
            // The checkout they run in does not exist yet (`adopt` starts them).
            self.tools.mcp_added.extend(servers);
            return;
        }
        let mut specs = Vec::new();
        for (name, spec) in servers {
            match spec {
                Ok(spec) => specs.push(spec),
                Err(problem) => self.tools.mcp.failed(&name, problem),
            }
        }
        self.tools.mcp.add(specs, self.work.session.root());
    }

    /// How the session's MCP servers stand.
    pub fn mcp_status(&self) -> McpStatus {
        self.tools.mcp.status()
    }

    /// Stops the session's MCP servers gracefully (stdio: close stdin, SIGTERM, SIGKILL; HTTP: end the
    /// session). [`AgentSession::close`] stops any left without waiting on the runtime.
    pub async fn shutdown_mcp(&self) {
        self.tools.mcp.shutdown().await;
    }

    /// Before the session's first request: the MCP servers get their bounded startup time, so the request
    /// offers their tools (issue 23, finding 7). A new session's servers start in its checkout, so when
    /// there are any, the checkout is waited for first; the servers' own start still overlaps the rest of
    /// step 0 and whatever else the session does before its first request.
    pub(super) async fn await_mcp(&mut self, sink: &mut dyn Sink) -> Result<(), AgentError> {
        let later = self.tools.mcp_later.is_some();
        if later && (self.tools.mcp_configured || !self.tools.mcp_added.is_empty()) {
            self.ready(sink).await?;
        }
        self.tools.mcp.wait_for_start().await;
        Ok(())
    }

    /// Before a request: the tools of servers that joined (or changed) since are offered from now on, and a
    /// change in their status worth telling (a failure, all settled) is shown.
    pub(super) fn refresh_mcp(&mut self, sink: &mut dyn Sink) {
        if self.tools.mcp.is_empty() {
            return;
        }
        let schemas = offered(&self.tools, &self.agents);
        if schemas != self.conv.schemas {
            self.context.accounting.set_schemas(&schemas);
            self.conv.schemas = schemas;
        }
        for warning in self.tools.mcp.take_warnings() {
            sink.emit(&Event::Warning { message: warning });
        }
        let status = self.tools.mcp.status();
        if status.is_news(self.tools.mcp_shown.as_ref()) {
            show_mcp(sink, &status, None);
            self.tools.mcp_shown = Some(status);
        }
    }

    /// Ends the session: background jobs stopped, the sandbox's temp dir removed, and the log left as the last
    /// turn recorded it. A new session nothing happened in is rolled back instead (no branch, checkout or log).
    pub fn close(mut self) {
        super::footprint::mark("close");
        // Background jobs (dev servers) and MCP servers never outlive the session, however it ended.
        self.tools.state.shutdown();
        self.tools.mcp.stop_blocking();
        if let Some(pool) = self.tools.state.lsp() {
            pool.shutdown();
        }
        // A start still under way is finished first, so what it made is kept or rolled back as a whole.
        let _ = self.ready_blocking();
        self.session_end_hooks();
        let work = &mut self.work;
        if self.start_failed {
            // Best effort: the start's own error is what the user needs to see; it cleaned up after itself.
            let _ = work.store.delete_log(&work.session.id);
            let _ = work.store.forget_local(&work.session.id);
        } else if self.untouched {
            // Best effort: the model error is what the user needs to see.
            let _ = work.store.rollback_session(&work.session);
            let _ = work.store.delete_log(&work.session.id);
        } else if work.log.meta.status == Status::Running && self.turns == 0 {
            // Resumed, and closed without a turn: the session stands where it stood.
            work.log.meta.status = std::mem::take(&mut self.prior_status);
            let _ = work.log.fold(&work.store);
        }
        if let Some(scratch) = self.tools.scratch.take() {
            scratch.remove();
        }
    }

    /// Runs the `SessionEnd` hooks of a session that did something (their answers cannot change it any
    /// more: they are run, not read).
    fn session_end_hooks(&self) {
        use crate::config::event_hooks::HookEvent;
        if self.untouched || self.start_failed || !self.hooks.has(HookEvent::SessionEnd) {
            return;
        }
        let hooks = self.hooks.matching(HookEvent::SessionEnd, &["other"]);
        let session = &self.work.session;
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
        super::event_hooks::run_all(hooks, &input, session.root(), Some(&self.tools.sandbox));
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
        &self.agents
    }

    /// The session's id (6 hex characters).
    pub fn id(&self) -> &str {
        &self.work.session.id
    }

    /// The session's branch without `refs/heads/`: `agent/<id>`.
    pub fn branch(&self) -> &str {
        short_branch(&self.work.session)
    }

    /// The store-level session: base, step 0, tip, steps, checkout (for `/diff`: `git diff base...tip`).
    pub fn session(&self) -> &Session {
        &self.work.session
    }

    /// The repository, for front-ends that read it between turns (diffs, logs).
    pub fn store(&self) -> &Store {
        &self.work.store
    }

    /// Step commits on the branch (step 0 not counted).
    pub fn steps(&self) -> u32 {
        self.work.session.steps
    }

    /// Tokens of the session's requests as its log counts them (earlier runs included); cached tokens of this
    /// process's turns.
    pub fn usage(&self) -> Usage {
        let meta = &self.work.log.meta;
        Usage {
            input_tokens: meta.input_tokens,
            output_tokens: meta.output_tokens,
            cached_tokens: self.usage.cached_tokens,
        }
    }

    /// What the session's requests cost in USD (earlier runs included), as of its last turn; `None` when one
    /// of them had no price.
    pub fn cost(&self) -> Option<f64> {
        self.work.log.meta.cost_usd
    }

    /// Project memory in this session: the entries it was given, its proposals not written yet.
    pub fn memory(&self) -> &super::memory::SessionMemory {
        &self.tools.memory
    }

    /// The skills the session sees: usable ones with their counts, shadowed ones, and the problems of those
    /// left out (chat's `/skills`).
    pub fn skills(&self) -> &crate::store::skills::sources::Catalog {
        self.skills.catalog()
    }

    /// The plan the model keeps with `plan_update` (chat's `/plan`).
    pub fn plan(&self) -> &Plan {
        &self.conv.plan
    }

    /// `provider/model`.
    pub fn model_name(&self) -> String {
        self.model.config.display_name()
    }

    /// Estimated tokens the next request would carry (conversation and tool schemas), for a status line.
    pub fn context_used(&self) -> u64 {
        self.context.tokens(&self.conv.messages)
    }

    /// The model's context window as the session knows it (learned smaller after an overflow).
    pub fn context_window(&self) -> u64 {
        self.context.settings.window
    }

    /// Starts asking the endpoint for its context window, if that is still to be done.
    pub(super) fn start_window_probe(&mut self) {
        if let Some(Probe::Unasked(_)) = &self.model.probe {
            if let Some(Probe::Unasked(ask)) = self.model.probe.take() {
                self.model.probe = Some(Probe::Asking(tokio::spawn(ask)));
            }
        }
    }

    /// Takes the context window the endpoint reports, if it is being asked: waiting for the answer when
    /// `wait` (the next request could need compaction; asking first if nobody has yet), else only if it is
    /// there already.
    pub(super) async fn settle_window(&mut self, wait: bool) {
        let reported = match self.model.probe.take() {
            None => return,
            Some(Probe::Unasked(ask)) if wait => ask.await,
            Some(Probe::Asking(task)) if wait || task.is_finished() => task.await.ok().flatten(),
            Some(probe) => {
                self.model.probe = Some(probe);
                return;
            }
        };
        let Some(reported) = reported else {
            return;
        };
        let window = &mut self.context.settings.window;
        // An overflow may have taught a smaller window meanwhile: that one is the truth.
        *window = if *window == super::context::DEFAULT_WINDOW {
            reported
        } else {
            (*window).min(reported)
        };
    }

    /// Waits for a new session's start (step 0, branch, checkout) if it is still under way, showing progress
    /// when the checkout takes long, and takes what it made: the [`Ready`] that what works in the checkout
    /// needs. Called before the first tool call and at the end of a turn.
    pub(super) async fn ready(&mut self, sink: &mut dyn Sink) -> Result<Ready, AgentError> {
        let Some(pending) = self.work.start.take_underway() else {
            return self.work.start.ready().ok_or(AgentError::StartFailed);
        };
        let started = pending.wait(sink).await;
        super::footprint::mark("checkout");
        self.adopt(started, sink)?;
        Ok(self.work.start.made())
    }

    /// [`AgentSession::ready()`], blocking the thread (undo, close, a failed turn).
    fn ready_blocking(&mut self) -> Result<Ready, AgentError> {
        let Some(pending) = self.work.start.take_underway() else {
            return self.work.start.ready().ok_or(AgentError::StartFailed);
        };
        let started = pending.join();
        self.adopt(started, &mut starting::Quiet)?;
        Ok(self.work.start.made())
    }

    /// Takes a finished start: step 0 and the branch's tip into the session and its log, and the checkout
    /// into the sandbox and the instructions.
    fn adopt(
        &mut self,
        started: Result<Started, StoreError>,
        sink: &mut dyn Sink,
    ) -> Result<(), AgentError> {
        let started = match started {
            Ok(started) => started,
            Err(err) => {
                self.start_failed = true;
                return Err(err.into());
            }
        };
        starting::announce(&started, self.work.max_capture, sink);
        let work = &mut self.work;
        work.session.step0 = started.session.step0;
        work.session.tip = started.session.tip;
        work.session.base = started.session.base;
        if started.session.step0.is_some() {
            work.log.meta.step0 = started.session.step0.map(|c| c.to_string());
            work.log.fold(&work.store)?;
        }
        if let Checkout::Linked(root) = &work.session.checkout {
            let checkout = std::fs::canonicalize(root).unwrap_or_else(|_| root.clone());
            let tmpdir = self.tools.sandbox.tmpdir.clone();
            let sandbox = Sandbox::new(
                &self.tools.sandbox_config,
                &checkout,
                work.store.common_dir(),
                tmpdir,
            );
            self.tools.sandbox = Arc::new(sandbox);
            self.conv.instructions.rebase(root);
        }
        if let Some(lsp) = self.tools.lsp_later.take() {
            lsp.attach(work.session.root(), &self.tools.sandbox, &self.tools.state);
        }
        if let Some(settings) = self.tools.mcp_later.take() {
            let registry = &self.tools.registry;
            self.tools.mcp = start_mcp(settings, &work.store, &work.session, registry, sink);
            let added = std::mem::take(&mut self.tools.mcp_added);
            if !added.is_empty() {
                self.add_mcp_servers(added);
            }
        }
        Ok(())
    }

    /// Gets a turn going: the branch's current tip, the title, the goal, and the status `running`.
    fn begin(&mut self, prompt: &str) -> Result<(), AgentError> {
        let first = !self.resumed && self.turns == 0;
        self.turns += 1;
        if !self.work.start.is_underway() {
            self.follow_branch()?;
        }
        let meta = &mut self.work.log.meta;
        let mut changed = false;
        if meta.prompt.is_empty() {
            meta.prompt = prompt.to_owned();
            changed = true;
        }
        self.conv.goal = if first {
            prompt.to_owned()
        } else {
            format!("{}\n\n(continued with:) {prompt}", meta.prompt)
        };
        if meta.status != Status::Running {
            meta.status = Status::Running;
            changed = true;
        }
        if changed {
            self.work.log.fold(&self.work.store)?;
        }
        Ok(())
    }

    /// Takes the branch as it stands if something outside the session moved it since the last turn (as
    /// `--resume` would), so the next step commits on the right parent.
    fn follow_branch(&mut self) -> Result<(), AgentError> {
        let work = &mut self.work;
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
        let _ = self.ready_blocking();
        let never_answered = matches!(err, AgentError::Model(_)) && !self.announced;
        if !never_answered {
            self.untouched = false;
        }
        let work = &mut self.work;
        work.log.meta.status = Status::Error;
        work.log.meta.steps = work.session.steps;
        // Best effort: the error itself is what the user needs to see.
        let _ = work.log.fold(&work.store);
        match err {
            AgentError::Model(err) if super::error::refused_an_image(&err, &self.conv.messages) => {
                AgentError::ImageRefused {
                    source: err,
                    provider: self.model.config.provider.clone(),
                    model: self.model.config.display_name(),
                }
            }
            AgentError::Model(err) => super::error::with_hint(err, &self.model.config),
            err => err,
        }
    }
}

impl Toolbox {
    /// The session's tools, policy and sandbox (a sandbox that fell back is a warning for `sink`), its tool
    /// state and change tracker.
    fn new(
        store: &Store,
        session: &Session,
        model: &ModelConfig,
        safety: SafetyOptions,
        run_timeout: Duration,
        sink: &mut dyn Sink,
    ) -> Toolbox {
        let sandbox_config = safety.sandbox.clone();
        let (policy, sandbox, scratch) = safety_for(store, session, safety);
        for (topic, message) in sandbox.notices() {
            sink.emit(&Event::Notice {
                topic: topic.to_owned(),
                message,
            });
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
    let event = LogEvent::Undo {
        from: old.to_string(),
        to: session.tip.to_string(),
        steps: n,
    };
    log.meta.steps = session.steps;
    log.append(event.to_json())?;
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
    let options = StartOptions {
        capture: true,
        here,
        max_capture_size: max_capture,
        from,
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
    match Pending::spawn(store.workdir().to_path_buf(), id.clone(), options) {
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
    log.append(LogEvent::Resume {}.to_json())?;
    // Review comments the model has not heard yet join the conversation before the prompt (issue 13):
    // recorded as a context event, so `show` and later resumes see them, then marked sent.
    let from = session.step0.unwrap_or(session.base);
    let unresolved = store.unresolved_review(&id, from, session.tip)?;
    if !unresolved.is_empty() {
        let content = crate::store::review::feedback_message(&unresolved);
        let kind = "review".to_owned();
        let event = LogEvent::Context {
            kind,
            path: String::new(),
            content,
        }
        .to_json();
        log.append(event.clone())?;
        events.push(event);
        store.mark_review_sent(&id, &unresolved)?;
    }
    let prior = std::mem::replace(&mut log.meta.status, Status::Running);
    log.fold(store)?;
    Ok((session, log, events, prior))
}

/// The context settings for `model` at once, without waiting for the network: the window a setting or the
/// table names, else the one the endpoint reported earlier (cached a day under `.git/agent/windows.json`),
/// else the default until the endpoint is asked, which happens once the first reply is in, beside the tool
/// calls and on the same connection ([`AgentSession::start_window_probe()`]); its answer is cached and
/// taken before the next request ([`AgentSession::settle_window()`]). The first request of a new session
/// carries only the system prompt and the prompt, which no window smaller than them could hold anyway
/// (issue 16: the probe cost every run a round trip before its first request).
fn resolve_context(
    client: &Client,
    model: &ModelConfig,
    common_dir: &Path,
) -> (Settings, Option<Probe>) {
    use super::context::DEFAULT_WINDOW;
    if let Some(window) = Settings::named_window(model) {
        return (Settings::with_window(model, window), None);
    }
    let key = format!("{} {}", client.endpoint(), model.model);
    if let Some(cached) = crate::store::cached_window(common_dir, &key) {
        let window = cached.unwrap_or(DEFAULT_WINDOW);
        return (Settings::with_window(model, window), None);
    }
    let ollama = model.provider == "ollama";
    let probe = client.context_window_task(&model.model, ollama).map(|ask| {
        let common_dir = common_dir.to_path_buf();
        Probe::Unasked(Box::pin(async move {
            let window = ask.await;
            crate::store::cache_window(&common_dir, &key, window);
            window
        }))
    });
    (Settings::with_window(model, DEFAULT_WINDOW), probe)
}

/// The policy and sandbox of a session: the guard's view of the repository, and where commands may write.
fn safety_for(
    store: &Store,
    session: &Session,
    opts: SafetyOptions,
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
    let sandbox = Sandbox::new(&opts.sandbox, &checkout, store.common_dir(), tmpdir);
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

/// `agent/<id>`.
pub(super) fn short_branch(session: &Session) -> &str {
    session.branch.trim_start_matches("refs/heads/")
}

/// What the model is offered: the registry's tools, `plan_update` and `finish`, then the MCP tools (last, so
/// the stable part of the request comes first for prompt caches, and servers joining change only its end).
fn offered(tools: &Toolbox, agents: &[crate::config::agent_files::AgentDef]) -> Vec<ToolSchema> {
    let mut schemas: Vec<_> = tools.registry.iter().map(|t| t.schema()).collect();
    schemas.extend(plan::schemas());
    schemas.extend(tools.memory.schemas());
    schemas.push(explore::schema());
    if !agents.is_empty() {
        schemas.push(explore::agent_schema(agents));
    }
    schemas.extend(tools.mcp.offered());
    schemas
}

/// Starts the MCP servers of the user's config and of a trusted `.mcp.json`, in the background, and shows
/// what was skipped: a project file not trusted yet, entries that cannot be used (counted as failed).
fn start_mcp(
    settings: Result<crate::config::Settings, crate::config::ConfigError>,
    store: &Store,
    session: &Session,
    registry: &Registry,
    sink: &mut dyn Sink,
) -> Servers {
    let env = |name: &str| crate::safety::secrets::var(name);
    let user = match settings {
        Ok(settings) => settings.user,
        Err(err) => {
            sink.emit(&Event::Warning {
                message: format!("MCP servers not started: {err}"),
            });
            return Servers::none();
        }
    };
    let config = crate::config::mcp::load(
        &user.mcp_servers,
        &user.path,
        Some((store.workdir(), store.common_dir())),
        &env,
    );
    if let Some(project) = config.project.as_ref() {
        if let Some(error) = &project.error {
            let message = format!(
                "{}: {error}; its MCP servers are not used",
                project.path.display()
            );
            sink.emit(&Event::Warning { message });
        }
    }
    let mut reserved: Vec<String> = registry.names().iter().map(|n| n.to_string()).collect();
    reserved.extend(plan::schemas().into_iter().map(|s| s.name));
    reserved.push(super::memory::REMEMBER_TOOL.to_owned());
    reserved.push(explore::TOOL.to_owned());
    let reserved: Vec<&str> = reserved.iter().map(String::as_str).collect();
    let mut specs = Vec::new();
    let mut broken = Vec::new();
    for entry in config.to_start() {
        match &entry.spec {
            Ok(spec) => match changed_here(store, session, entry, spec) {
                Some(problem) => broken.push((entry.name.clone(), problem)),
                None => specs.push(spec.clone()),
            },
            Err(problem) => {
                broken.push((entry.name.clone(), format!("{problem} ({})", entry.origin)))
            }
        }
    }
    let servers = Servers::start(specs, session.root().to_path_buf(), &reserved);
    servers.set_startup_wait(user.mcp_startup_wait.unwrap_or(STARTUP_WAIT));
    for (name, problem) in broken {
        servers.failed(&name, problem);
    }
    let notice = config.untrusted_notice();
    if !servers.is_empty() || notice.is_some() {
        show_mcp(sink, &servers.status(), notice.as_deref());
    }
    servers
}

/// Why a project server may not start in a `--here` session: it runs a file of the work tree that differs
/// from the session's base commit. A `--here` session writes into the user's own tree, so the file the user
/// trusted may be one the model rewrote, and the server would run it outside the sandbox (issue 23,
/// finding 1); other sessions write into their checkout and the server runs the user's file.
fn changed_here(
    store: &Store,
    session: &Session,
    entry: &crate::config::mcp::Entry,
    spec: &ServerSpec,
) -> Option<String> {
    if !session.checkout.is_here()
        || !matches!(entry.origin, crate::config::mcp::Origin::Project { .. })
    {
        return None;
    }
    let workdir = std::fs::canonicalize(store.workdir()).unwrap_or_else(|_| store.workdir().into());
    let files = crate::config::mcp::files_run(spec, store.workdir())
        .into_iter()
        .chain(crate::config::mcp::files_run(spec, &workdir));
    for rel in files {
        let on_disk = std::fs::read(workdir.join(&rel)).ok();
        let committed = store
            .blob_at(session.base, &rel.to_string_lossy())
            .ok()
            .flatten()
            .map(|(bytes, _)| bytes);
        if on_disk.is_none() || on_disk != committed {
            return Some(format!(
                "not started: it runs {}, which differs from the session's base commit, and a --here session may \
                 have written it; commit the file (or work without --here) to use this server",
                rel.display()
            ));
        }
    }
    None
}

fn show_mcp(sink: &mut dyn Sink, status: &McpStatus, untrusted: Option<&str>) {
    let states = status.states();
    sink.emit(&Event::Mcp {
        connected: status.connected(),
        total: status.total(),
        servers: states.clone(),
        untrusted: untrusted.map(str::to_owned),
    });
}
