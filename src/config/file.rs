//! The TOML configuration files: the user's (`$GIT_AGENT_CONFIG`, else `<config dir>/git-agent/config.toml`)
//! and the repository's `.git-agent.toml`, parsed with `toml_edit` so every key keeps its position.
//!
//! Validation is strict on purpose: a misspelt key silently ignored is a setting the user believes in and does
//! not have, so unknown keys and bad values are errors naming the file, the line and the key. The repository
//! file is read from whatever the user cloned, so it may tune requests but never name a key source, an
//! endpoint or headers: a repository could otherwise send the user's key to a server of its choosing.

use std::collections::BTreeMap;

use std::path::{Path, PathBuf};
use std::time::Duration;

use toml_edit::{Document, Item, Value};

use super::error::ConfigError;
use super::syntax::{line_of, span_of, Ctx, Span};
pub use super::syntax::{KeyType, Scope};
use super::web_search::WebSearchConfig;
use crate::model::{MaxTokensParam, Wire};

/// What one configuration file says; `None` and empty mean "not set here".
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FileConfig {
    pub path: PathBuf,
    pub model: Option<String>,
    pub connect_timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    pub retry: RetrySettings,
    /// `context_window`, `compact_at`, `prune`, `compact` at the top level: for whichever model is selected.
    pub context: ContextConfig,
    pub providers: BTreeMap<String, ProviderTable>,
    /// `[mcp_servers.<name>]` tables, in file order (user file only).
    pub mcp_servers: Vec<super::mcp::McpTable>,
    /// `mcp_startup_wait`: how long a session's first request waits for its MCP servers to connect.
    pub mcp_startup_wait: Option<Duration>,
    /// Files larger than this many bytes stay out of step 0 (`max_capture_size`).
    pub max_capture_size: Option<u64>,
    /// Images larger than this many bytes are refused (`max_image_size`).
    pub max_image_size: Option<u64>,
    /// How many checkouts of discarded sessions are kept for reuse (`worktree_pool`, user file only: it is
    /// disk space on the user's machine).
    pub worktree_pool: Option<u64>,
    /// `attribution`: whether commits landed on the user's branch name git-agent as co-author.
    pub attribution: Option<Attribution>,
    /// `check`: the command that says whether the code is right (`git agent fix`, the hooks).
    pub check: Option<String>,
    /// `check_timeout`: how long one run of the check may take.
    pub check_timeout: Option<Duration>,
    /// The `[hooks]` table.
    pub hooks: HookSettings,
    /// `[memory]`: project memory's write policy and retrieval budget.
    pub memory: super::memory::MemoryConfig,
    /// `explore_model`, `explore_max_steps` (see [`super::skills`]).
    pub explore: super::skills::ExploreConfig,
    /// The `[skills]` table.
    pub skills: super::skills::SkillsConfig,
    /// `[prices."provider/model"]` tables (user file only), in file order.
    pub prices: Vec<(String, super::prices::Price)>,
    /// `[[event_hooks.<Event>]]` (user file only), in the JSON shape of Claude Code's `hooks` object (see
    /// [`super::event_hooks`]).
    pub event_hooks: Option<serde_json::Value>,
    /// The `[web_search]` table (user file only).
    pub web_search: WebSearchConfig,
    /// The `[lsp]` table: language servers and diagnostics after edits.
    pub lsp: super::lsp::LspConfig,
}

/// The `[hooks]` table: what the git hooks that `git agent hook install` writes do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HookSettings {
    /// `mode`: let the agent fix a failing check (`fix`), or only report it (`check`).
    pub mode: Option<HookMode>,
    /// `max_steps`: the budget of a fix started by a hook.
    pub max_steps: Option<u32>,
    /// `max_time`: the time budget of a fix started by a hook.
    pub max_time: Option<Duration>,
}

/// What a git-agent hook does when the check fails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HookMode {
    /// Run `git agent fix` and print how to take the fix (the default); the commit or push is refused.
    #[default]
    Fix,
    /// Only report the failure; the commit or push is refused.
    Check,
}

