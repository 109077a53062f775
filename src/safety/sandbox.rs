//! The sandbox of `run` commands: Landlock confines their writes, and optionally their network, on Linux.
//!
//! The guard catches mistakes; this is the boundary. A command may read anything the user can, but write
//! only under:
//! - the session's checkout;
//! - its worktree admin dir `<common git dir>/worktrees/<name>` (the target of the checkout's `.git` file),
//!   which holds that worktree's own index and HEAD, so `git status`, `git diff` and `git restore` work;
//! - a private temp dir (`TMPDIR`), and the system temp dirs unless the repository lives inside them;
//! - tool caches (`~/.cache`, `~/.cargo/registry`, `~/.cargo/git`, `~/.npm`, `~/go/pkg/mod`, plus the
//!   config's `[sandbox] writable`), again unless one of them contains the repository;
//! - `/dev/null` and the terminal devices.
//!
//! A `--here` session's checkout is the user's own work tree, whose `.git` lies inside it. Landlock only adds
//! rights down a hierarchy, so granting the work tree would grant `.git` too. Where commands run in a mount
//! namespace of their own ([`super::isolate`]), the whole work tree is granted and `.git` is bound read-only
//! over itself there: commands may create and delete entries anywhere, `.git` refuses every write (`EROFS`),
//! and Landlock keeps them from undoing the mount. Elsewhere each top-level entry but `.git` is granted
//! (directories with everything beneath them, files for writing), and the top level itself is not: commands
//! may change files anywhere and create or delete them in subdirectories, but not create, delete or rename
//! entries right at the top (the agent's file tools can; they do not run in the sandbox), and the session
//! says so once. Symlinks at the top are not followed into writable places. The user's linked-worktree admin
//! dir (their index and HEAD) is never granted.
//!
//! Everything else of the repository's git dir is read-only: objects, refs, the stash, config, hooks, other
//! worktrees. A linked worktree shares all of those with the user, so this is what makes `git branch -D main`
//! or a planted hook impossible rather than merely refused by the guard. The cost: `git add`/`git commit` in
//! the checkout fail (objects are read-only); the agent commits each step itself, and the permission-error
//! note says so.
//!
//! Network off: Landlock denies TCP bind/connect (ABI 4 and later) and a seccomp filter refuses to create any
//! socket but a Unix one (UDP, raw, netlink) and io_uring (which could create sockets behind seccomp's back).
//!
//! Default: `auto` = `workspace` where the kernel has Landlock, otherwise off with a warning. An explicit
//! `--sandbox workspace`/`read-only` never falls back: commands fail instead of running unsandboxed.
//! Network stays on by default because builds fetch dependencies; `[sandbox] network = false` turns it off.
//!
//! Landlock scopes ptrace (`/proc/<pid>/mem` of the agent is closed to commands) but, measured on 6.18, not
//! `/proc/<pid>/environ`: keeping keys out of that is the job of `safety::secrets` (the agent's own) and of
//! the private `/proc` of [`super::isolate`] (its parents', in every sandbox mode).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;

use super::isolate::{self, Isolation, Namespace, Plan};

use crate::sys::sandbox::Restriction;

/// `--sandbox`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// `workspace` if Landlock is available, else off (with a warning).
    #[default]
    Auto,
    Workspace,
    ReadOnly,
    Off,
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "auto" => Ok(Mode::Auto),
            "workspace" => Ok(Mode::Workspace),
            "read-only" | "readonly" => Ok(Mode::ReadOnly),
            "off" | "none" => Ok(Mode::Off),
            other => Err(format!(
                "invalid sandbox mode '{other}': use workspace, read-only, off or auto"
            )),
        }
    }
}

/// The `[sandbox]` table and `--sandbox`.
#[derive(Clone, Debug)]
pub struct SandboxConfig {
    pub mode: Mode,
    /// Whether commands may use the network.
    pub network: bool,
    /// Extra writable directories (tool caches).
    pub writable: Vec<PathBuf>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            mode: Mode::Auto,
            network: true,
            writable: Vec::new(),
        }
    }
}

