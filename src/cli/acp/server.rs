//! The ACP server: one reader, one writer, one task per running turn, all on the current thread.
//!
//! A thread reads the client's lines and hands them to the dispatcher, which answers what is quick at once
//! (`initialize`, `session/list`, a cancel, a steering prompt) and starts a local task for what takes time
//! (opening a session, a turn, closing). Every message out goes through the one [`Peer`], so lines never
//! interleave, and requests to the client (`session/request_permission`) are matched to their answers by
//! id while the dispatcher keeps reading. The sessions map is touched only between awaits, by the
//! dispatcher and the tasks, on this one thread: a turn takes its session out of the map while it runs and
//! puts it back when it ends.
//!
//! Turns: `session/prompt` on an idle session starts one. A prompt that arrives while one runs steers it
//! (the text joins before the next model request) and is answered when that turn ends, with
//! `_meta.steered`; text that arrived too late to join becomes the next turn. `session/cancel` cancels the
//! turn (model request dropped, a running command's process group killed, an open permission question
//! answered); the prompt is answered with `stopReason: "cancelled"`, never an error, and every tool call
//! the client saw gets its final update.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fs::File;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::super::error::CommandError;
use super::{commands, prompt};
use crate::agent::{
    AgentError, AgentSession, Resume, SafetyOptions, SessionOptions, TurnControl, TurnEnd,
};
use crate::config;
use crate::protocol::{Event, Sink, Status};
use crate::safety::rules::Rules;
use crate::safety::sandbox::SandboxConfig;
use crate::store::{Store, StoreError};
use crate::ui::acp::wire::{code, Incoming, Peer, RpcError};
use crate::ui::acp::{AcpApprover, AcpSink, Rejected};

/// What every session of this process starts with.
#[derive(Debug, Clone)]
pub(super) struct Defaults {
    pub(super) model: Option<String>,
    pub(super) max_steps: u32,
    pub(super) max_tokens: Option<u64>,
    pub(super) run_timeout: Duration,
    pub(super) allow: Vec<String>,
    pub(super) deny: Vec<String>,
    pub(super) sandbox: SandboxConfig,
    /// `sessionCapabilities.resume` is offered.
    pub(super) resume: bool,
}

/// The protocol version spoken (ACP's major version, an integer).
const PROTOCOL_VERSION: u64 = 1;
/// Sessions per `session/list` page.
const PAGE: usize = 100;

/// What the dispatcher and the tasks share.
struct State {
    peer: Peer,
    defaults: Defaults,
    sessions: RefCell<HashMap<String, Slot>>,
    /// The client shows `notice` updates (`clientCapabilities.session.notices`).
    notices: Cell<bool>,
}

type Shared = Rc<State>;

/// Where one session stands in this process.
enum Slot {
    /// `session/load` or `session/resume` is opening it.
    Opening,
    Idle(Box<Open>),
    /// A turn has it.
    Busy(Busy),
}

/// An open session and what it remembers between turns.
struct Open {
    session: AgentSession,
    /// The directory the editor gave (slash commands work there).
    cwd: PathBuf,
    /// Commands the user rejected for good.
    rejected: Rejected,
}

/// A running turn, as the dispatcher sees it.
struct Busy {
    control: TurnControl,
    /// The request the turn answers (a `$/cancel_request` for it cancels the turn).
    prompt: Value,
    /// Prompts that steered the turn, in order.
    steers: Vec<Value>,
    /// A `session/close` waiting for the turn to end.
    close: Option<Value>,
    /// The repository (prompt paths are made relative to it).
    workdir: PathBuf,
}

/// Serves the client until it closes stdin, then cancels running turns, waits for them and closes every
/// session.
pub(super) async fn serve(input: File, output: File, defaults: Defaults) {
    let (peer, writer) = Peer::spawn(output);
    let (tx, mut lines) = mpsc::unbounded_channel();
    std::thread::spawn(move || read_lines(input, &tx));
    let state = Rc::new(State {
        peer,
        defaults,
        sessions: RefCell::new(HashMap::new()),
        notices: Cell::new(false),
    });
    let mut tasks = JoinSet::new();
    loop {
        tokio::select! {
            line = lines.recv() => match line {
                Some(Line::Message(line)) => dispatch(&state, &mut tasks, &line),
                Some(Line::TooLong { bytes, id }) => state.peer.fail(&id, &too_long(bytes)),
                None => break,
            },
            Some(done) = tasks.join_next(), if !tasks.is_empty() => reap(done),
        }
    }
    shut_down(&state, &mut tasks).await;
    state.peer.abandon();
    state.peer.finish();
    let _ = writer.join();
}

