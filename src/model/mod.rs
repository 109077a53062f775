//! The provider clients. Messages, tool schemas and usage are [`crate::protocol`]'s; this module adds the
//! request, the stream events and the assembled reply.
//!
//! The agent talks to models only through these types; a client turns them into its wire format and turns
//! the streamed reply back into [`StreamEvent`]s and one assembled [`Response`].
//!
//! The reply is a [`ReplyStream`] the caller pulls from (`while let Some(item) = stream.next().await`):
//! the caller owns the loop, so it writes to its own sink with no callback and no lock, and races each pull
//! against its cancel; dropping the stream drops the connection, and the provider stops generating.

pub(crate) mod anthropic;
mod http;
pub mod openai;
pub mod retry;
pub(crate) mod think;
mod types;
mod window;

use std::time::Duration;

use anthropic::AnthropicClient;
use http::Reply;
use openai::OpenAiClient;
use retry::RetryPolicy;
// The request, reply and error live in types.rs (the clients need them without this file); their paths stay here.
pub use types::{
    FinishReason, MaxTokensParam, ModelError, ReplyItem, Request, Response, StreamEvent, Tuning,
};

impl ModelError {
    /// Whether the same request may succeed if sent again; see [`retry::classify`].
    pub fn is_retryable(&self) -> bool {
        retry::classify(self).is_retryable()
    }

    /// Whether the conversation is too long for the model: compact it and try again, once.
    pub fn is_context_overflow(&self) -> bool {
        retry::is_context_overflow(self)
    }
}

/// The wire format a provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// OpenAI Chat Completions, also spoken by every OpenAI-compatible server.
    OpenAiChat,
    /// Anthropic Messages.
    AnthropicMessages,
}

/// A client for any supported provider, so the agent need not know which one it talks to.
#[derive(Debug)]
pub enum Client {
    OpenAi(OpenAiClient),
    Anthropic(AnthropicClient),
}

impl Client {
    /// See [`OpenAiClient::new`] and [`AnthropicClient::new`] for what `base_url` looks like for each.
    pub fn new(
        wire: Wire,
        base_url: String,
        api_key: Option<String>,
        connect_timeout: Duration,
        idle_timeout: Duration,
    ) -> Result<Self, ModelError> {
        Client::new_tuned(
            wire,
            base_url,
            api_key,
            connect_timeout,
            idle_timeout,
            Tuning::default(),
        )
    }

    /// [`Client::new`] with the endpoint's [`Tuning`] applied to every request.
    pub fn new_tuned(
        wire: Wire,
        base_url: String,
        api_key: Option<String>,
        connect_timeout: Duration,
        idle_timeout: Duration,
        tuning: Tuning,
    ) -> Result<Self, ModelError> {
        Ok(match wire {
            Wire::OpenAiChat => Client::OpenAi(
                OpenAiClient::new(base_url, api_key, connect_timeout, idle_timeout)?
                    .with_tuning(tuning),
            ),
            Wire::AnthropicMessages => Client::Anthropic(
                AnthropicClient::new(base_url, api_key, connect_timeout, idle_timeout)?
                    .with_tuning(tuning),
            ),
        })
    }

    /// The URL requests are POSTed to.
    pub fn endpoint(&self) -> String {
        match self {
            Client::OpenAi(client) => client.endpoint(),
            Client::Anthropic(client) => client.endpoint(),
        }
    }

    /// The context window the server reports for `model` (llama.cpp, vLLM, OpenRouter, LM Studio; Ollama
    /// when `ollama`), within about two seconds, or `None` on any failure. Anthropic's API reports none.
    pub async fn context_window(&self, model: &str, ollama: bool) -> Option<u64> {
        match self {
            Client::OpenAi(client) => client.context_window(model, ollama).await,
            Client::Anthropic(_) => None,
        }
    }

    /// [`Client::context_window()`] as a task that needs no borrow of the client (it shares its connections),
    /// to run beside the first request; `None` for providers that report no window.
    pub fn context_window_task(
        &self,
        model: &str,
        ollama: bool,
    ) -> Option<impl std::future::Future<Output = Option<u64>> + Send + 'static> {
        match self {
            Client::OpenAi(client) => Some(client.context_window_task(model, ollama)),
            Client::Anthropic(_) => None,
        }
    }

    /// The reply to `req` as a stream the caller pulls from, the request sent again as `policy` allows.
    /// Nothing is sent before the first pull.
    pub fn send<'a>(&'a self, req: &'a Request<'a>, policy: &'a RetryPolicy) -> ReplyStream<'a> {
        ReplyStream::new(self, req, policy)
    }

    /// Sends `req` once; the reply's events are then pulled from the [`Reply`].
    async fn open(&self, req: &Request<'_>) -> Result<Reply<'_>, ModelError> {
        match self {
            Client::OpenAi(client) => client.open(req).await,
            Client::Anthropic(client) => client.open(req).await,
        }
    }
}

