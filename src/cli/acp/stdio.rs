//! The protocol's streams, taken away from fds 0 and 1 before anything else runs.
//!
//! ACP owns stdout: one stray line (a `println!`, a warning, a git child that inherits fd 1) breaks the
//! client's parser, and a child that inherits fd 0 could eat the client's messages. So the protocol gets
//! private, close-on-exec copies of both, fd 1 becomes a copy of stderr (whatever else prints lands in the
//! log) and fd 0 reads `/dev/null`. No child process ever sees the protocol streams.

use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// The protocol's input and output.
pub(super) fn take() -> io::Result<(File, File)> {
    let input = private_copy(0)?;
    let output = private_copy(1)?;
    // SAFETY: dup2 and open on descriptors this process owns; fds 0 and 1 are replaced, not closed.
    unsafe {
        if libc::dup2(2, 1) < 0 {
            return Err(io::Error::last_os_error());
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if null < 0 {
            return Err(io::Error::last_os_error());
        }
        let replaced = libc::dup2(null, 0);
        libc::close(null);
        if replaced < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((File::from(input), File::from(output)))
}

/// A close-on-exec duplicate of `fd`, numbered above the standard streams.
fn private_copy(fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC makes a new descriptor that nothing else owns; it is owned from here on.
    unsafe {
        let copy = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3);
        if copy < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(copy))
    }
}
