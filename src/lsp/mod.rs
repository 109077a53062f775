//! Language servers: what broke after an edit, where a symbol lives, and semantic renames (issue 25).
//!
//! A session keeps one [`Pool`]: one server per (language, workspace root) of its checkout, started lazily
//! on the first file of its language that a tool touches, reused, and shut down with the session. Only
//! servers the user has (a default's binary on PATH, the user's `[lsp.<name>]` tables) or trusted (a
//! repository's tables) ever start ([`spec`]). [`client`] speaks the protocol; [`delta`] turns published
//! diagnostics into the new problems a change made; [`ops`] answers the `lsp` tool and computes the edits
//! of `rename` and `replace_symbol`.
//!
//! The module stands on its own (protocol, safety, store, config, and MCP's JSON-RPC message shapes): the tools
//! use it, it uses no tool.

pub mod client;
pub mod delta;
pub mod error;
pub mod frame;
pub mod ops;
pub mod pool;
pub mod spec;
pub mod text;
pub mod uri;

/// The largest file whose text a server is given or a location is quoted from (a file a command wrote can be
/// anything: bounded, and never a FIFO, through [`crate::safety::beneath::read_text()`]).
pub const MAX_FILE_TEXT: u64 = 64 << 20;
