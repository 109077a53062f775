//! Everything git-agent keeps in git: session branches, their checkouts and the step commits on them.
//!
//! The user's index, working tree and branches are never written. A session gets a branch
//! `refs/heads/agent/<id>` and a linked worktree (the *checkout*) under `<common git dir>/agent/worktrees/<id>`;
//! every step that changes files becomes one commit on that branch, made from a tree edit of the previous tip
//! (no index, no hooks), and the branch only ever moves by compare-and-swap so that two agents in one repo
//! cannot corrupt each other.
//!
//! The checkout's own HEAD stays detached at the session's start commit and its index is never touched. That is
//! deliberate: `git diff` / `git status` run by the model inside the checkout then show everything the session
//! changed so far, and we never have to rewrite (or race with the model on) the checkout's index.
//!
//! The store is the one choke point for what enters git: file contents pass the withholding policy
//! ([`crate::safety::withhold`]) in [`Store::capture_user_changes()`] and [`Store::commit_step()`], text for
//! notes and session logs passes [`sanitize()`].
//!
//! Everything on the hot path happens in-process with gix, with no git subprocess: step 0's status and capture
//! (`status`, `snapshot`), the linked worktree's registration and checkout (`checkout`, through the same
//! smudge filters and `.gitattributes` rules as `git worktree add`), the pool of reusable checkouts (`pool`)
//! and every step commit. The git CLI is used only off that path, where git itself is the reference: `git
//! hash-object` for `--here` undo's edit check, `git rev-list --objects` (what a push would send), and the
//! command line's push, pull and diff. Every git process of git-agent is started through [`git`], which
//! removes the variables that would redirect it.
//!
//! Facts only this repository may know (is a session `--here`, was it started here) live under
//! `<common git dir>/agent/local`, never in a ref (`local`).
//!
//! The core is `repo` (the repository handle, a session as plain data, the choke points) and `error`; the
//! parts, a folder each: [`objects`] (git, trees and commits, the one ref transaction, notes), [`checkout`] (session checkouts, their pool, and finding what changed in them), [`land`] (a change
//! into the user's tree, index or branch, and its review), [`session`] (a session's log, its local record, its
//! life after the start) and [`remote`] (push and pull); [`memory`], [`skills`] and [`fleet`] keep their own
//! refs.

mod checkout;
mod deflate;
mod error;
pub mod excludes;
pub mod fleet;
pub mod ignore_files;
pub(crate) mod land;
pub mod memory;
mod objects;
mod pack;
mod remote;
mod repo;
mod session;
pub(crate) mod skills;
#[cfg(test)]
mod test_repo;
#[cfg(test)]
mod tests;

// The callers' paths from before the store had folders (issue 24, item 5).
pub(crate) use land::{commit, hunks, record as land_record, review};
pub(crate) use objects::git;
pub(crate) use remote::share;
pub(crate) use session::log as session_log;

use crate::sys::timings::Detail;
use std::path::{Path, PathBuf};

pub use checkout::changes::{ChangeTracker, Detection};
pub use checkout::pool::DEFAULT_POOL;
pub use checkout::scan::Scan;
pub use checkout::Progress;
pub use gix::ObjectId;
pub use objects::notes::NOTES_REF;
pub use objects::snapshot::Capture;
pub(crate) use repo::branch_name;
use repo::open_from_environment;
pub use repo::{sanitize, sanitize_record, Checkout, Session, Store, StoreError, StoreForThread};
pub use session::log::{is_zero, LogContents, Meta, SessionLog};

impl Store {
    /// Discover the repository containing `cwd`, or open the one `GIT_DIR` and `GIT_WORK_TREE` name (as git
    /// does: `git --git-dir=R/.git --work-tree=R agent ask` from anywhere, or a hook); fail if there is none
    /// or if it is bare.
    pub fn open(cwd: &Path) -> Result<Store, StoreError> {
        let (mut repo, from_environment) =
            match std::env::var_os("GIT_DIR").filter(|d| !d.is_empty()) {
                Some(git_dir) => (open_from_environment(cwd, Path::new(&git_dir))?, true),
                None => {
                    let options = pack::discover_options();
                    let found =
                        gix::ThreadSafeRepository::discover_opts(cwd, Default::default(), options);
                    (found.map_err(StoreError::NotARepo)?.into(), false)
                }
            };
        let Some(workdir) = repo.workdir() else {
            return Err(StoreError::Bare(repo.git_dir().to_path_buf()));
        };
        // Absolute, symlink-free paths: they end up in `git worktree` bookkeeping and in `Session::root`.
        let workdir = std::fs::canonicalize(workdir).map_err(StoreError::io("resolve", workdir))?;
        let common_dir = std::fs::canonicalize(repo.common_dir())
            .map_err(StoreError::io("resolve", repo.common_dir()))?;
        let detached_git_dir = if from_environment {
            let git_dir = std::fs::canonicalize(repo.git_dir())
                .map_err(StoreError::io("resolve", repo.git_dir()))?;
            // Where git itself would look from the work tree: `.git` there, a dir or a gitfile.
            let found = gix::discover(&workdir)
                .ok()
                .and_then(|r| std::fs::canonicalize(r.git_dir()).ok());
            (found.as_ref() != Some(&git_dir)).then_some(git_dir)
        } else {
            None
        };
        pack::enable(&mut repo);
        Ok(Store {
            repo,
            workdir,
            common_dir,
            detached_git_dir,
        })
    }

