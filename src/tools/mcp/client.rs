//! The protocol over a transport: the `initialize` handshake, requests matched to their answers by id, the
//! server's own requests answered, and its notifications acted on.
//!
//! One task per connection reads what the transport delivers ([`Inbound`]) and routes it: an answer to the
//! request waiting for it, `ping` and `roots/list` answered at once (anything else the server asks gets
//! `-32601`), progress to the call that asked for it, `notifications/tools/list_changed` to whoever watches
//! [`Client::tools_changed`]. A request that is given up (timeout, Ctrl-C) is followed by
//! `notifications/cancelled`, so the server can stop working on it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot, watch};

use super::http::Http;
use super::jsonrpc::{self, Incoming};
use super::stdio::{Launch, Stdio};
use super::transport::{Inbound, McpError, SharedTail, Tail, PROTOCOL_VERSION, SUPPORTED_VERSIONS};
use crate::config::mcp::{ServerSpec, TransportSpec};

/// Why a connection is closed that the client itself shut down.
pub const SHUT_DOWN: &str = "the client shut it down";
/// At most this many pages of `tools/list` (a server that always returns a cursor would loop forever).
const MAX_PAGES: usize = 100;

/// What the server said about itself in its `initialize` answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
    /// The protocol version agreed on.
    pub protocol_version: String,
    /// The server's advice to the model on how to use it, if any.
    pub instructions: Option<String>,
    /// The server says it sends `notifications/tools/list_changed`.
    pub tools_list_changed: bool,
}

/// One tool as the server lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    /// The JSON schema of the arguments (`inputSchema`).
    pub input_schema: Value,
    /// `annotations.readOnlyHint`: the tool changes nothing. A hint from the server, trusted only as far as
    /// the user trusts the server.
    pub read_only: bool,
    /// What is wrong with its `inputSchema` (see [`super::schema`]): such a tool is not offered.
    pub invalid: Option<String>,
}

/// A progress notification for a running call.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// The transports a client can run over.
#[derive(Debug)]
enum Transport {
    Stdio(Stdio),
    Http(Http),
}

impl Transport {
    async fn send(&self, message: &Value, id: Option<u64>) -> Result<(), McpError> {
        match self {
            Transport::Stdio(stdio) => stdio.send(message).await,
            Transport::Http(http) => http.send(message, id).await,
        }
    }
}

type Answer = Result<Value, McpError>;

/// State shared by the client's handles and its reading task.
#[derive(Debug)]
struct Inner {
    transport: Transport,
    next_id: AtomicU64,
    pending: Mutex<HashMap<u64, oneshot::Sender<Answer>>>,
    progress: Mutex<HashMap<String, mpsc::UnboundedSender<Progress>>>,
    tools_changed: watch::Sender<u64>,
    /// Why the connection is gone, once it is.
    closed: Mutex<Option<String>>,
    /// Stderr of a stdio server, log messages and unparseable output of any server.
    diagnostics: SharedTail,
    /// `file://` URIs of the roots we offer (`roots/list`).
    roots: Vec<(String, String)>,
    /// The answer of `initialize`, kept for a re-initialisation after an expired HTTP session.
    info: Mutex<ServerInfo>,
}

/// A connected server. Cheap to clone; all clones share one connection.
#[derive(Clone, Debug)]
pub struct Client {
    inner: Arc<Inner>,
}

