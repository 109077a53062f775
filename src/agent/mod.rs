//! The agent: sessions and their turns. A turn sends the conversation and tool schemas, streams the reply, runs
//! the tools the model picked, commits what changed as one step on the session's branch, feeds the results
//! back, and repeats until the model answers without tool calls or a guard stops it.
//!
//! The seams, one file each:
//! - [`session`]: [`AgentSession`], what front-ends (ask, chat, ACP, hooks) hold: open (start or resume), turns,
//!   undo, model switch, compaction on demand, close (and the rollback of a session that never started);
//! - [`control`]: [`TurnControl`], the per-turn cancel and steering queue;
//! - `turn`: the loop and how a turn ends ([`TurnEnd`]);
//! - `call`: one tool call: parse, policy and approval, execute, and the agent's own tools;
//! - `step`: the step commit and its note;
//! - `stream`: one model request raced against the cancel;
//! - [`context`]: context accounting, pruning and compaction, on its own state;
//! - [`memory`]: project memory in a session (retrieval, the `remember` tool, the end-of-session writes);
//! - `guards` (budgets, loop guards), `instructions` (AGENTS.md), `prompt` (the system prompt), [`plan`],
//!   [`journal`] (what the session log's events mean), [`date`];
//! - [`check`] (running the project's check) and [`fix`] (`git agent fix`'s loop: turn, check, again).

mod call;
pub(crate) mod check;
pub(crate) mod context;
pub(crate) mod control;
pub(crate) mod date;
pub(crate) mod distill;
pub(crate) mod event_hooks;
pub(crate) mod explore;
pub(crate) mod fix;
pub(crate) mod footprint;
mod guards;
mod instructions;
pub(crate) mod journal;
mod lsp;
pub mod memory;
pub(crate) mod plan;
mod prompt;
pub(crate) mod session;
pub(crate) mod skills;
mod start;
mod step;
mod stream;
mod trim;
mod turn;

use crate::config::ModelConfig;
use crate::model::ModelError;
use crate::protocol::{Approver, Sink};
use crate::store::StoreError;

pub use context::Settings as ContextSettings;
pub use control::TurnControl;
pub use session::{record_undo, AgentSession, Resume, SafetyOptions, SessionOptions, Undone};
pub use turn::TurnEnd;

/// Exit code when the task stopped unfinished (budget, loop guard, blocked).
pub const EXIT_UNFINISHED: i32 = 3;
/// Exit code when the user interrupted.
pub const EXIT_INTERRUPTED: i32 = 130;
/// Exit code when SIGTERM (143) or SIGHUP (129) ended the session: 128 + the signal, as a shell reports a
/// process killed by it, so `timeout` and CI runners see what they expect.
pub fn exit_terminated(signal: i32) -> i32 {
    128 + signal
}

/// The error returned by [`AgentSession`]'s methods and [`ask()`]: host failures that end a turn. Failures the
/// model can fix are tool results, never errors.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("{source}")]
    Auth {
        source: ModelError,
        env: String,
        provider: String,
    },
    #[error("{source}")]
    Unreachable { source: ModelError, env: String },
    #[error("a tool task failed: {0}")]
    Join(String),
    /// A setting the session needs cannot be used as configured (`explore_model` names an unknown model).
    #[error("{0}")]
    Config(String),
}

impl AgentError {
    /// What the user can do about it, apart from the message (printed as `hint:` lines).
    pub fn hints(&self) -> Vec<String> {
        match self {
            AgentError::Auth { env, provider, .. } => {
                vec![format!("check {env}, the API key of the '{provider}' provider")]
            }
            AgentError::Unreachable { env, .. } => vec![format!(
                "is the model server running? The endpoint comes from {env} (or the provider's default)"
            )],
            _ => Vec::new(),
        }
    }
}

/// A model error with the hint the user needs: which key to check, where the endpoint comes from.
fn with_hint(err: ModelError, model: &ModelConfig) -> AgentError {
    match err {
        ModelError::Auth { .. } => AgentError::Auth {
            source: err,
            env: model.api_key_env.clone(),
            provider: model.provider.clone(),
        },
        ModelError::Connect { refused: true, .. } => AgentError::Unreachable {
            source: err,
            env: model.base_url_env.clone(),
        },
        err => AgentError::Model(err),
    }
}

/// Runs one task to completion (`git agent ask`): open a session, one turn with Ctrl-C, SIGTERM and SIGHUP
/// wired to its cancel, close. Returns the process exit code.
pub async fn ask(
    cwd: &std::path::Path,
    prompt: &str,
    mut options: SessionOptions,
    sink: &mut dyn Sink,
    approver: &mut dyn Approver,
) -> Result<i32, AgentError> {
    options.title.get_or_insert_with(|| prompt.to_owned());
    let control = TurnControl::new();
    let signals = control.cancel_on_signals();
    let result = async {
        let mut session = AgentSession::open(cwd, options, sink).await?;
        let end = session.turn(prompt, sink, approver, &control).await;
        session.shutdown_mcp().await;
        session.close();
        end
    }
    .await;
    signals.abort();
    Ok(result?.exit_code)
}
