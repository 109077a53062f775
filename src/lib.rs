//! git-agent: a git-native coding agent.
//!
//! Data flows one way: `cli` -> `agent` -> (`model`, `tools`) -> `store`; `safety` sits in front of every
//! tool call; `ui` only listens to events. The modules, by concern:
//!
//! - [`protocol`]: the shared vocabulary, a leaf: messages, tool calls and schemas, usage, the agent's output
//!   [`protocol::Event`]s and their [`protocol::Sink`], session [`protocol::Status`], and the question a
//!   risky call puts to an [`protocol::Approver`] (terminal, chat, ACP, `Never` for hooks and CI).
//! - [`cli`]: the command edge: argument parsing, one [`cli::Context`] per command, typed errors and exit
//!   codes; `chat`'s REPL, the ACP server and the hooks live under it as front-ends.
//! - [`agent`]: sessions and the turn loop ([`agent::AgentSession`]): requests, tool dispatch, step commits,
//!   context accounting, memory, skills, the explore subagent, `fix`'s attempt loop.
//! - [`model`]: the provider clients (OpenAI-compatible, Anthropic), retries, the context-window probe.
//! - [`tools`]: the tools the model calls ([`tools::Tool`], a registry) and the MCP client.
//! - [`store`]: everything in git: sessions, step commits, checkouts and the worktree pool, notes, memory,
//!   skills, review records, landing into the user's tree.
//! - [`safety`]: a leaf that decides: command guard, permission rules, sandbox, secret redaction, withholding.
//! - [`config`]: the config files (user, repository, `.mcp.json`) read into typed settings.
//! - [`ui`]: the listeners: the human renderer, `--json`, chat's screen, the ACP sink.
//! - [`sse`]: the Server-Sent Events decoder both the model clients and MCP's HTTP transport read with.

// Tests may unwrap: a panic there is a failed test. Library code may not (Cargo.toml [lints]).
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

// The modules are the crate's own: what the binary, the integration tests and the benches reach is re-exported
// below by name, so the surface they depend on stays small and the compiler reports code nothing in the crate
// uses (issue 24 item 7: `pub mod` hid 33 dead-code warnings).
pub(crate) mod agent;
pub(crate) mod cli;
pub(crate) mod config;
pub(crate) mod lsp;
pub(crate) mod model;
pub(crate) mod protocol;
pub(crate) mod safety;
pub(crate) mod sse;
pub(crate) mod store;
pub(crate) mod sys;
#[cfg(test)]
mod testing;
pub(crate) mod tools;
pub(crate) mod ui;

pub use cli::{answer_version, run};

/// What the binary (src/main.rs) does before it runs a command: timings, the allocator, a clean
/// environment for the commands the agent runs.
pub mod startup {
    pub use crate::safety::secrets::scrub_environment;
    pub use crate::sys::alloc::tune_for_small_heap;
    pub use crate::sys::entry::before_main;
    pub use crate::sys::image::release_relocations;
    pub use crate::sys::timings::{init as init_timings, mark, Detail};
}

/// The agent as a library, as tests/session_api.rs drives it: a session, the options it opens with, the
/// events it emits.
pub mod session {
    pub use crate::agent::{AgentSession, SafetyOptions, SessionOptions, TurnControl, TurnEnd};
    pub use crate::config::memory::MemorySettings;
    pub use crate::config::resolve as resolve_model;
    pub use crate::config::Settings;
    pub use crate::model::retry::RetryPolicy;
    pub use crate::protocol::{Event, Never, Sink, Status};
    pub use crate::safety::rules::Rules;
    pub use crate::safety::sandbox::{Mode, SandboxConfig};
}

/// What this machine can isolate, for the tests that expect a sandbox only where there can be one.
pub mod platform {
    pub use crate::safety::isolate::probe_afresh as isolation;
    pub use crate::safety::sandbox::landlock_abi;
}

/// The parts the benches (benches/bench) time below the binary: the SSE decoder and the model client's
/// parser, two tools, the store's change detection, project memory's ranking.
pub mod bench {
    pub use crate::agent::memory::{policy, rank};
    pub use crate::config::memory::MemorySettings;
    pub use crate::model::openai::{ChunkParser, OpenAiClient};
    pub use crate::model::retry::RetryPolicy;
    pub use crate::model::{Client, Request};
    pub use crate::protocol::{Message, Status};
    pub use crate::safety::sandbox::Sandbox;
    pub use crate::sse::SseDecoder;
    pub use crate::store::memory::{Entry, Kind, MemoryEdit, Source};
    pub use crate::store::{ChangeTracker, Detection, Meta, Scan, Store};
    pub use crate::tools::edit::EditFile;
    pub use crate::tools::search::Search;
    pub use crate::tools::{SessionState, Tool, ToolContext};
}
