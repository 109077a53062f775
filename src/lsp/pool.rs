//! The session's language servers: started lazily per (server, workspace root), reused, and shut down with
//! the session. A server that fails to start or crashes is reported once and not started again; the session
//! goes on without it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::client::Server;
use super::delta::Delta;
use super::spec::ServerSpec;
use super::uri;
use crate::safety::beneath;
use crate::safety::sandbox::Sandbox;
use crate::store::ignore_files::{self, Guard};

/// How a pool behaves.
#[derive(Clone, Debug)]
pub struct PoolOptions {
    /// Whether changes are followed by the servers' new diagnostics.
    pub diagnostics: bool,
    /// How long a change waits for them.
    pub diagnostics_wait: Duration,
    /// How long a server gets for its `initialize` handshake.
    pub start_timeout: Duration,
    /// How long a query waits for a server still indexing.
    pub index_wait: Duration,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            diagnostics: true,
            diagnostics_wait: Duration::from_secs(3),
            start_timeout: Duration::from_secs(30),
            index_wait: Duration::from_secs(20),
        }
    }
}

/// A changed file: checkout-relative, its text before the change (when known) and now.
type Synced = (PathBuf, Option<String>, String);

enum Slot {
    Running(Arc<Server>),
    Failed(String),
}

/// One server as `lsp status` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerState {
    pub name: String,
    pub command: String,
    pub origin: &'static str,
    pub enabled: bool,
    /// Where its command was found, if it was.
    pub found: Option<PathBuf>,
    /// Workspace roots it runs for.
    pub running: Vec<PathBuf>,
    pub last_error: Option<String>,
}

/// The servers of one session.
pub struct Pool {
    specs: Vec<ServerSpec>,
    checkout: PathBuf,
    sandbox: Arc<Sandbox>,
    options: PoolOptions,
    slots: Mutex<HashMap<(String, PathBuf), Slot>>,
    /// Failures not yet shown to the user.
    warnings: Mutex<Vec<String>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("checkout", &self.checkout)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Pool {
    pub fn new(
        specs: Vec<ServerSpec>,
        checkout: &Path,
        sandbox: Arc<Sandbox>,
        options: PoolOptions,
    ) -> Pool {
        Pool {
            specs,
            checkout: std::fs::canonicalize(checkout).unwrap_or_else(|_| checkout.to_path_buf()),
            sandbox,
            options,
            slots: Mutex::new(HashMap::new()),
            warnings: Mutex::new(Vec::new()),
        }
    }

    pub fn options(&self) -> &PoolOptions {
        &self.options
    }

    pub fn checkout(&self) -> &Path {
        &self.checkout
    }

    /// Specs that could start: enabled and found.
    fn usable(&self) -> impl Iterator<Item = &ServerSpec> {
        self.specs
            .iter()
            .filter(|s| s.enabled && s.found().is_some())
    }

    /// A walk of the checkout for a file some server serves, `None` when its root has an ignore file that
    /// cannot be read safely (a FIFO a command left: [`crate::store::ignore_files`]); directories with one
    /// are left out. This only looks for a first file of a language, so nothing is reported.
    fn walk(&self) -> Option<ignore::WalkBuilder> {
        let guard = Guard::new(ignore_files::RIPGREP);
        guard.check(&self.checkout).ok()?;
        let mut walk = ignore::WalkBuilder::new(&self.checkout);
        crate::store::excludes::apply(&mut walk, &self.checkout)
            .filter_entry(move |e| guard.may_enter(e));
        Some(walk)
    }

    /// Whether some server could serve a file of the checkout: the `lsp` tools are offered only then.
    pub fn available(&self) -> bool {
        let usable: Vec<&ServerSpec> = self.usable().collect();
        if usable.is_empty() {
            return false;
        }
        let Some(mut walk) = self.walk() else {
            return false;
        };
        let walk = walk.hidden(true).max_depth(Some(6)).build();
        walk.filter_map(Result::ok)
            .take(20_000)
            .any(|entry| usable.iter().any(|s| s.serves(entry.path())))
    }

    /// The server of `rel` (checkout-relative), started if it is not running yet. `Ok(None)`: no server
    /// serves this file; `Err`: its server failed (now or before).
    pub fn server_for(&self, rel: &Path) -> Result<Option<Arc<Server>>, String> {
        let Some(spec) = self.usable().find(|s| s.serves(rel)) else {
            return Ok(None);
        };
        let root = spec.root_of(&self.checkout, rel);
        let key = (spec.name.clone(), root.clone());
        let mut slots = lock(&self.slots);
        match slots.get(&key) {
            Some(Slot::Running(server)) => match server.closed() {
                None => return Ok(Some(Arc::clone(server))),
                Some(reason) => {
                    let message = format!("{} stopped: {reason}", spec.name);
                    self.warn(format!(
                        "language server {message}; the session goes on without it"
                    ));
                    slots.insert(key, Slot::Failed(message.clone()));
                    return Err(message);
                }
            },
            Some(Slot::Failed(message)) => return Err(message.clone()),
            None => {}
        }
        match Server::start(spec, &root, &self.sandbox, self.options.start_timeout) {
            Ok(server) => {
                let server = Arc::new(server);
                slots.insert(key, Slot::Running(Arc::clone(&server)));
                Ok(Some(server))
            }
            Err(err) => {
                let message = format!("{}: {err}", spec.name);
                self.warn(format!(
                    "language server {message}; the session goes on without it"
                ));
                slots.insert(key, Slot::Failed(message.clone()));
                Err(message)
            }
        }
    }

    /// The running server of `rel`, if its server was started already.
    fn running_for(&self, rel: &Path) -> Option<Arc<Server>> {
        let spec = self.usable().find(|s| s.serves(rel))?;
        let key = (spec.name.clone(), spec.root_of(&self.checkout, rel));
        match lock(&self.slots).get(&key) {
            Some(Slot::Running(server)) if server.closed().is_none() => Some(Arc::clone(server)),
            _ => None,
        }
    }

    fn warn(&self, message: String) {
        lock(&self.warnings).push(message);
    }

    /// Failures not shown yet; each is returned once.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.warnings))
    }