    /// This store on its way to another thread, sharing its object database, config and refs there.
    /// Why not [`Store::open()`] on that thread: a second open reads the config files again, maps the pack
    /// indexes again, and makes another object-database slot map (about 70 KB of a session's peak memory).
    /// Objects held in memory are written first, as the other handle would not see them.
    pub fn for_thread(&self) -> Result<StoreForThread, StoreError> {
        pack::persist(&self.repo)?;
        Ok(StoreForThread {
            repo: self.repo.clone().into_sync(),
            workdir: self.workdir.clone(),
            common_dir: self.common_dir.clone(),
            detached_git_dir: self.detached_git_dir.clone(),
        })
    }

    /// The root of the user's work tree.
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// The git dir shared by all worktrees (`.git` of the main worktree).
    pub fn common_dir(&self) -> &Path {
        &self.common_dir
    }

    /// The underlying gix repository, for modules that store other things (session logs, notes, memory).
    pub fn repo(&self) -> &gix::Repository {
        &self.repo
    }

    /// Writes the objects this handle keeps in memory to the object store (as one pack), so that a git
    /// process, or another handle, can read them: callers that hand object ids to git by other ways than a
    /// ref edit or [`git`]'s store commands call it first.
    pub fn persist_objects(&self) -> Result<(), StoreError> {
        Ok(pack::persist(&self.repo)?)
    }

    /// Where the checkout of session `id` lives.
    pub fn checkout_path(&self, id: &str) -> PathBuf {
        self.common_dir.join("agent").join("worktrees").join(id)
    }

    /// A fresh session id for a session in its own checkout, claimed atomically (see
    /// [`Store::claim_session_id()`]).
    pub fn new_session_id(&self) -> Result<String, StoreError> {
        self.claim_session_id(false)
    }

    /// The commit HEAD points to, or [`StoreError::NoCommits`] in a repository without commits.
    pub fn head_commit(&self) -> Result<ObjectId, StoreError> {
        self.repo
            .head()?
            .id()
            .map(|id| id.detach())
            .ok_or(StoreError::NoCommits)
    }

    /// The file-system monitor hook (`core.fsmonitor`) the repository's own config names, which could have
    /// come with an unpacked archive and so runs only once trusted; `None` when there is none or the user's own
    /// config names it.
    pub fn repository_fsmonitor(&self) -> Option<String> {
        checkout::fsmonitor::repository_hook(&self.repo)
            .map(|hook| hook.to_string_lossy().into_owned())
    }

    /// The commit HEAD points to, or `None` when HEAD is unborn (a repository without commits).
    pub fn head_commit_if_any(&self) -> Result<Option<ObjectId>, StoreError> {
        Ok(self.repo.head()?.id().map(|id| id.detach()))
    }

    /// Start session `id`: optionally capture the user's uncommitted changes as step 0, create
    /// `refs/heads/agent/<id>` (it must not exist) and check it out, detached, in a new linked worktree.
    ///
    /// No hooks run. On failure nothing is left behind.
    pub fn start_session(&self, id: &str, capture: bool) -> Result<Session, StoreError> {
        let options = StartOptions {
            capture,
            ..StartOptions::default()
        };
        Ok(self.start(id, &options, &Progress::default())?.session)
    }

    /// Start session `id` in the user's own work tree (`--here`): the user's uncommitted changes are captured
    /// as step 0 (read only: nothing of the user's is written) and `refs/heads/agent/<id>` is created. No
    /// checkout is made; the user's HEAD, index and branches stay as they are.
    pub fn start_here(&self, id: &str) -> Result<Session, StoreError> {
        let options = StartOptions {
            here: true,
            ..StartOptions::default()
        };
        Ok(self.start(id, &options, &Progress::default())?.session)
    }

