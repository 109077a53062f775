//! The MCP client: tools from Model Context Protocol servers the user configured.
//!
//! A server is a child process speaking newline-delimited JSON-RPC on stdio ([`stdio`]) or an HTTP endpoint
//! speaking Streamable HTTP ([`http`]); [`client::Client`] does the protocol on top of either: the
//! `initialize` handshake, paginated `tools/list`, `tools/call` with progress and cancellation, and the
//! answers to the server's own requests (`ping`, `roots/list`). [`render`] turns a call's result into the
//! text the model reads, and [`names`] makes the names the model sees (`mcp__<server>__<tool>`).
//!
//! What is configured where (config.toml, `.mcp.json`) is `config::mcp`'s business, and so is the
//! [`ServerSpec`] it makes; this module only connects to one.

pub mod client;
pub mod http;
pub mod jsonrpc;
pub mod names;
pub mod render;
pub mod schema;
pub mod servers;
pub mod stdio;
pub mod tool;
mod transport;

use std::time::Duration;

pub use client::{Client, Failure, Progress, ToolDef};
// What to connect to is configuration (`config::mcp` parses it); this module only consumes it.
pub use crate::config::mcp::{ServerSpec, TransportSpec};
pub use transport::{McpError, Tail};

/// A server started, its handshake done and its tools listed.
#[derive(Clone, Debug)]
pub struct Started {
    pub client: Client,
    /// The tools the spec's filters let through.
    pub tools: Vec<ToolDef>,
    /// How many tools the filters held back.
    pub filtered: usize,
}

/// Starts a server and lists its tools, all within its startup timeout; on failure the server is stopped
/// and the error comes with its last stderr lines. `root` is the checkout.
pub async fn start(spec: &ServerSpec, root: &std::path::Path) -> Result<Started, Failure> {
    let begun = std::time::Instant::now();
    let client = Client::connect(spec, root).await?;
    let left = spec
        .startup_timeout
        .saturating_sub(begun.elapsed())
        .max(Duration::from_millis(500));
    match client.list_tools(left).await {
        Ok(all) => {
            let total = all.len();
            let tools: Vec<ToolDef> = all.into_iter().filter(|t| spec.offers(&t.name)).collect();
            Ok(Started {
                client,
                filtered: total - tools.len(),
                tools,
            })
        }
        Err(error) => {
            let stderr = client.diagnostics(Tail::LINES);
            client.shutdown().await;
            Err(Failure {
                message: error.to_string(),
                stderr,
            })
        }
    }
}
