//! The Anthropic Messages API client.
//!
//! Cut like the OpenAI client so the tricky parts are testable without a network: [`request_body`] builds
//! the JSON sent, [`EventParser`] turns the SSE events into [`StreamEvent`]s and one [`Response`], and
//! [`AnthropicClient`] only adds the endpoint and headers to the shared transport.
//!
//! The Messages API differs from Chat Completions in ways that matter here: the system prompt is a separate
//! field (marked cacheable, so the stable prefix is billed at the cache rate), roles must alternate (tool
//! results go back as one user message), thinking blocks must be returned verbatim with their signature,
//! and every content block has an explicit end, which is what tells a complete tool call from a cut one.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::http::{preview, provider_error, Endpoint, KeyHeader, Reply, StreamParser};
use super::types::{
    image_caption, images_after_tool_results, FinishReason, ModelError, Request, Response,
    StreamEvent, Tuning,
};
use crate::protocol::{Message, ThinkingBlock, ToolCall, Usage};
use crate::sse::SseEvent;

/// The API version this client speaks.
const API_VERSION: &str = "2023-06-01";
/// The API requires `max_tokens`; this fits every current model's output limit.
const DEFAULT_MAX_TOKENS: u32 = 8192;

/// Builds the JSON body of a streamed Messages request.
pub fn request_body(req: &Request) -> Value {
    let mut body = json!({
        "model": req.model,
        "max_tokens": req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        "messages": messages_json(req.messages),
        "stream": true,
    });
    let system: Vec<&str> = req
        .messages
        .iter()
        .filter_map(|message| match message {
            Message::System { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    if !system.is_empty() {
        // The cache breakpoint covers everything before it: the tools and the system prompt.
        body["system"] = json!([{
            "type": "text",
            "text": system.join("\n\n"),
            "cache_control": {"type": "ephemeral"},
        }]);
    }
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
        body["tools"] = Value::Array(tools);
    }
    body
}

/// The conversation as alternating user and assistant messages: consecutive messages of one role (tool
/// results, or tool results followed by a user message) are merged into one.
fn messages_json(messages: &[Message]) -> Vec<Value> {
    let mut merged: Vec<(&str, Vec<Value>)> = Vec::new();
    for message in images_after_tool_results(messages) {
        let (role, blocks) = match message {
            Message::System { .. } => continue,
            Message::User { content } => ("user", text_block(content).into_iter().collect()),
            Message::Assistant {
                content,
                tool_calls,
                thinking,
            } => ("assistant", assistant_blocks(content, tool_calls, thinking)),
            Message::Tool {
                tool_call_id,
                content,
            } => (
                "user",
                vec![
                    json!({"type": "tool_result", "tool_use_id": tool_call_id, "content": content}),
                ],
            ),
            Message::Image { image } => (
                "user",
                vec![
                    json!({"type": "text", "text": image_caption(image)}),
                    json!({"type": "image", "source": {
                        "type": "base64", "media_type": image.media_type, "data": image.data,
                    }}),
                ],
            ),
        };
        match merged.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => merged.push((role, blocks)),
        }
    }
    merged
        .into_iter()
        // The API rejects a message without content, e.g. an assistant turn that produced nothing.
        .filter(|(_, blocks)| !blocks.is_empty())
        .map(|(role, blocks)| json!({"role": role, "content": blocks}))
        .collect()
}

/// The API rejects empty text blocks.
fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

/// Thinking first: with extended thinking on, the API requires an assistant turn to start with it.
fn assistant_blocks(content: &str, calls: &[ToolCall], thinking: &[ThinkingBlock]) -> Vec<Value> {
    let thinking = thinking.iter().map(|block| match block {
        ThinkingBlock::Thinking {
            thinking,
            signature,
        } => json!({"type": "thinking", "thinking": thinking, "signature": signature}),
        ThinkingBlock::RedactedThinking { data } => {
            json!({"type": "redacted_thinking", "data": data})
        }
    });
    let calls = calls.iter().map(|call| {
        json!({"type": "tool_use", "id": call.id, "name": call.name, "input": tool_input(&call.arguments)})
    });
    thinking.chain(text_block(content)).chain(calls).collect()
}

/// The stored arguments as the JSON object the API wants. Arguments that are not an object were already
/// reported to the model as a failed call; `{}` keeps the conversation valid.
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(object)) => Value::Object(object),
        _ => Value::Object(Map::new()),
    }
}