    /// Start session `id` (claimed with [`Store::claim_session_id()`]): step 0, the branch (it must not exist),
    /// and unless `here` the checkout, taken from the pool when one is there (moved to the new start by
    /// rewriting what differs) or else made afresh. `progress` counts the files written.
    ///
    /// No hooks run, no git process starts. On failure nothing is left behind.
    pub fn start(
        &self,
        id: &str,
        options: &StartOptions,
        progress: &Progress,
    ) -> Result<Started, StoreError> {
        let checkout = if options.here {
            Checkout::Here(self.workdir.clone())
        } else {
            Checkout::Linked(self.checkout_path(id))
        };
        let capturing = crate::sys::timings::begin();
        let (session, capture) = self.start_branch(id, options, checkout)?;
        let captured = Detail::Flag(session.step0.is_some());
        crate::sys::timings::end("step 0", capturing, &[("captured", captured)]);
        let mut reused = false;
        if let Checkout::Linked(root) = &session.checkout {
            let writing = crate::sys::timings::begin();
            let made = match self.pool_take(root, session.tip, progress) {
                Ok(true) => {
                    reused = true;
                    Ok(())
                }
                Ok(false) => self.add_checkout(root, session.tip, progress),
                Err(err) => Err(err),
            };
            if let Err(err) = made {
                let _ = self.delete_branch(&session.branch, session.tip);
                return Err(err);
            }
            crate::sys::timings::end("checkout", writing, &[("pooled", Detail::Flag(reused))]);
        }
        Ok(Started {
            session,
            skipped: capture.skipped,
            reused,
        })
    }

    /// Session `id` as it will be once [`Store::start()`] made it, as far as that is known before: its branch
    /// and checkout path, based on `base` with step 0 and the tip not known yet (`tip` is `base` until then).
    pub fn planned_session(&self, id: &str, here: bool, base: ObjectId) -> Session {
        Session {
            id: id.to_owned(),
            branch: branch_name(id),
            checkout: if here {
                Checkout::Here(self.workdir.clone())
            } else {
                Checkout::Linked(self.checkout_path(id))
            },
            base,
            step0: None,
            tip: base,
            steps: 0,
        }
    }

    /// The part of starting a session common to both kinds of checkout: validate `id`, capture, create the branch.
    fn start_branch(
        &self,
        id: &str,
        options: &StartOptions,
        checkout: Checkout,
    ) -> Result<(Session, Capture), StoreError> {
        let valid = id.len() <= 64
            && !id.is_empty()
            && !id.starts_with('-')
            && id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !valid {
            return Err(StoreError::InvalidSessionId(id.to_owned()));
        }
        let head = self.head_commit_if_any()?;
        let (base, step0, capture) = match options.from {
            StartFrom::WorkTree => {
                // Without commits there is no base but the capture of what the user has (always made then).
                let capture = if options.capture || options.here || head.is_none() {
                    self.capture_user_changes(
                        id,
                        options.max_capture_size,
                        options.repository_fsmonitor_trusted,
                    )?
                } else {
                    Capture::default()
                };
                (head, capture.commit, capture)
            }
            _ if options.here => return Err(StoreError::HereStartsFromWorkTree),
            StartFrom::Tree(tree) => (head, self.tree_step0(id, tree, head)?, Capture::default()),
            StartFrom::Commit(commit) => (Some(commit), None, Capture::default()),
        };
        let base = base.or(step0).ok_or(StoreError::NoCommits)?;
        let tip = step0.unwrap_or(base);
        let branch = branch_name(id);
        self.record_tips(id, None, tip)?;
        self.create_branch(&branch, tip, &format!("git-agent: start session {id}"))?;
        let session = Session {
            id: id.to_owned(),
            branch,
            checkout,
            base,
            step0,
            tip,
            steps: 0,
        };
        Ok((session, capture))
    }

    /// Undo [`Store::start_session()`] / [`Store::start_here()`]: remove a linked checkout (never the user's
    /// work tree), delete the branch (only if it still points at `s.tip`) and the local record. Used when a
    /// session fails before doing anything, so no partial refs remain.
    pub fn rollback_session(&self, s: &Session) -> Result<(), StoreError> {
        if let Checkout::Linked(root) = &s.checkout {
            self.remove_checkout(root)?;
        }
        self.delete_branch(&s.branch, s.tip)?;
        self.forget_local(&s.id)
    }

