//! The mechanics of isolating a command (Linux): the supervisor S, the namespace init G and the command B
//! that `safety::isolate` describes, the namespaces, the mounts and S's watch on the agent.
//!
//! S is this binary started afresh (`/proc/self/exe __supervise ...`, which [`supervise_if_asked()`] answers
//! first thing in `main`), and std starts it with `posix_spawn`: the agent's memory is never copied. A fork
//! of the agent (13 MB resident, a dozen threads) copies its page tables, write-protects every page it has
//! written (its next write to each then faults), and tears the copy down again; S, G and B were three such
//! forks a command, a fifth of a small session's CPU (issue 29, docs/performance.md). Now S, G and B are
//! single-threaded processes of their own that hold nothing of the agent's memory, keys included, and that
//! fork each other as any program does.
//!
//! Elsewhere ([`LINUX_LAYER`](super::LINUX_LAYER) off) there are no namespaces and no supervisor:
//! [`namespace_support()`] says so, and [`Plan::command()`] starts the program itself, so its process group
//! is still signalled by the agent but a background process it leaves does not die with the agent.

#[cfg(all(test, target_os = "linux", not(git_agent_portable)))]
pub use linux::SUPERVISE;
#[cfg(all(target_os = "linux", not(git_agent_portable)))]
pub use linux::{namespace_support, supervise_if_asked, Namespace, Plan};
#[cfg(not(all(target_os = "linux", not(git_agent_portable))))]
pub use portable::{namespace_support, supervise_if_asked, Namespace, Plan};

#[cfg(all(target_os = "linux", not(git_agent_portable)))]
mod linux {
    use std::ffi::{CStr, CString, OsStr, OsString};
    use std::io;
    use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::CommandExt;
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::sync::OnceLock;
    use std::time::Duration;

    use rustix::fs::{Mode, OFlags, StatVfsMountFlags};
    use rustix::io::Errno;
    use rustix::mount::{MountFlags, MountPropagationFlags, UnmountFlags};
    use rustix::process::{DumpableBehavior, Pid, Signal, WaitOptions};
    use rustix::thread::UnshareFlags;

    use super::super::sandbox::Restriction;

    /// The first argument that makes this binary S (never typed by a user, never in `--help`).
    pub const SUPERVISE: &str = "__supervise";

    /// Namespaces can be tried here; the caller's probe says whether the kernel allows them.
    pub fn namespace_support() -> Result<(), String> {
        Ok(())
    }

    /// The namespaces of one command.
    #[derive(Clone, Debug)]
    pub struct Namespace {
        /// Whether a user namespace is needed (not root); S maps the user to itself in it.
        user: bool,
        /// Paths bound read-only over themselves (the git dir of a `--here` work tree).
        readonly: Vec<PathBuf>,
    }

    impl Namespace {
        /// `user`: whether to create a user namespace; `readonly`: paths that must be read-only to the
        /// command.
        pub fn new(user: bool, readonly: &[PathBuf]) -> Namespace {
            Namespace {
                user,
                readonly: readonly.to_vec(),
            }
        }
    }

    /// How one command is started: under a supervisor, in namespaces or not.
    #[derive(Clone, Debug)]
    pub struct Plan {
        namespace: Option<Namespace>,
        /// B exits 0 where it would go on to exec: a probe of the set-up alone.
        probe: bool,
    }

    impl Plan {
        pub fn new(namespace: Option<Namespace>) -> Plan {
            Plan {
                namespace,
                probe: false,
            }
        }

        /// The same plan, whose command process exits 0 instead of exec'ing: what a probe of the namespaces
        /// needs, without a program's start.
        pub fn probe_only(mut self) -> Plan {
            self.probe = true;
            self
        }

