//! The HTTP plumbing both provider clients share: sending a request, reading a body with an idle timeout,
//! turning a failed status into a [`ModelError`] (with the provider's own message and its `Retry-After`),
//! driving an SSE body through a provider's parser, and keeping the API key out of every error.
//!
//! The providers differ only in the JSON they send, the header their key goes in and the events they stream;
//! keeping everything else here (in [`Endpoint`] and [`Transport`]) means a fix to timeouts, error reporting
//! or key handling reaches both.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use serde_json::Value;

use super::retry::parse_retry_after;
use super::types::{ModelError, Request, Response, StreamEvent, Tuning};
use crate::sse::{SseDecoder, SseEvent};
use crate::sys::timings::Detail;

/// How much of an error body is read: enough for any JSON error, not a whole HTML error page.
const ERROR_BODY_LIMIT: usize = 64 * 1024;
/// How much of an unexpected body is quoted in an error message.
const PREVIEW_CHARS: usize = 200;

/// A provider's stream parser, fed one SSE event at a time by [`Reply::next()`].
pub(crate) trait StreamParser {
    /// Takes one SSE event and returns the stream events to emit, in order.
    fn push_sse(&mut self, event: &SseEvent) -> Result<Vec<StreamEvent>, ModelError>;
    /// Whether the provider's end-of-stream marker was seen; the connection may stay open after it.
    fn is_done(&self) -> bool;
    /// The assembled reply, or an error if the stream was cut off.
    fn into_response(self: Box<Self>) -> Result<Response, ModelError>;
    /// Takes a whole JSON reply, from a server that ignored `stream: true`. Wire formats without such a
    /// fallback refuse it as the event-stream reader would.
    fn push_whole(&mut self, body: &str) -> Result<Vec<StreamEvent>, ModelError> {
        Err(ModelError::Stream(format!(
            "expected server-sent events, got content-type \"application/json\": {}",
            preview(body)
        )))
    }
}

/// Which header carries the API key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyHeader {
    /// `Authorization: Bearer <key>` (OpenAI and every compatible server).
    Bearer,
    /// `x-api-key: <key>` (Anthropic).
    XApiKey,
}

/// One provider endpoint: where it is, the key and how it is sent, and the [`Tuning`] every request gets.
/// Both clients wrap one and add only their wire format. Cloning shares the connection pool.
#[derive(Clone)]
pub(crate) struct Endpoint {
    transport: Transport,
    base_url: String,
    api_key: Option<String>,
    key_header: KeyHeader,
    tuning: Tuning,
}

