//! `list_files`: the files under a directory, as git would see them.
//!
//! Ignored files (`.gitignore`, `.ignore`, `.git/info/exclude`) are left out, as they would be in `git status`,
//! so build output and vendored trees do not drown the listing. It is `rg --files` on the walk `search` uses
//! ([`super::walk`]), with one different default: hidden files stay in, because `.github/` and `.env.example`
//! matter to a coding agent looking for what a project contains.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::tool::{confine, opt_str_arg, Tool, ToolContext, ToolOutput};
use super::walk::{self, Filters};
use crate::protocol::ToolKind;
use crate::safety::path::Access;

/// Entries shown before the listing is cut.
const MAX_ENTRIES: usize = 1000;

pub struct ListFiles;

impl Tool for ListFiles {
    fn name(&self) -> &str {
        "list_files"
    }

    fn description(&self) -> &str {
        "List files under a directory, recursively and sorted, skipping .gitignored ones (like `rg --files`). \
         `pattern` is a glob such as `src/**/*.rs` (without `/` it matches names at any depth; `!` excludes); \
         `type` a ripgrep file type (rust, py, ...)."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory (default: the root)"},
                "pattern": {"type": "string"},
                "type": {"type": "string"},
                "hidden": {"type": "boolean", "description": "Include hidden files (default true)"}
            }
        })
    }

    fn is_mutating(&self) -> bool {
        false
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    fn path_arg(&self) -> Option<&str> {
        Some("path")
    }

    fn label(&self, args: &serde_json::Value) -> String {
        let path = args
            .get("path")
            .and_then(|v| v.as_str())
            .filter(|p| !p.is_empty())
            .unwrap_or(".");
        match args.get("pattern").and_then(|v| v.as_str()) {
            Some(pattern) => format!("list {path} {pattern}"),
            None => format!("list {path}"),
        }
    }

    fn execute(&self, ctx: &ToolContext, args: &serde_json::Value) -> ToolOutput {
        match list(ctx, args) {
            Ok(out) => out,
            Err(message) => ToolOutput::error(message),
        }
    }
}

fn list(ctx: &ToolContext, args: &serde_json::Value) -> Result<ToolOutput, String> {
    let path = opt_str_arg(args, "path")?.unwrap_or(".");
    let pattern = opt_str_arg(args, "pattern")?.filter(|p| !p.is_empty());
    let mut filters = Filters::from_args(args, true)?;
    filters.globs.extend(pattern.map(str::to_string));
    let dir = confine(ctx, path, Access::Read)?;
    if !dir.abs.exists() {
        return Err(format!("'{path}' does not exist"));
    }
    let (builder, guard) = walk::builder(&dir.root, &dir.abs, &filters)?;
    let found = walk::files(&builder, &ctx.cancel);
    walk::finish(&guard, &dir.root)?;
    let mut files: Vec<PathBuf> = found
        .into_iter()
        .map(|p| {
            p.strip_prefix(&dir.root)
                .map(Path::to_path_buf)
                .unwrap_or(p)
        })
        .collect();
    files.sort();
    Ok(render(&files, &dir.display(), pattern))
}

fn render(files: &[PathBuf], dir: &str, pattern: Option<&str>) -> ToolOutput {
    let total = files.len();
    if total == 0 {
        let what = pattern
            .map(|p| format!(" matching '{p}'"))
            .unwrap_or_default();
        return ToolOutput::ok(format!("no files{what} under '{dir}'"), "0 files");
    }
    let mut text = String::new();
    for file in files.iter().take(MAX_ENTRIES) {
        text.push_str(&crate::safety::path::display_rel(file));
        text.push('\n');
    }
    if total > MAX_ENTRIES {
        text.push_str(&format!(
            "... {} more not shown; narrow with `path` or `pattern`\n",
            total - MAX_ENTRIES
        ));
    }
    ToolOutput::ok(text, format!("{total} files"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::{put, temp_ctx};

    #[test]
    fn lists_sorted_respecting_ignores() {
        let ctx = temp_ctx("list-basic");
        put(&ctx, ".gitignore", "target/\n*.log\n");
        put(&ctx, "src/main.rs", "");
        put(&ctx, "src/lib.rs", "");
        put(&ctx, "target/debug/x", "");
        put(&ctx, "debug.log", "");
        put(&ctx, ".github/ci.yml", "");
        put(&ctx, ".git/config", "");
        let out = ListFiles.execute(&ctx, &json!({}));
        assert_eq!(
            out.content,
            ".github/ci.yml\n.gitignore\nsrc/lib.rs\nsrc/main.rs\n"
        );
        assert_eq!(out.summary, "4 files");
    }

    #[test]
    fn subdirectory_and_pattern() {
        let ctx = temp_ctx("list-pattern");
        put(&ctx, "src/a.rs", "");
        put(&ctx, "src/deep/b.rs", "");
        put(&ctx, "src/c.md", "");
        let out = ListFiles.execute(&ctx, &json!({"path": "src", "pattern": "**/*.rs"}));
        assert_eq!(out.content, "src/a.rs\nsrc/deep/b.rs\n");
        let out = ListFiles.execute(&ctx, &json!({"pattern": "*.md"}));
        assert_eq!(out.content, "src/c.md\n");
        let out = ListFiles.execute(&ctx, &json!({"pattern": "*.py"}));
        assert!(out.content.starts_with("no files matching"));
    }

    #[test]
    fn capped() {
        let ctx = temp_ctx("list-cap");
        for i in 0..1005 {
            put(&ctx, &format!("f/{i:04}.txt"), "");
        }
        let out = ListFiles.execute(&ctx, &json!({"path": "f"}));
        assert!(out
            .content
            .ends_with("... 5 more not shown; narrow with `path` or `pattern`\n"));
        assert_eq!(out.summary, "1005 files");
    }

    #[test]
    fn refuses_outside() {
        let ctx = temp_ctx("list-outside");
        assert!(ListFiles.execute(&ctx, &json!({"path": "/etc"})).is_error);
    }
}
