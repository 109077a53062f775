//! Isolating the processes of `run` commands: a PID namespace with a private `/proc`, a supervisor that
//! ends the command's processes with the agent, and (for `--here`) the repository's git dir bound read-only
//! over itself.
//!
//! Why: the agent's own environment holds no keys (see [`super::secrets`]), but its parent `git`, the user's
//! shell and any wrapper (`timeout`, `direnv exec`) still do, and `/proc/<pid>/environ` is readable by any
//! process of the same user. In a PID namespace of its own with a fresh `/proc`, a command sees only its own
//! tree. Unprivileged, this needs a user namespace (mapping the user to itself, so files, `id` and git's
//! ownership checks stay as they were); as root it does not.
//!
//! The shape, from the agent down (every process in the command's process group, so one `killpg` from the
//! agent reaches all of them):
//!
//! ```text
//! agent ─ supervisor S (the child std spawned; pid = process group id)
//!           └ init G (PID 1 of the new namespace: mounts /proc, reaps orphans, reports the command's status)
//!               └ bash B (PID 2: the command; the Landlock sandbox and seccomp apply from here)
//! ```
//!
//! - S is what the agent waits for and signals. It leaves the namespaces to G, watches the agent's
//!   *lifeline* (a pipe whose write end only the agent holds: when the agent dies, even by SIGKILL, the pipe
//!   hangs up and S kills the whole group) and exits the way B did (code or signal), which G tells it.
//!   A parent-death signal would not do: it fires when the *thread* that forked exits, and commands are
//!   started from tokio's short-lived blocking threads.
//! - G is PID 1, so it must exist: a command exec'd as PID 1 would ignore SIGTERM (the kernel protects a
//!   namespace's init from signals it has no handler for) and leave zombies. When G exits, the kernel kills
//!   every process left in the namespace, also those that left the process group (`setsid`).
//! - S and G ignore the termination signals the agent sends to the group (SIGTERM for a job's graceful stop),
//!   so the command decides how to end; SIGKILL ends everything.
//! - S and G are forks of the agent that never exec: they close every inherited descriptor, mark themselves
//!   non-dumpable (their memory is a copy of the agent's, keys included, so `/proc/1/mem` and
//!   `/proc/1/environ` stay closed to the command) and make only async-signal-safe calls.
//!
//! Where the kernel refuses (no user namespaces, a container without the right to mount `/proc`), commands
//! run without a namespace and [`probe()`] says why; S and G still run, so a command's process group still
//! dies with the agent. [`probe()`] tries the real thing once per process.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// How commands are isolated from the processes around them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// A PID and mount namespace with a private `/proc`; `user` when a user namespace was needed for it.
    Namespace { user: bool },
    /// Commands share the agent's view of processes; why not.
    Shared { why: String },
}

impl Isolation {
    pub fn is_namespace(&self) -> bool {
        matches!(self, Isolation::Namespace { .. })
    }
}

/// Whether commands can get a private `/proc` here: tried once per process by starting a command the way
/// [`Plan::install()`] starts every command (S, G, the namespaces, the private `/proc`), whose process B then
/// exits 0 where it would exec: exec'ing a real program (`true`) would cost the session a PATH search and a
/// program's start for nothing the namespaces depend on. As root without a user namespace first, then with
/// one.
pub fn probe() -> &'static Isolation {
    static PROBED: OnceLock<Isolation> = OnceLock::new();
    PROBED.get_or_init(|| {
        if std::env::var("GIT_AGENT_ISOLATION").as_deref() == Ok("off") {
            return Isolation::Shared {
                why: "GIT_AGENT_ISOLATION=off".into(),
            };
        }
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let mut last = String::new();
        for user in [false, true] {
            if !user && !root {
                continue;
            }
            match try_namespace(user) {
                Ok(()) => return Isolation::Namespace { user },
                Err(e) => last = e,
            }
        }
        Isolation::Shared { why: last }
    })
}

