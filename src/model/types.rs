//! The request, the stream events, the assembled reply and the error every client shares, in a file of
//! their own so the clients need nothing of the module that chooses between them.

use std::time::Duration;

use crate::protocol::{Message, ThinkingBlock, ToolCall, ToolSchema, Usage};

/// Which body field carries the output token limit on an OpenAI-compatible endpoint: OpenAI's reasoning
/// models reject `max_tokens` and want `max_completion_tokens`, while many compatible servers know only
/// `max_tokens`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MaxTokensParam {
    #[default]
    MaxTokens,
    MaxCompletionTokens,
}

/// How one endpoint wants its requests adjusted (`[providers.<name>]` in the config): extra headers, extra
/// body fields, parameters it rejects, and the output token limit.
#[derive(Clone, Default, PartialEq)]
pub struct Tuning {
    pub headers: Vec<(String, String)>,
    /// Merged into the request body (objects merge key by key; anything else replaces).
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// Top-level body fields removed last, for models that reject a parameter we send.
    pub drop_params: Vec<String>,
    pub max_tokens_param: MaxTokensParam,
    /// The output token limit when the request sets none.
    pub max_tokens: Option<u32>,
    /// Tools the provider runs itself (Anthropic's `web_search_20250305`), added to every request that
    /// offers tools; one replaces a function tool of its name.
    pub server_tools: Vec<serde_json::Value>,
}

// Header values may hold credentials (a gateway's own key), so only their names are shown.
impl std::fmt::Debug for Tuning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("Tuning")
            .field("headers", &names)
            .field("extra_body", &self.extra_body)
            .field("drop_params", &self.drop_params)
            .field("max_tokens_param", &self.max_tokens_param)
            .field("max_tokens", &self.max_tokens)
            .field("server_tools", &self.server_tools)
            .finish()
    }
}

impl Tuning {
    /// Applies the body adjustments to a built request body; `rename_max_tokens` is false for wire formats
    /// whose token limit field is fixed (Anthropic's `max_tokens` is required by name).
    pub fn apply(&self, body: &mut serde_json::Value, rename_max_tokens: bool) {
        let Some(fields) = body.as_object_mut() else {
            return;
        };
        if rename_max_tokens && self.max_tokens_param == MaxTokensParam::MaxCompletionTokens {
            if let Some(limit) = fields.remove("max_tokens") {
                fields.insert("max_completion_tokens".to_string(), limit);
            }
        }
        for (key, value) in &self.extra_body {
            merge(
                fields.entry(key.clone()).or_insert(serde_json::Value::Null),
                value,
            );
        }
        for key in &self.drop_params {
            fields.remove(key);
        }
        if let Some(serde_json::Value::Array(tools)) = fields.get_mut("tools") {
            for server in &self.server_tools {
                let name = server.get("name");
                tools.retain(|tool| name.is_none() || tool.get("name") != name);
                tools.push(server.clone());
            }
        }
    }
}

/// Merges `extra` into `target`: objects key by key, anything else replaces.
fn merge(target: &mut serde_json::Value, extra: &serde_json::Value) {
    match (target, extra) {
        (serde_json::Value::Object(target), serde_json::Value::Object(extra)) => {
            for (key, value) in extra {
                merge(
                    target.entry(key.clone()).or_insert(serde_json::Value::Null),
                    value,
                );
            }
        }
        (target, extra) => *target = extra.clone(),
    }
}

/// The messages in the order a wire format can send them: an image that follows a tool result moves past
/// the rest of that run of results, because both APIs want a tool call's results straight after the call
/// (Chat Completions allows only `tool` messages there; Messages wants `tool_result` blocks first in their
/// user message).
pub fn images_after_tool_results(messages: &[Message]) -> Vec<&Message> {
    let mut out = Vec::with_capacity(messages.len());
    let mut held = Vec::new();
    let mut in_results = false;
    for message in messages {
        match message {
            Message::Image { .. } if in_results => held.push(message),
            Message::Image { .. } => out.push(message),
            Message::Tool { .. } => {
                in_results = true;
                out.push(message);
            }
            _ => {
                in_results = false;
                out.append(&mut held);
                out.push(message);
            }
        }
    }
    out.append(&mut held);
    out
}