impl Client {
    /// Starts (or reaches) the server and does the handshake, all within the spec's startup timeout.
    /// `root` is the checkout: a stdio server's default working directory and the root we offer.
    pub async fn connect(spec: &ServerSpec, root: &Path) -> Result<Client, Failure> {
        let (tx, rx) = mpsc::unbounded_channel();
        let diagnostics: SharedTail = Arc::new(Mutex::new(Tail::with_secrets(spec.secrets())));
        let transport = match &spec.transport {
            TransportSpec::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                // A relative cwd is relative to the checkout.
                let cwd = cwd
                    .as_ref()
                    .map_or_else(|| root.to_path_buf(), |c| root.join(c));
                let launch = Launch {
                    command,
                    args,
                    env,
                    cwd: &cwd,
                    sandbox: spec.sandbox.as_ref().map(|c| c.0.as_ref()),
                };
                let stdio = Stdio::spawn(&launch, tx, Arc::clone(&diagnostics));
                Transport::Stdio(stdio.map_err(Failure::from)?)
            }
            TransportSpec::Http { url, headers } => Transport::Http(
                Http::new(url, headers, spec.startup_timeout, tx).map_err(Failure::from)?,
            ),
        };
        let inner = Arc::new(Inner {
            transport,
            next_id: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            progress: Mutex::new(HashMap::new()),
            tools_changed: watch::channel(0).0,
            closed: Mutex::new(None),
            diagnostics,
            roots: vec![root_entry(root)],
            info: Mutex::new(ServerInfo::default()),
        });
        tokio::spawn(route(Arc::clone(&inner), rx));
        let client = Client { inner };
        match tokio::time::timeout(spec.startup_timeout, client.handshake()).await {
            Ok(Ok(())) => Ok(client),
            Ok(Err(error)) => Err(client.fail(error).await),
            Err(_) => {
                let error = McpError::Timeout {
                    method: "initialize".into(),
                    after: spec.startup_timeout,
                };
                Err(client.fail(error).await)
            }
        }
    }

    /// What the server said about itself.
    pub fn info(&self) -> ServerInfo {
        self.inner
            .info
            .lock()
            .map(|i| i.clone())
            .unwrap_or_default()
    }

    /// The last lines of the server's stderr and log messages, oldest first.
    pub fn diagnostics(&self, lines: usize) -> Vec<String> {
        self.inner
            .diagnostics
            .lock()
            .map(|t| t.last(lines))
            .unwrap_or_default()
    }

    /// `text` with the secrets this server was given (and every other known secret) redacted.
    pub fn redact(&self, text: &str) -> String {
        match self.inner.diagnostics.lock() {
            Ok(tail) => tail.redact(text),
            Err(_) => crate::safety::redact::redact(text),
        }
    }

    /// Changes (its value counts them) each time the server says its tool list changed.
    pub fn tools_changed(&self) -> watch::Receiver<u64> {
        self.inner.tools_changed.subscribe()
    }

    /// Why the connection is gone, if it is.
    pub fn closed(&self) -> Option<String> {
        self.inner.closed.lock().ok().and_then(|c| c.clone())
    }

    /// All tools, following `nextCursor` page by page.
    pub async fn list_tools(&self, timeout: Duration) -> Result<Vec<ToolDef>, McpError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = cursor.as_ref().map(|c| json!({ "cursor": c }));
            let page = self.request("tools/list", params, timeout).await?;
            let Some(list) = page.get("tools").and_then(Value::as_array) else {
                return Err(McpError::Protocol(
                    "tools/list answered without `tools`".into(),
                ));
            };
            tools.extend(list.iter().filter_map(tool_def));
            cursor = page
                .get("nextCursor")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
                .map(str::to_string);
            if cursor.is_none() {
                return Ok(tools);
            }
        }
        Err(McpError::Protocol(format!(
            "tools/list still had more pages after {MAX_PAGES}"
        )))
    }

    /// Calls a tool and returns its result object (see [`super::render`]). Progress goes to `progress`;
    /// when `cancel` resolves first the server is told and the call ends with [`McpError::Cancelled`]. An
    /// HTTP session that expired is started again, once, and the call repeated.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        timeout: Duration,
        progress: Option<mpsc::UnboundedSender<Progress>>,
        cancel: impl std::future::Future<Output = ()>,
    ) -> Result<Value, McpError> {
        tokio::pin!(cancel);
        let mut result = self
            .call_once(name, &arguments, timeout, progress.clone(), &mut cancel)
            .await;
        if matches!(result, Err(McpError::SessionExpired)) {
            self.reinitialize(timeout, "tools/call").await?;
            result = self
                .call_once(name, &arguments, timeout, progress, &mut cancel)
                .await;
        }
        result
    }

    async fn call_once(
        &self,
        name: &str,
        arguments: &Value,
        timeout: Duration,
        progress: Option<mpsc::UnboundedSender<Progress>>,
        cancel: &mut std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
    ) -> Result<Value, McpError> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let mut params = json!({ "name": name, "arguments": arguments });
        let token = format!("call-{id}");
        if let Some(sender) = progress {
            params["_meta"] = json!({ "progressToken": token });
            if let Ok(mut map) = self.inner.progress.lock() {
                map.insert(token.clone(), sender);
            }
        }
        let call = self.request_with_id(id, "tools/call", Some(params), timeout);
        let result = tokio::select! {
            result = call => result,
            _ = cancel.as_mut() => {
                self.forget(id, "the user cancelled the call").await;
                Err(McpError::Cancelled)
            }
        };
        if let Ok(mut map) = self.inner.progress.lock() {
            map.remove(&token);
        }
        result
    }

    /// Stops the server (stdio: close stdin, SIGTERM, SIGKILL) or ends the HTTP session.
    pub async fn shutdown(&self) {
        match &self.inner.transport {
            Transport::Stdio(stdio) => stdio.shutdown().await,
            Transport::Http(http) => http.close().await,
        }
        self.inner.close(SHUT_DOWN.into());
    }

    /// [`Client::shutdown`] for code that cannot await (see [`super::stdio::Stdio::stop_blocking`]).
    pub fn stop_blocking(&self) {
        if let Transport::Stdio(stdio) = &self.inner.transport {
            stdio.stop_blocking();
        }
        self.inner.close(SHUT_DOWN.into());
    }

    /// One request and its answer, initialising again once if an HTTP session expired.
    pub async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, McpError> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        match self
            .request_with_id(id, method, params.clone(), timeout)
            .await
        {
            Err(McpError::SessionExpired) if method != "initialize" => {
                self.reinitialize(timeout, method).await?;
                let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
                self.request_with_id(id, method, params, timeout).await
            }
            other => other,
        }
    }

    async fn request_with_id(
        &self,
        id: u64,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, McpError> {
        if let Some(reason) = self.closed() {
            return Err(McpError::Closed(reason));
        }
        let (tx, rx) = oneshot::channel();
        if let Ok(mut pending) = self.inner.pending.lock() {
            pending.insert(id, tx);
        }
        let message = jsonrpc::request(id, method, params);
        if let Err(error) = self.inner.transport.send(&message, Some(id)).await {
            self.inner.take_pending(id);
            return Err(error);
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(answer)) => answer.map_err(|error| match error {
                McpError::Rpc { error, .. } => McpError::Rpc {
                    method: method.to_string(),
                    error,
                },
                other => other,
            }),
            Ok(Err(_)) => Err(McpError::Closed(self.closed().unwrap_or_default())),
            Err(_) => {
                self.forget(id, "timed out").await;
                Err(McpError::Timeout {
                    method: method.to_string(),
                    after: timeout,
                })
            }
        }
    }

    /// Gives up on request `id` and tells the server, which may still be working on it.
    async fn forget(&self, id: u64, reason: &str) {
        self.inner.take_pending(id);
        let note = jsonrpc::notification(
            "notifications/cancelled",
            Some(json!({ "requestId": id, "reason": reason })),
        );
        let _ = self.inner.transport.send(&note, None).await;
    }

    async fn notify(&self, method: &str, params: Option<Value>) -> Result<(), McpError> {
        let note = jsonrpc::notification(method, params);
        self.inner.transport.send(&note, None).await
    }

    /// A new handshake after the server forgot the session, bounded by the timeout of the request that
    /// found out.
    async fn reinitialize(&self, timeout: Duration, method: &str) -> Result<(), McpError> {
        match tokio::time::timeout(timeout, self.handshake()).await {
            Ok(result) => result,
            Err(_) => Err(McpError::Timeout {
                method: format!("initialize (again, for {method})"),
                after: timeout,
            }),
        }
    }

    /// `initialize`, the version check, `notifications/initialized`.
    async fn handshake(&self) -> Result<(), McpError> {
        if let Transport::Http(http) = &self.inner.transport {
            http.reset_session();
        }
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": { "roots": { "listChanged": false } },
            "clientInfo": {
                "name": "git-agent",
                "title": "git-agent",
                "version": env!("CARGO_PKG_VERSION"),
            },
        });
        // The handshake is bounded by the caller (the startup timeout); this one only keeps a lost answer
        // from waiting forever.
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let answer = self
            .request_with_id(
                id,
                "initialize",
                Some(params),
                Duration::from_secs(24 * 3600),
            )
            .await?;
        let info = server_info(&answer)?;
        if let Transport::Http(http) = &self.inner.transport {
            http.set_version(&info.protocol_version);
        }
        if let Ok(mut slot) = self.inner.info.lock() {
            *slot = info;
        }
        self.notify("notifications/initialized", None).await?;
        if let Transport::Http(http) = &self.inner.transport {
            http.listen().await?;
        }
        Ok(())
    }

    /// Shuts a client down after a failed start and says what went wrong, with the server's last words.
    async fn fail(&self, error: McpError) -> Failure {
        let exited = match &self.inner.transport {
            Transport::Stdio(stdio) => {
                // Give a crashing server a moment to finish writing its stderr and exit: polled for up to
                // a second, since on a loaded machine a server that has closed its pipes may take longer
                // than 100 ms to be reaped (the failure then read "closed the connection: Broken pipe").
                let mut exited = None;
                for _ in 0..50 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    exited = stdio.exit_status();
                    if exited.is_some() {
                        break;
                    }
                }
                exited
            }
            Transport::Http(_) => None,
        };
        self.shutdown().await;
        let message = match (exited, &error) {
            (Some(how), McpError::Closed(_) | McpError::Timeout { .. }) => {
                format!("the server {how} before the handshake finished")
            }
            _ => error.to_string(),
        };
        Failure {
            message: self.redact(&message),
            stderr: self.diagnostics(Tail::LINES),
        }
    }
}

