//! The Streamable HTTP transport (MCP 2025-03-26 and later): every message we send is a POST to the server's
//! endpoint with `Accept: application/json, text/event-stream`; the server answers a request with one JSON
//! body or with an event stream that may carry its own requests and notifications before the answer, and
//! answers a notification or a response of ours with 202.
//!
//! The `Mcp-Session-Id` the server hands out with its `initialize` answer goes on every later request, and so
//! does `MCP-Protocol-Version` once it is agreed. A 404 to a request with a session id means the server
//! dropped the session: [`McpError::SessionExpired`] tells the client to initialise again. After the
//! handshake a GET opens the stream on which the server sends what is not tied to a request
//! (`notifications/tools/list_changed`, `roots/list`); a server that has none answers 405, which is fine.
//! Closing sends a DELETE so the server can free the session.

use std::sync::Mutex;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use serde_json::Value;

use super::jsonrpc;
use super::transport::{Inbound, InboundTx, McpError, MAX_MESSAGE_BYTES};
use crate::sse::SseDecoder;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
/// How much of an error body is quoted.
const ERROR_PREVIEW: usize = 300;
/// The most of an error answer's body that is read (see [`error_body()`]).
const MAX_ERROR_BODY: usize = 64 * 1024;
/// How long the closing DELETE may take.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// A Streamable HTTP connection.
#[derive(Debug)]
pub struct Http {
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
    session: Mutex<Option<String>>,
    version: Mutex<Option<String>>,
    inbound: InboundTx,
    listener: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Http {
    /// `headers` go on every request; their values are marked sensitive (they may be keys).
    pub(crate) fn new(
        url: &str,
        headers: &[(String, String)],
        connect_timeout: Duration,
        inbound: InboundTx,
    ) -> Result<Http, McpError> {
        let bad = |message: String| McpError::Connect {
            url: url.to_string(),
            message,
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(bad("expected an http:// or https:// URL".into()));
        }
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| bad(format!("`{name}` is not a valid header name")))?;
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| bad(format!("the value of header `{name}` is not valid")))?;
            value.set_sensitive(true);
            map.insert(name, value);
        }
        Ok(Http {
            client: http_client(connect_timeout, url.starts_with("http://"))
                .map_err(|err| bad(err.to_string()))?,
            url: url.to_string(),
            headers: map,
            session: Mutex::new(None),
            version: Mutex::new(None),
            inbound,
            listener: Mutex::new(None),
        })
    }

    /// The agreed protocol version, sent as `MCP-Protocol-Version` from now on.
    pub(crate) fn set_version(&self, version: &str) {
        if let Ok(mut v) = self.version.lock() {
            *v = Some(version.to_string());
        }
    }

    /// Forgets the session (before a new `initialize`).
    pub(crate) fn reset_session(&self) {
        if let Ok(mut s) = self.session.lock() {
            *s = None;
        }
        if let Ok(mut v) = self.version.lock() {
            *v = None;
        }
        if let Some(task) = self.listener.lock().ok().and_then(|mut l| l.take()) {
            task.abort();
        }
    }

    /// POSTs one message. For a request (`id` set) the answer arrives on the inbound channel: read here from a
    /// JSON body, or by a task from an event stream.
    pub(crate) async fn send(&self, message: &Value, id: Option<u64>) -> Result<(), McpError> {
        let builder = self
            .with_session(self.client.post(&self.url))
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(message.to_string());
        let had_session = self.session_id().is_some();
        let response = builder
            .send()
            .await
            .map_err(|err| self.connect_error(&err))?;
        if let Some(session) = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
        {
            if let Ok(mut s) = self.session.lock() {
                *s = Some(session.to_string());
            }
        }
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND && had_session {
            return Err(McpError::SessionExpired);
        }
        if !status.is_success() {
            return Err(self.status_error(response).await);
        }
        if status == reqwest::StatusCode::ACCEPTED || status == reqwest::StatusCode::NO_CONTENT {
            return match id {
                // A server may accept a request and answer on the GET stream; the answer then comes there.
                Some(_) => self.listen().await,
                None => Ok(()),
            };
        }
        let kind = content_type(response.headers());
        if kind.starts_with("text/event-stream") {
            tokio::spawn(read_stream(response, self.inbound.clone(), id));
            return Ok(());
        }
        let body = bounded_body(response).await?;
        match jsonrpc::parse(&body) {
            Ok(messages) => {
                for message in messages {
                    let _ = self.inbound.send(Inbound::Message(message));
                }
            }
            // A notification's answer has no use; some servers send `{"result":{}}` anyway.
            Err(_) if id.is_none() => {}
            Err(what) => {
                return Err(McpError::Protocol(format!(
                    "the answer ({kind}) is not a JSON-RPC message: {what}"
                )))
            }
        }
        Ok(())
    }

    /// Opens the server's GET stream once, if it offers one.
    pub(crate) async fn listen(&self) -> Result<(), McpError> {
        if self.listener.lock().map(|l| l.is_some()).unwrap_or(true) {
            return Ok(());
        }
        let builder = self
            .with_session(self.client.get(&self.url))
            .header(ACCEPT, "text/event-stream");
        let Ok(response) = builder.send().await else {
            return Ok(());
        };
        if !response.status().is_success()
            || !content_type(response.headers()).starts_with("text/event-stream")
        {
            // 405: the server has nothing to say outside of requests.
            return Ok(());
        }
        let task = tokio::spawn(read_stream(response, self.inbound.clone(), None));
        if let Ok(mut listener) = self.listener.lock() {
            *listener = Some(task);
        }
        Ok(())
    }

    /// Ends the session: stops listening and sends DELETE (best effort, bounded).
    pub(crate) async fn close(&self) {
        if let Some(task) = self.listener.lock().ok().and_then(|mut l| l.take()) {
            task.abort();
        }
        if self.session_id().is_some() {
            let delete = self.with_session(self.client.delete(&self.url)).send();
            let _ = tokio::time::timeout(CLOSE_WAIT, delete).await;
        }
    }

    fn session_id(&self) -> Option<String> {
        self.session.lock().ok().and_then(|s| s.clone())
    }

    fn with_session(&self, mut builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        builder = builder.headers(self.headers.clone());
        if let Some(session) = self.session_id() {
            builder = builder.header(SESSION_HEADER, session);
        }
        if let Some(version) = self.version.lock().ok().and_then(|v| v.clone()) {
            builder = builder.header(VERSION_HEADER, version);
        }
        builder
    }

    fn connect_error(&self, err: &reqwest::Error) -> McpError {
        McpError::Connect {
            url: self.url.clone(),
            message: error_chain(err),
        }
    }

    async fn status_error(&self, response: reqwest::Response) -> McpError {
        let status = response.status().as_u16();
        let body = error_body(response).await;
        let parsed: Option<Value> = serde_json::from_str(&body).ok();
        let message = parsed
            .as_ref()
            .and_then(|v| v.pointer("/error/message").and_then(Value::as_str))
            .map(str::to_string)
            .unwrap_or_else(|| {
                let body = body.trim();
                match body.char_indices().nth(ERROR_PREVIEW) {
                    Some((end, _)) => format!("{}...", &body[..end]),
                    None if body.is_empty() => "(no body)".to_string(),
                    None => body.to_string(),
                }
            });
        McpError::Http {
            status,
            url: self.url.clone(),
            message,
        }
    }
}

