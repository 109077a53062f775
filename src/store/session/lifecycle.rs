//! A session after its first run: reopening it (resume), moving its branch back (undo), removing it (discard),
//! and keeping its checkout's files equal to what the branch says.
//!
//! The checkout's HEAD stays detached at the session's start commit and its index is never written (see the
//! module docs of `store`), so syncing the checkout means rewriting the files that differ between two commits,
//! and only those, through the repository's smudge filters ([`Store::write_paths()`]); files the target lacks
//! are removed.
//!
//! Whether a session works in the user's own tree is a local fact ([`Store::is_here()`]), never read from the
//! session log, which may have been pulled from someone else.

use std::ffi::OsStr;
use std::path::Path;

use gix::bstr::BString;
use gix::refs::transaction::{PreviousValue, RefEdit};

use super::log::Meta;
use crate::store::objects::snapshot::{cas_branch, edit_ref, full_name, trailer};
use crate::store::repo::{branch_name, Checkout, Session, Store, StoreError};
use gix::ObjectId;

/// One path that differs between two commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// `A`, `M`, `D` or `T` (type change), as `git diff --name-status` says.
    pub status: char,
    /// Repository-relative, as git spells it.
    pub path: String,
}

impl Store {
    /// The session described by `meta` as it stands now: its branch's current tip and step, and its checkout,
    /// recreated if it was removed.
    pub fn reopen_session(&self, meta: &Meta) -> Result<Session, StoreError> {
        let branch = branch_name(&meta.id);
        let tip = self
            .branch_tip(&branch)?
            .ok_or_else(|| StoreError::Discarded {
                id: meta.id.clone(),
                branch: format!("agent/{}", meta.id),
            })?;
        let base = parse_id(&meta.base)?;
        let step0 = meta.step0.as_deref().map(parse_id).transpose()?;
        let steps = self.step_of(tip)?;
        let session = Session {
            id: meta.id.clone(),
            branch,
            checkout: self.checkout_of(meta),
            base,
            step0,
            tip,
            steps,
        };
        // The user's work tree (`--here`) is never recreated: it is theirs, and it is there. A checkout whose
        // making was cut short (a killed start: no registration, or no index yet) is made again.
        if let Checkout::Linked(root) = &session.checkout {
            if !self.checkout_complete(root) {
                if std::fs::symlink_metadata(root).is_ok() {
                    self.remove_checkout(root)?;
                }
                self.recreate_checkout(&session, root)?;
            }
        }
        Ok(session)
    }

    /// Where session `meta` works: the user's work tree for a session started here with `--here`, else its
    /// linked checkout. `meta.here` is not consulted: a pulled log could claim anything.
    pub fn checkout_of(&self, meta: &Meta) -> Checkout {
        if self.is_here(&meta.id) {
            Checkout::Here(self.workdir().to_path_buf())
        } else {
            Checkout::Linked(self.checkout_path(&meta.id))
        }
    }

    /// Where `branch` points, if it exists.
    pub fn branch_tip(&self, branch: &str) -> Result<Option<ObjectId>, StoreError> {
        match self.repo.try_find_reference(branch)? {
            Some(mut r) => Ok(Some(r.peel_to_id()?.detach())),
            None => Ok(None),
        }
    }

