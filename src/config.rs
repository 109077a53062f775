//! Model selection and provider endpoints (DESIGN section 3).
//!
//! A model is `provider/model`; when the first segment is not a known provider the whole string is a model
//! on the default provider (`openai`), so `GIT_AGENT_MODEL=qwen3:8b` with `OPENAI_BASE_URL` pointing at a local
//! server just works. Keys only ever come from the environment and are never printed.

use std::fmt;

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

/// The error returned by [`resolve()`].
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("no model endpoint configured: set OPENAI_API_KEY (for api.openai.com) or OPENAI_BASE_URL (for an OpenAI-compatible server such as llama.cpp, vLLM or Ollama)")]
    NoEndpoint,
    #[error("no API key for provider '{provider}': set {env}")]
    NoKey {
        provider: &'static str,
        env: &'static str,
    },
    #[error("invalid model '{0}': expected <provider>/<model> or <model>")]
    BadModel(String),
}

/// Everything needed to talk to one model. The key is kept out of `Debug` output.
#[derive(Clone)]
pub struct ModelConfig {
    pub provider: &'static str,
    pub wire: WireFormat,
    pub model: String,
    pub base_url: String,
    pub api_key: Option<String>,
    pub api_key_env: &'static str,
    pub base_url_env: &'static str,
}

impl fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelConfig")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .finish()
    }
}

impl ModelConfig {
    /// `provider/model`, as shown to the user and recorded in the session.
    pub fn display_name(&self) -> String {
        format!("{}/{}", self.provider, self.model)
    }
}

/// Resolves the model to use from the `--model` flag and the environment (`env` is `std::env::var` in the
/// binary; tests pass their own).
pub fn resolve(
    flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ModelConfig, ConfigError> {
    let spec = flag
        .map(str::to_string)
        .or_else(|| env("GIT_AGENT_MODEL"))
        .unwrap_or_else(|| format!("{DEFAULT_PROVIDER}/{DEFAULT_MODEL}"));
    let (preset, model) = split_model(&spec)?;
    let non_empty = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let api_key = non_empty(preset.api_key_env);
    let base_override = non_empty(preset.base_url_env);
    if preset.name == "openai" && api_key.is_none() && base_override.is_none() {
        return Err(ConfigError::NoEndpoint);
    }
    if preset.key_required && api_key.is_none() && base_override.is_none() {
        return Err(ConfigError::NoKey {
            provider: preset.name,
            env: preset.api_key_env,
        });
    }
    let base_url = base_override
        .or_else(|| preset.base_url.map(str::to_string))
        .ok_or(ConfigError::NoEndpoint)?;
    Ok(ModelConfig {
        provider: preset.name,
        wire: preset.wire,
        model: model.to_string(),
        base_url: base_url.trim_end_matches('/').to_string(),
        api_key,
        api_key_env: preset.api_key_env,
        base_url_env: preset.base_url_env,
    })
}

fn split_model(spec: &str) -> Result<(&'static Preset, &str), ConfigError> {
    let spec = spec.trim();
    if spec.is_empty() {
        return Err(ConfigError::BadModel(spec.to_string()));
    }
    let default = preset(DEFAULT_PROVIDER).expect("the default provider is a preset");
    match spec.split_once('/') {
        Some((provider, model)) => {
            if let Some(p) = preset(provider) {
                if model.is_empty() {
                    return Err(ConfigError::BadModel(spec.to_string()));
                }
                return Ok((p, model));
            }
            Ok((default, spec))
        }
        None => Ok((default, spec)),
    }
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
}
