//! What the `lsp`, `rename` and `replace_symbol` tools ask a server, and how its answers read.
//!
//! Positions: the model gives 1-based lines and columns in characters, as `read_file` shows them; LSP counts
//! UTF-16 code units from 0. Answers come back as `path:line: text of that line`, capped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::client::Server;
use super::uri;

/// How long one query may take.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(20);
/// The most locations listed.
pub const MAX_RESULTS: usize = 50;

/// 1-based line and character column to an LSP position in `text`.
pub fn position(text: &str, line: u64, column: u64) -> Value {
    let line0 = line.saturating_sub(1);
    let chars = column.saturating_sub(1) as usize;
    let units: usize = text
        .lines()
        .nth(line0 as usize)
        .map(|l| l.chars().take(chars).map(char::len_utf16).sum())
        .unwrap_or(chars);
    json!({"line": line0, "character": units})
}

/// The byte offset of an LSP position in `text` (clamped to the line's end, and to the text's end).
pub fn offset(text: &str, position: &Value) -> usize {
    let line = position["line"].as_u64().unwrap_or(0) as usize;
    let units = position["character"].as_u64().unwrap_or(0) as usize;
    let mut start = 0;
    for _ in 0..line {
        match text[start..].find('\n') {
            Some(at) => start += at + 1,
            None => return text.len(),
        }
    }
    let end = text[start..].find('\n').map_or(text.len(), |at| start + at);
    let mut seen = 0;
    for (i, c) in text[start..end].char_indices() {
        if seen >= units {
            return start + i;
        }
        seen += c.len_utf16();
    }
    end
}

/// A location as the model reads it: `path:line: text`, the path relative to the checkout.
fn show_location(checkout: &Path, uri_text: &str, range: &Value) -> String {
    let line = range["start"]["line"].as_u64().unwrap_or(0);
    let Some(abs) = uri::to_path(uri_text) else {
        return format!("{uri_text}:{}", line + 1);
    };
    let rel = abs.strip_prefix(checkout).unwrap_or(&abs);
    // A path the server names: read only if it is a regular file, bounded.
    let context = crate::sys::fs::read_regular(&abs, super::MAX_FILE_TEXT)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .and_then(|t| t.lines().nth(line as usize).map(|l| l.trim().to_string()))
        .unwrap_or_default();
    let context = super::text::cut_line(&context, 160);
    format!(
        "{}:{}: {context}",
        crate::safety::path::display_rel(rel),
        line + 1
    )
}

/// Locations of a `definition`-like answer: `Location`, `Location[]` or `LocationLink[]`.
fn locations(answer: &Value) -> Vec<(String, Value)> {
    let items = match answer {
        Value::Array(items) => items.clone(),
        Value::Null => Vec::new(),
        single => vec![single.clone()],
    };
    items
        .iter()
        .filter_map(|item| {
            if let Some(uri) = item["targetUri"].as_str() {
                let range = if item["targetSelectionRange"].is_object() {
                    &item["targetSelectionRange"]
                } else {
                    &item["targetRange"]
                };
                return Some((uri.to_string(), range.clone()));
            }
            Some((item["uri"].as_str()?.to_string(), item["range"].clone()))
        })
        .collect()
}

fn list(checkout: &Path, found: Vec<(String, Value)>, what: &str) -> String {
    if found.is_empty() {
        return format!("no {what} found");
    }
    let total = found.len();
    let mut lines: Vec<String> = found
        .iter()
        .take(MAX_RESULTS)
        .map(|(uri, range)| show_location(checkout, uri, range))
        .collect();
    lines.dedup();
    let mut text = format!("{total} {what}:\n{}", lines.join("\n"));
    if total > MAX_RESULTS {
        text.push_str(&format!("\n[... {} more not shown]", total - MAX_RESULTS));
    }
    text
}

/// A query on a position: the document and the position.
pub struct At {
    pub abs: PathBuf,
    pub position: Value,
}

impl At {
    fn params(&self) -> Value {
        json!({"textDocument": {"uri": uri::from_path(&self.abs)}, "position": self.position})
    }
}

