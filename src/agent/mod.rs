//! The agent: sessions and their turns. A turn sends the conversation and tool schemas, streams the reply, runs
//! the tools the model picked, commits what changed as one step on the session's branch, feeds the results
//! back, and repeats until the model answers without tool calls or a guard stops it.
//!
//! The seams, one file each:
//! - [`session`]: [`AgentSession`], what front-ends (ask, chat, ACP, hooks) hold: open (start or resume), turns,
//!   undo, model switch, compaction on demand, close (and the rollback of a session that never started);
//! - [`control`]: [`TurnControl`], the per-turn cancel and steering queue;
//! - `parts`: what a session's turns work on (workspace, model link, toolbox, conversation), below both the
//!   session that owns them and the turn that borrows them;
//! - `turn`: the loop and how a turn ends ([`TurnEnd`]);
//! - `call`: the tool-call pipeline (`ToolPipeline`): parse, guards, hooks, policy and approval, execute,
//!   change scan, step; the agent's own tools, `explore` and the `agent` subagent tool run through it;
//! - `stages` (the arguments parsed once, a tool run on a blocking thread, its result redacted), `step`
//!   (the step commit and its note), [`explore`] (the explorers' child loops, the subagents' schemas): the
//!   pipeline's leaves;
//! - `stream`: one model request raced against the cancel;
//! - [`context`]: context accounting, pruning and compaction, on its own state;
//! - [`memory`]: project memory in a session (retrieval, the `remember` tool, the end-of-session writes);
//! - `guards` (budgets, loop guards), `instructions` (AGENTS.md), `prompt` (the system prompt), [`plan`],
//!   [`journal`] (what the session log's events mean), [`date`];
//! - [`check`] (running the project's check) and [`fix`] (`git agent fix`'s loop: turn, check, again).
//!
//! Dependencies run one way: session, turn, call (the pipeline), step, parts, then the leaves (explore,
//! stages, memory, guards, journal, ...); no file needs one above it (tests/architecture.rs fails on any
//! cycle between files).

mod call;
pub(crate) mod check;
pub(crate) mod context;
pub(crate) mod control;
pub(crate) mod date;
pub(crate) mod distill;
mod error;
pub(crate) mod event_hooks;
pub(crate) mod explore;
pub(crate) mod fix;
pub(crate) mod footprint;
mod guards;
mod instructions;
pub(crate) mod journal;
mod lsp;
pub mod memory;
mod parts;
pub(crate) mod plan;
mod prompt;
pub(crate) mod session;
pub(crate) mod skills;
mod stages;
mod start;
mod step;
mod stream;
#[cfg(test)]
mod test_git;
mod trim;
mod turn;
mod window_cache;

use crate::protocol::{Approver, Sink};

pub use control::TurnControl;
pub use error::{exit_terminated, AgentError, EXIT_INTERRUPTED, EXIT_UNFINISHED};
pub use session::{record_undo, AgentSession, Resume, SafetyOptions, SessionOptions};
pub use turn::TurnEnd;

/// Runs one task to completion (`git agent ask`): open a session, one turn with Ctrl-C, SIGTERM and SIGHUP
/// wired to its cancel, close. Returns the process exit code.
pub async fn ask(
    cwd: &std::path::Path,
    prompt: &str,
    images: Vec<crate::protocol::Image>,
    mut options: SessionOptions,
    sink: &mut dyn Sink,
    approver: &mut dyn Approver,
) -> Result<i32, AgentError> {
    options.title.get_or_insert_with(|| prompt.to_owned());
    let control = TurnControl::new();
    let signals = control.cancel_on_signals();
    let result = async {
        let mut session = AgentSession::open(cwd, options, sink).await?;
        if let Err(err) = session.attach_images(images) {
            session.close();
            return Err(err);
        }
        let end = session.turn(prompt, sink, approver, &control).await;
        session.shutdown_mcp().await;
        session.close();
        end
    }
    .await;
    signals.abort();
    Ok(result?.exit_code)
}
