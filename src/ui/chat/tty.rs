//! The terminal itself: raw mode on stdin (termios through `libc`), the window size, and the one thread that
//! reads keys.
//!
//! Raw here means: no line buffering, no echo, no signals from Ctrl-C/Ctrl-Z (they arrive as keys, so Ctrl-C
//! cancels a turn instead of killing the process), no flow control, CR not turned into LF. Output
//! processing stays on, so `\n` still starts a new line for everything that prints.
//!
//! Keys are read by a dedicated thread blocked in `read(2)` and sent over a channel to the async side, which
//! `select!`s them against the running turn. Nothing polls: idle, the thread sleeps in the kernel and the
//! runtime in `epoll`. The only timed wait is the short one after a lone ESC (is it a key or the start of a
//! sequence?), and it only happens after a key press.

use std::io;
use std::os::fd::RawFd;
use std::sync::Mutex;

use tokio::sync::mpsc;

use super::keys::{Decoder, Key};

/// What the reader thread sends.
#[derive(Debug)]
pub enum Input {
    Key(Key),
    /// The terminal is gone (end of file or a read error): the front-end should end the session.
    Closed,
}

/// How long to wait for the rest of an escape sequence after an ESC.
const ESC_WAIT_MS: i32 = 30;

/// What the terminal is restored to at exit, and from the panic hook (release builds abort on panic, so no
/// destructor would run).
static SAVED: Mutex<Option<(RawFd, libc::termios)>> = Mutex::new(None);

/// The terminal in raw mode; dropping it (or [`restore`]) puts the saved settings back.
pub struct RawMode {
    _private: (),
}

impl RawMode {
    /// Switches `fd` (a terminal) to raw mode and installs a panic hook that restores it.
    pub fn enter(fd: RawFd) -> io::Result<RawMode> {
        // SAFETY: termios is plain data that tcgetattr fills in completely on success.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: `saved` is a valid termios to write into.
        if unsafe { libc::tcgetattr(fd, &mut saved) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut raw = saved;
        raw.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG | libc::IEXTEN);
        raw.c_iflag &= !(libc::IXON | libc::ICRNL | libc::INLCR | libc::IGNCR | libc::BRKINT);
        raw.c_cc[libc::VMIN] = 1;
        raw.c_cc[libc::VTIME] = 0;
        // SAFETY: `raw` is a valid termios derived from the terminal's own.
        if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &raw) } != 0 {
            return Err(io::Error::last_os_error());
        }
        *lock() = Some((fd, saved));
        install_panic_hook();
        Ok(RawMode { _private: () })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        restore();
    }
}

/// Puts the terminal back as it was (idempotent).
pub fn restore() {
    if let Some((fd, saved)) = lock().take() {
        // SAFETY: `saved` came from tcgetattr on this fd.
        unsafe { libc::tcsetattr(fd, libc::TCSANOW, &saved) };
    }
}

fn lock() -> std::sync::MutexGuard<'static, Option<(RawFd, libc::termios)>> {
    SAVED.lock().unwrap_or_else(|p| p.into_inner())
}

/// On a panic: the screen's scroll region, bracketed paste and cursor reset, the terminal settings restored,
/// then the usual message.
fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = io::Write::write_all(&mut io::stderr(), super::screen::RESET.as_bytes());
        restore();
        previous(info);
    }));
}

/// Rows and columns of the terminal on `fd` (24x80 when it cannot tell).
pub fn size(fd: RawFd) -> (u16, u16) {
    // SAFETY: winsize is plain data; TIOCGWINSZ fills it in on success.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: `ws` is a valid winsize to write into.
    let ok = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) } == 0;
    if ok && ws.ws_row > 0 && ws.ws_col > 0 {
        (ws.ws_row, ws.ws_col)
    } else {
        (24, 80)
    }
}

/// Starts the thread that reads keys from `fd` for as long as the receiver lives.
pub fn spawn_reader(fd: RawFd) -> io::Result<mpsc::UnboundedReceiver<Input>> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("chat-keys".into())
        .spawn(move || read_keys(fd, &tx))?;
    Ok(rx)
}

fn read_keys(fd: RawFd, tx: &mpsc::UnboundedSender<Input>) {
    let mut decoder = Decoder::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = match read(fd, &mut buf) {
            Ok(0) | Err(_) => {
                let _ = tx.send(Input::Closed);
                return;
            }
            Ok(n) => n,
        };
        let mut keys = decoder.feed(&buf[..n]);
        if decoder.has_pending() && !readable(fd, ESC_WAIT_MS) {
            keys.extend(decoder.flush());
        }
        for key in keys {
            if tx.send(Input::Key(key)).is_err() {
                return;
            }
        }
    }
}

/// One `read(2)`, retried when a signal interrupted it.
fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is valid for writes of its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// True when `fd` has bytes to read within `ms` milliseconds.
fn readable(fd: RawFd, ms: i32) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, ms) > 0 }
}