/// Runs one read-only operation; the text is what the model reads.
pub fn query(
    server: &Server,
    checkout: &Path,
    operation: &str,
    at: Option<&At>,
    symbol: Option<&str>,
) -> Result<String, String> {
    let need_at = || {
        at.ok_or_else(|| {
            format!("`{operation}` needs `path` with `line` and `column`, or `path` with `symbol`")
        })
    };
    let ask = |method: &str, params: Value| {
        server
            .request(method, params, QUERY_TIMEOUT)
            .map_err(|e| e.to_string())
    };
    match operation {
        "definition" => Ok(list(checkout, locations(&ask("textDocument/definition", need_at()?.params())?), "definitions")),
        "implementations" => Ok(list(checkout, locations(&ask("textDocument/implementation", need_at()?.params())?), "implementations")),
        "references" => {
            let mut params = need_at()?.params();
            params["context"] = json!({"includeDeclaration": true});
            Ok(list(checkout, locations(&ask("textDocument/references", params)?), "references"))
        }
        "hover" => Ok(hover_text(&ask("textDocument/hover", need_at()?.params())?)),
        "document_symbols" => {
            let at = need_at()?;
            let answer = ask("textDocument/documentSymbol", json!({"textDocument": {"uri": uri::from_path(&at.abs)}}))?;
            Ok(symbols_text(checkout, &at.abs, &answer))
        }
        "workspace_symbols" => {
            let query = symbol.ok_or("`workspace_symbols` needs `symbol` (a name or part of one)")?;
            let answer = ask("workspace/symbol", json!({"query": query}))?;
            let found = answer.as_array().cloned().unwrap_or_default().iter().filter_map(|s| {
                let location = &s["location"];
                let uri = location["uri"].as_str()?.to_string();
                Some((uri, location["range"].clone()))
            }).collect();
            Ok(list(checkout, found, "symbols"))
        }
        "incoming_calls" | "outgoing_calls" => {
            let items = ask("textDocument/prepareCallHierarchy", need_at()?.params())?;
            let Some(item) = items.as_array().and_then(|a| a.first()).cloned() else {
                return Ok("no callable symbol at that position".into());
            };
            let (method, side) = if operation == "incoming_calls" {
                ("callHierarchy/incomingCalls", "from")
            } else {
                ("callHierarchy/outgoingCalls", "to")
            };
            let calls = ask(method, json!({"item": item}))?;
            let found = calls.as_array().cloned().unwrap_or_default().iter().filter_map(|call| {
                let other = &call[side];
                let uri = other["uri"].as_str()?.to_string();
                Some((uri, other["selectionRange"].clone()))
            }).collect();
            Ok(list(checkout, found, if side == "from" { "callers" } else { "callees" }))
        }
        other => Err(format!(
            "unknown operation `{other}`; use one of definition, references, hover, document_symbols, \
             workspace_symbols, implementations, incoming_calls, outgoing_calls"
        )),
    }
}

