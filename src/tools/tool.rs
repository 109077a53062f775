//! What every tool is made of: the [`Tool`] trait, the context a call runs in and the output it returns,
//! path confinement for the paths the model names, and the readers of a call's arguments. The tools build
//! on this; it names none of them.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use super::state::SessionState;
use crate::protocol::{Location, ToolKind, ToolSchema};
use crate::safety::beneath;
use crate::safety::path::{self, Access};
use crate::safety::{self, Action};

/// What a tool needs from the session it runs in.
#[derive(Clone, Debug)]
pub struct ToolContext {
    /// The session's checkout: every path the model gives is relative to it and confined to it.
    pub root: PathBuf,
    /// Default timeout of `run` commands.
    pub run_timeout: Duration,
    /// Set when the user interrupts (Ctrl-C): long-running tools stop as soon as they see it.
    pub cancel: Arc<AtomicBool>,
    /// What the session's tool calls share: read fingerprints (the stale-read guard), saved command
    /// output, background jobs.
    pub session: Arc<SessionState>,
    /// The sandbox `run` applies to its commands (background jobs included).
    pub sandbox: Arc<crate::safety::sandbox::Sandbox>,
}

impl ToolContext {
    /// True once the user interrupted.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The result of one tool call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolOutput {
    /// What the model sees.
    pub content: String,
    /// One line for the terminal (e.g. `12 matches in 3 files`, `exit 0`).
    pub summary: String,
    /// True when the call failed; `content` then says why, so the model can correct itself.
    pub is_error: bool,
    /// Repo-relative paths this call wrote or deleted (for the step commit). A tool whose changes are found
    /// by a scan of the checkout ([`Tool::changes_by_scan`], `run`) leaves this empty.
    pub changed: Vec<PathBuf>,
    /// Images for the model (`read_file` of a PNG, an MCP tool's image), sent after the result's text.
    pub images: Vec<crate::protocol::Image>,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>, summary: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            summary: summary.into(),
            ..Default::default()
        }
    }

    pub fn error(message: impl Into<String>) -> Self {
        let content = message.into();
        let summary = content.lines().next().unwrap_or_default().to_string();
        ToolOutput {
            content,
            summary,
            is_error: true,
            ..Default::default()
        }
    }
}

/// One tool: its schema, what it is, and its executor.
///
/// The loop never asks a tool's name what it does: the tool says it here (its kind, whether it mutates,
/// whether its changes must be found by a scan, which argument is its path or its command), so a tool added
/// at run time (MCP) is handled like the built-in ones.
pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// JSON schema of the arguments object.
    fn parameters(&self) -> serde_json::Value;
    /// What kind of thing the tool does, for front-ends that show calls by kind (ACP's `tool_call.kind`).
    fn kind(&self) -> ToolKind;
    /// Whether the tool may change files. Defaults to the defensive answer. Only a mutating tool's call can
    /// make a step commit.
    fn is_mutating(&self) -> bool {
        true
    }
    /// True when a call may change any file and cannot say which (a shell command): the agent finds its
    /// changes by scanning the checkout. Other tools list what they wrote in [`ToolOutput::changed`].
    fn changes_by_scan(&self) -> bool {
        false
    }
    /// The argument naming the file or directory a call works on, if the tool has one: the safety policy
    /// checks it against path rules, and reaching a directory loads the project instructions found there.
    fn path_arg(&self) -> Option<&str> {
        None
    }
    /// The argument holding a shell command line, if the tool runs one: the policy puts it through the
    /// guard and the `Run(...)` rules, and it is what an approval question shows.
    fn command_arg(&self) -> Option<&str> {
        None
    }
    /// The short label shown on the tool line, e.g. `search "parse_args"` or `edit src/cli.rs`.
    fn label(&self, args: &serde_json::Value) -> String;
    /// Where a call works, for front-ends that link to it (ACP's `locations`): its path argument, and the
    /// line it starts at when the tool takes one.
    fn location(&self, args: &serde_json::Value) -> Option<Location> {
        let path = self.path_arg().and_then(|arg| args.get(arg))?.as_str()?;
        Some(Location {
            path: path.to_owned(),
            line: None,
        })
    }
    /// Runs the call. `args` has already been parsed as JSON (but not validated against the schema).
    fn execute(&self, ctx: &ToolContext, args: &serde_json::Value) -> ToolOutput;

    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: self.name().into(),
            description: self.description().into(),
            parameters: self.parameters(),
        }
    }

    /// The call as the safety policy sees it: the tool's name, its kind in the rules' terms (`Read(...)` covers
    /// reading and searching tools, `Edit(...)` editing ones), and its command line or its path.
    fn checked<'a>(&'a self, args: &'a serde_json::Value) -> safety::Call<'a> {
        let kind = match self.kind() {
            ToolKind::Read | ToolKind::Search => safety::Kind::Read,
            ToolKind::Edit => safety::Kind::Edit,
            ToolKind::Execute | ToolKind::Think | ToolKind::Other => safety::Kind::Other,
        };
        let arg = |name: Option<&str>| name.and_then(|n| args.get(n)).and_then(|v| v.as_str());
        let action = if self.command_arg().is_some() {
            // A command tool called without its command is checked as the empty command line.
            Action::Command(arg(self.command_arg()).unwrap_or_default())
        } else {
            match arg(self.path_arg()) {
                Some(path) => Action::Path(path),
                None => Action::Other,
            }
        };
        safety::Call {
            tool: self.name(),
            kind,
            action,
        }
    }
}