/// One event of a Messages stream; the `type` inside the data is authoritative, the SSE event name is not.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    MessageStart {
        message: WireMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: WireBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: WireDelta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: MessageDelta,
        usage: Option<WireUsage>,
    },
    MessageStop,
    Error {
        error: Value,
    },
    /// `ping` and event types added after this was written.
    #[serde(other)]
    Ignored,
}

#[derive(Deserialize)]
struct WireMessage {
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Option<Value>,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
    /// A call of a tool the provider runs itself (`web_search`); its input streams like a tool call's.
    ServerToolUse {
        #[serde(default)]
        name: String,
        input: Option<Value>,
    },
    /// What the provider's web search found: `web_search_result` items, or an error object.
    WebSearchToolResult {
        #[serde(default)]
        content: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageDelta {
    stop_reason: Option<String>,
}

/// Anthropic counts cache reads and writes apart from `input_tokens`; [`Usage::input_tokens`] is the whole
/// prompt, as with OpenAI.
#[derive(Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

/// A content block being assembled.
#[derive(Debug)]
struct Block {
    /// The `index` the server gave it.
    index: usize,
    kind: BlockKind,
    /// `content_block_stop` was seen.
    stopped: bool,
}

#[derive(Debug)]
enum BlockKind {
    /// Text goes straight into the reply's text.
    Text,
    Tool {
        /// Position among the reply's tool calls.
        ordinal: usize,
        id: String,
        name: String,
        json: String,
        /// The `input` of `content_block_start`, used when no `input_json_delta` follows.
        initial: Option<Value>,
    },
    Thinking(ThinkingBlock),
    /// A server tool's call: the provider runs it; kept for the query its result is shown with.
    ServerTool {
        name: String,
        json: String,
        initial: Option<Value>,
    },
    Other,
}

/// Assembles a Messages stream: feed it each SSE event's `data` with [`EventParser::push`], forward the
/// events it returns, then call [`EventParser::finish`].
#[derive(Debug, Default)]
pub struct EventParser {
    text: String,
    blocks: Vec<Block>,
    tool_count: usize,
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
    done: bool,
    web_searches: Vec<(String, Vec<crate::protocol::WebResult>)>,
}

impl EventParser {
    pub fn new() -> Self {
        EventParser::default()
    }

    /// Takes the `data` of one SSE event and returns the events to emit, in order.
    pub fn push(&mut self, data: &str) -> Result<Vec<StreamEvent>, ModelError> {
        let data = data.trim();
        if self.done || data.is_empty() {
            return Ok(Vec::new());
        }
        let event: WireEvent = serde_json::from_str(data).map_err(|err| {
            ModelError::Stream(format!(
                "an event is not valid JSON ({err}): {}",
                preview(data)
            ))
        })?;
        self.apply(event)
    }

    /// Returns the assembled reply.
    ///
    /// A stream without `message_stop` and without a stop reason was cut off; so was one holding a tool
    /// call whose block never ended, whatever else arrived: such a call must never be run.
    pub fn finish(self) -> Result<Response, ModelError> {
        if let Some(name) = self.blocks.iter().find_map(unfinished_tool) {
            return Err(ModelError::Truncated(format!(
                "the stream ended inside the arguments of tool call {name:?}"
            )));
        }
        if !self.done && self.finish_reason.is_none() {
            return Err(ModelError::Truncated(
                "the stream ended without a stop reason or message_stop".to_string(),
            ));
        }
        let mut tool_calls = Vec::new();
        let mut thinking = Vec::new();
        for block in self.blocks {
            match block.kind {
                BlockKind::Tool {
                    ordinal,
                    id,
                    name,
                    json,
                    initial,
                } => tool_calls.push((ordinal, tool_call(id, name, json, initial))),
                BlockKind::Thinking(block) => thinking.push(block),
                BlockKind::Text | BlockKind::ServerTool { .. } | BlockKind::Other => {}
            }
        }
        tool_calls.sort_by_key(|(ordinal, _)| *ordinal);
        Ok(Response {
            text: self.text,
            tool_calls: tool_calls.into_iter().map(|(_, call)| call).collect(),
            finish_reason: self.finish_reason,
            usage: self.usage,
            thinking,
            web_searches: self.web_searches,
        })
    }

    fn apply(&mut self, event: WireEvent) -> Result<Vec<StreamEvent>, ModelError> {
        let mut events = Vec::new();
        match event {
            WireEvent::MessageStart { message } => self.add_usage(message.usage, &mut events),
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => self.start_block(index, content_block, &mut events),
            WireEvent::ContentBlockDelta { index, delta } => {
                self.apply_delta(index, delta, &mut events)?
            }
            WireEvent::ContentBlockStop { index } => {
                if let Some(slot) = self.slot(index) {
                    self.blocks[slot].stopped = true;
                }
            }
            WireEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    self.finish_reason = Some(finish_reason(&reason));
                }
                self.add_usage(usage, &mut events);
            }
            WireEvent::MessageStop => self.done = true,
            WireEvent::Error { error } => return Err(provider_error(&error)),
            WireEvent::Ignored => {}
        }
        Ok(events)
    }

