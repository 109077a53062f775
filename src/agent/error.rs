//! How a session ends when it does not end well: the exit codes of an unfinished or interrupted task, and
//! the host failures that end a turn ([`AgentError`]). Every part of the agent returns these; they name
//! no part of it but the check's error.

use crate::config::ModelConfig;
use crate::model::ModelError;
use crate::store::StoreError;

/// Exit code when the task stopped unfinished (budget, loop guard, blocked).
pub const EXIT_UNFINISHED: i32 = 3;
/// Exit code when the user interrupted.
pub const EXIT_INTERRUPTED: i32 = 130;
/// Exit code when SIGTERM (143) or SIGHUP (129) ended the session: 128 + the signal, as a shell reports a
/// process killed by it, so `timeout` and CI runners see what they expect.
pub fn exit_terminated(signal: i32) -> i32 {
    128 + signal
}

/// The error returned by `AgentSession`'s methods and `agent::ask()`: host failures that end a turn. Failures the
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
    /// The provider refused a request that carried an image: the model may take none.
    #[error("{source}")]
    ImageRefused {
        source: ModelError,
        provider: String,
        model: String,
    },
    /// The session's start (step 0, branch, checkout) failed earlier in this process: its checkout is
    /// not there to work in.
    #[error("the session's checkout could not be made (its start failed); start a new session")]
    StartFailed,
    /// A setting the session needs cannot be used as configured (`explore_model` names an unknown model).
    #[error("{0}")]
    Config(String),
    /// The check of `fix` could not be started or sandboxed (the user's command or setup, not the agent's).
    #[error(transparent)]
    Check(#[from] super::check::CheckError),
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
            AgentError::ImageRefused {
                provider, model, ..
            } => vec![format!(
                "the request carried an image: if {model} takes none, set vision = false in \
                 [providers.{provider}] (images are then refused before a request) or use a model with vision"
            )],
            _ => Vec::new(),
        }
    }
}

/// True when `err` is a provider's refusal of a request whose conversation holds an image (a model without
/// vision answers 400 or 422, or 413 for an image it finds too large): the user needs to hear about images,
/// not only the provider's words.
pub(super) fn refused_an_image(err: &ModelError, messages: &[crate::protocol::Message]) -> bool {
    matches!(
        err,
        ModelError::Http {
            status: 400 | 413 | 415 | 422,
            ..
        }
    ) && messages
        .iter()
        .any(|m| matches!(m, crate::protocol::Message::Image { .. }))
}

/// A model error with the hint the user needs: which key to check, where the endpoint comes from.
pub(super) fn with_hint(err: ModelError, model: &ModelConfig) -> AgentError {
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
