//! The worktree pool: checkouts of discarded sessions, kept (up to `worktree_pool`, default 2) and reused by the
//! next session, which moves one to its start by rewriting only the paths that differ between the two trees.
//!
//! On a 100,000-file repository a fresh checkout writes 100,000 files (seconds); a pooled one writes what
//! changed between the two commits, so a new session starts in time proportional to the change, not to the
//! repository (issue 16).
//!
//! What makes reuse exact: a checkout enters the pool cleaned, equal to its session's tip. Tracked files that
//! differ from the checkout's index are rewritten, untracked and ignored leftovers (build output, files the
//! model wrote that were withheld) are removed, and the index is rewritten to describe the tip, so the checkout
//! holds exactly the tip's tree with an index whose stat data are right. The cost of that scan (a stat per
//! file) is paid by `discard`, not by the next session's start. A reused checkout then moves from the tip to
//! the new start with [`Store::reset_checkout()`]: HEAD, index and the differing files, the index built from the
//! changes between the two trees, not from the whole new tree (issue 29).
//!
//! Pooled checkouts live in `<common git dir>/agent/pool/<name>` and stay registered linked worktrees
//! (`git worktree list` shows them, detached at the commit they hold); moving one rewrites the registration's
//! `gitdir`, as `git worktree move` does. Takes and returns hold the worktree lock, so two sessions never take
//! the same checkout. `git agent gc` empties the pool, `discard --purge` bypasses it.
//!
//! Killed at any moment, a take never leaves a session a checkout that looks complete but holds another tree:
//! the pooled checkout's index is set aside before it moves ([`Store::set_index_aside()`]), so until the reset
//! writes the new index the checkout counts as unfinished and a resume makes it afresh.

use std::path::{Path, PathBuf};

use super::Progress;
use crate::store::repo::{Store, StoreError};
use gix::ObjectId;

/// The default of `worktree_pool`.
pub const DEFAULT_POOL: usize = 2;

impl Store {
    fn pool_dir(&self) -> PathBuf {
        self.common_dir().join("agent").join("pool")
    }

    /// The pooled checkouts, oldest first.
    pub fn pooled(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(self.pool_dir()) else {
            return Vec::new();
        };
        let mut found: Vec<(std::time::SystemTime, PathBuf)> = entries
            .flatten()
            .filter(|e| e.path().join(".git").is_file())
            .map(|e| {
                let when = e
                    .metadata()
                    .and_then(|m| m.modified())
                    .unwrap_or(std::time::UNIX_EPOCH);
                (when, e.path())
            })
            .collect();
        found.sort();
        found.into_iter().map(|(_, p)| p).collect()
    }

    /// Takes the newest pooled checkout for a new session: moves it to `root` (which must not exist) and then
    /// to `start`. False when the pool is empty or the checkout could not be used (it is removed then).
    pub(in crate::store) fn pool_take(
        &self,
        root: &Path,
        start: ObjectId,
        progress: &Progress,
    ) -> Result<bool, StoreError> {
        let taken = {
            let _lock = self.worktree_lock()?;
            let Some(pooled) = self.pooled().pop() else {
                return Ok(false);
            };
            self.set_index_aside(&pooled)?;
            crate::store::repo::crash_point();
            let moved = self.move_checkout(&pooled, root)?;
            crate::store::repo::crash_point();
            moved
        };
        if !taken {
            return Ok(false);
        }
        match self.reset_checkout(root, start, &[], &[], progress) {
            Ok(_) => Ok(true),
            Err(_) => {
                // A pooled checkout that cannot be moved is not worth a failed start: make a fresh one.
                self.remove_checkout(root)?;
                Ok(false)
            }
        }
    }

    /// Puts the checkout at `root` of a finished session whose branch points at `tip` into the pool, cleaned to
    /// `tip` (see the module docs), keeping at most `keep` pooled; with `keep` 0 it is removed.
    pub(in crate::store) fn pool_return(
        &self,
        root: &Path,
        tip: ObjectId,
        keep: usize,
    ) -> Result<(), StoreError> {
        if keep == 0 || !root.join(".git").is_file() {
            return self.remove_checkout(root);
        }
        // gix's status below reads each directory's `.gitignore` and `.gitattributes` the plain way, and a
        // FIFO a command left would block it for ever: a checkout the guarded walk refuses is removed, not
        // pooled.
        if super::scan::Scan::of_dir(root).is_err() {
            return self.remove_checkout(root);
        }
        let cleaned = self.open_checkout(root).and_then(|checkout| {
            let beyond = super::status::checkout_changes(&checkout)?;
            self.reset_checkout(
                root,
                tip,
                &beyond.changed,
                &beyond.leftovers,
                &Progress::default(),
            )
        });
        if cleaned.is_err() {
            return self.remove_checkout(root);
        }
        let Some(name) = root.file_name() else {
            return self.remove_checkout(root);
        };
        let pooled = self.pool_dir().join(name);
        let moved = {
            let _lock = self.worktree_lock()?;
            std::fs::create_dir_all(self.pool_dir())
                .map_err(StoreError::io("create", self.pool_dir()))?;
            self.move_checkout(root, &pooled)?
        };
        if !moved {
            return self.remove_checkout(root);
        }
        self.prune_pool(keep)?;
        Ok(())
    }

    /// `git agent gc`: empties the pool down to `keep`, removes checkouts of sessions whose branch is gone and
    /// that are not running, and registrations of session checkouts that are gone.
    pub fn gc(&self, keep: usize) -> Result<GcReport, StoreError> {
        let pooled = self.prune_pool(keep)?;
        let mut orphans = 0;
        let dir = self.common_dir().join("agent").join("worktrees");
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                let Some(id) = entry.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                let gone = matches!(
                    self.branch_tip(&crate::store::repo::branch_name(&id)),
                    Ok(None)
                );
                if gone && !self.log_is_locked(&id) {
                    self.remove_checkout(&entry.path())?;
                    orphans += 1;
                }
            }
        }
        let _lock = self.worktree_lock()?;
        self.forget_missing_checkouts();
        Ok(GcReport { pooled, orphans })
    }

    /// Removes pooled checkouts beyond the newest `keep`; returns how many went.
    pub fn prune_pool(&self, keep: usize) -> Result<usize, StoreError> {
        let pooled = self.pooled();
        let surplus = pooled.len().saturating_sub(keep);
        for old in &pooled[..surplus] {
            self.remove_checkout(old)?;
        }
        Ok(surplus)
    }

    /// Moves a checkout from `from` to `to` and points its registration there (as `git worktree move` does).
    /// False if `from` is not a registered checkout of this repository. Call with the worktree lock held.
    fn move_checkout(&self, from: &Path, to: &Path) -> Result<bool, StoreError> {
        let Some(admin) = self.admin_dir_of(from) else {
            return Ok(false);
        };
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(StoreError::io("create", parent))?;
        }
        std::fs::rename(from, to).map_err(StoreError::io("move", from))?;
        let gitdir = admin.join("gitdir");
        let text = format!("{}\n", to.join(".git").display());
        // The registration was writable by the checkout's commands: never write through a link they left.
        crate::sys::fs::replace_file(&gitdir, text.as_bytes())
            .map_err(StoreError::io("write", &gitdir))?;
        Ok(true)
    }
}

/// What [`Store::gc()`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcReport {
    /// Pooled checkouts.
    pub pooled: usize,
    /// Checkouts of sessions whose branch is gone.
    pub orphans: usize,
}
