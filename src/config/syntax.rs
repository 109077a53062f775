//! The reading of a settings file that every section shares: which file it is and which rules apply
//! ([`Scope`]), where an error points ([`Ctx`], [`Span`]), the types of keys, and the readers of typed values.
//! `file` reads the top level with them, each section (`mcp`, `memory`, `prices`, `skills`) its own table.

use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use toml_edit::{Item, TableLike, Value};

use super::error::ConfigError;

/// The repository's configuration file, at the root of its work tree.
pub const REPO_FILE: &str = ".git-agent.toml";

/// The MCP project file, at the top of the work tree.
pub const PROJECT_FILE: &str = ".mcp.json";

/// Which file a setting came from; decides which keys are allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    User,
    Repo,
}

/// The type of a known key, used by validation and by `config set` to read a value typed on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    String,
    Seconds,
    Count,
    /// A share of the context window (`compact_at`).
    Share,
    Bool,
    StringList,
    Table,
}

/// Where errors point: the file, its text (for line numbers) and which rules apply.
pub(super) struct Ctx<'a> {
    pub(super) path: &'a Path,
    pub(super) text: &'a str,
    pub(super) scope: Scope,
}

pub(super) type Span = Option<Range<usize>>;

/// The span of a key, which is where an error about its value is best reported too.
pub(super) fn span_of(table: &dyn TableLike, key: &str, item: &Item) -> Span {
    table
        .get_key_value(key)
        .and_then(|(key, _)| key.span())
        .or_else(|| item.span())
}

/// 1-based line of a byte offset.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

impl Ctx<'_> {
    pub(super) fn error(&self, span: Span, key: &str, message: impl Into<String>) -> ConfigError {
        let line = span.map_or(1, |span| line_of(self.text, span.start));
        ConfigError::File {
            path: self.path.to_path_buf(),
            line,
            key: key.to_string(),
            message: message.into(),
        }
    }

    pub(super) fn unknown(&self, key: &str, span: Span, known: &str) -> ConfigError {
        self.error(span, key, format!("unknown key (known keys: {known})"))
    }

    pub(super) fn value<'i>(
        &self,
        item: &'i Item,
        key: &str,
        span: Span,
    ) -> Result<&'i Value, ConfigError> {
        item.as_value()
            .ok_or_else(|| self.error(span.clone(), key, "expected a value, found a table"))
    }

    pub(super) fn table<'i>(
        &self,
        item: &'i Item,
        key: &str,
        span: Span,
    ) -> Result<&'i dyn TableLike, ConfigError> {
        item.as_table_like()
            .ok_or_else(|| self.error(span, key, "expected a table"))
    }

    pub(super) fn string(&self, item: &Item, key: &str, span: Span) -> Result<String, ConfigError> {
        let value = self.value(item, key, span.clone())?;
        match value.as_str() {
            Some(text) if !text.trim().is_empty() => Ok(text.to_string()),
            Some(_) => Err(self.error(span, key, "must not be empty")),
            None => Err(self.error(span, key, "expected a string")),
        }
    }

    /// A positive number of seconds, integer or fractional (`0.5`).
    pub(super) fn seconds(
        &self,
        item: &Item,
        key: &str,
        span: Span,
    ) -> Result<Duration, ConfigError> {
        let value = self.value(item, key, span.clone())?;
        let seconds = match value {
            Value::Integer(n) => *n.value() as f64,
            Value::Float(f) => *f.value(),
            _ => return Err(self.error(span, key, "expected a number of seconds")),
        };
        // NaN is outside the range too.
        if !(0.0..=86_400.0).contains(&seconds) {
            return Err(self.error(span, key, "expected seconds between 0 and 86400"));
        }
        Ok(Duration::from_secs_f64(seconds))
    }

    /// A whole number, 0 allowed.
    pub(super) fn whole(&self, item: &Item, key: &str, span: Span) -> Result<u64, ConfigError> {
        match self.value(item, key, span.clone())?.as_integer() {
            Some(n) if n >= 0 => Ok(n as u64),
            _ => Err(self.error(span, key, "expected a whole number (0 or more)")),
        }
    }

    pub(super) fn count(&self, item: &Item, key: &str, span: Span) -> Result<u64, ConfigError> {
        match self.value(item, key, span.clone())?.as_integer() {
            Some(n) if n >= 1 => Ok(n as u64),
            _ => Err(self.error(span, key, "expected a whole number of at least 1")),
        }
    }

    /// A share of the context window: above 0.1 (compacting all the time helps nobody) and at most 1.
    pub(super) fn share(&self, item: &Item, key: &str, span: Span) -> Result<f64, ConfigError> {
        let share = match self.value(item, key, span.clone())? {
            Value::Integer(n) => Some(*n.value() as f64),
            Value::Float(f) => Some(*f.value()),
            _ => None,
        };
        // NaN is outside the range too.
        share.filter(|s| *s > 0.1 && *s <= 1.0).ok_or_else(|| {
            self.error(
                span,
                key,
                "expected a share of the window above 0.1 and at most 1 (e.g. 0.8)",
            )
        })
    }

    pub(super) fn boolean(&self, item: &Item, key: &str, span: Span) -> Result<bool, ConfigError> {
        self.value(item, key, span.clone())?
            .as_bool()
            .ok_or_else(|| self.error(span, key, "expected true or false"))
    }

    pub(super) fn small_count(
        &self,
        item: &Item,
        key: &str,
        span: Span,
    ) -> Result<u32, ConfigError> {
        let n = self.count(item, key, span.clone())?;
        u32::try_from(n).map_err(|_| self.error(span, key, "too large"))
    }

    pub(super) fn headers(
        &self,
        item: &Item,
        full: &str,
        span: Span,
    ) -> Result<Vec<(String, String)>, ConfigError> {
        let table = self.table(item, full, span)?;
        let mut headers = Vec::new();
        for (name, item) in table.iter() {
            let span = span_of(table, name, item);
            let key = format!("{full}.{name}");
            let value = self.string(item, &key, span.clone())?;
            let valid_name = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
            if !valid_name || value.bytes().any(|b| b.is_ascii_control()) {
                return Err(self.error(span, &key, "not a valid HTTP header"));
            }
            headers.push((name.to_string(), value));
        }
        Ok(headers)
    }
}
