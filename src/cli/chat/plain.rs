//! The chat without a terminal: each line of stdin is a prompt (one turn; a trailing `\` continues it on the
//! next line), slash commands work as on the terminal, streamed text and tool lines go to stderr and the
//! answers (and command output) to stdout, as with `ask`. Approvals cannot be asked (stdin carries the
//! prompts), so risky commands are refused unless a rule allows them. Ctrl-C cancels the running turn; at
//! the next prompt it ends the chat.
//!
//! SIGTERM and SIGHUP end the chat as they end `ask`: a running turn is cancelled and logged as terminated,
//! the session is closed (its journal folded), and the exit code is 128 + the signal (143, 129).
//!
//! The exit code is the last turn's (0, 3 unfinished, 130 interrupted), or 1 when it failed.

use std::io::{BufRead, IsTerminal, Write};

use tokio::sync::{mpsc, watch};

use super::super::ask::SessionFlags;
use super::super::context::Context;
use super::super::error::{CommandError, ErrorKind};
use super::commands::{self, Action, Env};
use crate::agent::{AgentSession, Resume, TurnControl};
use crate::protocol::{Event, Never, Sink};
use crate::ui;

pub async fn run(ctx: &mut Context, flags: &SessionFlags) -> Result<(), CommandError> {
    let mut sink = ui::sink(flags.json);
    let (stop, stop_watch) = stop_signals();
    let mut session = super::session::open(ctx, flags, flags.resume(), sink.as_mut()).await?;
    let mut lines = read_lines();
    let mut code = 0;
    while let Some(entry) = next_entry(&mut lines, &mut stop.clone()).await {
        if entry.trim().is_empty() {
            continue;
        }
        let control = TurnControl::new();
        if let Some(parsed) = commands::parse_for(&entry, &session) {
            let env = Env {
                session: &mut session,
                sink: sink.as_mut(),
                control: &control,
                ctx,
            };
            let action = match commands::run(&parsed, env).await {
                Ok(reply) => {
                    print_reply(&reply.text, flags.json);
                    code = 0;
                    reply.action
                }
                Err(err) => {
                    sink.emit(&Event::Error {
                        message: err.text(),
                    });
                    code = 1;
                    Action::Continue
                }
            };
            let action = match action {
                // No terminal to hand over: review's scripted form says what it needs.
                Action::Review => match commands::review(ctx.cwd(), session.id(), "") {
                    Ok(reply) => {
                        print_reply(&reply.text, flags.json);
                        reply.action
                    }
                    Err(err) => {
                        sink.emit(&Event::Error {
                            message: err.text(),
                        });
                        code = 1;
                        Action::Continue
                    }
                },
                other => other,
            };
            if action == Action::Reload {
                match super::session::reload(ctx, flags, session, sink.as_mut()).await {
                    Some(again) => session = again,
                    None => return Err(CommandError::shown(ErrorKind::Internal)),
                }
                continue;
            }
            if !switch(ctx, flags, &mut session, action, sink.as_mut()).await {
                break;
            }
            continue;
        }
        for warning in super::session::attach_pasted_images(ctx.cwd(), &mut session, &entry) {
            sink.emit(&Event::Warning { message: warning });
        }
        let ctrl_c = control.cancel_on_ctrl_c();
        let stopping = cancel_on_stop(&control, stop.clone());
        let end = session
            .turn(&entry, sink.as_mut(), &mut Never, &control)
            .await;
        ctrl_c.abort();
        stopping.abort();
        code = match end {
            Ok(end) => end.exit_code,
            Err(err) => {
                sink.emit(&Event::Error {
                    message: super::super::error::CommandError::from(err).text(),
                });
                1
            }
        };
        if stopped(&stop).is_some() {
            break;
        }
    }
    stop_watch.abort();
    if let Some(signal) = stopped(&stop) {
        code = crate::agent::exit_terminated(signal);
    }
    finish(ctx, session, code).await
}

/// Watches SIGTERM and SIGHUP for the whole chat; the receiver holds the signal that came (0: none yet).
/// Where a handler cannot be installed, that signal keeps its default.
fn stop_signals() -> (watch::Receiver<i32>, tokio::task::JoinHandle<()>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, rx) = watch::channel(0);
    let mut term = signal(SignalKind::terminate()).ok();
    let mut hup = signal(SignalKind::hangup()).ok();
    async fn next(signal: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
        match signal {
            Some(s) => s.recv().await,
            None => std::future::pending().await,
        }
    }
    let task = tokio::spawn(async move {
        let signal = tokio::select! {
            Some(()) = next(&mut term) => crate::sys::signal::SIGTERM,
            Some(()) = next(&mut hup) => crate::sys::signal::SIGHUP,
        };
        let _ = tx.send(signal);
    });
    (rx, task)
}

/// The signal that ended the chat, if one did.
fn stopped(stop: &watch::Receiver<i32>) -> Option<i32> {
    Some(*stop.borrow()).filter(|s| *s != 0)
}

