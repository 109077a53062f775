//! git-agent: a git-native coding agent.
//!
//! Data flows one way: `cli` -> `agent` -> (`model`, `tools`) -> `store`; `safety` sits in front of every
//! tool call; `ui` only listens to events.

// Gated until the model, tools and store modules land (WIP, lead).
#[cfg(any())]
pub mod agent;
#[cfg(any())]
pub mod cli;
pub mod config;
pub mod model;
pub mod safety;
pub mod store;
pub mod tools;
pub mod ui;

#[cfg(any())]
pub use cli::run;

/// Temporary entry point while the modules land.
pub fn run() -> i32 {
    0
}
