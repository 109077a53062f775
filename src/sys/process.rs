//! Processes: signals to a child's process group, whether a process still exists, waiting for a child's exit
//! on a pidfd (Linux), and leaving this process at once.

use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use rustix::process::{Pid, Signal};

/// Sends `signal` to the process group led by `pid`; true if the group still had members to receive it.
/// The callers' children lead their own groups (`process_group(0)`), and a group id stays reserved while any
/// member lives, so this cannot reach an unrelated process.
pub fn signal_group(pid: u32, signal: i32) -> bool {
    let (Some(pid), Some(signal)) = (pid_of(pid), Signal::from_named_raw(signal)) else {
        return false;
    };
    rustix::process::kill_process_group(pid, signal).is_ok()
}

/// True while the process group led by `pid` has a member (signal 0: nothing is sent); the shell's tests
/// wait for killed groups so.
#[cfg(test)]
pub fn group_exists(pid: u32) -> bool {
    pid_of(pid).is_some_and(|pid| rustix::process::test_kill_process_group(pid).is_ok())
}

/// True while a process `pid` exists, ours to signal or not (signal 0: nothing is sent).
pub fn process_exists(pid: u32) -> bool {
    pid_of(pid).is_some_and(|pid| {
        !matches!(
            rustix::process::test_kill_process(pid),
            Err(rustix::io::Errno::SRCH)
        )
    })
}

/// Kills this process with SIGKILL, as a crash would: no destructor, no flush.
pub fn kill_self() {
    let _ = rustix::process::kill_process(rustix::process::getpid(), Signal::KILL);
}

/// Whether this process runs as root (effective user id 0).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The effective user id, as file owners are compared.
pub fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Ends this process at once with `code` (`_exit(2)`): no atexit handlers, no flush, no destructors.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit has no preconditions and never returns; it is async-signal-safe, so also callable
    // between fork and exec.
    unsafe { libc::_exit(code) }
}

/// Registers `f` to run once when the process exits normally (tests clean their temp directories so).
#[cfg(test)]
pub fn at_exit(f: extern "C" fn()) {
    // SAFETY: registers a plain function that takes nothing and is valid for the whole process.
    unsafe { libc::atexit(f) };
}

/// A descriptor that turns readable when the child `pid` (not reaped yet) exits: a pidfd (Linux 5.3+), or
/// `None` where there is none (an older kernel, another system); then the caller naps instead.
#[cfg(all(target_os = "linux", not(git_agent_portable)))]
pub fn exit_fd(pid: u32) -> Option<OwnedFd> {
    rustix::process::pidfd_open(pid_of(pid)?, rustix::process::PidfdFlags::empty()).ok()
}

#[cfg(not(all(target_os = "linux", not(git_agent_portable))))]
pub fn exit_fd(_pid: u32) -> Option<OwnedFd> {
    None
}

/// Waits up to `timeout` (rounded up to a millisecond) for `fd` to be readable or hung up; true if it is.
pub fn wait_readable(fd: impl AsFd, timeout: Duration) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let fd = fd.as_fd();
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    // Rounded up: a zero timeout would make a caller spin for the last sub-millisecond.
    let ms = timeout.as_micros().div_ceil(1000);
    let timeout = Timespec {
        tv_sec: (ms / 1000).min(i64::MAX as u128) as i64,
        tv_nsec: ((ms % 1000) * 1_000_000) as i64,
    };
    matches!(rustix::event::poll(&mut fds, Some(&timeout)), Ok(n) if n > 0)
}

fn pid_of(pid: u32) -> Option<Pid> {
    Pid::from_raw(i32::try_from(pid).ok()?)
}
