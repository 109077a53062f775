//! The ignore files the `ignore` walks of a checkout read (`.gitignore`, and `.ignore` for the tools' and
//! the language servers' walks), and the `.gitattributes` gix reads beside them, checked before a walk
//! reaches them.
//!
//! The `ignore` crate opens each one the plain way, following a link and blocking, and a checkout is its
//! commands' to write: a FIFO left there would block the walk, and with it the session, for ever (git's own
//! walks would hang on it too), and a link to `/dev/zero` would be read without end. So a walk checks the
//! files of its root (and of the directories above it that it reads) before it starts, and those of each
//! directory before it enters it; a directory whose file fails is left out, and the walk's caller gets the
//! first such file as an error once the walk is over.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The largest `.gitignore`, `.ignore`, `.gitattributes` or `HEAD` read where commands can write: git's own
/// limit for an attributes file (100 MB).
pub const GIT_FILE_LIMIT: u64 = 100 << 20;

/// The files git reads in each directory (the change scan: what it and gix's status, on a checkout it
/// passed, read).
pub const GIT: &[&str] = &[".gitignore", ".gitattributes"];
/// The ignore files ripgrep reads (the tools' and the language servers' walks).
pub const RIPGREP: &[&str] = &[".gitignore", ".ignore"];

/// An ignore file a walk could not read safely.
#[derive(Debug)]
pub struct Unreadable {
    pub path: PathBuf,
    pub source: io::Error,
}

/// One walk's check of its ignore files; clones share what they found.
#[derive(Clone)]
pub struct Guard {
    names: &'static [&'static str],
    first: Arc<Mutex<Option<Unreadable>>>,
}

impl Guard {
    pub fn new(names: &'static [&'static str]) -> Guard {
        Guard {
            names,
            first: Arc::default(),
        }
    }

    /// Checks the ignore files of `dir` now: a walk's root, and each directory above it whose files the
    /// walk reads.
    pub fn check(&self, dir: &Path) -> Result<(), Unreadable> {
        for name in self.names {
            let path = dir.join(name);
            if let Err(source) = crate::sys::fs::check_plain_read(&path, GIT_FILE_LIMIT) {
                return Err(Unreadable { path, source });
            }
        }
        Ok(())
    }

    /// For a walk's `filter_entry`: whether it may enter `entry` (always, unless it is a directory with an
    /// ignore file that fails [`Guard::check()`], which is then remembered).
    pub fn may_enter(&self, entry: &ignore::DirEntry) -> bool {
        if !entry.file_type().is_some_and(|t| t.is_dir()) {
            return true;
        }
        let Err(unreadable) = self.check(entry.path()) else {
            return true;
        };
        if let Ok(mut first) = self.first.lock() {
            first.get_or_insert(unreadable);
        }
        false
    }

    /// After the walk: the first ignore file that made it leave a directory out, if one did.
    pub fn finish(&self) -> Result<(), Unreadable> {
        let first = self
            .first
            .lock()
            .map_or_else(|poisoned| poisoned.into_inner().take(), |mut f| f.take());
        first.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_leaves_out_a_directory_whose_ignore_file_is_a_fifo_and_says_so() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path();
        for dir in ["a", "b/c"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("a/.gitignore"), "*.o\n").unwrap();
        std::fs::write(root.join("a/x.o"), "").unwrap();
        std::fs::write(root.join("b/c/kept.txt"), "").unwrap();
        std::fs::write(root.join("b/c/lost.txt"), "").unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(root.join("b/c/.ignore"))
            .status()
            .unwrap();
        assert!(made.success());
        let walk = |names: &'static [&'static str]| {
            let guard = Guard::new(names);
            let inner = guard.clone();
            let mut found: Vec<PathBuf> = ignore::WalkBuilder::new(root)
                .require_git(false)
                .ignore(names.contains(&".ignore"))
                .hidden(false)
                .filter_entry(move |e| inner.may_enter(e))
                .build()
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
                .map(|e| e.path().strip_prefix(root).unwrap().to_path_buf())
                .collect();
            found.sort();
            (found, guard.finish())
        };
        // Git's files only (a walk that reads no `.ignore`, as the change scan): the FIFO is nobody's business.
        let (found, finished) = walk(GIT);
        assert!(finished.is_ok());
        assert_eq!(
            found,
            ["a/.gitignore", "b/c/kept.txt", "b/c/lost.txt"].map(PathBuf::from)
        );
        // Ripgrep's: the directory is left out (the walk did not block) and named.
        let (found, finished) = walk(RIPGREP);
        assert_eq!(found, ["a/.gitignore"].map(PathBuf::from));
        let unreadable = finished.unwrap_err();
        assert_eq!(unreadable.path, root.join("b/c/.ignore"));
        assert!(
            unreadable.source.to_string().contains("a FIFO"),
            "{}",
            unreadable.source
        );
    }
}
