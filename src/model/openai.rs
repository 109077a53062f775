//! The OpenAI Chat Completions client, also used for every OpenAI-compatible server (OpenRouter, Groq, vLLM,
//! llama.cpp, Ollama, ...).
//!
//! It is cut in three so the tricky parts are testable without a network: [`request_body`] builds the JSON
//! sent, [`ChunkParser`] turns the `data` of each SSE event into [`StreamEvent`]s and one [`Response`], and
//! [`OpenAiClient`] only moves bytes (POST, idle timeouts, status codes). Compatible servers disagree on the
//! details of streamed tool calls; each tolerance below names the server that needs it.

use std::collections::HashMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use super::http::{preview, provider_error, Endpoint, KeyHeader, Reply, StreamParser};
use super::think::{Piece, ThinkSplitter};
use super::types::{
    image_caption, images_after_tool_results, FinishReason, ModelError, Request, Response,
    StreamEvent, Tuning,
};
use crate::protocol::{Message, ToolCall, Usage};
use crate::sse::SseEvent;

/// Builds the JSON body of a streamed Chat Completions request.
pub fn request_body(req: &Request) -> Value {
    let messages: Vec<Value> = images_after_tool_results(req.messages)
        .into_iter()
        .map(message_json)
        .collect();
    let mut body = json!({
        "model": req.model,
        "messages": messages,
        "stream": true,
        // Without this, OpenAI sends no usage at all when streaming.
        "stream_options": {"include_usage": true},
    });
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|tool| {
                json!({"type": "function", "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                }})
            })
            .collect();
        body["tools"] = Value::Array(tools);
    }
    if let Some(max_tokens) = req.max_tokens {
        body["max_tokens"] = max_tokens.into();
    }
    body
}

fn message_json(message: &Message) -> Value {
    match message {
        Message::System { content } => json!({"role": "system", "content": content}),
        Message::User { content } => json!({"role": "user", "content": content}),
        Message::Assistant {
            content,
            tool_calls,
            ..
        } if !tool_calls.is_empty() => {
            let calls: Vec<Value> = tool_calls
                .iter()
                .map(|call| {
                    json!({"id": call.id, "type": "function", "function": {
                        "name": call.name,
                        "arguments": sent_arguments(&call.arguments),
                    }})
                })
                .collect();
            // OpenAI wants null, not "", next to tool calls; some strict servers reject the empty string.
            let content = if content.is_empty() {
                Value::Null
            } else {
                content.as_str().into()
            };
            json!({"role": "assistant", "content": content, "tool_calls": calls})
        }
        Message::Assistant { content, .. } => json!({"role": "assistant", "content": content}),
        Message::Tool {
            tool_call_id,
            content,
        } => json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}),
        // Chat Completions takes images only in user messages: a content array with a data URL.
        Message::Image { image } => json!({"role": "user", "content": [
            {"type": "text", "text": image_caption(image)},
            {"type": "image_url", "image_url": {
                "url": format!("data:{};base64,{}", image.media_type, image.data),
            }},
        ]}),
    }
}

/// The arguments of an earlier call as sent back in the history. Arguments that are not JSON (cut off by the
/// token limit, or malformed; the model was told so in the call's result) go back as `{}`: llama.cpp's server
/// parses them to render its chat template and answers HTTP 500 to the whole request otherwise, which a
/// real-server run showed.
fn sent_arguments(arguments: &str) -> &str {
    if serde_json::from_str::<Value>(arguments).is_ok() {
        arguments
    } else {
        "{}"
    }
}

/// One streamed chunk, or a whole non-streamed completion (which has `message` where a chunk has `delta`).
#[derive(Deserialize)]
struct Chunk {
    choices: Option<Vec<Choice>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    index: Option<u64>,
    delta: Option<Delta>,
    message: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
    reasoning_content: Option<String>,
    /// OpenRouter's name for `reasoning_content`.
    reasoning: Option<String>,
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    index: Option<usize>,
    id: Option<String>,
    function: Option<WireFunction>,
}

