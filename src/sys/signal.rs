//! Signal numbers, as the exit codes and wait statuses the agent reports spell them (`128 + n`), and what a
//! signal does to this process.

pub const SIGHUP: i32 = libc::SIGHUP;
pub const SIGINT: i32 = libc::SIGINT;
pub const SIGKILL: i32 = libc::SIGKILL;
pub const SIGTERM: i32 = libc::SIGTERM;

/// What a signal does to the process that receives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    Ignore,
    /// The signal's default action, which the Linux layer's children go back to before they exec.
    #[cfg_attr(
        not(all(target_os = "linux", not(git_agent_portable))),
        allow(dead_code)
    )]
    Default,
}

/// Sets what `sig` does to this process. One `sigaction`, which is async-signal-safe, so a child may call
/// it between fork and exec; no handler of ours is ever registered, only "ignore" or the default action.
pub fn set_disposition(sig: i32, disposition: Disposition) {
    // SAFETY: `action` is zero-initialised plain data on this stack (an empty mask, no flags) with a handler
    // of SIG_IGN or SIG_DFL, which sigaction only reads; the old action is not asked for.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = match disposition {
            Disposition::Ignore => libc::SIG_IGN,
            Disposition::Default => libc::SIG_DFL,
        };
        libc::sigaction(sig, &action, std::ptr::null_mut());
    }
}