impl HookMode {
    pub fn parse(text: &str) -> Option<HookMode> {
        match text {
            "fix" => Some(HookMode::Fix),
            "check" => Some(HookMode::Check),
            _ => None,
        }
    }
}

/// What commits that `accept --commit` makes on the user's branch say about the agent, beyond the
/// `Agent-Session` trailer they always carry (issue 12: users ask for both ways).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Attribution {
    /// A `Co-authored-by: git-agent (<model>) <git-agent@noreply.invalid>` trailer (the default).
    #[default]
    CoAuthoredBy,
    /// No trailer beyond `Agent-Session`.
    None,
}

/// How the conversation is kept inside the model's window, as a file states it. Accepted at the top level
/// (users of other agents write `context_window = 16000` there) and in a provider's table, which is more
/// specific and wins; the `GIT_AGENT_*` variables win over both (the agent reads them).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ContextConfig {
    /// The model's context window in tokens.
    pub context_window: Option<u64>,
    /// The share of the window at which to compact, in (0.1, 1].
    pub compact_at: Option<f64>,
    pub prune: Option<bool>,
    pub compact: Option<bool>,
}

impl ContextConfig {
    /// Each setting from `self` where it is set, else from `fallback`.
    pub fn or(self, fallback: ContextConfig) -> ContextConfig {
        ContextConfig {
            context_window: self.context_window.or(fallback.context_window),
            compact_at: self.compact_at.or(fallback.compact_at),
            prune: self.prune.or(fallback.prune),
            compact: self.compact.or(fallback.compact),
        }
    }
}

/// The `[retry]` table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetrySettings {
    pub max_attempts: Option<u32>,
    pub base_delay: Option<Duration>,
    pub max_delay: Option<Duration>,
    pub max_retry_after: Option<Duration>,
}

/// One `[providers.<name>]` table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProviderTable {
    pub kind: Option<Wire>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    pub api_key_command: Option<String>,
    pub headers: Vec<(String, String)>,
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    pub drop_params: Vec<String>,
    pub max_tokens_param: Option<MaxTokensParam>,
    pub max_tokens: Option<u32>,
    pub context: ContextConfig,
    /// `vision`: whether the provider's models take images (`false` refuses them before a request).
    pub vision: Option<bool>,
    /// Where the table starts, for errors found after parsing (e.g. a new provider without `base_url`).
    pub line: usize,
}

/// The type of a context setting, at the top level or in a provider's table.
fn context_key_type(key: &str) -> Option<KeyType> {
    match key {
        "context_window" => Some(KeyType::Count),
        "compact_at" => Some(KeyType::Share),
        "prune" | "compact" => Some(KeyType::Bool),
        _ => None,
    }
}

/// The type of the key at a dotted path (`model`, `retry.base_delay`, `providers.local.base_url`), or
/// `None` if there is no such key.
pub fn key_type(path: &[&str]) -> Option<KeyType> {
    match path {
        ["model" | "attribution" | "check"] => Some(KeyType::String),
        ["check_timeout"] => Some(KeyType::Seconds),
        ["mcp_startup_wait"] => Some(KeyType::Seconds),
        ["hooks", "mode"] => Some(KeyType::String),
        ["hooks", "max_steps"] => Some(KeyType::Count),
        ["hooks", "max_time"] => Some(KeyType::Seconds),
        ["max_capture_size" | "max_image_size"] => Some(KeyType::Count),
        ["worktree_pool"] => Some(KeyType::Count),
        ["connect_timeout" | "idle_timeout"] => Some(KeyType::Seconds),
        [key] => context_key_type(key).or_else(|| super::skills::key_type(path)),
        ["retry", "max_attempts"] => Some(KeyType::Count),
        ["retry", "base_delay" | "max_delay" | "max_retry_after"] => Some(KeyType::Seconds),
        ["providers", _, key] => match *key {
            "kind" | "base_url" | "api_key_env" | "api_key_command" | "max_tokens_param" => {
                Some(KeyType::String)
            }
            "max_tokens" => Some(KeyType::Count),
            "vision" => Some(KeyType::Bool),
            "drop_params" => Some(KeyType::StringList),
            "headers" | "extra_body" => Some(KeyType::Table),
            _ => context_key_type(key),
        },
        ["providers", _, "headers" | "extra_body", ..] => Some(KeyType::String),
        ["mcp_servers", _, rest @ ..] => super::mcp::key_type(rest),
        ["memory", key] => super::memory::key_type(key),
        ["prices", _, key] => super::prices::key_type(key),
        ["web_search", "url" | "key_env"] => Some(KeyType::String),
        ["web_search", "provider"] => Some(KeyType::Bool),
        ["web_search", "max_uses"] => Some(KeyType::Count),
        ["lsp", "diagnostics"] => Some(KeyType::Bool),
        ["lsp", "diagnostics_wait" | "startup_timeout"] => Some(KeyType::Seconds),
        ["lsp", _, "command"] => Some(KeyType::String),
        ["lsp", _, "args" | "extensions" | "root_markers"] => Some(KeyType::StringList),
        ["lsp", _, "enabled"] => Some(KeyType::Bool),
        ["lsp", _, "initialization_options"] => Some(KeyType::Table),
        _ => super::skills::key_type(path),
    }
}