impl Inner {
    fn take_pending(&self, id: u64) -> Option<oneshot::Sender<Answer>> {
        self.pending.lock().ok().and_then(|mut p| p.remove(&id))
    }

    /// Marks the connection gone and fails every request still waiting. Whoever watches the tool list is
    /// woken too: a crashed server's tools must be withdrawn (issue 23, finding 10), and the list is the
    /// thing they watch.
    fn close(&self, reason: String) {
        if let Ok(mut closed) = self.closed.lock() {
            closed.get_or_insert(reason.clone());
        }
        self.tools_changed.send_modify(|n| *n += 1);
        let waiting: Vec<_> = self
            .pending
            .lock()
            .map(|mut p| p.drain().map(|(_, tx)| tx).collect())
            .unwrap_or_default();
        for tx in waiting {
            let _ = tx.send(Err(McpError::Closed(reason.clone())));
        }
    }

    fn note(&self, line: &str) {
        if let Ok(mut tail) = self.diagnostics.lock() {
            tail.push(line);
        }
    }
}

/// Why a server could not be used: the error, and the server's last stderr lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub message: String,
    pub stderr: Vec<String>,
}

impl From<McpError> for Failure {
    fn from(error: McpError) -> Failure {
        Failure {
            message: error.to_string(),
            stderr: Vec::new(),
        }
    }
}

