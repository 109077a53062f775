//! Secret redaction: finding secrets in text. Everything written into `refs/agent/*`, notes and commit
//! messages passes through here (because users push those refs), and the withholding policy
//! ([`super::withhold`]) uses the same finder to keep files holding secrets out of step commits.
//!
//! Two kinds of secret are found. Known values: the configured API keys, key-command output, environment
//! variables whose names look secret (`*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`) and the values in the
//! repository's `.env` files. Known formats: `sk-...` (OpenAI), `sk-ant-...` (Anthropic), GitHub tokens, AWS
//! access keys, private key blocks, JWTs and a few more, found by hand-written scanners (no regex engine needed
//! for prefixes and character classes). Each is replaced by `[REDACTED:<kind>]`.

use std::borrow::Cow;
use std::path::Path;
use std::process::Command;
use std::sync::{OnceLock, RwLock};

use super::secrets::{is_dotenv_name, is_secret_name};

/// Values shorter than this are not treated as secrets: redacting `1` or `true` everywhere would wreck text.
const MIN_KNOWN_LEN: usize = 8;

/// A secret found in some text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// `ANTHROPIC_API_KEY` for a known value (the variable it came from), or the format (`openai-key`, `jwt`).
    pub kind: String,
    /// True when the finding is a known value rather than a format match.
    pub known: bool,
    pub start: usize,
    pub end: usize,
}

/// Finds and replaces secrets.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    /// (value, kind), longest first so a key that contains another is replaced whole.
    known: Vec<(String, String)>,
}

impl Redactor {
    /// Adds a known secret value; short or empty values are ignored.
    pub fn add_known(&mut self, value: &str, kind: &str) {
        let value = value.trim();
        if value.len() < MIN_KNOWN_LEN || self.known.iter().any(|(v, _)| v == value) {
            return;
        }
        self.known.push((value.to_string(), kind.to_string()));
        // Session logs are redacted as encoded JSON, where a value holding `"` or `\` reads differently.
        if let Ok(quoted) = serde_json::to_string(value) {
            let escaped = &quoted[1..quoted.len() - 1];
            if escaped != value && !self.known.iter().any(|(v, _)| v == escaped) {
                self.known.push((escaped.to_string(), kind.to_string()));
            }
        }
        self.known.sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
    }

    /// Adds the secret-looking variables of an environment.
    pub fn add_env<I: IntoIterator<Item = (String, String)>>(&mut self, vars: I) {
        for (name, value) in vars {
            if is_secret_name(&name) {
                self.add_known(&value, &name);
            }
        }
    }

    /// Adds the values of `.env`-style files (`KEY=value` lines) found directly in `dir`.
    pub fn add_dotenv_files(&mut self, dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if !is_dotenv_name(name) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(entry.path()) else {
                continue;
            };
            for line in text.lines() {
                let line = line.trim().trim_start_matches("export ");
                if let Some((key, value)) = line.split_once('=') {
                    let value = value.trim().trim_matches(['"', '\'']);
                    self.add_known(value, key.trim());
                }
            }
        }
    }

    /// True when no known values are registered (format scanning still works).
    pub fn knows_nothing(&self) -> bool {
        self.known.is_empty()
    }

    /// Every secret in `text`, in order, without overlaps.
    pub fn find(&self, text: &str) -> Vec<Finding> {
        let mut found: Vec<Finding> = Vec::new();
        for (value, kind) in &self.known {
            let mut from = 0;
            while let Some(pos) = text[from..].find(value.as_str()) {
                let start = from + pos;
                found.push(Finding {
                    kind: kind.clone(),
                    known: true,
                    start,
                    end: start + value.len(),
                });
                from = start + value.len();
            }
        }
        found.extend(find_formats(text));
        // Known values first at equal starts, then keep the first of any overlapping pair.
        found.sort_by_key(|f| (f.start, !f.known, usize::MAX - f.end));
        let mut out: Vec<Finding> = Vec::new();
        for f in found {
            if out.last().is_none_or(|last| f.start >= last.end) {
                out.push(f);
            }
        }
        out
    }

    /// Known values only (what `git agent push` refuses).
    pub fn find_known(&self, text: &str) -> Vec<Finding> {
        self.find(text).into_iter().filter(|f| f.known).collect()
    }

    /// `text` with every secret replaced by `[REDACTED:<kind>]`.
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        replace(text, self.find(text))
    }

    /// `text` with the known values replaced (what tool results get before they go to the provider: a
    /// secret *format* in a test fixture is the model's business, the user's keys are not).
    pub fn redact_known<'t>(&self, text: &'t str) -> Cow<'t, str> {
        if self.known.is_empty() {
            return Cow::Borrowed(text);
        }
        replace(text, self.find_known(text))
    }
}

