//! The protocol's streams, taken away from fds 0 and 1 before anything else runs.
//!
//! ACP owns stdout: one stray line (a `println!`, a warning, a git child that inherits fd 1) breaks the
//! client's parser, and a child that inherits fd 0 could eat the client's messages. So the protocol gets
//! private, close-on-exec copies of both, fd 1 becomes a copy of stderr (whatever else prints lands in the
//! log) and fd 0 reads `/dev/null`. No child process ever sees the protocol streams.

use std::fs::File;
use std::io;

/// The protocol's input and output.
pub(super) fn take() -> io::Result<(File, File)> {
    crate::sys::stdio::take_protocol_streams()
}
