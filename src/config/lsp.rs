//! The `[lsp]` table: language servers the user adds or overrides, and how diagnostics after edits behave.
//!
//! ```toml
//! [lsp]
//! diagnostics = true        # sync edited files to their server and report new errors (default true)
//! diagnostics_wait = 3      # seconds to wait for the server's diagnostics after an edit (bounded)
//! startup_timeout = 30      # seconds a server gets to answer `initialize`
//!
//! [lsp.pyright]             # a built-in name overrides that default, another name adds a server
//! command = "basedpyright-langserver"
//! args = ["--stdio"]
//! extensions = ["py", "pyi"]
//! root_markers = ["pyproject.toml"]
//! initialization_options = { python = { analysis = { typeCheckingMode = "strict" } } }
//! enabled = true
//! ```
//!
//! Servers run project code (build scripts, proc macros, plugins), so a repository's `.git-agent.toml` may
//! suggest `[lsp.<name>]` tables but they start only once the user trusted that exact table
//! (`git agent trust`, kind `lsp-servers`); the user's own file needs no trust.
//!
//! This file reads the table on its own (no `config::file` context), so `config::file` can call it without a
//! cycle between the two.

use std::ops::Range;
use std::time::Duration;

use toml_edit::{Item, TableLike, Value};

/// What one file's `[lsp]` table says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LspConfig {
    /// `diagnostics`: whether edits are followed by the server's new errors.
    pub diagnostics: Option<bool>,
    /// `diagnostics_wait`: how long an edit waits for them.
    pub diagnostics_wait: Option<Duration>,
    /// `startup_timeout`: how long a server gets for its `initialize` handshake.
    pub startup_timeout: Option<Duration>,
    /// `[lsp.<name>]` tables, in file order.
    pub servers: Vec<LspTable>,
    /// True when the tables come from a repository's file (they need trust).
    pub from_repo: bool,
    /// The `[lsp]` table's text as written, what trust is recorded for.
    pub text: String,
}

/// One `[lsp.<name>]` table; unset keys keep the built-in default of that name (or none).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LspTable {
    pub name: String,
    pub command: Option<String>,
    pub args: Option<Vec<String>>,
    pub extensions: Option<Vec<String>>,
    pub root_markers: Option<Vec<String>>,
    pub initialization_options: Option<serde_json::Value>,
    pub enabled: Option<bool>,
}

const LSP_KEYS: &str = "diagnostics, diagnostics_wait, startup_timeout, [lsp.<name>]";
const SERVER_KEYS: &str =
    "command, args, extensions, root_markers, initialization_options, enabled";

/// What is wrong with the `[lsp]` table, and where; `config::file` makes it an error naming the file and line.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub key: String,
    pub span: Option<Range<usize>>,
    pub message: String,
}

fn problem(span: Option<Range<usize>>, key: &str, message: impl Into<String>) -> Problem {
    Problem {
        key: key.to_string(),
        span,
        message: message.into(),
    }
}

fn span_of(table: &dyn TableLike, key: &str, item: &Item) -> Option<Range<usize>> {
    table
        .get_key_value(key)
        .and_then(|(key, _)| key.span())
        .or_else(|| item.span())
}

/// Reads the `[lsp]` table; `from_repo` when it is a repository's `.git-agent.toml`.
pub fn parse(
    item: &Item,
    span: Option<Range<usize>>,
    from_repo: bool,
) -> Result<LspConfig, Problem> {
    let table = item
        .as_table_like()
        .ok_or_else(|| problem(span, "lsp", "expected a table"))?;
    let mut config = LspConfig {
        from_repo,
        text: table_text(item),
        ..LspConfig::default()
    };
    for (key, item) in table.iter() {
        let span = span_of(table, key, item);
        let full = format!("lsp.{key}");
        match key {
            "diagnostics" => config.diagnostics = Some(boolean(item, &full, span)?),
            "diagnostics_wait" => {
                let wait = seconds(item, &full, span.clone())?;
                if wait > Duration::from_secs(60) {
                    return Err(problem(span, &full, "expected at most 60 seconds"));
                }
                config.diagnostics_wait = Some(wait);
            }
            "startup_timeout" => config.startup_timeout = Some(seconds(item, &full, span)?),
            _ if item.is_table_like() => config.servers.push(server(key, item, span)?),
            _ => {
                return Err(problem(
                    span,
                    &full,
                    format!("unknown key (known keys: {LSP_KEYS})"),
                ))
            }
        }
    }
    Ok(config)
}