/// Where a [`ReplyStream`] is between two pulls.
enum State<'a> {
    /// The request is to be sent (again).
    Send,
    /// A failed attempt's wait before the next one.
    Wait(Duration),
    /// An attempt's reply is being read (boxed: it holds the response, the decoder and the parser).
    Read(Box<Reply<'a>>),
    /// The stream yielded its reply or its final error.
    Over,
}

/// The reply to one request, pulled item by item ([`ReplyStream::next()`]): events, retries, then the
/// assembled reply or the error that ended it. Made by [`Client::send()`]; nothing is sent before the first
/// pull. Dropping it (on a cancel) closes the connection at once, also during a wait.
pub struct ReplyStream<'a> {
    client: &'a Client,
    request: &'a Request<'a>,
    policy: &'a RetryPolicy,
    /// The number of the attempt being made, from 1.
    attempt: u32,
    state: State<'a>,
}

impl<'a> ReplyStream<'a> {
    fn new(client: &'a Client, request: &'a Request<'a>, policy: &'a RetryPolicy) -> Self {
        ReplyStream {
            client,
            request,
            policy,
            attempt: 1,
            state: State::Send,
        }
    }

    /// The next item, or `None` after the reply or the error that ended the stream.
    ///
    /// Not cancel-safe: a pull dropped half-way may lose an event, so a cancelled pull is the end of the
    /// stream (drop it).
    pub async fn next(&mut self) -> Option<Result<ReplyItem, ModelError>> {
        loop {
            match &mut self.state {
                State::Over => return None,
                State::Send => match self.client.open(self.request).await {
                    Ok(reply) => self.state = State::Read(Box::new(reply)),
                    Err(err) => return Some(self.failed(err)),
                },
                State::Wait(wait) => {
                    tokio::time::sleep(*wait).await;
                    self.state = State::Send;
                }
                State::Read(reply) => match reply.next().await {
                    Ok(Some(event)) => return Some(Ok(ReplyItem::Event(event))),
                    Ok(None) => {
                        let State::Read(reply) = std::mem::replace(&mut self.state, State::Over)
                        else {
                            return None;
                        };
                        return Some(match reply.finish() {
                            Ok(response) => Ok(ReplyItem::Done(response)),
                            Err(err) => self.failed(err),
                        });
                    }
                    Err(err) => return Some(self.failed(err)),
                },
            }
        }
    }

    /// Pulls the whole stream, ignoring its events and retries: the reply or the error that ended it.
    pub async fn response(mut self) -> Result<Response, ModelError> {
        while let Some(item) = self.next().await {
            if let ReplyItem::Done(response) = item? {
                return Ok(response);
            }
        }
        Err(ModelError::Stream(
            "the reply stream ended without a reply".into(),
        ))
    }