    /// Gives the server of `rel` the file's current text (opening it the first time), so a query sees what
    /// is on disk. Waits (bounded) for a server still indexing.
    pub fn prepare(&self, rel: &Path) -> Result<Arc<Server>, String> {
        let server = self
            .server_for(rel)?
            .ok_or_else(|| format!("no language server is configured for {}", rel.display()))?;
        let abs = self.checkout.join(rel);
        let text = beneath::read_text(&self.checkout, rel, super::MAX_FILE_TEXT)
            .map_err(|err| format!("cannot read {}: {err}", rel.display()))?;
        let first = server.open_count() == 0;
        server.sync(&abs, &text).map_err(|e| e.to_string())?;
        let deadline = Instant::now() + self.options.index_wait;
        if first {
            server.settle_first_open(&abs, deadline);
        }
        server.wait_idle(deadline);
        Ok(server)
    }

    /// Any running (or startable) server, for queries that name no file (`workspace_symbols`).
    pub fn any_server(&self) -> Result<Arc<Server>, String> {
        let running = lock(&self.slots).values().find_map(|slot| match slot {
            Slot::Running(server) if server.closed().is_none() => Some(Arc::clone(server)),
            _ => None,
        });
        if let Some(server) = running {
            return Ok(server);
        }
        // Start one on the first file of the checkout it serves.
        let walk = self.walk().map(|mut w| w.max_depth(Some(6)).build());
        let walk = walk.into_iter().flatten();
        for entry in walk.filter_map(Result::ok).take(20_000) {
            let rel = entry
                .path()
                .strip_prefix(&self.checkout)
                .unwrap_or(entry.path());
            if entry.file_type().is_some_and(|t| t.is_file())
                && self.usable().any(|s| s.serves(rel))
            {
                return self.prepare(rel);
            }
        }
        Err("no language server serves a file of this checkout".into())
    }

