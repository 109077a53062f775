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

pub mod agent;
pub(crate) mod cli;
pub mod config;
pub mod lsp;
pub mod model;
pub mod protocol;
pub mod safety;
pub mod sse;
pub mod store;
/// The one door to the OS (see its docs); public for the binary's start-up.
pub mod sys;
#[cfg(test)]
mod testing;
pub mod tools;
pub(crate) mod ui;

pub use cli::{answer_version, run};