impl Redactor {
    /// Redacts every string in `value`, object keys included, as decoded text: a JSON escape (`\n` before a
    /// key's name) cannot hide a secret from a pattern then (issue 22, finding 10). A string that is itself a
    /// JSON object or array (a tool call's arguments) is decoded and walked too, and re-encoded only when
    /// something in it was redacted. True when anything changed.
    pub fn redact_value(&self, value: &mut serde_json::Value) -> bool {
        use serde_json::Value;
        match value {
            Value::String(text) => self.redact_string(text),
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |changed, item| self.redact_value(item) | changed),
            Value::Object(map) => {
                let mut changed = false;
                for item in map.values_mut() {
                    changed |= self.redact_value(item);
                }
                if map.keys().any(|k| matches!(self.redact(k), Cow::Owned(_))) {
                    let old = std::mem::take(map);
                    for (key, item) in old {
                        map.insert(self.redact(&key).into_owned(), item);
                    }
                    changed = true;
                }
                changed
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => false,
        }
    }

    fn redact_string(&self, text: &mut String) -> bool {
        let opens = text.trim_start().starts_with(['{', '[']);
        if opens {
            if let Ok(mut inner) = serde_json::from_str::<serde_json::Value>(text) {
                if self.redact_value(&mut inner) {
                    *text = inner.to_string();
                    return true;
                }
                return false;
            }
        }
        match self.redact(text) {
            Cow::Owned(clean) => {
                *text = clean;
                true
            }
            Cow::Borrowed(_) => false,
        }
    }
}

/// `text` with each finding replaced by `[REDACTED:<kind>]`.
fn replace(text: &str, found: Vec<Finding>) -> Cow<'_, str> {
    if found.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for f in found {
        out.push_str(&text[at..f.start]);
        out.push_str(&format!("[REDACTED:{}]", f.kind));
        at = f.end;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

/// The process-wide redactor, seeded from the secrets the agent started with. The session log and notes
/// (issue 3's `store::sanitize`) call [`redact()`].
pub fn global() -> &'static RwLock<Redactor> {
    static GLOBAL: OnceLock<RwLock<Redactor>> = OnceLock::new();
    GLOBAL.get_or_init(|| {
        let mut r = Redactor::default();
        r.add_env(super::secrets::all());
        r.add_env(std::env::vars());
        RwLock::new(r)
    })
}

/// Registers a known secret (a configured key, key-command output) with the process-wide redactor.
pub fn register(value: &str, kind: &str) {
    if let Ok(mut r) = global().write() {
        r.add_known(value, kind);
    }
}

/// Redacts with the process-wide redactor: the one choke point for text going into refs.
pub fn redact(text: &str) -> String {
    with_global(|r| r.redact(text).into_owned())
}

/// Redacts every string of a record with the process-wide redactor, decoded (see
/// [`Redactor::redact_value()`]): the one choke point for records going into refs. True when anything changed.
pub fn redact_value(value: &mut serde_json::Value) -> bool {
    with_global(|r| r.redact_value(value))
}

/// The known secret values in `text` replaced, with the process-wide redactor: what a tool result gets
/// before it reaches the model.
pub fn redact_known(text: &str) -> String {
    with_global(|r| r.redact_known(text).into_owned())
}

/// Runs `f` with the process-wide redactor (read-locked for the call).
pub fn with_global<T>(f: impl FnOnce(&Redactor) -> T) -> T {
    match global().read() {
        Ok(r) => f(&r),
        // A poisoned lock means a panic elsewhere mid-update; the list it holds is still a list of secrets.
        Err(poisoned) => f(&poisoned.into_inner()),
    }
}