/// Reads and validates a file; a missing file is an empty configuration. The read is bounded: a
/// repository's file over the limit is skipped with a warning (a clone must not take `ask` past hundreds
/// of MB), the user's own is refused with the error.
pub fn load(path: &Path, scope: Scope) -> Result<FileConfig, ConfigError> {
    use crate::safety::bounded::{read_bounded, BoundedReadError, CONFIG_LIMIT};
    let empty = || FileConfig {
        path: path.to_path_buf(),
        ..FileConfig::default()
    };
    match read_bounded(path, "a configuration file", CONFIG_LIMIT) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => parse(path, &text, scope),
            Err(_) => Err(ConfigError::Io {
                path: path.to_path_buf(),
                message: "stream did not contain valid UTF-8".to_owned(),
            }),
        },
        Err(err) if err.is_not_found() => Ok(empty()),
        Err(err @ BoundedReadError::TooLarge { .. }) if scope == Scope::Repo => {
            crate::safety::bounded::warn_once(&err);
            Ok(empty())
        }
        Err(err) => Err(ConfigError::Io {
            path: path.to_path_buf(),
            message: match err {
                BoundedReadError::Io { source, .. } => source.to_string(),
                BoundedReadError::TooLarge { kind, limit, .. } => {
                    format!("it is larger than {limit} bytes, the most {kind} may have: shrink it")
                }
            },
        }),
    }
}

