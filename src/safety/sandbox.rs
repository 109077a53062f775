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

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;

use super::isolate::{self, Isolation, Namespace, Plan};

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, ABI,
};

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
    /// Why `auto` resolved to off, to warn once.
    pub fallback: Option<String>,
    /// Whether commands get a PID namespace with a private `/proc` ([`super::isolate`]).
    pub isolation: Isolation,
    /// Bound read-only over themselves in the command's mount namespace: the git dir of a `--here` work
    /// tree, whose whole top level is then writable.
    pub readonly: Vec<PathBuf>,
}

/// The Landlock ABI version of the running kernel (0 when unsupported).
pub fn landlock_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_ulong = 1;
    // SAFETY: the version query takes no pointers.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(v).unwrap_or(0).max(0)
}

impl Sandbox {
    /// No sandbox.
    pub fn off() -> Sandbox {
        Sandbox {
            mode: Mode::Off,
            network: true,
            writable: Vec::new(),
            tmpdir: None,
            fallback: None,
            isolation: Isolation::Shared {
                why: "no sandbox".into(),
            },
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
        let mut mode = config.mode;
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
                fallback = Some("this kernel has no Landlock, so commands run unsandboxed (the guard still applies); pass --sandbox off to silence this".to_string());
            }
        }
        let isolation = isolate::probe().clone();
        let mut writable = Vec::new();
        let mut readonly = Vec::new();
        if mode == Mode::Workspace {
            if checkout.starts_with(common_dir) {
                // The session's own linked checkout, and its own index and HEAD.
                writable.push(checkout.to_path_buf());
                if let Some(admin) = worktree_admin_dir(checkout) {
                    writable.push(admin);
                }
            } else if isolation.is_namespace() {
                // The user's work tree (`--here`), all of it, with its git dir read-only by a bind mount.
                writable.push(checkout.to_path_buf());
                readonly = git_paths_inside(checkout, common_dir);
            } else {
                // The user's work tree (`--here`) without a mount namespace: see the module docs.
                writable.extend(work_tree_entries(checkout, common_dir));
                fallback = Some(format!(
                    "commands cannot create or delete entries at the top of the work tree: the git dir can only be kept read-only by granting each top-level entry but .git ({})",
                    match &isolation {
                        Isolation::Shared { why } => why.as_str(),
                        Isolation::Namespace { .. } => "",
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
            fallback,
            isolation,
            readonly,
        }
    }

    /// What to tell the user once when commands cannot get a private `/proc`, and the fallback.
    pub fn isolation_warning(&self) -> Option<String> {
        match &self.isolation {
            Isolation::Namespace { .. } => None,
            Isolation::Shared { why } => Some(format!(
                "commands run without a private /proc ({why}): they can see other processes of yours and read their environments (your shell's, git's), so keys in those stay readable; git-agent's own environment holds none"
            )),
        }
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
        let namespace = match self.isolation {
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

    fn landlock(&self) -> Result<Option<Landlock>, SandboxError> {
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
        let abi = ABI::from(abi_version);
        let setup = |e: &dyn std::fmt::Display| SandboxError::Setup(e.to_string());
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))
            .map_err(|e| setup(&e))?;
        let landlock_net = !self.network && abi_version >= 4;
        if landlock_net {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(abi))
                .map_err(|e| setup(&e))?;
        }
        let mut created = ruleset.create().map_err(|e| setup(&e))?;
        let root = PathFd::new("/").map_err(|e| setup(&e))?;
        created = created
            .add_rule(PathBeneath::new(root, AccessFs::from_read(abi)))
            .map_err(|e| setup(&e))?;
        for dir in &self.writable {
            // Files (top-level files of a `--here` work tree) take only file rights.
            let access = if std::fs::metadata(dir).is_ok_and(|m| m.is_file()) {
                AccessFs::from_file(abi)
            } else {
                AccessFs::from_all(abi)
            };
            // A writable path that vanished (a cache removed meanwhile) is simply not writable.
            if let Ok(fd) = PathFd::new(dir) {
                created = created
                    .add_rule(PathBeneath::new(fd, access))
                    .map_err(|e| setup(&e))?;
            }
        }
        for dev in [
            "/dev/null",
            "/dev/zero",
            "/dev/full",
            "/dev/tty",
            "/dev/ptmx",
            "/dev/urandom",
            "/dev/random",
        ] {
            if let Ok(fd) = PathFd::new(dev) {
                created = created
                    .add_rule(PathBeneath::new(fd, AccessFs::from_file(abi)))
                    .map_err(|e| setup(&e))?;
            }
        }
        for dir in ["/dev/pts", "/dev/shm"] {
            if let Ok(fd) = PathFd::new(dir) {
                created = created
                    .add_rule(PathBeneath::new(fd, AccessFs::from_all(abi)))
                    .map_err(|e| setup(&e))?;
            }
        }
        let fd: Option<OwnedFd> = created.into();
        let fd = fd.ok_or_else(|| SandboxError::Setup("Landlock returned no ruleset".into()))?;
        Ok(Some(Landlock {
            ruleset: fd,
            seccomp: (!self.network).then(socket_filter),
        }))
    }
}

/// A command's isolation and sandbox, ready to be applied in its child between fork and exec.
pub struct Prepared {
    plan: Plan,
    landlock: Option<Landlock>,
    tmpdir: Option<PathBuf>,
}

/// A Landlock ruleset and seccomp filter, built.
struct Landlock {
    ruleset: OwnedFd,
    seccomp: Option<Vec<libc::sock_filter>>,
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

impl Landlock {
    /// The closure makes only async-signal-safe syscalls: the ruleset and filter were built before the fork.
    fn install(self, cmd: &mut Command) {
        let Landlock { ruleset, seccomp } = self;
        // SAFETY: prctl and the Landlock syscall are async-signal-safe; they read only memory owned by the
        // closure (the filter) and an fd it keeps open.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(filter) = &seccomp {
                    let prog = libc::sock_fprog {
                        len: filter.len() as u16,
                        filter: filter.as_ptr() as *mut libc::sock_filter,
                    };
                    if libc::prctl(
                        libc::PR_SET_SECCOMP,
                        libc::SECCOMP_MODE_FILTER,
                        &prog as *const libc::sock_fprog,
                    ) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                if libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
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

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: u32 = 0;

/// seccomp: `socket()` only for `AF_UNIX`, no `io_uring_setup`, no x32 syscalls, no foreign architecture.
fn socket_filter() -> Vec<libc::sock_filter> {
    const LD_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JGE: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RET: u16 = 0x06; // BPF_RET | BPF_K
    const ALLOW: u32 = 0x7fff_0000;
    const KILL_PROCESS: u32 = 0x8000_0000;
    const ERRNO: u32 = 0x0005_0000;
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    vec![
        op(LD_ABS, 0, 0, 4),                            // 0: arch
        op(JEQ, 1, 0, AUDIT_ARCH),                      // 1
        op(RET, 0, 0, KILL_PROCESS),                    // 2
        op(LD_ABS, 0, 0, 0),                            // 3: syscall number
        op(JGE, 5, 0, 0x4000_0000),                     // 4: x32 -> 10
        op(JEQ, 2, 0, libc::SYS_socket as u32),         // 5: -> 8
        op(JEQ, 3, 0, libc::SYS_io_uring_setup as u32), // 6: -> 10
        op(RET, 0, 0, ALLOW),                           // 7
        op(LD_ABS, 0, 0, 16),                           // 8: args[0], the domain
        op(JEQ, 1, 0, libc::AF_UNIX as u32),            // 9: -> 11
        op(RET, 0, 0, ERRNO | libc::EACCES as u32),     // 10
        op(RET, 0, 0, ALLOW),                           // 11
    ]
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