    /// The `Agent-Step` trailer of `commit`, 0 when it has none (the base).
    pub fn step_of(&self, commit: ObjectId) -> Result<u32, StoreError> {
        let commit = self.repo.find_commit(commit)?;
        let message = commit.message_raw_sloppy().to_string();
        Ok(trailer(&message, "Agent-Step")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0))
    }

    /// A new checkout for a session whose checkout was removed: detached at the start commit, files at the tip.
    fn recreate_checkout(&self, s: &Session, root: &Path) -> Result<(), StoreError> {
        let start = s.step0.unwrap_or(s.base);
        self.add_checkout(root, start, &crate::store::checkout::Progress::default())?;
        self.sync_checkout(root, start, s.tip)
    }

    /// Paths that differ between commits `from` and `to` (no rename detection), in-process.
    pub fn changes(&self, from: ObjectId, to: ObjectId) -> Result<Vec<Change>, StoreError> {
        use gix::object::tree::diff::ChangeDetached;
        let old = self.repo.find_commit(from)?.tree()?;
        let new = self.repo.find_commit(to)?.tree()?;
        let mut options = gix::diff::Options::default().with_rewrites(None);
        options.track_path();
        let mut changes = Vec::new();
        for change in self.repo.diff_tree_to_tree(&old, &new, options)? {
            let (status, path, mode, previous) = match change {
                ChangeDetached::Addition {
                    location,
                    entry_mode,
                    ..
                } => ('A', location, entry_mode, None),
                ChangeDetached::Deletion {
                    location,
                    entry_mode,
                    ..
                } => ('D', location, entry_mode, None),
                ChangeDetached::Modification {
                    location,
                    entry_mode,
                    previous_entry_mode,
                    ..
                } => ('M', location, entry_mode, Some(previous_entry_mode)),
                ChangeDetached::Rewrite {
                    location,
                    entry_mode,
                    ..
                } => ('M', location, entry_mode, None),
            };
            // Directories are reported too; git names only what is in them.
            if mode.is_tree() && previous.is_none_or(|p| p.is_tree()) {
                continue;
            }
            let status = match previous {
                Some(p) if p.kind() != mode.kind() => 'T',
                _ => status,
            };
            changes.push(Change {
                status,
                path: String::from_utf8_lossy(&path).into_owned(),
            });
        }
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(changes)
    }

    /// Makes the files of checkout `root` that differ between `from` and `to` what `to` says.
    pub fn sync_checkout(
        &self,
        root: &Path,
        from: ObjectId,
        to: ObjectId,
    ) -> Result<(), StoreError> {
        let paths: Vec<BString> = self
            .changes(from, to)?
            .into_iter()
            .map(|c| BString::from(c.path))
            .collect();
        if paths.is_empty() {
            return Ok(());
        }
        let tree = self.repo.find_commit(to)?.tree_id()?.detach();
        self.write_paths(root, tree, &paths)
    }

    /// Moves the session's branch back `n` steps (compare-and-swap) and makes its checkout follow. Returns the
    /// tip it moved away from (for redo). Step 0, the user's captured changes, cannot be undone.
    ///
    /// In the user's work tree (`--here`) the files are restored only if each still holds what the undone
    /// steps left there: a later edit of the user's is never overwritten; the undo is refused, naming the
    /// files, and nothing moves.
    pub fn undo(&self, s: &mut Session, n: u32) -> Result<ObjectId, StoreError> {
        if n == 0 || n > s.steps {
            return Err(StoreError::UndoOutOfRange {
                id: s.id.clone(),
                asked: n,
                steps: s.steps,
            });
        }
        let mut target = s.tip;
        for _ in 0..n {
            let commit = self.repo.find_commit(target)?;
            target = commit
                .parent_ids()
                .next()
                .map(|id| id.detach())
                .ok_or(StoreError::NoParent(target))?;
        }
        let old = s.tip;
        if let Checkout::Here(root) = &s.checkout {
            let changes = self.changes(target, old)?;
            crate::store::checkout::refuse_tree_paths(changes.iter().map(|c| c.path.as_bytes()))?;
            let edited = self.edited_since(root, target, old)?;
            if !edited.is_empty() {
                return Err(StoreError::UndoWouldOverwrite {
                    edited,
                    tip: old,
                    target,
                });
            }
        }
        self.record_tips(&s.id, Some(old), target)?;
        cas_branch(
            &self.repo,
            &s.branch,
            old,
            target,
            &format!("git-agent: undo {n} step(s)"),
        )?;
        s.tip = target;
        s.steps = self.step_of(target)?;
        match &s.checkout {
            Checkout::Linked(root) if root.join(".git").exists() => {
                self.sync_checkout(root, old, target)?
            }
            Checkout::Linked(_) => {}
            // Only the files: the user's index and HEAD are never written.
            Checkout::Here(root) => self.sync_checkout(root, old, target)?,
        }
        Ok(old)
    }

    /// The paths that differ between `to` and `from` whose file in `root` no longer holds what `from` says
    /// (content as `git add` would store it, so line-ending filters do not count as edits).
    fn edited_since(
        &self,
        root: &Path,
        to: ObjectId,
        from: ObjectId,
    ) -> Result<Vec<String>, StoreError> {
        let changes = self.changes(to, from)?;
        let tree = self.repo().find_commit(from)?.tree()?;
        let mut edited = Vec::new();
        let mut present = Vec::new();
        for change in &changes {
            let expected = match tree.lookup_entry_by_path(&change.path)? {
                Some(e) if e.mode().is_blob() => Some(e.object_id()),
                // Symlinks and submodules: compared by existence only.
                Some(_) => None,
                None => {
                    if std::fs::symlink_metadata(root.join(&change.path)).is_ok() {
                        edited.push(change.path.clone());
                    }
                    continue;
                }
            };
            match std::fs::symlink_metadata(root.join(&change.path)) {
                Err(_) => edited.push(change.path.clone()),
                Ok(md) if md.is_file() => {
                    if let Some(expected) = expected {
                        present.push((change.path.clone(), expected));
                    }
                }
                Ok(_) => {}
            }
        }
        if !present.is_empty() {
            let hashes = self.hash_files(root, present.iter().map(|(p, _)| p.as_str()))?;
            for ((path, expected), found) in present.into_iter().zip(hashes) {
                if found != expected {
                    edited.push(path);
                }
            }
        }
        edited.sort();
        Ok(edited)
    }

    /// The blob ids `git add` would give `paths` (relative to `root`), through the repository's clean filters.
    /// Nothing is written.
    fn hash_files<'p>(
        &self,
        root: &Path,
        paths: impl Iterator<Item = &'p str>,
    ) -> Result<Vec<ObjectId>, StoreError> {
        let mut args: Vec<&OsStr> = ["hash-object", "--"].map(OsStr::new).to_vec();
        let paths: Vec<&str> = paths.collect();
        args.extend(paths.iter().map(OsStr::new));
        let out = self.git(root, &args)?;
        String::from_utf8_lossy(&out)
            .lines()
            .map(|l| parse_id(l.trim()))
            .collect()
    }

    /// Removes session `meta`'s linked checkout and its branch (wherever the branch points). The checkout goes
    /// into the worktree pool, cleaned to the branch's tip, while the pool holds fewer than `pool` (see
    /// `store::pool`); with `pool` 0 it is removed. A `--here` session has no checkout of its own: only its
    /// branch goes, the user's work tree stays as it is. The session log stays. Returns where the branch
    /// pointed, if it existed.
    pub fn discard(&self, meta: &Meta, pool: usize) -> Result<Option<ObjectId>, StoreError> {
        let branch = branch_name(&meta.id);
        let tip = self.branch_tip(&branch)?;
        // The branch first: if it cannot be deleted (a lock in the way), nothing has changed yet.
        if let Some(tip) = tip {
            let edit = RefEdit::delete(
                full_name(&branch)?,
                PreviousValue::MustExistAndMatch(gix::refs::Target::Object(tip)),
            );
            edit_ref(&self.repo, edit)?;
        }
        match self.checkout_of(meta) {
            Checkout::Linked(root) if std::fs::symlink_metadata(&root).is_ok() => match tip {
                Some(tip) if self.checkout_complete(&root) => self.pool_return(&root, tip, pool)?,
                _ => self.remove_checkout(&root)?,
            },
            Checkout::Linked(_) | Checkout::Here(_) => {}
        }
        Ok(tip)
    }

    /// The submodule `rel` (checkout-relative) lies inside in `commit`: the path of a gitlink strictly above
    /// it. Writes there would turn the gitlink into a tree on the branch (issue 17, defect 9).
    pub fn submodule_above(
        &self,
        commit: ObjectId,
        rel: &std::path::Path,
    ) -> Result<Option<std::path::PathBuf>, StoreError> {
        let tree = self.repo.find_commit(commit)?.tree()?;
        Ok(crate::store::objects::snapshot::gitlink_above(&tree, rel))
    }

    /// The content and executable bit of `path` in `commit`, if it is a file or symlink there.
    pub fn blob_at(
        &self,
        commit: ObjectId,
        path: &str,
    ) -> Result<Option<(Vec<u8>, bool)>, StoreError> {
        let tree = self.repo.find_commit(commit)?.tree()?;
        let Some(entry) = tree.lookup_entry_by_path(path)? else {
            return Ok(None);
        };
        if !entry.mode().is_blob_or_symlink() {
            return Ok(None);
        }
        let executable = entry.mode().is_executable();
        let blob = self.repo.find_object(entry.object_id())?;
        Ok(Some((blob.data.clone(), executable)))
    }
}

fn parse_id(hex: &str) -> Result<ObjectId, StoreError> {
    ObjectId::from_hex(hex.as_bytes()).map_err(|_| StoreError::BadId {
        what: "object id",
        id: hex.to_owned(),
        record: "the session log",
    })
}