#[derive(Deserialize)]
struct WireFunction {
    name: Option<String>,
    /// A string fragment normally; some servers send a complete JSON object instead.
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
    /// DeepSeek reports cache hits here instead of in `prompt_tokens_details`.
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

impl WireUsage {
    fn to_usage(&self) -> Usage {
        let cached = self
            .prompt_tokens_details
            .as_ref()
            .and_then(|details| details.cached_tokens);
        Usage {
            input_tokens: self.prompt_tokens.unwrap_or(0),
            output_tokens: self.completion_tokens.unwrap_or(0),
            cached_tokens: cached.or(self.prompt_cache_hit_tokens).unwrap_or(0),
        }
    }
}

/// A tool call being assembled from fragments.
#[derive(Debug)]
struct PartialCall {
    /// The `index` the server gave it, used to order the calls at the end.
    wire_index: usize,
    id: String,
    name: String,
    arguments: String,
    started: bool,
}

/// Assembles a Chat Completions stream: feed it the `data` of each SSE event with [`ChunkParser::push`],
/// forward the events it returns, then call [`ChunkParser::finish`].
///
/// Tool-call fragments are routed to calls by `index`, with these tolerances:
/// - an `id` already seen continues that call whatever its `index` (vLLM repeats the id in every chunk);
/// - a new `id` at an `index` already held by a call with another id starts a new call (Ollama and Grok
///   give every parallel call index 0);
/// - a missing `index` means the call with the same id, a new call for a new id, or else the last call
///   touched (old Ollama omits `index`);
/// - a `function.name` equal to the one held is not appended (llama-cpp-python repeats it in every chunk).
#[derive(Debug, Default)]
pub struct ChunkParser {
    text: String,
    calls: Vec<PartialCall>,
    /// Which call an `index` currently refers to.
    by_index: HashMap<usize, usize>,
    last: Option<usize>,
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
    done: bool,
    /// Separates `<think>` reasoning that some servers leave in `content` from the answer.
    think: ThinkSplitter,
}

impl ChunkParser {
    pub fn new() -> Self {
        ChunkParser::default()
    }

    /// Whether `[DONE]` was seen; nothing after it matters.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Takes the `data` of one SSE event and returns the events to emit, in order.
    ///
    /// `Usage` events carry the request's running total: a later one replaces an earlier one.
    pub fn push(&mut self, data: &str) -> Result<Vec<StreamEvent>, ModelError> {
        let data = data.trim();
        // Some servers send empty `data:` lines as keep-alives.
        if self.done || data.is_empty() {
            return Ok(Vec::new());
        }
        if data == "[DONE]" {
            self.done = true;
            let mut events = Vec::new();
            self.flush_think(&mut events);
            return Ok(events);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|err| {
            ModelError::Stream(format!(
                "a chunk is not valid JSON ({err}): {}",
                preview(data)
            ))
        })?;
        self.apply(chunk, false)
    }

    /// Takes a whole non-streamed completion body, for servers that ignore `stream: true`.
    pub fn push_completion(&mut self, body: &str) -> Result<Vec<StreamEvent>, ModelError> {
        let chunk: Chunk = serde_json::from_str(body).map_err(|err| {
            ModelError::Stream(format!(
                "the reply is not valid JSON ({err}): {}",
                preview(body)
            ))
        })?;
        if chunk.error.is_none() && chunk.choices.as_ref().is_none_or(Vec::is_empty) {
            return Err(ModelError::Stream(format!(
                "the reply has no choices: {}",
                preview(body)
            )));
        }
        let events = self.apply(chunk, true)?;
        self.done = true;
        Ok(events)
    }

    /// Returns the assembled reply.
    ///
    /// A stream that ended with neither `[DONE]` nor a finish reason was cut off, and is an error: its
    /// last tool call may be incomplete and must not be run. Calls that never got an id are given
    /// `call_<n>` so tool results can still refer to them.
    pub fn finish(mut self) -> Result<Response, ModelError> {
        // Only held-back text can remain here (the events were flushed at the finish reason).
        let mut tail = Vec::new();
        self.flush_think(&mut tail);
        if !self.done && self.finish_reason.is_none() {
            return Err(ModelError::Truncated(
                "the stream ended without a finish reason or [DONE]".to_string(),
            ));
        }
        let mut calls = self.calls;
        calls.retain(|call| !call.name.is_empty() || !call.arguments.is_empty());
        calls.sort_by_key(|call| call.wire_index);
        let tool_calls = calls
            .into_iter()
            .enumerate()
            .map(|(n, call)| ToolCall {
                id: if call.id.is_empty() {
                    format!("call_{n}")
                } else {
                    call.id
                },
                name: call.name,
                arguments: call.arguments,
            })
            .collect();
        Ok(Response {
            text: self.text,
            tool_calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
            thinking: Vec::new(),
            web_searches: Vec::new(),
        })
    }