/// The most one client message may hold. ACP has no limit of its own; a 50 MB line once took the process to
/// 623 MB (issue 23, finding 17), while real prompts, even with embedded files, stay far below this.
pub(super) const MAX_MESSAGE: usize = 8 * 1024 * 1024;

/// One line from the client, or the news that a line was too long to keep.
#[derive(Debug)]
enum Line {
    Message(String),
    /// A line over [`MAX_MESSAGE`], dropped: its size and the request id read from its start, if any.
    TooLong {
        bytes: usize,
        id: Value,
    },
}

/// The client's lines, one message each; blank lines are skipped. Ends at end of file. A line over
/// [`MAX_MESSAGE`] is read through and dropped without being held, so its size costs no memory.
fn read_lines(input: File, tx: &mpsc::UnboundedSender<Line>) {
    let mut reader = std::io::BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let line = match read_bounded(&mut reader, &mut line, MAX_MESSAGE) {
            Ok(None) | Err(_) => return,
            Ok(Some(Bounded::Whole)) => {
                let text = String::from_utf8_lossy(&line);
                if text.trim().is_empty() {
                    continue;
                }
                Line::Message(text.into_owned())
            }
            Ok(Some(Bounded::Dropped(bytes))) => Line::TooLong {
                bytes,
                id: leading_id(&line),
            },
        };
        if tx.send(line).is_err() {
            return;
        }
    }
}

/// How [`read_bounded()`] ended a line.
enum Bounded {
    Whole,
    /// Longer than the limit: `buf` keeps its first `limit` bytes, the rest was skipped; its length.
    Dropped(usize),
}

/// Reads one line into `buf`, keeping at most `limit` bytes of it; `None` at end of input.
fn read_bounded(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Option<Bounded>> {
    let mut total = 0usize;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok(match total {
                0 => None,
                n if n > limit => Some(Bounded::Dropped(n)),
                _ => Some(Bounded::Whole),
            });
        }
        let (used, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = (limit + 1).saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..used.min(room)]);
        total += used;
        reader.consume(used);
        if done {
            let content = total - 1;
            return Ok(Some(if content > limit {
                Bounded::Dropped(content)
            } else {
                Bounded::Whole
            }));
        }
    }
}

/// The `id` of a JSON-RPC request from the start of its text (clients write `jsonrpc`, `id` and `method`
/// first), so an over-long request is answered under its id and its caller stops waiting. `null` if none.
fn leading_id(start: &[u8]) -> Value {
    let head = String::from_utf8_lossy(&start[..start.len().min(4096)]);
    let Some(at) = head.find("\"id\"") else {
        return Value::Null;
    };
    let rest = head[at + 4..].trim_start();
    let Some(rest) = rest.strip_prefix(':') else {
        return Value::Null;
    };
    let mut values = serde_json::Deserializer::from_str(rest.trim_start()).into_iter::<Value>();
    match values.next() {
        Some(Ok(id @ (Value::Number(_) | Value::String(_)))) => id,
        _ => Value::Null,
    }
}

fn too_long(bytes: usize) -> RpcError {
    RpcError::new(
        code::INVALID_REQUEST,
        format!(
            "message of {bytes} bytes refused: one message may hold at most {} MiB; send large files as \
             resource links (paths) instead of embedding them",
            MAX_MESSAGE / (1024 * 1024)
        ),
    )
}

fn reap(done: Result<(), tokio::task::JoinError>) {
    if let Err(err) = done {
        eprintln!("git-agent acp: a task failed: {err}");
    }
}

async fn shut_down(state: &Shared, tasks: &mut JoinSet<()>) {
    for slot in state.sessions.borrow().values() {
        if let Slot::Busy(busy) = slot {
            busy.control.cancel();
        }
    }
    while let Some(done) = tasks.join_next().await {
        reap(done);
    }
    let open: Vec<Box<Open>> = state
        .sessions
        .borrow_mut()
        .drain()
        .filter_map(|(_, slot)| match slot {
            Slot::Idle(open) => Some(open),
            _ => None,
        })
        .collect();
    for open in open {
        open.session.shutdown_mcp().await;
        open.session.close();
    }
}

