//! Asking the model server how large the context window is, for a model that no setting names and the table
//! of known models does not know: local and self-hosted servers run whatever window they were started with,
//! and guessing too large makes the server cut the prompt (or refuse it) long before compaction starts.
//!
//! Each server kind says it differently: llama.cpp in `GET /props`, vLLM, OpenRouter and LM Studio in their
//! `GET /v1/models` entries, Ollama in `POST /api/show`. The hosted OpenAI and Anthropic APIs report no
//! window, so they are never asked. The whole probe is bounded by [`PROBE_WAIT`] and never fails: any error
//! means "unknown".

use std::time::Duration;

use serde_json::{json, Value};

use super::http::Endpoint;

/// How long the probe may take in all: it runs once, before the first request of a session.
pub const PROBE_WAIT: Duration = Duration::from_secs(2);

/// The window `http`'s server reports for `model`, if it reports one within [`PROBE_WAIT`]. `ollama` says the
/// server is Ollama (its preset), which alone answers `/api/show`.
pub(crate) async fn probe(http: &Endpoint, model: &str, ollama: bool) -> Option<u64> {
    let base = http.base_url();
    if reports_no_window(base) {
        return None;
    }
    // llama.cpp and Ollama serve their own routes beside the OpenAI-compatible `/v1`.
    let root = base.strip_suffix("/v1").unwrap_or(base);
    let ask = async {
        if ollama {
            let body = json!({"model": model});
            let show = http
                .fetch_json(&format!("{root}/api/show"), Some(&body))
                .await;
            return show.and_then(|show| ollama_window(&show));
        }
        let props = http.fetch_json(&format!("{root}/props"), None).await;
        if let Some(window) = props.and_then(|props| llama_cpp_window(&props)) {
            return Some(window);
        }
        let models = http.fetch_json(&format!("{base}/models"), None).await;
        models.and_then(|models| listed_window(&models, model))
    };
    tokio::time::timeout(PROBE_WAIT, ask).await.ok().flatten()
}

/// The hosted APIs whose model lists carry no window (the table covers their models).
fn reports_no_window(base: &str) -> bool {
    reqwest::Url::parse(base)
        .is_ok_and(|url| matches!(url.host_str(), Some("api.openai.com" | "api.anthropic.com")))
}

/// llama.cpp's `/props`: the context each request gets (the server's `n_ctx` split over its slots).
fn llama_cpp_window(props: &Value) -> Option<u64> {
    positive(&props["default_generation_settings"]["n_ctx"])
}

/// The entry of a `/v1/models` list whose `id` is `model`: `max_model_len` (vLLM), `context_length`
/// (OpenRouter, LM Studio) or `context_window` (Groq).
fn listed_window(models: &Value, model: &str) -> Option<u64> {
    let entry = models["data"]
        .as_array()?
        .iter()
        .find(|entry| entry["id"].as_str() == Some(model))?;
    ["max_model_len", "context_length", "context_window"]
        .iter()
        .find_map(|field| positive(&entry[*field]))
}

/// Ollama's `/api/show`: a `num_ctx` the model file sets is what the server runs with; else the model's own
/// `<arch>.context_length`.
fn ollama_window(show: &Value) -> Option<u64> {
    let num_ctx = show["parameters"].as_str().and_then(|parameters| {
        parameters.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("num_ctx")).then(|| words.next()?.parse().ok())?
        })
    });
    num_ctx.filter(|n: &u64| *n > 0).or_else(|| {
        show["model_info"]
            .as_object()?
            .iter()
            .find(|(key, _)| key.ends_with(".context_length"))
            .and_then(|(_, value)| positive(value))
    })
}

fn positive(value: &Value) -> Option<u64> {
    value.as_u64().filter(|n| *n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_cpp_props() {
        let props = json!({"default_generation_settings": {"n_ctx": 8192, "n_predict": -1}, "total_slots": 1});
        assert_eq!(llama_cpp_window(&props), Some(8192));
        assert_eq!(llama_cpp_window(&json!({"error": "nope"})), None);
    }

    #[test]
    fn model_lists_match_the_id() {
        let models = json!({"object": "list", "data": [
            {"id": "other", "max_model_len": 4096},
            {"id": "Qwen/Qwen3-8B", "max_model_len": 32768},
            {"id": "lm", "context_length": 16384},
            {"id": "groq", "context_window": 131072},
            {"id": "bare"},
        ]});
        assert_eq!(listed_window(&models, "Qwen/Qwen3-8B"), Some(32768));
        assert_eq!(listed_window(&models, "lm"), Some(16384));
        assert_eq!(listed_window(&models, "groq"), Some(131072));
        assert_eq!(listed_window(&models, "bare"), None);
        assert_eq!(listed_window(&models, "missing"), None);
    }

    #[test]
    fn ollama_prefers_num_ctx_then_any_context_length() {
        let show =
            json!({"model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960}});
        assert_eq!(ollama_window(&show), Some(40960));
        let show = json!({"parameters": "temperature 0.6\nnum_ctx                        8192",
                          "model_info": {"qwen3.context_length": 40960}});
        assert_eq!(ollama_window(&show), Some(8192));
        assert_eq!(ollama_window(&json!({})), None);
    }

    #[test]
    fn hosted_apis_are_not_asked() {
        assert!(reports_no_window("https://api.openai.com/v1"));
        assert!(reports_no_window("https://api.anthropic.com"));
        assert!(!reports_no_window("http://127.0.0.1:8080/v1"));
        assert!(!reports_no_window("https://openrouter.ai/api/v1"));
    }
}
