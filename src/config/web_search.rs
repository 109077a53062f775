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

/// The keys of the table, for the error that names an unknown one.
pub const KEYS: &str = "url, key_env, provider, max_uses";

/// Why `url` cannot be a backend's URL template, if it cannot.
pub fn url_problem(url: &str) -> Option<&'static str> {
    let http = url.starts_with("http://") || url.starts_with("https://");
    (!http || !url.contains("{query}"))
        .then_some("expected an http:// or https:// URL with {query} in it")
}

impl WebSearchConfig {
    /// The server tool to offer `provider` on the Anthropic wire (`anthropic` only: compatible endpoints
    /// rarely run Anthropic's server tools), unless `provider = false`.
    pub fn server_tool(&self, provider: &str) -> Option<serde_json::Value> {
        if provider != "anthropic" || self.provider == Some(false) {
            return None;
        }
        Some(serde_json::json!({
            "type": "web_search_20250305",
            "name": "web_search",
            "max_uses": self.max_uses.unwrap_or(DEFAULT_MAX_USES),
        }))
    }

    /// The configured backend, with its key read from `env`.
    pub fn backend(&self, env: &dyn Fn(&str) -> Option<String>) -> Option<SearchBackend> {
        Some(SearchBackend {
            url: self.url.clone()?,
            key: self.key_env.as_deref().and_then(env),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backend_and_the_server_tool() {
        let config = WebSearchConfig {
            url: Some("http://127.0.0.1:1/s?q={query}&k={key}".into()),
            key_env: Some("K".into()),
            provider: None,
            max_uses: Some(2),
        };
        let backend = config
            .backend(&|name| (name == "K").then(|| "secret".to_owned()))
            .unwrap();
        assert_eq!(backend.key.as_deref(), Some("secret"));
        assert!(!format!("{backend:?}").contains("secret"));
        assert_eq!(config.server_tool("anthropic").unwrap()["max_uses"], 2);
        assert_eq!(config.server_tool("openrouter"), None);
        let off = WebSearchConfig {
            provider: Some(false),
            ..config
        };
        assert_eq!(off.server_tool("anthropic"), None);
        assert!(url_problem("http://x/?q={query}").is_none());
        assert!(url_problem("http://x/").is_some());
        assert!(url_problem("ftp://x/{query}").is_some());
    }
}
