//! The streaming glue: one model request's reply pulled item by item, each pull raced against the turn's
//! cancel, its text and reasoning shown as they arrive, and retries announced.

use std::time::Duration;

use crate::model::retry::RetryPolicy;
use crate::model::{Client, ModelError, ReplyItem, Request, Response, StreamEvent};
use crate::protocol::{Event, Sink};
use crate::store::SessionLog;

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
/// the reply, when nothing streamed). A retry's warning is recorded in `log` too, so `show` prints it. A
/// cancel drops the stream, and with it the connection, at once, so the provider stops generating.
pub(super) async fn send(
    client: &Client,
    retry: &RetryPolicy,
    request: &Request<'_>,
    log: &mut SessionLog,
    sink: &mut dyn Sink,
    announce: Option<&SessionLine>,
    control: &TurnControl,
) -> Result<Streamed, ModelError> {
    let mut stream = client.send(request, retry);
    let mut pending = announce;
    // The text of the attempt in flight; a retried attempt's text belongs to a discarded reply.
    let mut partial = String::new();
    loop {
        let item = tokio::select! {
            item = stream.next() => item,
            () = control.cancelled() => return Ok(Streamed::Cancelled { partial }),
        };
        let event = match item {
            Some(Ok(ReplyItem::Event(event))) => event,
            Some(Ok(ReplyItem::Retrying {
                error,
                wait,
                attempt,
            })) => {
                partial.clear();
                announce_retry(log, sink, &error, wait, attempt, retry.max_attempts);
                continue;
            }
            Some(Ok(ReplyItem::Done(response))) => {
                if let Some(line) = pending {
                    line.emit(sink);
                }
                return Ok(Streamed::Reply(response));
            }
            Some(Err(err)) => return Err(err),
            None => {
                return Err(ModelError::Stream(
                    "the reply stream ended without a reply".into(),
                ))
            }
        };
        if let Some(line) = pending.take() {
            line.emit(sink);
        }
        if let StreamEvent::TextDelta(text) = &event {
            partial.push_str(text);
        }
        show(sink, event);
    }
}

/// Shows one streamed event; tool calls and usage are shown once the reply is whole.
fn show(sink: &mut dyn Sink, event: StreamEvent) {
    match event {
        StreamEvent::TextDelta(delta) => sink.emit(&Event::Text { delta }),
        StreamEvent::ReasoningDelta(delta) => sink.emit(&Event::Reasoning { delta }),
        StreamEvent::ToolCallStart { .. } | StreamEvent::Usage(_) => {}
        StreamEvent::WebResults { query, results } => {
            sink.emit(&Event::WebResults { query, results })
        }
    }
}

/// Tells the user that attempt `attempt` failed and the request goes out again after `wait`; recorded, so
/// `show` prints it as the run did (a log that cannot take it still leaves the warning on screen).
fn announce_retry(
    log: &mut SessionLog,
    sink: &mut dyn Sink,
    err: &ModelError,
    wait: Duration,
    attempt: u32,
    max_attempts: u32,
) {
    let message = format!(
        "model request failed ({err}); retrying in {:.1} s (attempt {} of {max_attempts})",
        wait.as_secs_f64(),
        attempt + 1,
    );
    let event = Event::Warning { message };
    // On screen even when the log cannot take it: the log's failure shows at its next write, which ends the
    // turn.
    let _ = super::journal::keep(log, &event);
    sink.emit(&event);
}

/// Sends `request` without streaming anything to the user (the summary of a compaction); `None` when the turn
/// was cancelled.
pub(super) async fn quietly(
    client: &Client,
    retry: &RetryPolicy,
    request: &Request<'_>,
    control: &TurnControl,
) -> Option<Result<Response, ModelError>> {
    tokio::select! {
        result = client.send(request, retry).response() => Some(result),
        () = control.cancelled() => None,
    }
}