fn server(name: &str, item: &Item, span: Option<Range<usize>>) -> Result<LspTable, Problem> {
    let prefix = format!("lsp.{name}");
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid {
        return Err(problem(
            span,
            &prefix,
            "a server name may hold only letters, digits, `_` and `-`",
        ));
    }
    let table = item
        .as_table_like()
        .ok_or_else(|| problem(span, &prefix, "expected a table"))?;
    let mut server = LspTable {
        name: name.to_string(),
        ..LspTable::default()
    };
    for (key, item) in table.iter() {
        let span = span_of(table, key, item);
        let full = format!("{prefix}.{key}");
        match key {
            "command" => server.command = Some(string(item, &full, span)?),
            "args" => server.args = Some(strings(item, &full, span)?),
            "extensions" => {
                let list = strings(item, &full, span)?;
                let list = list.iter().map(|e| e.trim_start_matches('.').to_string());
                server.extensions = Some(list.collect());
            }
            "root_markers" => server.root_markers = Some(strings(item, &full, span)?),
            "enabled" => server.enabled = Some(boolean(item, &full, span)?),
            "initialization_options" => {
                server.initialization_options = Some(json(item, &full, span)?)
            }
            _ => {
                return Err(problem(
                    span,
                    &full,
                    format!("unknown key (known keys: {SERVER_KEYS})"),
                ))
            }
        }
    }
    Ok(server)
}

fn value<'i>(item: &'i Item, key: &str, span: Option<Range<usize>>) -> Result<&'i Value, Problem> {
    item.as_value()
        .ok_or_else(|| problem(span, key, "expected a value, found a table"))
}

fn string(item: &Item, key: &str, span: Option<Range<usize>>) -> Result<String, Problem> {
    match value(item, key, span.clone())?.as_str() {
        Some(text) if !text.trim().is_empty() => Ok(text.to_string()),
        Some(_) => Err(problem(span, key, "must not be empty")),
        None => Err(problem(span, key, "expected a string")),
    }
}

fn boolean(item: &Item, key: &str, span: Option<Range<usize>>) -> Result<bool, Problem> {
    value(item, key, span.clone())?
        .as_bool()
        .ok_or_else(|| problem(span, key, "expected true or false"))
}

fn seconds(item: &Item, key: &str, span: Option<Range<usize>>) -> Result<Duration, Problem> {
    let seconds = match value(item, key, span.clone())? {
        Value::Integer(n) => *n.value() as f64,
        Value::Float(f) => *f.value(),
        _ => return Err(problem(span, key, "expected a number of seconds")),
    };
    // NaN is outside the range too.
    if !(0.0..=86_400.0).contains(&seconds) {
        return Err(problem(span, key, "expected seconds between 0 and 86400"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn strings(item: &Item, key: &str, span: Option<Range<usize>>) -> Result<Vec<String>, Problem> {
    value(item, key, span.clone())?
        .as_array()
        .and_then(|array| {
            array
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| problem(span, key, "expected an array of strings"))
}

/// A TOML value or table as JSON (what a server's `initializationOptions` is).
fn json(item: &Item, key: &str, span: Option<Range<usize>>) -> Result<serde_json::Value, Problem> {
    match item {
        Item::Value(value) => Ok(value_json(value)),
        Item::Table(table) => Ok(serde_json::Value::Object(
            table
                .iter()
                .map(|(k, v)| json(v, key, span.clone()).map(|v| (k.to_string(), v)))
                .collect::<Result<_, _>>()?,
        )),
        _ => Err(problem(span, key, "expected a table or a value")),
    }
}

/// The `[lsp]` table as a file of its own would hold it: what trust is recorded for.
fn table_text(item: &Item) -> String {
    let mut doc = toml_edit::DocumentMut::new();
    doc.insert("lsp", item.clone());
    doc.to_string()
}

fn value_json(value: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        Value::String(s) => J::String(s.value().clone()),
        Value::Integer(n) => J::from(*n.value()),
        Value::Float(f) => serde_json::Number::from_f64(*f.value()).map_or(J::Null, J::Number),
        Value::Boolean(b) => J::Bool(*b.value()),
        Value::Datetime(d) => J::String(d.value().to_string()),
        Value::Array(a) => J::Array(a.iter().map(value_json).collect()),
        Value::InlineTable(t) => J::Object(
            t.iter()
                .map(|(k, v)| (k.to_string(), value_json(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    fn parse(text: &str, from_repo: bool) -> Result<super::LspConfig, super::Problem> {
        let doc = toml_edit::Document::parse(text).unwrap();
        super::parse(&doc["lsp"], None, from_repo)
    }

    #[test]
    fn lsp_tables_parse_and_bad_keys_are_named() {
        let text = "[lsp]\ndiagnostics_wait = 1.5\n[lsp.py]\ncommand = \"pyright-langserver\"\n\
                    args = [\"--stdio\"]\nextensions = [\".py\"]\n\
                    initialization_options = { python = { x = 1 } }\n";
        let lsp = parse(text, false).unwrap();
        assert_eq!(
            lsp.diagnostics_wait,
            Some(std::time::Duration::from_millis(1500))
        );
        assert_eq!(lsp.servers[0].extensions, Some(vec!["py".to_string()]));
        assert_eq!(
            lsp.servers[0].initialization_options,
            Some(serde_json::json!({"python": {"x": 1}}))
        );
        assert!(!lsp.from_repo);
        let err = parse("[lsp.py]\ncmd = \"x\"\n", false).unwrap_err();
        assert_eq!(err.key, "lsp.py.cmd");
        let repo = parse("[lsp.py]\ncommand = \"x\"\n", true).unwrap();
        assert!(repo.from_repo);
        assert!(repo.text.contains("command"), "{:?}", repo.text);
    }
}