/// Removes secrets from a child's environment: every variable whose name is secret ([`is_secret_name()`]) or
/// listed in `extra` (the configured key's variable, for example), and any whose name is not UTF-8 (it cannot
/// be judged). Commands the model runs have no business with keys, and a test that prints its environment
/// would put them into the transcript. A backstop: [`super::secrets::scrub_environment()`] has already moved the secrets the
/// agent started with out of its own environment.
///
/// A variable that holds a known key value under a name that does not look secret (a provider's custom
/// `api_key_env`, say `LLM_ACCESS`) goes too: whoever the child is (a command, an MCP server), it gets no
/// key but those its own config names, which the caller adds afterwards.
pub fn scrub_child_env(cmd: &mut Command, extra: &[String]) {
    with_global(|known| {
        for (key, value) in std::env::vars_os() {
            let secret = key
                .to_str()
                .is_none_or(|k| is_secret_name(k) || extra.iter().any(|s| s == k))
                || value
                    .to_str()
                    .is_some_and(|v| !known.knows_nothing() && !known.find_known(v).is_empty());
            if secret {
                cmd.env_remove(key);
            }
        }
    });
}

fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Whether a secret may start at byte `i`: at the start of the text, after a character that cannot be part
/// of a token, or right after a JSON escape (`\n`, `\t`, `\"`): session logs are redacted as encoded
/// JSON lines, where a key at the start of a line follows the `n` of `\n`.
fn at_boundary(bytes: &[u8], i: usize) -> bool {
    if i == 0 || !bytes[i - 1].is_ascii_alphanumeric() {
        return true;
    }
    i >= 2 && bytes[i - 2] == b'\\' && matches!(bytes[i - 1], b'n' | b't' | b'r')
}

/// Scans for secret formats.
fn find_formats(text: &str) -> Vec<Finding> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if let Some((kind, end)) = at_boundary(bytes, i).then(|| format_at(text, i)).flatten() {
            out.push(Finding {
                kind: kind.to_string(),
                known: false,
                start: i,
                end,
            });
            i = end;
            continue;
        }
        i += 1;
    }
    out.extend(aws_secrets(text));
    out.extend(url_passwords(text));
    out
}

/// The secret format starting at byte `i`, and where it ends.
fn format_at(text: &str, i: usize) -> Option<(&'static str, usize)> {
    let rest = &text.as_bytes()[i..];
    let run = |from: usize, ok: fn(u8) -> bool| {
        from + rest[from..].iter().take_while(|b| ok(**b)).count()
    };
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    let upper_digit = |b: u8| b.is_ascii_uppercase() || b.is_ascii_digit();
    if rest.starts_with(b"-----BEGIN ") {
        let header_end = text[i..].find('\n').map_or(rest.len(), |n| n);
        if text[i..i + header_end].contains("PRIVATE KEY") {
            // Through the `-----END ...-----` line, or to the end of the text if it is cut off.
            let end = text[i..]
                .find("-----END ")
                .and_then(|e| text[i + e + 9..].find("-----").map(|n| e + 9 + n + 5))
                .unwrap_or(rest.len());
            return Some(("private-key", i + end));
        }
    }
    if let Some(end) = key_body(text.as_bytes(), i) {
        return Some(("private-key", i + end));
    }
    if rest.starts_with(b"sk-ant-") {
        let end = run(7, is_token_char);
        return (end >= 7 + 10).then_some(("anthropic-key", i + end));
    }
    if rest.starts_with(b"sk-") {
        let end = run(3, is_token_char);
        return (end >= 3 + 20).then_some(("openai-key", i + end));
    }
    // Stripe secret and restricted keys, live and test (`sk_live_` + 24 or more characters).
    for prefix in [&b"sk_live_"[..], b"rk_live_", b"sk_test_", b"rk_test_"] {
        if rest.starts_with(prefix) {
            let end = run(8, alnum);
            return (end >= 8 + 16).then_some(("stripe-key", i + end));
        }
    }
    for prefix in [&b"ghp_"[..], b"gho_", b"ghu_", b"ghs_", b"ghr_"] {
        if rest.starts_with(prefix) {
            let end = run(4, alnum);
            return (end >= 4 + 30).then_some(("github-token", i + end));
        }
    }
    if rest.starts_with(b"github_pat_") {
        let end = run(11, |b| b.is_ascii_alphanumeric() || b == b'_');
        return (end >= 11 + 30).then_some(("github-token", i + end));
    }
    if rest.starts_with(b"glpat-") {
        let end = run(6, is_token_char);
        return (end >= 6 + 20).then_some(("gitlab-token", i + end));
    }
    // npm access tokens: `npm_` and 36 letters and digits.
    if rest.starts_with(b"npm_") {
        let end = run(4, alnum);
        return (end == 4 + 36).then_some(("npm-token", i + end));
    }
    if rest.starts_with(b"xox") && rest.len() > 4 && b"bpars".contains(&rest[3]) && rest[4] == b'-'
    {
        let end = run(5, is_token_char);
        return (end >= 5 + 10).then_some(("slack-token", i + end));
    }
    if rest.starts_with(b"AKIA") || rest.starts_with(b"ASIA") {
        let end = run(4, upper_digit);
        return (end == 20).then_some(("aws-access-key", i + end));
    }
    // Google API keys: `AIza` and 35 more characters.
    if rest.starts_with(b"AIza") {
        let end = run(4, is_token_char);
        return (end == 39).then_some(("google-api-key", i + end));
    }
    if rest.starts_with(b"eyJ") {
        return jwt(rest).map(|end| ("jwt", i + end));
    }
    None
}