    /// `whole` is set for a non-streamed completion, where tool calls carry no `index` but are complete.
    fn apply(&mut self, chunk: Chunk, whole: bool) -> Result<Vec<StreamEvent>, ModelError> {
        if let Some(error) = &chunk.error {
            return Err(provider_error(error));
        }
        let mut events = Vec::new();
        // We never ask for n > 1; other choices would only be noise from a misbehaving server.
        for choice in chunk.choices.into_iter().flatten() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta.or(choice.message) {
                self.apply_delta(delta, whole, &mut events);
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(finish_reason(&reason));
                self.flush_think(&mut events);
            }
        }
        if let Some(usage) = chunk.usage {
            let usage = usage.to_usage();
            self.usage = Some(usage);
            events.push(StreamEvent::Usage(usage));
        }
        Ok(events)
    }

    fn apply_delta(&mut self, delta: Delta, whole: bool, events: &mut Vec<StreamEvent>) {
        // Servers that send both fields send the same text twice.
        if let Some(reasoning) = delta.reasoning_content.or(delta.reasoning) {
            if !reasoning.is_empty() {
                events.push(StreamEvent::ReasoningDelta(reasoning));
            }
        }
        if let Some(text) = delta.content.filter(|text| !text.is_empty()) {
            let pieces = self.think.push(&text);
            self.add_pieces(pieces, events);
        }
        for (position, call) in delta.tool_calls.into_iter().flatten().enumerate() {
            let index = call.index.or(whole.then_some(position));
            let id = call.id.unwrap_or_default();
            let slot = self.route(index, &id);
            events.extend(self.update_call(slot, id, call.function));
        }
    }

    fn add_pieces(&mut self, pieces: Vec<Piece>, events: &mut Vec<StreamEvent>) {
        for piece in pieces {
            match piece {
                Piece::Text(text) => {
                    self.text.push_str(&text);
                    events.push(StreamEvent::TextDelta(text));
                }
                Piece::Reasoning(text) => events.push(StreamEvent::ReasoningDelta(text)),
            }
        }
    }

    /// Releases text the `<think>` splitter held back, once no more content can follow.
    fn flush_think(&mut self, events: &mut Vec<StreamEvent>) {
        let pieces = self.think.finish();
        self.add_pieces(pieces, events);
    }

    /// Finds the call a fragment belongs to, creating it if needed; see the type's documentation.
    fn route(&mut self, index: Option<usize>, id: &str) -> usize {
        let known = (!id.is_empty())
            .then(|| self.calls.iter().position(|call| call.id == id))
            .flatten();
        let slot = match (known, index) {
            (Some(slot), _) => slot,
            (None, Some(index)) => match self.by_index.get(&index) {
                Some(&slot) if id.is_empty() || self.calls[slot].id.is_empty() => slot,
                _ => self.new_call(index),
            },
            (None, None) if id.is_empty() => match self.last {
                Some(slot) => slot,
                None => self.new_call(0),
            },
            (None, None) => self.new_call(self.calls.len()),
        };
        self.last = Some(slot);
        slot
    }

    fn new_call(&mut self, index: usize) -> usize {
        let slot = self.calls.len();
        self.calls.push(PartialCall {
            wire_index: index,
            id: String::new(),
            name: String::new(),
            arguments: String::new(),
            started: false,
        });
        self.by_index.insert(index, slot);
        slot
    }