fn hover_text(answer: &Value) -> String {
    let contents = &answer["contents"];
    let text = match contents {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(|p| {
                p.as_str()
                    .or(p["value"].as_str())
                    .unwrap_or_default()
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other["value"].as_str().unwrap_or_default().to_string(),
    };
    if text.trim().is_empty() {
        "no hover information at that position".into()
    } else {
        super::text::cut_line(&text, 4000)
    }
}

/// A flat list of a document's symbols, with their full and name ranges (hierarchical names as `A.b`).
pub fn flatten_symbols(answer: &Value) -> Vec<(String, Value, Value)> {
    fn walk(items: &[Value], prefix: &str, out: &mut Vec<(String, Value, Value)>) {
        for item in items {
            let name = item["name"].as_str().unwrap_or_default();
            let full = if prefix.is_empty() {
                name.to_string()
            } else {
                format!("{prefix}.{name}")
            };
            if item["location"].is_object() {
                let range = item["location"]["range"].clone();
                out.push((full.clone(), range.clone(), range));
            } else {
                out.push((
                    full.clone(),
                    item["range"].clone(),
                    item["selectionRange"].clone(),
                ));
            }
            if let Some(children) = item["children"].as_array() {
                walk(children, &full, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(
        answer.as_array().map_or(&[][..], Vec::as_slice),
        "",
        &mut out,
    );
    out
}

fn symbols_text(checkout: &Path, abs: &Path, answer: &Value) -> String {
    let symbols = flatten_symbols(answer);
    if symbols.is_empty() {
        return "no symbols".into();
    }
    let rel = crate::safety::path::display_rel(abs.strip_prefix(checkout).unwrap_or(abs));
    let mut lines: Vec<String> = symbols
        .iter()
        .take(MAX_RESULTS * 4)
        .map(|(name, range, _)| {
            format!(
                "{rel}:{}: {name}",
                range["start"]["line"].as_u64().unwrap_or(0) + 1
            )
        })
        .collect();
    if symbols.len() > MAX_RESULTS * 4 {
        lines.push(format!(
            "[... {} more not shown]",
            symbols.len() - MAX_RESULTS * 4
        ));
    }
    lines.join("\n")
}

/// Finds `symbol` (a name, or `Outer.inner`) among a document's symbols: its full range and name range.
pub fn find_symbol(answer: &Value, symbol: &str) -> Result<(Value, Value), String> {
    let symbols = flatten_symbols(answer);
    let matches: Vec<&(String, Value, Value)> = symbols
        .iter()
        .filter(|(full, ..)| full == symbol || full.rsplit('.').next() == Some(symbol))
        .collect();
    match matches.as_slice() {
        [(_, range, selection)] => Ok((range.clone(), selection.clone())),
        [] => Err(format!(
            "no symbol `{symbol}` in this file; use lsp document_symbols to list them"
        )),
        many => Err(format!(
            "`{symbol}` names {} symbols here ({}); give the qualified name",
            many.len(),
            many.iter()
                .map(|(n, r, _)| format!(
                    "{n} at line {}",
                    r["start"]["line"].as_u64().unwrap_or(0) + 1
                ))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The text edits of a `WorkspaceEdit`, by file; resource operations (create, rename, delete a file) are
/// refused, since they could reach outside what the model asked for.
pub fn edits_by_file(edit: &Value) -> Result<BTreeMap<PathBuf, Vec<Value>>, String> {
    let mut files: BTreeMap<PathBuf, Vec<Value>> = BTreeMap::new();
    let mut add = |uri_text: &str, edits: &Value| -> Result<(), String> {
        let path = uri::to_path(uri_text)
            .ok_or_else(|| format!("the server named a non-file URI: {uri_text}"))?;
        files
            .entry(path)
            .or_default()
            .extend(edits.as_array().cloned().unwrap_or_default());
        Ok(())
    };
    if let Some(changes) = edit["documentChanges"].as_array() {
        for change in changes {
            match change["kind"].as_str() {
                Some(kind) => {
                    return Err(format!(
                        "the server's edit would {kind} a file; only text edits are applied"
                    ))
                }
                None => add(
                    change["textDocument"]["uri"].as_str().unwrap_or_default(),
                    &change["edits"],
                )?,
            }
        }
    } else if let Some(changes) = edit["changes"].as_object() {
        for (uri_text, edits) in changes {
            add(uri_text, edits)?;
        }
    }
    Ok(files)
}

/// `text` with `edits` applied (LSP ranges against the text as it is); overlapping edits are refused.
pub fn apply_edits(text: &str, edits: &[Value]) -> Result<String, String> {
    let mut spans: Vec<(usize, usize, &str)> = edits
        .iter()
        .map(|e| {
            let start = offset(text, &e["range"]["start"]);
            let end = offset(text, &e["range"]["end"]).max(start);
            (start, end, e["newText"].as_str().unwrap_or_default())
        })
        .collect();
    spans.sort_by_key(|&(start, end, _)| (start, end));
    for pair in spans.windows(2) {
        if pair[1].0 < pair[0].1 {
            return Err("the server sent overlapping edits; nothing was changed".into());
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end, new) in spans {
        out.push_str(&text[at..start]);
        out.push_str(new);
        at = end;
    }
    out.push_str(&text[at..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_utf16_and_edits_apply_from_the_end() {
        let text = "é = 1\nfoo(bar)\n";
        assert_eq!(position(text, 2, 5), json!({"line": 1, "character": 4}));
        assert_eq!(offset(text, &json!({"line": 0, "character": 1})), 2);
        assert_eq!(offset(text, &json!({"line": 1, "character": 4})), 11);
        let edits = vec![
            json!({"range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 3}}, "newText": "baz"}),
            json!({"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}, "newText": "x"}),
        ];
        assert_eq!(apply_edits(text, &edits).unwrap(), "x = 1\nbaz(bar)\n");
        let overlapping = vec![edits[0].clone(), edits[0].clone()];
        assert!(apply_edits(text, &overlapping).is_err());
    }

    #[test]
    fn workspace_edits_in_both_shapes_and_no_file_operations() {
        let a = json!({"changes": {"file:///r/a.py": [{"newText": "x"}], "file:///r/b.py": []}});
        assert_eq!(edits_by_file(&a).unwrap().len(), 2);
        let b = json!({"documentChanges": [{"textDocument": {"uri": "file:///r/a.py", "version": 1}, "edits": []}]});
        assert_eq!(edits_by_file(&b).unwrap().len(), 1);
        let c = json!({"documentChanges": [{"kind": "delete", "uri": "file:///etc/passwd"}]});
        assert!(edits_by_file(&c).is_err());
    }

    #[test]
    fn symbols_are_found_by_name_or_qualified_name() {
        let answer = json!([
            {"name": "A", "range": {"start": {"line": 0}}, "selectionRange": {}, "children": [
                {"name": "run", "range": {"start": {"line": 1}}, "selectionRange": {}}]},
            {"name": "run", "range": {"start": {"line": 5}}, "selectionRange": {}}
        ]);
        assert!(find_symbol(&answer, "run")
            .unwrap_err()
            .contains("2 symbols"));
        assert_eq!(find_symbol(&answer, "A.run").unwrap().0["start"]["line"], 1);
        assert!(find_symbol(&answer, "nope").is_err());
    }
}