/// The error returned by [`Sandbox::prepare()`]: the sandbox was asked for and cannot be applied.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the sandbox (--sandbox {mode}) cannot be applied: this kernel does not support Landlock; the command was not run\nhint: run with --sandbox off to allow unsandboxed commands")]
    Unsupported { mode: &'static str },
    #[error("the sandbox cannot be set up ({0}); the command was not run\nhint: run with --sandbox off to allow unsandboxed commands")]
    Setup(String),
}

/// The sandbox of one session.
#[derive(Clone, Debug)]
pub struct Sandbox {
    /// Resolved: never `Auto`.
    pub mode: Mode,
    pub network: bool,
    /// Where commands may write (workspace mode).
    pub writable: Vec<PathBuf>,
    /// The private temp dir given to commands as `TMPDIR`.
    pub tmpdir: Option<PathBuf>,
    /// Why `auto` resolved to off (no Landlock here), to warn once.
    pub unsandboxed: Option<&'static str>,
    /// What a workspace sandbox cannot grant here (the top of a `--here` work tree), to warn once.
    pub fallback: Option<String>,
    /// Whether commands get a PID namespace with a private `/proc` ([`super::isolate`]); `None` until
    /// needed when made by [`Sandbox::unprobed()`] (see [`Sandbox::isolation()`]).
    isolation: Option<Isolation>,
    /// Bound read-only over themselves in the command's mount namespace: the git dir of a `--here` work
    /// tree, whose whole top level is then writable.
    pub readonly: Vec<PathBuf>,
}

/// The Landlock ABI version of the running kernel (0 when unsupported, and where there is no Landlock).
pub fn landlock_abi() -> i32 {
    crate::sys::sandbox::landlock_abi()
}

impl Sandbox {
    /// No sandbox.
    pub fn off() -> Sandbox {
        Sandbox {
            mode: Mode::Off,
            network: true,
            writable: Vec::new(),
            tmpdir: None,
            unsandboxed: None,
            fallback: None,
            isolation: Some(Isolation::Shared {
                why: "no sandbox".into(),
            }),
            readonly: Vec::new(),
        }
    }

    /// Works out the writable paths for a session whose checkout is `checkout` in the repository whose git
    /// dir is `common_dir`. `tmpdir` is created by the caller.
    pub fn new(
        config: &SandboxConfig,
        checkout: &Path,
        common_dir: &Path,
        tmpdir: Option<PathBuf>,
    ) -> Sandbox {
        let isolation = Some(isolate::probe().clone());
        Self::with_isolation(config, checkout, common_dir, tmpdir, isolation)
    }

    /// [`Sandbox::new()`] without waiting for the isolation probe, which is taken when a command or the
    /// notices need it: a new session makes its sandbox before its first model request, which must not wait
    /// for a fork of the agent into new namespaces that only commands need (issue 29). A `--here` work tree
    /// still waits: what it grants depends on the answer.
    pub fn unprobed(
        config: &SandboxConfig,
        checkout: &Path,
        common_dir: &Path,
        tmpdir: Option<PathBuf>,
    ) -> Sandbox {
        Self::with_isolation(config, checkout, common_dir, tmpdir, None)
    }

