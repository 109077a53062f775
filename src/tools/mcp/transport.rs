//! What the client and its transports share: the limits and versions of the protocol, its error, the messages a
//! transport hands the client, and the redacted tail of a server's stderr.

use std::time::Duration;

use super::jsonrpc::{self, RpcError};

/// The most one message from a server may hold, in bytes. A bigger one is skipped as it streams in, never
/// held: a 100 MB tool result made the agent peak at 424 MB (issue 23, finding 17), and no model reads that
/// much anyway (a result is cut to its head and tail before the model sees it).
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// The protocol version we ask for.
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// The versions we accept from a server, newest first.
pub const SUPPORTED_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The error of a connection or a request to a server.
#[derive(Clone, Debug, thiserror::Error)]
pub enum McpError {
    #[error("cannot start `{command}`: {message}")]
    Spawn { command: String, message: String },
    #[error("cannot reach {url}: {message}")]
    Connect { url: String, message: String },
    #[error("HTTP {status} from {url}: {message}")]
    Http {
        status: u16,
        url: String,
        message: String,
    },
    /// HTTP 404 to a request carrying a session id: the server forgot the session; initialise again.
    #[error("the server ended the MCP session (HTTP 404)")]
    SessionExpired,
    #[error("the server closed the connection{}", if .0.is_empty() { String::new() } else { format!(": {}", .0) })]
    Closed(String),
    #[error("no answer to {method} within {} s", .after.as_secs_f64())]
    Timeout { method: String, after: Duration },
    #[error("the server answered {method} with an error: {error}")]
    Rpc { method: String, error: RpcError },
    #[error("the server speaks MCP {0}, which this client does not (it knows {known})", known = SUPPORTED_VERSIONS.join(", "))]
    Version(String),
    #[error("the server broke the protocol: {0}")]
    Protocol(String),
    #[error("cancelled")]
    Cancelled,
    #[error("the server's answer is larger than {} MB, the most one message may hold; it was skipped (ask the tool for less)", MAX_MESSAGE_BYTES >> 20)]
    TooLarge,
}

/// What a transport hands the client, in arrival order.
#[derive(Debug)]
pub(crate) enum Inbound {
    Message(jsonrpc::Incoming),
    /// The answer to request `id` will never come (its event stream ended without it).
    Lost {
        id: u64,
        reason: String,
    },
    /// A message bigger than [`MAX_MESSAGE_BYTES`] was skipped; `id` is the request it seemed to answer.
    TooLarge {
        id: Option<u64>,
    },
    /// The connection is gone for good (the process closed its output).
    Closed(String),
    /// Something that is not a JSON-RPC message, kept for diagnostics.
    Garbage(String),
}

pub(crate) type InboundTx = tokio::sync::mpsc::UnboundedSender<Inbound>;

/// The last lines a server wrote to stderr (or logged), for diagnostics when it fails.
///
/// Every line passes the redactor before it is kept: a failing server's stderr is shown on the terminal, in
/// the `--json` `mcp` event and by `mcp check`, and servers print the env values and tokens they were given
/// (issue 23, finding 4). The redactor is the process-wide one plus this server's own env and header values.
#[derive(Debug, Default)]
pub struct Tail {
    lines: std::collections::VecDeque<String>,
    redactor: crate::safety::redact::Redactor,
}

impl Tail {
    /// Lines kept.
    pub const LINES: usize = 20;
    /// Characters kept of one line.
    const WIDTH: usize = 300;

    /// A tail whose lines are redacted of the process-wide secrets and of `secrets` (a server's env and
    /// header values, whatever their names).
    pub fn with_secrets<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Tail {
        let mut redactor = crate::safety::redact::with_global(Clone::clone);
        for value in secrets {
            redactor.add_known(value, "MCP server setting");
            if let Some(token) = value.trim().strip_prefix("Bearer ") {
                redactor.add_known(token, "MCP server setting");
            }
        }
        Tail {
            lines: Default::default(),
            redactor,
        }
    }

    /// `text` redacted as the lines are.
    pub fn redact(&self, text: &str) -> String {
        self.redactor.redact(text).into_owned()
    }

    pub fn push(&mut self, line: &str) {
        let line = self.redactor.redact(line.trim_end()).into_owned();
        let line = line.as_str();
        if line.is_empty() {
            return;
        }
        if self.lines.len() == Self::LINES {
            self.lines.pop_front();
        }
        let line = match line.char_indices().nth(Self::WIDTH) {
            Some((end, _)) => format!("{}…", &line[..end]),
            None => line.to_string(),
        };
        // Server output may carry escape sequences; the terminal shows it, so it goes through the one
        // neutraliser (as one line: a tab or newline cannot forge the next line either).
        self.lines
            .push_back(crate::protocol::Untrusted::name(&line).to_string());
    }

    /// The last `n` lines, oldest first.
    pub fn last(&self, n: usize) -> Vec<String> {
        let skip = self.lines.len().saturating_sub(n);
        self.lines.iter().skip(skip).cloned().collect()
    }
}

/// A shared [`Tail`].
pub type SharedTail = std::sync::Arc<std::sync::Mutex<Tail>>;
