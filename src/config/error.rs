//! The error of reading, resolving and editing settings: the one type every part of `config` returns.

use std::path::PathBuf;

/// The error returned by `config::resolve()`, `Settings::load` and `Settings::resolve`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("no model endpoint configured: set OPENAI_API_KEY (for api.openai.com) or OPENAI_BASE_URL (for an OpenAI-compatible server such as llama.cpp, vLLM or Ollama)")]
    NoEndpoint,
    #[error("no API key for provider '{provider}': set {env}")]
    NoKey { provider: String, env: String },
    #[error("invalid model '{0}': expected <provider>/<model> or <model>")]
    BadModel(String),
    /// A settings file has an unknown key or a bad value.
    #[error("{}:{line}: {}{message}", .path.display(), if .key.is_empty() { String::new() } else { format!("{key}: ") })]
    File {
        path: PathBuf,
        line: usize,
        key: String,
        message: String,
    },
    #[error("cannot read {}: {message}", .path.display())]
    Io { path: PathBuf, message: String },
    #[error("provider '{provider}' has no base_url\nhint: add base_url to [providers.{provider}] in {}", .path.display())]
    NoBaseUrl { provider: String, path: PathBuf },
    /// The configured `api_key_command` failed; its output is never shown (it may be a key).
    #[error("the api_key_command of provider '{provider}' failed: {message}")]
    KeyCommand { provider: String, message: String },
    #[error("invalid {name}: {message}")]
    Env { name: String, message: String },
    /// `config get|set` was given a key that names no setting, or a value it cannot take.
    #[error("{}{message}", if .key.is_empty() { String::new() } else { format!("{key}: ") })]
    Key { key: String, message: String },
}