fn dispatch(state: &Shared, tasks: &mut JoinSet<()>, line: &str) {
    match Incoming::parse(line) {
        Incoming::Request { id, method, params } => request(state, tasks, id, &method, params),
        Incoming::Notification { method, params } => notification(state, &method, &params),
        Incoming::Response { id, result } => {
            if !state.peer.resolve(&id, result) {
                eprintln!("git-agent acp: an answer to request {id}, which is not waiting for one (ignored)");
            }
        }
        Incoming::Invalid { id, error } => state.peer.fail(&id, &error),
    }
}

fn request(state: &Shared, tasks: &mut JoinSet<()>, id: Value, method: &str, params: Value) {
    let peer = &state.peer;
    match method {
        "initialize" => peer.respond(&id, initialize(state, &params)),
        // No authentication methods are offered: the model's key comes from the environment or config.
        "authenticate" => peer.respond(&id, json!({})),
        "session/new" => {
            let state = Rc::clone(state);
            tasks.spawn_local(async move { new_session(&state, id, params).await });
        }
        "session/load" | "session/resume" => {
            let state = Rc::clone(state);
            let replay = method == "session/load";
            tasks.spawn_local(async move { reattach(&state, id, params, replay).await });
        }
        "session/list" => answer(peer, &id, list(&params)),
        "session/prompt" => prompt(state, tasks, id, params),
        "session/close" => close(state, tasks, id, params),
        other if other.starts_with('_') => peer.fail(
            &id,
            &RpcError::new(
                code::METHOD_NOT_FOUND,
                format!("unknown extension method {other}"),
            ),
        ),
        other => peer.fail(
            &id,
            &RpcError::new(
                code::METHOD_NOT_FOUND,
                format!("git-agent does not implement {other}"),
            ),
        ),
    }
}

/// Notifications get no answer; unknown ones (and `_` extensions) are ignored, as JSON-RPC says.
fn notification(state: &Shared, method: &str, params: &Value) {
    match method {
        "session/cancel" => {
            let id = params["sessionId"].as_str().unwrap_or_default();
            if let Some(Slot::Busy(busy)) = state.sessions.borrow().get(id) {
                busy.control.cancel();
            }
        }
        "$/cancel_request" => {
            for slot in state.sessions.borrow().values() {
                if let Slot::Busy(busy) = slot {
                    if busy.prompt == params["requestId"] {
                        busy.control.cancel();
                    }
                }
            }
        }
        _ => {}
    }
}

fn answer(peer: &Peer, id: &Value, result: Result<Value, RpcError>) {
    match result {
        Ok(value) => peer.respond(id, value),
        Err(error) => peer.fail(id, &error),
    }
}

fn params<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params)
        .map_err(|e| RpcError::new(code::INVALID_PARAMS, format!("bad params: {e}")))
}

/// A command-edge error as a JSON-RPC error: its message and hints, with a code saying whose fault it is.
fn rpc_error(err: impl Into<CommandError>) -> RpcError {
    let err: CommandError = err.into();
    let code = match err.kind() {
        super::super::error::ErrorKind::User | super::super::error::ErrorKind::Usage => {
            code::INVALID_PARAMS
        }
        _ => code::INTERNAL_ERROR,
    };
    let mut error = RpcError::new(code, err.text());
    if !err.hints().is_empty() {
        error.data = Some(json!({"hints": err.hints()}));
    }
    error
}

fn not_open(id: &str) -> RpcError {
    RpcError::new(
        code::RESOURCE_NOT_FOUND,
        format!(
            "session {id} is not open in this process: session/load or session/resume it first"
        ),
    )
}

