//! The terminal itself: raw mode on stdin (termios through `libc`), the window size, and the one thread that
//! reads keys.
//!
//! Raw here means: no line buffering, no echo, no signals from Ctrl-C/Ctrl-Z (they arrive as keys, so Ctrl-C
//! cancels a turn instead of killing the process, and Ctrl-Z goes through [`suspend`]), no flow control, CR not turned into LF. Output
//! processing stays on, so `\n` still starts a new line for everything that prints.
//!
//! Keys are read by a dedicated thread ([`Reader`]) blocked in `poll(2)` and sent over a channel to the async
//! side, which `select!`s them against the running turn. Nothing polls on a timer: idle, the thread sleeps in
//! the kernel and the runtime in `epoll`. The only timed wait is the short one after a lone ESC (is it a key or the start of a
//! sequence?), and it only happens after a key press.

use std::io;
use std::os::fd::RawFd;
use std::sync::{Arc, Condvar, Mutex};

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
        static HOOK: std::sync::Once = std::sync::Once::new();
        HOOK.call_once(install_panic_hook);
        Ok(RawMode { _private: () })
    }
}

/// Ctrl-Z: the terminal settings back as they were, the job stopped as a shell expects; when it is
/// continued (`fg`), raw mode again. The caller gives the screen back before and takes it again after.
pub fn suspend(fd: RawFd) -> io::Result<()> {
    restore();
    // SAFETY: sends SIGTSTP to our own process group (the job), which stops until SIGCONT.
    unsafe { libc::kill(0, libc::SIGTSTP) };
    reenter(fd)
}

/// Raw mode again after [`restore`] (a suspend, a program that had the terminal), without a new guard: the
/// one made at start restores at the end.
pub fn reenter(fd: RawFd) -> io::Result<()> {
    std::mem::forget(RawMode::enter(fd)?);
    Ok(())
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

/// The key reader: a thread blocked in `poll(2)` on the terminal and on a wake pipe, so it can be paused
/// while another program has the terminal (two readers would split the keys between them).
pub struct Reader {
    wake: RawFd,
    paused: Arc<(Mutex<Pause>, Condvar)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pause {
    Reading,
    /// Asked to stop reading; the thread has not seen it yet.
    Asked,
    Stopped,
}

impl Reader {
    /// Starts the thread that reads keys from `fd` for as long as the receiver lives.
    pub fn spawn(fd: RawFd) -> io::Result<(Reader, mpsc::UnboundedReceiver<Input>)> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut pipe = [0; 2];
        // SAFETY: `pipe` has room for the two descriptors.
        if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let paused = Arc::new((Mutex::new(Pause::Reading), Condvar::new()));
        let shared = Arc::clone(&paused);
        let woken = pipe[0];
        std::thread::Builder::new()
            .name("chat-keys".into())
            .spawn(move || read_keys(fd, woken, &shared, &tx))?;
        Ok((
            Reader {
                wake: pipe[1],
                paused,
            },
            rx,
        ))
    }

    /// Stops reading the terminal until [`Reader::resume`]; returns once the thread has stopped.
    pub fn pause(&self) {
        let (state, changed) = &*self.paused;
        *lock_state(state) = Pause::Asked;
        // SAFETY: one byte from a valid buffer into the pipe's write end.
        unsafe { libc::write(self.wake, [1u8].as_ptr().cast(), 1) };
        let mut guard = lock_state(state);
        while *guard == Pause::Asked {
            guard = changed.wait(guard).unwrap_or_else(|p| p.into_inner());
        }
    }

    pub fn resume(&self) {
        let (state, changed) = &*self.paused;
        *lock_state(state) = Pause::Reading;
        changed.notify_all();
    }
}

fn lock_state(m: &Mutex<Pause>) -> std::sync::MutexGuard<'_, Pause> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn read_keys(
    fd: RawFd,
    woken: RawFd,
    paused: &(Mutex<Pause>, Condvar),
    tx: &mpsc::UnboundedSender<Input>,
) {
    let mut decoder = Decoder::new();
    let mut buf = [0u8; 4096];
    loop {
        if wait(fd, woken) == Ready::Wake {
            let mut byte = [0u8; 1];
            // SAFETY: reads the one wake byte into a valid buffer.
            unsafe { libc::read(woken, byte.as_mut_ptr().cast(), 1) };
            let (state, changed) = paused;
            let mut guard = lock_state(state);
            *guard = Pause::Stopped;
            changed.notify_all();
            while *guard != Pause::Reading {
                guard = changed.wait(guard).unwrap_or_else(|p| p.into_inner());
            }
            continue;
        }
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

#[derive(PartialEq, Eq)]
enum Ready {
    Terminal,
    Wake,
}

/// Blocks until the terminal has bytes (or hung up) or the wake pipe was written.
fn wait(fd: RawFd, woken: RawFd) -> Ready {
    let mut fds = [
        libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: woken,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: two valid pollfds; no timeout.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n > 0 {
            return if fds[1].revents != 0 {
                Ready::Wake
            } else {
                Ready::Terminal
            };
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            // Let the read report what is wrong with the terminal.
            return Ready::Terminal;
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
