//! Which files stay out of git: the one withholding policy, for the user's files captured as step 0 and for
//! every step the agent commits. The store asks [`decide()`] about each file before it writes a blob
//! (`Store::capture_user_changes`, `Store::commit_step`), so nothing enters a commit around it.
//!
//! A file is withheld when its name marks it as key material or an environment file, when it holds the value
//! of a known secret, or when it holds a string in a secret format (`sk-...`, a private key block) that the
//! version it replaces did not (a fixture already in history is no new leak; a key the agent just wrote is).
//! Only text is judged here: the store reads the files and the committed blobs.

use std::fmt;
use std::path::{Path, PathBuf};

use super::redact::Redactor;
use super::secrets::is_dotenv_name;

/// Why a file stays out of a commit. `Display` completes "… was not committed: ".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Its name marks it as holding secrets ("an environment file", "key material", ...).
    Sensitive(&'static str),
    /// It holds the value of a known secret; the name of the variable (or config key) it came from.
    KnownValue(String),
    /// It holds a secret format (`openai-key`, `jwt`, ...) that its committed version lacked.
    NewSecret(String),
    /// Git refuses its name in a tree ([`super::path::git_refuses()`]): the name, and why.
    NameGitRefuses(String, &'static str),
    /// It lies inside this submodule (a gitlink in the tree the commit is built on): its files belong to the
    /// submodule's own repository.
    InSubmodule(String),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Sensitive(what) => write!(f, "it is {what}"),
            Reason::KnownValue(kind) => write!(f, "it contains the value of {kind}"),
            Reason::NewSecret(kind) => write!(f, "it contains a new secret ({kind})"),
            Reason::NameGitRefuses(name, why) => {
                write!(f, "git refuses the name '{name}' ({why}); rename it")
            }
            Reason::InSubmodule(sub) => write!(
                f,
                "it is inside the submodule '{sub}', whose files belong to its own repository"
            ),
        }
    }
}

/// A file kept out of a commit: it stays where it is (the checkout, or the user's work tree) and out of git.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Withheld {
    /// Relative to the checkout (or the user's work tree for step 0).
    pub path: PathBuf,
    pub reason: Reason,
}

/// Decides whether `rel`, about to be committed with the content `bytes`, must stay out of git, and why.
///
/// `previous` gives the content the commit replaces (the blob at `rel` in the tree the commit is built on),
/// `None` for a new file; it is only asked for when the text holds a secret format. `None` means keep.
pub fn decide(
    redactor: &Redactor,
    rel: &Path,
    bytes: &[u8],
    previous: impl FnOnce() -> Option<Vec<u8>>,
) -> Option<Reason> {
    if let Some(what) = sensitive_path(rel) {
        return Some(Reason::Sensitive(what));
    }
    let text = String::from_utf8_lossy(bytes);
    let found = redactor.find(&text);
    if found.is_empty() {
        return None;
    }
    if let Some(f) = found.iter().find(|f| f.known) {
        return Some(Reason::KnownValue(f.kind.clone()));
    }
    let before = previous().unwrap_or_default();
    let before = String::from_utf8_lossy(&before);
    found
        .iter()
        .find(|f| !before.contains(&text[f.start..f.end]))
        .map(|f| Reason::NewSecret(f.kind.clone()))
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

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX";

    fn redactor() -> Redactor {
        let mut r = Redactor::default();
        r.add_known("hunter2hunter2", "DB_PASSWORD");
        r
    }

    #[test]
    fn names_values_and_new_formats_are_withheld() {
        let r = redactor();
        let never = || -> Option<Vec<u8>> { panic!("the previous version is not needed") };
        let decide = |rel: &str, text: &str, before: Option<&str>| {
            decide(&r, Path::new(rel), text.as_bytes(), || {
                before.map(|b| b.as_bytes().to_vec())
            })
            .map(|reason| reason.to_string())
        };
        assert_eq!(
            decide(".env", "A=1\n", None).as_deref(),
            Some("it is an environment file")
        );
        assert_eq!(
            decide("db.txt", "pw hunter2hunter2\n", Some("pw hunter2hunter2\n")).as_deref(),
            Some("it contains the value of DB_PASSWORD"),
            "a known value is withheld even when it was committed before"
        );
        assert_eq!(
            decide("k.txt", &format!("key {KEY}\n"), None).as_deref(),
            Some("it contains a new secret (openai-key)")
        );
        let fixture = format!("fixture {KEY}\n");
        assert_eq!(
            decide("k.txt", &format!("{fixture}more\n"), Some(&fixture)),
            None,
            "a format match already committed is no new leak"
        );
        assert_eq!(
            super::decide(&r, Path::new("src/main.rs"), b"fn main() {}\n", never),
            None
        );
        assert_eq!(
            super::decide(&r, Path::new("blob.bin"), &[0xff, 0xfe, 0, 1], never),
            None
        );
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