    /// The item for a failed attempt: a retry when the policy allows one, else the error, which ends the
    /// stream.
    fn failed(&mut self, error: ModelError) -> Result<ReplyItem, ModelError> {
        let Some(wait) = self.policy.delay_for(&error, self.attempt) else {
            self.state = State::Over;
            return Err(error);
        };
        self.state = State::Wait(wait);
        let attempt = self.attempt;
        self.attempt += 1;
        Ok(ReplyItem::Retrying {
            error,
            wait,
            attempt,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tuning_renames_merges_and_drops() {
        let tuning = Tuning {
            extra_body: json!({"top_k": 20, "stream_options": {"extra": 1}})
                .as_object()
                .cloned()
                .expect("object"),
            drop_params: vec!["temperature".into()],
            max_tokens_param: MaxTokensParam::MaxCompletionTokens,
            ..Tuning::default()
        };
        let mut body = json!({"model": "m", "max_tokens": 10, "temperature": 0.2,
                              "stream_options": {"include_usage": true}});
        tuning.apply(&mut body, true);
        assert_eq!(
            body,
            json!({"model": "m", "max_completion_tokens": 10, "top_k": 20,
                   "stream_options": {"include_usage": true, "extra": 1}})
        );
        let mut anthropic = json!({"max_tokens": 10});
        tuning.apply(&mut anthropic, false);
        assert_eq!(anthropic["max_tokens"], 10);
    }

    /// The Anthropic client over HTTP, driven through [`Client`] as callers drive it.
    mod anthropic_http {
        use super::super::anthropic::tests::RAW_STREAM;
        use super::*;
        use crate::model::http::test_server::{http_response, http_response_with, serve_all};
        use crate::model::retry::RetryPolicy;
        use crate::protocol::Message;
        use std::time::Duration;

        const KEY: &str = "sk-ant-test-secret";

        fn client(url: String) -> Client {
            Client::new(
                Wire::AnthropicMessages,
                url,
                Some(KEY.into()),
                Duration::from_secs(2),
                Duration::from_secs(5),
            )
            .expect("client")
        }

        fn request(messages: &[Message]) -> Request<'_> {
            Request {
                model: "claude-sonnet-4-5",
                messages,
                tools: &[],
                max_tokens: None,
            }
        }

        fn sse_ok() -> String {
            http_response("200 OK", "text/event-stream", RAW_STREAM)
        }

        #[tokio::test]
        async fn streams_and_sends_headers() {
            let (root, server) = serve_all(vec![sse_ok()], Duration::ZERO);
            let client = client(root);
            let messages = [Message::User {
                content: "hi".into(),
            }];
            let request = request(&messages);
            let policy = RetryPolicy::default();
            let mut stream = client.send(&request, &policy);
            let mut events = Vec::new();
            let mut response = None;
            while let Some(item) = stream.next().await {
                match item.expect("stream ok") {
                    ReplyItem::Event(event) => events.push(event),
                    ReplyItem::Done(reply) => response = Some(reply),
                    ReplyItem::Retrying { error, .. } => panic!("retried: {error}"),
                }
            }
            let response = response.expect("a reply");
            assert_eq!(response.tool_calls.len(), 2);
            assert_eq!(events.len(), 6);
            let request = server.join().expect("server").remove(0);
            assert!(request.starts_with("POST /v1/messages "), "{request}");
            assert!(request.contains(&format!("x-api-key: {KEY}")));
            assert!(request.contains("anthropic-version: 2023-06-01"));
            assert!(!request.contains("authorization:"));
            assert!(!format!("{client:?}").contains(KEY));
        }

        #[test]
        fn retrying_future_is_send() {
            fn assert_send<T: Send>(_: &T) {}
            let client = client("http://127.0.0.1:9".into());
            let req = request(&[]);
            let policy = RetryPolicy::default();
            let mut stream = client.send(&req, &policy);
            assert_send(&stream.next());
            assert_send(&stream);
        }

        #[test]
        fn endpoint_with_and_without_version() {
            let endpoint = |base: &str| client(base.into()).endpoint();
            assert_eq!(
                endpoint("https://api.anthropic.com"),
                "https://api.anthropic.com/v1/messages"
            );
            assert_eq!(
                endpoint("https://proxy.example/v1/"),
                "https://proxy.example/v1/messages"
            );
        }

        #[tokio::test]
        async fn rate_limited_then_success() {
            let limited = http_response_with(
                "429 Too Many Requests",
                "application/json",
                &["retry-after: 1"],
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
            );
            let (root, server) = serve_all(vec![limited, sse_ok()], Duration::ZERO);
            let client = client(root);
            let messages = [Message::User {
                content: "hi".into(),
            }];
            let mut retries = Vec::new();
            let started = std::time::Instant::now();
            let request = request(&messages);
            let policy = RetryPolicy::default();
            let mut stream = client.send(&request, &policy);
            let mut response = None;
            while let Some(item) = stream.next().await {
                match item.expect("second attempt succeeds") {
                    ReplyItem::Retrying {
                        error,
                        wait,
                        attempt,
                    } => retries.push((error.to_string(), wait, attempt)),
                    ReplyItem::Done(reply) => response = Some(reply),
                    ReplyItem::Event(_) => {}
                }
            }
            let response = response.expect("a reply");
            assert!(started.elapsed() >= Duration::from_secs(1));
            assert_eq!(response.tool_calls.len(), 2);
            assert_eq!(
                retries,
                vec![(
                    "model request failed (HTTP 429): slow down".to_string(),
                    Duration::from_secs(1),
                    1
                )]
            );
            assert_eq!(server.join().expect("server").len(), 2);
        }

        /// The pulled stream: a retry item for the failed attempt, then the second attempt's deltas in order,
        /// then the assembled reply, then nothing.
        #[tokio::test]
        async fn pulled_stream_yields_retry_deltas_then_reply() {
            let overloaded = http_response(
                "529 Overloaded",
                "application/json",
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            );
            let (root, server) = serve_all(vec![overloaded, sse_ok()], Duration::ZERO);
            let client = client(root);
            let messages = [Message::User {
                content: "hi".into(),
            }];
            let request = request(&messages);
            let policy = RetryPolicy {
                base_delay: Duration::from_millis(10),
                max_delay: Duration::from_millis(20),
                ..RetryPolicy::default()
            };
            let mut stream = client.send(&request, &policy);
            let mut items = Vec::new();
            while let Some(item) = stream.next().await {
                items.push(item.expect("no final error"));
            }
            assert!(stream.next().await.is_none(), "the stream stays over");
            let Some(ReplyItem::Retrying {
                error, attempt: 1, ..
            }) = items.first()
            else {
                panic!("a retry first: {items:?}");
            };
            assert_eq!(
                error.to_string(),
                "model request failed (HTTP 529): Overloaded"
            );
            let deltas: Vec<&str> = items
                .iter()
                .filter_map(|item| match item {
                    ReplyItem::Event(StreamEvent::TextDelta(text)) => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(deltas, ["日本語で", " 🦀 ok"]);
            let Some(ReplyItem::Done(response)) = items.last() else {
                panic!("the reply last: {items:?}");
            };
            assert_eq!(response.text, "日本語で 🦀 ok");
            assert_eq!(response.tool_calls.len(), 2);
            assert_eq!(
                items
                    .iter()
                    .filter(|item| matches!(item, ReplyItem::Event(_)))
                    .count(),
                6
            );
            assert_eq!(server.join().expect("server").len(), 2);
        }

        /// Dropping the stream half-way through a reply (a cancel) closes the connection: the server sees the
        /// end of its socket at once, while the client itself lives on.
        #[tokio::test]
        async fn dropping_the_stream_mid_reply_closes_the_connection() {
            use crate::model::http::test_server::read_request;
            use std::io::{Read, Write};

            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let root = format!("http://{}", listener.local_addr().expect("addr"));
            let first_delta = RAW_STREAM
                .find(" 🦀 ok")
                .and_then(|at| RAW_STREAM[at..].find("\n\n").map(|end| at + end + 2))
                .expect("the second delta in the canned stream");
            let server = std::thread::spawn(move || {
                let (mut socket, _) = listener.accept().expect("accept");
                read_request(&mut socket);
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n";
                socket.write_all(head.as_bytes()).expect("head");
                socket
                    .write_all(&RAW_STREAM.as_bytes()[..first_delta])
                    .expect("first events");
                // The rest of the reply never comes; only the client's close ends this read early.
                socket
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .expect("timeout");
                let started = std::time::Instant::now();
                let mut buf = [0; 64];
                let closed = match socket.read(&mut buf) {
                    Ok(0) => true,
                    Ok(_) => false,
                    Err(err) => err.kind() == std::io::ErrorKind::ConnectionReset,
                };
                (closed, started.elapsed())
            });
            let client = client(root);
            let messages = [Message::User {
                content: "hi".into(),
            }];
            let request = request(&messages);
            let policy = RetryPolicy::default();
            let mut stream = client.send(&request, &policy);
            let mut text = String::new();
            while let Some(item) = stream.next().await {
                if let ReplyItem::Event(StreamEvent::TextDelta(delta)) = item.expect("no error") {
                    text.push_str(&delta);
                    if text.ends_with("🦀 ok") {
                        break;
                    }
                }
            }
            assert_eq!(text, "日本語で 🦀 ok");
            drop(stream);
            // Joined off the runtime: the connection's task must run for the socket to close.
            let (closed, waited) = tokio::task::spawn_blocking(move || server.join())
                .await
                .expect("join")
                .expect("server");
            assert!(closed, "the server saw no close");
            assert!(
                waited < Duration::from_secs(5),
                "closed only after {waited:?}"
            );
            drop(client);
        }

        #[tokio::test]
        async fn auth_error_not_retried_and_key_redacted() {
            let body = format!(
                r#"{{"type":"error","error":{{"type":"authentication_error","message":"invalid x-api-key {KEY}"}}}}"#
            );
            let (root, _server) = serve_all(
                vec![http_response("401 Unauthorized", "application/json", &body)],
                Duration::ZERO,
            );
            let messages = [Message::User {
                content: "hi".into(),
            }];
            let client = client(root);
            let request = request(&messages);
            let policy = RetryPolicy::default();
            let mut stream = client.send(&request, &policy);
            let mut items = Vec::new();
            while let Some(item) = stream.next().await {
                items.push(item);
            }
            let [Err(err)] = items.as_slice() else {
                panic!("one error and no retry: {items:?}");
            };
            assert_eq!(
                err.to_string(),
                "authentication failed (HTTP 401): invalid x-api-key <redacted>"
            );
        }
    }
}