fn try_namespace(user: bool) -> Result<(), String> {
    let plan = Plan::new(Some(Namespace::new(user, &[])));
    // Never exec'd: B leaves in the pre_exec below (an absolute path, so not even looked up).
    let mut cmd = Command::new("/bin/sh");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    plan.install(&mut cmd);
    // SAFETY: runs in B after the plan's own pre_exec; _exit is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| libc::_exit(0));
    }
    let status = cmd
        .status()
        .map_err(|e| format!("the kernel refused a PID namespace with a private /proc ({e})"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "a command in a PID namespace did not run ({status})"
        ))
    }
}

/// The read end of the agent's lifeline: a pipe whose write end only the agent holds (both ends are
/// close-on-exec, and the supervisors close every descriptor they inherit). `None` if no pipe could be made.
fn lifeline() -> Option<RawFd> {
    static LIFELINE: OnceLock<Option<(OwnedFd, OwnedFd)>> = OnceLock::new();
    LIFELINE
        .get_or_init(|| {
            let mut fds = [0 as RawFd; 2];
            // SAFETY: pipe2 into a local array.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
                return None;
            }
            // SAFETY: both fds were just created and are owned here, for the life of the process.
            Some(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
        })
        .as_ref()
        .map(|(read, _write)| read.as_raw_fd())
}

/// The namespaces of one command, prepared in the parent (the child may not allocate).
#[derive(Clone, Debug)]
pub struct Namespace {
    /// `uid_map` and `gid_map` lines when a user namespace is needed (not root).
    user: Option<(Vec<u8>, Vec<u8>)>,
    /// Paths bound read-only over themselves, with the flags their mount already has (a user namespace may
    /// not clear `nosuid`, `nodev`, ... on a remount).
    readonly: Vec<(CString, libc::c_ulong)>,
}

impl Namespace {
    /// `user`: whether to create a user namespace; `readonly`: paths that must be read-only to the command
    /// (the git dir of a `--here` work tree). A path that cannot be named to the kernel is left out.
    pub fn new(user: bool, readonly: &[PathBuf]) -> Namespace {
        let user = user.then(|| {
            // SAFETY: getuid/getgid have no preconditions.
            let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
            (
                format!("{uid} {uid} 1\n").into_bytes(),
                format!("{gid} {gid} 1\n").into_bytes(),
            )
        });
        let readonly = readonly
            .iter()
            .filter_map(|p| Some((CString::new(p.as_os_str().as_bytes()).ok()?, mount_flags(p))))
            .collect();
        Namespace { user, readonly }
    }
}

/// The flags of the mount `path` is on, as `mount(2)` spells them.
fn mount_flags(path: &Path) -> libc::c_ulong {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return 0;
    };
    // SAFETY: statvfs writes into a zeroed local struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return 0;
    }
    let pairs = [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ];
    pairs
        .iter()
        .filter(|(st_flag, _)| st.f_flag & st_flag != 0)
        .fold(0, |acc, (_, ms)| acc | ms)
}

/// How one command is started: under a supervisor, in namespaces or not.
#[derive(Clone, Debug)]
pub struct Plan {
    namespace: Option<Namespace>,
    lifeline: RawFd,
}

impl Plan {
    pub fn new(namespace: Option<Namespace>) -> Plan {
        Plan {
            namespace,
            lifeline: lifeline().unwrap_or(-1),
        }
    }

    /// Makes `cmd`'s child the supervisor of the module docs. Install this before any other `pre_exec`
    /// (the sandbox's), which then runs in the command's own process only. `cmd` must lead its own process
    /// group (`process_group(0)`): that is what the agent signals.
    pub fn install(self, cmd: &mut Command) {
        // SAFETY: the closure runs between fork and exec and makes only async-signal-safe syscalls on data
        // prepared before the fork (see `start`).
        unsafe {
            cmd.pre_exec(move || start(&self));
        }
    }
}

