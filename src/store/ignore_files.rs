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
//!
//! The walker also reads `info/exclude` of each directory that holds a `.git`, following a `.git` file to the
//! git dir it names and that dir's `commondir`, and a command can write those three as well (or point the
//! checkout's `.git` file at a directory of its own): [`Guard::check()`] checks them the same way.

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
        self.check_with_exclude(dir).map(|_| ())
    }

    /// [`Guard::check()`], and the exclude file it checked ([`exclude_file()`]), for a reader of the rules
    /// itself.
    pub fn check_with_exclude(&self, dir: &Path) -> Result<Option<PathBuf>, Unreadable> {
        for name in self.names {
            check_file(dir.join(name))?;
        }
        let exclude = exclude_file(dir)?;
        if let Some(file) = &exclude {
            check_file(file.clone())?;
        }
        Ok(exclude)
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

fn check_file(path: PathBuf) -> Result<(), Unreadable> {
    match crate::sys::fs::check_plain_read(&path, GIT_FILE_LIMIT) {
        Ok(()) => Ok(()),
        Err(source) => Err(Unreadable { path, source }),
    }
}

/// `info/exclude` of the repository whose work tree starts at `dir`, found as git and the `ignore` walker
/// find it: in `.git`, or for a linked worktree's `.git` file (`gitdir: <dir>`) in the `commondir` of the
/// dir it names. `None` when `dir` holds no `.git`, or a `.git` file that names no git dir with a
/// `commondir` (the walker then reads no exclude file either); an error when the `.git` file or the
/// `commondir` is there but not a regular file. The exclude file itself is not checked here.
pub fn exclude_file(dir: &Path) -> Result<Option<PathBuf>, Unreadable> {
    let dot_git = dir.join(".git");
    match std::fs::metadata(&dot_git) {
        Err(_) => return Ok(None),
        Ok(meta) if !meta.is_file() => return Ok(Some(dot_git.join("info/exclude"))),
        Ok(_) => {}
    }
    let Some(git_dir) = first_line(dot_git)?
        .as_deref()
        .and_then(|line| line.strip_prefix("gitdir: "))
        .map(PathBuf::from)
    else {
        return Ok(None);
    };
    let Some(common) = first_line(git_dir.join("commondir"))? else {
        return Ok(None);
    };
    let common = if common.starts_with('.') {
        git_dir.join(common)
    } else {
        PathBuf::from(common)
    };
    Ok(Some(common.join("info/exclude")))
}

/// The first line of a one-line git file, `None` when it is missing or empty.
fn first_line(path: PathBuf) -> Result<Option<String>, Unreadable> {
    match crate::sys::fs::read_head(&path, 4096) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes)
            .lines()
            .next()
            .map(str::to_owned)),
        Err(err) if crate::sys::fs::is_absent(&err) => Ok(None),
        Err(source) => Err(Unreadable { path, source }),
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
        mkfifo(&root.join("b/c/.ignore"));
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

    fn mkfifo(path: &Path) {
        let made = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(made.success());
    }

    #[test]
    fn info_exclude_is_found_as_git_finds_it() {
        let base = tempfile::tempdir().unwrap();
        let (tree, git) = (base.path().join("tree"), base.path().join("git"));
        let linked = git.join("worktrees/tree");
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::create_dir_all(&linked).unwrap();
        assert_eq!(exclude_file(&tree).unwrap(), None);
        std::fs::create_dir(tree.join(".git")).unwrap();
        assert_eq!(
            exclude_file(&tree).unwrap(),
            Some(tree.join(".git/info/exclude"))
        );
        std::fs::remove_dir(tree.join(".git")).unwrap();
        let gitdir = format!("gitdir: {}\n", linked.display());
        std::fs::write(tree.join(".git"), gitdir).unwrap();
        // A linked worktree's git dir without a `commondir` has no exclude file, as for the walker.
        assert_eq!(exclude_file(&tree).unwrap(), None);
        std::fs::write(linked.join("commondir"), "../..\n").unwrap();
        assert_eq!(
            exclude_file(&tree).unwrap(),
            Some(linked.join("../../info/exclude"))
        );
        std::fs::write(tree.join(".git"), "not a gitdir line\n").unwrap();
        assert_eq!(exclude_file(&tree).unwrap(), None);
    }

    #[test]
    fn a_fifo_on_the_way_to_info_exclude_is_refused_not_opened() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("tree");
        let elsewhere = base.path().join("elsewhere");
        for dir in ["linked", "nested/.git/info", "plain"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(root.join("plain/kept.txt"), "").unwrap();
        // A `.git` file naming a dir whose `commondir` is a FIFO, and a nested repository's exclude file that
        // is one: the walker would open both the plain way and block.
        let gitdir = format!("gitdir: {}\n", elsewhere.display());
        std::fs::write(root.join("linked/.git"), gitdir).unwrap();
        mkfifo(&elsewhere.join("commondir"));
        mkfifo(&root.join("nested/.git/info/exclude"));
        let walk = |root: PathBuf| {
            let (send, receive) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let guard = Guard::new(GIT);
                let inner = guard.clone();
                let found: Vec<PathBuf> = ignore::WalkBuilder::new(&root)
                    .require_git(false)
                    .hidden(false)
                    .filter_entry(move |e| e.file_name() != ".git" && inner.may_enter(e))
                    .build()
                    .filter_map(Result::ok)
                    .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
                    .map(|e| e.path().strip_prefix(&root).unwrap().to_path_buf())
                    .collect();
                let _ = send.send((found, guard.finish().err().map(|u| u.path)));
            });
            let waited = std::time::Duration::from_secs(30);
            receive.recv_timeout(waited).expect("the walk blocked")
        };
        let (found, refused) = walk(root.clone());
        assert_eq!(found, [PathBuf::from("plain/kept.txt")]);
        let refused = refused.expect("a FIFO was named");
        assert!(
            [
                elsewhere.join("commondir"),
                root.join("nested/.git/info/exclude")
            ]
            .contains(&refused),
            "{refused:?}"
        );
        // The root's own: checked before the walk starts.
        let unreadable = Guard::new(GIT).check(&root.join("linked")).unwrap_err();
        assert_eq!(unreadable.path, elsewhere.join("commondir"));
        assert!(unreadable.source.to_string().contains("a FIFO"));
    }
}
