//! `git agent log`: list sessions, newest first, from their `meta.json` summaries alone (no transcript is read).

use std::io::Write;

use clap::Args;

use super::context::Context;
use super::error::CommandError;
use crate::protocol::Untrusted;

/// List sessions, newest first: id, date, status, steps, cost, first line of the prompt
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Show at most N sessions
    #[arg(long, short = 'n', value_name = "N")]
    max_count: Option<usize>,
}

pub fn run(ctx: &Context, args: LogArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let sessions = store.list_sessions()?;
    let mut out = std::io::stdout().lock();
    for meta in sessions.iter().take(args.max_count.unwrap_or(usize::MAX)) {
        let status =
            if meta.status == crate::protocol::Status::Running && !store.log_is_locked(&meta.id) {
                // Nobody holds the session's lock: the process died mid-turn. `--resume` continues it.
                "crashed"
            } else {
                meta.status.as_str()
            };
        let prompt = meta.prompt.lines().next().unwrap_or_default();
        // Sessions that worked in the user's own working tree are marked: undo and discard treat them apart.
        let prompt = if meta.here {
            format!("[here] {prompt}")
        } else {
            prompt.to_owned()
        };
        let line = format!(
            "{}  {}  {status:<11} {:>3} step{}  {:>8}  {prompt}",
            meta.id,
            super::context::when(meta.created),
            meta.steps,
            if meta.steps == 1 { " " } else { "s" },
            crate::protocol::format_usd(meta.cost_usd),
        );
        // The id and prompt may come from a pulled session (issue 22, finding 8).
        if writeln!(out, "{}", Untrusted::name(line.trim_end())).is_err() {
            break; // a closed pipe (`| head`) is not an error
        }
    }
    Ok(())
}
