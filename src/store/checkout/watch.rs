//! Linux inotify watches on every directory of a checkout, so that finding what a `run` command changed costs
//! as much as the change, not as much as the checkout (issue 5: one changed file in 100,000 in well under
//! 50 ms, where stat-ing every file takes ~400 ms). Where there is no inotify (not Linux), [`Watcher::start()`]
//! fails with [`Fallback::Limit`] and every change is found by a full scan.
//!
//! The kernel queues an event naming the entry for every create, delete, write, attribute change and rename
//! in a watched directory, synchronously with the system call that made it: once a command has exited, its
//! events are in the queue. [`Watcher::drain()`] reads them and turns them into candidate paths; what they
//! cannot describe is left to the caller's full scan ([`Fallback`]): a lost event (`IN_Q_OVERFLOW`), no watch
//! left (`max_user_watches`), a changed `.gitignore`, an event we cannot place.
//!
//! Watches follow the walk of [`Scan`]: only directories it enters are watched (never `.git`, never ignored
//! ones), so events name only paths whose parents the scan considers. A directory created later is watched
//! before it is read (nothing created in between is missed) and everything in it is a candidate; for a
//! directory deleted or moved away, every file the scan knew below it is a candidate.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::rules::Rules;
use super::scan::Scan;
use crate::sys::errno::{EACCES, ELOOP, ENOENT, ENOTDIR};
use crate::sys::inotify::{mask, parse, Event, Inotify};

/// What we ask to hear about, on directories only, not through symlinks; events for an entry unlinked while
/// still open (`IN_EXCL_UNLINK`) would name a path that no longer exists.
const MASK: u32 = mask::CREATE
    | mask::DELETE
    | mask::MODIFY
    | mask::ATTRIB
    | mask::MOVED_FROM
    | mask::MOVED_TO
    | mask::CLOSE_WRITE
    | mask::DELETE_SELF
    | mask::MOVE_SELF
    | mask::ONLYDIR
    | mask::DONT_FOLLOW
    | mask::EXCL_UNLINK;

/// Why the events cannot tell what changed, so a full scan must.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::store) enum Fallback {
    /// The kernel's queue overflowed (`fs.inotify.max_queued_events`): events were lost.
    Overflow,
    /// No watch could be added (`fs.inotify.max_user_watches`, or out of memory).
    Limit(String),
    /// A `.gitignore` changed: any path may have become ignored or visible.
    IgnoreRules(PathBuf),
    /// The checkout itself was moved or deleted, or an event came for a watch we do not know.
    Lost(String),
    /// Forced, for tests.
    #[cfg(test)]
    Forced,
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fallback::Overflow => write!(f, "the inotify queue overflowed"),
            Fallback::Limit(e) => write!(f, "no inotify watch left ({e})"),
            Fallback::IgnoreRules(p) => write!(f, "{} changed", p.display()),
            Fallback::Lost(why) => write!(f, "{why}"),
            #[cfg(test)]
            Fallback::Forced => write!(f, "forced by a test"),
        }
    }
}

/// The inotify instance of one checkout and the directory each of its watches stands for.
pub(in crate::store) struct Watcher {
    fd: Inotify,
    root: PathBuf,
    root_wd: i32,
    /// Watch descriptor -> checkout-relative directory.
    dirs: HashMap<i32, PathBuf>,
    /// Watches of directories that left the checkout; their late events are expected and say nothing new.
    retired: HashSet<i32>,
    #[cfg(test)]
    pub(in crate::store) force_fallback: bool,
}

