//! git-agent: a git-native coding agent.
//!
//! Data flows one way: `cli` -> `agent` -> (`model`, `tools`) -> `store`; `safety` sits in front of every
//! tool call; `ui` only listens to events.

// Tests may unwrap: a panic there is a failed test. Library code may not (Cargo.toml [lints]).
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod agent;
pub mod cli;
pub mod config;
pub mod model;
pub mod protocol;
pub mod safety;
pub mod sse;
pub mod store;
pub mod tools;
pub mod ui;

pub use cli::run;
