//! The language-server tools: `lsp` (read-only queries), `rename` and `replace_symbol` (semantic edits).
//!
//! They are offered only when the session has a server for a language of its checkout. The edits go the way
//! `edit_file`'s go: the same permission rules (kind Edit, the `path` argument), the stale-read guard on every
//! file, every file written or none, and what they changed becomes one step commit.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::state::fingerprint;
use super::{confine, opt_str_arg, str_arg, u64_arg, Tool, ToolContext, ToolOutput};
use crate::lsp::ops::{self, At};
use crate::protocol::ToolKind;
use crate::safety::path::Access;

/// The read-only operations, which the explore subagent gets too.
pub const OPERATIONS: &[&str] = &[
    "definition",
    "references",
    "hover",
    "document_symbols",
    "workspace_symbols",
    "implementations",
    "incoming_calls",
    "outgoing_calls",
];

/// The `lsp` tool.
pub struct Lsp;

impl Tool for Lsp {
    fn name(&self) -> &str {
        "lsp"
    }

    fn description(&self) -> &str {
        "Ask the language server about code: definition, references, hover, document_symbols, \
         workspace_symbols, implementations, incoming_calls, outgoing_calls. Give path + line + column \
         (1-based, as read_file shows them), or path + symbol (a name), or symbol alone for \
         workspace_symbols. Answers are path:line with the line's text."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "operation": {"type": "string", "enum": OPERATIONS},
                "path": {"type": "string"},
                "line": {"type": "integer", "minimum": 1},
                "column": {"type": "integer", "minimum": 1},
                "symbol": {"type": "string"}
            },
            "required": ["operation"]
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    fn is_mutating(&self) -> bool {
        false
    }

    fn path_arg(&self) -> Option<&str> {
        Some("path")
    }

    fn label(&self, args: &Value) -> String {
        let op = args["operation"].as_str().unwrap_or("?");
        let path = args["path"].as_str().unwrap_or_default();
        let symbol = args["symbol"]
            .as_str()
            .map(|s| format!(" {s}"))
            .unwrap_or_default();
        match args["line"].as_u64() {
            Some(line) => format!("lsp {op} {path}:{line}{symbol}"),
            None => format!("lsp {op} {path}{symbol}").replace("  ", " "),
        }
    }

    fn execute(&self, ctx: &ToolContext, args: &Value) -> ToolOutput {
        match query(ctx, args) {
            Ok(text) => {
                let summary = text.lines().next().unwrap_or_default().to_string();
                ToolOutput::ok(text, summary)
            }
            Err(message) => ToolOutput::error(message),
        }
    }
}

fn pool(ctx: &ToolContext) -> Result<&std::sync::Arc<crate::lsp::pool::Pool>, String> {
    ctx.session
        .lsp()
        .ok_or_else(|| "no language server is available in this session".to_string())
}

fn query(ctx: &ToolContext, args: &Value) -> Result<String, String> {
    let operation = str_arg(args, "operation")?;
    let pool = pool(ctx)?;
    let symbol = opt_str_arg(args, "symbol")?;
    let Some(path) = opt_str_arg(args, "path")? else {
        let server = pool.any_server()?;
        return ops::query(&server, pool.checkout(), operation, None, symbol);
    };
    let target = confine(ctx, path, Access::Read)?;
    let server = pool.prepare(&target.rel)?;
    let abs = pool.checkout().join(&target.rel);
    let at = match (u64_arg(args, "line")?, symbol) {
        (Some(line), _) => {
            let text = target
                .read_text(crate::lsp::MAX_FILE_TEXT)
                .map_err(|e| target.io_error("read", &e))?;
            let column = u64_arg(args, "column")?.unwrap_or(1);
            Some(At {
                position: ops::position(&text, line, column),
                abs,
            })
        }
        (None, Some(name))
            if operation != "document_symbols" && operation != "workspace_symbols" =>
        {
            let (_, selection) = symbol_in(&server, &abs, name)?;
            Some(At {
                position: selection["start"].clone(),
                abs,
            })
        }
        _ => Some(At {
            position: json!({"line": 0, "character": 0}),
            abs,
        }),
    };
    ops::query(&server, pool.checkout(), operation, at.as_ref(), symbol)
}

/// The full range and the name range of `name` in the document `abs`.
fn symbol_in(
    server: &crate::lsp::client::Server,
    abs: &Path,
    name: &str,
) -> Result<(Value, Value), String> {
    let answer = server
        .request(
            "textDocument/documentSymbol",
            json!({"textDocument": {"uri": crate::lsp::uri::from_path(abs)}}),
            ops::QUERY_TIMEOUT,
        )
        .map_err(|e| e.to_string())?;
    ops::find_symbol(&answer, name)
}

/// The `rename` tool.
pub struct Rename;

impl Tool for Rename {
    fn name(&self) -> &str {
        "rename"
    }

    fn description(&self) -> &str {
        "Rename the symbol at path:line:column (1-based) everywhere the language server finds it, in every \
         file, as one step. Prefer it to editing each use by hand."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "line": {"type": "integer", "minimum": 1},
                "column": {"type": "integer", "minimum": 1},
                "new_name": {"type": "string"}
            },
            "required": ["path", "line", "column", "new_name"]
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    fn path_arg(&self) -> Option<&str> {
        Some("path")
    }

    fn label(&self, args: &Value) -> String {
        format!(
            "rename {}:{} to {}",
            args["path"].as_str().unwrap_or_default(),
            args["line"].as_u64().unwrap_or(0),
            args["new_name"].as_str().unwrap_or_default()
        )
    }

