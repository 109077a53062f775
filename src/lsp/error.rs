//! The error of a language server or of one request to it.

use std::time::Duration;

/// The error of a server or of one request to it.
#[derive(Clone, Debug, thiserror::Error)]
pub enum LspError {
    #[error("cannot start `{command}`: {message}")]
    Spawn { command: String, message: String },
    #[error("the language server stopped: {0}")]
    Closed(String),
    #[error("no answer to {method} within {} s", .after.as_secs_f64())]
    Timeout { method: String, after: Duration },
    #[error("the language server answered {method} with an error: {message}")]
    Rpc { method: String, message: String },
}
