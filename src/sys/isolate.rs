//! The mechanics of isolating a `run` command (Linux): the supervisor S, the namespace init G and the
//! command B that `safety::isolate` describes, the namespaces, the mounts and the agent's lifeline. S and G
//! are forks of the agent that never exec, so everything between the fork and their `_exit` makes only
//! async-signal-safe system calls on data prepared before the fork (rustix's calls take `&CStr` paths and
//! stack buffers: no allocation).
//!
//! Elsewhere ([`LINUX_LAYER`](super::LINUX_LAYER) off) there are no namespaces and no supervisor:
//! [`namespace_support()`] says so, and [`Plan::install()`] leaves the command as it is, so its process group
//! is still signalled by the agent but a background process it leaves does not die with the agent.

#[cfg(all(target_os = "linux", not(git_agent_portable)))]
pub use linux::{namespace_context, namespace_support, Namespace, Plan};
#[cfg(not(all(target_os = "linux", not(git_agent_portable))))]
pub use portable::{namespace_context, namespace_support, Namespace, Plan};

#[cfg(all(target_os = "linux", not(git_agent_portable)))]
mod linux {
    use std::ffi::{CStr, CString};
    use std::io;
    use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::CommandExt;
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::sync::OnceLock;

    use rustix::fs::{Mode, OFlags, StatVfsMountFlags};
    use rustix::io::Errno;
    use rustix::mount::{MountFlags, MountPropagationFlags, UnmountFlags};
    use rustix::process::{DumpableBehavior, Pid, Signal, WaitOptions};
    use rustix::thread::UnshareFlags;

    use super::super::signal::Disposition;

    /// What decides whether this process may make namespaces: this boot of the kernel, the effective user,
    /// the user, mount and PID namespaces the process itself runs in (a container and its host share a
    /// boot, not these), its capabilities, seccomp filters (a wrapper that refuses `unshare` adds one) and
    /// security label, and the settings that allow user namespaces (`user.max_user_namespaces`, Debian's and Ubuntu's
    /// switches where they exist). `None` where the boot or a namespace cannot be read.
    pub fn namespace_context() -> Option<String> {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let euid = rustix::process::geteuid().as_raw();
        let mut context = format!("{} uid {euid}", boot.trim());
        for kind in ["user", "mnt", "pid"] {
            let link = std::fs::read_link(format!("/proc/self/ns/{kind}")).ok()?;
            context.push(' ');
            context.push_str(link.to_str()?);
        }
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let wanted = ["CapEff:", "NoNewPrivs:", "Seccomp:", "Seccomp_filters:"];
        for line in status
            .lines()
            .filter(|l| wanted.iter().any(|w| l.starts_with(w)))
        {
            context.push(' ');
            context.extend(line.split_whitespace());
        }
        // The security module's label (AppArmor's profile, SELinux's context), where there is one.
        if let Ok(label) = std::fs::read_to_string("/proc/self/attr/current") {
            context.push_str(&format!(" label={}", label.trim_end_matches(['\0', '\n'])));
        }
        for setting in [
            "/proc/sys/user/max_user_namespaces",
            "/proc/sys/kernel/unprivileged_userns_clone",
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
        ] {
            if let Ok(value) = std::fs::read_to_string(setting) {
                let name = setting.rsplit('/').next().unwrap_or(setting);
                context.push_str(&format!(" {name}={}", value.trim()));
            }
        }
        Some(context)
    }

    /// Namespaces can be tried here; the caller's probe says whether the kernel allows them.
    pub fn namespace_support() -> Result<(), String> {
        Ok(())
    }

    /// The namespaces of one command, prepared in the parent (the child may not allocate).
    #[derive(Clone, Debug)]
    pub struct Namespace {
        /// `uid_map` and `gid_map` lines when a user namespace is needed (not root).
        user: Option<(Vec<u8>, Vec<u8>)>,
        /// Paths bound read-only over themselves, with the flags their mount already has (a user namespace
        /// may not clear `nosuid`, `nodev`, ... on a remount).
        readonly: Vec<(CString, MountFlags)>,
    }

