//! The `errno` values callers tell apart (`io::Error::raw_os_error()`), named once for every Unix.

// Told apart only by the Linux layer's checkout watcher so far.
#[cfg_attr(
    not(all(target_os = "linux", not(git_agent_portable))),
    allow(dead_code)
)]
pub const ENOENT: i32 = libc::ENOENT;
#[cfg_attr(
    not(all(target_os = "linux", not(git_agent_portable))),
    allow(dead_code)
)]
pub const EACCES: i32 = libc::EACCES;
pub const ENOTDIR: i32 = libc::ENOTDIR;
pub const ELOOP: i32 = libc::ELOOP;
pub const EXDEV: i32 = libc::EXDEV;
pub const ENOSYS: i32 = libc::ENOSYS;
