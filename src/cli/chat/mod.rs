//! `git agent chat`: one session, turn after turn, on one branch. On a terminal it is interactive
//! ([`terminal`]: line editor, streaming, a status line, slash commands, Ctrl-C cancels a turn, typing steers
//! it); with stdin or stderr not a terminal (or `--json`) it reads one prompt a line from stdin
//! ([`plain`]), so it can be scripted. Both run slash commands through [`commands`].

pub mod commands;
mod history;
mod plain;
mod session;
mod terminal;

use std::io::IsTerminal;

use clap::Args;

use super::ask::SessionFlags;
use super::context::Context;
use super::error::CommandError;

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
    let runtime = super::context::runtime()
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