// Written by hand so the key can never reach a log or an error report.
impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("idle_timeout", &self.transport.idle_timeout)
            .field("tuning", &self.tuning)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// `base_url` is kept without its trailing slash; `idle_timeout` bounds the wait for the response
    /// headers and then for each read of the body.
    pub(crate) fn new(
        base_url: String,
        api_key: Option<String>,
        key_header: KeyHeader,
        connect_timeout: Duration,
        idle_timeout: Duration,
    ) -> Result<Self, ModelError> {
        Ok(Endpoint {
            transport: Transport::new(
                connect_timeout,
                idle_timeout,
                base_url.starts_with("http://"),
            )?,
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
            key_header,
            tuning: Tuning::default(),
        })
    }

    pub(crate) fn with_tuning(mut self, tuning: Tuning) -> Self {
        self.tuning = tuning;
        self
    }

    pub(crate) fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The body `build` makes of `req`, with the tuning's token limit and body adjustments applied;
    /// `rename_max_tokens` as in [`Tuning::apply`].
    pub(crate) fn body(
        &self,
        req: &Request<'_>,
        build: fn(&Request<'_>) -> Value,
        rename_max_tokens: bool,
    ) -> Value {
        let req = Request {
            max_tokens: req.max_tokens.or(self.tuning.max_tokens),
            ..req.clone()
        };
        let mut body = build(&req);
        self.tuning.apply(&mut body, rename_max_tokens);
        body
    }

    /// POSTs `body` to `url` with `headers`, the key and the tuning's headers, and waits for the response
    /// headers; the [`Reply`] then yields the body's events through `parser` as the caller pulls them (a whole
    /// JSON reply goes to [`StreamParser::push_whole`]). Errors never contain the key.
    pub(crate) async fn open(
        &self,
        url: &str,
        body: &Value,
        headers: &[(&'static str, &'static str)],
        parser: Box<dyn StreamParser + Send>,
    ) -> Result<Reply<'_>, ModelError> {
        self.open_inner(url, body, headers, parser)
            .await
            .map_err(|err| redact(err, self.api_key.as_deref()))
    }

    async fn open_inner(
        &self,
        url: &str,
        body: &Value,
        headers: &[(&'static str, &'static str)],
        mut parser: Box<dyn StreamParser + Send>,
    ) -> Result<Reply<'_>, ModelError> {
        let body = body.to_string();
        let sending = crate::sys::timings::begin();
        let size = [("bytes", Detail::Count(body.len() as u64))];
        crate::sys::timings::mark("request", &size);
        let mut builder = self.transport.post(url, body);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let mut response = self.transport.send(self.authorize(builder)?, url).await?;
        let mut reply = Reply {
            endpoint: self,
            body: None,
            parser: None,
            queued: VecDeque::new(),
            failure: None,
            sending,
        };
        if content_type(response.headers()).starts_with("application/json") {
            let body = self
                .transport
                .read_body(&mut response, REPLY_LIMIT + 1)
                .await?;
            if body.len() > REPLY_LIMIT {
                return Err(reply_too_long());
            }
            reply.queued.extend(parser.push_whole(&body)?);
        } else {
            reply.body = Some(SseBody {
                content_type: content_type(response.headers()),
                response,
                decoder: SseDecoder::new(),
                seen_event: false,
                head: String::new(),
                read: 0,
            });
        }
        reply.parser = Some(parser);
        Ok(reply)
    }

    /// A JSON answer to a metadata request (a GET, or a POST of `body`), or `None` on any failure: these
    /// requests only refine defaults, so nothing about them may fail a session. The caller bounds the wait.
    pub(crate) async fn fetch_json(&self, url: &str, body: Option<&Value>) -> Option<Value> {
        let builder = match body {
            Some(body) => self.transport.post(url, body.to_string()),
            None => self.transport.http.get(url),
        };
        let builder = self.authorize(builder).ok()?;
        let mut response = builder.send().await.ok()?;
        let ok = response.status().is_success();
        // Read to the end either way, so the connection goes back to the pool for the session.
        let text = self
            .transport
            .read_body(&mut response, METADATA_BODY_LIMIT)
            .await
            .ok()?;
        ok.then(|| serde_json::from_str(&text).ok()).flatten()
    }

    /// Adds the key (marked sensitive, so it stays out of any debug output of the request) and the
    /// tuning's headers.
    fn authorize(
        &self,
        mut builder: reqwest::RequestBuilder,
    ) -> Result<reqwest::RequestBuilder, ModelError> {
        if let Some(key) = &self.api_key {
            let (name, text) = match self.key_header {
                KeyHeader::Bearer => (AUTHORIZATION.as_str(), format!("Bearer {key}")),
                KeyHeader::XApiKey => ("x-api-key", key.clone()),
            };
            let mut value = HeaderValue::from_str(&text).map_err(|_| {
                ModelError::Client("the API key contains characters not allowed in a header".into())
            })?;
            value.set_sensitive(true);
            builder = builder.header(name, value);
        }
        for (name, value) in &self.tuning.headers {
            builder = builder.header(name, value);
        }
        Ok(builder)
    }
}

/// How much of a metadata answer is read; llama.cpp's `/props` carries the chat template, OpenRouter's model
/// list runs to a few hundred KiB.
const METADATA_BODY_LIMIT: usize = 4 * 1024 * 1024;

/// A reqwest client plus the idle timeout every read is bounded by. Cloning shares the connection pool.
#[derive(Clone, Debug)]
pub(crate) struct Transport {
    http: reqwest::Client,
    idle_timeout: Duration,
}

