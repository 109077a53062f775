//! Model selection, provider endpoints and the settings files (DESIGN section 3).
//!
//! A model is `provider/model`; when the first segment is not a known provider the whole string is a model
//! on the default provider (`openai`), so `GIT_AGENT_MODEL=qwen3:8b` with `OPENAI_BASE_URL` pointing at a local
//! server just works. Providers are the built-in presets plus the `[providers.<name>]` tables of the user's
//! config, which may also override a preset. Keys come from an environment variable or from a command the
//! user configured (run once per process); they are never printed.
//!
//! Precedence, highest first: command-line flag, environment, the repository's `.git-agent.toml`, the user's
//! config file, built-in defaults.

pub mod agent_files;
pub(crate) mod edit;
mod error;
pub mod event_hooks;
pub(crate) mod file;
pub mod lsp;
pub(crate) mod mcp;
pub mod memory;
pub mod prices;
pub(crate) mod skills;
mod syntax;
pub mod trust;
pub mod web_search;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::model::retry::RetryPolicy;
use crate::model::{MaxTokensParam, Tuning};
pub use error::ConfigError;
pub use file::ContextConfig;
use file::{FileConfig, ProviderTable};
use syntax::{Scope, REPO_FILE};

/// The provider used when a model name carries no known provider prefix.
pub const DEFAULT_PROVIDER: &str = "openai";
/// The model used when none is configured anywhere.
pub const DEFAULT_MODEL: &str = "gpt-4.1";

pub use crate::model::Wire as WireFormat;

/// A built-in provider: its wire format, default endpoint and the variables that configure it.
#[derive(Debug)]
pub struct Preset {
    pub name: &'static str,
    pub wire: WireFormat,
    /// `None` when there is no sensible default and the user must set `base_url_env`.
    pub base_url: Option<&'static str>,
    pub base_url_env: &'static str,
    pub api_key_env: &'static str,
    /// Local servers usually need no key.
    pub key_required: bool,
}

const fn remote(
    name: &'static str,
    url: &'static str,
    key_env: &'static str,
    url_env: &'static str,
) -> Preset {
    Preset {
        name,
        wire: WireFormat::OpenAiChat,
        base_url: Some(url),
        base_url_env: url_env,
        api_key_env: key_env,
        key_required: true,
    }
}

const fn local(name: &'static str, url: &'static str, url_env: &'static str) -> Preset {
    Preset {
        name,
        wire: WireFormat::OpenAiChat,
        base_url: Some(url),
        base_url_env: url_env,
        api_key_env: "OPENAI_API_KEY",
        key_required: false,
    }
}

/// The built-in providers. `openai` is special: it needs either a key (for api.openai.com) or a base URL (for
/// any OpenAI-compatible server, which may not need a key).
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "anthropic",
        wire: WireFormat::AnthropicMessages,
        base_url: Some("https://api.anthropic.com"),
        base_url_env: "ANTHROPIC_BASE_URL",
        api_key_env: "ANTHROPIC_API_KEY",
        key_required: true,
    },
    remote(
        "openai",
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    ),
    remote(
        "openrouter",
        "https://openrouter.ai/api/v1",
        "OPENROUTER_API_KEY",
        "OPENROUTER_BASE_URL",
    ),
    remote(
        "groq",
        "https://api.groq.com/openai/v1",
        "GROQ_API_KEY",
        "GROQ_BASE_URL",
    ),
    remote(
        "deepseek",
        "https://api.deepseek.com/v1",
        "DEEPSEEK_API_KEY",
        "DEEPSEEK_BASE_URL",
    ),
    remote(
        "mistral",
        "https://api.mistral.ai/v1",
        "MISTRAL_API_KEY",
        "MISTRAL_BASE_URL",
    ),
    remote(
        "together",
        "https://api.together.xyz/v1",
        "TOGETHER_API_KEY",
        "TOGETHER_BASE_URL",
    ),
    remote(
        "gemini",
        "https://generativelanguage.googleapis.com/v1beta/openai",
        "GEMINI_API_KEY",
        "GEMINI_BASE_URL",
    ),
    local("ollama", "http://127.0.0.1:11434/v1", "OLLAMA_BASE_URL"),
    local("llamacpp", "http://127.0.0.1:8080/v1", "LLAMACPP_BASE_URL"),
    local("vllm", "http://127.0.0.1:8000/v1", "VLLM_BASE_URL"),
    local("lmstudio", "http://127.0.0.1:1234/v1", "LMSTUDIO_BASE_URL"),
];

