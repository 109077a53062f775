//! What a session's turns work on, cut into parts that change for different reasons: [`Workspace`] (the
//! repository, the branch and checkout, the log), [`ModelLink`] (the client and how to reach it), [`Toolbox`]
//! (tools, policy, sandbox, change tracking), [`Conversation`] (messages, plan, goal, instructions) and the
//! context accounting, held together as [`SessionParts`].
//!
//! Why a file of its own: a turn borrows these parts, and [`super::session::AgentSession`] owns them beside
//! what only its front-ends need. With the parts below both, the session depends on the turn and the turn on
//! the parts, never back up (issue 24: no file cycles). What the parts do on their own (wait for a new
//! session's start and take what it made, start and refresh MCP servers, learn the context window) is here
//! too, so a turn needs nothing of the session file.

use std::sync::Arc;
use std::time::Duration;

use crate::config::ModelConfig;
use crate::model::retry::RetryPolicy;
use crate::model::Client;
use crate::protocol::{Cost, Event, Message, Sink, ToolSchema, Usage};
use crate::safety::sandbox::{Sandbox, SandboxConfig};
use crate::safety::scratch::ScratchDir;
use crate::safety::Policy;
use crate::store::{
    ChangeTracker, Checkout, Meta, Session, SessionLog, Started, Store, StoreError,
};
use crate::tools::mcp::servers::{Servers, Status as McpStatus, STARTUP_WAIT};
use crate::tools::mcp::ServerSpec;
use crate::tools::{Registry, SessionState};

use super::context::ContextState;
use super::error::AgentError;
use super::event_hooks::SessionHooks;
use super::explore;
use super::instructions::Instructions;
use super::journal;
use super::plan::{self, Plan};
use super::start::{self as starting, Ready, Starting};
use super::stream::SessionLine;

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

/// The parts of a session a turn works on (see the module docs); [`super::session::AgentSession`] holds them
/// beside what only its front-ends use.
pub(super) struct SessionParts {
    pub work: Workspace,
    pub model: ModelLink,
    pub tools: Toolbox,
    pub conv: Conversation,
    pub context: ContextState,
    pub limits: Limits,
    /// The event hooks the session runs (issue 26).
    pub hooks: SessionHooks,
    /// Subagents defined in files, which the `agent` tool hands tasks to.
    pub agents: Vec<crate::config::agent_files::AgentDef>,
    /// The tools this turn may use (a command's `allowed-tools`): `None` for all.
    pub turn_tools: Option<Narrowing>,
    /// The `session` event, shown once the model first answers.
    pub line: SessionLine,
    /// The model has answered at least once in this process.
    pub announced: bool,
    /// Opened with `--resume`.
    pub resumed: bool,
    /// Turns begun in this process.
    pub turns: u32,
    /// Images the user gave for the next turn (`ask --image`, a path in chat), sent after its prompt.
    pub images: Vec<crate::protocol::Image>,
    /// The start of a new session could not be finished (step 0, branch or checkout): closing removes
    /// what was made of it (its log and local record).
    pub start_failed: bool,
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
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
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
    /// The MCP servers to start once a new session's checkout exists (they run in it).
    pub mcp_later: Option<McpPlan>,
    /// Project memory: what the session was given and proposed (`remember` runs with it).
    pub memory: super::memory::SessionMemory,
    /// Servers an editor added before the checkout existed; they start with the configured ones.
    pub mcp_added: Vec<(String, Result<ServerSpec, String>)>,
    /// Whether `mcp_later` has servers to start: then the first request waits for the checkout, so they
    /// can start and be waited for (see [`SessionParts::await_mcp`]).
    pub mcp_configured: bool,
    /// The language servers to attach once a new session's checkout exists (they run in it).
    pub lsp_later: Option<super::lsp::LspPlan>,
    /// Whether the sandbox's notices are still to be shown: a new session's are shown once its checkout
    /// exists, so that its first request does not wait for the isolation probe they depend on.
    pub notices_later: bool,
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

impl SessionParts {
    /// Before the session's first request: the MCP servers get their bounded startup time, so the request
    /// offers their tools (issue 23, finding 7). A new session's servers start in its checkout, so when
    /// there are any, the checkout is waited for first; the servers' own start still overlaps the rest of
    /// step 0 and whatever else the session does before its first request.
    pub(super) async fn await_mcp(&mut self, sink: &mut dyn Sink) -> Result<(), AgentError> {
        let later = self.tools.mcp_later.is_some();
        if later && (self.tools.mcp_configured || !self.tools.mcp_added.is_empty()) {
            self.ready(sink).await?;
        }
        let waiting = crate::sys::timings::begin();
        if self.tools.mcp.wait_for_start().await {
            // Only the one wait, before the first request: the servers' start that the request waited for.
            use crate::sys::timings::Detail::Count;
            let status = self.tools.mcp.status();
            let servers = ("servers", Count(status.total() as u64));
            let connected = ("connected", Count(status.connected() as u64));
            crate::sys::timings::end("mcp wait", waiting, &[servers, connected]);
        }
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
            self.record_or_show(sink, Event::Warning { message: warning });
        }
        let status = self.tools.mcp.status();
        if status.is_news(self.tools.mcp_shown.as_ref()) {
            self.record_or_show(sink, mcp_event(&status, None));
            self.tools.mcp_shown = Some(status);
        }
    }

