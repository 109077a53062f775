//! Secret redaction: everything written into `refs/agent/*`, notes and step commits passes through here,
//! because users push those refs.
//!
//! Two kinds of secret are found. Known values: the configured API keys, key-command output, environment
//! variables whose names look secret (`*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`) and the values in the
//! repository's `.env` files. Known formats: `sk-...` (OpenAI), `sk-ant-...` (Anthropic), GitHub tokens, AWS
//! access keys, private key blocks, JWTs and a few more, found by hand-written scanners (no regex engine needed
//! for prefixes and character classes). Each is replaced by `[REDACTED:<kind>]`.

use std::borrow::Cow;
use std::path::Path;
use std::sync::{OnceLock, RwLock};

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
        let found = self.find(text);
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
    match global().read() {
        Ok(r) => r.redact(text).into_owned(),
        // A poisoned lock means a panic elsewhere; redacting with formats alone still protects keys.
        Err(_) => Redactor::default().redact(text).into_owned(),
    }
}

/// Variable names that hold secrets: `*KEY*` as a word (`API_KEY`, `OPENAI_KEY`, `KEY_ID`), and any name
/// containing `TOKEN` (not `TOKENIZER`), `SECRET`, `PASSWORD`, `PASSWD` or `CREDENTIAL`.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    // `TOKENIZERS_PARALLELISM` and friends configure tokenizers; they hold no secret.
    let token = upper.contains("TOKEN") && !upper.contains("TOKENIZ");
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

/// Files the file tools refuse unless an allow rule names them, and step commits never include: key
/// material and environment files. `~/.ssh` and `~/.aws` are outside the checkout and refused by path
/// confinement already; they are listed for `run` commands' output paths and for rules.
pub fn sensitive_path(rel: &Path) -> Option<&'static str> {
    let name = rel.file_name()?.to_str()?;
    let lower = name.to_ascii_lowercase();
    if is_dotenv_name(&lower) {
        return Some("an environment file");
    }
    let key_ext = [".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".ppk"];
    if key_ext.iter().any(|e| lower.ends_with(e)) {
        return Some("key material");
    }
    if lower.starts_with("id_rsa")
        || lower.starts_with("id_ed25519")
        || lower.starts_with("id_ecdsa")
        || lower.starts_with("id_dsa")
    {
        return Some("an SSH key");
    }
    if matches!(
        lower.as_str(),
        ".netrc" | ".pgpass" | "credentials" | ".git-credentials"
    ) {
        return Some("a credentials file");
    }
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    if parts
        .iter()
        .any(|p| p == ".ssh" || p == ".aws" || p == ".gnupg")
    {
        return Some("a credentials directory");
    }
    None
}

/// Whether a file of the user's (captured as step 0) must stay out of the session's branch: a sensitive
/// name, or content holding a known secret value or a secret format. Deletions (missing files) pass.
pub fn withhold_user_file(workdir: &Path, rel: &Path) -> bool {
    let abs = workdir.join(rel);
    if !abs.is_file() {
        return false;
    }
    if sensitive_path(rel).is_some() {
        return true;
    }
    match std::fs::read(&abs) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            match global().read() {
                Ok(r) => !r.find(&text).is_empty(),
                Err(_) => !Redactor::default().find(&text).is_empty(),
            }
        }
        Err(_) => false,
    }
}

/// A known secret found in an object that `git agent push` would send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefLeak {
    /// The object id (blob, tree, commit or tag).
    pub object: String,
    /// The path of a blob in the pushed history, when known.
    pub path: String,
    /// The kind of secret (the variable it came from).
    pub kind: String,
}

/// The known secrets in objects reachable from `refs` but not from the user's own branches, tags and remote
/// branches: what a push of those refs would publish. `git agent push` refuses when this is not empty.
/// Only known values count: a format match in pushed history might be a test fixture, a known key never is.
pub fn secrets_in_refs(
    repo_dir: &Path,
    refs: &[&str],
    redactor: &Redactor,
) -> std::io::Result<Vec<RefLeak>> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    if refs.is_empty() {
        return Ok(Vec::new());
    }
    let listed = Command::new("git")
        .args(["rev-list", "--objects"])
        .args(refs)
        // `agent/*` branches are what is pushed, so they do not count as already published.
        .args([
            "--not",
            "--exclude=agent/*",
            "--branches",
            "--tags",
            "--remotes",
        ])
        .current_dir(repo_dir)
        .stderr(Stdio::null())
        .output()?;
    if !listed.status.success() {
        return Err(std::io::Error::other("git rev-list failed"));
    }
    let listing = String::from_utf8_lossy(&listed.stdout);
    let objects: Vec<(&str, &str)> = listing
        .lines()
        .map(|l| l.split_once(' ').unwrap_or((l, "")))
        .collect();
    let mut child = Command::new("git")
        .args(["cat-file", "--batch"])
        .current_dir(repo_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut input = String::new();
    for (id, _) in &objects {
        input.push_str(id);
        input.push('\n');
    }
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("no stdin"))?;
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output()?;
    writer
        .join()
        .map_err(|_| std::io::Error::other("writer panicked"))??;
    let mut leaks = Vec::new();
    let mut data = &out.stdout[..];
    for (id, path) in &objects {
        // Each record: `<id> <type> <size>\n<content>\n`.
        let Some(nl) = data.iter().position(|b| *b == b'\n') else {
            break;
        };
        let header = String::from_utf8_lossy(&data[..nl]).to_string();
        let size: usize = header
            .rsplit(' ')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let start = nl + 1;
        let end = (start + size).min(data.len());
        let text = String::from_utf8_lossy(&data[start..end]);
        if let Some(f) = redactor.find_known(&text).first() {
            leaks.push(RefLeak {
                object: id.to_string(),
                path: path.to_string(),
                kind: f.kind.clone(),
            });
        }
        data = &data[(end + 1).min(data.len())..];
    }
    Ok(leaks)
}

fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Scans for secret formats.
fn find_formats(text: &str) -> Vec<Finding> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let boundary = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        if let Some((kind, end)) = boundary.then(|| format_at(text, i)).flatten() {
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
    if rest.starts_with(b"sk-ant-") {
        let end = run(7, is_token_char);
        return (end >= 7 + 10).then_some(("anthropic-key", i + end));
    }
    if rest.starts_with(b"sk-") {
        let end = run(3, is_token_char);
        return (end >= 3 + 20).then_some(("openai-key", i + end));
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
    if rest.starts_with(b"xox") && rest.len() > 4 && b"bpars".contains(&rest[3]) && rest[4] == b'-'
    {
        let end = run(5, is_token_char);
        return (end >= 5 + 10).then_some(("slack-token", i + end));
    }
    if rest.starts_with(b"AKIA") || rest.starts_with(b"ASIA") {
        let end = run(4, upper_digit);
        return (end == 20).then_some(("aws-access-key", i + end));
    }
    if rest.starts_with(b"AIza") {
        let end = run(4, is_token_char);
        return (end == 39).then_some(("google-api-key", i + end));
    }
    if rest.starts_with(b"eyJ") {
        return jwt(rest).map(|end| ("jwt", i + end));
    }
    let lower_prefix =
        |p: &str| rest.len() >= p.len() && rest[..p.len()].eq_ignore_ascii_case(p.as_bytes());
    if lower_prefix("aws_secret_access_key") {
        let mut j = "aws_secret_access_key".len();
        while j < rest.len() && matches!(rest[j], b' ' | b'=' | b':' | b'"' | b'\'') {
            j += 1;
        }
        let end = run(j, |b| b.is_ascii_alphanumeric() || b == b'/' || b == b'+');
        return (end - j == 40).then_some(("aws-secret-key", i + end));
    }
    None
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

    #[test]
    fn push_check_finds_known_values_in_agent_history_only() {
        let dir =
            std::env::temp_dir().join(format!("git-agent-redact-push-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(&dir)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@e")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@e")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        git(&["init", "-q", "-b", "main"]);
        std::fs::write(
            dir.join("a.txt"),
            "user's own file mentions hunter2hunter2\n",
        )
        .unwrap();
        git(&["add", "a.txt"]);
        git(&["commit", "-qm", "base"]);
        git(&["checkout", "-qb", "agent/abc"]);
        std::fs::write(dir.join("b.txt"), "clean\n").unwrap();
        git(&["add", "b.txt"]);
        git(&["commit", "-qm", "clean step"]);
        let mut r = Redactor::default();
        r.add_known("hunter2hunter2", "DB_PASSWORD");
        // Already on main: not a leak of this push.
        assert_eq!(
            secrets_in_refs(&dir, &["refs/heads/agent/abc"], &r).unwrap(),
            vec![]
        );
        std::fs::write(dir.join("c.txt"), "key hunter2hunter2\n").unwrap();
        git(&["add", "c.txt"]);
        git(&["commit", "-qm", "leaky step"]);
        let leaks = secrets_in_refs(&dir, &["refs/heads/agent/abc"], &r).unwrap();
        assert_eq!(leaks.len(), 1, "{leaks:?}");
        assert_eq!(
            (leaks[0].path.as_str(), leaks[0].kind.as_str()),
            ("c.txt", "DB_PASSWORD")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn secret_names() {
        for n in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "MY_APIKEY",
            "STRIPE_KEY",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in [
            "PATH",
            "HOME",
            "KEYBOARD",
            "MONKEY",
            "XKB_KEYMAP",
            "PWD",
            "TERM",
        ] {
            assert!(!is_secret_name(n), "{n}");
        }
    }

    #[test]
    fn sensitive_paths() {
        for p in [
            ".env",
            "app/.env.local",
            "certs/server.pem",
            "id_rsa",
            "x/.ssh/config",
            "deploy.key",
        ] {
            assert!(sensitive_path(Path::new(p)).is_some(), "{p}");
        }
        for p in [".env.example", "src/env.rs", "README.md", "keys.rs"] {
            assert!(sensitive_path(Path::new(p)).is_none(), "{p}");
        }
    }
}
