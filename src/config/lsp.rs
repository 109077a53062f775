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

use std::time::Duration;

use toml_edit::{Item, Value};

use super::file::{span_of, Ctx, Scope, Span};
use super::ConfigError;

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

/// The type of a key under `lsp.` for `git agent config set`.
pub fn key_type(path: &[&str]) -> Option<super::file::KeyType> {
    use super::file::KeyType;
    match path {
        ["diagnostics"] => Some(KeyType::Bool),
        ["diagnostics_wait" | "startup_timeout"] => Some(KeyType::Seconds),
        [_, "command"] => Some(KeyType::String),
        [_, "args" | "extensions" | "root_markers"] => Some(KeyType::StringList),
        [_, "enabled"] => Some(KeyType::Bool),
        [_, "initialization_options"] => Some(KeyType::Table),
        _ => None,
    }
}

impl Ctx<'_> {
    pub(super) fn lsp(&self, item: &Item, span: Span) -> Result<LspConfig, ConfigError> {
        let table = self.table(item, "lsp", span)?;
        let mut config = LspConfig {
            from_repo: self.scope == Scope::Repo,
            text: table_text(item),
            ..LspConfig::default()
        };
        for (key, item) in table.iter() {
            let span = span_of(table, key, item);
            let full = format!("lsp.{key}");
            match key {
                "diagnostics" => config.diagnostics = Some(self.boolean(item, &full, span)?),
                "diagnostics_wait" => {
                    let wait = self.seconds(item, &full, span.clone())?;
                    if wait > Duration::from_secs(60) {
                        return Err(self.error(span, &full, "expected at most 60 seconds"));
                    }
                    config.diagnostics_wait = Some(wait);
                }
                "startup_timeout" => {
                    config.startup_timeout = Some(self.seconds(item, &full, span)?)
                }
                _ if item.is_table_like() => config.servers.push(self.lsp_server(key, item, span)?),
                _ => return Err(self.unknown(&full, span, LSP_KEYS)),
            }
        }
        Ok(config)
    }

    fn lsp_server(&self, name: &str, item: &Item, span: Span) -> Result<LspTable, ConfigError> {
        let prefix = format!("lsp.{name}");
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(self.error(
                span,
                &prefix,
                "a server name may hold only letters, digits, `_` and `-`",
            ));
        }
        let table = self.table(item, &prefix, span)?;
        let mut server = LspTable {
            name: name.to_string(),
            ..LspTable::default()
        };
        for (key, item) in table.iter() {
            let span = span_of(table, key, item);
            let full = format!("{prefix}.{key}");
            match key {
                "command" => server.command = Some(self.string(item, &full, span)?),
                "args" => server.args = Some(self.lsp_strings(item, &full, span)?),
                "extensions" => {
                    let list = self.lsp_strings(item, &full, span)?;
                    let list = list.iter().map(|e| e.trim_start_matches('.').to_string());
                    server.extensions = Some(list.collect());
                }
                "root_markers" => server.root_markers = Some(self.lsp_strings(item, &full, span)?),
                "enabled" => server.enabled = Some(self.boolean(item, &full, span)?),
                "initialization_options" => {
                    server.initialization_options = Some(self.json(item, &full, span)?)
                }
                _ => return Err(self.unknown(&full, span, SERVER_KEYS)),
            }
        }
        Ok(server)
    }

    fn lsp_strings(&self, item: &Item, key: &str, span: Span) -> Result<Vec<String>, ConfigError> {
        let value = self.value(item, key, span.clone())?;
        value
            .as_array()
            .and_then(|array| {
                array
                    .iter()
                    .map(|v| v.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
            })
            .ok_or_else(|| self.error(span, key, "expected an array of strings"))
    }

    /// A TOML value or table as JSON (what a server's `initializationOptions` is).
    fn json(&self, item: &Item, key: &str, span: Span) -> Result<serde_json::Value, ConfigError> {
        match item {
            Item::Value(value) => Ok(value_json(value)),
            Item::Table(table) => Ok(serde_json::Value::Object(
                table
                    .iter()
                    .map(|(k, v)| self.json(v, key, span.clone()).map(|v| (k.to_string(), v)))
                    .collect::<Result<_, _>>()?,
            )),
            _ => Err(self.error(span, key, "expected a table or a value")),
        }
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
    use super::super::file::{parse, Scope};
    use std::path::Path;

    #[test]
    fn lsp_tables_parse_and_bad_keys_are_named() {
        let text = "[lsp]\ndiagnostics_wait = 1.5\n[lsp.py]\ncommand = \"pyright-langserver\"\n\
                    args = [\"--stdio\"]\nextensions = [\".py\"]\n\
                    initialization_options = { python = { x = 1 } }\n";
        let config = parse(Path::new("c.toml"), text, Scope::User).unwrap();
        let lsp = config.lsp;
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
        let err = parse(Path::new("c.toml"), "[lsp.py]\ncmd = \"x\"\n", Scope::User).unwrap_err();
        assert!(err.to_string().contains("lsp.py.cmd"), "{err}");
        let repo = parse(
            Path::new("r.toml"),
            "[lsp.py]\ncommand = \"x\"\n",
            Scope::Repo,
        )
        .unwrap();
        assert!(repo.lsp.from_repo);
        assert!(repo.lsp.text.contains("command"), "{:?}", repo.lsp.text);
    }
}
