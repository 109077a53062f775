//! `git agent gc`: remove what git-agent keeps only to be fast: pooled checkouts, and checkouts or
//! registrations left behind by sessions that are gone; and the session logs a pull refused, which it left
//! to inspect and nothing else ever removes.

use clap::Args;

use super::context::Context;
use super::error::CommandError;
use crate::protocol::Untrusted;

/// Remove pooled checkouts, leftovers of sessions that are gone and refused pulled logs
///
/// Checkouts of discarded sessions are kept (up to `worktree_pool`, default 2) so the next session can reuse
/// one by rewriting only what changed; this removes them. Checkouts under .git/agent/worktrees whose session
/// branch is gone and whose session is not running, and registrations whose checkout is gone, go too.
/// Session logs, branches and notes are never touched.
#[derive(Debug, Args)]
pub struct GcArgs {
    /// Keep this many pooled checkouts (default: none)
    #[arg(long, value_name = "N", default_value_t = 0)]
    keep: usize,
}

pub fn run(ctx: &Context, args: GcArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let report = store.gc(args.keep)?;
    // All of them, whatever their age: a refused log is never read, and the remote still holds it for a
    // later pull to fetch (and check) again.
    for refused in store.prune_refused_logs()? {
        // The ref's name and the reason quote what the remote sent.
        eprintln!(
            "removed {}: a pulled session log that was not taken ({})",
            Untrusted::name(&refused.staged),
            Untrusted::name(&refused.why)
        );
    }
    eprintln!(
        "removed {} pooled checkout{} and {} left-over checkout{}",
        report.pooled,
        if report.pooled == 1 { "" } else { "s" },
        report.orphans,
        if report.orphans == 1 { "" } else { "s" },
    );
    Ok(())
}
