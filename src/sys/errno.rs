//! The `errno` values callers tell apart (`io::Error::raw_os_error()`), named once for every Unix.

pub const ENOENT: i32 = libc::ENOENT;
pub const EACCES: i32 = libc::EACCES;
pub const ENOTDIR: i32 = libc::ENOTDIR;
pub const ELOOP: i32 = libc::ELOOP;
pub const EXDEV: i32 = libc::EXDEV;
pub const ENOSYS: i32 = libc::ENOSYS;