impl Transport {
    /// `plain_http`: the endpoint is `http://` (a local server), so no TLS trust store is loaded.
    pub(crate) fn new(
        connect_timeout: Duration,
        idle_timeout: Duration,
        plain_http: bool,
    ) -> Result<Self, ModelError> {
        // reqwest is built without a default crypto provider; a second install fails harmlessly.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder().connect_timeout(connect_timeout);
        if plain_http {
            // Loading the system's root certificates reads and parses a few hundred files (about a third of
            // the start-up of a session against a local server), all for TLS that an http:// URL never uses.
            builder = builder.tls_certs_only([]);
        }
        let http = builder
            .build()
            .map_err(|err| ModelError::Client(error_chain(&err)))?;
        Ok(Transport { http, idle_timeout })
    }

    /// A JSON POST to `url`, for the caller to add its auth headers to.
    pub(crate) fn post(&self, url: &str, body: String) -> reqwest::RequestBuilder {
        self.http
            .post(url)
            .header(CONTENT_TYPE, "application/json")
            .body(body)
    }

    /// Sends the request and waits for the response headers, then fails on a non-success status.
    pub(crate) async fn send(
        &self,
        builder: reqwest::RequestBuilder,
        url: &str,
    ) -> Result<reqwest::Response, ModelError> {
        let mut response = match tokio::time::timeout(self.idle_timeout, builder.send()).await {
            Err(_) => return Err(self.timeout()),
            Ok(Ok(response)) => response,
            Ok(Err(err)) if err.is_builder() => {
                return Err(ModelError::Client(format!(
                    "invalid request to {url}: {}",
                    error_chain(&err.without_url())
                )))
            }
            Ok(Err(err)) => {
                return Err(ModelError::Connect {
                    url: url.to_string(),
                    refused: is_refused(&err),
                    message: error_chain(&err.without_url()),
                })
            }
        };
        if response.status().is_success() {
            return Ok(response);
        }
        // The status says more than a failure to read the error body would.
        let body = self
            .read_body(&mut response, ERROR_BODY_LIMIT)
            .await
            .unwrap_or_default();
        Err(status_error(
            response.status(),
            response.headers(),
            &body,
            SystemTime::now(),
        ))
    }

    /// Reads the body up to about `limit` bytes.
    pub(crate) async fn read_body(
        &self,
        response: &mut reqwest::Response,
        limit: usize,
    ) -> Result<String, ModelError> {
        let mut body = Vec::new();
        while let Some(bytes) = self.next_chunk(response).await? {
            body.extend_from_slice(bytes.as_ref());
            if body.len() >= limit {
                break;
            }
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// The next piece of the body, or `None` at its end, failing if none arrives within the idle timeout.
    async fn next_chunk(
        &self,
        response: &mut reqwest::Response,
    ) -> Result<Option<impl AsRef<[u8]> + use<>>, ModelError> {
        match tokio::time::timeout(self.idle_timeout, response.chunk()).await {
            Err(_) => Err(self.timeout()),
            Ok(Ok(bytes)) => Ok(bytes),
            Ok(Err(err)) => Err(ModelError::Truncated(format!(
                "the connection failed while reading the reply: {}",
                error_chain(&err.without_url())
            ))),
        }
    }

    fn timeout(&self) -> ModelError {
        ModelError::Timeout {
            after: self.idle_timeout,
        }
    }
}

/// One attempt's reply, read as the caller pulls: the events of the body in order ([`Reply::next()`]), then
/// the assembled [`Response`] ([`Reply::finish()`]). Dropping it closes the connection at once, so the
/// provider stops generating.
pub(crate) struct Reply<'a> {
    endpoint: &'a Endpoint,
    /// The event-stream body still to read; `None` once it ended (or for a whole JSON reply).
    body: Option<SseBody>,
    /// `None` only while [`Endpoint::open()`] builds the reply and after [`Reply::finish()`].
    parser: Option<Box<dyn StreamParser + Send>>,
    /// Events parsed from the last chunk and not yet pulled: one chunk often carries several.
    queued: VecDeque<StreamEvent>,
    /// An error met after some events of the same chunk, reported once those are pulled.
    failure: Option<ModelError>,
    sending: Option<std::time::Instant>,
}

/// The state of an event-stream body being read.
struct SseBody {
    response: reqwest::Response,
    decoder: SseDecoder,
    content_type: String,
    seen_event: bool,
    /// Kept only to explain a reply that turns out not to be an event stream at all.
    head: String,
    /// Bytes of the body read so far, held to [`REPLY_LIMIT`].
    read: usize,
}

/// The most bytes one streamed reply may carry. A model's longest answer (128k output tokens, each delta
/// framed as its own event) is a few MB; a server that streams on past this, or sends one line without end,
/// is broken or hostile, and the decoder would hold all of it in memory.
const REPLY_LIMIT: usize = 64 << 20;

fn reply_too_long() -> ModelError {
    ModelError::Stream(format!(
        "the reply went on past {} MB, more than any model answer holds; the connection was closed \
         (check the server or the model's settings)",
        REPLY_LIMIT >> 20
    ))
}

impl Reply<'_> {
    /// The next event of the reply, or `None` when the body ended: then call [`Reply::finish()`]. After an
    /// error the reply is over; events already pulled belong to a failed reply.
    pub(crate) async fn next(&mut self) -> Result<Option<StreamEvent>, ModelError> {
        self.pull().await.map_err(|err| {
            // A failed reply's time is a reply's time too (the phase timings show what a retry cost).
            crate::sys::timings::end("reply", self.sending.take(), &[]);
            redact(err, self.endpoint.api_key.as_deref())
        })
    }

