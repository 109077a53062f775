//! The provider clients. Messages, tool schemas and usage are [`crate::protocol`]'s; this module adds the
//! request, the stream events and the assembled reply.
//!
//! The agent talks to models only through these types; a client turns them into its wire format and turns
//! the streamed reply back into [`StreamEvent`]s and one assembled [`Response`].

pub(crate) mod anthropic;
mod http;
pub mod openai;
pub mod retry;
// The byte-level SSE decoder lives at the crate's top (the MCP client reads event streams too).
pub use crate::sse;
pub(crate) mod think;
mod types;
mod window;

use std::time::Duration;

use anthropic::AnthropicClient;
use openai::OpenAiClient;
use retry::RetryPolicy;
// The request, reply and error live in types.rs (the clients need them without this file); their paths stay here.
pub use types::{FinishReason, MaxTokensParam, ModelError, Request, Response, StreamEvent, Tuning};

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

    /// Sends `req` once and streams the reply; on error, events already delivered must not be acted upon.
    pub async fn stream(
        &self,
        req: &Request<'_>,
        on_event: &mut (dyn FnMut(&StreamEvent) + Send),
    ) -> Result<Response, ModelError> {
        match self {
            Client::OpenAi(client) => client.stream(req, on_event).await,
            Client::Anthropic(client) => client.stream(req, on_event).await,
        }
    }

    /// Like [`Client::stream`], sending the request again as `policy` allows.
    ///
    /// Before each wait `on_retry` gets the error, the wait and the number of the attempt that failed
    /// (from 1); the events streamed by that attempt belong to a discarded reply. Dropping the future (on
    /// Ctrl-C) closes the connection at once, also during a wait.
    pub async fn stream_with_retries(
        &self,
        req: &Request<'_>,
        on_event: &mut (dyn FnMut(&StreamEvent) + Send),
        policy: &RetryPolicy,
        on_retry: &mut (dyn FnMut(&ModelError, Duration, u32) + Send),
    ) -> Result<Response, ModelError> {
        let mut attempt = 1;
        loop {
            let err = match self.stream(req, on_event).await {
                Ok(response) => return Ok(response),
                Err(err) => err,
            };
            let Some(delay) = policy.delay_for(&err, attempt) else {
                return Err(err);
            };
            on_retry(&err, delay, attempt);
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
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
            let mut events = Vec::new();
            let response = client
                .stream(&request(&messages), &mut |event: &StreamEvent| {
                    events.push(event.clone())
                })
                .await
                .expect("stream ok");
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
            let mut on_event = |_: &StreamEvent| {};
            let mut on_retry = |_: &ModelError, _: Duration, _: u32| {};
            let policy = RetryPolicy::default();
            assert_send(&client.stream_with_retries(&req, &mut on_event, &policy, &mut on_retry));
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
            let response = client
                .stream_with_retries(
                    &request(&messages),
                    &mut |_: &StreamEvent| {},
                    &RetryPolicy::default(),
                    &mut |err: &ModelError, wait: Duration, attempt: u32| {
                        retries.push((err.to_string(), wait, attempt))
                    },
                )
                .await
                .expect("second attempt succeeds");
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
            let mut retried = false;
            let err = client(root)
                .stream_with_retries(
                    &request(&messages),
                    &mut |_: &StreamEvent| {},
                    &RetryPolicy::default(),
                    &mut |_: &ModelError, _: Duration, _: u32| retried = true,
                )
                .await
                .expect_err("401");
            assert!(!retried);
            assert_eq!(
                err.to_string(),
                "authentication failed (HTTP 401): invalid x-api-key <redacted>"
            );
        }
    }
}