    /// Adds one fragment to a call; returns `ToolCallStart` the first time the call has a name.
    fn update_call(
        &mut self,
        slot: usize,
        id: String,
        function: Option<WireFunction>,
    ) -> Option<StreamEvent> {
        let call = &mut self.calls[slot];
        if call.id.is_empty() {
            call.id = id;
        }
        let function = function?;
        if let Some(name) = function.name.filter(|name| !name.is_empty()) {
            if call.name.is_empty() {
                call.name = name;
            } else if call.name != name {
                call.name.push_str(&name);
            }
        }
        match function.arguments {
            Some(Value::String(fragment)) => call.arguments.push_str(&fragment),
            Some(Value::Null) | None => {}
            Some(object) => call.arguments.push_str(&object.to_string()),
        }
        if call.started || call.name.is_empty() {
            return None;
        }
        call.started = true;
        Some(StreamEvent::ToolCallStart {
            index: slot,
            id: call.id.clone(),
            name: call.name.clone(),
        })
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        // `function_call` is the pre-tools name, still sent by some compatible servers.
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        other => FinishReason::Other(other.to_string()),
    }
}

/// A streaming client for one OpenAI-compatible endpoint.
#[derive(Debug)]
pub struct OpenAiClient {
    http: Endpoint,
}

impl OpenAiClient {
    /// `base_url` includes the version path (`https://api.openai.com/v1`). `idle_timeout` bounds the wait
    /// for the response headers and then for each read of the body.
    pub fn new(
        base_url: String,
        api_key: Option<String>,
        connect_timeout: Duration,
        idle_timeout: Duration,
    ) -> Result<Self, ModelError> {
        let http = Endpoint::new(
            base_url,
            api_key,
            KeyHeader::Bearer,
            connect_timeout,
            idle_timeout,
        )?;
        Ok(OpenAiClient { http })
    }

    /// Applies `tuning` (headers, body adjustments) to every request.
    pub fn with_tuning(self, tuning: Tuning) -> Self {
        OpenAiClient {
            http: self.http.with_tuning(tuning),
        }
    }

    /// The JSON body sent for `req`, with the tuning applied.
    pub fn body(&self, req: &Request<'_>) -> Value {
        self.http.body(req, request_body, true)
    }

    /// The URL requests are POSTed to.
    pub fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.http.base_url())
    }

    /// The context window the server reports for `model` within about two seconds, if it reports one.
    pub async fn context_window(&self, model: &str, ollama: bool) -> Option<u64> {
        super::window::probe(&self.http, model, ollama).await
    }

    /// [`OpenAiClient::context_window()`] as a task of its own, sharing this client's connections, so it can
    /// run beside the first request instead of before it.
    pub fn context_window_task(
        &self,
        model: &str,
        ollama: bool,
    ) -> impl std::future::Future<Output = Option<u64>> + Send + 'static {
        let http = self.http.clone();
        let model = model.to_owned();
        async move { super::window::probe(&http, &model, ollama).await }
    }

    /// Sends `req` once and waits for the response headers; the [`Reply`] yields the streamed events as the
    /// caller pulls them, then the assembled response.
    pub(crate) async fn open(&self, req: &Request<'_>) -> Result<Reply<'_>, ModelError> {
        let body = self.body(req);
        self.http
            .open(&self.endpoint(), &body, &[], Box::new(ChunkParser::new()))
            .await
    }
}