    /// The assembled reply, or an error if the stream was cut off.
    pub(crate) fn finish(mut self) -> Result<Response, ModelError> {
        let response = match self.parser.take() {
            Some(parser) => parser.into_response(),
            None => Err(ModelError::Stream("the reply was already finished".into())),
        };
        crate::sys::timings::end("reply", self.sending.take(), &[]);
        response.map_err(|err| redact(err, self.endpoint.api_key.as_deref()))
    }

    async fn pull(&mut self) -> Result<Option<StreamEvent>, ModelError> {
        loop {
            if let Some(event) = self.queued.pop_front() {
                return Ok(Some(event));
            }
            if let Some(err) = self.failure.take() {
                self.body = None;
                return Err(err);
            }
            let (Some(body), Some(parser)) = (&mut self.body, &mut self.parser) else {
                return Ok(None);
            };
            if parser.is_done() {
                drain(&mut body.response).await;
                self.body = None;
                return Ok(None);
            }
            let transport = &self.endpoint.transport;
            match transport.next_chunk(&mut body.response).await? {
                Some(bytes) => {
                    body.read += bytes.as_ref().len();
                    if body.read > REPLY_LIMIT {
                        self.body = None;
                        return Err(reply_too_long());
                    }
                    if !body.seen_event && body.head.len() < PREVIEW_CHARS {
                        body.head.push_str(&String::from_utf8_lossy(bytes.as_ref()));
                    }
                    let events = body.decoder.push(bytes.as_ref());
                    body.seen_event |= !events.is_empty();
                    self.failure = parse_into(&mut **parser, &events, &mut self.queued).err();
                }
                None => {
                    let last = body.decoder.finish();
                    body.seen_event |= last.is_some();
                    if !body.seen_event {
                        return Err(ModelError::Stream(format!(
                            "expected server-sent events, got content-type {:?}: {}",
                            body.content_type,
                            preview(&body.head)
                        )));
                    }
                    let last: Vec<SseEvent> = last.into_iter().collect();
                    self.failure = parse_into(&mut **parser, &last, &mut self.queued).err();
                    self.body = None;
                }
            }
        }
    }
}

/// Feeds `events` to `parser`, queueing what it makes, up to the first error.
fn parse_into(
    parser: &mut (dyn StreamParser + Send),
    events: &[SseEvent],
    queued: &mut VecDeque<StreamEvent>,
) -> Result<(), ModelError> {
    for event in events {
        queued.extend(parser.push_sse(event)?);
    }
    Ok(())
}

/// How long to wait for the end of a body after the provider's end-of-stream marker.
const DRAIN_WAIT: Duration = Duration::from_millis(50);

