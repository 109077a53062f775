//! Secret names, and keeping the agent's secrets out of the environment that `run` commands can read.
//!
//! This module owns the rule for which variable names hold secrets ([`is_secret_name()`]) and which files are
//! environment files ([`is_dotenv_name()`]); redaction and withholding build on it, never the reverse.
//!
//! Removing a variable with `std::env::remove_var` is not enough: `/proc/<pid>/environ` shows the environment a
//! process was *started* with, and any command the agent runs can read its parent's. That file is read from the
//! process's own memory (the strings the kernel put on its stack at `exec`), so at start-up the agent copies
//! the secret values into memory ([`var()`]) and overwrites them there with zeros, before any thread exists:
//! from then on `/proc/<pid>/environ` shows `NAME=` and nothing else. This replaced a re-exec of the binary
//! with the secrets handed over through a pipe, which kept the same guarantee for 2.5 ms of every start-up
//! (issue 16); the secrets' values live in the process's memory either way, where only a debugger reaches.
//!
//! The agent's own parent (`git`, when started as `git agent`), the user's shell and wrappers such as `timeout`
//! still have them in their environments, and Landlock does not close `/proc/<pid>/environ`: commands run in
//! a PID namespace with a private `/proc` where the kernel allows it ([`super::isolate`]), which hides every
//! process outside the command's own tree; where it does not, the session says so. Keys from
//! `api_key_command` never enter any environment.

use std::collections::BTreeMap;
use std::sync::OnceLock;

static SECRETS: OnceLock<BTreeMap<String, String>> = OnceLock::new();

/// Variable names that hold secrets: `*KEY*` as a word (`API_KEY`, `OPENAI_KEY`, `KEY_ID`), and any name
/// containing `TOKEN` (not as part of `TOKENIZER`), `SECRET`, `PASSWORD`, `PASSWD` or `CREDENTIAL`.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    // `TOKENIZERS_PARALLELISM` and friends configure tokenizers; they hold no secret. A name with both
    // (`HF_TOKENIZER_TOKEN`) still counts.
    let token = upper
        .match_indices("TOKEN")
        .any(|(at, _)| !upper[at..].starts_with("TOKENIZ"));
    let other = [
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "APIKEY",
        "PRIVATE_KEY",
    ];
    if token || other.iter().any(|w| upper.contains(w)) {
        return true;
    }
    upper.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| {
        w == "KEY" || w == "KEYS" || (w.ends_with("KEY") && w.len() > 3 && !w.ends_with("MONKEY"))
    }) && !matches!(upper.as_str(), "GPG_KEY_ID" | "XKB_KEYMAP")
        && !is_git_config_key_name(&upper)
}

/// git's `GIT_CONFIG_KEY_<n>`: the name of a config key given with `GIT_CONFIG_COUNT` (its value is in
/// `GIT_CONFIG_VALUE_<n>`). Taken out of the environment, it left git's (and gix's) configuration with a count
/// and no keys, and no repository would open.
fn is_git_config_key_name(upper: &str) -> bool {
    upper
        .strip_prefix("GIT_CONFIG_KEY_")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// `.env`, `.env.local`, `prod.env`; not the templates meant to be committed (`.env.example`).
pub fn is_dotenv_name(name: &str) -> bool {
    let templates = [".example", ".sample", ".template", ".dist", ".defaults"];
    (name == ".env" || name.starts_with(".env.") || name.ends_with(".env"))
        && !templates.iter().any(|t| name.ends_with(t))
}

/// Call first thing in `main`, before any thread starts: moves secret variables out of the environment, and
/// out of the memory `/proc/<pid>/environ` is read from (see the module docs).
pub fn scrub_environment() {
    let secrets: BTreeMap<String, String> = std::env::vars()
        .filter(|(name, value)| is_secret_name(name) && !value.is_empty())
        .collect();
    if secrets.is_empty() {
        return;
    }
    wipe_start_environment(&secrets);
    for name in secrets.keys() {
        crate::sys::env::remove_at_start(name);
    }
    let _ = SECRETS.set(secrets);
}

/// Overwrites with zeros the values of `secrets` in the environment strings the process started with.
fn wipe_start_environment(secrets: &BTreeMap<String, String>) {
    crate::sys::env::wipe_start_values(|name| secrets.contains_key(name));
}

/// A variable from the original environment: the secret kept in memory, or the live environment.
pub fn var(name: &str) -> Option<String> {
    SECRETS
        .get()
        .and_then(|s| s.get(name).cloned())
        .or_else(|| std::env::var(name).ok())
}

/// All secret variables the agent started with (name, value).
pub fn all() -> Vec<(String, String)> {
    SECRETS
        .get()
        .map(|s| s.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        for n in [
            "OPENAI_API_KEY",
            "anthropic_api_key",
            "ANTHROPIC_AUTH_TOKEN",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "MY_APIKEY",
            "STRIPE_KEY",
            "MY_SERVICE_SECRET",
            "HF_TOKENIZER_TOKEN",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in [
            "PATH",
            "HOME",
            "KEYBOARD",
            "MONKEY",
            "XKB_KEYMAP",
            "GPG_KEY_ID",
            "PWD",
            "TERM",
            "TOKENIZERS_PARALLELISM",
            "GIT_CONFIG_KEY_0",
            "GIT_CONFIG_KEY_12",
        ] {
            assert!(!is_secret_name(n), "{n}");
        }
    }

    #[test]
    fn dotenv_names() {
        for n in [".env", ".env.local", "prod.env"] {
            assert!(is_dotenv_name(n), "{n}");
        }
        for n in [".env.example", ".env.sample", "env.rs", "environment"] {
            assert!(!is_dotenv_name(n), "{n}");
        }
    }
}