    /// Syncs `changed` (checkout-relative, with their text before the change when known) to their servers
    /// and returns the problems the change added. `None` when no server serves any of them or diagnostics
    /// are off (the files are still synced, so later queries see them).
    pub fn after_change(&self, changed: &[(PathBuf, Option<String>)]) -> Option<Delta> {
        let mut groups: Vec<(Arc<Server>, Vec<Synced>)> = Vec::new();
        for (rel, old) in changed {
            // Without diagnostics a change starts no server: it only keeps running ones in step.
            let server = if self.options.diagnostics {
                self.server_for(rel).ok().flatten()
            } else {
                self.running_for(rel)
            };
            let Some(server) = server else {
                continue;
            };
            let Ok(new) = beneath::read_text(&self.checkout, rel, super::MAX_FILE_TEXT) else {
                continue;
            };
            let file = (rel.clone(), old.clone(), new);
            match groups.iter_mut().find(|(s, _)| Arc::ptr_eq(s, &server)) {
                Some((_, files)) => files.push(file),
                None => groups.push((server, vec![file])),
            }
        }
        if groups.is_empty() {
            return None;
        }
        if !self.options.diagnostics {
            for (server, files) in &groups {
                for (rel, _, new) in files {
                    let _ = server.sync(&self.checkout.join(rel), new);
                }
            }
            return None;
        }
        let mut delta = Delta::default();
        let deadline = Instant::now() + self.options.diagnostics_wait;
        for (server, files) in &groups {
            self.diagnose(server, files, deadline, &mut delta);
        }
        Some(delta)
    }

    /// One server's part of [`Pool::after_change`]: the files' diagnostics before (opening a file it has not
    /// seen with its old text first), the new text, the diagnostics after, and the difference.
    fn diagnose(&self, server: &Server, files: &[Synced], deadline: Instant, delta: &mut Delta) {
        let abs = |rel: &Path| self.checkout.join(rel);
        let uris: Vec<String> = files
            .iter()
            .map(|(rel, ..)| uri::from_path(&abs(rel)))
            .collect();
        let since = server.seq();
        let mut baseline = Vec::new();
        for ((rel, old, _), uri) in files.iter().zip(&uris) {
            if let (false, Some(old)) = (server.is_open(&abs(rel)), old) {
                if let Ok(Some(version)) = server.sync(&abs(rel), old) {
                    baseline.push((uri.clone(), version));
                }
            }
        }
        let mut deadline = deadline;
        if !baseline.is_empty() {
            // A file the server has not seen: its diagnostics before the change cost one more wait (a cold
            // server's first check is the slow one); the wait for after starts again from there.
            server.wait_diagnostics(&baseline, since, deadline);
            deadline = Instant::now() + self.options.diagnostics_wait;
        }
        let before = server.diagnostics();
        let since = server.seq();
        let mut sent = Vec::new();
        for ((rel, _, new), uri) in files.iter().zip(&uris) {
            if let Ok(Some(version)) = server.sync(&abs(rel), new) {
                sent.push((uri.clone(), version));
            }
        }
        let name = server.spec.name.clone();
        if !sent.is_empty() && !server.wait_diagnostics(&sent, since, deadline) {
            delta.late.push(name);
            return;
        }
        delta.answered.push(name);
        let after = server.diagnostics();
        let empty = Vec::new();
        for (uri, published) in &after {
            let changed = uris.contains(uri);
            let previous = before.get(uri);
            // Another file's problems count only when the change made them: published after it, and
            // compared with what it had before (a file never seen before has no before to compare with).
            if !changed && (published.seq <= since || previous.is_none()) {
                continue;
            }
            let before_items = previous.map_or(&empty, |p| &p.items);
            let path = uri::to_path(uri)
                .map(|p| {
                    crate::safety::path::display_rel(p.strip_prefix(&self.checkout).unwrap_or(&p))
                })
                .unwrap_or_else(|| uri.clone());
            delta.add(&path, before_items, &published.items, changed);
        }
    }

    /// Every known server and how it stands.
    pub fn status(&self) -> Vec<ServerState> {
        let slots = lock(&self.slots);
        self.specs
            .iter()
            .map(|spec| {
                let mut state = ServerState {
                    name: spec.name.clone(),
                    command: spec.command.clone(),
                    origin: spec.origin,
                    enabled: spec.enabled,
                    found: spec.found(),
                    running: Vec::new(),
                    last_error: None,
                };
                for ((name, root), slot) in slots.iter() {
                    if *name != spec.name {
                        continue;
                    }
                    match slot {
                        Slot::Running(server) => match server.closed() {
                            None => state.running.push(root.clone()),
                            Some(reason) => state.last_error = Some(reason),
                        },
                        Slot::Failed(message) => state.last_error = Some(message.clone()),
                    }
                }
                state
            })
            .collect()
    }

    /// Stops every server (the session ends).
    pub fn shutdown(&self) {
        let slots: Vec<Slot> = lock(&self.slots).drain().map(|(_, slot)| slot).collect();
        for slot in slots {
            if let Slot::Running(server) = slot {
                server.shutdown();
            }
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shutdown();
    }
}
