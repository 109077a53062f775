//! A session's MCP servers: all started at once in the background, so none delays the first model request;
//! each server's tools join the session as soon as it is ready, and again whenever it says its list changed.
//!
//! [`Servers::tools`] is what the model may call right now, by the names it sees (`mcp__<server>__<tool>`);
//! [`Servers::status`] says how many are connected and why the others failed (with their last stderr
//! lines). When the servers bring more than [`SEARCH_AT`] tools, the model is offered one search tool instead
//! of every schema (lazy discovery): a search adds the tools it finds to what the following requests offer,
//! so the request does not grow with every server the user adds.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;

use super::names::Names;
use super::render;
use super::{start, Client, Failure, Progress, ServerSpec, ToolDef};
use crate::protocol::ToolSchema;

/// More MCP tools than this and the model gets [`SEARCH_TOOL`] instead of their schemas.
pub const SEARCH_AT: usize = 40;
/// Overrides [`SEARCH_AT`] (a count), for tests and for users with small context windows.
pub const SEARCH_AT_VAR: &str = "GIT_AGENT_MCP_SEARCH_AT";
/// The name of the lazy-discovery tool.
pub const SEARCH_TOOL: &str = "mcp_tool_search";
/// How many tools one search returns at most.
const SEARCH_RESULTS: usize = 8;
/// How long a session's first request waits for its servers to connect, unless `mcp_startup_wait` says.
pub const STARTUP_WAIT: Duration = Duration::from_secs(5);
/// How often a running call looks at the cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// One MCP tool as the session sees it.
#[derive(Clone, Debug)]
pub struct McpTool {
    /// The name the model calls it by.
    pub name: String,
    pub server: String,
    pub def: ToolDef,
    /// What the model reads about it: the server's description, marked with the server's name.
    pub description: String,
    client: Client,
    timeout: Duration,
    runtime: tokio::runtime::Handle,
}

impl McpTool {
    pub fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.def.input_schema.clone(),
        }
    }

    /// Calls the tool from blocking code (the agent runs tools on blocking threads): the call itself runs on
    /// the session's runtime, `cancel` (Ctrl-C) is looked at while it runs, and sends `notifications/cancelled`.
    pub fn call_blocking(&self, args: &Value, cancel: &Arc<AtomicBool>) -> Called {
        let (tx, rx) = std::sync::mpsc::channel();
        let (progress_tx, mut progress_rx) = tokio::sync::mpsc::unbounded_channel::<Progress>();
        let client = self.client.clone();
        let (name, args, timeout) = (self.def.name.clone(), args.clone(), self.timeout);
        let cancel = Arc::clone(cancel);
        self.runtime.spawn(async move {
            let cancelled = async {
                while !cancel.load(Ordering::Relaxed) {
                    tokio::time::sleep(CANCEL_POLL).await;
                }
            };
            let result = client
                .call_tool(&name, args, timeout, Some(progress_tx), cancelled)
                .await;
            let mut last = None;
            while let Ok(progress) = progress_rx.try_recv() {
                last = Some(progress);
            }
            let _ = tx.send((result, last));
        });
        match rx.recv() {
            Ok((Ok(result), progress)) => Called::Result {
                rendered: render::render(&result),
                progress,
            },
            Ok((Err(super::McpError::Cancelled), _)) => Called::Cancelled,
            Ok((Err(error), _)) => Called::Failed(error.to_string()),
            Err(_) => Called::Failed("the MCP client stopped".into()),
        }
    }
}

/// The outcome of [`McpTool::call_blocking`].
#[derive(Clone, Debug, PartialEq)]
pub enum Called {
    Result {
        rendered: render::Rendered,
        /// The last progress notification, if the server sent any.
        progress: Option<Progress>,
    },
    Cancelled,
    /// The call did not complete: the server is gone, timed out, or answered with a JSON-RPC error.
    Failed(String),
}

/// How one server stands.
#[derive(Clone, Debug, PartialEq)]
pub enum State {
    Starting,
    Connected { tools: usize },
    Failed(Failure),
}