    fn with_isolation(
        config: &SandboxConfig,
        checkout: &Path,
        common_dir: &Path,
        tmpdir: Option<PathBuf>,
        mut isolation: Option<Isolation>,
    ) -> Sandbox {
        let mut mode = config.mode;
        let mut unsandboxed = None;
        let mut fallback = None;
        // Network off is a request for the sandbox: it must not silently fall back.
        if mode == Mode::Auto && !config.network {
            mode = Mode::Workspace;
        }
        if mode == Mode::Auto {
            if landlock_abi() >= 1 {
                mode = Mode::Workspace;
            } else {
                mode = Mode::Off;
                unsandboxed = Some(if crate::sys::LINUX_LAYER {
                    "this kernel has no Landlock"
                } else {
                    "Landlock exists only on Linux"
                });
            }
        }
        let mut writable = Vec::new();
        let mut readonly = Vec::new();
        if mode == Mode::Workspace {
            if checkout.starts_with(common_dir) {
                // The session's own linked checkout, and its own index and HEAD.
                writable.push(checkout.to_path_buf());
                if let Some(admin) = worktree_admin_dir(checkout) {
                    writable.push(admin);
                }
            } else if isolation
                .get_or_insert_with(|| isolate::probe().clone())
                .is_namespace()
            {
                // The user's work tree (`--here`), all of it, with its git dir read-only by a bind mount.
                writable.push(checkout.to_path_buf());
                readonly = git_paths_inside(checkout, common_dir);
            } else {
                // The user's work tree (`--here`) without a mount namespace: see the module docs.
                writable.extend(work_tree_entries(checkout, common_dir));
                fallback = Some(format!(
                    "commands cannot create or delete entries at the top of the work tree: the git dir can only be kept read-only by granting each top-level entry but .git ({})",
                    match &isolation {
                        Some(Isolation::Shared { why }) => why.as_str(),
                        _ => "",
                    }
                ));
            }
            writable.extend(tmpdir.clone());
            let home = dirs::home_dir();
            let mut candidates: Vec<PathBuf> = vec![
                std::env::temp_dir(),
                PathBuf::from("/tmp"),
                PathBuf::from("/var/tmp"),
            ];
            if let Some(home) = &home {
                for c in [
                    ".cache",
                    ".cargo/registry",
                    ".cargo/git",
                    ".npm",
                    "go/pkg/mod",
                ] {
                    candidates.push(home.join(c));
                }
            }
            candidates.extend(config.writable.iter().cloned());
            for c in candidates {
                let Ok(c) = c.canonicalize() else { continue };
                // Landlock only adds rights: a writable ancestor would make the git dir writable too.
                if common_dir.starts_with(&c) || writable.contains(&c) {
                    continue;
                }
                writable.push(c);
            }
        }
        Sandbox {
            mode,
            network: config.network,
            writable,
            tmpdir,
            unsandboxed,
            fallback,
            isolation,
            readonly,
        }
    }

    /// What the session tells the user once about what its commands are not isolated from, as (topic,
    /// message) notices. No Landlock and no private `/proc` (macOS, the BSDs, an old Linux) are one notice,
    /// not two: one line that names both holes reads as the platform's limit, two read as two faults.
    pub fn notices(&self) -> Vec<(&'static str, String)> {
        let mut notices = Vec::new();
        match (self.unsandboxed, &self.isolation()) {
            (Some(no_landlock), Isolation::Shared { why }) => notices.push((
                "sandbox",
                format!(
                    "commands run unsandboxed and without a private /proc ({no_landlock}; {why}): they can write wherever you can (the guard still applies), see other processes of yours and read their environments (your shell's, git's), so keys in those stay readable; git-agent's own environment holds none"
                ),
            )),
            (Some(no_landlock), Isolation::Namespace { .. }) => notices.push((
                "sandbox",
                format!("{no_landlock}, so commands run unsandboxed (the guard still applies); pass --sandbox off to silence this"),
            )),
            (None, _) => notices.extend(self.isolation_warning().map(|w| ("isolation", w))),
        }
        notices.extend(self.fallback.clone().map(|w| ("sandbox", w)));
        notices
    }

    /// What to tell the user once when commands cannot get a private `/proc`, and the fallback.
    pub fn isolation_warning(&self) -> Option<String> {
        match &self.isolation() {
            Isolation::Namespace { .. } => None,
            Isolation::Shared { why } => Some(format!(
                "commands run without a private /proc ({why}): they can see other processes of yours and read their environments (your shell's, git's), so keys in those stay readable; git-agent's own environment holds none"
            )),
        }
    }

    /// Whether commands get a private `/proc`: as made, or the process's probe (waiting for it if it is under
    /// way on another thread).
    pub fn isolation(&self) -> Isolation {
        self.isolation
            .clone()
            .unwrap_or_else(|| isolate::probe().clone())
    }

