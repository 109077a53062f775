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

/// Prints `err` as a warning on stderr, once per file and process: some files are read more than once in a
/// run (the settings files by `fix` and by a subagent naming its own model; a file by each session of an
/// editor's ACP connection), but one warning says it all.
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
    if first {
        eprintln!("warning: {err}");
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
}
