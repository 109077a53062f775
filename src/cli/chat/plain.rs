//! The chat without a terminal: each line of stdin is a prompt (one turn; a trailing `\` continues it on the
//! next line), slash commands work as on the terminal, streamed text and tool lines go to stderr and the
//! answers (and command output) to stdout, as with `ask`. Approvals cannot be asked (stdin carries the
//! prompts), so risky commands are refused unless a rule allows them. Ctrl-C cancels the running turn; at
//! the next prompt it ends the chat.
//!
//! The exit code is the last turn's (0, 3 unfinished, 130 interrupted), or 1 when it failed.

use std::io::{BufRead, IsTerminal, Write};

use tokio::sync::mpsc;

use super::super::ask::SessionFlags;
use super::super::{CommandError, Context, ErrorKind};
use super::commands::{self, Action, Env};
use crate::agent::{AgentSession, Resume, TurnControl};
use crate::protocol::{Event, Never, Sink};
use crate::ui;

pub async fn run(ctx: &mut Context, flags: &SessionFlags) -> Result<(), CommandError> {
    let mut sink = ui::sink(flags.json);
    let mut session = super::open(ctx, flags, flags.resume(), sink.as_mut()).await?;
    let mut lines = read_lines();
    let mut code = 0;
    while let Some(entry) = next_entry(&mut lines).await {
        if entry.trim().is_empty() {
            continue;
        }
        let control = TurnControl::new();
        if let Some(parsed) = commands::parse(&entry) {
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
                    sink.emit(&Event::Error(&err.text()));
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
                        sink.emit(&Event::Error(&err.text()));
                        code = 1;
                        Action::Continue
                    }
                },
                other => other,
            };
            if action == Action::Reload {
                match super::reload(ctx, flags, session, sink.as_mut()).await {
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
        let ctrl_c = control.cancel_on_ctrl_c();
        let end = session
            .turn(&entry, sink.as_mut(), &mut Never, &control)
            .await;
        ctrl_c.abort();
        code = match end {
            Ok(end) => end.exit_code,
            Err(err) => {
                sink.emit(&Event::Error(&super::super::CommandError::from(err).text()));
                1
            }
        };
    }
    finish(ctx, session, code).await
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
    match super::open(ctx, flags, resume, sink).await {
        Ok(next) => {
            let old = std::mem::replace(session, next);
            if let Some(hint) = super::close(ctx, old).await {
                eprintln!("left the last session; {hint}");
            }
            eprintln!("session {} on {}", session.id(), session.branch());
        }
        Err(err) => sink.emit(&Event::Error(&err.text())),
    }
    true
}

/// Closes the session, says how to resume it, and turns the last turn's code into the command's.
async fn finish(ctx: &Context, session: AgentSession, code: i32) -> Result<(), CommandError> {
    if let Some(hint) = super::close(ctx, session).await {
        eprintln!("hint: {hint}");
    }
    match code {
        0 => Ok(()),
        crate::agent::EXIT_UNFINISHED => Err(CommandError::shown(ErrorKind::Unfinished)),
        crate::agent::EXIT_INTERRUPTED => Err(CommandError::shown(ErrorKind::Interrupted)),
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

/// Lines of stdin, read on a thread of their own so Ctrl-C is noticed while waiting for one.
fn read_lines() -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The next prompt: a line, joined with the following ones while it ends in `\`. `None` at the end of
/// stdin or on Ctrl-C.
async fn next_entry(lines: &mut mpsc::UnboundedReceiver<String>) -> Option<String> {
    let mut entry = String::new();
    loop {
        let line = tokio::select! {
            line = lines.recv() => line,
            _ = tokio::signal::ctrl_c() => None,
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