/// The connection's reading task: routes everything the transport delivers until it closes.
async fn route(inner: Arc<Inner>, mut rx: mpsc::UnboundedReceiver<Inbound>) {
    while let Some(inbound) = rx.recv().await {
        match inbound {
            Inbound::Message(Incoming::Response { id, result }) => {
                let Some(tx) = id.as_u64().and_then(|id| inner.take_pending(id)) else {
                    continue; // an answer to a request we gave up on
                };
                let _ = tx.send(result.map_err(|error| McpError::Rpc {
                    method: String::new(),
                    error,
                }));
            }
            Inbound::Message(Incoming::Request { id, method, params }) => {
                let answer = answer(&inner, &id, &method, &params);
                let _ = inner.transport.send(&answer, None).await;
            }
            Inbound::Message(Incoming::Notification { method, params }) => {
                notified(&inner, &method, &params)
            }
            Inbound::Lost { id, reason } => {
                if let Some(tx) = inner.take_pending(id) {
                    let _ = tx.send(Err(McpError::Closed(reason)));
                }
            }
            Inbound::Garbage(what) => inner.note(&format!("(not a message) {what}")),
            Inbound::TooLarge { id } => {
                let waiting = id.and_then(|id| inner.take_pending(id));
                match waiting {
                    Some(tx) => {
                        let _ = tx.send(Err(McpError::TooLarge));
                    }
                    None => inner.note(&McpError::TooLarge.to_string()),
                }
            }
            Inbound::Closed(reason) => {
                let reason = match &inner.transport {
                    Transport::Stdio(stdio) => {
                        // The output closes a moment before the process is reaped.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        match (stdio.exit_status(), reason.is_empty()) {
                            (Some(how), true) => format!("the server {how}"),
                            (Some(how), false) => format!("the server {how}: {reason}"),
                            (None, _) => reason,
                        }
                    }
                    Transport::Http(_) => reason,
                };
                inner.close(reason);
                return;
            }
        }
    }
}

