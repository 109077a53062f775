//! The one-shot answer to "context length exceeded": make room by dropping old tool output.
//!
//! Tool results are by far the largest part of a coding session's context, and the old ones matter least:
//! the model has acted on them already. Replacing all but the latest with a short marker keeps every
//! message (and so the pairing of calls and results that the APIs require) while freeing most of the space.
//! Proper compaction (summaries, budgets) belongs to the context-engineering layer; this is the fallback
//! that keeps a long session alive instead of failing it.

use crate::protocol::Message;

/// What replaces a dropped tool result.
pub(crate) const MARKER: &str =
    "[output removed to fit the context window; run the tool again if you need it]";

/// Replaces the content of every tool result except the latest one with [`MARKER`]. Returns false when
/// there was nothing to remove, so the caller can give up instead of sending the same request again.
pub(crate) fn old_tool_results(messages: &mut [Message]) -> bool {
    let latest = messages
        .iter()
        .rposition(|m| matches!(m, Message::Tool { .. }));
    let mut changed = false;
    for (i, message) in messages.iter_mut().enumerate() {
        if let Message::Tool { content, .. } = message {
            if Some(i) != latest && content != MARKER {
                *content = MARKER.to_string();
                changed = true;
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(content: &str) -> Message {
        Message::Tool {
            tool_call_id: "c".into(),
            content: content.into(),
        }
    }

    #[test]
    fn keeps_the_latest_result_and_trims_once() {
        let mut messages = vec![tool("big one"), tool("big two"), tool("latest")];
        assert!(old_tool_results(&mut messages));
        assert_eq!(messages, vec![tool(MARKER), tool(MARKER), tool("latest")]);
        assert!(!old_tool_results(&mut messages));
        assert!(!old_tool_results(&mut [tool("only")]));
    }
}
