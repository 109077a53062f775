//! One running language server: a child process speaking JSON-RPC with `Content-Length` framing on stdio.
//!
//! Tools are synchronous (they run on a blocking thread), so the client is too: a reader thread sorts what
//! the server sends (answers to our requests, its diagnostics and progress, its own requests, which it
//! answers at once) into one shared state under a condition variable, and callers wait on it with a
//! deadline. A server that stops answering costs a caller its deadline, never the turn.
//!
//! The child is started like `run` commands (see `tools::process`): in its own process group, with the
//! agent's scrubbed environment (no keys), under the supervisor and in the session's sandbox, so it dies
//! with the agent even on `kill -9`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::BufReader;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::error::LspError;
use super::spec::ServerSpec;
use super::{frame, uri};
use crate::tools::mcp::jsonrpc::{self, Incoming, RpcError};

/// The most one message may hold; a bigger one is skipped as it streams in.
const MAX_MESSAGE_BYTES: usize = 16 << 20;
/// How many stderr lines are kept for `lsp status` and failure messages.
const STDERR_LINES: usize = 10;

/// Diagnostics the server published for one document.
#[derive(Clone, Debug, Default)]
pub struct Published {
    /// The document version they are for, when the server says.
    pub version: Option<i64>,
    pub items: Vec<Value>,
    /// The publish counter when they arrived: later publishes have larger numbers.
    pub seq: u64,
}

#[derive(Default)]
struct State {
    /// Our requests: `None` until answered.
    pending: HashMap<u64, Option<Result<Value, RpcError>>>,
    diagnostics: HashMap<String, Published>,
    seq: u64,
    /// Work-done progress tokens begun and not yet ended (indexing).
    progress: HashSet<String>,
    /// How many progress tokens ever began.
    progress_begun: u64,
    closed: Option<String>,
    stderr: VecDeque<String>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    stdin: Mutex<Option<ChildStdin>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn send(&self, message: &Value) -> Result<(), LspError> {
        let mut stdin = self.stdin.lock().unwrap_or_else(|p| p.into_inner());
        let pipe = stdin
            .as_mut()
            .ok_or_else(|| LspError::Closed("its input is closed".into()))?;
        frame::write(pipe, message.to_string().as_bytes())
            .map_err(|err| LspError::Closed(err.to_string()))
    }

    /// Waits until `done` holds or `deadline` passes; true if it holds.
    fn wait_until(&self, deadline: Instant, mut done: impl FnMut(&State) -> bool) -> bool {
        let mut state = self.lock();
        loop {
            if done(&state) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || state.closed.is_some() {
                return false;
            }
            state = self
                .changed
                .wait_timeout(state, left)
                .map_or_else(|p| p.into_inner().0, |(s, _)| s);
        }
    }
}

/// A started, initialised server.
pub struct Server {
    pub spec: ServerSpec,
    /// Its workspace root (absolute).
    pub root: PathBuf,
    shared: Arc<Shared>,
    child: Mutex<Option<Child>>,
    pid: u32,
    next_id: AtomicU64,
    /// What it said it can do (`initialize`'s `capabilities`).
    pub capabilities: Value,
    /// Documents opened: their current version and the fingerprint of the text sent.
    opened: Mutex<HashMap<String, (i64, u64)>>,
    /// How long `initialize` took.
    pub startup: Duration,
}