    /// Records `event` in the log and shows it (so `show` prints it where the live run did); shown even when
    /// the log cannot take it, whose failure then shows at its next write.
    pub(super) fn record_or_show(&mut self, sink: &mut dyn Sink, event: Event) {
        if journal::record(&mut self.work.log, sink, event.clone()).is_err() {
            sink.emit(&event);
        }
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
        // What the finished start shows (files left out of step 0, the MCP servers' status) goes into the log
        // too, where it was shown.
        let mut heard = journal::Heard::new(sink);
        let started = pending.wait(&mut heard).await;
        super::footprint::mark("checkout");
        self.adopt(started, &mut heard)?;
        heard.record_into(&mut self.work.log);
        Ok(self.work.start.made())
    }

    /// [`SessionParts::ready()`], blocking the thread (undo, close, a failed turn).
    pub(super) fn ready_blocking(&mut self) -> Result<Ready, AgentError> {
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
        // Recorded in the log by its next fold (the turn's end, which waits for this): until then readers find
        // step 0 on the branch (`Store::read_meta()`), and a fold here would hold up the first tool.
        if started.session.step0.is_some() {
            work.log.meta.step0 = started.session.step0.map(|c| c.to_string());
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
        if std::mem::take(&mut self.tools.notices_later) {
            show_notices(&self.tools.sandbox, sink);
        }
        if let Some(lsp) = self.tools.lsp_later.take() {
            lsp.attach(work.session.root(), &self.tools.sandbox, &self.tools.state);
        }
        if let Some(plan) = self.tools.mcp_later.take() {
            let registry = &self.tools.registry;
            let sandbox = &self.tools.sandbox;
            self.tools.mcp = start_mcp(plan, &work.store, &work.session, registry, sandbox, sink);
            let added = std::mem::take(&mut self.tools.mcp_added);
            if !added.is_empty() {
                self.add_mcp_servers(added);
            }
        }
        Ok(())
    }

    /// Starts more MCP servers for this session (those an editor passes with ACP's `session/new`, as
    /// `config::mcp::parse_acp` reads them); they join in the background like the configured ones, and an
    /// entry that cannot be used counts as a failed server.
    pub(super) fn add_mcp_servers(&mut self, servers: Vec<(String, Result<ServerSpec, String>)>) {
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
}

/// What `sandbox` tells the user once about what commands are not isolated from.
pub(super) fn show_notices(sandbox: &Sandbox, sink: &mut dyn Sink) {
    for (topic, message) in sandbox.notices() {
        sink.emit(&Event::Notice {
            topic: topic.to_owned(),
            message,
        });
    }
}

/// `agent/<id>`.
pub(super) fn short_branch(session: &Session) -> &str {
    session.branch.trim_start_matches("refs/heads/")
}

/// What the model is offered: the registry's tools, `plan_update` and `finish`, then the MCP tools (last, so
/// the stable part of the request comes first for prompt caches, and servers joining change only its end).
pub(super) fn offered(
    tools: &Toolbox,
    agents: &[crate::config::agent_files::AgentDef],
) -> Vec<ToolSchema> {
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

/// The MCP servers a session may start: the user's config and `.mcp.json`, read once when the session opens
/// (which registers their secrets with the redactor before the first event is logged), and started from this
/// same reading, so the bytes whose trust was checked are the bytes that run.
pub(super) struct McpPlan {
    config: crate::config::mcp::McpConfig,
    startup_wait: Option<std::time::Duration>,
}

impl McpPlan {
    pub(super) fn read(settings: &crate::config::Settings, store: &Store) -> McpPlan {
        let env = |name: &str| crate::safety::secrets::var(name);
        let user = &settings.user;
        let repo = Some((store.workdir(), store.common_dir()));
        McpPlan {
            config: crate::config::mcp::load(&user.mcp_servers, &user.path, repo, &env),
            startup_wait: user.mcp_startup_wait,
        }
    }

    /// Whether any server is to start.
    pub(super) fn has_servers(&self) -> bool {
        self.config.to_start().next().is_some()
    }
}

/// Starts the MCP servers of `plan` in the background, and shows what was skipped: a project file not trusted
/// yet, entries that cannot be used (counted as failed).
pub(super) fn start_mcp(
    plan: McpPlan,
    store: &Store,
    session: &Session,
    registry: &Registry,
    sandbox: &Arc<Sandbox>,
    sink: &mut dyn Sink,
) -> Servers {
    let McpPlan {
        config,
        startup_wait,
    } = plan;
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
                None => specs.push(confined(spec, entry, sandbox)),
            },
            Err(problem) => {
                broken.push((entry.name.clone(), format!("{problem} ({})", entry.origin)))
            }
        }
    }
    let servers = Servers::start(specs, session.root().to_path_buf(), &reserved);
    servers.set_startup_wait(startup_wait.unwrap_or(STARTUP_WAIT));
    for (name, problem) in broken {
        servers.failed(&name, problem);
    }
    let notice = config.untrusted_notice();
    if !servers.is_empty() || notice.is_some() {
        sink.emit(&mcp_event(&servers.status(), notice.as_deref()));
    }
    servers
}

/// `spec`, under the session's sandbox when it is a repository's server: it starts in the checkout the model
/// writes to, and a command line that names no file of it (`python -m tools.srv`, `npm run mcp`) still runs
/// the model's code there; the user's own servers run as configured (issue 23, finding 1).
fn confined(
    spec: &ServerSpec,
    entry: &crate::config::mcp::Entry,
    sandbox: &Arc<Sandbox>,
) -> ServerSpec {
    let mut spec = spec.clone();
    if matches!(entry.origin, crate::config::mcp::Origin::Project { .. }) {
        spec.sandbox = Some(crate::config::mcp::Confinement(Arc::clone(sandbox)));
    }
    spec
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
        // Commands of a --here session write this tree: no link followed, no FIFO opened, bounded.
        let on_disk = crate::sys::fs::read_regular(&workdir.join(&rel), 64 << 20).ok();
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

/// The [`Event::Mcp`] of `status`, with the notice of an untrusted project file.
fn mcp_event(status: &McpStatus, untrusted: Option<&str>) -> Event {
    Event::Mcp {
        connected: status.connected(),
        total: status.total(),
        servers: status.states(),
        untrusted: untrusted.map(str::to_owned),
    }
}
