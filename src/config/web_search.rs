//! The `[web_search]` table: where `web_search` searches.
//!
//! ```toml
//! [web_search]
//! url = "http://127.0.0.1:8888/search?q={query}&format=json"   # a SearXNG-compatible JSON API
//! key_env = "SEARCH_API_KEY"   # its value replaces {key} in the URL
//! provider = true              # false: never the provider's own search (Anthropic's server tool)
//! max_uses = 5                 # searches the provider may run in one request
//! ```
//!
//! The provider's search comes first where it has one (the built-in `anthropic` provider); the backend is
//! used otherwise. User file only: the URL receives every query the model writes, which may quote the
//! code, so a repository must not be able to choose it.

use toml_edit::Item;

use super::file::{span_of, Ctx, KeyType, Scope, Span};
use super::{ConfigError, Settings};

/// What the user's `[web_search]` table says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WebSearchConfig {
    /// The backend's URL template: `{query}` becomes the percent-encoded query, `{key}` the key.
    pub url: Option<String>,
    /// The variable holding the backend's key.
    pub key_env: Option<String>,
    /// Whether the provider's own search may be used (default yes).
    pub provider: Option<bool>,
    /// Anthropic's `max_uses`.
    pub max_uses: Option<u32>,
}

/// A backend `web_search` can call: its URL template and key, resolved.
#[derive(Clone, PartialEq, Eq)]
pub struct SearchBackend {
    pub url: String,
    pub key: Option<String>,
}

// The key stays out of debug output.
impl std::fmt::Debug for SearchBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchBackend")
            .field("url", &self.url)
            .field("key", &self.key.as_ref().map(|_| "<set>"))
            .finish()
    }
}

/// The default of `max_uses`.
const DEFAULT_MAX_USES: u32 = 5;

const KEYS: &str = "url, key_env, provider, max_uses";

/// The type of `web_search.<key>`, for `config set`.
pub fn key_type(key: &str) -> Option<KeyType> {
    match key {
        "url" | "key_env" => Some(KeyType::String),
        "provider" => Some(KeyType::Bool),
        "max_uses" => Some(KeyType::Count),
        _ => None,
    }
}

/// Reads and validates a `[web_search]` table.
pub(super) fn parse(
    ctx: &Ctx<'_>,
    item: &Item,
    span: Span,
) -> Result<WebSearchConfig, ConfigError> {
    if ctx.scope == Scope::Repo {
        return Err(ctx.error(
            span,
            "web_search",
            "the search backend receives every query: set [web_search] in your own config file",
        ));
    }
    let table = ctx.table(item, "web_search", span)?;
    let mut config = WebSearchConfig::default();
    for (key, item) in table.iter() {
        let span = span_of(table, key, item);
        let full = format!("web_search.{key}");
        match key {
            "url" => {
                let url = ctx.string(item, &full, span.clone())?;
                if !(url.starts_with("http://") || url.starts_with("https://"))
                    || !url.contains("{query}")
                {
                    return Err(ctx.error(
                        span,
                        &full,
                        "expected an http:// or https:// URL with {query} in it",
                    ));
                }
                config.url = Some(url);
            }
            "key_env" => config.key_env = Some(ctx.string(item, &full, span)?),
            "provider" => config.provider = Some(ctx.boolean(item, &full, span)?),
            "max_uses" => config.max_uses = Some(ctx.small_count(item, &full, span)?),
            _ => return Err(ctx.unknown(&full, span, KEYS)),
        }
    }
    Ok(config)
}

impl Settings {
    /// The server tool to offer `provider` on the Anthropic wire (`anthropic` only: compatible endpoints
    /// rarely run Anthropic's server tools), unless `[web_search] provider = false`.
    pub fn provider_web_search(&self, provider: &str) -> Option<serde_json::Value> {
        let config = &self.user.web_search;
        if provider != "anthropic" || config.provider == Some(false) {
            return None;
        }
        Some(serde_json::json!({
            "type": "web_search_20250305",
            "name": "web_search",
            "max_uses": config.max_uses.unwrap_or(DEFAULT_MAX_USES),
        }))
    }

    /// The configured search backend, with its key read from `env`.
    pub fn search_backend(&self, env: &dyn Fn(&str) -> Option<String>) -> Option<SearchBackend> {
        let config = &self.user.web_search;
        Some(SearchBackend {
            url: config.url.clone()?,
            key: config.key_env.as_deref().and_then(env),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::file::parse as parse_file;
    use super::*;
    use std::path::Path;

    #[test]
    fn the_backend_and_the_server_tool_come_from_the_users_file() {
        let text = "[web_search]\nurl = \"http://127.0.0.1:1/s?q={query}&k={key}\"\nkey_env = \"K\"\nmax_uses = 2\n";
        let settings = Settings {
            user: parse_file(Path::new("config.toml"), text, Scope::User).unwrap(),
            ..Settings::default()
        };
        let backend = settings
            .search_backend(&|name| (name == "K").then(|| "secret".to_owned()))
            .unwrap();
        assert_eq!(backend.key.as_deref(), Some("secret"));
        assert!(!format!("{backend:?}").contains("secret"));
        assert_eq!(
            settings.provider_web_search("anthropic").unwrap()["max_uses"],
            2
        );
        assert_eq!(settings.provider_web_search("openrouter"), None);
        let repo = parse_file(Path::new(".git-agent.toml"), text, Scope::Repo);
        assert!(repo
            .unwrap_err()
            .to_string()
            .contains("set [web_search] in your own config file"));
        let bad = parse_file(
            Path::new("config.toml"),
            "[web_search]\nurl = \"http://x/\"\n",
            Scope::User,
        );
        assert!(bad.unwrap_err().to_string().contains("with {query} in it"));
    }
}