impl Server {
    /// Starts the server for `root` and does the `initialize` handshake within `timeout`.
    pub fn start(
        spec: &ServerSpec,
        root: &Path,
        sandbox: &crate::safety::sandbox::Sandbox,
        timeout: Duration,
    ) -> Result<Server, LspError> {
        let begun = Instant::now();
        let mut cmd = Command::new(&spec.command);
        cmd.args(&spec.args)
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        // The environment `run` commands get: no secrets, no git redirects (a server must see the checkout
        // it runs in, not the index of a hook that started us).
        crate::safety::redact::scrub_child_env(&mut cmd, &[]);
        crate::store::git::without_redirects(&mut cmd);
        cmd.env("GIT_OPTIONAL_LOCKS", "0");
        sandbox
            .prepare()
            .map_err(|err| LspError::Spawn {
                command: spec.command.clone(),
                message: err.to_string(),
            })?
            .install(&mut cmd);
        let mut child = cmd.spawn().map_err(|err| LspError::Spawn {
            command: spec.command.clone(),
            message: if err.kind() == std::io::ErrorKind::NotFound {
                "not installed or not on PATH".into()
            } else {
                err.to_string()
            },
        })?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            stdin: Mutex::new(child.stdin.take()),
        });
        if let Some(out) = child.stdout.take() {
            let shared = Arc::clone(&shared);
            let root = root.to_path_buf();
            std::thread::spawn(move || read_messages(out, &shared, &root));
        }
        if let Some(err) = child.stderr.take() {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || read_stderr(err, &shared));
        }
        let mut server = Server {
            spec: spec.clone(),
            root: root.to_path_buf(),
            shared,
            pid: child.id(),
            child: Mutex::new(Some(child)),
            next_id: AtomicU64::new(1),
            capabilities: Value::Null,
            opened: Mutex::new(HashMap::new()),
            startup: Duration::ZERO,
        };
        let params = initialize_params(spec, root);
        let answer = server.request("initialize", params, timeout)?;
        server.capabilities = answer.get("capabilities").cloned().unwrap_or(Value::Null);
        server.notify("initialized", json!({}))?;
        server.startup = begun.elapsed();
        Ok(server)
    }

    /// Sends a request and waits for its answer until `timeout`.
    pub fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, LspError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.shared.lock().pending.insert(id, None);
        self.shared
            .send(&jsonrpc::request(id, method, Some(params)))?;
        let deadline = Instant::now() + timeout;
        let answered = self.shared.wait_until(deadline, |s| {
            s.pending.get(&id).is_some_and(Option::is_some)
        });
        let mut state = self.shared.lock();
        let answer = state.pending.remove(&id).flatten();
        match (answered, answer) {
            (_, Some(Ok(value))) => Ok(value),
            (_, Some(Err(error))) => Err(LspError::Rpc {
                method: method.to_string(),
                message: error.message,
            }),
            _ => match state.closed.clone() {
                Some(reason) => Err(LspError::Closed(reason)),
                None => {
                    drop(state);
                    // The server may still be working on it: tell it to stop.
                    let _ = self.notify("$/cancelRequest", json!({"id": id}));
                    Err(LspError::Timeout {
                        method: method.to_string(),
                        after: timeout,
                    })
                }
            },
        }
    }

    pub fn notify(&self, method: &str, params: Value) -> Result<(), LspError> {
        self.shared
            .send(&jsonrpc::notification(method, Some(params)))
    }

    /// Gives the server `text` as the content of `path` (didOpen the first time, then a full didChange,
    /// nothing when the server already has this text); the version sent, if something was.
    pub fn sync(&self, path: &Path, text: &str) -> Result<Option<i64>, LspError> {
        let uri = uri::from_path(path);
        let print = super::text::fingerprint(text.as_bytes());
        let mut opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
        match opened.get_mut(&uri) {
            Some((_, sent)) if *sent == print => Ok(None),
            Some((version, sent)) => {
                *version += 1;
                *sent = print;
                let version = *version;
                drop(opened);
                self.notify(
                    "textDocument/didChange",
                    json!({"textDocument": {"uri": uri, "version": version},
                           "contentChanges": [{"text": text}]}),
                )?;
                Ok(Some(version))
            }
            None => {
                opened.insert(uri.clone(), (1, print));
                drop(opened);
                let language = super::spec::language_id(path);
                self.notify(
                    "textDocument/didOpen",
                    json!({"textDocument": {"uri": uri, "languageId": language, "version": 1, "text": text}}),
                )?;
                Ok(Some(1))
            }
        }
    }

    /// How many documents are open.
    pub fn open_count(&self) -> usize {
        self.opened.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// After the first document (`path`) was opened: a server shows it has taken the project in by
    /// announcing work (typescript-language-server loads its project under progress, seconds later) or by
    /// publishing the document's diagnostics (pyright, clangd). Wait for either, then for the work to end,
    /// until `deadline`, so the first query is not answered from half a project.
    pub fn settle_first_open(&self, path: &Path, deadline: Instant) {
        let uri = uri::from_path(path);
        self.shared.wait_until(deadline, |s| {
            s.progress_begun > 0 || s.diagnostics.contains_key(&uri)
        });
        self.wait_idle(deadline);
    }

    /// Whether `path` was opened on this server.
    pub fn is_open(&self, path: &Path) -> bool {
        let opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
        opened.contains_key(&uri::from_path(path))
    }

    /// The publish counter now: diagnostics published later have larger `seq`s.
    pub fn seq(&self) -> u64 {
        self.shared.lock().seq
    }

    /// The latest diagnostics of every document the server published for.
    pub fn diagnostics(&self) -> HashMap<String, Published> {
        self.shared.lock().diagnostics.clone()
    }

    /// Waits until every one of `uris` has diagnostics published after `since` for at least the version
    /// sent (when the server says which version they are for: a late publish for the text before does not
    /// count), then a short settle for a second publish some servers send, or until `deadline`. True if all
    /// arrived.
    pub fn wait_diagnostics(&self, uris: &[(String, i64)], since: u64, deadline: Instant) -> bool {
        let all = self.shared.wait_until(deadline, |s| {
            uris.iter().all(|(u, version)| {
                s.diagnostics
                    .get(u)
                    .is_some_and(|p| p.seq > since && p.version.is_none_or(|v| v >= *version))
            })
        });
        if all {
            let settle = (Instant::now() + Duration::from_millis(50)).min(deadline);
            let seq = self.seq();
            self.shared.wait_until(settle, |s| s.seq > seq);
        }
        all
    }

    /// Waits (until `deadline`) for the server to finish the work it announced (indexing), so a query is
    /// not answered from half an index.
    pub fn wait_idle(&self, deadline: Instant) {
        self.shared.wait_until(deadline, |s| s.progress.is_empty());
    }

    /// Why the server is gone, if it is.
    pub fn closed(&self) -> Option<String> {
        self.shared.lock().closed.clone()
    }

    /// Its last stderr lines.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.shared.lock().stderr.iter().cloned().collect()
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The LSP shutdown: `shutdown`, `exit`, then SIGTERM and SIGKILL to its group, each after a grace.
    pub fn shutdown(&self) {
        if self.closed().is_none() {
            let _ = self.request("shutdown", Value::Null, Duration::from_secs(1));
            let _ = self.notify("exit", Value::Null);
        }
        drop(
            self.shared
                .stdin
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        );
        let Some(mut child) = self.child.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        let exited = |child: &mut Child| {
            let deadline = Instant::now() + Duration::from_secs(1);
            while Instant::now() < deadline {
                if !matches!(child.try_wait(), Ok(None)) {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            false
        };
        use crate::sys::signal::{SIGKILL, SIGTERM};
        for signal in [SIGTERM, SIGKILL] {
            if exited(&mut child) {
                break;
            }
            crate::sys::process::signal_group(self.pid, signal);
        }
        // Whatever of its group outlived it (a worker it forked) goes too.
        crate::sys::process::signal_group(self.pid, SIGKILL);
        let _ = child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let running = self.child.get_mut().map(|c| c.is_some()).unwrap_or(false);
        if running {
            crate::sys::process::signal_group(self.pid, crate::sys::signal::SIGKILL);
            if let Ok(Some(mut child)) = self.child.get_mut().map(Option::take) {
                let _ = child.wait();
            }
        }
    }
}

fn initialize_params(spec: &ServerSpec, root: &Path) -> Value {
    let root_uri = uri::from_path(root);
    let name = root
        .file_name()
        .map_or_else(|| "/".into(), |n| n.to_string_lossy().into_owned());
    let mut params = json!({
        // Null, not our pid: in the supervisor's PID namespace our pid names no process (or another one), and
        // servers that watch it (vscode-languageserver polls it) would exit at once. The supervisor ends the
        // server with the agent instead.
        "processId": null,
        "clientInfo": {"name": "git-agent", "version": env!("CARGO_PKG_VERSION")},
        "rootUri": root_uri,
        "rootPath": root.display().to_string(),
        "workspaceFolders": [{"uri": root_uri, "name": name}],
        "capabilities": {
            "textDocument": {
                "synchronization": {"didSave": false, "dynamicRegistration": false},
                "publishDiagnostics": {"versionSupport": true, "relatedInformation": false},
                "definition": {"linkSupport": true},
                "implementation": {"linkSupport": true},
                "references": {},
                "hover": {"contentFormat": ["plaintext", "markdown"]},
                "documentSymbol": {"hierarchicalDocumentSymbolSupport": true},
                "rename": {"prepareSupport": false},
                "callHierarchy": {}
            },
            "workspace": {
                "symbol": {},
                "workspaceFolders": true,
                "configuration": true,
                "workspaceEdit": {"documentChanges": true}
            },
            "window": {"workDoneProgress": true}
        }
    });
    if let Some(options) = &spec.initialization_options {
        params["initializationOptions"] = options.clone();
    }
    params
}

/// Reads framed messages until the stream ends; sorts each into the shared state.
fn read_messages(out: std::process::ChildStdout, shared: &Shared, root: &Path) {
    let mut reader = BufReader::new(out);
    let reason = loop {
        match frame::read(&mut reader, MAX_MESSAGE_BYTES) {
            Ok(frame::Frame::Body(body)) => match jsonrpc::parse(&body) {
                Ok(messages) => {
                    for message in messages {
                        handle(shared, message, root);
                    }
                }
                Err(what) => note(shared, &what),
            },
            Ok(frame::Frame::TooLarge(n)) => {
                note(shared, &format!("a {n}-byte message was skipped"))
            }
            Ok(frame::Frame::End) => break "it closed its output".to_string(),
            Err(err) => break format!("reading its output failed: {err}"),
        }
    };
    let mut state = shared.lock();
    let tail = state.stderr.back().cloned();
    state.closed = Some(match tail {
        Some(line) => format!("{reason} (last stderr line: {line})"),
        None => reason,
    });
    drop(state);
    shared.changed.notify_all();
}

fn handle(shared: &Shared, message: Incoming, root: &Path) {
    match message {
        Incoming::Response { id, result } => {
            let mut state = shared.lock();
            if let Some(slot) = id.as_u64().and_then(|id| state.pending.get_mut(&id)) {
                *slot = Some(result);
            }
        }
        Incoming::Request { id, method, params } => {
            let answer = match method.as_str() {
                // Defaults for every section asked: the server's own defaults apply.
                "workspace/configuration" => {
                    let n = params["items"].as_array().map_or(0, Vec::len);
                    jsonrpc::response(&id, Value::Array(vec![Value::Null; n]))
                }
                "workspace/workspaceFolders" => {
                    let uri = uri::from_path(root);
                    jsonrpc::response(&id, json!([{"uri": uri, "name": "root"}]))
                }
                "window/workDoneProgress/create"
                | "client/registerCapability"
                | "client/unregisterCapability"
                | "window/showMessageRequest" => jsonrpc::response(&id, Value::Null),
                // A server must not edit files behind the session's back: edits go through tools.
                "workspace/applyEdit" => jsonrpc::response(
                    &id,
                    json!({"applied": false, "failureReason": "not allowed"}),
                ),
                _ => jsonrpc::error_response(&id, jsonrpc::METHOD_NOT_FOUND, "not supported"),
            };
            let _ = shared.send(&answer);
            return;
        }
        Incoming::Notification { method, params } => {
            let mut state = shared.lock();
            match method.as_str() {
                "textDocument/publishDiagnostics" => {
                    let Some(uri) = params["uri"].as_str() else {
                        return;
                    };
                    state.seq += 1;
                    let published = Published {
                        version: params["version"].as_i64(),
                        items: params["diagnostics"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default(),
                        seq: state.seq,
                    };
                    state.diagnostics.insert(uri::normalise(uri), published);
                }
                "$/progress" => {
                    let token = params["token"].to_string();
                    match params["value"]["kind"].as_str() {
                        Some("begin") => {
                            state.progress.insert(token);
                            state.progress_begun += 1;
                        }
                        Some("end") => {
                            state.progress.remove(&token);
                        }
                        _ => return,
                    }
                }
                _ => return,
            }
        }
    }
    shared.changed.notify_all();
}

fn note(shared: &Shared, line: &str) {
    let mut state = shared.lock();
    if state.stderr.len() == STDERR_LINES {
        state.stderr.pop_front();
    }
    let line = crate::protocol::Untrusted::name(line.trim_end()).to_string();
    let line = match line.char_indices().nth(300) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line,
    };
    state
        .stderr
        .push_back(crate::safety::redact::with_global(|r| {
            r.redact(&line).into_owned()
        }));
}

fn read_stderr(err: std::process::ChildStderr, shared: &Shared) {
    use std::io::BufRead;
    let mut reader = BufReader::new(err);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                if !text.trim().is_empty() {
                    note(shared, &text);
                }
            }
        }
    }
}
