//! The reply stream the agent pulls from: one request, sent again as the retry policy allows, read as the
//! caller asks for the next item.
//!
//! The caller owns the loop (`while let Some(item) = stream.next().await`), so it writes to its own sink
//! with no callback and no lock, and races each pull against its cancel: dropping the stream drops the
//! connection, and the provider stops generating.

use std::time::Duration;

use super::http::Reply;
use super::retry::RetryPolicy;
use super::types::{ModelError, Request, Response, StreamEvent};
use super::Client;

/// One item of a [`ReplyStream`].
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

/// Where a [`ReplyStream`] is between two pulls.
enum State<'a> {
    /// The request is to be sent (again).
    Send,
    /// A failed attempt's wait before the next one.
    Wait(Duration),
    /// An attempt's reply is being read.
    Read(Reply<'a>),
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
    pub(super) fn new(
        client: &'a Client,
        request: &'a Request<'a>,
        policy: &'a RetryPolicy,
    ) -> Self {
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
                    Ok(reply) => self.state = State::Read(reply),
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