/// How the session's servers stand.
#[derive(Clone, Debug, PartialEq)]
pub struct Status {
    /// Each server's name and state, in configuration order.
    pub servers: Vec<(String, State)>,
}

impl Status {
    pub fn total(&self) -> usize {
        self.servers.len()
    }

    pub fn connected(&self) -> usize {
        self.servers
            .iter()
            .filter(|(_, s)| matches!(s, State::Connected { .. }))
            .count()
    }

    /// True when no server is still starting.
    pub fn settled(&self) -> bool {
        !self.servers.iter().any(|(_, s)| *s == State::Starting)
    }

    /// The states as the session's events carry them.
    pub fn states(&self) -> Vec<crate::protocol::McpServerState> {
        self.servers
            .iter()
            .map(|(name, state)| {
                let (label, tools, error, stderr) = match state {
                    State::Starting => ("starting", 0, None, Vec::new()),
                    State::Connected { tools } => ("connected", *tools, None, Vec::new()),
                    State::Failed(f) => ("failed", 0, Some(f.message.clone()), f.stderr.clone()),
                };
                crate::protocol::McpServerState {
                    name: name.clone(),
                    state: label,
                    tools,
                    error,
                    stderr,
                }
            })
            .collect()
    }

    /// Whether `self` is worth telling the user about after `before` was: a server failed since, or
    /// everything has settled since.
    pub fn is_news(&self, before: Option<&Status>) -> bool {
        if before == Some(self) {
            return false;
        }
        let failed = |s: &Status| {
            s.servers
                .iter()
                .filter(|(_, st)| matches!(st, State::Failed(_)))
                .count()
        };
        let newly_failed = failed(self) > before.map_or(0, failed);
        let newly_settled = self.settled() && !before.is_some_and(Status::settled);
        newly_failed || newly_settled
    }

    /// `2 of 3 MCP servers connected`.
    pub fn line(&self) -> String {
        let starting = self
            .servers
            .iter()
            .filter(|(_, s)| *s == State::Starting)
            .count();
        let mut line = format!(
            "{} of {} MCP server{} connected",
            self.connected(),
            self.total(),
            if self.total() == 1 { "" } else { "s" }
        );
        if starting > 0 {
            line.push_str(&format!(" ({starting} starting)"));
        }
        line
    }
}

#[derive(Debug, Default)]
struct Shared {
    states: Vec<(String, State)>,
    /// Tools by the model's name.
    tools: HashMap<String, McpTool>,
    /// Model names in the order they joined, for stable requests.
    order: Vec<String>,
    names: Names,
    /// Tools a search has made visible (lazy discovery).
    activated: BTreeSet<String>,
    /// When the servers were started, and how long after that the first request waits for them.
    started: Option<std::time::Instant>,
    startup_wait: Option<Duration>,
    /// The first request has waited (it waits once).
    waited: bool,
    /// What the user has not been told yet (tools held back for a broken schema).
    warnings: Vec<String>,
}

/// The session's servers. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Servers {
    shared: Arc<Mutex<Shared>>,
    changed: watch::Sender<u64>,
    clients: Arc<Mutex<Vec<Client>>>,
    search_at: usize,
}

impl Servers {
    /// Starts every server on the current runtime and returns at once. `root` is the checkout; `reserved`
    /// are the names of the session's own tools, which no MCP tool may take.
    pub fn start(specs: Vec<ServerSpec>, root: PathBuf, reserved: &[&str]) -> Servers {
        let mut shared = Shared::default();
        for name in reserved {
            shared.names.reserve(name);
        }
        shared.names.reserve(SEARCH_TOOL);
        shared.started = Some(std::time::Instant::now());
        let search_at = std::env::var(SEARCH_AT_VAR)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(SEARCH_AT);
        let servers = Servers {
            shared: Arc::new(Mutex::new(shared)),
            changed: watch::channel(0).0,
            clients: Arc::new(Mutex::new(Vec::new())),
            search_at,
        };
        servers.add(specs, &root);
        servers
    }

