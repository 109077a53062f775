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
//!
//! The working tree is not always what should be committed: a file the agent changed may also hold the
//! user's own uncommitted lines, which `accept --commit` must not put under the agent's trailers. So the
//! squash commit is built from given versions ([`Store::commit_versions()`]: the session's change merged
//! three-way onto HEAD's version), and only `--series`, which refuses while touched files have uncommitted
//! changes, commits working-tree files ([`Store::commit_paths()`]).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::Side;
use crate::store::repo::{Store, StoreError};
use gix::ObjectId;

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
    /// [`StoreError::CommitRefused`] or [`StoreError::IndexNotUpdated`] saying what happened when git or a hook refuses; the user's index is then as
    /// it was.
    pub fn commit_paths(&self, paths: &[&str], message: &str) -> Result<Committed, StoreError> {
        if paths.is_empty() {
            return Ok(Committed::Nothing);
        }
        let (index, head) = self.index_at_head()?;
        let mut add = vec!["--literal-pathspecs", "add", "-A", "-f", "--"];
        add.extend_from_slice(paths);
        self.git_index(&index.0, &add)?;
        self.commit_index(&index, head, paths, message)
    }

    /// Commits the given versions of some paths (files, symbolic links, or [`Side::Missing`] for a deletion)
    /// on top of HEAD, whatever the working tree holds: `accept --commit` commits the session's change
    /// applied to HEAD this way, so the user's uncommitted lines in the same files stay uncommitted. As
    /// [`Store::commit_paths()`] otherwise (hooks, temporary index, the user's index as it was on refusal).
    pub fn commit_versions(
        &self,
        files: &[(&str, Side)],
        message: &str,
    ) -> Result<Committed, StoreError> {
        if files.is_empty() {
            return Ok(Committed::Nothing);
        }
        let (index, head) = self.index_at_head()?;
        let mut info = Vec::new();
        for (path, side) in files {
            let (mode, id) = match side {
                Side::File { data, executable } => {
                    let mode = if *executable { "100755" } else { "100644" };
                    (mode, self.repo.write_blob(data)?.detach())
                }
                Side::Symlink { target } => ("120000", self.repo.write_blob(target)?.detach()),
                Side::Missing => ("0", ObjectId::null(self.repo.object_hash())),
                // The planner's results for a commit are files, links and deletions; anything else is refused.
                Side::Submodule | Side::Other => {
                    return Err(StoreError::NotFileOrLink {
                        path: (*path).to_owned(),
                        verb: "committed",
                    })
                }
            };
            info.extend_from_slice(format!("{mode} {id}\t{path}").as_bytes());
            info.push(0);
        }
        self.update_index_info(&index.0, &info)?;
        let paths: Vec<&str> = files.iter().map(|(path, _)| *path).collect();
        self.commit_index(&index, head, &paths, message)
    }

    /// A temporary index holding HEAD's tree (empty on an unborn branch), and HEAD.
    fn index_at_head(&self) -> Result<(TempIndex, Option<ObjectId>), StoreError> {
        let index = self.temp_index()?;
        let head = self.head_commit_if_any()?;
        match head {
            Some(head) => self.git_index(&index.0, &["read-tree", &head.to_string()])?,
            None => self.git_index(&index.0, &["read-tree", "--empty"])?,
        };
        Ok((index, head))
    }

    /// `git update-index -z --index-info` on the temporary `index`, `info` on its stdin.
    fn update_index_info(&self, index: &Path, info: &[u8]) -> Result<(), StoreError> {
        use std::io::Write;
        let mut child = crate::store::objects::git::command(self.workdir())
            .args(["update-index", "-z", "--index-info"])
            .env("GIT_INDEX_FILE", index)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(StoreError::GitMissing)?;
        let written = child.stdin.take().map(|mut stdin| stdin.write_all(info));
        let out = child.wait_with_output().map_err(StoreError::GitMissing)?;
        if !out.status.success() || !matches!(written, Some(Ok(()))) {
            return Err(StoreError::GitCommand {
                args: "update-index -z --index-info".into(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(())
    }

    /// Commits the temporary `index` on HEAD (nothing when it has HEAD's tree), then sets the user's index
    /// entries of `paths` to the new commit.
    fn commit_index(
        &self,
        index: &TempIndex,
        head: Option<ObjectId>,
        paths: &[&str],
        message: &str,
    ) -> Result<Committed, StoreError> {
        let mut diff = vec!["diff", "--cached", "--quiet"];
        let head_hex = head.map(|h| h.to_string());
        if let Some(head) = &head_hex {
            diff.push(head);
        }
        let unchanged = crate::store::objects::git::command(self.workdir())
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
        let status = crate::store::objects::git::command(self.workdir())
            .args(["commit", "-q", "--cleanup=whitespace", "-m", message])
            .env("GIT_INDEX_FILE", &index.0)
            .status()
            .map_err(StoreError::GitMissing)?;
        if !status.success() {
            return Err(StoreError::CommitRefused);
        }
        let commit = self.head_commit()?;
        let mut reset = vec!["--literal-pathspecs", "reset", "-q", "--"];
        reset.extend_from_slice(paths);
        let args: Vec<&std::ffi::OsStr> = reset.iter().map(std::ffi::OsStr::new).collect();
        self.git(self.workdir(), &args)
            .map_err(|source| StoreError::IndexNotUpdated {
                commit,
                source: Box::new(source),
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