/// A reqwest client set up as the model clients' is: reqwest is built without a default crypto provider, so
/// ring is installed (a second install fails harmlessly), and an http:// URL skips loading the system's
/// trust store, which is a third of start-up for nothing.
fn http_client(connect_timeout: Duration, plain_http: bool) -> reqwest::Result<reqwest::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .redirect(same_origin_redirects());
    if plain_http {
        builder = builder.tls_certs_only([]);
    }
    builder.build()
}

/// Redirects within the server's origin are followed; one to another origin is refused, because every request
/// carries the configured headers (`X-Api-Key`, ...), and reqwest drops only the ones it knows are secret
/// (`Authorization`, cookies) when it follows a redirect (issue 23, finding 5).
fn same_origin_redirects() -> reqwest::redirect::Policy {
    const MAX_REDIRECTS: usize = 5;
    reqwest::redirect::Policy::custom(|attempt| {
        let first = attempt.previous().first().map(|u| u.origin());
        if first.is_some_and(|origin| origin != attempt.url().origin()) {
            let to = attempt.url().origin().ascii_serialization();
            let message = format!(
                "it redirects to another origin ({to}), which is not followed: the request carries the server's \
                 configured headers; if that is the server now, configure its URL instead"
            );
            attempt.error(message)
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    })
}

/// Reads an event stream to its end, handing each event's message on. When it ends without the answer to
/// `id`, the client is told, so the request fails now rather than at its timeout.
async fn read_stream(mut response: reqwest::Response, inbound: InboundTx, id: Option<u64>) {
    let mut decoder = SseDecoder::new();
    let mut answered = false;
    let mut forward = |data: &str| match jsonrpc::parse(data.as_bytes()) {
        Ok(messages) => {
            for message in messages {
                if let (Some(id), jsonrpc::Incoming::Response { id: got, .. }) = (id, &message) {
                    answered |= got.as_u64() == Some(id);
                }
                let _ = inbound.send(Inbound::Message(message));
            }
        }
        Err(what) => {
            let _ = inbound.send(Inbound::Garbage(what));
        }
    };
    // Bytes since the last whole event: one event may not hold more than one message may.
    let mut pending = 0usize;
    let reason = loop {
        match response.chunk().await {
            Ok(Some(bytes)) => {
                pending += bytes.len();
                let events = decoder.push(&bytes);
                if !events.is_empty() {
                    pending = 0;
                }
                for event in events {
                    // Priming events (an id and empty data, for resumption) carry no message.
                    forward(&event.data);
                }
                if pending > MAX_MESSAGE_BYTES {
                    let _ = inbound.send(Inbound::TooLarge { id });
                    return;
                }
            }
            Ok(None) => break "the server's event stream ended without an answer".to_string(),
            Err(err) => break format!("the server's event stream broke: {}", error_chain(&err)),
        }
    };
    if let Some(event) = decoder.finish() {
        forward(&event.data);
    }
    if let (Some(id), false) = (id, answered) {
        let _ = inbound.send(Inbound::Lost { id, reason });
    }
}

/// The head of an error answer's body, up to [`MAX_ERROR_BODY`]: enough for its JSON-RPC error or the preview
/// a message shows, and never the whole of a body a server makes huge or endless (issue 23, finding 17: a
/// 300 MB answer to `initialize` peaked at 625 MB).
async fn error_body(mut response: reqwest::Response) -> String {
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    body.truncate(MAX_ERROR_BODY);
    String::from_utf8_lossy(&body).into_owned()
}

/// A JSON answer's body, refused as it streams in once it passes [`MAX_MESSAGE_BYTES`].
async fn bounded_body(mut response: reqwest::Response) -> Result<Vec<u8>, McpError> {
    if response
        .content_length()
        .is_some_and(|n| n > MAX_MESSAGE_BYTES as u64)
    {
        return Err(McpError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|err| McpError::Closed(err.to_string()))?
    {
        if body.len() + chunk.len() > MAX_MESSAGE_BYTES {
            return Err(McpError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// The causes of a reqwest error ("tcp connect error: Connection refused"), which say more than its own
/// message.
fn error_chain(error: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !text.starts_with("client error (") && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    if parts.is_empty() {
        error.to_string()
    } else {
        parts.join(": ")
    }
}
