//! What a `run` command changed in the checkout, for the agent's step commits.
//!
//! [`ChangeTracker`] is the one thing the agent asks: [`before_run()`](ChangeTracker::before_run) once per
//! command, [`after_run()`](ChangeTracker::after_run) for the paths to snapshot. On Linux the answer comes
//! from inotify events (`watch.rs`), at a cost proportional to the change; elsewhere, and whenever the events
//! cannot tell (a lost event, no watch left, a changed `.gitignore`), from the stat scan (`scan.rs`), whose
//! cost is proportional to the checkout. Either way the tracker keeps a [`Scan`] of the checkout as of the
//! last answer, which the fallback diffs against.
//!
//! Candidates may include paths whose content did not change (an `open` for writing, the agent's own
//! `edit_file`): [`Store::commit_step()`](super::Store::commit_step) drops those by comparing with the tip.
//! Changes made between two commands (by a background job) are found after the next one.

use std::path::{Path, PathBuf};

#[cfg(all(target_os = "linux", not(git_agent_portable)))]
use super::rules::Rules;
use super::scan::Scan;
#[cfg(all(target_os = "linux", not(git_agent_portable)))]
use super::watch::{Fallback, Watcher};
use crate::store::repo::StoreError;

/// Finds the files a shell command changed in a checkout; see the module docs.
pub struct ChangeTracker {
    root: PathBuf,
    /// Set up by the first [`ChangeTracker::before_run()`].
    state: Option<State>,
    last: Detection,
}

struct State {
    /// The checkout as of the last answer.
    scan: Scan,
    #[cfg(all(target_os = "linux", not(git_agent_portable)))]
    watch: Option<(Watcher, Rules)>,
}

/// How [`ChangeTracker::after_run()`] found its last answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detection {
    /// No answer yet.
    None,
    /// From inotify events, without a scan.
    Events,
    /// From a scan of the whole checkout, and why.
    Scan(String),
}

impl ChangeTracker {
    /// A tracker for the checkout at `root`; nothing is read until [`ChangeTracker::before_run()`].
    pub fn new(root: &Path) -> ChangeTracker {
        ChangeTracker {
            root: root.to_owned(),
            state: None,
            last: Detection::None,
        }
    }

    /// Call before each command. The first call scans the checkout and (on Linux) sets up the watches,
    /// which costs about one scan; later calls cost nothing.
    pub fn before_run(&mut self) -> Result<(), StoreError> {
        if self.state.is_none() {
            self.state = Some(start(&self.root)?);
        }
        Ok(())
    }

    /// The checkout-relative paths changed (new, modified, deleted, mode changed; not ignored) since the last
    /// call, sorted.
    pub fn after_run(&mut self) -> Result<Vec<PathBuf>, StoreError> {
        let Some(state) = &mut self.state else {
            // Nothing to compare with: this answer becomes the reference.
            self.before_run()?;
            return Ok(Vec::new());
        };
        #[cfg(all(target_os = "linux", not(git_agent_portable)))]
        if let Some((watcher, rules)) = &mut state.watch {
            match watcher.drain(&mut state.scan, rules) {
                Ok(changed) => {
                    debug(format_args!(
                        "{} changed paths from inotify events ({} directories watched)",
                        changed.len(),
                        watcher.len()
                    ));
                    self.last = Detection::Events;
                    return Ok(changed);
                }
                Err(why) => return self.rescan_all(&why),
            }
        }
        let after = state.scan.rescan()?;
        let changed = Scan::diff(&state.scan, &after);
        state.scan = after;
        self.last = Detection::Scan("inotify is not in use".into());
        Ok(changed)
    }

    /// How the last [`ChangeTracker::after_run()`] found its answer.
    pub fn detection(&self) -> &Detection {
        &self.last
    }

