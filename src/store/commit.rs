//! Committing landed paths on the user's branch with `git commit`, so the user's hooks run, without ever
//! leaving the user's index half-changed.
//!
//! `git add <paths> && git commit -- <paths>` staged into the user's index first: a pre-commit hook that
//! refused the commit left the accepted files staged, the user's unstaged edits in them included (issue 17,
//! defect 14). Here the commit is built in a temporary index: HEAD's tree, plus the paths as they are in the
//! working tree, committed with `GIT_INDEX_FILE` pointing at it (git exports it to the hooks, so they check
//! exactly what is committed). Only after the commit exists are the user's index entries of those paths set to
//! the new HEAD (`git reset -- <paths>`), which is what a commit of them does to an index anyway; other staged
//! work stays staged. When a hook refuses, the user's index has not been touched.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{ObjectId, Store, StoreError};

/// What [`Store::commit_paths()`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Committed {
    /// The new commit on the current branch (or detached HEAD).
    Commit(ObjectId),
    /// The paths are in HEAD as they are: nothing to commit.
    Nothing,
}

/// A temporary index under `<git dir>/agent/tmp`, removed when dropped.
struct TempIndex(PathBuf);

impl Drop for TempIndex {
    fn drop(&mut self) {
        // Best effort: a scratch file of ours; a leftover is harmless and named by our pid.
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_file(self.0.with_extension("lock"));
    }
}

impl Store {
    /// Commits `paths` (repository-relative) as they are in the working tree on top of HEAD with `message`,
    /// through `git commit` with the user's stdio (hooks run and speak); see the module docs. Fails with
    /// [`StoreError::Refused`] naming what happened when git or a hook refuses; the user's index is then as
    /// it was.
    pub fn commit_paths(&self, paths: &[&str], message: &str) -> Result<Committed, StoreError> {
        if paths.is_empty() {
            return Ok(Committed::Nothing);
        }
        let index = self.temp_index()?;
        let head = self.head_commit_if_any()?;
        match head {
            Some(head) => self.git_index(&index.0, &["read-tree", &head.to_string()])?,
            None => self.git_index(&index.0, &["read-tree", "--empty"])?,
        };
        let mut add = vec!["--literal-pathspecs", "add", "-A", "-f", "--"];
        add.extend_from_slice(paths);
        self.git_index(&index.0, &add)?;
        let mut diff = vec!["diff", "--cached", "--quiet"];
        let head_hex = head.map(|h| h.to_string());
        if let Some(head) = &head_hex {
            diff.push(head);
        }
        let unchanged = super::git::command(self.workdir())
            .args(&diff)
            .env("GIT_INDEX_FILE", &index.0)
            .stdin(Stdio::null())
            .status()
            .map_err(StoreError::GitMissing)?
            .success();
        if unchanged {
            return Ok(Committed::Nothing);
        }
        // `--cleanup=whitespace`: a model's reason may have lines starting with '#' (Markdown headings),
        // which the default cleanup would drop from the message.
        let status = super::git::command(self.workdir())
            .args(["commit", "-q", "--cleanup=whitespace", "-m", message])
            .env("GIT_INDEX_FILE", &index.0)
            .status()
            .map_err(StoreError::GitMissing)?;
        if !status.success() {
            return Err(StoreError::Refused(
                "`git commit` failed (a hook refused it, or git did: see above)".into(),
            ));
        }
        let commit = self.head_commit()?;
        let mut reset = vec!["--literal-pathspecs", "reset", "-q", "--"];
        reset.extend_from_slice(paths);
        let args: Vec<&std::ffi::OsStr> = reset.iter().map(std::ffi::OsStr::new).collect();
        self.git(self.workdir(), &args).map_err(|e| {
            StoreError::Refused(format!(
                "committed {commit}, but your index could not be updated for the committed files ({e}): \
                 run `git reset -- <files>`"
            ))
        })?;
        Ok(Committed::Commit(commit))
    }

    /// The paths among `paths` that differ from HEAD in the index or the working tree (untracked ones
    /// included): uncommitted work of the user's.
    pub fn uncommitted(&self, paths: &[&str]) -> Result<Vec<String>, StoreError> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let mut args = vec![
            "--literal-pathspecs",
            "--no-optional-locks",
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--no-renames",
            "--",
        ];
        args.extend_from_slice(paths);
        let out = self.git_output(&args)?;
        Ok(out
            .split(|b| *b == 0)
            .filter(|entry| entry.len() > 3)
            .map(|entry| String::from_utf8_lossy(&entry[3..]).into_owned())
            .collect())
    }

    /// The step commits of a session's branch from `from` (exclusive) to `tip`, oldest first, along first
    /// parents.
    pub fn step_commits(&self, from: ObjectId, tip: ObjectId) -> Result<Vec<ObjectId>, StoreError> {
        let range = format!("{from}..{tip}");
        let out = self.git_output(&["rev-list", "--reverse", "--first-parent", &range])?;
        String::from_utf8_lossy(&out)
            .lines()
            .map(|line| {
                ObjectId::from_hex(line.trim().as_bytes()).map_err(|_| StoreError::GitCommand {
                    args: format!("rev-list {range}"),
                    stderr: format!("unexpected output line {line:?}"),
                })
            })
            .collect()
    }

    /// The highest `Agent-Step` of session `id` already committed on the user's branch since `since` (the
    /// session's base) by `accept --commit --series`; 0 when none is.
    pub fn landed_steps(&self, id: &str, since: ObjectId) -> Result<u32, StoreError> {
        let range = format!("{since}..HEAD");
        let format = "--format=%(trailers:key=Agent-Session,valueonly,separator=%x2C)%x1f\
                      %(trailers:key=Agent-Step,valueonly,separator=%x2C)%x1e";
        let out = self.git_output(&["log", format, &range])?;
        Ok(String::from_utf8_lossy(&out)
            .split('\x1e')
            .filter_map(|entry| {
                let (session, step) = entry.trim().split_once('\x1f')?;
                (session.trim() == id).then(|| step.trim().parse::<u32>().ok())?
            })
            .max()
            .unwrap_or(0))
    }

    fn temp_index(&self) -> Result<TempIndex, StoreError> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = self.repo.git_dir().join("agent").join("tmp");
        std::fs::create_dir_all(&dir).map_err(StoreError::io("create", &dir))?;
        let dir = std::fs::canonicalize(&dir).map_err(StoreError::io("resolve", &dir))?;
        let name = format!(
            "index-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        Ok(TempIndex(dir.join(name)))
    }

    /// Runs git with `GIT_INDEX_FILE=index` in the work tree, output captured.
    fn git_index(&self, index: &Path, args: &[&str]) -> Result<Vec<u8>, StoreError> {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
        self.git_with_index(self.workdir(), &args, Some(index))
    }
}