/// The default of `max_image_size`: 5 MiB, Anthropic's limit per image and so the strictest provider's.
pub const DEFAULT_MAX_IMAGE_SIZE: u64 = 5 * 1024 * 1024;

/// Everything needed to talk to one model. The key is kept out of `Debug` output.
#[derive(Clone)]
pub struct ModelConfig {
    pub provider: String,
    pub wire: WireFormat,
    pub model: String,
    pub base_url: String,
    pub api_key: Option<String>,
    /// Where the key comes from, for hints: an environment variable's name, or the provider's
    /// `api_key_command`.
    pub api_key_env: String,
    /// What sets the endpoint, for hints: an environment variable's name or a config file.
    pub base_url_env: String,
    /// Headers, body adjustments and the token limit of `[providers.<name>]`.
    pub tuning: Tuning,
    /// The context settings the files state for this model: its provider's table (the repository's, then
    /// the user's) over the top level (the repository's, then the user's). The environment is applied later.
    pub context: ContextConfig,
    /// What its tokens cost ([`Settings::price()`]); `None` when unknown.
    pub price: Option<prices::Price>,
    /// Whether it takes images: the provider table's `vision`, else yes (a provider that refuses an image
    /// says so in its error).
    pub vision: bool,
    /// The largest image sent to it, in bytes (`max_image_size`).
    pub max_image_size: u64,
}

impl fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelConfig")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("tuning", &self.tuning)
            .finish()
    }
}

impl ModelConfig {
    /// `provider/model`, as shown to the user and recorded in the session.
    pub fn display_name(&self) -> String {
        format!("{}/{}", self.provider, self.model)
    }
}

/// Resolves the model from the `--model` flag and the environment alone, with no settings files (`env` is
/// `std::env::var` in the binary; tests pass their own).
pub fn resolve(
    flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ModelConfig, ConfigError> {
    Settings::default().resolve(flag, env)
}

/// The user's config file: `$GIT_AGENT_CONFIG`, else `<config dir>/git-agent/config.toml`.
pub fn user_config_path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(path) = env("GIT_AGENT_CONFIG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    dirs::config_dir().map(|dir| dir.join("git-agent").join("config.toml"))
}

/// The repository's `.git-agent.toml`: at the top of the work tree holding `cwd`, if `cwd` is in one.
pub fn repo_config_path(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .find(|dir| dir.join(".git").exists())
        .map(|root| root.join(REPO_FILE))
}

/// The settings files, loaded and validated.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    pub user: FileConfig,
    pub repo: FileConfig,
}

impl Settings {
    /// Memory's settings: the repo file over the user file over the defaults; `None` when `enabled = false`.
    pub fn memory(&self) -> Option<memory::MemorySettings> {
        self.repo.memory.over(&self.user.memory)
    }

    /// The price of `provider/model`: the user's `[prices]` entry, else the built-in table; `None` when
    /// neither knows it.
    pub fn price(&self, provider: &str, model: &str) -> Option<prices::Price> {
        prices::lookup(&self.user.prices, provider, model)
    }

    /// The caps of the skill catalog: each key from the repository's file, else the user's, else the default.
    pub fn catalog_caps(&self) -> skills::CatalogCaps {
        self.repo.skills.caps_over(self.user.skills)
    }

