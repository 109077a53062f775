//! Approval questions as ACP `session/request_permission` requests.
//!
//! The question refers to a tool call the client has already been shown: the agent emits the call's
//! `tool_call` before it asks, and both go through the one writer in order. The four answers are ACP's
//! option kinds: `allow_once`, `allow_always` (the policy remembers it for the session), `reject_once` and
//! `reject_always` (remembered here: the same command is refused without asking again). A rejection is a
//! refusal the model is told about; the `cancelled` outcome is a cancel: it cancels the turn, as
//! `session/cancel` would, instead of passing for a "no".

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::wire::Peer;
use crate::protocol::{Approval, ApprovalFuture, ApprovalRequest, Approver};

/// What the user rejected for good in one session: `tool\0subject`.
pub type Rejected = Arc<Mutex<HashSet<String>>>;

/// Asks the client for one session.
pub struct AcpApprover {
    peer: Peer,
    session: String,
    rejected: Rejected,
    /// Cancels the turn when the client answers `cancelled`.
    cancel: Box<dyn Fn() + Send>,
}

impl AcpApprover {
    pub fn new(
        peer: Peer,
        session: &str,
        rejected: Rejected,
        cancel: Box<dyn Fn() + Send>,
    ) -> Self {
        AcpApprover {
            peer,
            session: session.to_owned(),
            rejected,
            cancel,
        }
    }
}

impl Approver for AcpApprover {
    fn approve<'a>(&'a mut self, request: &'a ApprovalRequest) -> ApprovalFuture<'a> {
        let key = format!("{}\0{}", request.tool, request.subject);
        if lock(&self.rejected).contains(&key) {
            return Box::pin(std::future::ready(Approval::Reject));
        }
        let answer = self
            .peer
            .request("session/request_permission", params(&self.session, request));
        Box::pin(async move {
            let outcome = match answer.await {
                Ok(Ok(result)) => chosen(&result),
                // The client could not ask; nothing was approved.
                Ok(Err(error)) => {
                    eprintln!("git-agent acp: session/request_permission failed: {error}; refused");
                    Some("reject_once")
                }
                // The connection ended before the answer.
                Err(_) => None,
            };
            match outcome {
                Some("allow_once") => Approval::Once,
                Some("allow_always") => Approval::Always,
                Some("reject_always") => {
                    lock(&self.rejected).insert(key);
                    Approval::Reject
                }
                Some(_) => Approval::Reject,
                None => {
                    (self.cancel)();
                    Approval::Cancelled
                }
            }
        })
    }
}

/// The request: the call it is about (with the reason as its content), and the four options.
fn params(session: &str, request: &ApprovalRequest) -> Value {
    let option = |id: &str, name: &str| json!({"optionId": id, "name": name, "kind": id});
    json!({
        "sessionId": session,
        "toolCall": {
            "toolCallId": request.call_id,
            "title": request.subject,
            "content": [{"type": "content", "content": {"type": "text", "text": request.reason}}],
        },
        "options": [
            option("allow_once", "Allow once"),
            option("allow_always", "Allow always (this session)"),
            option("reject_once", "Reject"),
            option("reject_always", "Reject always (this session)"),
        ],
    })
}

/// The option the client chose; `None` for the `cancelled` outcome. An answer that names none of our
/// options approves nothing: it reads as `reject_once`.
fn chosen(result: &Value) -> Option<&'static str> {
    let outcome = &result["outcome"];
    if outcome["outcome"] == "cancelled" {
        return None;
    }
    let id = outcome["optionId"].as_str().unwrap_or_default();
    ["allow_once", "allow_always", "reject_once", "reject_always"]
        .into_iter()
        .find(|known| *known == id)
        .or(Some("reject_once"))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_by_option_id_and_unknown_ones_approve_nothing() {
        let selected = |id: &str| json!({"outcome": {"outcome": "selected", "optionId": id}});
        assert_eq!(chosen(&selected("allow_once")), Some("allow_once"));
        assert_eq!(chosen(&selected("reject_always")), Some("reject_always"));
        assert_eq!(chosen(&selected("yolo")), Some("reject_once"));
        assert_eq!(chosen(&json!({"outcome": {"outcome": "cancelled"}})), None);
        assert_eq!(chosen(&json!({})), Some("reject_once"));
    }
}
