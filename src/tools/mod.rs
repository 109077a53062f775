//! The tools the model can call. One definition per tool feeds both the schema sent to the model
//! ([`Tool::schema`]) and the executor ([`Tool::execute`]).
//!
//! A failure the model can fix (bad arguments, a missing file, a non-unique match) is returned to it as an
//! error [`ToolOutput`]; only host failures would abort a turn, and tools have none of those.

pub mod edit;
pub mod list;
pub mod read;
pub mod search;
pub mod shell;
pub mod write;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use crate::model::ToolSchema;
use crate::safety::path::{self, Access};

/// What a tool needs from the session it runs in.
#[derive(Clone, Debug)]
pub struct ToolContext {
    /// The session's checkout: every path the model gives is relative to it and confined to it.
    pub root: PathBuf,
    /// Default timeout of `run` commands.
    pub run_timeout: Duration,
    /// Set when the user interrupts (Ctrl-C): long-running tools stop as soon as they see it.
    pub cancel: Arc<AtomicBool>,
    /// The sandbox `run` applies to its commands.
    pub sandbox: Arc<crate::safety::sandbox::Sandbox>,
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
    /// Repo-relative paths this call wrote or deleted (for the step commit). `run` leaves this empty: the
    /// agent finds what a command changed by scanning the checkout.
    pub changed: Vec<PathBuf>,
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
            changed: Vec::new(),
        }
    }
}

/// One tool: its schema and its executor.
pub trait Tool: Send + Sync {
    fn name(&self) -> &'static str;
    fn description(&self) -> &'static str;
    /// JSON schema of the arguments object.
    fn parameters(&self) -> serde_json::Value;
    /// Whether the tool may change files. Defaults to the defensive answer.
    fn is_mutating(&self) -> bool {
        true
    }
    /// The short label shown on the tool line, e.g. `search "parse_args"` or `edit src/cli.rs`.
    fn label(&self, args: &serde_json::Value) -> String;
    /// Runs the call. `args` has already been parsed as JSON (but not validated against the schema).
    fn execute(&self, ctx: &ToolContext, args: &serde_json::Value) -> ToolOutput;

    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: self.name(),
            description: self.description(),
            parameters: self.parameters(),
        }
    }
}

/// All built-in tools, in the order they are offered to the model.
pub fn registry() -> Vec<Box<dyn Tool>> {
    vec![
        Box::new(read::ReadFile),
        Box::new(list::ListFiles),
        Box::new(search::Search),
        Box::new(edit::EditFile),
        Box::new(write::WriteFile),
        Box::new(shell::Run),
    ]
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
        display_rel(&self.rel)
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

/// A root-relative path for output, `.` for the root itself.
pub fn display_rel(rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        ".".to_string()
    } else {
        rel.display().to_string()
    }
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

/// A directory walk that honours `.gitignore`, `.ignore` and `.git/info/exclude`, includes hidden files, and
/// never enters `.git`. Shared by `list_files` and `search` so both see the same files.
pub fn walker(dir: &Path) -> ignore::WalkBuilder {
    let mut builder = ignore::WalkBuilder::new(dir);
    builder
        .hidden(false)
        // A session checkout may be a worktree or a plain export; apply .gitignore either way.
        .require_git(false)
        .filter_entry(|entry| {
            !entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.eq_ignore_ascii_case(".git"))
        });
    builder
}

/// A glob (`*.rs`, `src/**/*.ts`) matched with gitignore semantics relative to `dir`: a pattern without a
/// slash matches the file name at any depth. Used as a filter after the walk, so ignore rules still apply.
pub fn glob_matcher(dir: &Path, glob: &str) -> Result<ignore::gitignore::Gitignore, String> {
    let mut builder = ignore::gitignore::GitignoreBuilder::new(dir);
    builder
        .add_line(None, glob)
        .map_err(|e| format!("invalid glob '{glob}': {e}"))?;
    builder
        .build()
        .map_err(|e| format!("invalid glob '{glob}': {e}"))
}

/// Whether `path` (relative to the matcher's root) matches the glob.
pub fn glob_matches(matcher: &ignore::gitignore::Gitignore, path: &Path) -> bool {
    matcher.matched_path_or_any_parents(path, false).is_ignore()
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
pub(crate) mod testutil {
    //! Temp checkouts for the tools' unit tests.
    use super::ToolContext;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    /// A fresh, canonical temp directory with an empty `.git` directory, and a context rooted there.
    pub fn temp_ctx(tag: &str) -> ToolContext {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("git-agent-tools-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        let root: PathBuf = std::fs::canonicalize(dir).unwrap();
        ToolContext {
            root,
            run_timeout: Duration::from_secs(30),
            cancel: Arc::new(AtomicBool::new(false)),
            sandbox: Arc::new(crate::safety::sandbox::Sandbox::off()),
        }
    }

    #[test]
    fn short_labels() {
        assert_eq!(super::short("cargo test", 60), "cargo test");
        assert_eq!(super::short("cd x\nmake", 60), "cd x…");
        assert_eq!(
            super::short(&"a".repeat(70), 60),
            format!("{}…", "a".repeat(60))
        );
    }

    pub fn put(ctx: &ToolContext, rel: &str, content: impl AsRef<[u8]>) {
        let path = ctx.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
}
