//! The stages of a tool call that the tool-call pipeline ([`super::call`]) and the explorers' read-only calls
//! ([`super::explore`]) share: the arguments parsed once, as a JSON object, or a message the model can act
//! on; the tool run on a blocking thread (file I/O, child processes; a cancel reaches it through
//! `ctx.cancel`); its result redacted before it goes anywhere (the provider, the log, a front-end). One copy
//! of each, so neither path can parse differently or run a tool without the redactor.

use std::sync::Arc;

use crate::protocol::ToolCall;
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

/// Parses a call's arguments as a JSON object, or says what is wrong in words the model can act on;
/// `truncated`: the reply was cut off by the output token limit at this call, so its arguments may only
/// look complete.
pub(super) fn parse_args(call: &ToolCall, truncated: bool) -> Result<serde_json::Value, String> {
    if truncated {
        return Err(format!(
            "the arguments of this {} call were cut off by the output token limit, so it was not run; \
             make the call again with shorter arguments (e.g. split a large write into several edits)",
            call.name
        ));
    }
    let text = call.arguments.trim();
    let args = if text.is_empty() {
        serde_json::Value::Object(Default::default())
    } else {
        serde_json::from_str(text)
            .map_err(|e| format!("the arguments are not valid JSON ({e}); send a JSON object"))?
    };
    if !args.is_object() {
        return Err("the arguments must be a JSON object".to_string());
    }
    Ok(args)
}
