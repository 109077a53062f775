//! One bounded reader for the files a cloned repository (or the user) hands git-agent to read whole:
//! `.git-agent.toml`, `.mcp.json`, instruction files (`AGENTS.md` ...), `.claude/settings.json`, agent
//! and command files. Such a file used to be read whole, so a 150 MB one took `ask` past 400 MB (issue 22,
//! second audit, finding 2). The size is checked from the metadata before reading, and at most the limit
//! and one byte are read, so a file that grows after the check is caught too.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The most a configuration file (`.git-agent.toml`, `.mcp.json`, settings JSON) may have.
pub const CONFIG_LIMIT: u64 = 1 << 20;
/// The most an instructions file (`AGENTS.md` and the like) may have; a file under it is still cut to the
/// instructions' own cap when it reaches the model.
pub const INSTRUCTIONS_LIMIT: u64 = 1 << 20;

/// Why a bounded read gave nothing.
#[derive(Debug, thiserror::Error)]
pub enum BoundedReadError {
    #[error("{} is larger than {limit} bytes, the most {kind} may have: skipped it; shrink it to use it", path.display())]
    TooLarge {
        path: PathBuf,
        kind: &'static str,
        limit: u64,
    },
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl BoundedReadError {
    /// True when the file is not there (which most callers take as "nothing configured").
    pub fn is_not_found(&self) -> bool {
        matches!(self, BoundedReadError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// The bytes of `path`, at most `limit` of them; `kind` names the file in the error (`a configuration file`).
pub fn read_bounded(
    path: &Path,
    kind: &'static str,
    limit: u64,
) -> Result<Vec<u8>, BoundedReadError> {
    let io = |source| BoundedReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let too_large = || BoundedReadError::TooLarge {
        path: path.to_path_buf(),
        kind,
        limit,
    };
    let file = File::open(path).map_err(io)?;
    if file.metadata().map_err(io)?.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// [`read_bounded`] for a file that is simply left out when it cannot be used: one warning on stderr for
/// a file over the limit (naming it and the limit), nothing for a missing or unreadable one.
pub fn read_or_skip(path: &Path, kind: &'static str, limit: u64) -> Option<Vec<u8>> {
    match read_bounded(path, kind, limit) {
        Ok(bytes) => Some(bytes),
        Err(err @ BoundedReadError::TooLarge { .. }) => {
            warn_once(&err);
            None
        }
        Err(BoundedReadError::Io { .. }) => None,
    }
}

/// Reports `err` as a warning, once per file and process: some files are read more than once in a run (the
/// settings files by `fix` and by a subagent naming its own model; a file by each session of an editor's ACP
/// connection), but one warning says it all. It goes to the [`WarningScope`] whose folders hold the file,
/// and so into that session's event stream and log; to stderr when none does.
pub fn warn_once(err: &BoundedReadError) {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static WARNED: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    let path = match err {
        BoundedReadError::TooLarge { path, .. } | BoundedReadError::Io { path, .. } => path,
    };
    let first = WARNED
        .get_or_init(Default::default)
        .lock()
        .map_or(true, |mut warned| warned.insert(path.clone()));
    if !first {
        return;
    }
    let warning = err.to_string();
    if let Some(unclaimed) = WarningScope::give(path, warning) {
        eprintln!("warning: {}", super::quote::visible(&unclaimed));
    }
}

/// While it lives, the warnings of [`warn_once`] about files under its folders are kept for its owner (a
/// session being opened, which shows and logs them as events) instead of going to stderr. Scopes are
/// process-wide and told apart by folder, so the sessions an ACP connection opens at once each get the
/// warnings of their own repository. What is never taken is printed to stderr when the scope drops.
pub struct WarningScope {
    id: u64,
}

struct ScopeEntry {
    id: u64,
    folders: Vec<PathBuf>,
    warnings: Vec<String>,
}

static SCOPES: std::sync::Mutex<Vec<ScopeEntry>> = std::sync::Mutex::new(Vec::new());

impl WarningScope {
    /// Collects the warnings about files under `folders`.
    pub fn under(folders: Vec<PathBuf>) -> WarningScope {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut scopes) = SCOPES.lock() {
            scopes.push(ScopeEntry {
                id,
                folders,
                warnings: Vec::new(),
            });
        }
        WarningScope { id }
    }

    /// The warnings collected so far, in the order they came.
    pub fn take(&self) -> Vec<String> {
        let Ok(mut scopes) = SCOPES.lock() else {
            return Vec::new();
        };
        scopes
            .iter_mut()
            .find(|scope| scope.id == self.id)
            .map(|scope| std::mem::take(&mut scope.warnings))
            .unwrap_or_default()
    }

    /// Gives `warning` to the newest scope whose folders hold `path`; hands it back when none does.
    fn give(path: &Path, warning: String) -> Option<String> {
        let Ok(mut scopes) = SCOPES.lock() else {
            return Some(warning);
        };
        let holder = scopes
            .iter_mut()
            .rev()
            .find(|scope| scope.folders.iter().any(|folder| path.starts_with(folder)));
        match holder {
            Some(scope) => {
                scope.warnings.push(warning);
                None
            }
            None => Some(warning),
        }
    }
}

impl Drop for WarningScope {
    fn drop(&mut self) {
        let left = self.take();
        if let Ok(mut scopes) = SCOPES.lock() {
            scopes.retain(|scope| scope.id != self.id);
        }
        for warning in left {
            eprintln!("warning: {}", super::quote::visible(&warning));
        }
    }
}

/// [`read_or_skip`] as text: a file that is not UTF-8 is left out too, as `read_to_string` left it.
pub fn read_text_or_skip(path: &Path, kind: &'static str, limit: u64) -> Option<String> {
    String::from_utf8(read_or_skip(path, kind, limit)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_over_the_limit_is_refused_from_its_size_and_one_under_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.json");
        File::create(&big).unwrap().set_len(150 << 20).unwrap();
        let err = read_bounded(&big, "a configuration file", CONFIG_LIMIT).unwrap_err();
        assert!(
            err.to_string()
                .contains("is larger than 1048576 bytes, the most a configuration file may have"),
            "{err}"
        );
        let small = dir.path().join("small.json");
        std::fs::write(&small, b"{}").unwrap();
        assert_eq!(
            read_bounded(&small, "a configuration file", 2).unwrap(),
            b"{}"
        );
        assert!(read_bounded(&small, "a configuration file", 1).is_err());
        assert!(read_bounded(&dir.path().join("none"), "x", 1)
            .unwrap_err()
            .is_not_found());
    }

    /// Two sessions opening at once (an ACP connection) each take the warnings about their own repository's
    /// files, and a warning is given once per file.
    #[test]
    fn each_scope_takes_the_warnings_about_files_under_its_folders() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let first = WarningScope::under(vec![a.path().to_path_buf()]);
        let second = WarningScope::under(vec![b.path().to_path_buf()]);
        for dir in [&a, &b] {
            let big = dir.path().join("AGENTS.md");
            File::create(&big)
                .unwrap()
                .set_len(INSTRUCTIONS_LIMIT + 1)
                .unwrap();
            for _ in 0..2 {
                assert!(read_or_skip(&big, "an instructions file", INSTRUCTIONS_LIMIT).is_none());
            }
        }
        let (mine, theirs) = (first.take(), second.take());
        assert_eq!(mine.len(), 1, "{mine:?}");
        assert!(mine[0].starts_with(&a.path().join("AGENTS.md").display().to_string()));
        assert_eq!(theirs.len(), 1, "{theirs:?}");
        assert!(theirs[0].starts_with(&b.path().join("AGENTS.md").display().to_string()));
        assert!(first.take().is_empty(), "taken once");
    }
}