impl Watcher {
    /// Sets up watches on every directory of the checkout at `root` and scans it, in one walk. Each
    /// directory is watched before it is read, so a change during the walk is in the scan or in the queue.
    pub(in crate::store) fn start(root: &Path) -> Result<(Watcher, Scan), Fallback> {
        let fd = Inotify::new().map_err(limit)?;
        let root_wd = add_watch(&fd, root).map_err(limit)?;
        let added = Mutex::new((Vec::new(), None::<io::Error>));
        let hook = |dir: &Path| {
            let result = add_watch(&fd, dir);
            if let Ok(mut added) = added.lock() {
                match result {
                    Ok(wd) => added.0.push((wd, dir.to_owned())),
                    // Gone or unreadable since the walk listed it: the walk skips it as well.
                    Err(e) if is_vanished(&e) => {}
                    Err(e) => added.1 = Some(e),
                }
            }
        };
        let scan =
            Scan::walk(root, Some(&hook), false).map_err(|e| Fallback::Lost(e.to_string()))?;
        let (added, failed) = added
            .into_inner()
            .map_err(|_| Fallback::Lost("a scan thread panicked".into()))?;
        if let Some(e) = failed {
            return Err(limit(e));
        }
        let mut dirs = HashMap::with_capacity(added.len() + 1);
        dirs.insert(root_wd, PathBuf::new());
        for (wd, dir) in added {
            let rel = dir.strip_prefix(root).unwrap_or(&dir).to_owned();
            dirs.insert(wd, rel);
        }
        let watcher = Watcher {
            fd,
            root: root.to_owned(),
            root_wd,
            dirs,
            retired: HashSet::new(),
            #[cfg(test)]
            force_fallback: false,
        };
        Ok((watcher, scan))
    }

    /// The number of directories watched.
    pub(in crate::store) fn len(&self) -> usize {
        self.dirs.len()
    }

    /// Reads every queued event and returns the checkout-relative paths they concern (not ignored, files
    /// and symlinks or what used to be), sorted, with `scan` brought up to date for them.
    pub(in crate::store) fn drain(
        &mut self,
        scan: &mut Scan,
        rules: &mut Rules,
    ) -> Result<Vec<PathBuf>, Fallback> {
        #[cfg(test)]
        if self.force_fallback {
            return Err(Fallback::Forced);
        }
        let mut found = Found::default();
        for event in self.read_all()? {
            self.place(event, &mut found)?;
        }
        // Gone first: a directory removed and made anew under the same name is both.
        let gone = outermost(found.gone);
        for dir in &gone {
            found.files.extend(scan.files_under(dir));
            rules.forget(dir);
        }
        let orphans = self.unmap(&gone);
        let mut orphans: HashSet<i32> = orphans.into_iter().collect();
        for dir in outermost(found.created) {
            if rules.is_ignored(&dir, true) {
                continue;
            }
            self.walk_new(&dir, rules, &mut found.files, &mut orphans)?;
        }
        for wd in orphans {
            // Moved out of the checkout (a deleted directory's watch is gone already: EINVAL, harmless).
            self.fd.remove_watch(wd);
            self.retired.insert(wd);
        }
        let files: Vec<PathBuf> = found
            .files
            .into_iter()
            .filter(|rel| !rules.is_ignored(rel, false))
            .collect();
        Ok(scan.refresh(files.iter().map(PathBuf::as_path)))
    }

    /// Sorts one event into `found`.
    fn place(&mut self, event: Event, found: &mut Found) -> Result<(), Fallback> {
        if event.mask & mask::Q_OVERFLOW != 0 {
            return Err(Fallback::Overflow);
        }
        if event.mask & mask::IGNORED != 0 {
            // The watch is gone (its directory was deleted); the parent's event says what that means.
            self.dirs.remove(&event.wd);
            self.retired.remove(&event.wd);
            return Ok(());
        }
        let Some(dir) = self.dirs.get(&event.wd) else {
            if self.retired.contains(&event.wd) {
                return Ok(());
            }
            return Err(Fallback::Lost(format!(
                "an event for unknown watch {}",
                event.wd
            )));
        };
        if event.mask & (mask::DELETE_SELF | mask::MOVE_SELF | mask::UNMOUNT) != 0 {
            if event.wd == self.root_wd || event.mask & mask::UNMOUNT != 0 {
                return Err(Fallback::Lost("the checkout was moved or unmounted".into()));
            }
            // A subdirectory: its parent's event names it.
            return Ok(());
        }
        let Some(name) = event.name else {
            return Ok(());
        };
        let name = OsStr::from_bytes(&name);
        if name == ".git" {
            return Ok(());
        }
        let rel = dir.join(name);
        if event.mask & mask::ISDIR != 0 {
            if event.mask & (mask::CREATE | mask::MOVED_TO) != 0 {
                found.created.insert(rel);
            } else if event.mask & (mask::DELETE | mask::MOVED_FROM) != 0 {
                found.gone.insert(rel);
            }
            return Ok(());
        }
        if name == ".gitignore" {
            return Err(Fallback::IgnoreRules(rel));
        }
        found.files.insert(rel);
        Ok(())
    }