fn initialize(state: &Shared, params: &Value) -> Value {
    let notices = params
        .pointer("/clientCapabilities/session/notices")
        .is_some_and(Value::is_object);
    state.notices.set(notices);
    let mut sessions = json!({"list": {}, "close": {}});
    if state.defaults.resume {
        sessions["resume"] = json!({});
    }
    json!({
        // Version 1 whatever the client asked: it is the only one, and a client that wants more decides.
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": true,
            "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
            // The MCP client speaks stdio and Streamable HTTP, not the old HTTP+SSE transport.
            "mcpCapabilities": {"http": true, "sse": false},
            "sessionCapabilities": sessions,
        },
        "agentInfo": {"name": "git-agent", "title": "git-agent", "version": env!("CARGO_PKG_VERSION")},
        "authMethods": [],
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NewParams {
    cwd: PathBuf,
    #[serde(default)]
    mcp_servers: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReattachParams {
    session_id: String,
    cwd: PathBuf,
    #[serde(default)]
    mcp_servers: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionParams {
    session_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptParams {
    session_id: String,
    prompt: Vec<Value>,
}

#[derive(Deserialize)]
struct ListParams {
    cwd: Option<PathBuf>,
    cursor: Option<String>,
}

async fn new_session(state: &Shared, id: Value, raw: Value) {
    let opened = match params::<NewParams>(raw) {
        Ok(p) => open(state, &p.cwd, &p.mcp_servers, None).await,
        Err(err) => Err(err),
    };
    match opened {
        Ok((open, notes)) => {
            let sid = open.session.id().to_owned();
            let sink = sink_for(state, &open.session);
            let offered = commands::available(&open.session);
            state
                .sessions
                .borrow_mut()
                .insert(sid.clone(), Slot::Idle(open));
            state.peer.respond(&id, json!({"sessionId": sid}));
            announce(&sink, &notes, offered);
        }
        Err(err) => state.peer.fail(&id, &err),
    }
}

/// What `session/load` or `session/resume` finds of a session in this process.
enum Here {
    Absent,
    Idle,
    Running,
    Opening,
}

fn here(state: &Shared, sid: &str) -> Here {
    match state.sessions.borrow().get(sid) {
        None => Here::Absent,
        Some(Slot::Idle(_)) => Here::Idle,
        Some(Slot::Busy(_)) => Here::Running,
        Some(Slot::Opening) => Here::Opening,
    }
}

/// `session/load` (the stored conversation replayed first) and `session/resume` (no replay). A session
/// already open in this process is reattached as it is.
async fn reattach(state: &Shared, id: Value, raw: Value, replay: bool) {
    let p: ReattachParams = match params(raw) {
        Ok(p) => p,
        Err(err) => return state.peer.fail(&id, &err),
    };
    // Exact ids only (issue 23, finding 16): an empty id or a prefix would open whichever session it
    // happens to match, and a prefix of a session open here would not find it in the map.
    if let Err(err) = exact_id(&p) {
        return state.peer.fail(&id, &err);
    }
    match here(state, &p.session_id) {
        Here::Absent => open_stored(state, id, p, replay).await,
        Here::Idle => {
            let sessions = state.sessions.borrow();
            let Some(Slot::Idle(open)) = sessions.get(&p.session_id) else {
                return state.peer.fail(&id, &not_open(&p.session_id));
            };
            let mut sink = sink_for(state, &open.session);
            if replay {
                if let Err(err) = replay_log(open.session.store(), &p.session_id, &mut sink) {
                    return state.peer.fail(&id, &err);
                }
            }
            let offered = commands::available(&open.session);
            state.peer.respond(&id, json!({}));
            announce(&sink, &[], offered);
        }
        // Resuming a session whose turn runs: its updates keep coming.
        Here::Running if !replay => state.peer.respond(&id, json!({})),
        // A replay now would interleave with the turn's updates.
        Here::Running | Here::Opening => {
            let message = format!(
                "session {} is busy in this process: wait for its turn to end",
                p.session_id
            );
            state
                .peer
                .fail(&id, &RpcError::new(code::INVALID_REQUEST, message));
        }
    }
}

/// Refuses an id that is not exactly a stored session's: the command line takes unique prefixes, ACP
/// clients have the full ids from `session/new` and `session/list`.
fn exact_id(p: &ReattachParams) -> Result<(), RpcError> {
    if p.session_id.trim().is_empty() {
        return Err(RpcError::new(
            code::INVALID_PARAMS,
            "sessionId is empty: give a session's full id (session/list lists them)",
        ));
    }
    let store = Store::open(&p.cwd).map_err(rpc_error)?;
    let exact = store.resolve_session(Some(&p.session_id));
    if matches!(exact, Ok(found) if found == p.session_id) {
        Ok(())
    } else {
        Err(not_open_anywhere(&p.session_id))
    }
}

/// Opens a stored session (holding its lock, so another process cannot run it meanwhile), replays it if
/// asked, and answers.
async fn open_stored(state: &Shared, id: Value, p: ReattachParams, replay: bool) {
    state
        .sessions
        .borrow_mut()
        .insert(p.session_id.clone(), Slot::Opening);
    let opened = open(state, &p.cwd, &p.mcp_servers, Some(&p.session_id)).await;
    state.sessions.borrow_mut().remove(&p.session_id);
    let (open, notes) = match opened {
        Ok(opened) => opened,
        Err(err) => return state.peer.fail(&id, &err),
    };
    let sid = open.session.id().to_owned();
    let mut sink = sink_for(state, &open.session);
    if replay {
        if let Err(err) = replay_log(open.session.store(), &sid, &mut sink) {
            close_quietly(open).await;
            return state.peer.fail(&id, &err);
        }
    }
    let offered = commands::available(&open.session);
    state.sessions.borrow_mut().insert(sid, Slot::Idle(open));
    state.peer.respond(&id, json!({}));
    announce(&sink, &notes, offered);
}

/// The stored conversation as updates: the stored events through the sink the live session uses, as
/// `show` replays them through the terminal's, every call closed at the end (a session that died mid-call
/// left one without a result).
fn replay_log(store: &Store, sid: &str, sink: &mut AcpSink) -> Result<(), RpcError> {
    let log = store.read_log(sid).map_err(rpc_error)?;
    sink.replaying(true);
    for event in crate::agent::journal::events(&log.events) {
        sink.emit(&event);
    }
    sink.replaying(false);
    sink.close_open("the session stopped before this call finished");
    Ok(())
}

async fn close_quietly(open: Box<Open>) {
    open.session.shutdown_mcp().await;
    open.session.close();
}

/// What a newly attached session tells the client: what went wrong while it opened, the commands, and how
/// full its context is.
fn announce(sink: &AcpSink, notes: &[String], offered: Value) {
    for note in notes {
        sink.notice("warning", note);
    }
    sink.update(json!({
        "sessionUpdate": "available_commands_update",
        "availableCommands": offered,
    }));
}

fn sink_for(state: &Shared, session: &AgentSession) -> AcpSink {
    AcpSink::new(
        state.peer.clone(),
        session.id(),
        session.session().root(),
        session.context_window(),
        state.notices.get(),
    )
}

/// Opens a session (new, or `resume` by id) for `cwd` with the editor's MCP servers. Warnings while it
/// opens come back as notes, since the client does not know the session yet.
async fn open(
    state: &Shared,
    cwd: &Path,
    mcp: &Value,
    resume: Option<&str>,
) -> Result<(Box<Open>, Vec<String>), RpcError> {
    if !cwd.is_absolute() {
        return Err(RpcError::new(
            code::INVALID_PARAMS,
            format!("cwd must be an absolute path, not {}", cwd.display()),
        ));
    }
    let servers = if mcp.is_null() {
        Vec::new()
    } else {
        config::mcp::parse_acp(mcp).map_err(|e| RpcError::new(code::INVALID_PARAMS, e))?
    };
    let options = options(&state.defaults, cwd, resume).map_err(rpc_error)?;
    let mut notes = Notes::default();
    let mut session =
        AgentSession::open(cwd, options, &mut notes)
            .await
            .map_err(|err| match err {
                AgentError::Store(StoreError::NoSession(id)) => not_open_anywhere(&id),
                err => rpc_error(err),
            })?;
    session.keep();
    // An editor's entry that cannot be used is said at once (the servers themselves may start only once the
    // checkout exists); it also counts as a failed server in the session's MCP status.
    for (name, spec) in &servers {
        if let Err(problem) = spec {
            notes
                .0
                .push(format!("MCP server {name} not started: {problem}"));
        }
    }
    if !servers.is_empty() {
        session.add_mcp_servers(servers);
    }
    let open = Box::new(Open {
        session,
        cwd: cwd.to_path_buf(),
        rejected: Rejected::default(),
    });
    Ok((open, notes.0))
}

fn not_open_anywhere(id: &str) -> RpcError {
    RpcError::new(
        code::RESOURCE_NOT_FOUND,
        format!("no session {id:?} in this repository: session/list lists them"),
    )
}

/// The session options for `cwd`, from its settings and the process's flags.
fn options(
    defaults: &Defaults,
    cwd: &Path,
    resume: Option<&str>,
) -> Result<SessionOptions, CommandError> {
    let env = |name: &str| crate::safety::secrets::var(name);
    let settings = config::Settings::load(cwd, &env)?;
    let model = settings.resolve(defaults.model.as_deref(), &env)?;
    let (connect_timeout, idle_timeout) = settings.timeouts(&env)?;
    Ok(SessionOptions {
        model,
        max_steps: defaults.max_steps,
        max_time: None,
        max_tokens: defaults.max_tokens,
        max_cost: None,
        run_timeout: defaults.run_timeout,
        connect_timeout,
        idle_timeout,
        retry: settings.retry_policy(),
        safety: SafetyOptions {
            rules: Rules::from_lists(&defaults.allow, &defaults.deny)?,
            sandbox: defaults.sandbox.clone(),
        },
        resume: resume.map(|id| Resume::Id(id.to_owned())),
        here: false,
        title: None,
        memory: settings.memory(),
        settings,
    })
}

/// Keeps what a session says while it opens, before the client knows it.
#[derive(Default)]
struct Notes(Vec<String>);

impl Sink for Notes {
    fn emit(&mut self, event: &Event) {
        match event {
            Event::Warning { message: text }
            | Event::Error { message: text }
            | Event::Notice { message: text, .. } => self.0.push(text.clone()),
            Event::Mcp {
                untrusted: Some(text),
                ..
            } => self.0.push(text.clone()),
            _ => {}
        }
    }
}

fn list(raw: &Value) -> Result<Value, RpcError> {
    let p: ListParams = params(raw.clone())?;
    let cwd = match p.cwd {
        Some(cwd) => cwd,
        None => std::env::current_dir().map_err(|e| {
            RpcError::new(
                code::INTERNAL_ERROR,
                format!("cannot read the current directory: {e}"),
            )
        })?,
    };
    let store = Store::open(&cwd).map_err(rpc_error)?;
    let start = match p.cursor.as_deref() {
        None => 0,
        Some(cursor) => cursor
            .parse::<usize>()
            .map_err(|_| RpcError::new(code::INVALID_PARAMS, format!("bad cursor {cursor:?}")))?,
    };
    let workdir =
        std::fs::canonicalize(store.workdir()).unwrap_or_else(|_| store.workdir().to_path_buf());
    let listed: Vec<_> = store
        .list_sessions()
        .map_err(rpc_error)?
        .into_iter()
        .filter(|meta| meta.status != Status::Discarded)
        .collect();
    let sessions: Vec<Value> = listed
        .iter()
        .skip(start)
        .take(PAGE)
        .map(|meta| {
            let title = meta.prompt.lines().next().unwrap_or_default();
            json!({
                "sessionId": meta.id,
                "cwd": workdir,
                "title": if title.is_empty() { Value::Null } else { json!(title) },
                "updatedAt": rfc3339(meta.updated),
            })
        })
        .collect();
    let mut result = json!({"sessions": sessions});
    if start + PAGE < listed.len() {
        result["nextCursor"] = json!((start + PAGE).to_string());
    }
    Ok(result)
}

/// Unix seconds as an RFC 3339 UTC time.
fn rfc3339(secs: i64) -> String {
    crate::agent::date::rfc3339(secs)
}

fn prompt(state: &Shared, tasks: &mut JoinSet<()>, id: Value, raw: Value) {
    let p: PromptParams = match params(raw) {
        Ok(p) => p,
        Err(err) => return state.peer.fail(&id, &err),
    };
    let mut sessions = state.sessions.borrow_mut();
    let open = match sessions.remove(&p.session_id) {
        Some(Slot::Idle(open)) => open,
        Some(Slot::Busy(mut busy)) => {
            match prompt::text(&p.prompt, &busy.workdir) {
                Ok(text) if commands::is_command(&text) => {
                    let text =
                        "a command cannot run while a turn runs: wait for it to end, or cancel it";
                    state.peer.notify(
                        "session/update",
                        json!({"sessionId": p.session_id, "update": {
                            "sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": text},
                        }}),
                    );
                    state.peer.respond(&id, json!({"stopReason": "end_turn"}));
                }
                Ok(mut text) => {
                    // Images cannot join a turn under way; the model is told one was left out.
                    if prompt::image_count(&p.prompt) > 0 {
                        text.push_str("\n(an image was attached while a turn ran; it was not sent: attach it again)");
                    }
                    busy.control.steer(text);
                    busy.steers.push(id);
                }
                Err(message) => state
                    .peer
                    .fail(&id, &RpcError::new(code::INVALID_PARAMS, message)),
            }
            sessions.insert(p.session_id, Slot::Busy(busy));
            return;
        }
        Some(slot @ Slot::Opening) => {
            sessions.insert(p.session_id.clone(), slot);
            return state.peer.fail(&id, &not_open(&p.session_id));
        }
        None => return state.peer.fail(&id, &not_open(&p.session_id)),
    };
    let mut open = open;
    let workdir = open.session.store().workdir().to_path_buf();
    let taken = prompt::text(&p.prompt, &workdir).and_then(|text| {
        if commands::is_command(&text) {
            return Ok(text);
        }
        let images = prompt::images(&p.prompt, open.session.max_image_size())?;
        open.session
            .attach_images(images)
            .map_err(|e| e.to_string())?;
        Ok(text)
    });
    let text = match taken {
        Ok(text) => text,
        Err(message) => {
            sessions.insert(p.session_id, Slot::Idle(open));
            return state
                .peer
                .fail(&id, &RpcError::new(code::INVALID_PARAMS, message));
        }
    };
    let control = TurnControl::new();
    let busy = Busy {
        control: control.clone(),
        prompt: id.clone(),
        steers: Vec::new(),
        close: None,
        workdir,
    };
    sessions.insert(p.session_id.clone(), Slot::Busy(busy));
    drop(sessions);
    let state = Rc::clone(state);
    tasks.spawn_local(async move { turns(&state, p.session_id, open, control, id, text).await });
}

/// How one turn ended, for the prompts it answers.
enum Ended {
    Turn(TurnEnd),
    /// The prompt was a slash command, answered.
    Command,
    Failed(RpcError),
}

/// Runs the turn a prompt started, answers it and the prompts that steered it, runs what arrived too late to
/// steer as the next turn, and puts the session back (or closes it, if `session/close` came meanwhile).
async fn turns(
    state: &Shared,
    sid: String,
    mut open: Box<Open>,
    mut control: TurnControl,
    id: Value,
    mut text: String,
) {
    let mut sink = sink_for(state, &open.session);
    let mut answers = vec![id];
    loop {
        let ended = turn(state, &mut open, &mut sink, &control, &text).await;
        let Some((waiting, late)) =
            answer_turn(state, &sid, &control, &ended, &open.session, &answers)
        else {
            break;
        };
        // The text that came too late to steer is the next turn.
        control = TurnControl::new();
        if let Some(Slot::Busy(busy)) = state.sessions.borrow_mut().get_mut(&sid) {
            busy.control = control.clone();
            busy.prompt = waiting[0].clone();
        }
        answers = waiting;
        text = late;
    }
    put_back(state, sid, open).await;
}

/// Answers the prompts of a turn that ended: those it ran for, and those that steered it. Returns the
/// prompts that came too late to steer it and their text, to run as the next turn, unless the turn was
/// cancelled or failed (then they are answered as it was).
fn answer_turn(
    state: &Shared,
    sid: &str,
    control: &TurnControl,
    ended: &Ended,
    session: &AgentSession,
    answers: &[Value],
) -> Option<(Vec<Value>, String)> {
    let steers = match state.sessions.borrow_mut().get_mut(sid) {
        Some(Slot::Busy(busy)) => std::mem::take(&mut busy.steers),
        _ => Vec::new(),
    };
    // Taken together with `steers`, on this thread: nothing can steer in between.
    let late = control.take_steering();
    let (steered, waiting) = steers.split_at(steers.len().saturating_sub(late.len()));
    for id in answers {
        reply(&state.peer, id, ended, session, false);
    }
    for id in steered {
        reply(&state.peer, id, ended, session, true);
    }
    if waiting.is_empty() {
        return None;
    }
    if control.is_cancelled() || matches!(ended, Ended::Failed(_)) {
        for id in waiting {
            reply(&state.peer, id, ended, session, false);
        }
        return None;
    }
    Some((waiting.to_vec(), late.join("\n\n")))
}

/// The session goes back to idle after its turn, or is closed if `session/close` came meanwhile.
async fn put_back(state: &Shared, sid: String, open: Box<Open>) {
    let close = match state.sessions.borrow_mut().remove(&sid) {
        Some(Slot::Busy(busy)) => busy.close,
        _ => None,
    };
    match close {
        Some(close) => {
            close_quietly(open).await;
            state.peer.respond(&close, json!({}));
        }
        None => {
            state.sessions.borrow_mut().insert(sid, Slot::Idle(open));
        }
    }
}

/// One turn (or a slash command), every tool call closed at its end, and the context usage after it.
async fn turn(
    state: &Shared,
    open: &mut Open,
    sink: &mut AcpSink,
    control: &TurnControl,
    text: &str,
) -> Ended {
    if let Some(answer) = commands::run(text, &mut open.session, sink, control, &open.cwd).await {
        sink.message(&answer);
        // `/model` may have changed the window, `/compact` and `/undo` the conversation.
        sink.set_window(open.session.context_window());
        sink.usage(open.session.context_used());
        return Ended::Command;
    }
    let cancel = control.clone();
    let mut approver = AcpApprover::new(
        state.peer.clone(),
        open.session.id(),
        Rejected::clone(&open.rejected),
        Box::new(move || cancel.cancel()),
    );
    let result = open.session.turn(text, sink, &mut approver, control).await;
    let why = if control.is_cancelled() {
        "cancelled"
    } else {
        "the turn ended before this call finished"
    };
    sink.close_open(why);
    sink.usage(open.session.context_used());
    match result {
        Ok(end) => Ended::Turn(end),
        Err(err) => Ended::Failed(rpc_error(err)),
    }
}

/// Answers one prompt of the turn: its stop reason (cancelled is a stop reason, never an error), and in
/// `_meta` whether it steered a running turn and how the session stands.
fn reply(peer: &Peer, id: &Value, ended: &Ended, session: &AgentSession, steered: bool) {
    let end = match ended {
        Ended::Turn(end) => end,
        Ended::Command => {
            return peer.respond(
                id,
                json!({"stopReason": "end_turn", "_meta": {"steered": steered}}),
            )
        }
        Ended::Failed(err) => return peer.fail(id, err),
    };
    peer.respond(
        id,
        json!({
            "stopReason": if end.refused { "refusal" } else { stop_reason(&end.status) },
            "_meta": {
                "steered": steered,
                "gitAgent": {
                    "status": end.status.as_str(),
                    "branch": session.branch(),
                    "steps": session.steps(),
                },
            },
        }),
    );
}

/// ACP's stop reason for how a turn ended (a model's refusal, `refusal`, is told apart by the caller). A
/// budget of time, a loop guard and `finish` with `blocked` end
/// the turn as the model's own end would (the answer says why); `_meta.gitAgent.status` tells them apart.
fn stop_reason(status: &Status) -> &'static str {
    match status {
        Status::MaxSteps => "max_turn_requests",
        Status::MaxTokens => "max_tokens",
        Status::Interrupted => "cancelled",
        _ => "end_turn",
    }
}

fn close(state: &Shared, tasks: &mut JoinSet<()>, id: Value, raw: Value) {
    let p: SessionParams = match params(raw) {
        Ok(p) => p,
        Err(err) => return state.peer.fail(&id, &err),
    };
    let mut sessions = state.sessions.borrow_mut();
    match sessions.remove(&p.session_id) {
        Some(Slot::Idle(open)) => {
            let state = Rc::clone(state);
            tasks.spawn_local(async move {
                close_quietly(open).await;
                state.peer.respond(&id, json!({}));
            });
        }
        Some(Slot::Busy(mut busy)) => {
            busy.control.cancel();
            if let Some(earlier) = busy.close.replace(id) {
                state.peer.respond(&earlier, json!({}));
            }
            sessions.insert(p.session_id, Slot::Busy(busy));
        }
        Some(Slot::Opening) => {
            sessions.insert(p.session_id.clone(), Slot::Opening);
            let message = format!("session {} is still being opened", p.session_id);
            state
                .peer
                .fail(&id, &RpcError::new(code::INVALID_REQUEST, message));
        }
        None => state.peer.fail(&id, &not_open(&p.session_id)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_stop_reasons() {
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(stop_reason(&Status::Done), "end_turn");
        assert_eq!(stop_reason(&Status::Blocked), "end_turn");
        assert_eq!(stop_reason(&Status::MaxSteps), "max_turn_requests");
        assert_eq!(stop_reason(&Status::MaxTokens), "max_tokens");
        assert_eq!(stop_reason(&Status::Interrupted), "cancelled");
    }

    #[test]
    fn lines_over_the_limit_are_dropped_and_the_next_one_is_read() {
        let input = b"short\n0123456789abc\n{\"id\": 7, \"x\": 1}\ntail";
        let mut reader = std::io::BufReader::with_capacity(4, &input[..]);
        let mut buf = Vec::new();
        let mut next = |buf: &mut Vec<u8>| {
            buf.clear();
            match read_bounded(&mut reader, buf, 10).unwrap() {
                None => "end".to_owned(),
                Some(Bounded::Whole) => String::from_utf8_lossy(buf).into_owned(),
                Some(Bounded::Dropped(n)) => format!("dropped {n}"),
            }
        };
        assert_eq!(next(&mut buf), "short\n");
        assert_eq!(next(&mut buf), "dropped 13");
        assert!(buf.len() <= 11, "at most the limit is kept");
        assert_eq!(next(&mut buf), "dropped 17");
        assert_eq!(leading_id(&buf), json!(7));
        assert_eq!(next(&mut buf), "tail");
        assert_eq!(next(&mut buf), "end");
        assert_eq!(leading_id(b"{\"method\": \"x\""), Value::Null);
        assert_eq!(leading_id(b"{\"id\":\"a-1\",\"method\""), json!("a-1"));
    }
}