        /// A command that starts `program` as B under this plan: S is this binary, started afresh. The
        /// caller adds `program`'s arguments, environment, directory and streams as to any `Command` (S
        /// passes them all on), and must make it lead its own process group (`process_group(0)`): that group
        /// is what the agent signals. `program` is looked up here, in `search_path` or the agent's `PATH`, so
        /// a missing one fails now, as a spawn would (`NotFound`); `restriction` applies to B alone.
        pub fn command(
            &self,
            program: &OsStr,
            search_path: Option<&OsStr>,
            restriction: Option<&Restriction>,
        ) -> io::Result<Command> {
            let exec = find_program(program, search_path)?;
            let mut cmd = Command::new(own_binary()?);
            cmd.arg0("git-agent").arg(SUPERVISE);
            cmd.arg("--agent").arg(std::process::id().to_string());
            if let Some(ns) = &self.namespace {
                cmd.arg(if ns.user {
                    "--user-namespace"
                } else {
                    "--namespace"
                });
                for path in &ns.readonly {
                    cmd.arg("--readonly").arg(path);
                }
            }
            if let Some(restriction) = restriction {
                restriction.push_args(&mut cmd);
            }
            if self.probe {
                cmd.arg("--probe");
            }
            cmd.arg("--exec").arg(exec).arg("--").arg(program);
            Ok(cmd)
        }
    }

