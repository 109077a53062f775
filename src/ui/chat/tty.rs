//! The terminal itself: raw mode on stdin (termios through `sys::term`), the window size, and the one thread that
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
use std::os::fd::{OwnedFd, RawFd};
use std::sync::{Arc, Condvar, Mutex};

use tokio::sync::mpsc;

use super::keys::{Decoder, Key};
use crate::sys::term::{self, Ready, Saved};

/// What the reader thread sends.
#[derive(Debug)]
pub enum Input {
    Key(Key),
    /// The terminal is gone (end of file or a read error): the front-end should end the session.
    Closed,
}

/// How long to wait for the rest of an escape sequence after an ESC.
const ESC_WAIT: std::time::Duration = std::time::Duration::from_millis(30);

/// What the terminal is restored to at exit, and from the panic hook (release builds abort on panic, so no
/// destructor would run).
static SAVED: Mutex<Option<(RawFd, Saved)>> = Mutex::new(None);

/// The terminal in raw mode; dropping it (or [`restore`]) puts the saved settings back.
pub struct RawMode {
    _private: (),
}

impl RawMode {
    /// Switches `fd` (a terminal) to raw mode and installs a panic hook that restores it.
    pub fn enter(fd: RawFd) -> io::Result<RawMode> {
        let saved = term::enter_raw(fd)?;
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
    term::stop_job();
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
        term::restore(fd, &saved);
    }
}

fn lock() -> std::sync::MutexGuard<'static, Option<(RawFd, Saved)>> {
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
    term::window_size(fd).unwrap_or((24, 80))
}

/// The key reader: a thread blocked in `poll(2)` on the terminal and on a wake pipe, so it can be paused
/// while another program has the terminal (two readers would split the keys between them).
pub struct Reader {
    wake: OwnedFd,
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
        let (woken, wake) = term::pipe()?;
        let paused = Arc::new((Mutex::new(Pause::Reading), Condvar::new()));
        let shared = Arc::clone(&paused);
        std::thread::Builder::new()
            .name("chat-keys".into())
            .spawn(move || read_keys(fd, woken, &shared, &tx))?;
        Ok((Reader { wake, paused }, rx))
    }

    /// Stops reading the terminal until [`Reader::resume`]; returns once the thread has stopped.
    pub fn pause(&self) {
        let (state, changed) = &*self.paused;
        *lock_state(state) = Pause::Asked;
        term::poke(&self.wake);
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
    woken: OwnedFd,
    paused: &(Mutex<Pause>, Condvar),
    tx: &mpsc::UnboundedSender<Input>,
) {
    let mut decoder = Decoder::new();
    let mut buf = [0u8; 4096];
    loop {
        if term::wait_either(fd, &woken) == Ready::Other {
            if !term::take_poke(&woken) {
                // The Reader was dropped: nobody will resume this thread.
                return;
            }
            let (state, changed) = paused;
            let mut guard = lock_state(state);
            *guard = Pause::Stopped;
            changed.notify_all();
            while *guard != Pause::Reading {
                guard = changed.wait(guard).unwrap_or_else(|p| p.into_inner());
            }
            continue;
        }
        let n = match term::read(fd, &mut buf) {
            Ok(0) | Err(_) => {
                let _ = tx.send(Input::Closed);
                return;
            }
            Ok(n) => n,
        };
        let mut keys = decoder.feed(&buf[..n]);
        if decoder.has_pending() && !term::readable(fd, ESC_WAIT) {
            keys.extend(decoder.flush());
        }
        for key in keys {
            if tx.send(Input::Key(key)).is_err() {
                return;
            }
        }
    }
}