/// The line that tells the model which image follows.
pub fn image_caption(image: &crate::protocol::Image) -> String {
    format!(
        "[image: {} ({}, {} bytes)]",
        image.source, image.media_type, image.bytes
    )
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
    /// The provider searched the web itself (Anthropic's server tool) and found `results` for `query`.
    WebResults {
        query: String,
        results: Vec<crate::protocol::WebResult>,
    },
}

/// One item of a `ReplyStream`.
#[derive(Debug)]
pub enum ReplyItem {
    /// A piece of the reply as it arrives.
    Event(StreamEvent),
    /// The attempt numbered `attempt` (from 1) failed with `error`; the stream waits `wait` and sends the
    /// request again. The events that attempt streamed belong to a discarded reply.
    Retrying {
        error: ModelError,
        wait: Duration,
        attempt: u32,
    },
    /// The assembled reply; the stream's last item.
    Done(Response),
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

impl FinishReason {
    /// The provider withheld or ended the answer for content reasons: OpenAI's `content_filter`, Anthropic's
    /// `refusal`.
    pub fn is_refusal(&self) -> bool {
        matches!(self, FinishReason::Other(reason) if reason == "content_filter" || reason == "refusal")
    }
}

/// The assembled reply to one request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Response {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<FinishReason>,
    pub usage: Option<Usage>,
    /// Reasoning blocks to keep in the conversation (Anthropic only; store them in [`Message::Assistant`]).
    pub thinking: Vec<ThinkingBlock>,
    /// The searches the provider ran itself (Anthropic's server tool), each query with what it found.
    pub web_searches: Vec<(String, Vec<crate::protocol::WebResult>)>,
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
    Connect {
        url: String,
        message: String,
        /// Nothing listens there: almost always a wrong base URL or a server that is not running, so the
        /// request is not retried.
        refused: bool,
    },
    /// No byte arrived for the idle timeout.
    #[error("no data from the model for {}s (idle timeout)", .after.as_secs_f64())]
    Timeout { after: Duration },
    /// The key was rejected (401/403).
    #[error("authentication failed (HTTP {status}): {message}")]
    Auth { status: u16, message: String },
    /// Any other non-success status; `message` is the provider's own error message when it sent one, `code`
    /// its error code or type, `retry_after` the wait its `Retry-After` header asked for.
    #[error("model request failed (HTTP {status}): {message}")]
    Http {
        status: u16,
        code: Option<String>,
        message: String,
        retry_after: Option<Duration>,
    },
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Image;
    use serde_json::json;

    fn image(source: &str) -> Message {
        Message::Image {
            image: Image {
                media_type: "image/png".into(),
                data: "iVBO".into(),
                source: source.into(),
                bytes: 3,
                blob: String::new(),
            },
        }
    }

    fn tool(id: &str) -> Message {
        Message::Tool {
            tool_call_id: id.into(),
            content: "r".into(),
        }
    }

    #[test]
    fn an_image_a_tool_returned_follows_the_whole_run_of_results() {
        let user = Message::User {
            content: "next".into(),
        };
        let messages = [
            image("given"),
            tool("a"),
            image("from a"),
            tool("b"),
            user.clone(),
            image("after text"),
        ];
        let order: Vec<&Message> = images_after_tool_results(&messages);
        let expected = [
            &messages[0],
            &messages[1],
            &messages[3],
            &messages[2],
            &messages[4],
            &messages[5],
        ];
        assert_eq!(order, expected);
        let tail = [tool("a"), image("last")];
        assert_eq!(images_after_tool_results(&tail), [&tail[0], &tail[1]]);
    }

    #[test]
    fn a_server_tool_joins_requests_with_tools_and_replaces_its_namesake() {
        let tuning = Tuning {
            server_tools: vec![json!({"type": "web_search_20250305", "name": "web_search"})],
            ..Tuning::default()
        };
        let mut body = json!({"tools": [{"name": "read_file"}, {"name": "web_search"}]});
        tuning.apply(&mut body, false);
        assert_eq!(
            body["tools"],
            json!([{"name": "read_file"}, {"type": "web_search_20250305", "name": "web_search"}])
        );
        let mut summary = json!({"messages": []});
        tuning.apply(&mut summary, false);
        assert!(
            summary.get("tools").is_none(),
            "a request without tools gets none"
        );
    }
}