/// Reads a string argument, or says which one is missing.
pub fn str_arg<'a>(args: &'a serde_json::Value, name: &str) -> Result<&'a str, String> {
    args.get(name)
        .and_then(|v| v.as_str())
        .ok_or_else(|| format!("missing required string argument `{name}`"))
}

/// The root-relative form of a confined path, for `ToolOutput::changed`.
pub fn relative(root: &Path, path: &Path) -> PathBuf {
    path.strip_prefix(root).unwrap_or(path).to_path_buf()
}

/// A path the model named, after confinement: where to open it, and how to show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confined {
    /// Absolute, under the canonical root; open this.
    pub abs: PathBuf,
    /// Relative to the root; empty for the root itself. Show this, and put it in `changed`.
    pub rel: PathBuf,
    /// The canonical root that `abs` starts with.
    pub root: PathBuf,
}

impl Confined {
    /// The relative path as the model should see it (`.` for the root).
    pub fn display(&self) -> String {
        crate::safety::path::display_rel(&self.rel)
    }

    /// Opens the file (or directory) read-only, refusing any symlink swapped in since the check.
    pub fn open_read(&self) -> io::Result<std::fs::File> {
        beneath::open_read(&self.root, &self.rel)
    }

    /// The file's text, at most `limit` bytes, opened as [`Confined::open_read()`] opens it.
    pub fn read_text(&self, limit: u64) -> io::Result<String> {
        beneath::read_text(&self.root, &self.rel, limit)
    }

    /// Replaces the file's content atomically (temp file + rename in its directory), never through a link.
    pub fn write_atomic(
        &self,
        bytes: &[u8],
        mode: Option<std::fs::Permissions>,
        create_dirs: bool,
    ) -> io::Result<()> {
        beneath::write_atomic(&self.root, &self.rel, bytes, mode, create_dirs)
    }

    /// An I/O error of this path as a sentence for the model; `verb` is `read` or `write`.
    pub fn io_error(&self, verb: &str, err: &io::Error) -> String {
        let shown = self.display();
        if beneath::is_link_refusal(err) {
            format!(
                "cannot {verb} '{shown}': a symlink appeared in the path after it was checked; refused"
            )
        } else if err.kind() == io::ErrorKind::NotFound {
            format!("'{shown}' does not exist; use list_files or search to find the file")
        } else {
            format!("cannot {verb} '{shown}': {err}")
        }
    }
}

/// Resolves a path argument through [`path::resolve`]; the error is a sentence for the model.
pub fn confine(ctx: &ToolContext, user_path: &str, access: Access) -> Result<Confined, String> {
    let abs = path::resolve(&ctx.root, user_path, access).map_err(|e| e.to_string())?;
    // `resolve` succeeded, so the root canonicalises; fall back to the given root rather than panic.
    let root = std::fs::canonicalize(&ctx.root).unwrap_or_else(|_| ctx.root.clone());
    let rel = relative(&root, &abs);
    Ok(Confined { abs, rel, root })
}

/// Reads an optional string argument; `null` counts as absent.
pub fn opt_str_arg<'a>(args: &'a serde_json::Value, name: &str) -> Result<Option<&'a str>, String> {
    match args.get(name) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => v
            .as_str()
            .map(Some)
            .ok_or_else(|| format!("argument `{name}` must be a string")),
    }
}

/// Reads an optional boolean argument, defaulting to false. Models sometimes send `"true"`; accept it.
pub fn bool_arg(args: &serde_json::Value, name: &str) -> Result<bool, String> {
    match args.get(name) {
        None | Some(serde_json::Value::Null) => Ok(false),
        Some(serde_json::Value::Bool(b)) => Ok(*b),
        Some(serde_json::Value::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
        Some(_) => Err(format!("argument `{name}` must be true or false")),
    }
}

/// Reads an optional non-negative integer argument. Models sometimes send `"20"` or `20.0`; accept those.
pub fn u64_arg(args: &serde_json::Value, name: &str) -> Result<Option<u64>, String> {
    let bad = || format!("argument `{name}` must be a non-negative integer");
    match args.get(name) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Number(n)) => match (n.as_u64(), n.as_f64()) {
            (Some(v), _) => Ok(Some(v)),
            (None, Some(f)) if f >= 0.0 && f.fract() == 0.0 && f < u64::MAX as f64 => {
                Ok(Some(f as u64))
            }
            _ => Err(bad()),
        },
        Some(serde_json::Value::String(s)) => s.trim().parse().map(Some).map_err(|_| bad()),
        Some(_) => Err(bad()),
    }
}

/// How many bytes to sniff for a NUL when deciding whether a file is binary (the same rule as git and rg).
pub const BINARY_SNIFF: usize = 8 * 1024;

/// True when the start of the content has a NUL byte.
pub fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_SNIFF)].contains(&0)
}

/// Shortens a label argument to its first line and about `max` characters.
pub fn short(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or_default();
    if first.chars().count() > max || first.len() < text.trim_end().len() {
        let cut: String = first.chars().take(max).collect();
        format!("{cut}…")
    } else {
        first.to_string()
    }
}

/// Cuts `line` to at most `max` characters, saying how long it was.
pub fn cut_line(line: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match line.char_indices().nth(max) {
        None => line.into(),
        Some((end, _)) => format!(
            "{} [... line cut: {} chars in total]",
            &line[..end],
            line.chars().count()
        )
        .into(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_labels() {
        assert_eq!(super::short("cargo test", 60), "cargo test");
        assert_eq!(super::short("cd x\nmake", 60), "cd x…");
        assert_eq!(
            super::short(&"a".repeat(70), 60),
            format!("{}…", "a".repeat(60))
        );
    }
}