    /// The number of directories watched (0 without inotify).
    pub fn watched_dirs(&self) -> usize {
        #[cfg(all(target_os = "linux", not(git_agent_portable)))]
        if let Some(State {
            watch: Some((watcher, _)),
            ..
        }) = &self.state
        {
            return watcher.len();
        }
        0
    }

    /// The events could not tell: scan everything, diff with the last answer and start watching afresh
    /// (events were lost, so the watch set may be incomplete too).
    #[cfg(all(target_os = "linux", not(git_agent_portable)))]
    fn rescan_all(&mut self, why: &Fallback) -> Result<Vec<PathBuf>, StoreError> {
        debug(format_args!("change detection falls back to a scan: {why}"));
        self.last = Detection::Scan(why.to_string());
        let Some(old) = self.state.take() else {
            return Ok(Vec::new());
        };
        // Closing the old instance first frees its watches for the new one.
        drop(old.watch);
        let new = start(&self.root)?;
        let changed = Scan::diff(&old.scan, &new.scan);
        self.state = Some(new);
        Ok(changed)
    }

    #[cfg(all(test, target_os = "linux", not(git_agent_portable)))]
    pub(in crate::store) fn force_fallback(&mut self) {
        #[cfg(all(target_os = "linux", not(git_agent_portable)))]
        if let Some(State {
            watch: Some((watcher, _)),
            ..
        }) = &mut self.state
        {
            watcher.force_fallback = true;
        }
    }
}

/// Below this many tracked files a stat scan per command (about a microsecond a file) costs less than
/// inotify: closing an instance that holds watches waits for the kernel to retire them (an SRCU grace
/// period, ~15 ms measured here), which was a fifth of a small session's wall, spent at its exit.
#[cfg(all(target_os = "linux", not(git_agent_portable)))]
const WATCH_FROM_FILES: u32 = 2_000;

/// Scans the checkout, watching it where we can and where it pays.
fn start(root: &Path) -> Result<State, StoreError> {
    let tracked = tracked_files(root);
    #[cfg(all(target_os = "linux", not(git_agent_portable)))]
    match tracked {
        Some(n) if n < WATCH_FROM_FILES => {
            debug(format_args!("not watching the checkout: {n} tracked files"))
        }
        _ => match Watcher::start(root) {
            Ok((watcher, scan)) => {
                return Ok(State {
                    scan,
                    watch: Some((watcher, Rules::new(root))),
                })
            }
            Err(why) => debug(format_args!("not watching the checkout: {why}")),
        },
    }
    Ok(State {
        scan: Scan::of_checkout(root, tracked)?,
        #[cfg(all(target_os = "linux", not(git_agent_portable)))]
        watch: None,
    })
}

/// The number of entries in the index of the checkout at `root` (its own `.git` dir's, or the linked
/// worktree's that `.git` names), from the index header alone; `None` when it cannot be read.
fn tracked_files(root: &Path) -> Option<u32> {
    let dot_git = root.join(".git");
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else {
        let text = std::fs::read_to_string(&dot_git).ok()?;
        PathBuf::from(text.strip_prefix("gitdir:")?.trim())
    };
    super::index_entries(&git_dir.join("index"))
}

/// Internals a user has no use for, on stderr when `GIT_AGENT_DEBUG` is set (only the watcher has any).
#[cfg(all(target_os = "linux", not(git_agent_portable)))]
fn debug(message: std::fmt::Arguments<'_>) {
    if std::env::var_os("GIT_AGENT_DEBUG").is_some_and(|v| !v.is_empty()) {
        eprintln!("debug: {message}");
    }
}

