//! The store's core: the repository handle, a session as plain data, where its files live, the store's error,
//! and the choke points every write goes through (redaction, the crash-test hook). Every other part of the
//! store builds on these; they name no other part.

use std::path::{Path, PathBuf};

use gix::ObjectId;

/// The error returned by every [`Store`] operation.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not a git repository (or any parent): run git agent inside a repo")]
    NotARepo(#[source] gix::Error),
    #[error("{0} is a bare repository: run git agent inside a repository with a work tree")]
    Bare(PathBuf),
    #[error("the repository has no commits yet: commit something first")]
    NoCommits,
    #[error("invalid session id {0:?}: use lowercase letters, digits and '-'")]
    InvalidSessionId(String),
    #[error("{0} already exists: pick another session id or delete the branch")]
    BranchExists(String),
    #[error(
        "{branch} was moved by someone else (expected {expected}, found {found}): \
         inspect it with `git log {branch}` and start a new session"
    )]
    BranchMoved {
        branch: String,
        expected: ObjectId,
        found: String,
    },
    #[error("path {0:?} is not inside the checkout: use a relative path without '..' or '.git'")]
    InvalidPath(PathBuf),
    #[error("could not {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("could not run git ({0}): make sure git is installed and on PATH")]
    GitMissing(#[source] std::io::Error),
    #[error("`git {args}` failed: {stderr}")]
    GitCommand { args: String, stderr: String },
    #[error("no session {0:?}: `git agent log` lists the sessions")]
    NoSession(String),
    #[error("there are no sessions yet: start one with `git agent ask`")]
    NoSessions,
    #[error(
        "no session was started in this repository: name a pulled one by its id (`git agent log` lists them)"
    )]
    NoLocalSessions,
    #[error("session prefix {prefix:?} is ambiguous: it matches {}", .candidates.join(", "))]
    AmbiguousSession {
        prefix: String,
        candidates: Vec<String>,
    },
    #[error("session {0} is in use by another git-agent process: wait for it to finish")]
    SessionBusy(String),
    #[error("the session log at {0} is damaged ({1}): inspect it with `git log -p` on its ref")]
    CorruptLog(ObjectId, &'static str),
    /// Every attempt of a transaction on the ref lost to another writer ([`Store::transact()`](super::Store::transact)).
    #[error("{0} stayed busy: another process holds it; if none runs, remove {0}.lock")]
    Busy(String),
    #[error(
        "git storage error: could not prepare reference edit of {name}: {lock} exists (another git process is \
         writing there, or one was killed while it did; waited {:.1} s)\n\
         hint: if no git or git-agent process is running in this repository, remove {lock} and try again",
        .waited.as_secs_f64(), lock = .lock.display()
    )]
    Locked {
        name: String,
        lock: PathBuf,
        waited: std::time::Duration,
    },
    #[error("could not write the checkout {}: {message}", .path.display())]
    Checkout { path: PathBuf, message: String },
    #[error("{0}")]
    Refused(String),
    #[error("{}", describe_gix(.0))]
    Git(#[from] gix::Error),
}

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

/// A gix error in words: what failed and its cause on the first line, and, when a lock file is in the way,
/// which one and what to do about it. (Its alternate form prints gix's internal structures: issue 17.)
fn describe_gix(err: &gix::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for e in err.iter_errors() {
        let text = e.to_string();
        // A cause is often repeated by the frame that wraps it.
        if parts.iter().any(|p| p.contains(&text)) {
            continue;
        }
        parts.push(text);
    }
    let lock = err
        .iter_errors()
        .any(|e| {
            e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::AlreadyExists)
        })
        .then(|| parts.iter().find_map(|p| quoted_lock_path(p)))
        .flatten();
    let what = parts.first().map_or("unknown failure", String::as_str);
    let what = lower_first(what);
    match lock {
        Some(lock) => format!(
            "git storage error: {what}: {lock} exists (another git process is writing there, or one was killed while it did)\n\
             hint: if no git or git-agent process is running in this repository, remove {lock} and try again"
        ),
        None if parts.len() > 1 => {
            let cause = lower_first(&parts[parts.len() - 1]);
            format!("git storage error: {what}: {cause}")
        }
        None => format!("git storage error: {what}"),
    }
}

/// The first `"...lock"` path quoted in a gix message.
fn quoted_lock_path(text: &str) -> Option<String> {
    text.split('"')
        .skip(1)
        .step_by(2)
        .find(|s| s.ends_with(".lock"))
        .map(str::to_owned)
}

fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(c) if !text.starts_with("HEAD") => c.to_lowercase().chain(chars).collect(),
        _ => text.to_owned(),
    }
}

impl StoreError {
    pub(super) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> StoreError {
        let path = path.into();
        move |source| StoreError::Io {
            action,
            path,
            source,
        }
    }
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