/// Reads what follows the end-of-stream marker (normally just the chunked body's terminator) so the
/// connection goes back to the pool: an unfinished body makes hyper close it, and the next request of the
/// session would pay a new TCP and TLS handshake. A server that keeps the stream open costs `DRAIN_WAIT`.
async fn drain(response: &mut reqwest::Response) {
    let _ = tokio::time::timeout(DRAIN_WAIT, async {
        while let Ok(Some(_)) = response.chunk().await {}
    })
    .await;
}

/// The error for a non-success status: the provider's message and code from the body, and how long the
/// server asked us to wait (`retry-after-ms`, which OpenAI sends, is more precise than `Retry-After`).
pub(crate) fn status_error(
    status: reqwest::StatusCode,
    headers: &HeaderMap,
    body: &str,
    now: SystemTime,
) -> ModelError {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error = parsed
        .as_ref()
        .map(|body| body.get("error").unwrap_or(body));
    let message = match error.and_then(error_message) {
        Some(message) => message,
        None if body.trim().is_empty() => status.canonical_reason().unwrap_or("").to_string(),
        None => preview(body),
    };
    let code = error.and_then(error_code);
    let status = status.as_u16();
    if matches!(status, 401 | 403) {
        return ModelError::Auth { status, message };
    }
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let retry_after = header("retry-after-ms")
        .and_then(|ms| ms.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .or_else(|| header(RETRY_AFTER.as_str()).and_then(|value| parse_retry_after(value, now)));
    ModelError::Http {
        status,
        code,
        message,
        retry_after,
    }
}

/// Turns an `error` value found in a 200 response (a chunk's `error` field, an `error` event) into an error.
pub(crate) fn provider_error(error: &Value) -> ModelError {
    let message = error_message(error).unwrap_or_else(|| preview(&error.to_string()));
    ModelError::Provider {
        code: error_code(error),
        message,
    }
}

/// The machine-readable code of an error value: OpenAI's `code`, else its (or Anthropic's) `type`.
fn error_code(error: &Value) -> Option<String> {
    error
        .get("code")
        .filter(|code| !code.is_null())
        .or_else(|| error.get("type"))
        .and_then(|code| match code {
            Value::String(code) => Some(code.clone()),
            Value::Number(code) => Some(code.to_string()),
            _ => None,
        })
}

/// The human message in an error value: `{"message":..}`, or the value itself when it is a string.
fn error_message(error: &Value) -> Option<String> {
    match error {
        Value::String(message) => Some(message.clone()),
        Value::Object(fields) => fields
            .get("message")
            .or_else(|| fields.get("detail"))
            .and_then(Value::as_str)
            .map(str::to_string),
        _ => None,
    }
}

/// The first [`PREVIEW_CHARS`] characters of a text, for error messages.
pub(crate) fn preview(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(PREVIEW_CHARS) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_string(),
    }
}

/// Whether the connection was refused (an `io::Error` of that kind somewhere in the cause chain).
fn is_refused(err: &reqwest::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        cause = e.source();
    }
    false
}

/// The causes of a reqwest error, which are what the user needs ("tcp connect error: Connection refused"):
/// reqwest's own message ("error sending request") and hyper's "client error (Connect)" say nothing more.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !text.starts_with("client error (") && !parts.iter().any(|part| part.contains(&text)) {
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

pub(crate) fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Removes the key from an error in case a server echoed it back in its message.
pub(crate) fn redact(error: ModelError, key: Option<&str>) -> ModelError {
    let Some(key) = key.filter(|key| !key.is_empty()) else {
        return error;
    };
    let clean = |text: String| text.replace(key, "<redacted>");
    match error {
        ModelError::Client(message) => ModelError::Client(clean(message)),
        ModelError::Connect {
            url,
            message,
            refused,
        } => ModelError::Connect {
            url: clean(url),
            message: clean(message),
            refused,
        },
        ModelError::Auth { status, message } => ModelError::Auth {
            status,
            message: clean(message),
        },
        ModelError::Http {
            status,
            code,
            message,
            retry_after,
        } => ModelError::Http {
            status,
            code,
            message: clean(message),
            retry_after,
        },
        ModelError::Provider { code, message } => ModelError::Provider {
            code,
            message: clean(message),
        },
        ModelError::Truncated(message) => ModelError::Truncated(clean(message)),
        ModelError::Stream(message) => ModelError::Stream(clean(message)),
        timeout @ ModelError::Timeout { .. } => timeout,
    }
}