    /// This very binary, to start as S: `/proc/self/exe` names the running image even after the file was
    /// replaced (an upgrade during a session), so S always speaks this build's arguments.
    fn own_binary() -> io::Result<PathBuf> {
        static OWN: OnceLock<Option<PathBuf>> = OnceLock::new();
        OWN.get_or_init(|| {
            let proc = Path::new("/proc/self/exe");
            if proc.exists() {
                Some(proc.to_path_buf())
            } else {
                std::env::current_exe().ok()
            }
        })
        .clone()
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "cannot find the agent's own binary to supervise the command (is /proc mounted?)",
            )
        })
    }

    /// Where `program` is: as given when it names a path (`/` in it), else the first executable file of
    /// that name in `search_path` (or `PATH`; an empty entry is the current directory), as `execvp` looks.
    fn find_program(program: &OsStr, search_path: Option<&OsStr>) -> io::Result<PathBuf> {
        if program.as_bytes().contains(&b'/') {
            return Ok(PathBuf::from(program));
        }
        let path = match search_path {
            Some(path) => path.to_os_string(),
            None => {
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into())
            }
        };
        for dir in path.as_bytes().split(|&b| b == b':') {
            let dir = if dir.is_empty() {
                Path::new(".")
            } else {
                Path::new(OsStr::from_bytes(dir))
            };
            let candidate = dir.join(program);
            let executable = rustix::fs::access(&candidate, rustix::fs::Access::EXEC_OK).is_ok();
            if executable && candidate.metadata().is_ok_and(|m| m.is_file()) {
                return Ok(candidate);
            }
        }
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} not found on PATH", program.to_string_lossy()),
        ))
    }

    /// What S was asked to do, from its command line (written by [`Plan::command()`]).
    struct Job {
        agent: Option<Pid>,
        namespace: Option<Namespace>,
        restriction: Option<Restriction>,
        probe: bool,
        exec: PathBuf,
        /// B's argv, its argv[0] first.
        argv: Vec<OsString>,
    }

    impl Job {
        fn parse(mut args: impl Iterator<Item = OsString>) -> Result<Job, String> {
            let mut job = Job {
                agent: None,
                namespace: None,
                restriction: None,
                probe: false,
                exec: PathBuf::new(),
                argv: Vec::new(),
            };
            let mut readonly = Vec::new();
            let mut landlock: Option<(i32, Vec<PathBuf>, bool)> = None;
            let mut user = None;
            while let Some(arg) = args.next() {
                let mut value = || {
                    args.next()
                        .ok_or(format!("{} needs a value", arg.to_string_lossy()))
                };
                match arg.to_str() {
                    Some("--agent") => {
                        let pid = value()?.to_str().and_then(|v| v.parse().ok());
                        job.agent = pid.and_then(Pid::from_raw);
                    }
                    Some("--namespace") => user = Some(false),
                    Some("--user-namespace") => user = Some(true),
                    Some("--readonly") => readonly.push(PathBuf::from(value()?)),
                    Some("--landlock") => {
                        let abi = value()?.to_str().and_then(|v| v.parse().ok()).unwrap_or(0);
                        landlock.get_or_insert((abi, Vec::new(), true)).0 = abi;
                    }
                    Some("--writable") => {
                        let path = PathBuf::from(value()?);
                        landlock.get_or_insert((0, Vec::new(), true)).1.push(path);
                    }
                    Some("--offline") => landlock.get_or_insert((0, Vec::new(), true)).2 = false,
                    Some("--probe") => job.probe = true,
                    Some("--exec") => job.exec = PathBuf::from(value()?),
                    Some("--") => {
                        job.argv = args.collect();
                        break;
                    }
                    _ => return Err(format!("unknown argument {}", arg.to_string_lossy())),
                }
            }
            if job.argv.is_empty() || job.exec.as_os_str().is_empty() {
                return Err("no command to run".into());
            }
            job.namespace = user.map(|user| Namespace { user, readonly });
            job.restriction = match landlock {
                Some((abi, writable, network)) => {
                    Some(Restriction::build(abi, &writable, network)?)
                }
                None => None,
            };
            Ok(job)
        }
    }

    /// S's entry: when this process was started as S (`git-agent __supervise ...`), it supervises and exits
    /// here; otherwise it returns at once. Called first thing in `main`.
    pub fn supervise_if_asked() {
        let mut args = std::env::args_os();
        if args.nth(1).as_deref() != Some(OsStr::new(SUPERVISE)) {
            return;
        }
        match Job::parse(args) {
            Ok(job) => start(job),
            Err(why) => fail(&format!("git-agent {SUPERVISE}: {why}"), 125),
        }
    }

    /// One line on standard error (the command's output, where the agent reads why it did not run), then
    /// `_exit(code)`.
    fn fail(message: &str, code: i32) -> ! {
        let line = format!("{message}\n");
        let _ = rustix::io::write(rustix::stdio::stderr(), line.as_bytes());
        super::super::process::exit_now(code)
    }

    /// S: watch the agent, enter the namespaces, fork G and supervise; G forks B and reaps; B applies the
    /// sandbox and execs the command.
    fn start(job: Job) -> ! {
        let _ = rustix::thread::set_name(c"git-agent-run");
        // G (a fork) inherits it; B's exec resets it.
        let _ = rustix::process::set_dumpable_behavior(DumpableBehavior::NotDumpable);
        let watch = AgentWatch::new(job.agent);
        if let Some(ns) = &job.namespace {
            if let Err(e) = enter_namespaces(ns) {
                fail(&format!("git-agent: cannot isolate the command: {e}"), 125);
            }
        }
        let Ok((status_read, status_write)) =
            rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        else {
            fail("git-agent: cannot supervise the command: no pipe", 125)
        };
        if let Some(init) = fork_or_fail() {
            drop(status_write);
            supervise(init, status_read, watch);
        }
        // G.
        drop(status_read);
        drop(watch);
        if let Some(ns) = &job.namespace {
            if let Err(e) = mount_private(ns) {
                fail(&format!("git-agent: cannot isolate the command: {e}"), 125);
            }
        }
        if let Some(command) = fork_or_fail() {
            reap(command, status_write);
        }
        // B: the command.
        drop(status_write);
        if job.probe {
            super::super::process::exit_now(0);
        }
        if let Some(restriction) = &job.restriction {
            if let Err(e) = restriction.apply() {
                fail(&format!("git-agent: cannot sandbox the command: {e}"), 126);
            }
        }
        let Some((argv0, args)) = job.argv.split_first() else {
            fail("git-agent: no command to run", 125)
        };
        let err = Command::new(&job.exec).arg0(argv0).args(args).exec();
        let code = if err.kind() == io::ErrorKind::NotFound {
            127
        } else {
            126
        };
        fail(
            &format!("git-agent: cannot run {}: {err}", argv0.to_string_lossy()),
            code,
        )
    }

    /// How S learns that the agent is gone, even by SIGKILL: a pidfd of the agent (Linux 5.3) turns
    /// readable when it exits. A parent-death signal would not do: it fires when the *thread* that spawned
    /// S exits, and commands are started from tokio's short-lived blocking threads.
    enum AgentWatch {
        Pidfd(OwnedFd),
        /// No pidfd (an older kernel): S checks its parent every [`PARENT_CHECK`].
        Parent(Pid),
        /// Started without an agent to watch (a test, or a user running `__supervise` by hand).
        Nobody,
    }

    const PARENT_CHECK: Duration = Duration::from_millis(200);

    impl AgentWatch {
        fn new(agent: Option<Pid>) -> AgentWatch {
            let Some(agent) = agent else {
                return AgentWatch::Nobody;
            };
            let watch =
                match rustix::process::pidfd_open(agent, rustix::process::PidfdFlags::empty()) {
                    Ok(fd) => AgentWatch::Pidfd(fd),
                    Err(_) => AgentWatch::Parent(agent),
                };
            // After the pidfd: if the agent is still S's parent now, the pidfd is the agent's and not a
            // later process's that reused its id.
            if rustix::process::getppid() != Some(agent) {
                agent_gone();
            }
            watch
        }

        fn fd(&self) -> Option<&OwnedFd> {
            match self {
                AgentWatch::Pidfd(fd) => Some(fd),
                _ => None,
            }
        }
    }

    /// Nobody will ever read the command's output or stop it: the whole group goes.
    fn agent_gone() -> ! {
        let _ = rustix::process::kill_current_process_group(Signal::KILL);
        super::super::process::exit_now(137)
    }

    /// S: ignore the group's termination signals, close everything but the status pipe and the watch,
    /// wait for G's report (or the agent's end), and end as the command did.
    fn supervise(init: Pid, status_read: OwnedFd, watch: AgentWatch) -> ! {
        use rustix::event::{PollFd, PollFlags, Timespec};
        calm_signals();
        close_all_but(&[
            status_read.as_raw_fd(),
            watch.fd().map_or(-1, |fd| fd.as_raw_fd()),
        ]);
        let tick = Timespec {
            tv_sec: 0,
            tv_nsec: PARENT_CHECK.as_nanos() as i64,
        };
        let mut report = [0u8; 4];
        let mut got = 0usize;
        loop {
            let mut fds = [PollFd::new(&status_read, PollFlags::IN)];
            let mut both;
            let fds: &mut [PollFd<'_>] = match watch.fd() {
                Some(fd) => {
                    both = [
                        PollFd::new(&status_read, PollFlags::IN),
                        PollFd::new(fd, PollFlags::IN),
                    ];
                    &mut both
                }
                None => &mut fds,
            };
            let timeout = matches!(watch, AgentWatch::Parent(_)).then_some(&tick);
            match rustix::event::poll(fds, timeout) {
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(_) => break,
            }
            let pidfd_ready = fds.get(1).is_some_and(|fd| !fd.revents().is_empty());
            let parent_gone = matches!(watch, AgentWatch::Parent(agent) if rustix::process::getppid() != Some(agent));
            if pidfd_ready || parent_gone {
                agent_gone();
            }
            if !fds[0].revents().is_empty() {
                match rustix::io::read(&status_read, &mut report[got..]) {
                    Ok(n) if n > 0 => {
                        got += n;
                        if got < report.len() {
                            continue;
                        }
                    }
                    Err(Errno::INTR) => continue,
                    _ => {}
                }
                break;
            }
        }
        let init_status = loop {
            match rustix::process::waitpid(Some(init), WaitOptions::empty()) {
                Err(Errno::INTR) => continue,
                Ok(Some((_, status))) => break status.as_raw(),
                _ => break 0,
            }
        };
        let status = if got == report.len() {
            i32::from_ne_bytes(report)
        } else {
            // G ended before B did: killed, or a namespace step failed (G said why on stderr).
            init_status
        };
        end_like(status)
    }

    /// S is started from whatever binary runs the agent: git-agent, or a program that uses it as a library
    /// (its tests, `tests/session_api.rs`), whose `main` is not git-agent's. So the library answers
    /// [`super::SUPERVISE`] in any binary that links it, before that binary's `main` (glibc runs
    /// `.init_array` functions after std's own, which records the arguments). Elsewhere (musl) git-agent's
    /// `main` answers it.
    #[cfg(target_env = "gnu")]
    #[used]
    #[link_section = ".init_array"]
    static SUPERVISE_BEFORE_MAIN: extern "C" fn() = {
        extern "C" fn supervise_before_main() {
            supervise_if_asked();
        }
        supervise_before_main
    };

    /// The flags of the mount `path` is on, as `mount(2)` spells them.
    fn mount_flags(path: &Path) -> MountFlags {
        let Ok(st) = rustix::fs::statvfs(path) else {
            return MountFlags::empty();
        };
        let pairs = [
            (StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
            (StatVfsMountFlags::NODEV, MountFlags::NODEV),
            (StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
            (StatVfsMountFlags::NOATIME, MountFlags::NOATIME),
            (StatVfsMountFlags::NODIRATIME, MountFlags::NODIRATIME),
            (StatVfsMountFlags::RELATIME, MountFlags::RELATIME),
        ];
        pairs
            .iter()
            .filter(|(st_flag, _)| st.f_flag.contains(*st_flag))
            .fold(MountFlags::empty(), |acc, (_, ms)| acc | *ms)
    }

    /// G: reap every child until the command exits, then report its wait status to S and exit (in a PID
    /// namespace, the kernel then kills what is left of it).
    fn reap(command: Pid, status_write: OwnedFd) -> ! {
        calm_signals();
        close_all_but(&[status_write.as_raw_fd()]);
        loop {
            match rustix::process::wait(WaitOptions::empty()) {
                Ok(Some((pid, status))) if pid == command => {
                    let _ = rustix::io::write(&status_write, &status.as_raw().to_ne_bytes());
                    super::super::process::exit_now(0);
                }
                Err(Errno::INTR) | Ok(_) => {}
                Err(_) => super::super::process::exit_now(0),
            }
        }
    }

    /// Ends this process the way a child with wait status `status` ended: with its exit code, or killed by
    /// its signal (without a core dump: S is not the program that crashed).
    fn end_like(status: i32) -> ! {
        if libc::WIFSIGNALED(status) {
            let _ = rustix::process::set_dumpable_behavior(DumpableBehavior::NotDumpable);
            die_by(libc::WTERMSIG(status));
        }
        super::super::process::exit_now(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            1
        })
    }

    /// Kills this process with `sig` (its default action restored and unblocked first), or exits `128 + sig`
    /// should it survive.
    fn die_by(sig: i32) -> ! {
        // SAFETY: sigaction, sigprocmask, kill and _exit are async-signal-safe; `action` and `set` are
        // zero-initialised plain data on this stack (a valid empty set and handler-less action) that the calls
        // only read.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &action, std::ptr::null_mut());
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig)
        }
    }

    /// The agent's signal handlers (inherited across fork) would run agent code here: the termination
    /// signals are ignored (the command gets them too, through the group, and decides), everything else is
    /// default.
    fn calm_signals() {
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
            // SAFETY: sigaction is async-signal-safe; `action` is zero-initialised plain data on this stack
            // with a handler of SIG_IGN or SIG_DFL, so no code of ours is ever registered.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = if ignore { libc::SIG_IGN } else { libc::SIG_DFL };
                libc::sigaction(sig, &action, std::ptr::null_mut());
            }
        }
    }

    /// Closes every descriptor but `keep` (negative entries are ignored).
    fn close_all_but(keep: &[RawFd]) {
        let mut sorted = [-1 as RawFd; 4];
        let n = keep.len().min(sorted.len());
        sorted[..n].copy_from_slice(&keep[..n]);
        sorted[..n].sort_unstable();
        let mut from: u32 = 0;
        for &fd in &sorted[..n] {
            if fd < 0 {
                continue;
            }
            let fd = fd as u32;
            if fd > from {
                close_range(from, fd - 1);
            }
            from = fd + 1;
        }
        close_range(from, u32::MAX);
    }

    /// close_range(2) (Linux 5.9), or a loop over the descriptors that can be open.
    fn close_range(first: u32, last: u32) {
        let max = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .map_or(1024, |n| n.min(65_536) as u32);
        // SAFETY: only S and G call this, single-threaded forks that never exec and own every descriptor
        // they inherited; the ones they still use are outside [first, last], so nothing closed here is used
        // again (or closed twice: the OwnedFds they keep are exactly those).
        unsafe {
            if libc::syscall(libc::SYS_close_range, first, last, 0) == 0 {
                return;
            }
            let mut fd = first;
            while fd <= last && fd < max {
                libc::close(fd as RawFd);
                fd += 1;
            }
        }
    }

    /// `fork(2)`: `Some(child)` in the parent, `None` in the child; S or G ends here if it fails.
    fn fork_or_fail() -> Option<Pid> {
        // SAFETY: called only in S and G, single-threaded processes (a fresh start of this binary and its
        // fork) that hold no lock another thread could have held: the child may do anything a program does.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let err = io::Error::last_os_error();
            fail(
                &format!("git-agent: cannot supervise the command: {err}"),
                125,
            );
        }
        Pid::from_raw(pid)
    }

    /// S: a user namespace if needed (mapping the user to itself), then new PID and mount namespaces, which
    /// G (the next process forked) enters as PID 1.
    fn enter_namespaces(ns: &Namespace) -> io::Result<()> {
        if ns.user {
            let uid = rustix::process::getuid().as_raw();
            let gid = rustix::process::getgid().as_raw();
            unshare(UnshareFlags::NEWUSER)?;
            write_proc(c"/proc/self/setgroups", b"deny")?;
            write_proc(c"/proc/self/uid_map", format!("{uid} {uid} 1\n").as_bytes())?;
            write_proc(c"/proc/self/gid_map", format!("{gid} {gid} 1\n").as_bytes())?;
        }
        unshare(UnshareFlags::NEWPID | UnshareFlags::NEWNS)
    }

    fn unshare(flags: UnshareFlags) -> io::Result<()> {
        // SAFETY: only namespace flags, never CLONE_FILES (whose file table split is what makes unshare
        // unsafe), in a single-threaded process.
        Ok(unsafe { rustix::thread::unshare_unsafe(flags) }?)
    }

    /// G: mounts private to the namespace, a `/proc` of the new PID namespace in place of the old one, and
    /// the read-only binds.
    fn mount_private(ns: &Namespace) -> io::Result<()> {
        // Nothing mounted here may propagate back to the user's mount namespace.
        rustix::mount::mount_change(
            c"/",
            MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
        )?;
        // Detached first where allowed (root), so the old /proc is not merely hidden beneath the new one;
        // in a user namespace it is locked, and the new mount covers it.
        let _ = rustix::mount::unmount(c"/proc", UnmountFlags::DETACH);
        rustix::mount::mount(
            c"proc",
            c"/proc",
            c"proc",
            MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
            None,
        )?;
        for path in &ns.readonly {
            // The flags its mount already has: a user namespace may not clear `nosuid`, `nodev`, ... on a
            // remount. A path that cannot be named to the kernel is left out.
            let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else {
                continue;
            };
            let flags = mount_flags(path);
            rustix::mount::mount_bind_recursive(c_path.as_c_str(), c_path.as_c_str())?;
            rustix::mount::mount_remount(
                c_path.as_c_str(),
                MountFlags::BIND | MountFlags::RDONLY | flags,
                c"",
            )?;
        }
        Ok(())
    }

    fn write_proc(path: &CStr, data: &[u8]) -> io::Result<()> {
        let fd = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
        if rustix::io::write(fd.as_fd(), data)? != data.len() {
            return Err(io::Error::from(io::ErrorKind::WriteZero));
        }
        Ok(())
    }
}