/// In the child std forked (S): set up the namespaces, fork G, and supervise; returns only in B.
fn start(plan: &Plan) -> io::Result<()> {
    if let Some(ns) = &plan.namespace {
        enter_namespaces(ns)?;
    }
    let mut status = [0 as RawFd; 2];
    // SAFETY: pipe2 into a local array.
    cvt(unsafe { libc::pipe2(status.as_mut_ptr(), libc::O_CLOEXEC) })?;
    let (status_read, status_write) = (status[0], status[1]);
    // SAFETY: fork in a single-threaded child; both sides continue with async-signal-safe calls only.
    let init = cvt(unsafe { libc::fork() })?;
    if init > 0 {
        supervise(init, status_read, plan.lifeline);
    }
    // G.
    // SAFETY: closing our copy of the read end; prctl and the mounts take no memory of ours but C strings.
    unsafe {
        libc::close(status_read);
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    if let Some(ns) = &plan.namespace {
        mount_private(ns)?;
    }
    // SAFETY: as above.
    let command = cvt(unsafe { libc::fork() })?;
    if command == 0 {
        // B: the command. std goes on with the sandbox's pre_exec and exec.
        // SAFETY: closing our copy of the write end.
        unsafe { libc::close(status_write) };
        return Ok(());
    }
    reap(command, status_write)
}

/// S: ignore the group's termination signals, close everything but the status pipe and the lifeline, wait
/// for G's report (or the agent's death), and end as the command did.
fn supervise(init: libc::pid_t, status_read: RawFd, lifeline: RawFd) -> ! {
    // SAFETY: sigaction, close_range, prctl, poll, read, waitpid, killpg, kill and _exit are async-signal-safe;
    // every buffer is on this stack.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        calm_signals();
        close_all_but(&[status_read, lifeline]);
        let mut report = [0u8; 4];
        let mut got = 0usize;
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: status_read,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: lifeline,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            if libc::poll(fds.as_mut_ptr(), 2, -1) < 0 {
                if errno() == libc::EINTR {
                    continue;
                }
                break;
            }
            if fds[1].revents != 0 {
                // The agent is gone: nobody will ever read the command's output or stop it.
                libc::killpg(0, libc::SIGKILL);
                libc::_exit(137);
            }
            if fds[0].revents != 0 {
                let n = libc::read(
                    status_read,
                    report.as_mut_ptr().add(got).cast(),
                    report.len() - got,
                );
                if n > 0 {
                    got += n as usize;
                    if got < report.len() {
                        continue;
                    }
                } else if n < 0 && errno() == libc::EINTR {
                    continue;
                }
                break;
            }
        }
        let mut init_status = 0;
        while libc::waitpid(init, &mut init_status, 0) < 0 && errno() == libc::EINTR {}
        let status = if got == report.len() {
            i32::from_ne_bytes(report)
        } else {
            // G ended before B did: killed, or a namespace step failed (std has reported that error).
            init_status
        };
        end_like(status)
    }
}

/// G: reap every child until the command exits, then report its wait status to S and exit (in a PID
/// namespace, the kernel then kills what is left of it).
fn reap(command: libc::pid_t, status_write: RawFd) -> ! {
    // SAFETY: as in `supervise`.
    unsafe {
        calm_signals();
        close_all_but(&[status_write]);
        loop {
            let mut status = 0;
            let pid = libc::waitpid(-1, &mut status, 0);
            if pid == command {
                let bytes = status.to_ne_bytes();
                libc::write(status_write, bytes.as_ptr().cast(), bytes.len());
                libc::_exit(0);
            }
            if pid < 0 && errno() != libc::EINTR {
                libc::_exit(0);
            }
        }
    }
}

/// Ends this process the way a child with wait status `status` ended: with its exit code, or killed by its
/// signal (no core dump: this process's memory is the agent's).
unsafe fn end_like(status: libc::c_int) -> ! {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &action, std::ptr::null_mut());
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), sig);
        libc::_exit(128 + sig);
    }
    libc::_exit(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        1
    })
}

