//! The execute stage of a tool call: the tool runs on a blocking thread (file I/O, child processes; a
//! cancel reaches it through `ctx.cancel`), and its result is redacted before it goes anywhere (the
//! provider, the log, a front-end). One function for the tool-call pipeline ([`super::call`]) and for the
//! explorers' read-only calls ([`super::explore`]), so neither can run a tool without the redactor.

use std::sync::Arc;

use crate::safety::redact;
use crate::tools::{Tool, ToolContext, ToolOutput};

/// Runs `tool` with `args` on a blocking thread and redacts what it returned; an error when the thread
/// panicked or was cancelled.
pub(super) async fn run_blocking(
    tool: Arc<dyn Tool>,
    ctx: ToolContext,
    args: serde_json::Value,
) -> Result<ToolOutput, tokio::task::JoinError> {
    let mut output = tokio::task::spawn_blocking(move || tool.execute(&ctx, &args)).await?;
    redact_output(&mut output);
    Ok(output)
}

/// Redacts a tool result: the user's keys and the other known secrets never leave, whatever printed them (a
/// test dumping its environment, an MCP server echoing its token) and at whatever depth the call ran (the
/// parent or an explorer).
fn redact_output(output: &mut ToolOutput) {
    output.content = redact::redact_known(&output.content);
    output.summary = redact::redact_known(&output.summary);
}
