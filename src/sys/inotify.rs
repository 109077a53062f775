//! inotify (Linux): a queue of events for every create, delete, write, attribute change and rename in the
//! watched directories. Built only with the Linux layer, like its one user (the checkout's watcher); elsewhere
//! the checkout is scanned instead (what the watcher does when the queue overflows).

use std::io;
#[cfg(all(target_os = "linux", not(git_agent_portable)))]
use std::os::fd::OwnedFd;
use std::path::Path;

/// The event bits, as `<sys/inotify.h>` numbers them (the kernel's ABI).
pub mod mask {
    pub const MODIFY: u32 = 0x0000_0002;
    pub const ATTRIB: u32 = 0x0000_0004;
    pub const CLOSE_WRITE: u32 = 0x0000_0008;
    pub const MOVED_FROM: u32 = 0x0000_0040;
    pub const MOVED_TO: u32 = 0x0000_0080;
    pub const CREATE: u32 = 0x0000_0100;
    pub const DELETE: u32 = 0x0000_0200;
    pub const DELETE_SELF: u32 = 0x0000_0400;
    pub const MOVE_SELF: u32 = 0x0000_0800;
    pub const UNMOUNT: u32 = 0x0000_2000;
    pub const Q_OVERFLOW: u32 = 0x0000_4000;
    pub const IGNORED: u32 = 0x0000_8000;
    pub const ONLYDIR: u32 = 0x0100_0000;
    pub const DONT_FOLLOW: u32 = 0x0200_0000;
    pub const EXCL_UNLINK: u32 = 0x0400_0000;
    pub const ISDIR: u32 = 0x4000_0000;
}

/// One event: the watch it came from, its bits, and the entry it names (none for the directory itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub wd: i32,
    pub mask: u32,
    pub name: Option<Vec<u8>>,
}

/// A non-blocking, close-on-exec inotify instance.
pub struct Inotify {
    #[cfg(all(target_os = "linux", not(git_agent_portable)))]
    fd: OwnedFd,
}

#[cfg(all(target_os = "linux", not(git_agent_portable)))]
impl Inotify {
    pub fn new() -> io::Result<Inotify> {
        use rustix::fs::inotify::{self, CreateFlags};
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)?;
        Ok(Inotify { fd })
    }

    /// Watches `dir` for the events of `mask`; returns the watch descriptor events carry.
    pub fn add_watch(&self, dir: &Path, mask: u32) -> io::Result<i32> {
        use rustix::fs::inotify::{self, WatchFlags};
        Ok(inotify::add_watch(
            &self.fd,
            dir,
            WatchFlags::from_bits_retain(mask),
        )?)
    }

    /// Stops a watch, best effort (the kernel may have dropped it already).
    pub fn remove_watch(&self, wd: i32) {
        let _ = rustix::fs::inotify::remove_watch(&self.fd, wd);
    }

    /// Reads queued events into `buf`; `WouldBlock` when the queue is empty.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(rustix::io::read(&self.fd, buf)?)
    }
}

/// Decodes a buffer of `struct inotify_event`s (`wd`, `mask`, `cookie`, `len`, then `len` bytes of
/// NUL-padded name), in the machine's byte order.
pub fn parse(mut buf: &[u8], out: &mut Vec<Event>) {
    const HEADER: usize = 16;
    let word = |b: &[u8], at: usize| [b[at], b[at + 1], b[at + 2], b[at + 3]];
    while buf.len() >= HEADER {
        let wd = i32::from_ne_bytes(word(buf, 0));
        let mask = u32::from_ne_bytes(word(buf, 4));
        let len = u32::from_ne_bytes(word(buf, 12)) as usize;
        let end = (HEADER + len).min(buf.len());
        let name = &buf[HEADER..end];
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        out.push(Event {
            wd,
            mask,
            name: (!name.is_empty()).then(|| name.to_vec()),
        });
        buf = &buf[end..];
    }
}