    fn start_block(&mut self, index: usize, block: WireBlock, events: &mut Vec<StreamEvent>) {
        let kind = match block {
            WireBlock::Text { text } => {
                self.add_text(text, events);
                BlockKind::Text
            }
            WireBlock::ToolUse { id, name, input } => {
                let ordinal = self.tool_count;
                self.tool_count += 1;
                events.push(StreamEvent::ToolCallStart {
                    index: ordinal,
                    id: id.clone(),
                    name: name.clone(),
                });
                BlockKind::Tool {
                    ordinal,
                    id,
                    name,
                    json: String::new(),
                    initial: input,
                }
            }
            WireBlock::Thinking {
                thinking,
                signature,
            } => {
                if !thinking.is_empty() {
                    events.push(StreamEvent::ReasoningDelta(thinking.clone()));
                }
                BlockKind::Thinking(ThinkingBlock::Thinking {
                    thinking,
                    signature,
                })
            }
            WireBlock::RedactedThinking { data } => {
                BlockKind::Thinking(ThinkingBlock::RedactedThinking { data })
            }
            WireBlock::ServerToolUse { name, input } => BlockKind::ServerTool {
                name,
                json: String::new(),
                initial: input,
            },
            WireBlock::WebSearchToolResult { content } => {
                let (query, results) = (self.last_search_query(), web_results(&content));
                self.web_searches.push((query.clone(), results.clone()));
                events.push(StreamEvent::WebResults { query, results });
                BlockKind::Other
            }
            WireBlock::Other => BlockKind::Other,
        };
        self.blocks.push(Block {
            index,
            kind,
            stopped: false,
        });
    }

    fn apply_delta(
        &mut self,
        index: usize,
        delta: WireDelta,
        events: &mut Vec<StreamEvent>,
    ) -> Result<(), ModelError> {
        if let WireDelta::TextDelta { text } = delta {
            // Text needs no block state, so a proxy that skips `content_block_start` loses nothing.
            self.add_text(text, events);
            return Ok(());
        }
        let Some(slot) = self.slot(index) else {
            return Err(ModelError::Stream(format!(
                "a delta arrived for content block {index}, which never started"
            )));
        };
        match (&mut self.blocks[slot].kind, delta) {
            (BlockKind::Tool { json, .. }, WireDelta::InputJsonDelta { partial_json })
            | (BlockKind::ServerTool { json, .. }, WireDelta::InputJsonDelta { partial_json }) => {
                json.push_str(&partial_json);
            }
            (
                BlockKind::Thinking(ThinkingBlock::Thinking { thinking, .. }),
                WireDelta::ThinkingDelta { thinking: piece },
            ) => {
                thinking.push_str(&piece);
                if !piece.is_empty() {
                    events.push(StreamEvent::ReasoningDelta(piece));
                }
            }
            (
                BlockKind::Thinking(ThinkingBlock::Thinking { signature, .. }),
                WireDelta::SignatureDelta { signature: piece },
            ) => signature.push_str(&piece),
            // Deltas of kinds this client does not know, or for blocks it does not keep.
            _ => {}
        }
        Ok(())
    }

