//! Change detection for commands we cannot see into (the shell tool): stat every file of the checkout before
//! and after, and diff the two.
//!
//! Only metadata is compared (size, mtime, ctime, mode, inode), like git's own index refresh; paths that
//! merely look changed are filtered out by [`Store::commit_step()`](super::Store::commit_step), which compares
//! content against the tip tree. The walk honours `.gitignore`, `.git/info/exclude` and `core.excludesFile`,
//! so build output does not end up in commits.
//!
//! Limitation: a tracked file matching an ignore rule (force-added) is invisible to the walk, like any ignored
//! file; tools that know which files they wrote pass those paths to `commit_step` directly.

use std::cmp::Ordering;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ignore::{ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};

use super::{Session, Store, StoreError};

/// What a file looked like on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    mode: u32,
    ino: u64,
}

impl Stat {
    fn of(md: &std::fs::Metadata) -> Stat {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Stat {
            len: md.len(),
            mtime_ns: ns(md.mtime(), md.mtime_nsec()),
            ctime_ns: ns(md.ctime(), md.ctime_nsec()),
            mode: md.mode(),
            ino: md.ino(),
        }
    }
}

/// The files (and symlinks) of a checkout at one moment.
#[derive(Debug, Default, Clone)]
pub struct Scan {
    root: PathBuf,
    /// Absolute paths (kept as the walker made them: no per-file allocation), sorted by their bytes.
    files: Vec<(PathBuf, Stat)>,
}

fn bytes(p: &Path) -> &[u8] {
    p.as_os_str().as_bytes()
}

impl Scan {
    /// Checkout-relative paths that are new, deleted, modified or changed mode between `before` and `after`,
    /// sorted. Both scans must be of the same directory.
    pub fn diff(before: &Scan, after: &Scan) -> Vec<PathBuf> {
        let rel = |p: &Path| p.strip_prefix(&after.root).unwrap_or(p).to_owned();
        let (mut old, mut new) = (
            before.files.iter().peekable(),
            after.files.iter().peekable(),
        );
        let mut out = Vec::new();
        // A merge join over two sorted lists: one pass, no hashing.
        loop {
            match (old.peek(), new.peek()) {
                (None, None) => break,
                (Some((p, _)), None) => {
                    out.push(rel(p));
                    old.next();
                }
                (None, Some((p, _))) => {
                    out.push(rel(p));
                    new.next();
                }
                (Some((po, so)), Some((pn, sn))) => match bytes(po).cmp(bytes(pn)) {
                    Ordering::Less => {
                        out.push(rel(po));
                        old.next();
                    }
                    Ordering::Greater => {
                        out.push(rel(pn));
                        new.next();
                    }
                    Ordering::Equal => {
                        if so != sn {
                            out.push(rel(pn));
                        }
                        old.next();
                        new.next();
                    }
                },
            }
        }
        out.sort();
        out
    }

    /// The number of files seen.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether no file was seen.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Stat every file below `root` that git would consider (not ignored, `.git` skipped), in parallel.
    pub fn of_dir(root: &Path) -> Result<Scan, StoreError> {
        let mut walk = WalkBuilder::new(root);
        walk.hidden(false)
            // Ignore rules as git applies them, and only git's: no `.ignore`/`.rgignore`, no rules from the
            // directories above the checkout (it lives inside the user's .git dir).
            .ignore(false)
            .parents(false)
            .git_ignore(true)
            .git_exclude(true)
            .git_global(true)
            .require_git(false)
            .follow_links(false)
            .filter_entry(|e| e.file_name() != ".git");
        let sink = Arc::new(Mutex::new(Vec::new()));
        let mut builder = Collector {
            sink: Arc::clone(&sink),
        };
        walk.build_parallel().visit(&mut builder);
        let batches = std::mem::take(&mut *sink.lock().map_err(|_| poisoned(root))?);
        let mut files = Vec::with_capacity(batches.iter().map(Vec::len).sum());
        files.extend(batches.into_iter().flatten());
        files.sort_unstable_by(|a, b| bytes(&a.0).cmp(bytes(&b.0)));
        Ok(Scan {
            root: root.to_owned(),
            files,
        })
    }
}

fn poisoned(root: &Path) -> StoreError {
    StoreError::Io {
        action: "scan",
        path: root.to_owned(),
        source: std::io::Error::other("a scan thread panicked"),
    }
}

type Batch = Vec<(PathBuf, Stat)>;

struct Collector {
    sink: Arc<Mutex<Vec<Batch>>>,
}

impl<'s> ParallelVisitorBuilder<'s> for Collector {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(Visitor {
            batch: Vec::new(),
            sink: Arc::clone(&self.sink),
        })
    }
}

/// One walker thread's share; handed to the sink when the thread is done.
struct Visitor {
    batch: Batch,
    sink: Arc<Mutex<Vec<Batch>>>,
}

impl ParallelVisitor for Visitor {
    fn visit(&mut self, entry: Result<ignore::DirEntry, ignore::Error>) -> WalkState {
        // Unreadable entries are skipped: they cannot be committed either.
        let Ok(entry) = entry else {
            return WalkState::Continue;
        };
        let is_file = entry
            .file_type()
            .is_some_and(|t| t.is_file() || t.is_symlink());
        if is_file {
            if let Ok(md) = entry.metadata() {
                self.batch.push((entry.into_path(), Stat::of(&md)));
            }
        }
        WalkState::Continue
    }
}

impl Drop for Visitor {
    fn drop(&mut self) {
        if let Ok(mut sink) = self.sink.lock() {
            sink.push(std::mem::take(&mut self.batch));
        }
    }
}

impl Store {
    /// Stat the session's checkout; diff two scans with [`Scan::diff()`] to learn what a command changed.
    pub fn scan(&self, s: &Session) -> Result<Scan, StoreError> {
        Scan::of_dir(&s.root)
    }
}
