//! The standard streams at the descriptor level: ACP's take-over of stdin/stdout, the one-write `--version`
//! that exits without setting up std's buffered stdout, and standard descriptors that start closed.

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

/// Opens `/dev/null` on each of the descriptors 0, 1 and 2 that the process started without, as std's
/// runtime does before a Rust `main` (`sys::entry` starts without it): a file the agent opens later must
/// never get one of those numbers, or what it prints, and what its commands print, would land in that file.
/// One `poll` tells which are closed, as std finds out.
pub fn fill_standard_fds() {
    use rustix::event::{PollFd, PollFlags};
    use std::os::fd::{AsRawFd, IntoRawFd};
    let (input, output, error) = (stdin(), stdout(), stderr());
    let mut fds = [
        PollFd::new(&input, PollFlags::empty()),
        PollFd::new(&output, PollFlags::empty()),
        PollFd::new(&error, PollFlags::empty()),
    ];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let closed = match rustix::event::poll(&mut fds, Some(&zero)) {
        Ok(_) => fds.iter().any(|fd| fd.revents().contains(PollFlags::NVAL)),
        // Where poll cannot say, open /dev/null and look at the number it gets.
        Err(_) => true,
    };
    if !closed {
        return;
    }
    // Each open takes the lowest free number: a hole among 0 to 2 is filled, a higher number means none is left.
    loop {
        let Ok(null) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
        else {
            return;
        };
        if null.as_raw_fd() > 2 {
            return;
        }
        // A standard descriptor is inherited by commands: not close-on-exec, and kept open for good.
        let _ = rustix::io::fcntl_setfd(&null, rustix::io::FdFlags::empty());
        let _ = null.into_raw_fd();
    }
}
