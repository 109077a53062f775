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
//!
//! [`Scan::rescan()`] is the fast path for the scan after a command: when no directory of the checkout
//! changed (creating, deleting or renaming an entry changes its directory's mtime and ctime; modifying a file
//! does not), the set of files is the same as last time, so neither a directory read nor an ignore rule is
//! needed: only an `lstat` of each known file, in parallel. Anything else (a changed directory, a changed
//! ignore file, a directory modified too recently to trust its timestamp) falls back to the full walk.

use std::cmp::Ordering;
use std::os::unix::ffi::OsStrExt;
#[cfg(all(target_os = "linux", not(git_agent_portable)))]
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use ignore::{ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};

use crate::store::ignore_files::{self, Guard, Unreadable};
use crate::store::repo::{Session, Store, StoreError};

/// The error for a `.gitignore` or `.gitattributes` the walk could not read ([`crate::store::ignore_files`]).
fn unreadable(file: Unreadable) -> StoreError {
    let name = file.path.file_name().unwrap_or_default();
    let role = if name == ".gitattributes" {
        "git's attributes"
    } else if name == ".gitignore" {
        "git's ignore rules"
    } else if name == "exclude" {
        "git's exclude rules"
    } else {
        // A `.git` file or the `commondir` of the git dir it names, on the way to `info/exclude`.
        "a work tree's link to its git dir"
    };
    StoreError::UnreadableGitFile {
        path: file.path,
        role,
        source: file.source,
    }
}

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
    /// The directories walked, root included, for [`Scan::rescan()`].
    dirs: Vec<(PathBuf, Stat)>,
    /// When the scan started, in ns since the epoch: a directory changed after (or just before) this cannot
    /// be trusted to show a later change in its timestamp, on file systems with coarse timestamps.
    started_ns: i128,
}

/// Directories modified less than this before a scan started are rescanned in full (git's "racily clean"
/// problem: a second change within the timestamp granularity would not show).
const RACY_NS: i128 = 2_000_000_000;