    /// The explore subagent's model (`None`: the session's) and its request budget per call.
    pub fn explore(&self) -> (Option<String>, u32) {
        self.repo.explore.over(&self.user.explore)
    }
}

impl Settings {
    /// Loads the user's file and, when `cwd` is in a repository, its `.git-agent.toml`. Missing files are
    /// empty; a file with an unknown key or a bad value is an error naming its line.
    pub fn load(cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Settings, ConfigError> {
        let user = match user_config_path(env) {
            Some(path) => file::load(&path, Scope::User)?,
            None => FileConfig::default(),
        };
        let repo = match repo_config_path(cwd) {
            Some(path) => file::load(&path, Scope::Repo)?,
            None => FileConfig::default(),
        };
        Ok(Settings { user, repo })
    }

    /// The model asked for: `--model`, `GIT_AGENT_MODEL`, the repo file, the user file, the default.
    pub fn model_spec(&self, flag: Option<&str>, env: &dyn Fn(&str) -> Option<String>) -> String {
        flag.map(str::to_string)
            .or_else(|| env("GIT_AGENT_MODEL").filter(|m| !m.trim().is_empty()))
            .or_else(|| self.repo.model.clone())
            .or_else(|| self.user.model.clone())
            .unwrap_or_else(|| format!("{DEFAULT_PROVIDER}/{DEFAULT_MODEL}"))
    }

    /// Connect and idle timeouts: `GIT_AGENT_CONNECT_TIMEOUT` / `GIT_AGENT_IDLE_TIMEOUT` (seconds), the
    /// repo file, the user file, then 10 s and 120 s.
    pub fn timeouts(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(Duration, Duration), ConfigError> {
        let connect = env_seconds(env, "GIT_AGENT_CONNECT_TIMEOUT")?
            .or(self.repo.connect_timeout)
            .or(self.user.connect_timeout)
            .unwrap_or(Duration::from_secs(10));
        let idle = env_seconds(env, "GIT_AGENT_IDLE_TIMEOUT")?
            .or(self.repo.idle_timeout)
            .or(self.user.idle_timeout)
            .unwrap_or(Duration::from_secs(120));
        Ok((connect, idle))
    }

    /// `max_capture_size` (bytes): the repo file, else the user file (the store's default otherwise).
    pub fn max_capture_size(&self) -> Option<u64> {
        self.repo.max_capture_size.or(self.user.max_capture_size)
    }

    /// `max_image_size` (bytes): the repo file, the user file, then [`DEFAULT_MAX_IMAGE_SIZE`].
    pub fn max_image_size(&self) -> u64 {
        self.repo
            .max_image_size
            .or(self.user.max_image_size)
            .unwrap_or(DEFAULT_MAX_IMAGE_SIZE)
    }

    /// `worktree_pool` (checkouts kept for reuse), from the user file only (the store's default otherwise).
    pub fn worktree_pool(&self) -> Option<usize> {
        self.user
            .worktree_pool
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// Whether commits landed on the user's branch get a `Co-authored-by` trailer: the repo file, the user
    /// file, then yes.
    pub fn attribution(&self) -> file::Attribution {
        self.repo
            .attribution
            .or(self.user.attribution)
            .unwrap_or_default()
    }

    /// The project's check (`check`): the repo file, else the user file.
    pub fn check(&self) -> Option<&str> {
        self.repo.check.as_deref().or(self.user.check.as_deref())
    }

    /// How long one run of the check may take (`check_timeout`): the repo file, else the user file.
    pub fn check_timeout(&self) -> Option<Duration> {
        self.repo.check_timeout.or(self.user.check_timeout)
    }

    /// The `[hooks]` settings: each from the repo file, else the user file.
    pub fn hooks(&self) -> file::HookSettings {
        let (repo, user) = (&self.repo.hooks, &self.user.hooks);
        file::HookSettings {
            mode: repo.mode.or(user.mode),
            max_steps: repo.max_steps.or(user.max_steps),
            max_time: repo.max_time.or(user.max_time),
        }
    }

    /// The `[retry]` settings over the defaults.
    pub fn retry_policy(&self) -> RetryPolicy {
        let (repo, user) = (&self.repo.retry, &self.user.retry);
        let default = RetryPolicy::default();
        RetryPolicy {
            max_attempts: repo
                .max_attempts
                .or(user.max_attempts)
                .unwrap_or(default.max_attempts),
            base_delay: repo
                .base_delay
                .or(user.base_delay)
                .unwrap_or(default.base_delay),
            max_delay: repo
                .max_delay
                .or(user.max_delay)
                .unwrap_or(default.max_delay),
            max_retry_after: repo
                .max_retry_after
                .or(user.max_retry_after)
                .unwrap_or(default.max_retry_after),
        }
    }

    /// The model to use and how to reach it.
    pub fn resolve(
        &self,
        flag: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ModelConfig, ConfigError> {
        let spec = self.model_spec(flag, env);
        let (provider, model) = self.split_model(&spec)?;
        let preset = preset(&provider);
        let table = self.provider_table(&provider);
        let non_empty = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let env_base = preset.and_then(|p| non_empty(p.base_url_env));
        let base_override = env_base.is_some() || table.base_url.is_some();
        let base_url = env_base
            .or_else(|| table.base_url.clone())
            .or_else(|| preset.and_then(|p| p.base_url.map(str::to_string)))
            .ok_or_else(|| ConfigError::NoBaseUrl {
                provider: provider.clone(),
                path: self.user.path.clone(),
            })?;
        let base_url_env = match preset {
            Some(p) if non_empty(p.base_url_env).is_some() || table.base_url.is_none() => {
                p.base_url_env.to_string()
            }
            _ => format!("base_url in {}", self.user.path.display()),
        };
        let (api_key, key_source) = self.api_key(&provider, preset, &table, env)?;
        if provider == "openai" && api_key.is_none() && !base_override {
            return Err(ConfigError::NoEndpoint);
        }
        let key_required = preset.is_some_and(|p| p.key_required);
        if key_required && api_key.is_none() && !base_override {
            return Err(ConfigError::NoKey {
                provider,
                env: key_source,
            });
        }
        let wire = table
            .kind
            .or(preset.map(|p| p.wire))
            .unwrap_or(WireFormat::OpenAiChat);
        let server_tools = match wire {
            WireFormat::AnthropicMessages => self.user.web_search.server_tool(&provider),
            WireFormat::OpenAiChat => None,
        };
        let default_param = match preset {
            // OpenAI's reasoning models reject `max_tokens`; compatible servers often know only that name.
            Some(p) if p.name == "openai" && !base_override => MaxTokensParam::MaxCompletionTokens,
            _ => MaxTokensParam::MaxTokens,
        };
        Ok(ModelConfig {
            wire,
            model: model.to_string(),
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
            api_key_env: key_source,
            base_url_env,
            tuning: Tuning {
                headers: table.headers,
                extra_body: table.extra_body,
                drop_params: table.drop_params,
                max_tokens_param: table.max_tokens_param.unwrap_or(default_param),
                max_tokens: table.max_tokens,
                server_tools: server_tools.into_iter().collect(),
            },
            context: table.context.or(self.repo.context.or(self.user.context)),
            price: self.price(&provider, &model),
            vision: table.vision.unwrap_or(true),
            max_image_size: self.max_image_size(),
            provider,
        })
    }

    /// The key and where it came from: the provider's `api_key_command`, else its `api_key_env` or the
    /// preset's variable.
    fn api_key(
        &self,
        provider: &str,
        preset: Option<&Preset>,
        table: &ProviderTable,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(Option<String>, String), ConfigError> {
        if let Some(command) = &table.api_key_command {
            let key = run_key_command(provider, command)?;
            return Ok((
                Some(key),
                format!("the api_key_command of [providers.{provider}]"),
            ));
        }
        let name = table
            .api_key_env
            .clone()
            .or_else(|| preset.map(|p| p.api_key_env.to_string()));
        match name {
            Some(name) => Ok((env(&name).filter(|v| !v.trim().is_empty()), name)),
            None => Ok((None, format!("api_key_env in [providers.{provider}]"))),
        }
    }

    /// The user's table for `name` with the repo's tuning over it.
    fn provider_table(&self, name: &str) -> ProviderTable {
        let mut table = self.user.providers.get(name).cloned().unwrap_or_default();
        if let Some(repo) = self.repo.providers.get(name) {
            table.kind = repo.kind.or(table.kind);
            if !repo.extra_body.is_empty() {
                table.extra_body.extend(repo.extra_body.clone());
            }
            if !repo.drop_params.is_empty() {
                table.drop_params = repo.drop_params.clone();
            }
            table.max_tokens_param = repo.max_tokens_param.or(table.max_tokens_param);
            table.max_tokens = repo.max_tokens.or(table.max_tokens);
            table.context = repo.context.or(table.context);
            table.vision = repo.vision.or(table.vision);
        }
        table
    }

    fn is_provider(&self, name: &str) -> bool {
        preset(name).is_some() || self.user.providers.contains_key(name)
    }

    fn split_model(&self, spec: &str) -> Result<(String, String), ConfigError> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err(ConfigError::BadModel(spec.to_string()));
        }
        match spec.split_once('/') {
            Some((provider, model)) if self.is_provider(provider) => {
                if model.is_empty() {
                    return Err(ConfigError::BadModel(spec.to_string()));
                }
                Ok((provider.to_string(), model.to_string()))
            }
            _ => Ok((DEFAULT_PROVIDER.to_string(), spec.to_string())),
        }
    }
}

/// A number of seconds from an environment variable.
fn env_seconds(
    env: &dyn Fn(&str) -> Option<String>,
    name: &str,
) -> Result<Option<Duration>, ConfigError> {
    let Some(text) = env(name).filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    text.trim()
        .parse::<f64>()
        .ok()
        .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
        .map(Some)
        .ok_or_else(|| ConfigError::Env {
            name: name.to_string(),
            message: format!("expected a number of seconds, got {text:?}"),
        })
}

/// Runs an `api_key_command` with `sh -c` once per process and caches its output; the key never reaches
/// an error message (only the exit status and the command's stderr do).
fn run_key_command(provider: &str, command: &str) -> Result<String, ConfigError> {
    static CACHE: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(key) = cache.lock().ok().and_then(|c| c.get(command).cloned()) {
        return Ok(key);
    }
    let fail = |message: String| ConfigError::KeyCommand {
        provider: provider.to_string(),
        message,
    };
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|err| fail(format!("cannot run sh: {err}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = stderr.lines().next().unwrap_or("").trim();
        return Err(fail(
            format!("{} {first}", output.status).trim().to_string(),
        ));
    }
    let key = String::from_utf8(output.stdout)
        .map_err(|_| fail("it printed something that is not UTF-8".to_string()))?
        .trim()
        .to_string();
    if key.is_empty() {
        return Err(fail("it printed nothing".to_string()));
    }
    if let Ok(mut cache) = cache.lock() {
        cache.insert(command.to_string(), key.clone());
    }
    Ok(key)
}

fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn nothing_configured_names_what_to_set() {
        let err = resolve(None, &env_of(&[])).unwrap_err();
        assert!(matches!(err, ConfigError::NoEndpoint));
        assert!(err.to_string().contains("OPENAI_API_KEY"));
        assert!(err.to_string().contains("OPENAI_BASE_URL"));
    }

    #[test]
    fn base_url_alone_is_enough_for_a_local_server() {
        let cfg = resolve(
            Some("qwen3:8b"),
            &env_of(&[("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1/")]),
        )
        .unwrap();
        assert_eq!(cfg.provider, "openai");
        assert_eq!(cfg.model, "qwen3:8b");
        assert_eq!(cfg.base_url, "http://127.0.0.1:8080/v1");
        assert!(cfg.api_key.is_none());
    }

    #[test]
    fn flag_beats_env_and_unknown_prefix_is_part_of_the_model() {
        let env = env_of(&[
            ("OPENAI_API_KEY", "k"),
            ("GIT_AGENT_MODEL", "openai/from-env"),
        ]);
        assert_eq!(resolve(None, &env).unwrap().model, "from-env");
        assert_eq!(
            resolve(Some("openai/gpt-4.1"), &env).unwrap().model,
            "gpt-4.1"
        );
        assert_eq!(
            resolve(Some("meta-llama/llama-3"), &env).unwrap().model,
            "meta-llama/llama-3"
        );
    }

    #[test]
    fn presets_and_their_keys() {
        let cfg = resolve(Some("ollama/qwen3:8b"), &env_of(&[])).unwrap();
        assert_eq!(cfg.base_url, "http://127.0.0.1:11434/v1");
        let err = resolve(Some("groq/llama"), &env_of(&[])).unwrap_err();
        assert!(err.to_string().contains("GROQ_API_KEY"));
    }

    #[test]
    fn key_is_not_in_debug_output() {
        let cfg = resolve(None, &env_of(&[("OPENAI_API_KEY", "sk-secret")])).unwrap();
        assert!(!format!("{cfg:?}").contains("sk-secret"));
    }

    fn settings(user: &str, repo: &str) -> Settings {
        Settings {
            user: file::parse(Path::new("/home/u/config.toml"), user, Scope::User).expect("user"),
            repo: file::parse(Path::new("/r/.git-agent.toml"), repo, Scope::Repo).expect("repo"),
        }
    }

    #[test]
    fn model_selection_order() {
        let s = settings(
            "model = \"openai/from-user\"",
            "model = \"openai/from-repo\"",
        );
        let env = env_of(&[("OPENAI_API_KEY", "k")]);
        assert_eq!(s.resolve(None, &env).unwrap().model, "from-repo");
        let s = settings("model = \"openai/from-user\"", "");
        assert_eq!(s.resolve(None, &env).unwrap().model, "from-user");
        let env = env_of(&[
            ("OPENAI_API_KEY", "k"),
            ("GIT_AGENT_MODEL", "openai/from-env"),
        ]);
        assert_eq!(s.resolve(None, &env).unwrap().model, "from-env");
        assert_eq!(s.resolve(Some("openai/flag"), &env).unwrap().model, "flag");
    }

    #[test]
    fn custom_provider_with_key_command_and_tuning() {
        let s = settings(
            r#"
model = "corp/big-model"
[providers.corp]
kind = "anthropic"
base_url = "https://llm.corp.example/"
api_key_command = "printf '%s\n' corp-secret"
headers = { "X-Team" = "core" }
max_tokens = 2048
"#,
            "[providers.corp]\ndrop_params = [\"temperature\"]\n",
        );
        let cfg = s.resolve(None, &env_of(&[])).unwrap();
        assert_eq!(cfg.display_name(), "corp/big-model");
        assert_eq!(cfg.wire, WireFormat::AnthropicMessages);
        assert_eq!(cfg.base_url, "https://llm.corp.example");
        assert_eq!(cfg.api_key.as_deref(), Some("corp-secret"));
        assert!(cfg.api_key_env.contains("api_key_command"));
        assert_eq!(cfg.tuning.max_tokens, Some(2048));
        assert_eq!(cfg.tuning.drop_params, vec!["temperature"]);
        assert!(!format!("{cfg:?}").contains("corp-secret"));
        assert!(!format!("{cfg:?}").contains("core"));
    }

    #[test]
    fn failing_key_command_and_missing_base_url() {
        let s = settings(
            "[providers.x]\nbase_url = \"http://h/v1\"\napi_key_command = \"echo sk-leak; echo nope >&2; exit 3\"\n",
            "",
        );
        let err = s
            .resolve(Some("x/m"), &env_of(&[]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("api_key_command of provider 'x' failed"),
            "{err}"
        );
        assert!(err.contains("nope") && !err.contains("sk-leak"), "{err}");
        let s = settings("[providers.y]\nmax_tokens = 5\n", "");
        let err = s
            .resolve(Some("y/m"), &env_of(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("provider 'y' has no base_url"), "{err}");
    }

    #[test]
    fn preset_override_and_env_wins_over_file() {
        let s = settings(
            "[providers.openai]\nbase_url = \"http://file/v1\"\napi_key_env = \"MY_KEY\"\n",
            "",
        );
        let cfg = s
            .resolve(Some("openai/m"), &env_of(&[("MY_KEY", "k2")]))
            .unwrap();
        assert_eq!(cfg.base_url, "http://file/v1");
        assert_eq!(cfg.api_key.as_deref(), Some("k2"));
        assert_eq!(cfg.tuning.max_tokens_param, MaxTokensParam::MaxTokens);
        let cfg = s
            .resolve(
                Some("openai/m"),
                &env_of(&[("OPENAI_BASE_URL", "http://env/v1")]),
            )
            .unwrap();
        assert_eq!(cfg.base_url, "http://env/v1");
        let plain = resolve(Some("openai/o3"), &env_of(&[("OPENAI_API_KEY", "k")])).unwrap();
        assert_eq!(
            plain.tuning.max_tokens_param,
            MaxTokensParam::MaxCompletionTokens
        );
    }

    #[test]
    fn context_settings_provider_table_over_top_level_repo_over_user() {
        let s = settings(
            "context_window = 16000\ncompact_at = 0.6\nprune = false\n\
             [providers.openai]\ncontext_window = 9000\n",
            "compact_at = 0.7\n",
        );
        let env = env_of(&[("OPENAI_API_KEY", "k")]);
        let context = s.resolve(Some("openai/m"), &env).unwrap().context;
        assert_eq!(
            context.context_window,
            Some(9000),
            "the provider's table wins"
        );
        assert_eq!(
            context.compact_at,
            Some(0.7),
            "the repository's top level over the user's"
        );
        assert_eq!(context.prune, Some(false));
        assert_eq!(context.compact, None);
        // Another provider gets the top level only.
        let env = env_of(&[("OPENAI_API_KEY", "k"), ("GROQ_API_KEY", "k")]);
        let context = s.resolve(Some("groq/m"), &env).unwrap().context;
        assert_eq!(context.context_window, Some(16000));
        let s = settings(
            "[providers.openai]\ncontext_window = 9000\n",
            "[providers.openai]\ncontext_window = 7000\n",
        );
        let env = env_of(&[("OPENAI_API_KEY", "k")]);
        let context = s.resolve(None, &env).unwrap().context;
        assert_eq!(context.context_window, Some(7000));
    }

    #[test]
    fn timeouts_and_retry_from_files_and_env() {
        let s = settings(
            "idle_timeout = 7\n[retry]\nbase_delay = 0.01\n",
            "connect_timeout = 2",
        );
        let (connect, idle) = s.timeouts(&env_of(&[])).unwrap();
        assert_eq!(
            (connect, idle),
            (Duration::from_secs(2), Duration::from_secs(7))
        );
        let (_, idle) = s
            .timeouts(&env_of(&[("GIT_AGENT_IDLE_TIMEOUT", "0.25")]))
            .unwrap();
        assert_eq!(idle, Duration::from_millis(250));
        assert!(s
            .timeouts(&env_of(&[("GIT_AGENT_IDLE_TIMEOUT", "x")]))
            .is_err());
        assert_eq!(s.retry_policy().base_delay, Duration::from_millis(10));
        assert_eq!(
            s.retry_policy().max_attempts,
            RetryPolicy::default().max_attempts
        );
    }
}