/// A loopback HTTP server for the clients' tests: canned responses, one per connection, in order.
#[cfg(test)]
pub(crate) mod test_server {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::thread::JoinHandle;
    use std::time::Duration;

    /// Serves `responses` on a fresh port, one connection each, holding each connection open for `linger`
    /// after writing. Returns `http://127.0.0.1:<port>` and a handle yielding the requests received.
    pub(crate) fn serve_all(
        responses: Vec<String>,
        linger: Duration,
    ) -> (String, JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let handle = std::thread::spawn(move || {
            let mut requests = Vec::new();
            for response in responses {
                let (mut socket, _) = listener.accept().expect("accept");
                requests.push(read_request(&mut socket));
                socket.write_all(response.as_bytes()).expect("write");
                std::thread::sleep(linger);
            }
            requests
        });
        (url, handle)
    }

    /// Reads one request, head and body, from `socket`.
    pub(crate) fn read_request(socket: &mut TcpStream) -> String {
        let mut request = Vec::new();
        let mut buf = [0; 4096];
        loop {
            let n = socket.read(&mut buf).expect("read");
            request.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&request).into_owned();
            if let Some(end) = text.find("\r\n\r\n") {
                let length = text
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length: "))
                    .and_then(|n| n.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if request.len() >= end + 4 + length || n == 0 {
                    return text;
                }
            }
        }
    }

    /// A complete response with a body; `extra` headers are whole lines without their line ending.
    pub(crate) fn http_response(status: &str, content_type: &str, body: &str) -> String {
        http_response_with(status, content_type, &[], body)
    }

    pub(crate) fn http_response_with(
        status: &str,
        content_type: &str,
        extra: &[&str],
        body: &str,
    ) -> String {
        let extra: String = extra.iter().map(|line| format!("{line}\r\n")).collect();
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n{body}",
            body.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;
    use reqwest::StatusCode;

    fn error_for(status: u16, headers: &[(&'static str, &str)], body: &str) -> ModelError {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, HeaderValue::from_str(value).expect("ascii"));
        }
        let status = StatusCode::from_u16(status).expect("valid status");
        status_error(status, &map, body, SystemTime::UNIX_EPOCH)
    }

    #[test]
    fn anthropic_error_body() {
        let body = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        match error_for(529, &[], body) {
            ModelError::Http {
                status: 529,
                code,
                message,
                retry_after: None,
            } => {
                assert_eq!(code.as_deref(), Some("overloaded_error"));
                assert_eq!(message, "Overloaded");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn openai_error_body_with_retry_after() {
        let body =
            r#"{"error":{"message":"Rate limit","type":"requests","code":"rate_limit_exceeded"}}"#;
        match error_for(429, &[("retry-after", "7")], body) {
            ModelError::Http {
                code, retry_after, ..
            } => {
                assert_eq!(code.as_deref(), Some("rate_limit_exceeded"));
                assert_eq!(retry_after, Some(Duration::from_secs(7)));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn retry_after_ms_wins() {
        let err = error_for(429, &[("retry-after", "7"), ("retry-after-ms", "1500")], "");
        assert!(
            matches!(err, ModelError::Http { retry_after: Some(wait), ref message, .. }
                if wait == Duration::from_millis(1500) && message == "Too Many Requests"),
            "{err:?}"
        );
    }

    #[test]
    fn auth_and_html_bodies() {
        let err = error_for(403, &[], r#"{"error":{"message":"nope"}}"#);
        assert_eq!(err.to_string(), "authentication failed (HTTP 403): nope");
        let err = error_for(502, &[], "<html>bad gateway</html>");
        assert_eq!(
            err.to_string(),
            "model request failed (HTTP 502): <html>bad gateway</html>"
        );
    }
}
