//! Trees to judge, for `git agent fix` and the hooks: the staged tree (the index) as a tree object, a commit
//! named on the command line, and throwaway checkouts of a commit for a check to run in.
//!
//! A pre-commit check must judge what is about to be committed, not the working tree: unstaged edits (a
//! half-done change, a debugging print) must neither fail nor pass it. So the staged tree is written from a
//! copy of the index (`git write-tree` would otherwise refresh the user's index, or the one `git commit`
//! holds locked), and the check runs in a [`Scratch`] checkout of it: a linked worktree under
//! `<common git dir>/agent/scratch/<pid>-<n>`, taken from the worktree pool when one is there and put back
//! cleaned afterwards, so a repeated check rewrites only what changed. A process killed mid-check leaves its
//! scratch checkout behind; the next one removes those whose process is gone.
//!
//! The staged tree also becomes a session's step 0 (`StartFrom::Tree`), screened by the withholding policy as
//! the work-tree capture is: a staged `.env` does not enter the agent's refs.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use gix::bstr::ByteSlice;

use crate::safety::redact;
use crate::safety::withhold;
use crate::store::objects::snapshot::{with_trailers, write_commit};
use crate::store::repo::{Store, StoreError};
use gix::ObjectId;

/// A checkout of one commit for a check to run in; removed, or returned to the pool, when dropped.
pub struct Scratch {
    store: Store,
    root: PathBuf,
    commit: ObjectId,
    /// How many checkouts the pool may keep (`worktree_pool`).
    keep: usize,
}

impl Scratch {
    /// The checkout's top directory.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Best effort: a leftover is removed by the next scratch checkout (its process is gone then).
        let _ = self.store.pool_return(&self.root, self.commit, self.keep);
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Store {
    /// The tree the index at `index` describes (default: this work tree's own index), written to the object
    /// database from a copy of it, so the index itself is neither refreshed nor locked. Fails, naming them,
    /// when the index has unmerged entries.
    pub fn index_tree(&self, index: Option<&Path>) -> Result<ObjectId, StoreError> {
        let source = match index {
            Some(path) => path.to_path_buf(),
            None => self.repo.index_path(),
        };
        let tmp = self.common_dir().join("agent").join("tmp");
        std::fs::create_dir_all(&tmp).map_err(StoreError::io("create", &tmp))?;
        let copy = tmp.join(format!("index-{}-{}", std::process::id(), next()));
        let _remove = RemoveOnDrop(&copy);
        match std::fs::copy(&source, &copy) {
            Ok(_) => {}
            // No index yet (nothing was ever staged): the empty tree, as `git write-tree` says.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(StoreError::io("copy", &source)(err)),
        }
        let out = self
            .git_with_index(
                self.workdir(),
                &[std::ffi::OsStr::new("write-tree")],
                Some(&copy),
            )
            .map_err(|err| match err {
                StoreError::GitCommand { stderr, .. } if stderr.contains("unmerged") => {
                    StoreError::UnmergedIndex
                }
                err => err,
            })?;
        parse_hex(&out, "write-tree")
    }

    /// True when the index at `index` (default: this work tree's own) is this work tree's own index and the
    /// work tree holds exactly what it says, nothing untracked beside it: a check of the staged tree may then
    /// run in the work tree itself, with its ignored build state (`target/`, `node_modules`), and no scratch
    /// checkout is made. Another index (`git commit -a` or `git commit <paths>` give the hook a temporary
    /// one) is never the work tree's.
    pub fn index_is_worktree(&self, index: Option<&Path>) -> Result<bool, StoreError> {
        if let Some(index) = index {
            let own = self.repo.index_path();
            let same = match (index.canonicalize(), own.canonicalize()) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            };
            if !same {
                return Ok(false);
            }
        }
        super::status::worktree_matches_index(&self.repo)
    }

    /// The tree of commit `commit`.
    pub fn tree_of(&self, commit: ObjectId) -> Result<ObjectId, StoreError> {
        Ok(self.repo.find_commit(commit)?.tree_id()?.detach())
    }

    /// `tree` as a commit on top of HEAD (or a root commit), referenced by nothing: what a scratch checkout
    /// of the staged tree is made from. `git gc` removes it in time.
    pub fn tree_commit(&self, tree: ObjectId) -> Result<ObjectId, StoreError> {
        let head = self.head_commit_if_any()?;
        write_commit(
            &self.repo,
            tree,
            head,
            "git-agent: the staged tree, for a check\n",
        )
    }

    /// The commit `rev` names (`HEAD~2`, a branch, an id), as `git rev-parse` resolves it.
    pub fn resolve_commit(&self, rev: &str) -> Result<ObjectId, StoreError> {
        let spec = format!("{rev}^{{commit}}");
        let out = self
            .git_output(&[
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &spec,
            ])
            .map_err(|_| StoreError::NotACommit(rev.to_owned()))?;
        parse_hex(&out, "rev-parse")
    }

