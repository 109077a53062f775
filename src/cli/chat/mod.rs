//! `git agent chat`: one session, turn after turn, on one branch. On a terminal it is interactive
//! ([`terminal`]: line editor, streaming, a status line, slash commands, Ctrl-C cancels a turn, typing steers
//! it); with stdin or stderr not a terminal (or `--json`) it reads one prompt a line from stdin
//! ([`plain`]), so it can be scripted. Both run slash commands through [`commands`].

pub mod commands;
mod history;
mod plain;
mod terminal;

use std::io::IsTerminal;

use clap::Args;

use super::ask::SessionFlags;
use super::{CommandError, Context};
use crate::agent::{AgentSession, Resume};
use crate::protocol::Sink;

/// Talk with the agent: one session, turn after turn, on one branch
///
/// Each prompt is a turn of the same conversation; every step that changes files is one commit on
/// agent/<id>, so /diff, /undo and /accept work between turns. On a terminal: line editing and history,
/// streamed answers, a status line; Ctrl-C (or Esc twice) cancels a running turn, text typed while it runs
/// joins it; /help lists the commands; Ctrl-D (or Ctrl-C twice) exits. Without a terminal, each line of
/// stdin is a prompt (a trailing backslash continues it) and the answers go to stdout.
#[derive(Debug, Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub(super) session: SessionFlags,
}

pub fn run(ctx: &mut Context, args: ChatArgs) -> Result<(), CommandError> {
    let runtime = super::runtime()
        .map_err(|e| CommandError::internal(format!("cannot start the async runtime: {e}")))?;
    let flags = &args.session;
    let interactive =
        !flags.json && std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if interactive {
        runtime.block_on(terminal::run(ctx, flags))
    } else {
        runtime.block_on(plain::run(ctx, flags))
    }
}

/// Opens the session the flags (or `/new`, `/resume`) ask for; `sink` hears warnings.
async fn open(
    ctx: &Context,
    flags: &SessionFlags,
    resume: Option<Resume>,
    sink: &mut dyn Sink,
) -> Result<AgentSession, CommandError> {
    let options = flags.options(ctx, resume)?;
    Ok(AgentSession::open(ctx.cwd(), options, sink).await?)
}

/// Closes `session` (background jobs and MCP servers stopped) and returns how to come back to it; `None`
/// when nothing happened in it, so it was rolled back and there is nothing to resume.
async fn close(ctx: &Context, session: AgentSession) -> Option<String> {
    let id = session.id().to_owned();
    session.shutdown_mcp().await;
    session.close();
    let store = crate::store::Store::open(ctx.cwd()).ok()?;
    store.read_meta(&id).ok().flatten()?;
    Some(format!(
        "resume with `git agent chat --resume {id}` (or `git agent chat --continue`)"
    ))
}

/// Closes `session` and opens it again (after a review, whose comments the agent reads on resume). `None`
/// when it cannot be opened again: the error is shown, with how to resume it later.
async fn reload(
    ctx: &Context,
    flags: &SessionFlags,
    session: AgentSession,
    sink: &mut dyn Sink,
) -> Option<AgentSession> {
    let id = session.id().to_owned();
    // The session's lock is per open file, so this process must let go of it before taking it again.
    close(ctx, session).await;
    match open(ctx, flags, Some(Resume::Id(id.clone())), sink).await {
        Ok(session) => Some(session),
        Err(err) => {
            let text = format!(
                "{}\nhint: resume with `git agent chat --resume {id}`",
                err.text()
            );
            sink.emit(&crate::protocol::Event::Error { message: text });
            None
        }
    }
}