#[cfg(not(all(target_os = "linux", not(git_agent_portable))))]
mod portable {
    use std::ffi::OsStr;
    use std::io;
    use std::path::PathBuf;
    use std::process::Command;

    use super::super::sandbox::Restriction;

    /// Why commands share the agent's view of processes here.
    pub fn namespace_support() -> Result<(), String> {
        Err("PID namespaces exist only on Linux; a command's background processes may also outlive the agent here".into())
    }

    /// Never made: [`namespace_support()`] fails, so callers never ask for a namespace.
    #[derive(Clone, Debug)]
    pub struct Namespace {}

    impl Namespace {
        pub fn new(_user: bool, _readonly: &[PathBuf]) -> Namespace {
            Namespace {}
        }
    }

    /// Never S here: there is no supervisor.
    pub fn supervise_if_asked() {}

    /// Commands start as std starts them: in their own process group (the caller's `process_group(0)`),
    /// without a supervisor.
    #[derive(Clone, Debug)]
    pub struct Plan {
        probe: bool,
    }

    impl Plan {
        pub fn new(_namespace: Option<Namespace>) -> Plan {
            Plan { probe: false }
        }

        pub fn probe_only(mut self) -> Plan {
            self.probe = true;
            self
        }

        /// `program` itself (std looks it up when it starts); a probe runs nothing but `true`. There is no
        /// sandbox here (`restriction` cannot be made).
        pub fn command(
            &self,
            program: &OsStr,
            _search_path: Option<&OsStr>,
            restriction: Option<&Restriction>,
        ) -> io::Result<Command> {
            if let Some(restriction) = restriction {
                match *restriction {}
            }
            Ok(Command::new(if self.probe {
                OsStr::new("true")
            } else {
                program
            }))
        }
    }
}
