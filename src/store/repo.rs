//! The store's core: the repository handle, a session as plain data, where its files live, and the choke points
//! every write goes through (redaction, the crash-test hook). Every other part of the store builds on these;
//! they name no other part but the store's error ([`super::error`]), re-exported here.

use std::path::{Path, PathBuf};

use gix::ObjectId;

pub use super::error::StoreError;

impl From<super::pack::PersistError> for StoreError {
    fn from(err: super::pack::PersistError) -> Self {
        StoreError::Io {
            action: "write a pack in",
            path: err.dir,
            source: err.source,
        }
    }
}

/// The repository `GIT_DIR` names (relative to `cwd`), with git's choice of work tree: `GIT_WORK_TREE`, else
/// `core.worktree`, else `cwd` itself (git's rule when only `GIT_DIR` is set; a hook runs at the top of the
/// work tree).
pub(super) fn open_from_environment(
    cwd: &Path,
    git_dir: &Path,
) -> Result<gix::Repository, StoreError> {
    let git_dir = cwd.join(git_dir);
    let mut repo =
        gix::open_opts(&git_dir, super::pack::open_options()).map_err(StoreError::NotARepo)?;
    let configured = repo
        .config_snapshot()
        .trusted_path("core.worktree")
        .ok()
        .flatten()
        .map(|p| git_dir.join(p));
    let workdir = match std::env::var_os("GIT_WORK_TREE").filter(|d| !d.is_empty()) {
        Some(dir) => Some(cwd.join(dir)),
        None if repo.config_snapshot().boolean("core.bare") == Some(true) => None,
        None => configured.or_else(|| Some(cwd.to_path_buf())),
    };
    repo.set_workdir(workdir.clone())
        .map_err(|_| StoreError::Io {
            action: "open the work tree",
            path: workdir.unwrap_or_default(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })?;
    Ok(repo)
}

/// Where a session's files live.
///
/// The distinction is a safety one: a linked checkout is the session's own and may be removed or recreated; the
/// user's work tree (`--here`) never is. Every code path that deletes a checkout matches on this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checkout {
    /// A linked worktree under `<common git dir>/agent/worktrees/<id>`, owned by the session.
    Linked(PathBuf),
    /// The user's own work tree (its top level): files change there, but it is never removed, and its HEAD,
    /// index and branches are never written.
    Here(PathBuf),
}

impl Checkout {
    /// The directory the agent works in.
    pub fn path(&self) -> &Path {
        match self {
            Checkout::Linked(p) | Checkout::Here(p) => p,
        }
    }

    /// True for `--here`.
    pub fn is_here(&self) -> bool {
        matches!(self, Checkout::Here(_))
    }
}

/// One agent session: its branch, its checkout and where the branch stands.
///
/// Plain data, so a resumed session can be rebuilt from its refs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// 6 lowercase hex chars, see [`Store::new_session_id()`].
    pub id: String,
    /// `refs/heads/agent/<id>`.
    pub branch: String,
    /// Where the agent works: its own linked worktree, or the user's work tree (`--here`).
    pub checkout: Checkout,
    /// The user's HEAD commit when the session started.
    pub base: ObjectId,
    /// The commit capturing the user's uncommitted changes (`Agent-Step: 0`), if there were any.
    pub step0: Option<ObjectId>,
    /// Where `branch` points: the last step commit, or `step0`, or `base`.
    pub tip: ObjectId,
    /// The number of step commits made after step 0.
    pub steps: u32,
}

impl Session {
    /// The directory the agent works in (the checkout's path).
    pub fn root(&self) -> &Path {
        self.checkout.path()
    }
}

/// The repository the user ran git-agent in.
pub struct Store {
    pub(super) repo: gix::Repository,
    pub(super) workdir: PathBuf,
    pub(super) common_dir: PathBuf,
    /// The git dir, when git run in the work tree would not find it there (`GIT_DIR` named one elsewhere):
    /// the store's git processes in the work tree are then told where it is.
    pub(super) detached_git_dir: Option<PathBuf>,
}

/// A [`Store`] that can cross to another thread ([`Store::for_thread()`]), made a store there by
/// [`StoreForThread::open()`].
pub struct StoreForThread {
    pub(super) repo: gix::ThreadSafeRepository,
    pub(super) workdir: PathBuf,
    pub(super) common_dir: PathBuf,
    pub(super) detached_git_dir: Option<PathBuf>,
}

impl StoreForThread {
    /// The store, on the thread that calls this.
    pub fn open(self) -> Store {
        let mut repo = self.repo.to_thread_local();
        super::pack::enable(&mut repo);
        Store {
            repo,
            workdir: self.workdir,
            common_dir: self.common_dir,
            detached_git_dir: self.detached_git_dir,
        }
    }
}

/// A clone starts with its objects on disk: gix would copy the ones held in memory, and both copies would
/// then be written as packs.
impl Clone for Store {
    fn clone(&self) -> Self {
        // Best effort: on failure the objects stay in memory and the clone copies them.
        let _ = super::pack::persist(&self.repo);
        Store {
            repo: self.repo.clone(),
            workdir: self.workdir.clone(),
            common_dir: self.common_dir.clone(),
            detached_git_dir: self.detached_git_dir.clone(),
        }
    }
}

/// Objects written and never handed on (no ref, no git process) are still written, so no id a session saw
/// is missing later (a scratch tree in a record, a commit a crash left unreferenced).
impl Drop for Store {
    fn drop(&mut self) {
        let _ = super::pack::persist(&self.repo);
    }
}

/// The one choke point for text written into `refs/notes/agent`, the session logs and `refs/agent/memory`
/// (which users push).
///
/// Secret redaction (known key values, common key formats) happens here, so nothing reaches those refs around it.
pub fn sanitize(text: &str) -> String {
    crate::safety::redact::redact(text)
}

/// [`sanitize()`] for a record (a session log's meta, a memory entry, a review record): every string in it,
/// whatever its field, redacted as decoded text before the record is serialised, never the serialised JSON,
/// where an escape such as the `\n` before a key's name hides it from a pattern (issue 22, finding 10).
pub fn sanitize_record<T>(record: &T) -> Result<T, serde_json::Error>
where
    T: serde::Serialize + serde::de::DeserializeOwned + Clone,
{
    let mut value = serde_json::to_value(record)?;
    if !crate::safety::redact::redact_value(&mut value) {
        return Ok(record.clone());
    }
    serde_json::from_value(value)
}

/// A crash-test hook: with `GIT_AGENT_CRASH_AT=N` set, the process kills itself with SIGKILL at the N-th call
/// (counting from 1). Called between the writes of every durable operation (journal, objects, ref updates), so
/// a test can `kill -9` the agent at every such point and check that the repository stays consistent.
pub fn crash_point() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static AT: OnceLock<Option<u64>> = OnceLock::new();
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let at = AT.get_or_init(|| {
        std::env::var("GIT_AGENT_CRASH_AT")
            .ok()
            .and_then(|v| v.parse().ok())
    });
    if let Some(at) = at {
        if COUNT.fetch_add(1, Ordering::SeqCst) + 1 == *at {
            crate::sys::process::kill_self();
        }
    }
}

pub(crate) fn branch_name(id: &str) -> String {
    format!("refs/heads/agent/{id}")
}

/// A repository-relative path as the file system spells it (unix: the bytes as they are).
pub(super) fn as_path(rel: &gix::bstr::BStr) -> &Path {
    use std::os::unix::ffi::OsStrExt;
    Path::new(std::ffi::OsStr::from_bytes(rel))
}