    /// The query of the latest web search the provider ran (its result block follows its call block).
    fn last_search_query(&self) -> String {
        self.blocks
            .iter()
            .rev()
            .find_map(|block| match &block.kind {
                BlockKind::ServerTool {
                    name,
                    json,
                    initial,
                } if name == "web_search" => {
                    let input = serde_json::from_str::<Value>(json)
                        .ok()
                        .or_else(|| initial.clone())?;
                    Some(input.get("query")?.as_str()?.to_owned())
                }
                _ => None,
            })
            .unwrap_or_default()
    }

    fn add_text(&mut self, text: String, events: &mut Vec<StreamEvent>) {
        if !text.is_empty() {
            self.text.push_str(&text);
            events.push(StreamEvent::TextDelta(text));
        }
    }

    /// Merges usage figures: `message_start` has the prompt, `message_delta` the running output count
    /// (and, on newer API versions, the prompt again).
    fn add_usage(&mut self, usage: Option<WireUsage>, events: &mut Vec<StreamEvent>) {
        let Some(wire) = usage else {
            return;
        };
        let mut usage = self.usage.unwrap_or_default();
        if let Some(input) = wire.input_tokens {
            let read = wire.cache_read_input_tokens.unwrap_or(0);
            let written = wire.cache_creation_input_tokens.unwrap_or(0);
            usage.input_tokens = input + read + written;
            usage.cached_tokens = read;
        }
        if let Some(output) = wire.output_tokens {
            usage.output_tokens = output;
        }
        self.usage = Some(usage);
        events.push(StreamEvent::Usage(usage));
    }

    fn slot(&self, index: usize) -> Option<usize> {
        self.blocks.iter().rposition(|block| block.index == index)
    }
}

/// The name of a tool call whose block never ended.
fn unfinished_tool(block: &Block) -> Option<&str> {
    match &block.kind {
        BlockKind::Tool { name, .. } if !block.stopped => Some(name),
        _ => None,
    }
}

/// The results of a `web_search_tool_result` block as titles and URLs (the page text comes encrypted, for
/// the model only); an error result (`web_search_tool_result_error`) is none.
fn web_results(content: &Value) -> Vec<crate::protocol::WebResult> {
    content
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["type"] == "web_search_result")
        .map(|item| crate::protocol::WebResult {
            title: item["title"].as_str().unwrap_or_default().to_owned(),
            url: item["url"].as_str().unwrap_or_default().to_owned(),
            snippet: String::new(),
        })
        .collect()
}

/// A call with no `input_json_delta` has its whole input in `content_block_start` (usually `{}`).
fn tool_call(id: String, name: String, json: String, initial: Option<Value>) -> ToolCall {
    let arguments = if json.is_empty() {
        initial
            .filter(|input| !input.is_null())
            .map_or_else(|| "{}".to_string(), |input| input.to_string())
    } else {
        json
    };
    ToolCall {
        id,
        name,
        arguments,
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" => FinishReason::Length,
        other => FinishReason::Other(other.to_string()),
    }
}

impl StreamParser for EventParser {
    fn push_sse(&mut self, event: &SseEvent) -> Result<Vec<StreamEvent>, ModelError> {
        self.push(&event.data)
    }

    /// Whether `message_stop` was seen; nothing after it matters.
    fn is_done(&self) -> bool {
        self.done
    }

    fn into_response(self: Box<Self>) -> Result<Response, ModelError> {
        (*self).finish()
    }
}

