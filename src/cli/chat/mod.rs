//! `git agent chat`: one session, turn after turn, on one branch. On a terminal it is interactive
//! ([`terminal`]: line editor, streaming, a status line, slash commands, Ctrl-C cancels a turn, typing steers
//! it); with stdin or stderr not a terminal (or `--json`) it reads one prompt a line from stdin
//! ([`plain`]), so it can be scripted. Both run slash commands through [`commands`].

pub mod commands;
mod history;
mod plain;
mod session;
mod terminal;

use crate::agent::AgentSession;
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

/// Gives the next turn of `session` the images a prompt names: `@shot.png`, or a path pasted or dropped in
/// (a word ending in .png, .jpg, .jpeg, .gif or .webp that names a file, relative to `cwd` or absolute).
/// Returns what went wrong with each, as warnings: the prompt still goes, without that image.
fn attach_pasted_images(
    cwd: &std::path::Path,
    session: &mut AgentSession,
    prompt: &str,
) -> Vec<String> {
    let mut images = Vec::new();
    let mut warnings = Vec::new();
    for word in prompt.split_whitespace() {
        let word = word
            .trim_start_matches(['"', '\'', '(', '<'])
            .trim_end_matches(['"', '\'', ',', ';', ':', '?', '!', '.', ')', '>']);
        let (marked, path) = match word.strip_prefix('@') {
            Some(path) => (true, path),
            None => (false, word),
        };
        if !crate::tools::image::has_image_extension(path) {
            continue;
        }
        let full = cwd.join(path);
        if !marked && !full.is_file() {
            continue; // prose that happens to end in .png
        }
        match crate::tools::image::load(&full, path, session.max_image_size()) {
            Ok(image) => images.push(image),
            Err(err) => warnings.push(format!("{err}; sent without it")),
        }
    }
    if let Err(err) = session.attach_images(images) {
        warnings.push(format!("{err}; sent without the images"));
    }
    warnings
}