    /// A checkout of `commit` to run a check in (see the module docs); `keep` is the pool's size.
    pub fn scratch_checkout(&self, commit: ObjectId, keep: usize) -> Result<Scratch, StoreError> {
        let dir = self.common_dir().join("agent").join("scratch");
        self.remove_stale_scratch(&dir);
        let root = dir.join(format!("{}-{}", std::process::id(), next()));
        std::fs::create_dir_all(&dir).map_err(StoreError::io("create", &dir))?;
        let progress = super::Progress::default();
        if !self.pool_take(&root, commit, &progress)? {
            self.add_checkout(&root, commit, &progress)?;
        }
        Ok(Scratch {
            store: self.clone(),
            root,
            commit,
            keep,
        })
    }

    /// Removes the scratch checkouts of processes that are gone (killed mid-check).
    fn remove_stale_scratch(&self, dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let pid = name
                .to_str()
                .and_then(|n| n.split('-').next())
                .and_then(|p| p.parse::<u32>().ok());
            let gone = pid.is_some_and(|pid| !crate::sys::process::process_exists(pid));
            if gone {
                // Best effort: the next one tries again.
                let _ = self.remove_checkout(&entry.path());
            }
        }
    }

    /// Step 0 of a session started from `tree` (the staged tree) on `head`: `tree` screened by the
    /// withholding policy (a withheld path keeps HEAD's version), committed with the session's trailers.
    /// `None` when it equals HEAD's tree.
    pub(in crate::store) fn tree_step0(
        &self,
        id: &str,
        tree: ObjectId,
        head: Option<ObjectId>,
    ) -> Result<Option<ObjectId>, StoreError> {
        let base = match head {
            Some(head) => self.tree_of(head)?,
            None => ObjectId::empty_tree(self.repo.object_hash()),
        };
        let tree = if tree == base {
            tree
        } else {
            self.screen_tree(base, tree)?
        };
        if tree == base && head.is_some() {
            return Ok(None);
        }
        let message = with_trailers(
            &crate::store::repo::sanitize("Capture staged changes (the index)"),
            id,
            0,
        );
        write_commit(&self.repo, tree, head, &message).map(Some)
    }

    /// `tree` with the files the withholding policy keeps out of git (environment and key files, known
    /// secret values, new secret-format strings) set back to what `base` has (or removed).
    fn screen_tree(&self, base: ObjectId, tree: ObjectId) -> Result<ObjectId, StoreError> {
        use gix::object::tree::diff::ChangeDetached;
        let old = self.repo.find_tree(base)?;
        let new = self.repo.find_tree(tree)?;
        let mut options = gix::diff::Options::default().with_rewrites(None);
        options.track_path();
        let mut candidates = Vec::new();
        for change in self.repo.diff_tree_to_tree(&old, &new, options)? {
            match change {
                ChangeDetached::Addition {
                    location,
                    entry_mode,
                    id,
                    ..
                }
                | ChangeDetached::Modification {
                    location,
                    entry_mode,
                    id,
                    ..
                } if entry_mode.is_blob() => candidates.push((location, id)),
                _ => {}
            }
        }
        let mut withheld = Vec::new();
        redact::with_global(|redactor| {
            for (location, id) in &candidates {
                let rel = crate::store::repo::as_path(location.as_ref());
                let data = self.repo.find_object(*id)?.detach().data;
                let previous = || {
                    let entry = old.lookup_entry_by_path(rel).ok()??;
                    Some(entry.object().ok()?.detach().data)
                };
                if withhold::decide(redactor, rel, &data, previous).is_some() {
                    withheld.push(location.clone());
                }
            }
            Ok::<_, StoreError>(())
        })?;
        if withheld.is_empty() {
            return Ok(tree);
        }
        let mut editor = new.edit()?;
        for location in withheld {
            let path = location.as_bstr();
            match old.lookup_entry_by_path(crate::store::repo::as_path(path))? {
                Some(entry) => {
                    let kind = entry.mode().kind();
                    editor.upsert(path, kind, entry.object_id())?;
                }
                None => {
                    editor.remove(path)?;
                }
            }
        }
        Ok(editor.write()?.detach())
    }
}

/// A number unique in this process, for scratch names.
fn next() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn parse_hex(out: &[u8], what: &str) -> Result<ObjectId, StoreError> {
    let text = String::from_utf8_lossy(out);
    ObjectId::from_hex(text.trim().as_bytes()).map_err(|_| StoreError::GitCommand {
        args: what.into(),
        stderr: format!("unexpected output {:?}", text.trim()),
    })
}

/// Removes a temporary file when the scope ends.
struct RemoveOnDrop<'a>(&'a Path);

impl Drop for RemoveOnDrop<'_> {
    fn drop(&mut self) {
        // Best effort: a scratch copy of the index under agent/tmp.
        let _ = std::fs::remove_file(self.0);
    }
}