/// Cancels the running turn as terminated when SIGTERM or SIGHUP comes. Abort it when the turn is over.
fn cancel_on_stop(
    control: &TurnControl,
    mut stop: watch::Receiver<i32>,
) -> tokio::task::JoinHandle<()> {
    let control = control.clone();
    tokio::spawn(async move {
        if let Ok(signal) = stop.wait_for(|s| *s != 0).await.map(|s| *s) {
            control.cancel_for_signal(signal);
        }
    })
}

/// Carries out a command's action; false when the chat should end. A session that cannot be opened is an
/// error line, and the chat stays in the current one.
async fn switch(
    ctx: &Context,
    flags: &SessionFlags,
    session: &mut AgentSession,
    action: Action,
    sink: &mut dyn Sink,
) -> bool {
    let resume = match action {
        Action::Continue | Action::Review | Action::Reload => return true,
        Action::Exit => return false,
        Action::New => None,
        Action::Resume(id) => Some(Resume::Id(id)),
    };
    match super::session::open(ctx, flags, resume, sink).await {
        Ok(next) => {
            let old = std::mem::replace(session, next);
            if let Some(hint) = super::session::close(ctx, old).await {
                eprintln!("left the last session; {hint}");
            }
            eprintln!("session {} on {}", session.id(), session.branch());
        }
        Err(err) => sink.emit(&Event::Error {
            message: err.text(),
        }),
    }
    true
}

/// Closes the session, says how to resume it, and turns the last turn's code into the command's.
async fn finish(ctx: &Context, session: AgentSession, code: i32) -> Result<(), CommandError> {
    if let Some(hint) = super::session::close(ctx, session).await {
        eprintln!("hint: {hint}");
    }
    match code {
        0 => Ok(()),
        crate::agent::EXIT_UNFINISHED => Err(CommandError::shown(ErrorKind::Unfinished)),
        crate::agent::EXIT_INTERRUPTED => Err(CommandError::shown(ErrorKind::Interrupted)),
        code if code == crate::agent::exit_terminated(crate::sys::signal::SIGTERM) => Err(
            CommandError::shown(ErrorKind::Terminated(crate::sys::signal::SIGTERM)),
        ),
        code if code == crate::agent::exit_terminated(crate::sys::signal::SIGHUP) => Err(
            CommandError::shown(ErrorKind::Terminated(crate::sys::signal::SIGHUP)),
        ),
        _ => Err(CommandError::shown(ErrorKind::Internal)),
    }
}

/// A command's text: on stdout (raw into a pipe, neutralised on a terminal), on stderr with `--json`.
fn print_reply(text: &str, json: bool) {
    if text.is_empty() {
        return;
    }
    if json {
        eprintln!("{}", ui::neutralize(text));
        return;
    }
    let mut out = std::io::stdout().lock();
    let text = if out.is_terminal() {
        ui::neutralize(text)
    } else {
        text.into()
    };
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

/// Lines of stdin, read on a thread of their own so Ctrl-C is noticed while waiting for one. A line that is
/// not UTF-8 is taken with its bad bytes replaced (U+FFFD, as pastes are) and named on stderr: it once ended
/// the chat silently with exit 0 (issue 23, finding 14).
fn read_lines() -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut bytes = Vec::new();
        for number in 1.. {
            bytes.clear();
            match stdin.read_until(b'\n', &mut bytes) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let line = decode_line(&bytes);
            // Lossy decoding allocates only when it replaced something.
            if matches!(line, std::borrow::Cow::Owned(_)) {
                eprintln!("warning: line {number} of stdin is not UTF-8: its invalid bytes were replaced with U+FFFD");
            }
            if tx.send(line.into_owned()).is_err() {
                break;
            }
        }
    });
    rx
}

/// One line of stdin without its line ending (`\n` or `\r\n`, as `BufRead::lines` takes them), decoded
/// lossily.
fn decode_line(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    let line = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    String::from_utf8_lossy(line)
}

/// The next prompt: a line, joined with the following ones while it ends in `\`. `None` at the end of
/// stdin or on Ctrl-C.
async fn next_entry(
    lines: &mut mpsc::UnboundedReceiver<String>,
    stop: &mut watch::Receiver<i32>,
) -> Option<String> {
    let mut entry = String::new();
    loop {
        if stopped(stop).is_some() {
            return None;
        }
        let line = tokio::select! {
            line = lines.recv() => line,
            _ = tokio::signal::ctrl_c() => None,
            _ = stop.wait_for(|s| *s != 0) => return None,
        };
        let Some(line) = line else {
            return (!entry.is_empty()).then_some(entry);
        };
        match line.strip_suffix('\\') {
            Some(start) => {
                entry.push_str(start);
                entry.push('\n');
            }
            None => {
                entry.push_str(&line);
                return Some(entry);
            }
        }
    }
}