/// The agent's signal handlers (inherited across fork) would run agent code here: the termination signals
/// are ignored (the command gets them too, through the group, and decides), everything else is default.
unsafe fn calm_signals() {
    for sig in 1..32 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        let ignore = matches!(
            sig,
            libc::SIGTERM
                | libc::SIGINT
                | libc::SIGHUP
                | libc::SIGQUIT
                | libc::SIGPIPE
                | libc::SIGUSR1
                | libc::SIGUSR2
                | libc::SIGALRM
                | libc::SIGTSTP
                | libc::SIGTTIN
                | libc::SIGTTOU
        );
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = if ignore { libc::SIG_IGN } else { libc::SIG_DFL };
        libc::sigaction(sig, &action, std::ptr::null_mut());
    }
}

/// Closes every descriptor but `keep` (negative entries are ignored).
unsafe fn close_all_but(keep: &[RawFd]) {
    let mut sorted = [-1 as RawFd; 4];
    let n = keep.len().min(sorted.len());
    sorted[..n].copy_from_slice(&keep[..n]);
    sorted[..n].sort_unstable();
    let mut from: libc::c_uint = 0;
    for &fd in &sorted[..n] {
        if fd < 0 {
            continue;
        }
        let fd = fd as libc::c_uint;
        if fd > from {
            close_range(from, fd - 1);
        }
        from = fd + 1;
    }
    close_range(from, libc::c_uint::MAX);
}

/// close_range(2) (Linux 5.9), or a loop over the descriptors that can be open.
unsafe fn close_range(first: libc::c_uint, last: libc::c_uint) {
    if libc::syscall(libc::SYS_close_range, first, last, 0) == 0 {
        return;
    }
    let mut limit: libc::rlimit = std::mem::zeroed();
    let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
        limit.rlim_cur.min(65_536) as libc::c_uint
    } else {
        1024
    };
    let mut fd = first;
    while fd <= last && fd < max {
        libc::close(fd as RawFd);
        fd += 1;
    }
}

/// S: a user namespace if needed (mapping the user to itself), then new PID and mount namespaces, which G
/// (the next process forked) enters as PID 1.
fn enter_namespaces(ns: &Namespace) -> io::Result<()> {
    if let Some((uid_map, gid_map)) = &ns.user {
        // SAFETY: unshare takes flags only.
        cvt(unsafe { libc::unshare(libc::CLONE_NEWUSER) })?;
        write_proc(c"/proc/self/setgroups", b"deny")?;
        write_proc(c"/proc/self/uid_map", uid_map)?;
        write_proc(c"/proc/self/gid_map", gid_map)?;
    }
    // SAFETY: as above.
    cvt(unsafe { libc::unshare(libc::CLONE_NEWPID | libc::CLONE_NEWNS) })?;
    Ok(())
}

/// G: mounts private to the namespace, a `/proc` of the new PID namespace in place of the old one, and the
/// read-only binds.
fn mount_private(ns: &Namespace) -> io::Result<()> {
    let none = std::ptr::null::<libc::c_char>();
    // SAFETY: mount/umount2 with C strings that live in `ns` or are literals, and null pointers where the
    // kernel takes none.
    unsafe {
        // Nothing mounted here may propagate back to the user's mount namespace.
        cvt(libc::mount(
            none,
            c"/".as_ptr(),
            none,
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ))?;
        // Detached first where allowed (root), so the old /proc is not merely hidden beneath the new one;
        // in a user namespace it is locked, and the new mount covers it.
        libc::umount2(c"/proc".as_ptr(), libc::MNT_DETACH);
        cvt(libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ))?;
        for (path, flags) in &ns.readonly {
            cvt(libc::mount(
                path.as_ptr(),
                path.as_ptr(),
                none,
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ))?;
            cvt(libc::mount(
                none,
                path.as_ptr(),
                none,
                libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | flags,
                std::ptr::null(),
            ))?;
        }
    }
    Ok(())
}