/// The body of a key without its `-----BEGIN`/`-----END` lines, as a `search` hit or a cut-off paste shows
/// it (issue 23, finding 3): a base64 run that starts like DER (`MII`, `MIG`, `MHc`: an ASN.1 sequence, as
/// every PKCS#1/PKCS#8 key starts) or like an OpenSSH key (`b3BlbnNzaC1rZXktdjE`, "openssh-key-v1"), at
/// least 40 characters long; or one whole PEM (64) or OpenSSH (70) line of base64 that mixes upper case,
/// lower case and digits (hex digests have no upper case, words no digits). The length of the run.
fn key_body(bytes: &[u8], i: usize) -> Option<usize> {
    let is_b64 = |b: u8| b.is_ascii_alphanumeric() || b == b'+' || b == b'/';
    if i > 0 && (bytes[i - 1] == b'+' || bytes[i - 1] == b'/' || bytes[i - 1] == b'=') {
        return None;
    }
    let rest = &bytes[i..];
    let body = rest.iter().take_while(|b| is_b64(**b)).count();
    let padded = body
        + rest[body..]
            .iter()
            .take_while(|b| **b == b'=')
            .take(2)
            .count();
    let der = [&b"MII"[..], b"MIG", b"MHc", b"b3BlbnNzaC1rZXktdjE"];
    if body >= 40 && der.iter().any(|p| rest.starts_with(p)) {
        return Some(padded);
    }
    let run = &rest[..body];
    let mixed = run.iter().any(u8::is_ascii_uppercase)
        && run.iter().any(u8::is_ascii_lowercase)
        && run.iter().any(u8::is_ascii_digit);
    (matches!(body, 64 | 70) && padded == body && mixed).then_some(body)
}

/// AWS secret access keys, which have no prefix of their own: 40 base64 characters right after a name
/// ending in `secret_access_key` (any case, `_`/`-` or none between the words: `AWS_SECRET_ACCESS_KEY=`,
/// `aws_secret_access_key = `, `"SecretAccessKey": "`). Only the value is replaced, so the text still says
/// which setting it was.
fn aws_secrets(text: &str) -> Vec<Finding> {
    let bytes = text.as_bytes();
    let lower = text.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some((_, name_len_end)) = find_name(&lower[from..]) {
        let name_end = from + name_len_end;
        from = name_end;
        let mut j = name_end;
        // Separators: `=`, `:`, blanks, quotes, and the backslash of a JSON-escaped quote.
        while j < bytes.len()
            && matches!(bytes[j], b' ' | b'\t' | b'=' | b':' | b'"' | b'\'' | b'\\')
        {
            j += 1;
        }
        let b64 = |b: u8| b.is_ascii_alphanumeric() || b == b'/' || b == b'+';
        let len = bytes[j..].iter().take_while(|b| b64(**b)).count();
        if len == 40 && j > name_end {
            out.push(Finding {
                kind: "aws-secret-key".to_string(),
                known: false,
                start: j,
                end: j + 40,
            });
            from = j + 40;
        }
    }
    out
}