    fn execute(&self, ctx: &ToolContext, args: &Value) -> ToolOutput {
        let renamed = (|| {
            let pool = pool(ctx)?;
            let target = confine(ctx, str_arg(args, "path")?, Access::Write)?;
            let new_name = str_arg(args, "new_name")?;
            let line = u64_arg(args, "line")?.ok_or("missing required argument `line`")?;
            let column = u64_arg(args, "column")?.ok_or("missing required argument `column`")?;
            let server = pool.prepare(&target.rel)?;
            let abs = pool.checkout().join(&target.rel);
            let text = target
                .read_text(crate::lsp::MAX_FILE_TEXT)
                .map_err(|e| target.io_error("read", &e))?;
            let params = json!({
                "textDocument": {"uri": crate::lsp::uri::from_path(&abs)},
                "position": ops::position(&text, line, column),
                "newName": new_name,
            });
            let edit = server
                .request("textDocument/rename", params, ops::QUERY_TIMEOUT)
                .map_err(|e| e.to_string())?;
            if edit.is_null() {
                return Err("the language server found nothing to rename at that position".into());
            }
            let files = ops::edits_by_file(&edit)?;
            apply_all(ctx, pool.checkout(), files)
        })();
        match renamed {
            Ok(changed) => done(changed, "renamed"),
            Err(message) => ToolOutput::error(message),
        }
    }
}

/// The `replace_symbol` tool.
pub struct ReplaceSymbol;

impl Tool for ReplaceSymbol {
    fn name(&self) -> &str {
        "replace_symbol"
    }

    fn description(&self) -> &str {
        "Replace a whole symbol (function, class, method: `Class.method`) in path with new_text, using the \
         language server's range for it; new_text is its complete new definition."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "symbol": {"type": "string"},
                "new_text": {"type": "string"}
            },
            "required": ["path", "symbol", "new_text"]
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    fn path_arg(&self) -> Option<&str> {
        Some("path")
    }

    fn label(&self, args: &Value) -> String {
        format!(
            "replace_symbol {} in {}",
            args["symbol"].as_str().unwrap_or_default(),
            args["path"].as_str().unwrap_or_default()
        )
    }

    fn execute(&self, ctx: &ToolContext, args: &Value) -> ToolOutput {
        let replaced = (|| {
            let pool = pool(ctx)?;
            let target = confine(ctx, str_arg(args, "path")?, Access::Write)?;
            let symbol = str_arg(args, "symbol")?;
            let new_text = str_arg(args, "new_text")?;
            let server = pool.prepare(&target.rel)?;
            let abs = pool.checkout().join(&target.rel);
            let (range, _) = symbol_in(&server, &abs, symbol)?;
            let edit = json!({"range": range, "newText": new_text});
            let files = std::iter::once((abs, vec![edit])).collect();
            apply_all(ctx, pool.checkout(), files)
        })();
        match replaced {
            Ok(changed) => done(changed, "replaced"),
            Err(message) => ToolOutput::error(message),
        }
    }
}

fn done(changed: Vec<PathBuf>, verb: &str) -> ToolOutput {
    let files: Vec<String> = changed.iter().map(|p| p.display().to_string()).collect();
    let summary = format!(
        "{verb} in {} file{}",
        files.len(),
        if files.len() == 1 { "" } else { "s" }
    );
    ToolOutput {
        content: format!("{summary}: {}", files.join(", ")),
        summary,
        is_error: false,
        changed,
        ..Default::default()
    }
}

/// Applies the edits to every file, all or none: each file is confined to the checkout and checked against
/// the stale-read guard before anything is written, and a failed write puts back the files already written.
fn apply_all(
    ctx: &ToolContext,
    checkout: &Path,
    files: std::collections::BTreeMap<PathBuf, Vec<Value>>,
) -> Result<Vec<PathBuf>, String> {
    let mut planned = Vec::new();
    for (abs, edits) in files {
        if edits.is_empty() {
            continue;
        }
        let rel = abs.strip_prefix(checkout).map_err(|_| {
            format!(
                "the server's edit reaches {} outside the checkout; nothing was changed",
                abs.display()
            )
        })?;
        let target = confine(ctx, &rel.to_string_lossy(), Access::Write)?;
        let mut old = Vec::new();
        std::io::Read::read_to_end(
            &mut target
                .open_read()
                .map_err(|e| target.io_error("read", &e))?,
            &mut old,
        )
        .map_err(|e| target.io_error("read", &e))?;
        ctx.session.check_fresh(&target.rel, fingerprint(&old))?;
        let text = String::from_utf8(old.clone()).map_err(|_| {
            format!(
                "{} is not UTF-8 text; nothing was changed",
                target.display()
            )
        })?;
        let new =
            ops::apply_edits(&text, &edits).map_err(|e| format!("{}: {e}", target.display()))?;
        let mode = std::fs::metadata(&target.abs).ok().map(|m| m.permissions());
        planned.push((target, old, new, mode));
    }
    if planned.is_empty() {
        return Err("the language server's edit changes nothing".into());
    }
    let mut written: Vec<usize> = Vec::new();
    for (i, (target, _, new, mode)) in planned.iter().enumerate() {
        if let Err(err) = target.write_atomic(new.as_bytes(), mode.clone(), false) {
            for &j in &written {
                let (target, old, _, mode) = &planned[j];
                let _ = target.write_atomic(old, mode.clone(), false);
            }
            return Err(format!(
                "{}; nothing was changed",
                target.io_error("write", &err)
            ));
        }
        written.push(i);
    }
    Ok(planned
        .into_iter()
        .map(|(target, _, new, _)| {
            ctx.session.saw(&target.rel, fingerprint(new.as_bytes()));
            target.rel
        })
        .collect())
}