/// Chunk of stats one thread claims at a time during a rescan.
const CHUNK: usize = 512;

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

    /// Checkout-relative paths of the files below the checkout-relative directory `dir`.
    // Only the watcher (inotify, Linux) asks for these.
    #[cfg(all(target_os = "linux", not(git_agent_portable)))]
    pub(in crate::store) fn files_under(&self, dir: &Path) -> impl Iterator<Item = PathBuf> + '_ {
        let mut prefix = self.root.join(dir).into_os_string().into_vec();
        prefix.push(b'/');
        // Sorted by bytes, so the paths with this prefix are one run.
        let start = self.files.partition_point(|(p, _)| bytes(p) < &prefix[..]);
        self.files[start..]
            .iter()
            .take_while(move |(p, _)| bytes(p).starts_with(&prefix))
            .map(|(p, _)| p.strip_prefix(&self.root).unwrap_or(p).to_owned())
    }

    /// Stats the (distinct) checkout-relative paths `rel` again and records what is there now (a file or
    /// symlink, or nothing), keeping the scan in step with the checkout without a walk. Returns the paths that
    /// are there now or were before (a path that came and went in between is nobody's business).
    // Only the watcher (inotify, Linux) asks for these.
    #[cfg(all(target_os = "linux", not(git_agent_portable)))]
    pub(in crate::store) fn refresh<'p>(
        &mut self,
        rel: impl IntoIterator<Item = &'p Path>,
    ) -> Vec<PathBuf> {
        let (mut out, mut gone, mut new) = (Vec::new(), Vec::new(), Vec::new());
        for rel in rel {
            let path = self.root.join(rel);
            let now = std::fs::symlink_metadata(&path)
                .ok()
                .filter(|md| md.is_file() || md.is_symlink())
                .map(|md| Stat::of(&md));
            let at = self
                .files
                .binary_search_by(|(p, _)| bytes(p).cmp(bytes(&path)));
            match (at, now) {
                (Ok(i), Some(stat)) => self.files[i].1 = stat,
                (Ok(i), None) => gone.push(i),
                (Err(_), Some(stat)) => new.push((path, stat)),
                (Err(_), None) => continue,
            }
            out.push(rel.to_owned());
        }
        // One pass each, however many paths: a new directory can bring thousands of files.
        if !gone.is_empty() {
            gone.sort_unstable();
            let mut i = 0;
            self.files.retain(|_| {
                i += 1;
                gone.binary_search(&(i - 1)).is_err()
            });
        }
        if !new.is_empty() {
            self.files.extend(new);
            // A long sorted run and a short one: the stable sort merges them in about linear time.
            self.files.sort_by(|a, b| bytes(&a.0).cmp(bytes(&b.0)));
        }
        out
    }

    /// A scan of the same checkout now: the fast path of the module docs when no directory changed, the full
    /// walk otherwise.
    pub fn rescan(&self) -> Result<Scan, StoreError> {
        match self.restat() {
            Some(scan) => Ok(scan),
            None => Scan::walk(&self.root, None, self.files.len() <= CHUNK),
        }
    }

    /// The fast path: `None` when a directory changed (or may have), so the full walk is needed.
    fn restat(&self) -> Option<Scan> {
        let started_ns = now_ns();
        if self.dirs.is_empty() {
            return None;
        }
        let dirs = stat_all(&self.dirs)?;
        let stable = dirs.iter().zip(&self.dirs).all(|(now, (_, before))| {
            now.as_ref()
                .is_some_and(|now| now == before && before.mtime_ns < self.started_ns - RACY_NS)
        });
        if !stable {
            return None;
        }
        let stats = stat_all(&self.files)?;
        let mut files = Vec::with_capacity(self.files.len());
        for ((path, before), now) in self.files.iter().zip(stats) {
            // A vanished file or a changed ignore file changes what the walk would find.
            let now = now?;
            if now != *before && is_ignore_file(path) {
                return None;
            }
            files.push((path.clone(), now));
        }
        Some(Scan {
            root: self.root.clone(),
            files,
            dirs: self.dirs.clone(),
            started_ns,
        })
    }

    /// Stat every file below `root` that git would consider (not ignored, `.git` skipped), in parallel.
    pub fn of_dir(root: &Path) -> Result<Scan, StoreError> {
        Scan::walk(root, None, false)
    }

    /// [`Scan::of_dir()`] of a checkout whose index lists `tracked` files: one chunk's worth or fewer is
    /// walked on the calling thread, as later scans of a small checkout are ([`Scan::rescan()`]).
    pub(in crate::store) fn of_checkout(
        root: &Path,
        tracked: Option<u32>,
    ) -> Result<Scan, StoreError> {
        Scan::walk(root, None, tracked.is_some_and(|n| n as usize <= CHUNK))
    }

    /// [`Scan::of_dir()`], calling `on_dir` with each directory it will enter (root excluded) before reading
    /// it, so a watch added there cannot miss a change the walk does not see. `small` (the last scan found
    /// one chunk's worth of files) walks on the calling thread instead of starting walker threads.
    pub(in crate::store) fn walk(
        root: &Path,
        on_dir: Option<&DirHook<'_>>,
        small: bool,
    ) -> Result<Scan, StoreError> {
        let started_ns = now_ns();
        // The `ignore` crate opens each `.gitignore` the plain way, and gix each `.gitattributes` when it
        // commits what this finds ([`crate::store::ignore_files`]).
        let guard = Guard::new(ignore_files::GIT);
        guard.check(root).map_err(unreadable)?;
        let entering = guard.clone();
        let mut walk = WalkBuilder::new(root);
        walk.hidden(false)
            // Ignore rules as git applies them, and only git's: no `.ignore`/`.rgignore`, no rules from the
            // directories above the checkout (it lives inside the user's .git dir).
            .ignore(false)
            .parents(false)
            .git_ignore(true)
            .git_exclude(true)
            .require_git(false)
            .follow_links(false)
            .filter_entry(move |e| e.file_name() != ".git" && entering.may_enter(e));
        crate::store::excludes::apply(&mut walk, root);
        let sink = Arc::new(Mutex::new(Vec::new()));
        let mut builder = Collector {
            sink: Arc::clone(&sink),
            on_dir,
        };
        if small {
            let mut visitor = builder.build();
            for entry in walk.build() {
                visitor.visit(entry);
            }
        } else {
            walk.threads(cores()).build_parallel().visit(&mut builder);
        }
        guard.finish().map_err(unreadable)?;
        let batches = std::mem::take(&mut *sink.lock().map_err(|_| poisoned(root))?);
        let mut files = Vec::with_capacity(batches.iter().map(|b| b.files.len()).sum());
        let mut dirs = Vec::new();
        for batch in batches {
            files.extend(batch.files);
            dirs.extend(batch.dirs);
        }
        files.sort_unstable_by(|a, b| bytes(&a.0).cmp(bytes(&b.0)));
        Ok(Scan {
            root: root.to_owned(),
            files,
            dirs,
            started_ns,
        })
    }
}

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

