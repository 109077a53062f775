//! `git agent undo`: move a session's branch back N steps and make its checkout follow.

use clap::Args;

use super::context::Context;
use super::error::CommandError;

/// Move the session's branch back N steps (default 1) and update its checkout
///
/// Step 0 (your own uncommitted changes captured when the session started) is never undone. The old tip stays
/// in the branch's reflog and in the session log, so the undo can be redone.
///
/// For a session started with `ask --here`, the files in your working tree are restored too, but only if they
/// still hold what the undone steps left there: if you edited one since, the undo is refused and names it.
#[derive(Debug, Args)]
pub struct UndoArgs {
    /// The session (any unique prefix of its id; default: the newest)
    id: Option<String>,

    /// How many steps to undo
    #[arg(short = 'n', value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    count: u32,
}

pub fn run(ctx: &Context, args: UndoArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let id = store.resolve_session(args.id.as_deref())?;
    // Taking the session's lock refuses to undo under a running agent.
    let mut log = store.open_log(&id)?;
    let mut session = store.reopen_session(&log.meta)?;
    let old = crate::agent::record_undo(store, &mut log, &mut session, args.count)?;
    let short = |id: crate::store::ObjectId| id.to_hex_with_len(7).to_string();
    eprintln!(
        "agent/{id}: undid {} step{}, now at step {} ({})",
        args.count,
        if args.count == 1 { "" } else { "s" },
        session.steps,
        short(session.tip)
    );
    eprintln!(
        "hint: to redo, run `git update-ref refs/heads/agent/{id} {}` (the old tip, also in `git reflog agent/{id}`)",
        old
    );
    if store.is_here(&id) {
        eprintln!("hint: the files the undone steps changed in your working tree were restored");
    } else {
        eprintln!("hint: then `git agent ask --resume {id} ...` brings the checkout back to it");
    }
    Ok(())
}
