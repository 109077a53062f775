//! The streaming glue: one model request raced against the turn's cancel, its text and reasoning streamed to
//! the sink as they arrive, and retries announced.

use std::sync::Mutex;
use std::time::Duration;

use crate::model::retry::RetryPolicy;
use crate::model::{Client, ModelError, Request, Response, StreamEvent};
use crate::protocol::{Event, Sink};

use super::control::TurnControl;

/// How a streamed request ended, short of a model error.
pub(super) enum Streamed {
    Reply(Response),
    /// The turn was cancelled; `partial` is the answer text streamed so far by the attempt in flight.
    Cancelled {
        partial: String,
    },
}

/// The fields of the `session` event, shown once the model first answers, so a session that fails to reach
/// the model leaves one clean error line and no refs.
#[derive(Debug, Clone)]
pub(super) struct SessionLine {
    pub id: String,
    pub branch: String,
    pub base: String,
    pub model: String,
}

impl SessionLine {
    fn emit(&self, sink: &mut dyn Sink) {
        sink.emit(&Event::Session {
            id: self.id.clone(),
            branch: self.branch.clone(),
            base: self.base.clone(),
            model: self.model.clone(),
        });
    }
}

/// Sends `request`, streaming text to `sink`; `announce` goes out before the first streamed event (or after
/// the reply, when nothing streamed). A cancel drops the connection at once, so the provider stops
/// generating.
pub(super) async fn send(
    client: &Client,
    retry: &RetryPolicy,
    request: &Request<'_>,
    sink: &mut dyn Sink,
    announce: Option<&SessionLine>,
    control: &TurnControl,
) -> Result<Streamed, ModelError> {
    // Both callbacks write to the sink; the future must stay `Send`, hence a mutex rather than a RefCell.
    let sink = Mutex::new(sink);
    let mut pending = announce;
    // The text of the attempt in flight; a retried attempt's text belongs to a discarded reply.
    let partial = Mutex::new(String::new());
    let mut on_event = |event: &StreamEvent| {
        let Ok(mut sink) = sink.lock() else { return };
        if let Some(line) = pending.take() {
            line.emit(&mut **sink);
        }
        match event {
            StreamEvent::TextDelta(text) => {
                if let Ok(mut partial) = partial.lock() {
                    partial.push_str(text);
                }
                sink.emit(&Event::Text {
                    delta: text.to_owned(),
                });
            }
            StreamEvent::ReasoningDelta(text) => sink.emit(&Event::Reasoning {
                delta: text.to_owned(),
            }),
            StreamEvent::ToolCallStart { .. } | StreamEvent::Usage(_) => {}
        }
    };
    let mut on_retry = |err: &ModelError, wait: Duration, attempt: u32| {
        let Ok(mut sink) = sink.lock() else { return };
        if let Ok(mut partial) = partial.lock() {
            partial.clear();
        }
        let message = format!(
            "model request failed ({err}); retrying in {:.1} s (attempt {} of {})",
            wait.as_secs_f64(),
            attempt + 1,
            retry.max_attempts,
        );
        sink.emit(&Event::Warning { message });
    };
    let response = tokio::select! {
        response = client.stream_with_retries(request, &mut on_event, retry, &mut on_retry) => response?,
        () = control.cancelled() => {
            let partial = partial.lock().map(|mut text| std::mem::take(&mut *text)).unwrap_or_default();
            return Ok(Streamed::Cancelled { partial });
        }
    };
    if let Some(line) = pending {
        if let Ok(mut sink) = sink.lock() {
            line.emit(&mut **sink);
        }
    }
    Ok(Streamed::Reply(response))
}

/// Sends `request` without streaming anything to the user (the summary of a compaction); `None` when the turn
/// was cancelled.
pub(super) async fn quietly(
    client: &Client,
    retry: &RetryPolicy,
    request: &Request<'_>,
    control: &TurnControl,
) -> Option<Result<Response, ModelError>> {
    let mut quiet = |_: &StreamEvent| {};
    let mut no_retry_note = |_: &ModelError, _: Duration, _: u32| {};
    tokio::select! {
        result = client.stream_with_retries(request, &mut quiet, retry, &mut no_retry_note) => Some(result),
        () = control.cancelled() => None,
    }
}