/// A streaming client for the Anthropic Messages API or a server that speaks it.
#[derive(Debug)]
pub struct AnthropicClient {
    http: Endpoint,
}

impl AnthropicClient {
    /// `base_url` is the server root as `ANTHROPIC_BASE_URL` spells it (`https://api.anthropic.com`); one
    /// that already ends in `/v1` is accepted too. `idle_timeout` bounds the wait for the response headers
    /// and then for each read of the body.
    pub fn new(
        base_url: String,
        api_key: Option<String>,
        connect_timeout: Duration,
        idle_timeout: Duration,
    ) -> Result<Self, ModelError> {
        let http = Endpoint::new(
            base_url,
            api_key,
            KeyHeader::XApiKey,
            connect_timeout,
            idle_timeout,
        )?;
        Ok(AnthropicClient { http })
    }

    /// Applies `tuning` (headers, body adjustments) to every request.
    pub fn with_tuning(self, tuning: Tuning) -> Self {
        AnthropicClient {
            http: self.http.with_tuning(tuning),
        }
    }

    /// The JSON body sent for `req`, with the tuning applied (Anthropic's `max_tokens` keeps its name).
    pub fn body(&self, req: &Request<'_>) -> Value {
        self.http.body(req, request_body, false)
    }

    /// The URL requests are POSTed to.
    pub fn endpoint(&self) -> String {
        let base = self.http.base_url();
        if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        }
    }

    /// Sends `req` once and waits for the response headers; the [`Reply`] yields the streamed events as the
    /// caller pulls them, then the assembled response.
    pub(crate) async fn open(&self, req: &Request<'_>) -> Result<Reply<'_>, ModelError> {
        let body = self.body(req);
        let headers = [("anthropic-version", API_VERSION)];
        self.http
            .open(
                &self.endpoint(),
                &body,
                &headers,
                Box::new(EventParser::new()),
            )
            .await
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::protocol::ToolSchema;
    use crate::sse::SseDecoder;

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    fn parse(events: &[&str]) -> Result<(Vec<StreamEvent>, Response), ModelError> {
        let mut parser = EventParser::new();
        let mut out = Vec::new();
        for data in events {
            out.extend(parser.push(data)?);
        }
        Ok((out, parser.finish()?))
    }

    #[test]
    fn request_body_shape() {
        let messages = vec![
            Message::System {
                content: "sys one".into(),
            },
            Message::System {
                content: "sys two".into(),
            },
            Message::User {
                content: "hi".into(),
            },
            Message::Assistant {
                content: "Looking.".into(),
                tool_calls: vec![
                    call("t1", "ls", r#"{"dir":"."}"#),
                    call("t2", "cat", r#"{"path":"#),
                ],
                thinking: vec![ThinkingBlock::Thinking {
                    thinking: "hmm".into(),
                    signature: "sig".into(),
                }],
            },
            Message::Tool {
                tool_call_id: "t1".into(),
                content: "a.rs".into(),
            },
            Message::Tool {
                tool_call_id: "t2".into(),
                content: "error: bad arguments".into(),
            },
            Message::User {
                content: "go on".into(),
            },
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![],
                thinking: vec![],
            },
        ];
        let tools = [ToolSchema {
            name: "ls".into(),
            description: "List files".into(),
            parameters: json!({"type": "object"}),
        }];
        let req = Request {
            model: "claude-sonnet-4-5",
            messages: &messages,
            tools: &tools,
            max_tokens: None,
        };
        assert_eq!(
            request_body(&req),
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 8192,
                "system": [{"type": "text", "text": "sys one\n\nsys two",
                            "cache_control": {"type": "ephemeral"}}],
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                    {"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                        {"type": "text", "text": "Looking."},
                        {"type": "tool_use", "id": "t1", "name": "ls", "input": {"dir": "."}},
                        {"type": "tool_use", "id": "t2", "name": "cat", "input": {}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": "a.rs"},
                        {"type": "tool_result", "tool_use_id": "t2", "content": "error: bad arguments"},
                        {"type": "text", "text": "go on"},
                    ]},
                ],
                "tools": [{"name": "ls", "description": "List files",
                           "input_schema": {"type": "object"}}],
                "stream": true,
            })
        );
        let bare = Request {
            messages: &messages[2..3],
            tools: &[],
            max_tokens: Some(100),
            ..req
        };
        let body = request_body(&bare);
        assert_eq!(body["max_tokens"], 100);
        assert!(body.get("tools").is_none() && body.get("system").is_none());
    }

    /// A recorded-style stream: text, two tool calls whose arguments arrive in pieces (CJK and emoji split
    /// across them), a ping and an event type this client does not know.
    pub(crate) const RAW_STREAM: &str = concat!(
        "event: message_start\n",
        r#"data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":100,"output_tokens":1}}}"#,
        "\n\nevent: content_block_start\n",
        r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        "\n\nevent: ping\r\n",
        r#"data: {"type": "ping"}"#,
        "\r\n\r\nevent: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"日本語で"}}"#,
        "\n\nevent: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" 🦀 ok"}}"#,
        "\n\nevent: content_block_stop\n",
        r#"data: {"type":"content_block_stop","index":0}"#,
        "\n\nevent: content_block_start\n",
        r#"data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01","name":"write_file","input":{}}}"#,
        "\n\nevent: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#,
        "\n\nevent: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"a.txt\", \"text\": \"héllo "}}"#,
        "\n\nevent: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"世界 👋🏽\"}"}}"#,
        "\n\nevent: content_block_stop\n",
        r#"data: {"type":"content_block_stop","index":1}"#,
        "\n\nevent: shiny_new_event\n",
        r#"data: {"type":"shiny_new_event","detail":{"x":1}}"#,
        "\n\nevent: content_block_start\n",
        r#"data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_02","name":"list","input":{}}}"#,
        "\n\nevent: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"dir\":"}}"#,
        "\n\nevent: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"src\"}"}}"#,
        "\n\nevent: content_block_stop\n",
        r#"data: {"type":"content_block_stop","index":2}"#,
        "\n\nevent: message_delta\n",
        r#"data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}"#,
        "\n\nevent: message_stop\n",
        r#"data: {"type":"message_stop"}"#,
        "\n\n",
    );

    fn decode_and_parse(chunks: &[&[u8]]) -> (Vec<StreamEvent>, Response) {
        let mut decoder = SseDecoder::new();
        let mut parser = EventParser::new();
        let mut events = Vec::new();
        let mut sse = Vec::new();
        for chunk in chunks {
            sse.extend(decoder.push(chunk));
        }
        sse.extend(decoder.finish());
        for event in sse {
            events.extend(parser.push_sse(&event).expect("valid event"));
        }
        (events, parser.finish().expect("complete stream"))
    }

    #[test]
    fn raw_stream_split_at_every_byte() {
        let bytes = RAW_STREAM.as_bytes();
        let whole = decode_and_parse(&[bytes]);
        let start_usage = Usage {
            input_tokens: 125,
            output_tokens: 1,
            cached_tokens: 100,
        };
        let end_usage = Usage {
            output_tokens: 42,
            ..start_usage
        };
        assert_eq!(
            whole.0,
            vec![
                StreamEvent::Usage(start_usage),
                StreamEvent::TextDelta("日本語で".into()),
                StreamEvent::TextDelta(" 🦀 ok".into()),
                StreamEvent::ToolCallStart {
                    index: 0,
                    id: "toolu_01".into(),
                    name: "write_file".into()
                },
                StreamEvent::ToolCallStart {
                    index: 1,
                    id: "toolu_02".into(),
                    name: "list".into()
                },
                StreamEvent::Usage(end_usage),
            ]
        );
        assert_eq!(
            whole.1,
            Response {
                text: "日本語で 🦀 ok".into(),
                tool_calls: vec![
                    call(
                        "toolu_01",
                        "write_file",
                        r#"{"path": "a.txt", "text": "héllo 世界 👋🏽"}"#
                    ),
                    call("toolu_02", "list", r#"{"dir":"src"}"#),
                ],
                finish_reason: Some(FinishReason::ToolCalls),
                usage: Some(end_usage),
                thinking: vec![],
                web_searches: vec![],
            }
        );
        for split in 0..=bytes.len() {
            let (a, b) = bytes.split_at(split);
            assert_eq!(decode_and_parse(&[a, b]), whole, "split at {split}");
        }
    }

    #[test]
    fn thinking_block_with_signature_kept() {
        let (events, response) = parse(&[
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me "}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"think."}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"Kx=="}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"opaque"}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"t","name":"ls","input":{}}}"#,
            r#"{"type":"content_block_stop","index":2}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"}}"#,
            r#"{"type":"message_stop"}"#,
        ])
        .expect("complete");
        assert_eq!(
            &events[..2],
            &[
                StreamEvent::ReasoningDelta("Let me ".into()),
                StreamEvent::ReasoningDelta("think.".into())
            ]
        );
        assert_eq!(response.text, "");
        assert_eq!(response.tool_calls, vec![call("t", "ls", "{}")]);
        let thinking = vec![
            ThinkingBlock::Thinking {
                thinking: "Let me think.".into(),
                signature: "EqQBKx==".into(),
            },
            ThinkingBlock::RedactedThinking {
                data: "opaque".into(),
            },
        ];
        assert_eq!(response.thinking, thinking);
        // Sent back first in the assistant turn, exactly as received.
        let messages = [Message::Assistant {
            content: String::new(),
            tool_calls: response.tool_calls,
            thinking,
        }];
        let body = request_body(&Request {
            model: "m",
            messages: &messages,
            tools: &[],
            max_tokens: None,
        });
        assert_eq!(
            body["messages"][0]["content"],
            json!([
                {"type": "thinking", "thinking": "Let me think.", "signature": "EqQBKx=="},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "tool_use", "id": "t", "name": "ls", "input": {}},
            ])
        );
    }

    #[test]
    fn tool_block_without_stop_is_truncated() {
        let err = parse(&[
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"rm","input":{}}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"a"}}"#,
            // Even a stop reason does not make the unfinished call complete.
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"}}"#,
        ])
        .expect_err("cut off");
        assert!(matches!(err, ModelError::Truncated(_)), "{err:?}");
        assert!(err.to_string().contains("\"rm\""), "{err}");
        assert!(err.is_retryable());
    }

    #[test]
    fn stream_without_end_is_truncated() {
        let err = parse(&[
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"partial"}}"#,
        ])
        .expect_err("cut off");
        assert!(matches!(err, ModelError::Truncated(_)), "{err:?}");
    }

    #[test]
    fn error_event_is_a_retryable_provider_error() {
        let err = parse(&[
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ])
        .expect_err("error event");
        match &err {
            ModelError::Provider { code, message } => {
                assert_eq!(code.as_deref(), Some("overloaded_error"));
                assert_eq!(message, "Overloaded");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(err.is_retryable());
    }

    #[test]
    fn max_tokens_is_length() {
        let (_, response) = parse(&[
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"write","input":{}}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"text\":\"abc"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":8}}"#,
            r#"{"type":"message_stop"}"#,
        ])
        .expect("a stop reason ends the stream");
        assert_eq!(response.finish_reason, Some(FinishReason::Length));
        // Returned as streamed, for the agent to report as cut off: never repaired here.
        assert_eq!(
            response.tool_calls,
            vec![call("t", "write", r#"{"text":"abc"#)]
        );
        assert_eq!(finish_reason("end_turn"), FinishReason::Stop);
    }

    #[test]
    fn malformed_event_names_the_problem() {
        let err = parse(&[r#"{"type":"content_block_delta","#]).expect_err("malformed");
        assert!(matches!(err, ModelError::Stream(_)));
        assert!(err.to_string().contains("not valid JSON"), "{err}");
        let err = parse(&[
            r#"{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{"}}"#,
        ])
        .expect_err("no such block");
        assert!(err.to_string().contains("never started"), "{err}");
    }
}
