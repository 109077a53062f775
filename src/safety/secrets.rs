//! Secret names, and keeping the agent's secrets out of the environment that `run` commands can read.
//!
//! This module owns the rule for which variable names hold secrets ([`is_secret_name()`]) and which files are
//! environment files ([`is_dotenv_name()`]); redaction and withholding build on it, never the reverse.
//!
//! Removing a variable with `std::env::remove_var` is not enough: `/proc/<pid>/environ` shows the environment a
//! process was *started* with, and any command the agent runs can read its parent's. So at start-up, when
//! secret-looking variables are present, the agent re-executes itself without them and hands their values to
//! the new image through an inherited pipe; from then on they live in memory only ([`var()`]).
//!
//! The agent's own parent (`git`, when started as `git agent`), the user's shell and wrappers such as `timeout`
//! still have them in their environments, and Landlock does not close `/proc/<pid>/environ`: commands run in
//! a PID namespace with a private `/proc` where the kernel allows it ([`super::isolate`]), which hides every
//! process outside the command's own tree; where it does not, the session says so. Keys from
//! `api_key_command` never enter any environment.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::OnceLock;

/// Set in the re-executed image: the fd to read the secrets from.
const FD_VAR: &str = "GIT_AGENT_SECRETS_FD";
/// Set to `0` to skip the re-exec (for measuring it, or when `/proc/self/exe` is unusable).
const REEXEC_VAR: &str = "GIT_AGENT_REEXEC";
/// A pipe holds at least this much without a reader; more secrets than this are not worth a deadlock.
const PIPE_LIMIT: usize = 60 * 1024;

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
}

/// `.env`, `.env.local`, `prod.env`; not the templates meant to be committed (`.env.example`).
pub fn is_dotenv_name(name: &str) -> bool {
    let templates = [".example", ".sample", ".template", ".dist", ".defaults"];
    (name == ".env" || name.starts_with(".env.") || name.ends_with(".env"))
        && !templates.iter().any(|t| name.ends_with(t))
}

/// Removes secrets from a child's environment: every variable whose name is secret ([`is_secret_name()`]) or
/// listed in `extra` (the configured key's variable, for example), and any whose name is not UTF-8 (it cannot
/// be judged). Commands the model runs have no business with keys, and a test that prints its environment
/// would put them into the transcript. A backstop: [`scrub_environment()`] has already moved the secrets the
/// agent started with out of its own environment.
pub fn scrub_child_env(cmd: &mut Command, extra: &[String]) {
    for (key, _) in std::env::vars_os() {
        let secret = key
            .to_str()
            .is_none_or(|k| is_secret_name(k) || extra.iter().any(|s| s == k));
        if secret {
            cmd.env_remove(key);
        }
    }
}

/// Call first thing in `main`: moves secret variables out of the environment, re-executing the binary if
/// needed. Returns normally in the process that carries on (the original one only if re-exec failed).
pub fn scrub_environment() {
    if let Some(fd) = std::env::var(FD_VAR)
        .ok()
        .and_then(|v| v.parse::<RawFd>().ok())
    {
        let secrets = read_secrets(fd);
        // SAFETY: single-threaded start-up, before anything reads the environment concurrently.
        unsafe { std::env::remove_var(FD_VAR) };
        let _ = SECRETS.set(secrets);
        return;
    }
    let secrets: BTreeMap<String, String> = std::env::vars()
        .filter(|(name, value)| is_secret_name(name) && !value.is_empty())
        .collect();
    if !secrets.is_empty() && std::env::var(REEXEC_VAR).as_deref() != Ok("0") {
        // Only returns if the exec failed; then fall back to removing the variables in this process, which
        // hides them from children's environments but not from /proc/<pid>/environ.
        reexec(&secrets);
    }
    for name in secrets.keys() {
        // SAFETY: as above.
        unsafe { std::env::remove_var(name) };
    }
    let _ = SECRETS.set(secrets);
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

fn reexec(secrets: &BTreeMap<String, String>) {
    let mut payload = Vec::new();
    for (k, v) in secrets {
        payload.extend_from_slice(k.as_bytes());
        payload.push(0);
        payload.extend_from_slice(v.as_bytes());
        payload.push(0);
    }
    if payload.len() > PIPE_LIMIT {
        return;
    }
    let mut fds = [0 as RawFd; 2];
    // SAFETY: plain pipe(2) into a local array. Without O_CLOEXEC: the read end must survive the exec.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return;
    }
    let (read_fd, write_fd) = (fds[0], fds[1]);
    // SAFETY: we own write_fd; the payload fits in the pipe buffer, so this cannot block.
    let written = unsafe { libc::write(write_fd, payload.as_ptr().cast(), payload.len()) };
    // SAFETY: closing our own fd.
    unsafe { libc::close(write_fd) };
    if written != payload.len() as isize {
        // SAFETY: as above.
        unsafe { libc::close(read_fd) };
        return;
    }
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_default();
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0(argv0).args(args).env(FD_VAR, read_fd.to_string());
    for name in secrets.keys() {
        cmd.env_remove(name);
    }
    let _err = cmd.exec();
    // SAFETY: the exec failed; the fd is still ours.
    unsafe { libc::close(read_fd) };
}

fn read_secrets(fd: RawFd) -> BTreeMap<String, String> {
    // SAFETY: the fd was created for us by the image we replaced and is read exactly once, here.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    let mut data = Vec::new();
    if file.read_to_end(&mut data).is_err() {
        return BTreeMap::new();
    }
    let mut fields = data.split(|b| *b == 0);
    let mut out = BTreeMap::new();
    while let (Some(k), Some(v)) = (fields.next(), fields.next()) {
        if k.is_empty() {
            break;
        }
        out.insert(
            String::from_utf8_lossy(k).into_owned(),
            String::from_utf8_lossy(v).into_owned(),
        );
    }
    out
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