fn write_proc(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: open/write/close on a C string literal and a borrowed buffer.
    unsafe {
        let fd = cvt(libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC))?;
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        libc::close(fd);
        if n != data.len() as isize {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn errno() -> libc::c_int {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn run(plan: Plan, script: &str) -> (std::process::ExitStatus, String) {
        let mut cmd = Command::new("bash");
        cmd.args(["-c", script])
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .process_group(0);
        plan.install(&mut cmd);
        let out = cmd.output().unwrap();
        (
            out.status,
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    fn namespace() -> Option<Namespace> {
        match probe() {
            Isolation::Namespace { user } => Some(Namespace::new(*user, &[])),
            Isolation::Shared { why } => {
                eprintln!("SKIPPED the namespace half: {why}");
                None
            }
        }
    }

    #[test]
    fn exit_codes_and_signals_come_through_the_supervisor() {
        for ns in [None, namespace()] {
            let with = ns.is_some();
            let (status, out) = run(Plan::new(ns.clone()), "echo out; exit 7");
            assert_eq!(
                (status.code(), out.as_str()),
                (Some(7), "out\n"),
                "ns {with}"
            );
            let (status, _) = run(Plan::new(ns.clone()), "kill -TERM $$");
            assert_eq!(status.signal(), Some(libc::SIGTERM), "ns {with}");
            let (status, _) = run(Plan::new(ns), "exec sleep 0");
            assert_eq!(status.code(), Some(0), "ns {with}");
        }
    }

    #[test]
    fn a_namespace_shows_only_the_command_tree() {
        let Some(ns) = namespace() else { return };
        let me = std::process::id();
        let (status, out) = run(
            Plan::new(Some(ns)),
            &format!(
                "ls /proc | grep -c '^[0-9]*$'; test -e /proc/{me} && echo agent-visible; cat /proc/1/environ >/dev/null 2>&1 || echo init-closed; id -u"
            ),
        );
        assert!(status.success(), "{out}");
        let lines: Vec<&str> = out.lines().collect();
        // G, bash and ls (grep runs after ls ended, or alongside it): a handful, not the machine's.
        let count: usize = lines[0].parse().unwrap();
        assert!(count <= 4, "{out}");
        assert!(!out.contains("agent-visible"), "{out}");
        // The init's memory is a copy of the agent's: closed to the command unless it is root (who may read
        // any process's; the sandbox's Landlock domain closes it to root as well).
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            assert!(out.contains("init-closed"), "{out}");
        }
        // SAFETY: getuid has no preconditions.
        assert_eq!(
            lines.last().copied(),
            Some(unsafe { libc::getuid() }.to_string().as_str())
        );
    }

    #[test]
    fn leftovers_die_with_the_namespace() {
        let Some(ns) = namespace() else { return };
        // A background process that left the process group outlives bash only until G exits.
        let marker = std::env::temp_dir().join(format!("git-agent-isolate-{}", std::process::id()));
        let script = format!(
            "setsid sh -c 'sleep 2; touch {}' & echo started",
            marker.display()
        );
        let (status, out) = run(Plan::new(Some(ns)), &script);
        assert!(status.success(), "{out}");
        std::thread::sleep(std::time::Duration::from_millis(2500));
        assert!(
            !marker.exists(),
            "the setsid'd process survived the namespace"
        );
    }

    #[test]
    fn readonly_binds_protect_a_dir_inside_a_writable_one() {
        let Some(Namespace { user, .. }) = namespace() else {
            return;
        };
        let _ = user;
        let dir = std::env::temp_dir().join(format!("git-agent-isolate-ro-{}", std::process::id()));
        let git = dir.join(".git");
        std::fs::create_dir_all(&git).unwrap();
        let ns = Namespace::new(
            matches!(probe(), Isolation::Namespace { user: true }),
            std::slice::from_ref(&git),
        );
        let script = format!(
            "cd {d} && echo top > top.txt && echo ok-top; echo x > .git/config 2>/dev/null || echo ro-git",
            d = dir.display()
        );
        let (status, out) = run(Plan::new(Some(ns)), &script);
        assert!(status.success(), "{out}");
        assert!(out.contains("ok-top") && out.contains("ro-git"), "{out}");
        assert!(dir.join("top.txt").exists());
        assert!(!git.join("config").exists());
        // Only inside the command's namespace: the agent still writes there.
        std::fs::write(git.join("config"), "[core]\n").unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