impl StreamParser for ChunkParser {
    fn push_sse(&mut self, event: &SseEvent) -> Result<Vec<StreamEvent>, ModelError> {
        // Some compatible servers report mid-stream failures as `event: error` rather than an `error` field.
        if event.event.as_deref() == Some("error") {
            let error: Value =
                serde_json::from_str(&event.data).unwrap_or_else(|_| event.data.as_str().into());
            let error = error.get("error").cloned().unwrap_or(error);
            return Err(provider_error(&error));
        }
        self.push(&event.data)
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn into_response(self: Box<Self>) -> Result<Response, ModelError> {
        (*self).finish()
    }

    fn push_whole(&mut self, body: &str) -> Result<Vec<StreamEvent>, ModelError> {
        self.push_completion(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ToolSchema;
    use crate::sse::SseDecoder;

    /// Runs SSE `data` payloads through a parser, collecting events; `Err` if any push or the finish fails.
    fn parse(chunks: &[&str]) -> Result<(Vec<StreamEvent>, Response), ModelError> {
        let mut parser = ChunkParser::new();
        let mut events = Vec::new();
        for chunk in chunks {
            events.extend(parser.push(chunk)?);
        }
        Ok((events, parser.finish()?))
    }

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn text_deltas_finish_and_usage() {
        let (events, response) = parse(&[
            r#"{"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"reasoning_content":"hmm"},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}],"usage":null}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"id":"c1","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":7,"total_tokens":127,"prompt_tokens_details":{"cached_tokens":100}}}"#,
            "[DONE]",
        ])
        .expect("valid stream");
        let usage = Usage {
            input_tokens: 120,
            output_tokens: 7,
            cached_tokens: 100,
        };
        assert_eq!(
            events,
            vec![
                StreamEvent::TextDelta("Hel".into()),
                StreamEvent::ReasoningDelta("hmm".into()),
                StreamEvent::TextDelta("lo".into()),
                StreamEvent::Usage(usage),
            ]
        );
        assert_eq!(response.text, "Hello");
        assert_eq!(response.finish_reason, Some(FinishReason::Stop));
        assert_eq!(response.usage, Some(usage));
        assert!(response.tool_calls.is_empty());
    }

    #[test]
    fn malformed_arguments_go_back_as_an_empty_object() {
        let messages = [Message::Assistant {
            content: String::new(),
            tool_calls: vec![
                call("a", "read_file", "{\"path\": \"cut off"),
                call("b", "read_file", "{\"path\": \"x\"}"),
            ],
            thinking: Vec::new(),
        }];
        let req = Request {
            model: "m",
            messages: &messages,
            tools: &[],
            max_tokens: None,
        };
        let body = request_body(&req);
        let calls = &body["messages"][0]["tool_calls"];
        assert_eq!(calls[0]["function"]["arguments"], "{}");
        assert_eq!(calls[1]["function"]["arguments"], "{\"path\": \"x\"}");
    }

    #[test]
    fn think_tags_in_content_are_reasoning_not_answer() {
        let (events, response) = parse(&[
            r#"{"choices":[{"delta":{"content":"<thi"}}]}"#,
            r#"{"choices":[{"delta":{"content":"nk>plan</th"}}]}"#,
            r#"{"choices":[{"delta":{"content":"ink>\n\nDone"}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ])
        .expect("valid stream");
        assert_eq!(
            events,
            vec![
                StreamEvent::ReasoningDelta("plan".into()),
                StreamEvent::TextDelta("Done".into()),
            ]
        );
        assert_eq!(response.text, "Done");
    }

    #[test]
    fn openrouter_reasoning_field() {
        let (events, _) = parse(&[r#"{"choices":[{"delta":{"reasoning":"think"}}]}"#, "[DONE]"])
            .expect("valid stream");
        assert_eq!(events, vec![StreamEvent::ReasoningDelta("think".into())]);
    }

    #[test]
    fn two_tool_calls_with_split_arguments() {
        let (events, response) = parse(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"pa"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"grep","arguments":"{\"pattern\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\":\"a.rs\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"fn main\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ])
        .expect("valid stream");
        assert_eq!(
            events,
            vec![
                StreamEvent::ToolCallStart {
                    index: 0,
                    id: "call_a".into(),
                    name: "read_file".into()
                },
                StreamEvent::ToolCallStart {
                    index: 1,
                    id: "call_b".into(),
                    name: "grep".into()
                },
            ]
        );
        assert_eq!(
            response.tool_calls,
            vec![
                call("call_a", "read_file", r#"{"path":"a.rs"}"#),
                call("call_b", "grep", r#"{"pattern":"fn main"}"#),
            ]
        );
        assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
    }

    #[test]
    fn repeated_name_and_id_are_not_concatenated() {
        // llama-cpp-python repeats the name, vLLM the id, in every chunk.
        let (events, response) = parse(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"edit","arguments":"{\"a\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"edit","arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ])
        .expect("valid stream");
        assert_eq!(events.len(), 1, "one ToolCallStart: {events:?}");
        assert_eq!(response.tool_calls, vec![call("c", "edit", r#"{"a":1}"#)]);
    }

    #[test]
    fn same_index_with_new_id_is_a_new_call() {
        // Ollama and Grok number every parallel call 0.
        let (_, response) = parse(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"ls","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"y","function":{"name":"cat","arguments":"{\"p\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ])
        .expect("valid stream");
        assert_eq!(
            response.tool_calls,
            vec![call("x", "ls", "{}"), call("y", "cat", r#"{"p":1}"#)]
        );
    }

    #[test]
    fn missing_index_and_missing_id() {
        let (_, response) = parse(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"ls","arguments":"{\"d\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"\".\"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"k","function":{"name":"cat","arguments":{"p":"x"}}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
        ])
        .expect("valid stream");
        assert_eq!(
            response.tool_calls,
            vec![
                call("call_0", "ls", r#"{"d":"."}"#),
                call("k", "cat", r#"{"p":"x"}"#)
            ]
        );
    }

    #[test]
    fn finish_reason_length_without_done_is_complete() {
        let (_, response) = parse(&[
            r#"{"choices":[{"delta":{"content":"abc"}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"length"}]}"#,
        ])
        .expect("a finish reason ends the stream");
        assert_eq!(response.finish_reason, Some(FinishReason::Length));
    }

    #[test]
    fn truncated_stream_is_a_retryable_error() {
        let err = parse(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"rm","arguments":"{\"path\":\"a"}}]}}]}"#,
        ])
        .expect_err("no finish reason and no [DONE]");
        assert!(matches!(err, ModelError::Truncated(_)), "{err:?}");
        assert!(err.is_retryable());
    }

    #[test]
    fn error_chunk_is_an_error() {
        let err = parse(&[
            r#"{"choices":[{"delta":{"content":"a"}}]}"#,
            r#"{"error":{"message":"Upstream overloaded","code":502}}"#,
        ])
        .expect_err("error chunk");
        match &err {
            ModelError::Provider { code, message } => {
                assert_eq!(code.as_deref(), Some("502"));
                assert_eq!(message, "Upstream overloaded");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(err.is_retryable());
    }

    #[test]
    fn malformed_json_names_the_problem() {
        let err = parse(&[r#"{"choices":[{"delta":"#]).expect_err("malformed");
        let message = err.to_string();
        assert!(matches!(err, ModelError::Stream(_)));
        assert!(message.contains("not valid JSON"), "{message}");
        assert!(message.contains(r#"{"choices""#), "{message}");
    }

    #[test]
    fn non_streamed_completion() {
        let body = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"ok","tool_calls":[
            {"id":"a","type":"function","function":{"name":"ls","arguments":"{}"}},
            {"id":"b","type":"function","function":{"name":"cat","arguments":"{\"p\":1}"}}]},
            "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#;
        let mut parser = ChunkParser::new();
        let events = parser.push_completion(body).expect("valid body");
        assert_eq!(events.len(), 4, "{events:?}");
        let response = parser.finish().expect("complete");
        assert_eq!(response.text, "ok");
        assert_eq!(
            response.tool_calls,
            vec![call("a", "ls", "{}"), call("b", "cat", r#"{"p":1}"#)]
        );
        assert_eq!(response.usage.map(|u| u.output_tokens), Some(4));
    }

    /// A recorded-style stream with CRLF, comments, CJK and emoji in text and arguments.
    const RAW_STREAM: &str = concat!(
        ": OPENROUTER PROCESSING\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"日本語 🦀\"}}]}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"write_file\",\"arguments\":\"{\\\"text\\\":\\\"héllo \"}}]}}]}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"世界 👋🏽\\\"}\"}}]}}]}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\r\n\r\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":5}}\r\n\r\n",
        "data: [DONE]\r\n\r\n",
    );

    fn decode_and_parse(chunks: &[&[u8]]) -> (Vec<StreamEvent>, Response) {
        let mut decoder = SseDecoder::new();
        let mut parser = ChunkParser::new();
        let mut events = Vec::new();
        let mut sse = Vec::new();
        for chunk in chunks {
            sse.extend(decoder.push(chunk));
        }
        sse.extend(decoder.finish());
        for event in sse {
            events.extend(parser.push(&event.data).expect("valid chunk"));
        }
        (events, parser.finish().expect("complete stream"))
    }

    #[test]
    fn raw_stream_split_at_every_byte() {
        let bytes = RAW_STREAM.as_bytes();
        let whole = decode_and_parse(&[bytes]);
        assert_eq!(whole.1.text, "日本語 🦀");
        assert_eq!(
            whole.1.tool_calls,
            vec![call("call_1", "write_file", r#"{"text":"héllo 世界 👋🏽"}"#)]
        );
        for split in 0..=bytes.len() {
            let (a, b) = bytes.split_at(split);
            assert_eq!(decode_and_parse(&[a, b]), whole, "split at {split}");
        }
    }

    #[test]
    fn request_body_shape() {
        let messages = vec![
            Message::System {
                content: "sys".into(),
            },
            Message::User {
                content: "hi".into(),
            },
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![call("c1", "ls", "{}")],
                thinking: vec![],
            },
            Message::Tool {
                tool_call_id: "c1".into(),
                content: "a.rs".into(),
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
            model: "gpt-4.1",
            messages: &messages,
            tools: &tools,
            max_tokens: Some(100),
        };
        assert_eq!(
            request_body(&req),
            json!({
                "model": "gpt-4.1",
                "messages": [
                    {"role": "system", "content": "sys"},
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": "c1", "content": "a.rs"},
                    {"role": "assistant", "content": ""},
                ],
                "tools": [{"type": "function", "function": {
                    "name": "ls", "description": "List files", "parameters": {"type": "object"}}}],
                "stream": true,
                "stream_options": {"include_usage": true},
                "max_tokens": 100,
            })
        );
        let bare = Request {
            tools: &[],
            max_tokens: None,
            ..req
        };
        let body = request_body(&bare);
        assert!(body.get("tools").is_none() && body.get("max_tokens").is_none());
    }

    mod http {
        use super::*;
        use crate::model::http::test_server::{http_response, serve_all};
        use std::net::TcpListener;
        use std::thread::JoinHandle;

        const KEY: &str = "sk-test-secret-key";

        /// Serves one canned HTTP response on a fresh port; the handle returns the request it received.
        fn serve(response: String, linger: Duration) -> (String, JoinHandle<String>) {
            let (root, handle) = serve_all(vec![response], linger);
            let handle = std::thread::spawn(move || {
                let mut requests = handle.join().expect("server");
                requests.remove(0)
            });
            (format!("{root}/v1/"), handle)
        }

        fn client(url: String, idle: Duration) -> OpenAiClient {
            OpenAiClient::new(url, Some(KEY.into()), Duration::from_secs(2), idle).expect("client")
        }

        async fn run(client: &OpenAiClient) -> (Vec<StreamEvent>, Result<Response, ModelError>) {
            let messages = [Message::User {
                content: "hi".into(),
            }];
            let req = Request {
                model: "m",
                messages: &messages,
                tools: &[],
                max_tokens: None,
            };
            let mut events = Vec::new();
            let mut reply = match client.open(&req).await {
                Ok(reply) => reply,
                Err(err) => return (events, Err(err)),
            };
            loop {
                match reply.next().await {
                    Ok(Some(event)) => events.push(event),
                    Ok(None) => return (events, reply.finish()),
                    Err(err) => return (events, Err(err)),
                }
            }
        }

        #[tokio::test]
        async fn streams_sse_and_sends_key() {
            let body = RAW_STREAM.replace("\r\n", "\n");
            let (url, server) = serve(
                http_response("200 OK", "text/event-stream", &body),
                Duration::ZERO,
            );
            let client = client(url, Duration::from_secs(5));
            let (events, result) = run(&client).await;
            let response = result.expect("stream ok");
            assert_eq!(response.tool_calls.len(), 1);
            assert_eq!(
                events.first(),
                Some(&StreamEvent::TextDelta("日本語 🦀".into()))
            );
            let request = server.join().expect("server");
            assert!(
                request.starts_with("POST /v1/chat/completions "),
                "{request}"
            );
            assert!(request.contains(&format!("authorization: Bearer {KEY}")));
            assert!(request.contains(r#""stream":true"#));
            assert!(!format!("{client:?}").contains(KEY));
        }

        #[test]
        fn open_future_is_send() {
            fn assert_send<T: Send>(_: &T) {}
            let client = client("http://127.0.0.1:9/v1".into(), Duration::from_secs(1));
            let req = Request {
                model: "m",
                messages: &[],
                tools: &[],
                max_tokens: None,
            };
            assert_send(&client.open(&req));
        }

        #[tokio::test]
        async fn json_reply_to_a_stream_request() {
            let body = r#"{"choices":[{"message":{"content":"plain"},"finish_reason":"stop"}]}"#;
            let (url, _server) = serve(
                http_response("200 OK", "application/json; charset=utf-8", body),
                Duration::ZERO,
            );
            let (events, result) = run(&client(url, Duration::from_secs(5))).await;
            assert_eq!(result.expect("ok").text, "plain");
            assert_eq!(events, vec![StreamEvent::TextDelta("plain".into())]);
        }

        #[tokio::test]
        async fn auth_error_carries_provider_message_without_key() {
            let body = format!(r#"{{"error":{{"message":"Invalid key {KEY}","type":"auth"}}}}"#);
            let (url, _server) = serve(
                http_response("401 Unauthorized", "application/json", &body),
                Duration::ZERO,
            );
            let (_, result) = run(&client(url, Duration::from_secs(5))).await;
            let err = result.expect_err("401");
            assert!(
                matches!(err, ModelError::Auth { status: 401, .. }),
                "{err:?}"
            );
            assert_eq!(
                err.to_string(),
                "authentication failed (HTTP 401): Invalid key <redacted>"
            );
            assert!(!err.is_retryable());
        }

        #[tokio::test]
        async fn server_error_body_preview() {
            let (url, _server) = serve(
                http_response("503 Service Unavailable", "text/html", "<html>down</html>"),
                Duration::ZERO,
            );
            let (_, result) = run(&client(url, Duration::from_secs(5))).await;
            let err = result.expect_err("503");
            assert_eq!(
                err.to_string(),
                "model request failed (HTTP 503): <html>down</html>"
            );
            assert!(err.is_retryable());
        }

        #[tokio::test]
        async fn idle_timeout_between_bytes() {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n: hi\n\n";
            let (url, _server) = serve(head.to_string(), Duration::from_secs(2));
            let (_, result) = run(&client(url, Duration::from_millis(200))).await;
            let err = result.expect_err("timeout");
            assert!(matches!(err, ModelError::Timeout { .. }), "{err:?}");
            assert_eq!(
                err.to_string(),
                "no data from the model for 0.2s (idle timeout)"
            );
        }

        #[tokio::test]
        async fn a_reply_without_end_is_cut_off_at_the_limit() {
            // One `data:` line that never ends, as a broken or hostile server may send.
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            let url = format!("http://{}/v1/", listener.local_addr().expect("addr"));
            let server = std::thread::spawn(move || {
                use std::io::Write;
                let (mut socket, _) = listener.accept().expect("accept");
                crate::model::http::test_server::read_request(&mut socket);
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: ";
                socket.write_all(head.as_bytes()).expect("head");
                let chunk = vec![b'x'; 1 << 20];
                let mut sent = 0usize;
                while socket.write_all(&chunk).is_ok() {
                    sent += chunk.len();
                }
                sent
            });
            let (_, result) = run(&client(url, Duration::from_secs(5))).await;
            let err = result.expect_err("cut off");
            assert!(matches!(err, ModelError::Stream(_)), "{err:?}");
            assert!(
                err.to_string().contains("the reply went on past 64 MB"),
                "{err}"
            );
            assert!(!err.is_retryable());
            // The connection was closed, so the server's writes failed soon after the limit. (Joined off the
            // runtime: hyper's connection task, which closes the socket, runs on it.)
            let joined = tokio::task::spawn_blocking(move || server.join());
            let sent = joined.await.expect("joined").expect("server");
            assert!((64 << 20..80 << 20).contains(&sent), "{sent}");
        }

        #[tokio::test]
        async fn connection_refused_names_the_url() {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|listener| listener.local_addr())
                .expect("free port")
                .port();
            let url = format!("http://127.0.0.1:{port}/v1");
            let (_, result) = run(&client(url.clone(), Duration::from_secs(5))).await;
            let err = result.expect_err("refused");
            let message = err.to_string();
            assert!(
                matches!(err, ModelError::Connect { refused: true, .. }),
                "{err:?}"
            );
            assert!(
                message.starts_with(&format!("could not reach {url}/chat/completions: ")),
                "{message}"
            );
            assert!(
                !err.is_retryable(),
                "a refused connection is a configuration problem"
            );
        }
    }
}