    impl Namespace {
        /// `user`: whether to create a user namespace; `readonly`: paths that must be read-only to the
        /// command (the git dir of a `--here` work tree). A path that cannot be named to the kernel is left
        /// out.
        pub fn new(user: bool, readonly: &[PathBuf]) -> Namespace {
            let user = user.then(|| {
                let uid = rustix::process::getuid().as_raw();
                let gid = rustix::process::getgid().as_raw();
                (
                    format!("{uid} {uid} 1\n").into_bytes(),
                    format!("{gid} {gid} 1\n").into_bytes(),
                )
            });
            let readonly = readonly
                .iter()
                .filter_map(|p| {
                    Some((CString::new(p.as_os_str().as_bytes()).ok()?, mount_flags(p)))
                })
                .collect();
            Namespace { user, readonly }
        }
    }

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

    /// The read end of the agent's lifeline: a pipe whose write end only the agent holds (both ends are
    /// close-on-exec, and the supervisors close every descriptor they inherit). `None` if no pipe could be
    /// made.
    fn lifeline() -> Option<&'static OwnedFd> {
        static LIFELINE: OnceLock<Option<(OwnedFd, OwnedFd)>> = OnceLock::new();
        LIFELINE
            .get_or_init(|| rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).ok())
            .as_ref()
            .map(|(read, _write)| read)
    }

    /// Where the agent's heap starts (`start_brk`, field 47 of `/proc/self/stat`, rounded up to a page), read
    /// once: S and G give their copy of the heap back after their last fork ([`release_heap()`]). `None` if
    /// it cannot be read.
    fn heap_start() -> Option<usize> {
        static START: OnceLock<Option<usize>> = OnceLock::new();
        *START.get_or_init(|| {
            let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
            // Fields after the command name (which may hold spaces and parentheses) start at field 3.
            let fields = stat.rsplit_once(')')?.1;
            let start: usize = fields.split_whitespace().nth(47 - 3)?.parse().ok()?;
            let page = rustix::param::page_size();
            // madvise takes whole pages: the first whole page of the heap on.
            start.checked_next_multiple_of(page)
        })
    }

    /// How one command is started: under a supervisor, in namespaces or not.
    #[derive(Clone, Debug)]
    pub struct Plan {
        namespace: Option<Namespace>,
        lifeline: Option<&'static OwnedFd>,
        /// See [`heap_start()`].
        heap: Option<usize>,
        /// B exits 0 where it would go on to exec: a probe of the set-up alone.
        probe: bool,
    }

    impl Plan {
        pub fn new(namespace: Option<Namespace>) -> Plan {
            Plan {
                namespace,
                lifeline: lifeline(),
                heap: heap_start(),
                probe: false,
            }
        }

        /// The same plan, whose command process exits 0 instead of exec'ing (nor running any later
        /// `pre_exec`): what a probe of the namespaces needs, without a program's start.
        pub fn probe_only(mut self) -> Plan {
            self.probe = true;
            self
        }

        /// Makes `cmd`'s child the supervisor S. Install this before any other `pre_exec` (the sandbox's),
        /// which then runs in the command's own process only. `cmd` must lead its own process group
        /// (`process_group(0)`): that is what the agent signals.
        pub fn install(self, cmd: &mut Command) {
            // SAFETY: the closure runs between fork and exec and makes only async-signal-safe system calls on
            // data prepared before the fork (see `start`); it allocates nothing.
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
        let (status_read, status_write) =
            rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        if let Some(init) = fork()? {
            drop(status_write);
            supervise(init, status_read, plan.lifeline, plan.heap);
        }
        // G.
        drop(status_read);
        let _ = rustix::process::set_dumpable_behavior(DumpableBehavior::NotDumpable);
        if let Some(ns) = &plan.namespace {
            mount_private(ns)?;
        }
        match fork()? {
            Some(command) => reap(command, status_write, plan.heap),
            None => {
                // B: the command. std goes on with the sandbox's pre_exec and exec.
                drop(status_write);
                if plan.probe {
                    super::super::process::exit_now(0);
                }
                Ok(())
            }
        }
    }

    /// S: ignore the group's termination signals, close everything but the status pipe and the lifeline,
    /// wait for G's report (or the agent's death), and end as the command did.
    fn supervise(
        init: Pid,
        status_read: OwnedFd,
        lifeline: Option<&'static OwnedFd>,
        heap: Option<usize>,
    ) -> ! {
        use rustix::event::{PollFd, PollFlags};
        let _ = rustix::process::set_dumpable_behavior(DumpableBehavior::NotDumpable);
        calm_signals();
        close_all_but(&[
            status_read.as_raw_fd(),
            lifeline.map_or(-1, |fd| fd.as_raw_fd()),
        ]);
        release_heap(heap);
        let mut report = [0u8; 4];
        let mut got = 0usize;
        loop {
            let mut fds = [PollFd::new(&status_read, PollFlags::IN)];
            let mut both;
            let fds: &mut [PollFd<'_>] = match lifeline {
                Some(line) => {
                    both = [
                        PollFd::new(&status_read, PollFlags::IN),
                        PollFd::new(line, PollFlags::IN),
                    ];
                    &mut both
                }
                None => &mut fds,
            };
            match rustix::event::poll(fds, None) {
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(_) => break,
            }
            if fds.get(1).is_some_and(|line| !line.revents().is_empty()) {
                // The agent is gone: nobody will ever read the command's output or stop it.
                let _ = rustix::process::kill_current_process_group(Signal::KILL);
                super::super::process::exit_now(137);
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
            // G ended before B did: killed, or a namespace step failed (std has reported that error).
            init_status
        };
        end_like(status)
    }

    /// G: reap every child until the command exits, then report its wait status to S and exit (in a PID
    /// namespace, the kernel then kills what is left of it).
    fn reap(command: Pid, status_write: OwnedFd, heap: Option<usize>) -> ! {
        calm_signals();
        close_all_but(&[status_write.as_raw_fd()]);
        release_heap(heap);
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

    /// Gives back this process's copy of the agent's heap, from `start` to the current break: S and G call it
    /// after their last fork, from where on they touch only their stack, statics and system calls.
    ///
    /// Why: a fork shares the agent's pages with the child and write-protects them on both sides. While S
    /// and G live (as long as the command), each heap page the agent writes is copied, and on a
    /// multi-threaded agent each copy also flushes the page from the other cores' TLBs (an interrupt to
    /// each). Once no child maps a page, the agent's write only makes it writable again. Right after a
    /// spawn the agent frees the command's arguments and environment, and the allocator's consolidation
    /// writes to chunks all over the heap: with the heap released, the agent's writes to pages a child
    /// still shared fell from 261 to 125 in a 3-step session.
    fn release_heap(start: Option<usize>) {
        let Some(start) = start else { return };
        // SAFETY: brk(0) only reports the break. madvise(MADV_DONTNEED) drops this process's own pages of
        // the heap, which nothing in S or G reads or writes after this point (no allocation, no heap data:
        // see the callers); other processes' pages are untouched.
        unsafe {
            let end = libc::syscall(libc::SYS_brk, 0usize) as usize;
            if end > start {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
            }
        }
    }

    /// Ends this process the way a child with wait status `status` ended: with its exit code, or killed by
    /// its signal (no core dump: this process's memory is the agent's).
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
            super::super::signal::set_disposition(
                sig,
                if ignore {
                    Disposition::Ignore
                } else {
                    Disposition::Default
                },
            );
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

    /// `fork(2)`: `Some(child)` in the parent, `None` in the child.
    fn fork() -> io::Result<Option<Pid>> {
        // SAFETY: called only in S and G, single-threaded children of std's fork, where both sides go on
        // with async-signal-safe calls only (see the module docs).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Pid::from_raw(pid))
    }

    /// S: a user namespace if needed (mapping the user to itself), then new PID and mount namespaces, which
    /// G (the next process forked) enters as PID 1.
    fn enter_namespaces(ns: &Namespace) -> io::Result<()> {
        if let Some((uid_map, gid_map)) = &ns.user {
            unshare(UnshareFlags::NEWUSER)?;
            write_proc(c"/proc/self/setgroups", b"deny")?;
            write_proc(c"/proc/self/uid_map", uid_map)?;
            write_proc(c"/proc/self/gid_map", gid_map)?;
        }
        unshare(UnshareFlags::NEWPID | UnshareFlags::NEWNS)
    }

    fn unshare(flags: UnshareFlags) -> io::Result<()> {
        // SAFETY: only namespace flags, never CLONE_FILES (whose file table split is what makes unshare
        // unsafe), in a single-threaded child.
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
        for (path, flags) in &ns.readonly {
            rustix::mount::mount_bind_recursive(path.as_c_str(), path.as_c_str())?;
            rustix::mount::mount_remount(
                path.as_c_str(),
                MountFlags::BIND | MountFlags::RDONLY | *flags,
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
    use std::path::PathBuf;
    use std::process::Command;

    /// No namespaces here, so nothing to tell one context from another.
    pub fn namespace_context() -> Option<String> {
        None
    }

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

        pub fn install(self, _cmd: &mut Command) {
            let _ = self.probe;
        }
    }
}
