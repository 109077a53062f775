//! The terminal on a standard stream: raw mode (termios), the window size, stopping the job (Ctrl-Z), and
//! the reads and waits of the key reader. Descriptors are named by number but only the standard streams
//! (0, 1, 2) are accepted: they live as long as the process, so they can be borrowed without `unsafe`.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

use rustix::termios::{self, InputModes, LocalModes, OptionalActions, SpecialCodeIndex};

/// A terminal's settings, saved to be put back.
#[derive(Clone, Debug)]
pub struct Saved(termios::Termios);

/// Switches the terminal on `fd` to raw mode: no line buffering, no echo, no signals from Ctrl-C/Ctrl-Z, no
/// flow control, CR not turned into LF; output processing stays on. Returns the settings it had.
pub fn enter_raw(fd: RawFd) -> io::Result<Saved> {
    let fd = standard(fd)?;
    let saved = termios::tcgetattr(fd)?;
    let mut raw = saved.clone();
    raw.local_modes &=
        !(LocalModes::ICANON | LocalModes::ECHO | LocalModes::ISIG | LocalModes::IEXTEN);
    raw.input_modes &= !(InputModes::IXON
        | InputModes::ICRNL
        | InputModes::INLCR
        | InputModes::IGNCR
        | InputModes::BRKINT);
    raw.special_codes[SpecialCodeIndex::VMIN] = 1;
    raw.special_codes[SpecialCodeIndex::VTIME] = 0;
    termios::tcsetattr(fd, OptionalActions::Now, &raw)?;
    Ok(Saved(saved))
}

/// Puts `saved` back on the terminal on `fd` (best effort: this runs on the way out).
pub fn restore(fd: RawFd, saved: &Saved) {
    if let Ok(fd) = standard(fd) {
        let _ = termios::tcsetattr(fd, OptionalActions::Now, &saved.0);
    }
}

/// Rows and columns of the terminal on `fd`, if it can tell.
pub fn window_size(fd: RawFd) -> Option<(u16, u16)> {
    let ws = termios::tcgetwinsize(standard(fd).ok()?).ok()?;
    (ws.ws_row > 0 && ws.ws_col > 0).then_some((ws.ws_row, ws.ws_col))
}

/// Stops this process's job (SIGTSTP to our process group), as a shell expects of Ctrl-Z; returns when it is
/// continued.
pub fn stop_job() {
    let _ = rustix::process::kill_current_process_group(rustix::process::Signal::TSTP);
}

/// A close-on-exec pipe: (read end, write end).
#[cfg(not(any(target_vendor = "apple", target_os = "aix", target_os = "haiku")))]
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?)
}

/// A close-on-exec pipe: (read end, write end). No `pipe2` here, so the flag is set just after: the key
/// reader makes its pipe when chat starts, before any command runs, so no child can inherit it in between.
#[cfg(any(target_vendor = "apple", target_os = "aix", target_os = "haiku"))]
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = rustix::pipe::pipe()?;
    for fd in [&read, &write] {
        rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC)?;
    }
    Ok((read, write))
}

/// Writes one byte to `fd` (a wake pipe), best effort.
pub fn poke(fd: &OwnedFd) {
    let _ = rustix::io::write(fd, &[1u8]);
}

/// Reads the byte [`poke`] wrote; false when the write end is closed (or the read failed).
pub fn take_poke(fd: &OwnedFd) -> bool {
    matches!(rustix::io::read(fd, &mut [0u8; 1]), Ok(1))
}

/// Which of [`wait_either`]'s descriptors is ready.
#[derive(Debug, PartialEq, Eq)]
pub enum Ready {
    /// The standard stream (also when waiting failed: the read then says what is wrong).
    Stream,
    /// The other descriptor.
    Other,
}

/// Blocks until the standard stream `fd` has bytes (or hung up) or `other` is readable.
pub fn wait_either(fd: RawFd, other: &OwnedFd) -> Ready {
    use rustix::event::{PollFd, PollFlags};
    let Ok(fd) = standard(fd) else {
        return Ready::Stream;
    };
    let mut fds = [
        PollFd::new(&fd, PollFlags::IN),
        PollFd::new(other, PollFlags::IN),
    ];
    loop {
        match rustix::event::poll(&mut fds, None) {
            Ok(n) if n > 0 => {
                return if fds[1].revents().is_empty() {
                    Ready::Stream
                } else {
                    Ready::Other
                };
            }
            Ok(_) | Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return Ready::Stream,
        }
    }
}

/// One `read(2)` from the standard stream `fd`, retried when a signal interrupted it.
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    let fd = standard(fd)?;
    loop {
        match rustix::io::read(fd, &mut *buf) {
            Err(rustix::io::Errno::INTR) => continue,
            other => return Ok(other?),
        }
    }
}

/// True when the standard stream `fd` has bytes to read within `wait`.
pub fn readable(fd: RawFd, wait: Duration) -> bool {
    standard(fd).is_ok_and(|fd| super::process::wait_readable(fd, wait))
}

/// The standard stream numbered `fd`.
fn standard(fd: RawFd) -> io::Result<BorrowedFd<'static>> {
    match fd {
        0 => Ok(rustix::stdio::stdin()),
        1 => Ok(rustix::stdio::stdout()),
        2 => Ok(rustix::stdio::stderr()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the terminal must be a standard stream",
        )),
    }
}