#[cfg(all(test, target_os = "linux", not(git_agent_portable)))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A checkout-like tree: two directories of files, an ignore file, an ignored file.
    fn tree(tag: &str) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("git-agent-changes-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::write(root.join(".gitignore"), "*.log\nbuild/\n").unwrap();
        std::fs::write(root.join("src/a.rs"), "a\n").unwrap();
        std::fs::write(root.join("src/deep/b.rs"), "b\n").unwrap();
        std::fs::write(root.join("src/deep/c.rs"), "c\n").unwrap();
        std::fs::write(root.join("docs/d.md"), "d\n").unwrap();
        root
    }

    fn started(root: &Path) -> ChangeTracker {
        let mut tracker = ChangeTracker::new(root);
        tracker.before_run().unwrap();
        assert_eq!(tracker.watched_dirs(), 4, "root, src, src/deep, docs");
        tracker
    }

    fn paths(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    /// The events' answer, checked against what a full scan finds.
    fn after(tracker: &mut ChangeTracker) -> Vec<PathBuf> {
        let before = tracker.state.as_ref().unwrap().scan.clone();
        let changed = tracker.after_run().unwrap();
        assert_eq!(tracker.detection(), &Detection::Events);
        let now = Scan::of_dir(&tracker.root).unwrap();
        assert_eq!(
            Scan::diff(&tracker.state.as_ref().unwrap().scan, &now),
            Vec::<PathBuf>::new(),
            "the tracked scan is what a full scan sees"
        );
        for path in Scan::diff(&before, &now) {
            assert!(
                changed.contains(&path),
                "{path:?} changed but was not reported"
            );
        }
        changed
    }

    #[test]
    fn create_modify_delete_and_mode_change_are_events() {
        let root = tree("files");
        let mut t = started(&root);
        assert_eq!(after(&mut t), Vec::<PathBuf>::new());
        std::fs::write(root.join("src/new.rs"), "n\n").unwrap();
        std::fs::write(root.join("src/deep/b.rs"), "b changed\n").unwrap();
        std::fs::remove_file(root.join("docs/d.md")).unwrap();
        assert_eq!(
            after(&mut t),
            paths(&["docs/d.md", "src/deep/b.rs", "src/new.rs"])
        );
        let a = root.join("src/a.rs");
        std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("a.rs", root.join("src/link")).unwrap();
        assert_eq!(after(&mut t), paths(&["src/a.rs", "src/link"]));
        // A file that came and went between two commands is no change.
        std::fs::write(root.join("src/tmp"), "t\n").unwrap();
        std::fs::remove_file(root.join("src/tmp")).unwrap();
        assert_eq!(after(&mut t), Vec::<PathBuf>::new());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn renames_within_and_across_directories() {
        let root = tree("rename");
        let mut t = started(&root);
        std::fs::rename(root.join("src/a.rs"), root.join("docs/a.rs")).unwrap();
        std::fs::rename(root.join("src/deep/b.rs"), root.join("src/deep/b2.rs")).unwrap();
        assert_eq!(
            after(&mut t),
            paths(&["docs/a.rs", "src/a.rs", "src/deep/b.rs", "src/deep/b2.rs"])
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn new_directories_are_walked_and_watched() {
        let root = tree("newdir");
        let mut t = started(&root);
        std::fs::create_dir_all(root.join("pkg/sub/subsub")).unwrap();
        std::fs::write(root.join("pkg/x.rs"), "x\n").unwrap();
        std::fs::write(root.join("pkg/sub/subsub/y.rs"), "y\n").unwrap();
        std::fs::write(root.join("pkg/sub/z.log"), "ignored\n").unwrap();
        std::fs::create_dir_all(root.join("pkg/build")).unwrap();
        std::fs::write(root.join("pkg/build/out.o"), "ignored\n").unwrap();
        assert_eq!(after(&mut t), paths(&["pkg/sub/subsub/y.rs", "pkg/x.rs"]));
        assert_eq!(
            t.watched_dirs(),
            7,
            "pkg, pkg/sub, pkg/sub/subsub are watched"
        );
        // The new directories report their own changes now.
        std::fs::write(root.join("pkg/sub/subsub/y.rs"), "y2\n").unwrap();
        std::fs::write(root.join("pkg/build/out2.o"), "ignored\n").unwrap();
        assert_eq!(after(&mut t), paths(&["pkg/sub/subsub/y.rs"]));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn deleted_and_moved_directories_report_every_file_below() {
        let root = tree("deldir");
        let mut t = started(&root);
        std::fs::remove_dir_all(root.join("src/deep")).unwrap();
        assert_eq!(after(&mut t), paths(&["src/deep/b.rs", "src/deep/c.rs"]));
        assert_eq!(t.watched_dirs(), 3);
        // Moved within the checkout: the old files are gone, the new ones appear, and the moved directory's
        // watch reports under its new name.
        std::fs::rename(root.join("src"), root.join("lib")).unwrap();
        assert_eq!(after(&mut t), paths(&["lib/a.rs", "src/a.rs"]));
        std::fs::write(root.join("lib/a.rs"), "a2\n").unwrap();
        assert_eq!(after(&mut t), paths(&["lib/a.rs"]));
        // Moved out of the checkout: gone, and nothing done there later shows up.
        let outside = root.with_extension("outside");
        let _ = std::fs::remove_dir_all(&outside);
        std::fs::rename(root.join("docs"), &outside).unwrap();
        assert_eq!(after(&mut t), paths(&["docs/d.md"]));
        std::fs::write(outside.join("later.md"), "l\n").unwrap();
        assert_eq!(after(&mut t), Vec::<PathBuf>::new());
        std::fs::remove_dir_all(&outside).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn ignored_files_are_no_change_but_a_changed_gitignore_forces_a_scan() {
        let root = tree("ignored");
        let mut t = started(&root);
        std::fs::write(root.join("src/debug.log"), "ignored\n").unwrap();
        std::fs::create_dir(root.join("build")).unwrap();
        std::fs::write(root.join("build/out.o"), "ignored\n").unwrap();
        assert_eq!(after(&mut t), Vec::<PathBuf>::new());
        assert_eq!(t.watched_dirs(), 4, "an ignored directory is not watched");
        std::fs::write(root.join(".gitignore"), "build/\n").unwrap();
        assert_eq!(
            t.after_run().unwrap(),
            paths(&[".gitignore", "src/debug.log"])
        );
        assert!(matches!(t.detection(), Detection::Scan(why) if why.contains(".gitignore")));
        // Watching again, with the new rules.
        std::fs::write(root.join("src/other.log"), "visible now\n").unwrap();
        assert_eq!(after(&mut t), paths(&["src/other.log"]));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_forced_fallback_scans_and_watches_again() {
        let root = tree("forced");
        let mut t = started(&root);
        t.force_fallback();
        std::fs::write(root.join("src/a.rs"), "a2\n").unwrap();
        std::fs::create_dir(root.join("new")).unwrap();
        std::fs::write(root.join("new/n.rs"), "n\n").unwrap();
        assert_eq!(t.after_run().unwrap(), paths(&["new/n.rs", "src/a.rs"]));
        assert_eq!(t.detection(), &Detection::Scan("forced by a test".into()));
        assert_eq!(t.watched_dirs(), 5, "the new directory is watched too");
        std::fs::write(root.join("new/n.rs"), "n2\n").unwrap();
        assert_eq!(after(&mut t), paths(&["new/n.rs"]));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_queue_overflow_falls_back_to_the_scan() {
        let max: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(16384);
        let root = tree("overflow");
        let mut t = started(&root);
        // Each new file queues at least two events (create, close after writing).
        let n = max / 2 + 100;
        for i in 0..n {
            std::fs::write(root.join(format!("docs/f{i:06}.md")), "x").unwrap();
        }
        let changed = t.after_run().unwrap();
        assert_eq!(
            t.detection(),
            &Detection::Scan("the inotify queue overflowed".into())
        );
        assert_eq!(changed.len(), n);
        std::fs::write(root.join("src/a.rs"), "a2\n").unwrap();
        assert_eq!(after(&mut t), paths(&["src/a.rs"]));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