fn is_ignore_file(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n == ".gitignore" || n == ".ignore")
}

/// `lstat` of every path, spread over the available cores in chunks; `None` in a slot whose path is gone,
/// `None` overall if a thread died. One chunk's worth is done on the calling thread: a small checkout is
/// rescanned after every command, and a thread (and asking the cgroup files how many cores there are) would
/// cost more than its few `lstat`s.
fn stat_all(items: &[(PathBuf, Stat)]) -> Option<Vec<Option<Stat>>> {
    let lstat = |path: &PathBuf| std::fs::symlink_metadata(path).ok().map(|md| Stat::of(&md));
    if items.len() <= CHUNK {
        return Some(items.iter().map(|(path, _)| lstat(path)).collect());
    }
    let threads = cores().min(items.len().div_ceil(CHUNK)).max(1);
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let mut out: Vec<Option<Stat>> = vec![None; items.len()];
    // Each thread claims chunks by index and writes only its own chunks' slots.
    let slots: Vec<Mutex<&mut [Option<Stat>]>> = out.chunks_mut(CHUNK).map(Mutex::new).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(slot) = slots.get(i) else { return };
                let Ok(mut slot) = slot.lock() else {
                    failed.store(true, std::sync::atomic::Ordering::Relaxed);
                    return;
                };
                for (k, (path, _)) in items[i * CHUNK..].iter().take(slot.len()).enumerate() {
                    slot[k] = lstat(path);
                }
            });
        }
    });
    drop(slots);
    (!failed.load(std::sync::atomic::Ordering::Relaxed)).then_some(out)
}

/// The cores to spread a scan over, asked once per process (each ask reads the cgroup's CPU quota files).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(2, usize::from))
}

fn poisoned(root: &Path) -> StoreError {
    StoreError::Io {
        action: "scan",
        path: root.to_owned(),
        source: std::io::Error::other("a scan thread panicked"),
    }
}

/// One walker thread's findings.
#[derive(Default)]
struct Batch {
    files: Vec<(PathBuf, Stat)>,
    dirs: Vec<(PathBuf, Stat)>,
}

/// Called with each directory the walk is about to enter; see [`Scan::walk()`].
pub(in crate::store) type DirHook<'h> = dyn Fn(&Path) + Sync + 'h;

struct Collector<'h> {
    sink: Arc<Mutex<Vec<Batch>>>,
    on_dir: Option<&'h DirHook<'h>>,
}

impl<'s, 'h: 's> ParallelVisitorBuilder<'s> for Collector<'h> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(Visitor {
            batch: Batch::default(),
            sink: Arc::clone(&self.sink),
            on_dir: self.on_dir,
        })
    }
}

/// One walker thread's share; handed to the sink when the thread is done.
struct Visitor<'h> {
    batch: Batch,
    sink: Arc<Mutex<Vec<Batch>>>,
    on_dir: Option<&'h DirHook<'h>>,
}

impl ParallelVisitor for Visitor<'_> {
    fn visit(&mut self, entry: Result<ignore::DirEntry, ignore::Error>) -> WalkState {
        // Unreadable entries are skipped: they cannot be committed either.
        let Ok(entry) = entry else {
            return WalkState::Continue;
        };
        let Some(kind) = entry.file_type() else {
            return WalkState::Continue;
        };
        if kind.is_file() || kind.is_symlink() {
            if let Ok(md) = entry.metadata() {
                self.batch.files.push((entry.into_path(), Stat::of(&md)));
            }
        } else if kind.is_dir() {
            // The walker lists a directory's entries after visiting it, so the hook runs first.
            if let (Some(on_dir), 1..) = (self.on_dir, entry.depth()) {
                on_dir(entry.path());
            }
            if let Ok(md) = entry.metadata() {
                self.batch.dirs.push((entry.into_path(), Stat::of(&md)));
            }
        }
        WalkState::Continue
    }
}