/// Validates `text` as the contents of `path`.
pub fn parse(path: &Path, text: &str, scope: Scope) -> Result<FileConfig, ConfigError> {
    let ctx = Ctx { path, text, scope };
    let doc = Document::parse(text).map_err(|err| ctx.error(err.span(), "", err.message()))?;
    let mut config = FileConfig {
        path: path.to_path_buf(),
        ..FileConfig::default()
    };
    for (key, item) in doc.as_table().iter() {
        let span = span_of(doc.as_table(), key, item);
        match key {
            "model" => config.model = Some(ctx.string(item, key, span)?),
            "connect_timeout" => config.connect_timeout = Some(ctx.seconds(item, key, span)?),
            "idle_timeout" => config.idle_timeout = Some(ctx.seconds(item, key, span)?),
            "retry" => config.retry = ctx.retry(item, span)?,
            "mcp_servers" => config.mcp_servers = ctx.mcp_servers(item, span)?,
            "memory" => config.memory = super::memory::parse(&ctx, item, span)?,
            "prices" => config.prices = super::prices::parse(&ctx, item, span)?,
            "web_search" => config.web_search = ctx.web_search(item, span)?,
            "lsp" => {
                let from_repo = ctx.scope == Scope::Repo;
                config.lsp = super::lsp::parse(item, span, from_repo)
                    .map_err(|p| ctx.error(p.span, &p.key, p.message))?;
            }
            "max_capture_size" => config.max_capture_size = Some(ctx.count(item, key, span)?),
            "max_image_size" => config.max_image_size = Some(ctx.count(item, key, span)?),
            "worktree_pool" => {
                if ctx.scope == Scope::Repo {
                    return Err(ctx.error(
                        span,
                        key,
                        "worktree_pool is disk space on your machine: set it in your own config file",
                    ));
                }
                config.worktree_pool = Some(ctx.whole(item, key, span)?);
            }
            "attribution" => {
                config.attribution = Some(match ctx.string(item, key, span.clone())?.as_str() {
                    "co-authored-by" => Attribution::CoAuthoredBy,
                    "none" => Attribution::None,
                    _ => {
                        return Err(ctx.error(span, key, "expected \"co-authored-by\" or \"none\""))
                    }
                })
            }
            "check" => config.check = Some(ctx.string(item, key, span)?),
            "check_timeout" => config.check_timeout = Some(ctx.seconds(item, key, span)?),
            "mcp_startup_wait" => config.mcp_startup_wait = Some(ctx.seconds(item, key, span)?),
            "hooks" => config.hooks = ctx.hooks(item, span)?,
            "event_hooks" => {
                if ctx.scope == Scope::Repo {
                    return Err(ctx.error(
                        span,
                        key,
                        "event hooks run commands: set them in your own config file, or in .claude/settings.json (which needs `git agent trust`)",
                    ));
                }
                let value = super::event_hooks::toml_to_json(item);
                super::event_hooks::parse(&value, "event_hooks")
                    .map_err(|problem| ctx.error(span, key, problem))?;
                config.event_hooks = Some(value);
            }
            "providers" => {
                let table = ctx.table(item, key, span)?;
                for (name, item) in table.iter() {
                    let span = span_of(table, name, item);
                    let provider = ctx.provider(name, item, span)?;
                    config.providers.insert(name.to_string(), provider);
                }
            }
            _ => {
                let (explore, skills) = (&mut config.explore, &mut config.skills);
                if !ctx.context_key(&mut config.context, key, key, item, span.clone())?
                    && !ctx.skills_key(explore, skills, key, item, span.clone())?
                {
                    return Err(ctx.unknown(key, span, TOP_KEYS));
                }
            }
        }
    }
    Ok(config)
}

const TOP_KEYS: &str = "model, connect_timeout, idle_timeout, context_window, compact_at, prune, \
                        compact, attribution, max_capture_size, max_image_size, worktree_pool, explore_model, \
                        explore_max_steps, check, check_timeout, mcp_startup_wait, [retry], [skills], [hooks], [memory], [event_hooks], \
                        [prices], [web_search], [providers.<name>], [mcp_servers.<name>], [lsp]";
const RETRY_KEYS: &str = "max_attempts, base_delay, max_delay, max_retry_after";
const HOOK_KEYS: &str = "mode, max_steps, max_time";
const PROVIDER_KEYS: &str = "kind, base_url, api_key_env, api_key_command, headers, extra_body, \
                             drop_params, max_tokens_param, max_tokens, vision, context_window, compact_at, prune, \
                             compact";