    /// Starts more servers (an editor's for its ACP session); a name already in use is refused as a failed
    /// server.
    pub fn add(&self, specs: Vec<ServerSpec>, root: &std::path::Path) {
        for spec in specs {
            let taken = {
                let mut shared = self.lock();
                let taken = shared.states.iter().any(|(n, _)| *n == spec.name);
                if !taken {
                    shared.states.push((spec.name.clone(), State::Starting));
                }
                taken
            };
            if taken {
                let message = "another server of this session has the same name".to_string();
                self.failed(&format!("{} (again)", spec.name), message);
                continue;
            }
            let servers = self.clone();
            let root = root.to_path_buf();
            tokio::spawn(async move { servers.run_one(spec, root).await });
        }
    }

    /// Records a server that could not even be started (a bad entry in its configuration).
    pub fn failed(&self, name: &str, message: String) {
        {
            let mut shared = self.lock();
            if !shared.states.iter().any(|(n, _)| n == name) {
                shared.states.push((name.to_string(), State::Starting));
            }
        }
        let failure = Failure {
            message,
            stderr: Vec::new(),
        };
        self.set_state(name, State::Failed(failure));
    }

    /// Sets the number of tools past which the search tool replaces their schemas.
    #[cfg(test)]
    pub fn with_search_at(mut self, count: usize) -> Servers {
        self.search_at = count;
        self
    }

    /// Sets how long after their start [`Servers::wait_for_start`] waits ([`STARTUP_WAIT`] by default).
    pub fn set_startup_wait(&self, wait: Duration) {
        self.lock().startup_wait = Some(wait);
    }

    /// Waits, once, until every server has connected or failed, or the startup wait has passed since they
    /// started: the first request of a session offers the tools of every server that made it, so the model
    /// can plan with them (issue 23, finding 7); a slower server still joins later. True when this call was
    /// the one that waited (there were servers, and no call had waited before).
    pub async fn wait_for_start(&self) -> bool {
        let deadline = {
            let mut shared = self.lock();
            if shared.waited || shared.states.is_empty() {
                return false;
            }
            shared.waited = true;
            let wait = shared.startup_wait.unwrap_or(STARTUP_WAIT);
            let started = shared.started.unwrap_or_else(std::time::Instant::now);
            tokio::time::Instant::from_std(started + wait)
        };
        let mut changed = self.changed();
        while !self.status().settled() {
            match tokio::time::timeout_at(deadline, changed.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => break,
            }
        }
        true
    }

