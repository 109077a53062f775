//! The chat's input history, one file per repository: `.git/agent/chat-history` (in the common dir, so every
//! worktree of the repo shares it). One entry a line, with `\` and newlines escaped so multi-line prompts
//! stay one entry. It never leaves the machine, but known secret values and key formats are redacted before
//! an entry is written anyway: a pasted key must not sit in a file in plain text.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::safety::redact;

/// Entries kept; older ones are dropped when the file is read.
const KEEP: usize = 1000;

/// The history file of a repository.
pub struct History {
    path: PathBuf,
}

impl History {
    /// The history of the repository whose common dir is `common_dir`.
    pub fn new(common_dir: &Path) -> History {
        History {
            path: common_dir.join("agent").join("chat-history"),
        }
    }

    /// The entries, oldest first (none when the file is missing or unreadable). A file grown past the limit
    /// is cut back to it.
    pub fn load(&self) -> Vec<String> {
        let Ok(text) = fs::read_to_string(&self.path) else {
            return Vec::new();
        };
        let mut entries: Vec<String> = text.lines().map(unescape).collect();
        if entries.len() > KEEP * 2 {
            entries.drain(..entries.len() - KEEP);
            let mut text: String = entries.iter().map(|e| escape(e) + "\n").collect();
            text.shrink_to_fit();
            // Best effort: a history that could not be trimmed is still a history.
            let _ = fs::write(&self.path, text);
        }
        entries
    }

    /// Appends an entry (redacted). Failures are ignored: the history is a convenience.
    pub fn add(&self, entry: &str) {
        if entry.trim().is_empty() {
            return;
        }
        let entry = redact::redact(entry);
        if let Some(dir) = self.path.parent() {
            let _ = fs::create_dir_all(dir);
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path);
        if let Ok(mut file) = file {
            let _ = file.write_all((escape(&entry) + "\n").as_bytes());
        }
    }
}

fn escape(entry: &str) -> String {
    entry.replace('\\', "\\\\").replace('\n', "\\n")
}

fn unescape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_secrets_are_redacted() {
        let dir = std::env::temp_dir().join(format!("git-agent-history-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let history = History::new(&dir);
        assert!(history.load().is_empty());
        history.add("two\nlines with a \\ and \\n");
        history.add("   ");
        history.add("my key is sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789");
        let entries = history.load();
        assert_eq!(entries.len(), 2, "{entries:?}");
        assert_eq!(entries[0], "two\nlines with a \\ and \\n");
        assert!(!entries[1].contains("abcdefghijklmnop"), "{entries:?}");
        assert!(entries[1].contains("REDACTED"), "{entries:?}");
        let _ = fs::remove_dir_all(&dir);
    }
}