    pub fn is_active(&self) -> bool {
        self.mode != Mode::Off
    }

    /// One line for permission errors: where the command may write.
    pub fn describe(&self) -> String {
        let places = if self.mode == Mode::ReadOnly {
            "nowhere (read-only sandbox)".to_string()
        } else {
            self.writable
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let network = if self.network {
            ""
        } else {
            "; network access is off"
        };
        format!(
            "[sandbox: commands may write only under {places}; the repository's git dir is read-only{bound} (the agent commits each step itself, so `git add`/`git commit` are not needed){network}]",
            bound = if self.readonly.is_empty() { "" } else { " (bound read-only over itself)" },
        )
    }

    /// Everything a command's child needs, built in the parent so the child only makes syscalls: the
    /// supervisor and namespaces ([`super::isolate`]), and in workspace or read-only mode the Landlock
    /// ruleset and seccomp filter.
    pub fn prepare(&self) -> Result<Prepared, SandboxError> {
        let namespace = match self.isolation() {
            Isolation::Namespace { user } => Some(Namespace::new(user, &self.readonly)),
            Isolation::Shared { .. } => None,
        };
        let plan = Plan::new(namespace);
        let landlock = self.landlock()?;
        Ok(Prepared {
            plan,
            landlock,
            tmpdir: self.tmpdir.clone(),
        })
    }

    fn landlock(&self) -> Result<Option<Restriction>, SandboxError> {
        if !self.is_active() {
            return Ok(None);
        }
        let abi_version = landlock_abi();
        if abi_version < 1 {
            return Err(SandboxError::Unsupported {
                mode: if self.mode == Mode::ReadOnly {
                    "read-only"
                } else {
                    "workspace"
                },
            });
        }
        let restriction = Restriction::build(abi_version, &self.writable, self.network)
            .map_err(SandboxError::Setup)?;
        Ok(Some(restriction))
    }
}

/// A command's isolation and sandbox, ready to be applied in its child between fork and exec.
pub struct Prepared {
    plan: Plan,
    landlock: Option<Restriction>,
    tmpdir: Option<PathBuf>,
}

impl Prepared {
    /// Applies it all to `cmd`, which must lead its own process group: the supervisor first, then, in the
    /// command's own process only, Landlock and seccomp.
    pub fn install(self, cmd: &mut Command) {
        if let Some(tmp) = &self.tmpdir {
            cmd.env("TMPDIR", tmp);
        }
        self.plan.install(cmd);
        if let Some(landlock) = self.landlock {
            landlock.install(cmd);
        }
    }
}

/// The top-level entries of the user's work tree that commands may write: all but `.git`, symlinks, and
/// anything holding the git dir.
fn work_tree_entries(root: &Path, common_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name() != ".git")
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir() || t.is_file()))
        .map(|e| e.path())
        .filter(|p| !common_dir.starts_with(p))
        .collect();
    out.sort();
    out
}

/// The git dirs of a work tree that lie inside it and must stay read-only to its commands: its `.git` (a
/// directory, or the file of a linked worktree) and the common git dir if it is inside.
fn git_paths_inside(root: &Path, common_dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let dot_git = root.join(".git");
    if std::fs::symlink_metadata(&dot_git).is_ok_and(|m| m.is_dir() || m.is_file()) {
        out.push(dot_git);
    }
    if common_dir.starts_with(root) && !out.iter().any(|p| common_dir.starts_with(p)) {
        out.push(common_dir.to_path_buf());
    }
    out
}

/// The worktree admin dir a linked checkout's `.git` file points to.
pub fn worktree_admin_dir(checkout: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(checkout.join(".git")).ok()?;
    let target = text.strip_prefix("gitdir:")?.trim();
    let path = checkout.join(target);
    path.canonicalize().ok()
}

/// True when command output looks like the sandbox refused something.
pub fn looks_denied(output: &str) -> bool {
    [
        "Permission denied",
        "Read-only file system",
        "Operation not permitted",
        "insufficient permission",
    ]
    .iter()
    .any(|s| output.contains(s))
}
