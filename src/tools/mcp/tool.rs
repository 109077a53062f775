//! MCP tools as the agent's [`Tool`]s, so a call to one goes the way every call goes: the policy (as
//! `Mcp(<server>/<tool>)`, approval unless read-only), the tool line, the session log, notes and `--json`.
//!
//! Any tool may change files in the checkout (a filesystem server, a git server), and cannot say which: like
//! `run`, its changes are found by a scan and become a step commit. That holds for tools marked read-only
//! too: `readOnlyHint` is the server's word, not a guarantee, and a "read-only" tool's writes used to vanish
//! from `diff` and `accept` (issue 23, finding 9). The hint decides only whether the call needs approval.

use std::sync::Arc;

use serde_json::Value;

use super::servers::{Called, McpTool, Servers, SEARCH_TOOL};
use crate::protocol::ToolKind;
use crate::safety::{self, Action};
use crate::tools::{short, Tool, ToolContext, ToolOutput};

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.def.input_schema.clone()
    }

    fn kind(&self) -> ToolKind {
        if self.def.read_only {
            ToolKind::Read
        } else {
            ToolKind::Other
        }
    }

    fn is_mutating(&self) -> bool {
        !self.def.read_only
    }

    fn changes_by_scan(&self) -> bool {
        true
    }

    fn label(&self, args: &Value) -> String {
        let shown = match args.as_object() {
            Some(map) if map.is_empty() => String::new(),
            _ => format!(" {}", short(&args.to_string(), 60)),
        };
        format!("{}/{}{shown}", self.server, self.def.name)
    }

    fn checked<'a>(&'a self, _args: &'a Value) -> safety::Call<'a> {
        safety::Call {
            tool: &self.name,
            kind: if self.def.read_only {
                safety::Kind::Read
            } else {
                safety::Kind::Other
            },
            action: Action::Mcp {
                server: &self.server,
                tool: &self.def.name,
                read_only: self.def.read_only,
            },
        }
    }

    fn execute(&self, ctx: &ToolContext, args: &Value) -> ToolOutput {
        match self.call_blocking(args, &ctx.cancel) {
            Called::Result { rendered, progress } => {
                let mut summary = rendered.summary;
                if let Some(p) = progress {
                    let total = p.total.map(|t| format!("/{t}")).unwrap_or_default();
                    summary.push_str(&format!(" (progress {}{total})", p.progress));
                }
                let source = format!("{} image", self.def.name);
                let (notes, images) = attach_images(&rendered.images, &source, ctx);
                ToolOutput {
                    content: rendered.content + &notes,
                    summary,
                    is_error: rendered.is_error,
                    images,
                    ..Default::default()
                }
            }
            Called::Cancelled => ToolOutput::error(
                "interrupted by the user; the MCP server was told to stop the call",
            ),
            Called::Failed(message) => ToolOutput::error(format!("the MCP call failed: {message}")),
        }
    }
}

/// The lazy-discovery tool: finds MCP tools by words and makes them callable from the next request on.
pub struct SearchTool {
    pub servers: Servers,
}

impl Tool for SearchTool {
    fn name(&self) -> &str {
        SEARCH_TOOL
    }

    fn description(&self) -> &str {
        "Find tools of the user's MCP servers by a few words of what you need"
    }

    fn parameters(&self) -> Value {
        serde_json::json!({
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"]
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    fn is_mutating(&self) -> bool {
        false
    }

    fn label(&self, args: &Value) -> String {
        let query = args
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or_default();
        format!("search MCP tools {:?}", short(query, 60))
    }

    fn execute(&self, _ctx: &ToolContext, args: &Value) -> ToolOutput {
        match crate::tools::str_arg(args, "query") {
            Ok(query) => {
                let found = self.servers.search(query);
                let summary = found.lines().next().unwrap_or_default().to_string();
                ToolOutput::ok(found, summary)
            }
            Err(message) => ToolOutput::error(message),
        }
    }
}

impl Servers {
    /// The tool the model calls `name`: an MCP tool (waiting for a server that is still starting), or the
    /// search tool while it is offered.
    pub async fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        if name == SEARCH_TOOL {
            let offered = self.offered().iter().any(|s| s.name == SEARCH_TOOL);
            return offered.then(|| {
                Arc::new(SearchTool {
                    servers: self.clone(),
                }) as Arc<dyn Tool>
            });
        }
        let tool = self.find_or_wait(name).await?;
        Some(Arc::new(tool))
    }
}

/// The images of a result, each checked (its bytes are an image of a known type, within the size cap) and
/// attached, with a line for each that is not (the model learns why it sees no image).
fn attach_images(
    blocks: &[(String, String)],
    source: &str,
    ctx: &ToolContext,
) -> (String, Vec<crate::protocol::Image>) {
    let policy = ctx.session.images;
    let mut notes = String::new();
    let mut images = Vec::new();
    for (n, (mime, data)) in blocks.iter().enumerate() {
        let name = format!("{source} {}", n + 1);
        let checked = if !policy.vision {
            Err("the model does not take images (vision = false)".to_owned())
        } else {
            crate::tools::image::decode(data)
                .ok_or_else(|| format!("its data is not base64 ({mime})"))
                .and_then(|bytes| {
                    crate::tools::image::from_bytes(&bytes, &name, policy.max_size)
                        .map_err(|e| e.to_string())
                })
        };
        match checked {
            Ok(image) => {
                notes.push_str(&format!("\n[{name} is attached as an image]"));
                images.push(image);
            }
            Err(why) => notes.push_str(&format!("\n[{name} not shown: {why}]")),
        }
    }
    (notes, images)
}
