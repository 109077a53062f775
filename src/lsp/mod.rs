//! Language servers: what broke after an edit, where a symbol lives, and semantic renames (issue 25).
//!
//! A session keeps one [`Pool`]: one server per (language, workspace root) of its checkout, started lazily
//! on the first file of its language that a tool touches, reused, and shut down with the session. Only
//! servers the user has (a default's binary on PATH, the user's `[lsp.<name>]` tables) or trusted (a
//! repository's tables) ever start ([`spec`]). [`client`] speaks the protocol; [`delta`] turns published
//! diagnostics into the new problems a change made; [`ops`] answers the `lsp` tool and computes the edits
//! of `rename` and `replace_symbol`.

pub mod client;
pub mod delta;
pub mod frame;
pub mod ops;
pub mod pool;
pub mod spec;
pub mod uri;

pub use pool::{Pool, PoolOptions, ServerState};

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