impl Ctx<'_> {
    /// Reads `key` into `context` if it is one of the four context settings (`full` is what errors call
    /// it); `false` if it is not one of them.
    fn context_key(
        &self,
        context: &mut ContextConfig,
        key: &str,
        full: &str,
        item: &Item,
        span: Span,
    ) -> Result<bool, ConfigError> {
        match key {
            "context_window" => context.context_window = Some(self.count(item, full, span)?),
            "compact_at" => context.compact_at = Some(self.share(item, full, span)?),
            "prune" => context.prune = Some(self.boolean(item, full, span)?),
            "compact" => context.compact = Some(self.boolean(item, full, span)?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn retry(&self, item: &Item, span: Span) -> Result<RetrySettings, ConfigError> {
        let table = self.table(item, "retry", span)?;
        let mut retry = RetrySettings::default();
        for (key, item) in table.iter() {
            let span = span_of(table, key, item);
            let name = format!("retry.{key}");
            match key {
                "max_attempts" => retry.max_attempts = Some(self.small_count(item, &name, span)?),
                "base_delay" => retry.base_delay = Some(self.seconds(item, &name, span)?),
                "max_delay" => retry.max_delay = Some(self.seconds(item, &name, span)?),
                "max_retry_after" => retry.max_retry_after = Some(self.seconds(item, &name, span)?),
                _ => return Err(self.unknown(&name, span, RETRY_KEYS)),
            }
        }
        Ok(retry)
    }

    fn hooks(&self, item: &Item, span: Span) -> Result<HookSettings, ConfigError> {
        let table = self.table(item, "hooks", span)?;
        let mut hooks = HookSettings::default();
        for (key, item) in table.iter() {
            let span = span_of(table, key, item);
            let name = format!("hooks.{key}");
            match key {
                "mode" => {
                    let text = self.string(item, &name, span.clone())?;
                    hooks.mode =
                        Some(HookMode::parse(&text).ok_or_else(|| {
                            self.error(span, &name, "expected \"fix\" or \"check\"")
                        })?);
                }
                "max_steps" => hooks.max_steps = Some(self.small_count(item, &name, span)?),
                "max_time" => hooks.max_time = Some(self.seconds(item, &name, span)?),
                _ => return Err(self.unknown(&name, span, HOOK_KEYS)),
            }
        }
        Ok(hooks)
    }

    /// The `[web_search]` table (see [`super::web_search`]); user file only: the backend receives every
    /// query the model writes, which may quote the code, so a repository must not choose it.
    fn web_search(&self, item: &Item, span: Span) -> Result<WebSearchConfig, ConfigError> {
        if self.scope == Scope::Repo {
            return Err(self.error(
                span,
                "web_search",
                "the search backend receives every query: set [web_search] in your own config file",
            ));
        }
        let table = self.table(item, "web_search", span)?;
        let mut config = WebSearchConfig::default();
        for (key, item) in table.iter() {
            let span = span_of(table, key, item);
            let name = format!("web_search.{key}");
            match key {
                "url" => {
                    let url = self.string(item, &name, span.clone())?;
                    if let Some(problem) = super::web_search::url_problem(&url) {
                        return Err(self.error(span, &name, problem));
                    }
                    config.url = Some(url);
                }
                "key_env" => config.key_env = Some(self.string(item, &name, span)?),
                "provider" => config.provider = Some(self.boolean(item, &name, span)?),
                "max_uses" => config.max_uses = Some(self.small_count(item, &name, span)?),
                _ => return Err(self.unknown(&name, span, super::web_search::KEYS)),
            }
        }
        Ok(config)
    }

    fn provider(&self, name: &str, item: &Item, span: Span) -> Result<ProviderTable, ConfigError> {
        let prefix = format!("providers.{name}");
        let table = self.table(item, &prefix, span.clone())?;
        let mut provider = ProviderTable {
            line: span.map_or(1, |span| line_of(self.text, span.start)),
            ..ProviderTable::default()
        };
        for (key, item) in table.iter() {
            let span = span_of(table, key, item);
            let full = format!("{prefix}.{key}");
            self.check_allowed(key, &full, span.clone())?;
            self.provider_key(&mut provider, key, &full, item, span)?;
        }
        Ok(provider)
    }

    /// Keys and endpoints only come from the user's own file; no file may hold a key itself.
    fn check_allowed(&self, key: &str, full: &str, span: Span) -> Result<(), ConfigError> {
        if key == "api_key" {
            return Err(self.error(
                span,
                full,
                "keys are never stored in a config file: use api_key_env (the name of an environment \
                 variable) or api_key_command (a command that prints the key)",
            ));
        }
        let user_only = ["api_key_env", "api_key_command", "base_url", "headers"];
        if self.scope == Scope::Repo && user_only.contains(&key) {
            return Err(self.error(
                span,
                full,
                "not allowed in a repository's .git-agent.toml (a cloned repository could send your key \
                 elsewhere); set it in your user config (see: git agent config path)",
            ));
        }
        Ok(())
    }

    fn provider_key(
        &self,
        provider: &mut ProviderTable,
        key: &str,
        full: &str,
        item: &Item,
        span: Span,
    ) -> Result<(), ConfigError> {
        match key {
            "kind" => {
                provider.kind = Some(match self.string(item, full, span.clone())?.as_str() {
                    "openai" => Wire::OpenAiChat,
                    "anthropic" => Wire::AnthropicMessages,
                    _ => {
                        return Err(self.error(span, full, "expected \"openai\" or \"anthropic\""))
                    }
                })
            }
            "base_url" => {
                let url = self.string(item, full, span.clone())?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(self.error(span, full, "expected an http:// or https:// URL"));
                }
                provider.base_url = Some(url.trim_end_matches('/').to_string());
            }
            "api_key_env" => provider.api_key_env = Some(self.string(item, full, span)?),
            "api_key_command" => provider.api_key_command = Some(self.string(item, full, span)?),
            "headers" => provider.headers = self.headers(item, full, span)?,
            "extra_body" => {
                let table = self.table(item, full, span.clone())?;
                for (key, item) in table.iter() {
                    let span = span_of(table, key, item);
                    let value = self.value(item, &format!("{full}.{key}"), span)?;
                    provider.extra_body.insert(key.to_string(), to_json(value));
                }
            }
            "drop_params" => {
                let value = self.value(item, full, span.clone())?;
                let names = value.as_array().and_then(|array| {
                    array
                        .iter()
                        .map(|v| v.as_str().map(str::to_string))
                        .collect::<Option<Vec<_>>>()
                });
                provider.drop_params =
                    names.ok_or_else(|| self.error(span, full, "expected an array of strings"))?;
            }
            "max_tokens_param" => {
                provider.max_tokens_param =
                    Some(match self.string(item, full, span.clone())?.as_str() {
                        "max_tokens" => MaxTokensParam::MaxTokens,
                        "max_completion_tokens" => MaxTokensParam::MaxCompletionTokens,
                        _ => {
                            return Err(self.error(
                                span,
                                full,
                                "expected \"max_tokens\" or \"max_completion_tokens\"",
                            ))
                        }
                    })
            }
            "max_tokens" => provider.max_tokens = Some(self.small_count(item, full, span)?),
            "vision" => provider.vision = Some(self.boolean(item, full, span)?),
            _ => {
                if !self.context_key(&mut provider.context, key, full, item, span.clone())? {
                    return Err(self.unknown(full, span, PROVIDER_KEYS));
                }
            }
        }
        Ok(())
    }
}

/// A TOML value as JSON, for `extra_body`; dates become their TOML text.
fn to_json(value: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        Value::String(s) => J::String(s.value().clone()),
        Value::Integer(n) => J::from(*n.value()),
        Value::Float(f) => serde_json::Number::from_f64(*f.value()).map_or(J::Null, J::Number),
        Value::Boolean(b) => J::Bool(*b.value()),
        Value::Datetime(d) => J::String(d.value().to_string()),
        Value::Array(array) => J::Array(array.iter().map(to_json).collect()),
        Value::InlineTable(table) => J::Object(
            table
                .iter()
                .map(|(k, v)| (k.to_string(), to_json(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_user(text: &str) -> Result<FileConfig, ConfigError> {
        parse(Path::new("/cfg/config.toml"), text, Scope::User)
    }

    #[test]
    fn a_full_file() {
        let config = parse_user(
            r#"
# my settings
model = "local/qwen3"
idle_timeout = 0.5
connect_timeout = 3

[retry]
max_attempts = 2
base_delay = 0.01

[providers.local]
kind = "openai"
base_url = "http://127.0.0.1:8080/v1/"
api_key_command = "pass show local"
headers = { "X-Team" = "core" }
drop_params = ["stream_options"]
max_tokens_param = "max_completion_tokens"
max_tokens = 1024
context_window = 32768

[providers.local.extra_body]
top_k = 20
chat_template_kwargs = { enable_thinking = false }
"#,
        )
        .expect("valid");
        assert_eq!(config.model.as_deref(), Some("local/qwen3"));
        assert_eq!(config.idle_timeout, Some(Duration::from_millis(500)));
        assert_eq!(config.retry.max_attempts, Some(2));
        let local = &config.providers["local"];
        assert_eq!(local.base_url.as_deref(), Some("http://127.0.0.1:8080/v1"));
        assert_eq!(
            local.headers,
            vec![("X-Team".to_string(), "core".to_string())]
        );
        assert_eq!(local.drop_params, vec!["stream_options"]);
        assert_eq!(
            serde_json::Value::Object(local.extra_body.clone()),
            serde_json::json!({"top_k": 20, "chat_template_kwargs": {"enable_thinking": false}})
        );
        assert_eq!(local.line, 11);
    }

    #[test]
    fn unknown_keys_and_bad_values_name_file_line_and_key() {
        let err = parse_user("model = \"a\"\n\nidle_timout = 3\n").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("/cfg/config.toml:3: idle_timout: unknown key"),
            "{text}"
        );
        let err = parse_user("[providers.x]\nkind = \"gemini\"\n").unwrap_err();
        assert!(
            err.to_string().contains(":2: providers.x.kind: expected"),
            "{err}"
        );
        let err = parse_user("[retry]\nmax_attempts = 0\n").unwrap_err();
        assert!(err.to_string().contains(":2: retry.max_attempts"), "{err}");
        let err = parse_user("idle_timeout = \"soon\"\n").unwrap_err();
        assert!(
            err.to_string().contains("expected a number of seconds"),
            "{err}"
        );
        let err = parse_user("model = \n").unwrap_err();
        assert!(err.to_string().starts_with("/cfg/config.toml:1:"), "{err}");
    }

    #[test]
    fn keys_never_live_in_files_and_repos_cannot_redirect_them() {
        let err = parse_user("[providers.openai]\napi_key = \"sk-1\"\n").unwrap_err();
        assert!(!err.to_string().contains("sk-1"));
        assert!(err.to_string().contains("api_key_env"), "{err}");
        for key in [
            "api_key_env = \"X\"",
            "api_key_command = \"cat k\"",
            "base_url = \"http://evil/v1\"",
        ] {
            let text = format!("model = \"m\"\n[providers.openai]\n{key}\n");
            let err = parse(Path::new(".git-agent.toml"), &text, Scope::Repo).unwrap_err();
            assert!(err.to_string().contains(":3: providers.openai."), "{err}");
            assert!(err.to_string().contains("not allowed"), "{err}");
        }
        let ok = parse(
            Path::new(".git-agent.toml"),
            "model = \"m\"\n[providers.openai]\ndrop_params = [\"temperature\"]\n",
            Scope::Repo,
        );
        assert!(ok.is_ok(), "{ok:?}");
    }

    #[test]
    fn the_check_and_the_hooks_table() {
        let text = "check = \"cargo test\"\ncheck_timeout = 600\n[hooks]\nmode = \"check\"\nmax_steps = 20\nmax_time = 300\n";
        let config = parse(Path::new(".git-agent.toml"), text, Scope::Repo).expect("valid");
        assert_eq!(config.check.as_deref(), Some("cargo test"));
        assert_eq!(config.check_timeout, Some(Duration::from_secs(600)));
        assert_eq!(
            config.hooks,
            HookSettings {
                mode: Some(HookMode::Check),
                max_steps: Some(20),
                max_time: Some(Duration::from_secs(300)),
            }
        );
        let err = parse_user("[hooks]\nmode = \"always\"\n").unwrap_err();
        assert!(err.to_string().contains(":2: hooks.mode"), "{err}");
        let err = parse_user("[hooks]\npre_commit = true\n").unwrap_err();
        assert!(
            err.to_string()
                .contains("known keys: mode, max_steps, max_time"),
            "{err}"
        );
        let err = parse_user("check = \"\"\n").unwrap_err();
        assert!(err.to_string().contains("must not be empty"), "{err}");
    }

    #[test]
    fn context_settings_at_the_top_and_in_a_provider_table() {
        let config = parse_user(
            "context_window = 16000\ncompact_at = 0.7\nprune = false\n\
             [providers.local]\nbase_url = \"http://h/v1\"\ncontext_window = 8192\ncompact = false\n",
        )
        .expect("valid");
        assert_eq!(
            config.context,
            ContextConfig {
                context_window: Some(16000),
                compact_at: Some(0.7),
                prune: Some(false),
                compact: None,
            }
        );
        let local = config.providers["local"].context;
        assert_eq!(local.context_window, Some(8192));
        assert_eq!(local.compact, Some(false));
        let merged = local.or(config.context);
        assert_eq!(
            (
                merged.context_window,
                merged.compact_at,
                merged.prune,
                merged.compact
            ),
            (Some(8192), Some(0.7), Some(false), Some(false))
        );
        // The repository may tune them too: they send nothing anywhere.
        let repo = parse(
            Path::new(".git-agent.toml"),
            "context_window = 9000\n",
            Scope::Repo,
        );
        assert_eq!(repo.expect("valid").context.context_window, Some(9000));
    }

    #[test]
    fn bad_context_values_name_file_line_and_key() {
        for (text, expected) in [
            (
                "model = \"m\"\ncontext_window = 0\n",
                ":2: context_window: expected a whole number",
            ),
            (
                "compact_at = 80\n",
                ":1: compact_at: expected a share of the window",
            ),
            ("compact_at = 0.05\n", ":1: compact_at: expected a share"),
            ("compact_at = \"0.8\"\n", ":1: compact_at: expected a share"),
            ("prune = \"no\"\n", ":1: prune: expected true or false"),
            ("\n\ncompact = 0\n", ":3: compact: expected true or false"),
            (
                "[providers.x]\nprune = 1\n",
                ":2: providers.x.prune: expected true or false",
            ),
            (
                "[providers.x]\ncompact_at = 1.5\n",
                ":2: providers.x.compact_at: expected a share",
            ),
        ] {
            let err = parse_user(text).unwrap_err().to_string();
            assert!(err.starts_with("/cfg/config.toml"), "{err}");
            assert!(err.contains(expected), "{text:?}: {err}");
        }
    }

    #[test]
    fn a_configuration_file_over_the_limit_is_refused_if_the_users_and_skipped_if_the_repositorys()
    {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::File::create(&path)
            .unwrap()
            .set_len(150 << 20)
            .unwrap();
        let err = load(&path, Scope::User).unwrap_err().to_string();
        assert!(
            err.contains("is larger than 1048576 bytes, the most a configuration file may have"),
            "{err}"
        );
        let repo = load(&path, Scope::Repo).unwrap();
        assert_eq!(repo.model, None);
    }

    #[test]
    fn key_types() {
        assert_eq!(key_type(&["context_window"]), Some(KeyType::Count));
        assert_eq!(key_type(&["compact_at"]), Some(KeyType::Share));
        assert_eq!(key_type(&["prune"]), Some(KeyType::Bool));
        assert_eq!(
            key_type(&["providers", "x", "compact"]),
            Some(KeyType::Bool)
        );
        assert_eq!(key_type(&["retry", "prune"]), None);
        assert_eq!(key_type(&["model"]), Some(KeyType::String));
        assert_eq!(key_type(&["retry", "base_delay"]), Some(KeyType::Seconds));
        assert_eq!(
            key_type(&["providers", "x", "headers", "X-A"]),
            Some(KeyType::String)
        );
        assert_eq!(key_type(&["providers", "x", "nope"]), None);
        assert_eq!(key_type(&["nope"]), None);
    }

    #[test]
    fn web_search_comes_from_the_users_file_only() {
        let text = "[web_search]\nurl = \"http://127.0.0.1:1/s?q={query}\"\nkey_env = \"K\"\nmax_uses = 2\n";
        let user = parse(Path::new("config.toml"), text, Scope::User).unwrap();
        assert_eq!(user.web_search.max_uses, Some(2));
        assert_eq!(user.web_search.key_env.as_deref(), Some("K"));
        let repo = parse(Path::new(".git-agent.toml"), text, Scope::Repo).unwrap_err();
        assert!(repo
            .to_string()
            .contains("set [web_search] in your own config file"));
        let bad = parse(
            Path::new("config.toml"),
            "[web_search]\nurl = \"http://x/\"\n",
            Scope::User,
        );
        assert!(bad.unwrap_err().to_string().contains("with {query} in it"));
        assert_eq!(key_type(&["web_search", "url"]), Some(KeyType::String));
        assert_eq!(key_type(&["max_image_size"]), Some(KeyType::Count));
        assert_eq!(key_type(&["providers", "x", "vision"]), Some(KeyType::Bool));
    }
}