    /// Forgets the watches of `gone` directories and below, returning their descriptors: a directory moved
    /// within the checkout keeps its watch, which [`Watcher::walk_new()`] finds again.
    fn unmap(&mut self, gone: &BTreeSet<PathBuf>) -> Vec<i32> {
        if gone.is_empty() {
            return Vec::new();
        }
        let is_gone = |rel: &Path| rel.ancestors().any(|a| gone.contains(a));
        let wds: Vec<i32> = self
            .dirs
            .iter()
            .filter(|(_, rel)| is_gone(rel))
            .map(|(wd, _)| *wd)
            .collect();
        for wd in &wds {
            self.dirs.remove(wd);
        }
        wds
    }

    /// Watches the new directory `rel` and everything below it, then lists it: all its files are candidates.
    fn walk_new(
        &mut self,
        rel: &Path,
        rules: &mut Rules,
        files: &mut BTreeSet<PathBuf>,
        orphans: &mut HashSet<i32>,
    ) -> Result<(), Fallback> {
        let mut stack = vec![rel.to_owned()];
        while let Some(rel) = stack.pop() {
            let abs = self.root.join(&rel);
            match add_watch(&self.fd, &abs) {
                Ok(wd) => {
                    orphans.remove(&wd);
                    self.retired.remove(&wd);
                    self.dirs.insert(wd, rel.clone());
                }
                Err(e) if is_vanished(&e) => continue,
                Err(e) => return Err(limit(e)),
            }
            let Ok(entries) = std::fs::read_dir(&abs) else {
                continue;
            };
            for entry in entries.flatten() {
                let child = rel.join(entry.file_name());
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    if !rules.is_ignored(&child, true) {
                        stack.push(child);
                    }
                } else if !rules.is_ignored(&child, false) {
                    files.insert(child);
                }
            }
        }
        Ok(())
    }

    /// Every queued event, until the queue is empty.
    fn read_all(&self) -> Result<Vec<Event>, Fallback> {
        let mut events = Vec::new();
        // Room for many events per read; one event is at most 16 bytes + NAME_MAX + 1.
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match self.fd.read(&mut buf) {
                Ok(n) => n,
                Err(err) => match err.kind() {
                    io::ErrorKind::WouldBlock => return Ok(events),
                    io::ErrorKind::Interrupted => continue,
                    _ => return Err(Fallback::Lost(format!("reading inotify events: {err}"))),
                },
            };
            if n == 0 {
                return Ok(events);
            }
            parse(&buf[..n], &mut events);
        }
    }
}

/// Paths named in events, sorted out.
#[derive(Default)]
struct Found {
    files: BTreeSet<PathBuf>,
    created: BTreeSet<PathBuf>,
    gone: BTreeSet<PathBuf>,
}

/// The directories of `dirs` that are not below another one of them.
fn outermost(dirs: BTreeSet<PathBuf>) -> BTreeSet<PathBuf> {
    let keep: Vec<PathBuf> = dirs
        .iter()
        .filter(|d| !d.ancestors().skip(1).any(|a| dirs.contains(a)))
        .cloned()
        .collect();
    keep.into_iter().collect()
}

fn add_watch(fd: &Inotify, dir: &Path) -> io::Result<i32> {
    fd.add_watch(dir, MASK)
}

/// Errors of a directory that went away (or became something else) after it was listed.
fn is_vanished(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(ENOENT | ENOTDIR | EACCES | ELOOP))
}

fn limit(e: io::Error) -> Fallback {
    Fallback::Limit(e.to_string())
}