/// The next `secret_access_key` / `secret-access-key` / `secretaccesskey` in lower-cased text: (start, end).
fn find_name(lower: &str) -> Option<(usize, usize)> {
    let mut best: Option<(usize, usize)> = None;
    for name in ["secret_access_key", "secret-access-key", "secretaccesskey"] {
        if let Some(at) = lower.find(name) {
            if best.is_none_or(|(b, _)| at < b) {
                best = Some((at, at + name.len()));
            }
        }
    }
    best
}

/// The password of `scheme://user:password@host` (database URLs, `https://user:token@host` remotes). A
/// placeholder (`password`, `pass`, `<password>`, `${DB_PASSWORD}`, `$PASS`, `***`) is no secret and stays.
fn url_passwords(text: &str) -> Vec<Finding> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(pos) = text[from..].find("://") {
        let authority = from + pos + 3;
        from = authority;
        // The authority ends at the first `/`, `?`, `#`, blank, quote or backslash.
        let end = authority
            + bytes[authority..]
                .iter()
                .take_while(|b| {
                    !matches!(
                        b,
                        b'/' | b'?'
                            | b'#'
                            | b' '
                            | b'\t'
                            | b'\n'
                            | b'"'
                            | b'\''
                            | b'\\'
                            | b'<'
                            | b'>'
                    )
                })
                .count();
        let userinfo = match text[authority..end].rfind('@') {
            Some(at) => &text[authority..authority + at],
            None => continue,
        };
        let Some(colon) = userinfo.find(':') else {
            continue;
        };
        let password = &userinfo[colon + 1..];
        let start = authority + colon + 1;
        if colon == 0 || is_placeholder(password) {
            continue;
        }
        out.push(Finding {
            kind: "url-password".to_string(),
            known: false,
            start,
            end: start + password.len(),
        });
    }
    out
}

