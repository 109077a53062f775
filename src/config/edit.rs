//! Reading and changing one key of a settings file as text, for `git agent config get|set`.
//!
//! Edits go through `toml_edit`'s document model so everything the user wrote around the key (comments,
//! blank lines, key order, quoting style of other values) comes back byte for byte; a replaced value keeps
//! the comment that followed it on its line.

use toml_edit::{DocumentMut, Item, Table, TableLike, Value};

use super::error::ConfigError;
use super::file::key_type;
use super::syntax::KeyType;

/// Splits a dotted key (`providers.local.base_url`) and checks it names a known setting.
pub fn key_path(key: &str) -> Result<Vec<&str>, ConfigError> {
    let path: Vec<&str> = key.split('.').collect();
    if path.iter().any(|part| part.is_empty()) || key_type(&path).is_none() {
        return Err(ConfigError::Key {
            key: key.to_string(),
            message:
                "no such setting (known: model, connect_timeout, idle_timeout, context_window, \
                      compact_at, prune, compact, retry.<key>, providers.<name>.<key>, \
                      mcp_servers.<name>.<key>; see git agent config --help)"
                    .to_string(),
        });
    }
    Ok(path)
}

/// The value of `key` in `text` as a user would type it (strings without quotes), if set.
pub fn get(text: &str, key: &str) -> Result<Option<String>, ConfigError> {
    let path = key_path(key)?;
    let doc = parse(text)?;
    let mut item = doc.as_item();
    for part in &path {
        match item.as_table_like().and_then(|table| table.get(part)) {
            Some(next) => item = next,
            None => return Ok(None),
        }
    }
    Ok(Some(show(item)))
}

/// `text` with `key` set to `value`, read according to the key's type (`30` is a number for a timeout,
/// `anthropic/claude-sonnet-4-5` a string for `model`). The result still needs validating as a whole.
pub fn set(text: &str, key: &str, value: &str) -> Result<String, ConfigError> {
    let path = key_path(key)?;
    let unknown = || ConfigError::Key {
        key: key.to_string(),
        message: "unknown key".to_string(),
    };
    // key_path checked both already; an error rather than a panic should that ever change.
    let kind = key_type(&path).ok_or_else(unknown)?;
    let new = typed_value(kind, value);
    let mut doc = parse(text)?;
    let (last, parents) = path.split_last().ok_or_else(unknown)?;
    let mut table: &mut dyn TableLike = doc.as_table_mut();
    for part in parents {
        let item = table.entry(part).or_insert_with(|| {
            let mut new = Table::new();
            // `[providers.local]` rather than an empty `[providers]` header above it.
            new.set_implicit(true);
            Item::Table(new)
        });
        table = item.as_table_like_mut().ok_or_else(|| ConfigError::Key {
            key: key.to_string(),
            message: format!("{part} is not a table in this file"),
        })?;
    }
    match table.get_mut(last) {
        Some(Item::Value(old)) => {
            let decor = old.decor().clone();
            let mut new = new;
            *new.decor_mut() = decor;
            *old = new;
        }
        _ => {
            table.insert(last, Item::Value(new));
        }
    }
    Ok(doc.to_string())
}

fn parse(text: &str) -> Result<DocumentMut, ConfigError> {
    text.parse::<DocumentMut>().map_err(|err| ConfigError::Key {
        key: String::new(),
        message: format!("the file is not valid TOML: {}", err.message()),
    })
}

/// The value typed on the command line as TOML: text for string settings; otherwise TOML syntax (`30`,
/// `["a", "b"]`), a comma-separated list for lists, and text as the last resort, which validation then
/// rejects with the same message a bad value in the file gets.
fn typed_value(kind: KeyType, text: &str) -> Value {
    if kind == KeyType::String {
        return Value::from(text);
    }
    if let Ok(value) = text.trim().parse::<Value>() {
        return value;
    }
    if kind == KeyType::StringList {
        // `drop_params temperature,top_p` without TOML's brackets and quotes.
        let items: toml_edit::Array = text.split(',').map(str::trim).collect();
        return Value::Array(items);
    }
    Value::from(text)
}

/// An item as the user would type it back: strings bare, everything else in TOML syntax.
fn show(item: &Item) -> String {
    match item {
        Item::Value(Value::String(s)) => s.value().clone(),
        Item::Value(value) => {
            let mut value = value.clone();
            value.decor_mut().clear();
            value.to_string()
        }
        other => other.to_string().trim().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# git-agent settings\n\
                        model = \"openai/gpt-4.1\"   # the default model\n\
                        \n\
                        # local server\n\
                        [providers.local]\n\
                        base_url = 'http://127.0.0.1:8080/v1'\n";

    #[test]
    fn set_keeps_comments_order_and_quoting() {
        let out = set(FILE, "model", "anthropic/claude-sonnet-4-5").unwrap();
        assert_eq!(
            out,
            FILE.replace("\"openai/gpt-4.1\"", "\"anthropic/claude-sonnet-4-5\"")
        );
        let out = set(&out, "idle_timeout", "30").unwrap();
        assert!(out.contains("idle_timeout = 30\n"), "{out}");
        assert!(out.starts_with("# git-agent settings\n"), "{out}");
        let out = set(&out, "providers.local.drop_params", "temperature, top_p").unwrap();
        assert!(
            out.contains("drop_params = [\"temperature\", \"top_p\"]"),
            "{out}"
        );
        let out = set("", "providers.x.headers.X-Team", "core").unwrap();
        assert_eq!(out, "[providers.x.headers]\nX-Team = \"core\"\n");
    }

    #[test]
    fn get_shows_values_as_typed() {
        assert_eq!(
            get(FILE, "model").unwrap().as_deref(),
            Some("openai/gpt-4.1")
        );
        assert_eq!(
            get(FILE, "providers.local.base_url").unwrap().as_deref(),
            Some("http://127.0.0.1:8080/v1")
        );
        assert_eq!(get(FILE, "idle_timeout").unwrap(), None);
        assert!(get(FILE, "nope").is_err());
        let out = set(FILE, "context_window", "16000").unwrap();
        let out = set(&out, "prune", "false").unwrap();
        let out = set(&out, "providers.local.compact_at", "0.7").unwrap();
        assert_eq!(
            get(&out, "context_window").unwrap().as_deref(),
            Some("16000")
        );
        assert_eq!(get(&out, "prune").unwrap().as_deref(), Some("false"));
        assert_eq!(
            get(&out, "providers.local.compact_at").unwrap().as_deref(),
            Some("0.7")
        );
        // Top-level keys go above the first table, where TOML reads them as top-level.
        let top = out.find("context_window").unwrap();
        assert!(top < out.find("[providers.local]").unwrap(), "{out}");
        assert!(set(FILE, "providers.local.nope", "1").is_err());
    }
}
