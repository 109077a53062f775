//! The sandbox of a command's own process (Linux): a Landlock ruleset confining its writes (and TCP, ABI 4+)
//! and a seccomp filter that refuses non-Unix sockets, both built in the agent and applied between fork and
//! exec. Elsewhere there is no Landlock: [`landlock_abi()`] is 0, so `--sandbox auto` runs commands
//! unsandboxed with a warning and an explicit `--sandbox workspace` refuses to run them.

#[cfg(all(target_os = "linux", not(git_agent_portable)))]
pub use linux::{landlock_abi, Restriction};
#[cfg(not(all(target_os = "linux", not(git_agent_portable))))]
pub use portable::{landlock_abi, Restriction};

#[cfg(all(target_os = "linux", not(git_agent_portable)))]
mod linux {
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    use std::path::PathBuf;
    use std::process::Command;

    use landlock::{
        Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
        RulesetAttr, RulesetCreatedAttr, ABI,
    };

    /// The Landlock ABI version of the running kernel (0 when unsupported).
    pub fn landlock_abi() -> i32 {
        const LANDLOCK_CREATE_RULESET_VERSION: libc::c_ulong = 1;
        // SAFETY: the version query passes no pointer the kernel reads (null, size 0) and only flags.
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

    /// A Landlock ruleset and seccomp filter, built.
    pub struct Restriction {
        ruleset: OwnedFd,
        seccomp: Option<Vec<libc::sock_filter>>,
    }

    impl Restriction {
        /// Everything readable, `writable` writable (files get file rights only), the usual devices usable;
        /// without `network`, TCP refused (ABI 4+) and sockets other than Unix ones too (seccomp). `abi_version`
        /// is [`landlock_abi()`], at least 1. The error says what failed.
        pub fn build(
            abi_version: i32,
            writable: &[PathBuf],
            network: bool,
        ) -> Result<Restriction, String> {
            let abi = ABI::from(abi_version);
            let setup = |e: &dyn std::fmt::Display| e.to_string();
            let mut ruleset = Ruleset::default()
                .set_compatibility(CompatLevel::HardRequirement)
                .handle_access(AccessFs::from_all(abi))
                .map_err(|e| setup(&e))?;
            let landlock_net = !network && abi_version >= 4;
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
            for dir in writable {
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
            let fd = fd.ok_or_else(|| "Landlock returned no ruleset".to_string())?;
            Ok(Restriction {
                ruleset: fd,
                seccomp: (!network).then(socket_filter),
            })
        }

        /// Applies it to `cmd`'s child between fork and exec, after any `pre_exec` installed before: no new
        /// privileges, the seccomp filter, then the ruleset.
        pub fn install(self, cmd: &mut Command) {
            let Restriction { ruleset, seccomp } = self;
            // SAFETY: the closure makes only async-signal-safe system calls (prctl, landlock_restrict_self) and
            // allocates nothing: it reads the filter and the ruleset's fd, both built before the fork and owned by
            // the closure for as long as it can run.
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
                    if libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32)
                        != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
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
}

#[cfg(not(all(target_os = "linux", not(git_agent_portable))))]
mod portable {
    use std::path::PathBuf;
    use std::process::Command;

    /// No Landlock here.
    pub fn landlock_abi() -> i32 {
        0
    }

    /// Never built: [`landlock_abi()`] is 0, so callers refuse or fall back before asking for one.
    pub enum Restriction {}

    impl Restriction {
        pub fn build(
            _abi: i32,
            _writable: &[PathBuf],
            _network: bool,
        ) -> Result<Restriction, String> {
            Err("Landlock exists only on Linux".into())
        }

        pub fn install(self, _cmd: &mut Command) {
            match self {}
        }
    }
}
