//! The one way git-agent starts git, with one environment hygiene.
//!
//! git takes its repository, work tree, index and object store from the environment before it looks at the
//! directory it runs in, and git-agent is often started with those set: from a hook (git exports `GIT_DIR`,
//! and `GIT_INDEX_FILE` in a pre-commit hook), through `git --git-dir=… agent`, or by a script. A git process
//! started with them would work on whatever they name instead of the repository gix discovered: `git add -A`
//! run by the model in its checkout staged into the user's index. So every git process git-agent starts (the
//! store's own, the command line's push/pull/diff, and the commands the model runs, see
//! [`without_redirects()`]) goes without [`REDIRECTS`].

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::store::repo::{Store, StoreError};

/// Variables that point git at another repository, work tree, index, object store or ref namespace, or that
/// only mean something inside the git process that set them (`GIT_PREFIX` of an alias, the quarantine of a
/// receive hook). Removed from every child.
///
/// Kept on purpose: `GIT_CONFIG_*` and `GIT_CONFIG_PARAMETERS` (configuration, which the user or a test
/// harness chose: `git -c`, `GIT_CONFIG_GLOBAL=/dev/null`), `GIT_CEILING_DIRECTORIES` and
/// `GIT_DISCOVERY_ACROSS_FILESYSTEM` (they limit discovery, never redirect it), identities and dates
/// (`GIT_AUTHOR_*`, `GIT_COMMITTER_*`), `GIT_EXEC_PATH`, and the replace-object settings (gix reads those too).
pub const REDIRECTS: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_SHALLOW_FILE",
    "GIT_GRAFT_FILE",
    "GIT_QUARANTINE_PATH",
    "GIT_PREFIX",
];

/// Removes [`REDIRECTS`] from `cmd`'s environment, so a git it runs (itself, or one started by a shell
/// command) finds its repository from its directory, as gix did.
pub fn without_redirects(cmd: &mut Command) -> &mut Command {
    for name in REDIRECTS {
        cmd.env_remove(name);
    }
    cmd
}

/// `git` to run in `dir`, without [`REDIRECTS`]. Standard streams are the caller's choice; inherited (what
/// `status()` and `spawn()` use) they let pagers, colour, credential prompts and hooks behave as in git.
pub fn command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir);
    without_redirects(&mut cmd);
    cmd
}

impl Store {
    /// The best common ancestor of two commits, `None` for unrelated histories (two clones that started a
    /// ref independently). Git's own merge-base: gix's needs a feature that costs binary size for the two
    /// merged ref families (memory, skills) that use it.
    pub(in crate::store) fn merge_base(
        &self,
        one: gix::ObjectId,
        two: gix::ObjectId,
    ) -> Result<Option<gix::ObjectId>, StoreError> {
        let (a, b) = (one.to_string(), two.to_string());
        let args = ["merge-base", a.as_str(), b.as_str()].map(OsStr::new);
        match self.git(self.workdir(), &args) {
            Ok(out) => {
                let hex = String::from_utf8_lossy(&out).trim().to_owned();
                Ok(gix::ObjectId::from_hex(hex.as_bytes()).ok())
            }
            // Exit 1 without a word: no common ancestor.
            Err(StoreError::GitCommand { stderr, .. }) if stderr.trim().is_empty() => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Run git with `args` in `dir`, returning stdout; a failure carries git's stderr.
    pub(in crate::store) fn git(&self, dir: &Path, args: &[&OsStr]) -> Result<Vec<u8>, StoreError> {
        self.git_with_index(dir, args, None)
    }

    /// [`Store::git()`] with `GIT_INDEX_FILE` set to `index`, so a command that rewrites the index it reads
    /// cannot write the user's (used in the user's work tree, `--here`).
    pub(in crate::store) fn git_with_index(
        &self,
        dir: &Path,
        args: &[&OsStr],
        index: Option<&Path>,
    ) -> Result<Vec<u8>, StoreError> {
        let _lock = if args.contains(&OsStr::new("worktree")) {
            Some(self.worktree_lock()?)
        } else {
            None
        };
        let mut cmd = command(dir);
        cmd.args(args).stdin(Stdio::null());
        if let Some(git_dir) = self
            .detached_git_dir
            .as_ref()
            .filter(|_| dir == self.workdir)
        {
            cmd.env("GIT_DIR", git_dir)
                .env("GIT_WORK_TREE", &self.workdir);
        }
        if let Some(index) = index {
            cmd.env("GIT_INDEX_FILE", index);
        }
        let out = cmd.output().map_err(StoreError::GitMissing)?;
        if !out.status.success() {
            return Err(StoreError::GitCommand {
                args: args
                    .iter()
                    .map(|a| a.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(" "),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(out.stdout)
    }

    /// An exclusive lock held around every `git worktree` command of every session in this repository.
    ///
    /// `git worktree add` reads each `.git/worktrees/*/commondir`; a concurrent add that has made its directory
    /// but not yet written that file makes it fail ("failed to read .../commondir"), which broke 8 agents
    /// started at once. The lock is released when the file is closed, also when the process is killed.
    pub(in crate::store) fn worktree_lock(&self) -> Result<std::fs::File, StoreError> {
        let dir = self.common_dir.join("agent");
        std::fs::create_dir_all(&dir).map_err(StoreError::io("create", &dir))?;
        let path = dir.join("worktrees.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(StoreError::io("open", &path))?;
        // Blocks until no other session holds the lock.
        crate::sys::fs::lock(&file, crate::sys::fs::Lock::Exclusive)
            .map_err(StoreError::io("lock", &path))?;
        Ok(file)
    }
}
