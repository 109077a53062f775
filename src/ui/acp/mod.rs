//! The Agent Client Protocol front-end's listening half: the wire ([`wire`]: JSON-RPC framing, the one
//! writer, requests to the client), the session's events as `session/update`s ([`AcpSink`]) and approval
//! questions as `session/request_permission` ([`AcpApprover`]). What drives sessions (`initialize`,
//! `session/new`, `session/prompt`, ...) is `git agent acp` in `cli`, which may use the agent.

mod approver;
mod sink;
pub mod wire;

pub use approver::{AcpApprover, Rejected};
pub use sink::AcpSink;
