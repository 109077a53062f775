//! Provider-neutral messages, tool schemas and stream events, plus the provider clients.
//!
//! The agent talks to models only through these types; a client turns them into its wire format and turns
//! the streamed reply back into [`StreamEvent`]s and one assembled [`Response`].

pub mod openai;
pub mod sse;

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One tool call requested by the model, with its arguments as the raw JSON text the model produced.
///
/// The text is parsed by the agent only once the call is complete, so malformed arguments can be reported
/// back to the model instead of aborting the turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One message of the conversation, provider-neutral.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

/// What the model is told about one tool: its name, what it does and a JSON schema of its arguments.
#[derive(Clone, Debug)]
pub struct ToolSchema {
    pub name: &'static str,
    pub description: &'static str,
    pub parameters: serde_json::Value,
}

/// Token usage reported by the provider for one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_tokens += other.cached_tokens;
    }
}

/// One request to a model.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    pub model: &'a str,
    pub messages: &'a [Message],
    pub tools: &'a [ToolSchema],
    pub max_tokens: Option<u32>,
}

/// Something the model produced while streaming, in the order it arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamEvent {
    /// A piece of the answer text.
    TextDelta(String),
    /// A piece of reasoning text (`reasoning_content` and the like), not part of the answer.
    ReasoningDelta(String),
    /// The model started a tool call (its name is known; arguments follow).
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    /// Usage figures for the request.
    Usage(Usage),
}

/// Why the model stopped producing output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// A natural end of the answer (`stop`).
    Stop,
    /// The model wants tool calls run (`tool_calls`).
    ToolCalls,
    /// The output token limit was hit (`length`): the last tool call may be cut off.
    Length,
    /// Anything else the provider reported.
    Other(String),
}

/// The assembled reply to one request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Response {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<FinishReason>,
    pub usage: Option<Usage>,
}

/// The error returned by a model client's `stream()`.
///
/// Messages never contain the API key. [`ModelError::is_retryable`] tells the caller whether sending the same
/// request again may succeed; a failed stream's partial output must be discarded, never acted upon.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The HTTP client could not be set up, or the request could not be built (e.g. an invalid base URL).
    #[error("cannot send to the model: {0}")]
    Client(String),
    /// The server could not be reached (refused, DNS failure, TLS failure, connect timeout).
    #[error("could not reach {url}: {message}")]
    Connect { url: String, message: String },
    /// No byte arrived for the idle timeout.
    #[error("no data from the model for {}s (idle timeout)", .after.as_secs_f64())]
    Timeout { after: Duration },
    /// The key was rejected (401/403).
    #[error("authentication failed (HTTP {status}): {message}")]
    Auth { status: u16, message: String },
    /// Any other non-success status; `message` is the provider's own error message when it sent one.
    #[error("model request failed (HTTP {status}): {message}")]
    Http { status: u16, message: String },
    /// The provider reported an error inside a successful (200) response, typically mid-stream.
    #[error("the model provider reported an error: {message}")]
    Provider {
        code: Option<String>,
        message: String,
    },
    /// The response ended before the model finished (no `[DONE]`, no finish reason, or the connection dropped).
    #[error("the model's reply was cut off: {0}")]
    Truncated(String),
    /// The response could not be understood (malformed JSON, unexpected shape).
    #[error("malformed reply from the model: {0}")]
    Stream(String),
}

impl ModelError {
    /// Whether the same request may succeed if sent again.
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Connect { .. } | ModelError::Timeout { .. } | ModelError::Truncated(_) => {
                true
            }
            ModelError::Http { status, .. } => *status == 429 || *status >= 500,
            ModelError::Provider { code, .. } => code.as_deref().is_some_and(|code| {
                // Providers put either an HTTP status (OpenRouter) or an OpenAI error code here.
                matches!(
                    code,
                    "server_error" | "rate_limit_exceeded" | "overloaded_error"
                ) || code
                    .parse::<u16>()
                    .is_ok_and(|status| status == 429 || status >= 500)
            }),
            ModelError::Client(_) | ModelError::Auth { .. } | ModelError::Stream(_) => false,
        }
    }
}
