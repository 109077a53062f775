//! `git agent discard`: remove a session's checkout and branch; the session log stays unless `--purge`.

use clap::Args;

use super::context::Context;
use super::error::CommandError;
use crate::agent::journal;
use crate::protocol::Event;

/// Remove the session's checkout and branch; the session log stays
///
/// The checkout is kept for reuse by the next session (the worktree pool, `worktree_pool` checkouts, default 2),
/// cleaned to the branch's last step; `git agent gc` removes pooled checkouts. A session started with
/// `ask --here` worked in your own working tree: only its branch is removed, and your files stay as they are.
#[derive(Debug, Args)]
pub struct DiscardArgs {
    /// The session (any unique prefix of its id)
    id: String,

    /// Also delete the session log (refs/agent/sessions/<id>), and remove the checkout instead of keeping it
    #[arg(long)]
    purge: bool,
}

pub fn run(ctx: &Context, args: DiscardArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let id = store.resolve_session(Some(&args.id))?;
    // Taking the session's lock refuses to discard under a running agent.
    let mut log = store.open_log(&id)?;
    // The checkout goes into the worktree pool for the next session, unless the session is purged.
    let pool = if args.purge {
        0
    } else {
        let env = |name: &str| ctx.env(name);
        crate::config::Settings::load(ctx.cwd(), &env)
            .ok()
            .and_then(|s| s.worktree_pool())
            .unwrap_or(crate::store::DEFAULT_POOL)
    };
    let here = store.is_here(&id);
    let tip = store.discard(&log.meta, pool)?;
    // A --here session worked in the user's own work tree: only its branch (and log) go, the files stay.
    let what = if here {
        "branch"
    } else {
        "checkout and branch"
    };
    if args.purge {
        drop(log);
        store.delete_log(&id)?;
        store.forget_local(&id)?;
        eprintln!("discarded session {id}: {what} and session log removed");
    } else {
        let tip_hex = tip.map(|t| t.to_string()).unwrap_or_default();
        log.meta.status = crate::protocol::Status::Discarded;
        journal::keep(&mut log, &Event::Discarded { tip: tip_hex })
            .and_then(|()| log.fold(store))?;
        eprintln!(
            "discarded session {id}: {what} agent/{id} removed; `git agent show {id}` still works"
        );
    }
    if what == "branch" {
        eprintln!("hint: the session worked in your working tree (--here); its files there are left as they are");
    }
    if let Some(tip) = tip {
        eprintln!("hint: the branch pointed at {tip}; `git branch agent/{id} {tip}` restores it until git gc prunes it");
    }
    Ok(())
}
