//! The standard streams at the descriptor level: ACP's take-over of stdin/stdout, and the one-write
//! `--version` that exits without setting up std's buffered stdout.

use std::fs::File;
use std::io;

use rustix::stdio::{stderr, stdin, stdout};

/// Moves the protocol's streams out of the way of everything else: returns close-on-exec copies of stdin and
/// stdout (numbered above the standard streams), then points fd 1 at stderr and fd 0 at `/dev/null`, so
/// nothing else this process (or a child) prints or reads can corrupt the protocol. Fds 0 and 1 are replaced,
/// never closed, so no later open can take their numbers.
pub fn take_protocol_streams() -> io::Result<(File, File)> {
    let input = rustix::io::fcntl_dupfd_cloexec(stdin(), 3)?;
    let output = rustix::io::fcntl_dupfd_cloexec(stdout(), 3)?;
    rustix::stdio::dup2_stdout(stderr())?;
    let null = File::open("/dev/null")?;
    rustix::stdio::dup2_stdin(&null)?;
    Ok((File::from(input), File::from(output)))
}

/// Writes `line` to stdout in one `write(2)` and exits 0; if that fails, writes `failed` to stderr and exits
/// 1. No buffer to flush, no destructor to run.
pub fn print_and_exit(line: &str, failed: &str) -> ! {
    if rustix::io::write(stdout(), line.as_bytes()) == Ok(line.len()) {
        super::process::exit_now(0);
    }
    let _ = rustix::io::write(stderr(), failed.as_bytes());
    super::process::exit_now(1)
}