    /// What the user should be told and was not yet (each once).
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().warnings)
    }

    /// No servers at all.
    pub fn none() -> Servers {
        Servers::start(Vec::new(), PathBuf::new(), &[])
    }

    pub fn is_empty(&self) -> bool {
        self.lock().states.is_empty()
    }

    /// Changes each time a server joins or fails, or its tools change.
    pub fn changed(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    pub fn status(&self) -> Status {
        Status {
            servers: self.lock().states.clone(),
        }
    }

    /// The tool the model calls `name`, if a connected server has it.
    pub fn find(&self, name: &str) -> Option<McpTool> {
        self.lock().tools.get(name).cloned()
    }

    /// The tool the model calls `name`, waiting for servers that are still starting (each is bounded by its
    /// startup timeout): a model that calls an MCP tool before its server joined (it knows it from an
    /// earlier session, or guessed) gets it rather than an unknown-tool error.
    pub async fn find_or_wait(&self, name: &str) -> Option<McpTool> {
        let mut changed = self.changed();
        loop {
            if let Some(tool) = self.find(name) {
                return Some(tool);
            }
            if !name.starts_with("mcp__") || self.status().settled() {
                return None;
            }
            changed.changed().await.ok()?;
        }
    }

    /// What the next request offers: every MCP tool's schema, or (past the search threshold) the search tool
    /// and the tools searches found.
    pub fn offered(&self) -> Vec<ToolSchema> {
        let shared = self.lock();
        // A server that died is not offered even before its task has withdrawn its tools.
        let all = || {
            shared
                .order
                .iter()
                .filter_map(|n| shared.tools.get(n))
                .filter(|t| t.client.closed().is_none())
        };
        if shared.tools.len() <= self.search_at {
            return all().map(McpTool::schema).collect();
        }
        let mut offered = vec![search_schema(shared.tools.len())];
        offered.extend(
            all()
                .filter(|t| shared.activated.contains(&t.name))
                .map(McpTool::schema),
        );
        offered
    }

    /// The search tool's answer: the best matches for `query` among all MCP tools, each with its schema;
    /// they are offered from the next request on.
    pub fn search(&self, query: &str) -> String {
        let words: Vec<String> = query
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        let mut shared = self.lock();
        let mut scored: Vec<(usize, &McpTool)> = shared
            .tools
            .values()
            .map(|tool| {
                let text = format!("{} {} {}", tool.name, tool.def.name, tool.def.description)
                    .to_lowercase();
                (
                    words.iter().filter(|w| text.contains(w.as_str())).count(),
                    tool,
                )
            })
            .filter(|(score, _)| *score > 0)
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
        let found: Vec<(String, Value)> = scored
            .iter()
            .take(SEARCH_RESULTS)
            .map(|(_, t)| {
                let s = t.schema();
                (s.name.clone(), json!({"name": s.name, "description": s.description, "parameters": s.parameters}))
            })
            .collect();
        if found.is_empty() {
            return format!("no MCP tool matches {query:?}; try other words");
        }
        for (name, _) in &found {
            shared.activated.insert(name.clone());
        }
        let list: Vec<Value> = found.into_iter().map(|(_, v)| v).collect();
        format!(
            "These tools can be called from now on by name:\n{}",
            serde_json::to_string_pretty(&list).unwrap_or_default()
        )
    }

    /// Stops what [`Servers::shutdown`] did not reach, from code that cannot await (a session closed
    /// without it): stdio servers get the same close, SIGTERM, SIGKILL sequence, waited for on this thread;
    /// HTTP sessions are left to expire on the server.
    pub fn stop_blocking(&self) {
        let clients: Vec<Client> = self
            .clients
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default();
        for client in clients {
            client.stop_blocking();
        }
    }

    /// Stops every server (stdio: close stdin, SIGTERM, SIGKILL; HTTP: DELETE the session), in parallel.
    pub async fn shutdown(&self) {
        let clients: Vec<Client> = self
            .clients
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default();
        let stops: Vec<_> = clients
            .into_iter()
            .map(|c| tokio::spawn(async move { c.shutdown().await }))
            .collect();
        for stop in stops {
            let _ = stop.await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        // A panic while holding the lock leaves plain data behind; it is still usable.
        self.shared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn set_state(&self, server: &str, state: State) {
        if let Some(slot) = self.lock().states.iter_mut().find(|(n, _)| n == server) {
            slot.1 = state;
        }
        self.changed.send_modify(|n| *n += 1);
    }

    async fn run_one(&self, spec: ServerSpec, root: PathBuf) {
        let started = match start(&spec, &root).await {
            Ok(started) => started,
            Err(failure) => return self.set_state(&spec.name, State::Failed(failure)),
        };
        if let Ok(mut clients) = self.clients.lock() {
            clients.push(started.client.clone());
        }
        let client = started.client.clone();
        self.join(&spec, &client, started.tools);
        let mut changes = client.tools_changed();
        while client.closed().is_none() && changes.changed().await.is_ok() {
            if client.closed().is_some() {
                break;
            }
            match client.list_tools(spec.tool_timeout).await {
                Ok(all) => {
                    let tools = all.into_iter().filter(|t| spec.offers(&t.name)).collect();
                    self.join(&spec, &client, tools);
                }
                Err(_) if client.closed().is_some() => break,
                Err(_) => {}
            }
        }
        if let Some(reason) = client.closed().filter(|r| r != super::client::SHUT_DOWN) {
            self.drop_server(&spec.name);
            let failure = Failure {
                message: reason,
                stderr: client.diagnostics(super::Tail::LINES),
            };
            self.set_state(&spec.name, State::Failed(failure));
        }
    }

    /// Puts a server's (new) tool list in place of its old one.
    fn join(&self, spec: &ServerSpec, client: &Client, tools: Vec<ToolDef>) {
        let runtime = tokio::runtime::Handle::current();
        let count;
        {
            let mut shared = self.lock();
            let old: Vec<String> = shared
                .order
                .iter()
                .filter(|n| shared.tools.get(*n).is_some_and(|t| t.server == spec.name))
                .cloned()
                .collect();
            let mut seen = BTreeSet::new();
            for def in tools {
                if let Some(problem) = &def.invalid {
                    let warning = format!(
                        "MCP server '{}': tool '{}' is not offered: its inputSchema is not valid JSON Schema ({problem})",
                        spec.name, def.name
                    );
                    if !shared.warnings.contains(&warning) {
                        shared.warnings.push(warning);
                    }
                    continue;
                }
                // Some servers list a tool twice; the model must see each name once.
                if !seen.insert(def.name.clone()) {
                    continue;
                }
                let existing = old
                    .iter()
                    .find(|n| shared.tools.get(*n).is_some_and(|t| t.def.name == def.name))
                    .cloned();
                let name = match existing {
                    Some(name) => name,
                    None => shared.names.assign(&spec.name, &def.name),
                };
                if !shared.order.contains(&name) {
                    shared.order.push(name.clone());
                }
                let about = if def.description.is_empty() {
                    def.title.clone().unwrap_or_default()
                } else {
                    def.description.clone()
                };
                let tool = McpTool {
                    name: name.clone(),
                    server: spec.name.clone(),
                    // The server's words are data, not instructions (issue 22, finding 7): one escaped
                    // line that cannot start a line of its own or close the quote around it.
                    description: format!(
                        "[MCP server {}; its description, quoted as data:] \"{}\"",
                        crate::safety::quote::quote_as_data(&spec.name),
                        crate::safety::quote::quote_as_data(&about)
                    ),
                    def,
                    client: client.clone(),
                    timeout: spec.tool_timeout,
                    runtime: runtime.clone(),
                };
                shared.tools.insert(name, tool);
            }
            for name in old {
                let still = shared
                    .tools
                    .get(&name)
                    .is_some_and(|t| seen.contains(&t.def.name));
                if !still {
                    shared.tools.remove(&name);
                    shared.order.retain(|n| *n != name);
                }
            }
            count = seen.len();
        }
        self.set_state(&spec.name, State::Connected { tools: count });
    }

    fn drop_server(&self, server: &str) {
        let mut shared = self.lock();
        let gone: Vec<String> = shared
            .tools
            .iter()
            .filter(|(_, t)| t.server == server)
            .map(|(n, _)| n.clone())
            .collect();
        for name in gone {
            shared.tools.remove(&name);
            shared.order.retain(|n| *n != name);
        }
    }
}

/// The schema of [`SEARCH_TOOL`].
fn search_schema(count: usize) -> ToolSchema {
    ToolSchema {
        name: SEARCH_TOOL.to_string(),
        description: format!(
            "Find tools of the user's MCP servers ({count} tools, too many to list). Give a few words of what \
             you need; the matching tools (name, description, parameters) can be called by name afterwards."
        ),
        parameters: json!({
            "type": "object",
            "properties": {"query": {"type": "string", "description": "words describing the tool you need"}},
            "required": ["query"]
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::mcp::TransportSpec;

    /// server-everything over stdio, when `.ci/run` installed it.
    fn everything() -> Option<ServerSpec> {
        let Some(dir) = std::env::var_os("GIT_AGENT_MCP_PARTNERS") else {
            eprintln!(
                "SKIPPED: GIT_AGENT_MCP_PARTNERS is not set (.ci/run installs the MCP servers)"
            );
            return None;
        };
        let command = PathBuf::from(dir).join("npm/node_modules/.bin/mcp-server-everything");
        Some(ServerSpec::new(
            "everything",
            TransportSpec::Stdio {
                command: command.display().to_string(),
                args: vec!["stdio".into()],
                env: vec![],
                cwd: None,
            },
        ))
    }

    async fn settle(servers: &Servers) {
        let mut changed = servers.changed();
        while !servers.status().settled() {
            let wait = tokio::time::timeout(Duration::from_secs(30), changed.changed()).await;
            assert!(
                matches!(wait, Ok(Ok(()))),
                "servers did not settle: {:?}",
                servers.status()
            );
        }
    }

    #[tokio::test]
    async fn servers_join_in_the_background_and_their_tools_run() {
        let Some(spec) = everything() else { return };
        let broken = ServerSpec::new(
            "broken",
            TransportSpec::Stdio {
                command: "sh".into(),
                args: vec!["-c".into(), "echo no config >&2; exit 2".into()],
                env: vec![],
                cwd: None,
            },
        );
        let root = std::env::temp_dir();
        let servers = Servers::start(vec![spec, broken], root, &["read_file"]).with_search_at(5);
        // Nothing waited: the call returned while both still start.
        assert_eq!(servers.status().connected(), 0);
        settle(&servers).await;
        let status = servers.status();
        assert_eq!(status.line(), "1 of 2 MCP servers connected");
        match &status.servers[1].1 {
            State::Failed(failure) => {
                assert!(
                    failure.message.contains("exited with status 2"),
                    "{failure:?}"
                );
                assert_eq!(failure.stderr, ["no config"]);
            }
            other => panic!("{other:?}"),
        }
        let echo = servers.find("mcp__everything__echo").expect("echo joined");
        assert!(echo.def.read_only);
        // More tools than the threshold: the search tool instead of every schema, then what it found.
        let offered = servers.offered();
        assert_eq!(offered.len(), 1);
        assert_eq!(offered[0].name, SEARCH_TOOL);
        let found = servers.search("sum of two numbers");
        assert!(found.contains("mcp__everything__get-sum"), "{found}");
        assert!(servers
            .offered()
            .iter()
            .any(|s| s.name == "mcp__everything__get-sum"));

        let cancel = Arc::new(AtomicBool::new(false));
        let called = {
            let (echo, cancel) = (echo.clone(), Arc::clone(&cancel));
            tokio::task::spawn_blocking(move || {
                echo.call_blocking(&json!({"message": "hi"}), &cancel)
            })
        };
        match called.await.expect("joined") {
            Called::Result { rendered, .. } => assert_eq!(rendered.content, "Echo: hi"),
            other => panic!("{other:?}"),
        }
        // Ctrl-C during a long call: the server is told, the call ends at once.
        let long = servers
            .find("mcp__everything__trigger-long-running-operation")
            .expect("a long tool");
        let flag = Arc::clone(&cancel);
        let started = std::time::Instant::now();
        let call = tokio::task::spawn_blocking(move || {
            long.call_blocking(&json!({"duration": 30, "steps": 30}), &flag)
        });
        tokio::time::sleep(Duration::from_millis(1500)).await;
        cancel.store(true, Ordering::Relaxed);
        assert_eq!(call.await.expect("joined"), Called::Cancelled);
        assert!(started.elapsed() < Duration::from_secs(10));
        servers.shutdown().await;
    }

    #[test]
    fn status_lines() {
        let failure = Failure {
            message: "x".into(),
            stderr: vec![],
        };
        let status = Status {
            servers: vec![
                ("a".into(), State::Connected { tools: 3 }),
                ("b".into(), State::Failed(failure)),
                ("c".into(), State::Starting),
            ],
        };
        assert_eq!(status.line(), "1 of 3 MCP servers connected (1 starting)");
        assert!(!status.settled());
        let one = Status {
            servers: vec![("a".into(), State::Connected { tools: 1 })],
        };
        assert_eq!(one.line(), "1 of 1 MCP server connected");
        assert!(one.settled());
    }
}