    /// Removes the linked checkout at `root` and git's registration of it, in-process. Refuses any path that
    /// is not a session checkout under `<common git dir>/agent/` (`worktrees/`, the pool, or a check's
    /// `scratch/`): a bug elsewhere
    /// must never turn into `rm -rf` of the user's work tree.
    pub(crate) fn remove_checkout(&self, root: &Path) -> Result<(), StoreError> {
        let agent = self.common_dir.join("agent");
        let inside = ["worktrees", "pool", "scratch"]
            .iter()
            .any(|dir| root.parent() == Some(agent.join(dir).as_path()))
            && !self.workdir.starts_with(root);
        if !inside {
            return Err(StoreError::NotACheckout {
                root: root.to_path_buf(),
                under: agent,
            });
        }
        let _lock = self.worktree_lock()?;
        let admin = self.admin_dir_of(root);
        if std::fs::symlink_metadata(root).is_ok() {
            std::fs::remove_dir_all(root).map_err(StoreError::io("remove", root))?;
        }
        if let Some(admin) = admin {
            std::fs::remove_dir_all(&admin).map_err(StoreError::io("remove", &admin))?;
        }
        // A registration whose checkout is gone (removed by hand, or half-made by a killed start).
        self.forget_missing_checkouts();
        Ok(())
    }

    /// The registration (`<common>/worktrees/<name>`) of the checkout at `root`: the one its `.git` file
    /// names, believed only if that registration's `gitdir` names `root` back. Both files were writable by
    /// the checkout's commands, so they are read bounded, never through a link or a FIFO, and a `.git`
    /// pointed at another registration (the user's own linked worktree's, another session's) gives `None`:
    /// nothing here then moves, resets or removes what that registration describes.
    pub(super) fn admin_dir_of(&self, root: &Path) -> Option<PathBuf> {
        let read = |path: &Path| {
            let bytes = crate::sys::fs::read_regular(path, 4096).ok()?;
            String::from_utf8(bytes).ok()
        };
        let text = read(&root.join(".git"))?;
        let admin = PathBuf::from(text.strip_prefix("gitdir:")?.trim());
        let worktrees = self.common_dir.join("worktrees");
        if admin.parent() != Some(worktrees.as_path()) {
            return None;
        }
        let back = read(&admin.join("gitdir"))?;
        let dot_git = PathBuf::from(back.trim_end_matches(['\n', '\r']));
        same_dir(dot_git.parent()?, root).then_some(admin)
    }
}

/// Whether `a` and `b` are the same directory (device and inode, links followed).
fn same_dir(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.is_dir() && (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

/// How to start a session ([`Store::start()`]).
#[derive(Clone, Debug)]
pub struct StartOptions {
    /// Capture the user's uncommitted changes as step 0 (always done for `here` and without commits).
    pub capture: bool,
    /// Work in the user's own work tree: no checkout.
    pub here: bool,
    /// Files over this many bytes stay out of step 0.
    pub max_capture_size: u64,
    /// What the session starts from: the user's work tree (default), the staged tree, or a commit.
    pub from: StartFrom,
    /// Whether step 0 may run the file-system monitor hook the repository's own config names
    /// ([`Store::repository_fsmonitor()`]): the user trusted it. Off by default.
    pub repository_fsmonitor_trusted: bool,
}

/// What a new session starts from ([`StartOptions::from`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StartFrom {
    /// HEAD, with the user's uncommitted changes as step 0 (when `capture`).
    #[default]
    WorkTree,
    /// HEAD, with this tree as step 0: the staged tree ([`Store::index_tree()`]), so unstaged edits play no
    /// part (`git agent fix --staged`, the pre-commit hook).
    Tree(ObjectId),
    /// This commit as the base, nothing captured (`git agent fix --commit <rev>`, the pre-push hook).
    Commit(ObjectId),
}

impl StartFrom {
    /// The base of a session started from here while HEAD is at `head`.
    pub fn base(&self, head: ObjectId) -> ObjectId {
        match self {
            StartFrom::Commit(commit) => *commit,
            StartFrom::WorkTree | StartFrom::Tree(_) => head,
        }
    }
}

impl Default for StartOptions {
    fn default() -> Self {
        StartOptions {
            capture: true,
            here: false,
            max_capture_size: DEFAULT_MAX_CAPTURE_SIZE,
            from: StartFrom::WorkTree,
            repository_fsmonitor_trusted: false,
        }
    }
}

/// The default of `max_capture_size`: 50 MB.
pub const DEFAULT_MAX_CAPTURE_SIZE: u64 = 50 * 1000 * 1000;

/// What [`Store::start()`] made.
#[derive(Clone, Debug)]
pub struct Started {
    pub session: Session,
    /// Files left out of step 0 for their size (work-tree relative, with their size).
    pub skipped: Vec<(PathBuf, u64)>,
    /// The checkout came from the pool.
    pub reused: bool,
}