fn is_placeholder(password: &str) -> bool {
    let lower = password.to_ascii_lowercase();
    password.is_empty()
        || password.starts_with(['$', '<', '{', '%'])
        || password
            .chars()
            .all(|c| c == '*' || c == 'x' || c == 'X' || c == '.')
        || matches!(
            lower.as_str(),
            "password"
                | "pass"
                | "passwd"
                | "pw"
                | "pwd"
                | "secret"
                | "changeme"
                | "token"
                | "redacted"
        )
        || lower.starts_with("[redacted")
}
/// Three base64url segments separated by dots, the first starting `eyJ` (`{"` encoded).
fn jwt(rest: &[u8]) -> Option<usize> {
    let b64 = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    let mut at = 0;
    for segment in 0..3 {
        let len = rest[at..].iter().take_while(|b| b64(**b)).count();
        if len < 8 {
            return None;
        }
        at += len;
        if segment < 2 {
            if rest.get(at) != Some(&b'.') {
                return None;
            }
            at += 1;
        }
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_and_formats_are_replaced() {
        let mut r = Redactor::default();
        r.add_known("hunter2hunter2", "DB_PASSWORD");
        r.add_known("short", "X");
        let text = "pw=hunter2hunter2 key=sk-ant-api03-abcdefghijklmnop and sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX short";
        assert_eq!(
            r.redact(text),
            "pw=[REDACTED:DB_PASSWORD] key=[REDACTED:anthropic-key] and [REDACTED:openai-key] short"
        );
        assert_eq!(r.find_known(text).len(), 1);
    }

    #[test]
    fn formats() {
        let r = Redactor::default();
        let cases = [
            ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "github-token"),
            ("AKIAIOSFODNN7EXAMPLE", "aws-access-key"),
            ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws-secret-key"),
            ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "jwt"),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n", "private-key"),
            ("xoxb-1234567890-abcdefghij", "slack-token"),
        ];
        for (text, kind) in cases {
            let out = r.redact(text);
            assert!(
                out.contains(&format!("[REDACTED:{kind}]")),
                "{text} -> {out}"
            );
            assert!(!out.contains("EXAMPLE") && !out.contains("b3Blbn"), "{out}");
        }
        // Ordinary words are left alone.
        for text in [
            "risk-assessment-of-the-module-here",
            "task-1234",
            "sk-short",
            "the AKIA prefix",
            "eyJ.",
        ] {
            assert_eq!(r.redact(text), text);
        }
    }

    /// (text, the secret in it, the kind it is reported as).
    const SECRETS: &[(&str, &str, &str)] = &[
        (
            "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws-secret-key",
        ),
        (
            "export AWS_SECRET_ACCESS_KEY=\"Zt9+k2ab/Qw8XyLmNoPqRsTuVwXyZaBcDeFgHiJk\"",
            "Zt9+k2ab/Qw8XyLmNoPqRsTuVwXyZaBcDeFgHiJk",
            "aws-secret-key",
        ),
        (
            "[default]\naws_secret_access_key = Zt9+k2ab/Qw8XyLmNoPqRsTuVwXyZaBcDeFgHiJk\n",
            "Zt9+k2ab/Qw8XyLmNoPqRsTuVwXyZaBcDeFgHiJk",
            "aws-secret-key",
        ),
        (
            "{\"SecretAccessKey\": \"Zt9+k2ab/Qw8XyLmNoPqRsTuVwXyZaBcDeFgHiJk\"}",
            "Zt9+k2ab/Qw8XyLmNoPqRsTuVwXyZaBcDeFgHiJk",
            "aws-secret-key",
        ),
        (
            "stripe.api_key = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc'",
            "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "stripe-key",
        ),
        (
            "rk_live_51HxYzAbCdEfGhIjKlMnOpQr",
            "rk_live_51HxYzAbCdEfGhIjKlMnOpQr",
            "stripe-key",
        ),
        (
            "key=AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe&q=1",
            "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
            "google-api-key",
        ),
        (
            "//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789",
            "npm_abcdefghijklmnopqrstuvwxyz0123456789",
            "npm-token",
        ),
        (
            "DATABASE_URL=postgres://app:s3cr3t-Pw@db.internal:5432/app",
            "s3cr3t-Pw",
            "url-password",
        ),
        (
            "git clone https://bob:ghx-tok3n@git.example.com/r.git",
            "ghx-tok3n",
            "url-password",
        ),
        ("mysql://root:p@ss@localhost/db", "p@ss", "url-password"),
    ];

    #[test]
    fn common_formats_are_redacted() {
        let r = Redactor::default();
        for (text, secret, kind) in SECRETS {
            let out = r.redact(text);
            assert!(!out.contains(secret), "{text} -> {out}");
            assert!(
                out.contains(&format!("[REDACTED:{kind}]")),
                "{text} -> {out}"
            );
        }
        // The name stays readable: only the value goes.
        assert_eq!(
            r.redact("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            "AWS_SECRET_ACCESS_KEY=[REDACTED:aws-secret-key]"
        );
        assert_eq!(
            r.redact("postgres://app:s3cr3t-Pw@db/app"),
            "postgres://app:[REDACTED:url-password]@db/app"
        );
    }

    #[test]
    fn secrets_are_found_in_json_encoded_text() {
        // The session log is redacted line by line as encoded JSON: escapes sit right before the secret.
        let r = Redactor::default();
        for (text, secret, _) in SECRETS {
            let line = serde_json::json!({"output": format!("line one\n{text}\n")}).to_string();
            let out = r.redact(&line);
            assert!(!out.contains(secret), "{line} -> {out}");
        }
        let line = serde_json::json!({"output": "x\nAKIAIOSFODNN7EXAMPLE\tghp_abcdefghijklmnopqrstuvwxyz0123456789"}).to_string();
        let out = r.redact(&line);
        assert!(
            !out.contains("AKIAIOSFODNN7EXAMPLE") && !out.contains("ghp_abc"),
            "{out}"
        );
        let mut known = Redactor::default();
        known.add_known("pa\"ss\\word-123", "DB_PASSWORD");
        let line = serde_json::json!({"output": "pw is pa\"ss\\word-123"}).to_string();
        assert!(!known.redact(&line).contains("word-123"), "{line}");
    }

    /// Issue 23, finding 3: a key's body without its BEGIN/END lines (a `search` hit, a cut-off paste).
    #[test]
    fn key_bodies_without_their_armour_are_redacted() {
        let r = Redactor::default();
        let pem_first = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKB";
        let pem_middle = "wUb2K3ZpQ8v5Yt0Rb9XzPq4LmA7sNdE1fGhIjKlMnOpQrStUvWxYz0123456789a";
        let ssh_first = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW";
        for (text, secret) in [
            (format!("server.key:2:{pem_first}\n"), pem_first),
            (format!("a.txt:7:{pem_middle}\n"), pem_middle),
            (format!("{ssh_first}\n"), ssh_first),
        ] {
            let out = r.redact(&text);
            assert!(!out.contains(secret), "{out}");
            assert!(out.contains("[REDACTED:private-key]"), "{out}");
        }
        // Hex digests, words and integrity hashes of other lengths stay.
        for text in [
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg==",
            "ThisIsAnOrdinaryIdentifierWithoutDigitsThatIsRatherLongForCodeOk",
        ] {
            assert_eq!(r.redact(text), text);
        }
    }

    #[test]
    fn ordinary_text_is_not_redacted() {
        let r = Redactor::default();
        for text in [
            // Near misses of each format.
            "AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY}",
            "aws_secret_access_key = <your secret key>",
            "the secret_access_key setting holds 40 characters",
            "secret_access_key: tooShortToBeAKey/123",
            "sk_live_ is the prefix of live keys",
            "sk_test_short",
            "AIzaSyShort",
            "npm_config_cache=/tmp/npm",
            "npm_package_version",
            "npm_abcdefghij",
            // URLs without a password, or with a placeholder.
            "https://github.com/rust-lang/rust",
            "ssh://git@github.com/u/r.git",
            "http://localhost:8080/api?x=1",
            "https://user@example.com/path",
            "postgres://user:password@localhost/db",
            "postgres://app:${DB_PASSWORD}@db/app",
            "redis://:$REDIS_PASS@cache:6379",
            "mysql://root:****@localhost",
            "see http://example.com:80/a@b",
            // Prose and code.
            "The password must be 8 characters; the key is rotated weekly.",
            "let key = map.get(\"secret_access_key\");",
            "a::b::c and std::io://not-a-url",
        ] {
            assert_eq!(r.redact(text), text, "{text}");
        }
    }

    #[test]
    fn records_are_redacted_as_decoded_strings() {
        let r = Redactor::default();
        let key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
        let mut record = serde_json::json!({
            "type": "tool_result",
            "content": format!("[default]\naws_secret_access_key = {key}\nregion = x"),
            "calls": [{"arguments": format!("{{\"content\":\"a\\naws_secret_access_key={key}\"}}")}],
            format!("ghp_abcdefghijklmnopqrstuvwxyz0123456789"): 1,
        });
        assert!(r.redact_value(&mut record));
        let line = record.to_string();
        assert!(!line.contains(key), "{line}");
        assert!(!line.contains("ghp_"), "{line}");
        assert!(line.contains("[REDACTED:aws-secret-key]"), "{line}");
        let arguments = record["calls"][0]["arguments"].as_str().unwrap();
        let decoded: serde_json::Value = serde_json::from_str(arguments).unwrap();
        assert_eq!(
            decoded["content"],
            "a\naws_secret_access_key=[REDACTED:aws-secret-key]"
        );
        assert!(!r.redact_value(&mut serde_json::json!({"plain": ["text", 1, null]})));
    }
}
