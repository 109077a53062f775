//! A session after its first run: reopening it (resume), moving its branch back (undo), removing it (discard),
//! and keeping its checkout's files equal to what the branch says.
//!
//! The checkout's HEAD stays detached at the session's start commit and its index is never written (see the
//! module docs of `store`), so syncing the checkout means rewriting the files that differ between two commits,
//! and only those: `git restore --worktree --source=<commit>` writes them through the repository's smudge
//! filters without touching any index, and files the target lacks are removed.

use std::ffi::OsStr;
use std::path::Path;

use gix::refs::transaction::{PreviousValue, RefEdit};

use super::snapshot::{cas_branch, edit_ref, full_name};
use super::{branch_name, Checkout, Meta, ObjectId, Session, Store, StoreError};

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
        let tip = self.branch_tip(&branch)?.ok_or_else(|| {
            StoreError::Refused(format!(
                "session {} was discarded (agent/{} is gone): start a new session",
                meta.id, meta.id
            ))
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
        // The user's work tree (`--here`) is never recreated: it is theirs, and it is there.
        if let Checkout::Linked(root) = &session.checkout {
            if !root.join(".git").exists() {
                self.recreate_checkout(&session, root)?;
            }
        }
        Ok(session)
    }

    /// Where session `meta` works: the user's work tree for a `--here` session, else its linked checkout.
    pub fn checkout_of(&self, meta: &Meta) -> Checkout {
        if meta.here {
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
        Ok(message
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("Agent-Step: "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0))
    }

    /// A new checkout for a session whose checkout was removed: detached at the start commit, files at the tip.
    fn recreate_checkout(&self, s: &Session, root: &Path) -> Result<(), StoreError> {
        // Forget a worktree whose directory was deleted by hand, or `worktree add` refuses the path.
        self.git(
            self.workdir(),
            &[OsStr::new("worktree"), OsStr::new("prune")],
        )?;
        let start = s.step0.unwrap_or(s.base).to_string();
        let args = [
            OsStr::new("-c"),
            OsStr::new("core.hooksPath=/dev/null"),
            OsStr::new("worktree"),
            OsStr::new("add"),
            OsStr::new("--detach"),
            OsStr::new("--quiet"),
            root.as_os_str(),
            OsStr::new(&start),
        ];
        self.git(self.workdir(), &args)?;
        self.sync_checkout(root, s.step0.unwrap_or(s.base), s.tip)
    }

    /// Paths that differ between commits `from` and `to` (no rename detection).
    pub fn changes(&self, from: ObjectId, to: ObjectId) -> Result<Vec<Change>, StoreError> {
        let (from, to) = (from.to_string(), to.to_string());
        let out = self.git(
            self.workdir(),
            &[
                "diff",
                "--name-status",
                "-z",
                "--no-renames",
                "--no-ext-diff",
                &from,
                &to,
            ]
            .map(OsStr::new),
        )?;
        let mut fields = out.split(|b| *b == 0).filter(|f| !f.is_empty());
        let mut changes = Vec::new();
        while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
            changes.push(Change {
                status: status.first().map_or('M', |b| *b as char),
                path: String::from_utf8_lossy(path).into_owned(),
            });
        }
        Ok(changes)
    }

    /// Makes the files of checkout `root` that differ between `from` and `to` what `to` says.
    pub fn sync_checkout(
        &self,
        root: &Path,
        from: ObjectId,
        to: ObjectId,
    ) -> Result<(), StoreError> {
        self.sync_files(root, from, to, None)
    }

    /// [`Store::sync_checkout()`], with `git restore` reading and writing `index` instead of the work tree's own.
    fn sync_files(
        &self,
        root: &Path,
        from: ObjectId,
        to: ObjectId,
        index: Option<&Path>,
    ) -> Result<(), StoreError> {
        let changes = self.changes(from, to)?;
        let mut restore: Vec<&OsStr> = [
            "--literal-pathspecs",
            "restore",
            "--worktree",
            "--no-overlay",
        ]
        .map(OsStr::new)
        .to_vec();
        let source = format!("--source={to}");
        restore.push(OsStr::new(&source));
        restore.push(OsStr::new("--"));
        let before = restore.len();
        for change in &changes {
            if change.status == 'D' {
                let full = root.join(&change.path);
                match std::fs::remove_file(&full) {
                    Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                        return Err(StoreError::io("remove", full)(err))
                    }
                    _ => remove_empty_parents(root, &full),
                }
            } else {
                restore.push(OsStr::new(&change.path));
            }
        }
        if restore.len() > before {
            self.git_with_index(root, &restore, index)?;
        }
        Ok(())
    }

    /// Moves the session's branch back `n` steps (compare-and-swap) and makes its checkout follow. Returns the
    /// tip it moved away from (for redo). Step 0, the user's captured changes, cannot be undone.
    ///
    /// In the user's work tree (`--here`) the files are restored only if each still holds what the undone
    /// steps left there: a later edit of the user's is never overwritten; the undo is refused, naming the
    /// files, and nothing moves.
    pub fn undo(&self, s: &mut Session, n: u32) -> Result<ObjectId, StoreError> {
        if n == 0 || n > s.steps {
            let hint = if s.steps == 0 {
                "it has no steps to undo".to_owned()
            } else {
                format!(
                    "it has {} step{} to undo",
                    s.steps,
                    if s.steps == 1 { "" } else { "s" }
                )
            };
            return Err(StoreError::Refused(format!(
                "cannot undo {n} step{} of session {}: {hint} (step 0, your own captured changes, stays)",
                if n == 1 { "" } else { "s" },
                s.id
            )));
        }
        let mut target = s.tip;
        for _ in 0..n {
            let commit = self.repo.find_commit(target)?;
            target = commit
                .parent_ids()
                .next()
                .map(|id| id.detach())
                .ok_or_else(|| StoreError::Refused(format!("{target} has no parent to undo to")))?;
        }
        let old = s.tip;
        if let Checkout::Here(root) = &s.checkout {
            let edited = self.edited_since(root, target, old)?;
            if !edited.is_empty() {
                return Err(StoreError::Refused(format!(
                    "cannot undo: {} changed in your working tree since the agent's step (undo would overwrite your edit); \
                     commit or restore {} first, or undo by hand with `git diff {} {}`",
                    edited.join(", "),
                    if edited.len() == 1 { "it" } else { "them" },
                    old.to_hex_with_len(7),
                    target.to_hex_with_len(7),
                )));
            }
        }
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
            Checkout::Here(root) => {
                // `git restore` rewrites the index it reads; give it a private one so the user's stays as is.
                let index = self
                    .common_dir()
                    .join("agent")
                    .join(format!("undo-index-{}", s.id));
                let synced = self.sync_files(root, old, target, Some(&index));
                let _ = std::fs::remove_file(&index);
                synced?
            }
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

    /// Removes session `meta`'s linked checkout and its branch (wherever the branch points). A `--here`
    /// session has no checkout of its own: only its branch goes, the user's work tree stays as it is. The
    /// session log stays. Returns where the branch pointed, if it existed.
    pub fn discard(&self, meta: &Meta) -> Result<Option<ObjectId>, StoreError> {
        match self.checkout_of(meta) {
            Checkout::Linked(root) => self.remove_checkout(&root)?,
            Checkout::Here(_) => {}
        }
        let branch = branch_name(&meta.id);
        let Some(tip) = self.branch_tip(&branch)? else {
            return Ok(None);
        };
        let edit = RefEdit::delete(
            full_name(&branch)?,
            PreviousValue::MustExistAndMatch(gix::refs::Target::Object(tip)),
        );
        edit_ref(&self.repo, edit)?;
        Ok(Some(tip))
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

/// Removes the now-empty directories between `file` and `root`, as git does when it deletes a file.
fn remove_empty_parents(root: &Path, file: &Path) {
    let mut dir = file.parent();
    while let Some(d) = dir {
        if d == root || !d.starts_with(root) || std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

fn parse_id(hex: &str) -> Result<ObjectId, StoreError> {
    ObjectId::from_hex(hex.as_bytes())
        .map_err(|_| StoreError::Refused(format!("bad object id {hex:?} in the session log")))
}