impl Drop for Visitor<'_> {
    fn drop(&mut self) {
        if let Ok(mut sink) = self.sink.lock() {
            sink.push(std::mem::take(&mut self.batch));
        }
    }
}

impl Store {
    /// Stat the session's checkout; diff two scans with [`Scan::diff()`] to learn what a command changed.
    pub fn scan(&self, s: &Session) -> Result<Scan, StoreError> {
        Scan::of_dir(s.root())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets a directory's mtime 100 s into the past, so the racy-timestamp rule does not force a full walk.
    fn age(dir: &Path) {
        crate::sys::fs::set_times(dir, (now_ns() / 1_000_000_000) as i64 - 100).unwrap();
    }

    fn tree(tag: &str) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("git-agent-scan-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::write(root.join(".gitignore"), "*.log\n").unwrap();
        std::fs::write(root.join("src/a.rs"), "a\n").unwrap();
        std::fs::write(root.join("src/deep/b.rs"), "b\n").unwrap();
        std::fs::write(root.join("x.log"), "ignored\n").unwrap();
        for dir in ["", "src", "src/deep"] {
            age(&root.join(dir));
        }
        root
    }

    #[test]
    fn rescan_takes_the_fast_path_only_when_no_directory_changed() {
        let root = tree("fast");
        let before = Scan::of_dir(&root).unwrap();
        assert_eq!(before.len(), 3);
        std::fs::write(root.join("src/deep/b.rs"), "b changed\n").unwrap();
        let fast = before.restat().expect("no directory changed");
        assert_eq!(Scan::diff(&before, &fast), [PathBuf::from("src/deep/b.rs")]);
        assert_eq!(
            Scan::diff(&before, &before.rescan().unwrap()),
            [PathBuf::from("src/deep/b.rs")]
        );

        // A new file changes its directory: the full walk finds it (and still skips ignored files).
        std::fs::write(root.join("src/new.rs"), "n\n").unwrap();
        std::fs::write(root.join("src/new.log"), "n\n").unwrap();
        assert!(fast.restat().is_none());
        let full = fast.rescan().unwrap();
        assert_eq!(Scan::diff(&fast, &full), [PathBuf::from("src/new.rs")]);
    }

    #[test]
    fn changed_ignore_rules_and_recent_directories_force_the_walk() {
        let root = tree("rules");
        let before = Scan::of_dir(&root).unwrap();
        std::fs::write(root.join(".gitignore"), "# nothing ignored now\n").unwrap();
        assert!(
            before.restat().is_none(),
            "a changed .gitignore can reveal files"
        );
        let after = before.rescan().unwrap();
        assert_eq!(
            Scan::diff(&before, &after),
            [".gitignore", "x.log"].map(PathBuf::from)
        );
        // The directories of `after` were aged before it, but `src` changes now and its mtime is recent.
        std::fs::write(root.join("src/c.rs"), "c\n").unwrap();
        let recent = Scan::of_dir(&root).unwrap();
        assert!(
            recent.restat().is_none(),
            "a just-modified directory is not trusted"
        );
    }

    #[test]
    fn a_checkout_of_several_chunks_is_restatted_in_parallel_and_in_order() {
        let root = tree("chunks");
        let many = root.join("many");
        std::fs::create_dir(&many).unwrap();
        let count = 3 * CHUNK + 7;
        for i in 0..count {
            std::fs::write(many.join(format!("f{i:05}")), "x").unwrap();
        }
        age(&many);
        age(&root);
        let before = Scan::of_dir(&root).unwrap();
        assert_eq!(before.len(), count + 3);
        let changed = many.join(format!("f{:05}", 2 * CHUNK + 1));
        std::fs::write(&changed, "changed").unwrap();
        let after = before.restat().expect("no directory changed");
        assert_eq!(
            Scan::diff(&before, &after),
            [changed.strip_prefix(&root).unwrap().to_path_buf()]
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