/// Our answer to a server request: `ping`, `roots/list`, and `-32601` for everything we do not offer
/// (sampling, elicitation: we declared neither capability).
fn answer(inner: &Inner, id: &Value, method: &str, _params: &Value) -> Value {
    match method {
        "ping" => jsonrpc::response(id, json!({})),
        "roots/list" => {
            let roots: Vec<Value> = inner
                .roots
                .iter()
                .map(|(uri, name)| json!({ "uri": uri, "name": name }))
                .collect();
            jsonrpc::response(id, json!({ "roots": roots }))
        }
        other => jsonrpc::error_response(
            id,
            jsonrpc::METHOD_NOT_FOUND,
            &format!("method not found: {other}"),
        ),
    }
}

fn notified(inner: &Inner, method: &str, params: &Value) {
    match method {
        "notifications/tools/list_changed" => inner.tools_changed.send_modify(|n| *n += 1),
        "notifications/progress" => {
            let token = match params.get("progressToken") {
                Some(Value::String(token)) => token.clone(),
                Some(other) => other.to_string(),
                None => return,
            };
            let progress = Progress {
                progress: params
                    .get("progress")
                    .and_then(Value::as_f64)
                    .unwrap_or(0.0),
                total: params.get("total").and_then(Value::as_f64),
                message: params
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            };
            if let Some(sender) = inner
                .progress
                .lock()
                .ok()
                .and_then(|m| m.get(&token).cloned())
            {
                let _ = sender.send(progress);
            }
        }
        "notifications/message" => {
            let level = params
                .get("level")
                .and_then(Value::as_str)
                .unwrap_or("info");
            let data = match params.get("data") {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            inner.note(&format!("[{level}] {data}"));
        }
        _ => {}
    }
}

fn server_info(answer: &Value) -> Result<ServerInfo, McpError> {
    let version = answer
        .get("protocolVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| McpError::Protocol("initialize answered without protocolVersion".into()))?;
    if !SUPPORTED_VERSIONS.contains(&version) {
        return Err(McpError::Version(version.to_string()));
    }
    let field = |name: &str| {
        answer
            .pointer(&format!("/serverInfo/{name}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Ok(ServerInfo {
        name: field("name"),
        version: field("version"),
        protocol_version: version.to_string(),
        instructions: answer
            .get("instructions")
            .and_then(Value::as_str)
            .filter(|i| !i.trim().is_empty())
            .map(str::to_string),
        tools_list_changed: answer
            .pointer("/capabilities/tools/listChanged")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

/// One entry of `tools/list`; entries without a name are skipped.
fn tool_def(tool: &Value) -> Option<ToolDef> {
    let name = tool.get("name")?.as_str()?.to_string();
    let text = |key: &str| tool.get(key).and_then(Value::as_str).map(str::to_string);
    let mut input_schema = tool
        .get("inputSchema")
        .cloned()
        .unwrap_or_else(|| json!({ "type": "object" }));
    let invalid = super::schema::problem(&input_schema);
    // Providers want an object schema with `properties`; some servers leave it out for tools without
    // arguments.
    if invalid.is_none() && input_schema.get("properties").is_none() {
        input_schema["properties"] = json!({});
    }
    Some(ToolDef {
        title: text("title").or_else(|| {
            tool.pointer("/annotations/title")
                .and_then(Value::as_str)
                .map(str::to_string)
        }),
        description: text("description").unwrap_or_default(),
        input_schema,
        read_only: tool
            .pointer("/annotations/readOnlyHint")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        invalid,
        name,
    })
}

/// The checkout as a root: its `file://` URI and its folder name.
fn root_entry(root: &Path) -> (String, String) {
    let root: PathBuf = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "/".into());
    (crate::lsp::uri::from_path(&root), name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_older_than_ours_are_accepted_unknown_ones_refused() {
        for version in SUPPORTED_VERSIONS {
            let info =
                server_info(&json!({"protocolVersion": version, "serverInfo": {"name": "s"}}))
                    .expect("supported");
            assert_eq!(info.protocol_version, *version);
        }
        let err = server_info(&json!({"protocolVersion": "2099-01-01"})).unwrap_err();
        assert!(err.to_string().contains("2099-01-01"), "{err}");
        assert!(server_info(&json!({})).is_err());
    }

    #[test]
    fn tool_defs_read_annotations_and_fill_in_schemas() {
        let def = tool_def(&json!({
            "name": "echo",
            "description": "Echoes",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}},
            "annotations": {"readOnlyHint": true}
        }))
        .expect("a tool");
        assert!(def.read_only);
        assert_eq!(def.input_schema["properties"]["message"]["type"], "string");
        let bare = tool_def(&json!({"name": "now"})).expect("a tool");
        assert!(!bare.read_only);
        assert_eq!(
            bare.input_schema,
            json!({"type": "object", "properties": {}})
        );
        assert!(tool_def(&json!({"description": "nameless"})).is_none());
    }
}

#[cfg(test)]
mod http_tests {
    //! The Streamable HTTP session rules against a loopback server with canned answers: nothing in the
    //! partner servers answers 404 for a session it forgot (server-everything says 400), so this is where
    //! re-initialisation is checked.
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    fn respond(status: &str, headers: &[&str], body: &str) -> String {
        let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
        format!(
            "HTTP/1.1 {status}\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n{body}",
            body.len()
        )
    }

    /// Serves `answers` one connection each and returns the requests (head and body) it received.
    fn serve(answers: Vec<String>) -> (String, std::thread::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
        let handle = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for answer in answers {
                let (mut socket, _) = listener.accept().expect("accept");
                let mut request = Vec::new();
                let mut buf = [0; 4096];
                loop {
                    let n = socket.read(&mut buf).expect("read");
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).to_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length: "))
                            .and_then(|n| n.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length || n == 0 {
                            break;
                        }
                    }
                }
                seen.push(String::from_utf8_lossy(&request).into_owned());
                socket.write_all(answer.as_bytes()).expect("write");
            }
            seen
        });
        (url, handle)
    }

    /// The answer to `initialize` with request id `id` (the client numbers its requests from 1).
    fn init_answer(session: &str, id: u64) -> String {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-06-18","capabilities":{{}},"serverInfo":{{"name":"canned","version":"1"}}}}}}"#
        );
        respond(
            "200 OK",
            &[
                "content-type: application/json",
                &format!("mcp-session-id: {session}"),
            ],
            &body,
        )
    }

    #[tokio::test]
    async fn a_forgotten_session_is_initialised_again() {
        let accepted = respond("202 Accepted", &[], "");
        let no_stream = respond("405 Method Not Allowed", &[], "");
        let tools = r#"{"jsonrpc":"2.0","id":4,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}}"#;
        let (url, server) = serve(vec![
            init_answer("s1", 1),
            accepted.clone(),
            no_stream.clone(),
            respond("404 Not Found", &[], ""),
            // tools/list was request 2; the new initialize is 3, the repeated tools/list 4.
            init_answer("s2", 3),
            accepted,
            no_stream,
            // Answered as an event stream this time, after a priming event with no data.
            respond(
                "200 OK",
                &["content-type: text/event-stream"],
                &format!("id: 1\ndata: \n\nevent: message\ndata: {tools}\n\n"),
            ),
        ]);
        let spec = ServerSpec::new(
            "canned",
            TransportSpec::Http {
                url,
                headers: vec![("X-Team".into(), "core".into())],
            },
        );
        let client = Client::connect(&spec, &std::env::temp_dir())
            .await
            .expect("connects");
        assert_eq!(client.info().protocol_version, "2025-06-18");
        let listed = client
            .list_tools(Duration::from_secs(10))
            .await
            .expect("listed after re-init");
        assert_eq!(listed.len(), 1);
        let seen = server.join().expect("the server thread");
        let lower: Vec<String> = seen.iter().map(|r| r.to_lowercase()).collect();
        assert!(
            lower[0].contains("accept: application/json, text/event-stream"),
            "{}",
            seen[0]
        );
        assert!(lower[0].contains("x-team: core"));
        assert!(
            !lower[0].contains("mcp-session-id"),
            "initialize carries no session"
        );
        assert!(
            lower[1].contains("mcp-session-id: s1")
                && lower[1].contains("notifications/initialized")
        );
        assert!(
            lower[1].contains("mcp-protocol-version: 2025-06-18"),
            "{}",
            seen[1]
        );
        assert!(lower[2].starts_with("get "), "{}", seen[2]);
        assert!(lower[3].contains("mcp-session-id: s1") && lower[3].contains("tools/list"));
        assert!(
            !lower[4].contains("mcp-session-id"),
            "a new initialize: {}",
            seen[4]
        );
        assert!(
            lower[7].contains("mcp-session-id: s2") && lower[7].contains("tools/list"),
            "{}",
            seen[7]
        );
    }

    /// A listener that records every request it gets until `stop` is set, answering none.
    fn record_until(
        stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> (String, std::thread::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let url = format!("http://{}/elsewhere", listener.local_addr().expect("addr"));
        let handle = std::thread::spawn(move || {
            let mut seen = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut socket, _)) => {
                        let _ = socket.set_nonblocking(false);
                        let _ = socket.set_read_timeout(Some(Duration::from_millis(500)));
                        let mut buf = [0; 8192];
                        let n = socket.read(&mut buf).unwrap_or(0);
                        seen.push(String::from_utf8_lossy(&buf[..n]).into_owned());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
            seen
        });
        (url, handle)
    }

    #[tokio::test]
    async fn configured_headers_never_follow_a_redirect_to_another_origin() {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (elsewhere, other) = record_until(std::sync::Arc::clone(&stop));
        let (url, first) = serve(vec![respond(
            "307 Temporary Redirect",
            &[&format!("location: {elsewhere}")],
            "",
        )]);
        let spec = ServerSpec::new(
            "redirected",
            TransportSpec::Http {
                url,
                headers: vec![("X-Api-Key".into(), "key-that-stays-home-123".into())],
            },
        );
        let failure = Client::connect(&spec, &std::env::temp_dir())
            .await
            .expect_err("a redirect to another origin fails the start");
        assert!(
            failure.message.contains("redirects to another origin"),
            "{failure:?}"
        );
        assert!(!failure.message.contains("key-that-stays-home"));
        let seen = first.join().expect("the first server");
        assert!(seen[0]
            .to_lowercase()
            .contains("x-api-key: key-that-stays-home-123"));
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let at_other = other.join().expect("the other server");
        assert!(
            at_other
                .iter()
                .all(|r| !r.to_lowercase().contains("x-api-key")),
            "{at_other:?}"
        );
        assert!(
            at_other.is_empty(),
            "nothing reaches the other origin: {at_other:?}"
        );
    }
}
