//! `git agent diff`: the session's change as a unified diff, rendered by git itself (colour and pager on a TTY).

use clap::Args;

use super::{CommandError, Context, ErrorKind};

/// Show the session's change: from step 0 (your captured changes) or the base, to the tip
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The session (any unique prefix of its id; default: the newest)
    id: Option<String>,

    /// Include your own uncommitted changes that were captured as step 0 (diff from the base)
    #[arg(long)]
    all: bool,

    /// Show a diffstat instead of the patch
    #[arg(long)]
    stat: bool,
}

pub fn run(ctx: &Context, args: DiffArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let id = store.resolve_session(args.id.as_deref())?;
    let meta = store
        .read_meta(&id)?
        .ok_or_else(|| CommandError::user(format!("no session {id:?}")))?;
    let tip = super::session_tip(store, &meta)?;
    // The agent's change starts after step 0: your own captured work is not presented as the agent's.
    let from = match (&meta.step0, args.all) {
        (Some(step0), false) => step0.clone(),
        _ => meta.base.clone(),
    };
    let mut cmd = super::git_inherit(store.workdir());
    cmd.arg("diff");
    if args.stat {
        cmd.arg("--stat");
    }
    cmd.arg(&from).arg(tip.to_string()).arg("--");
    let status = cmd.status().map_err(|e| {
        CommandError::internal(format!(
            "could not run git ({e}): make sure git is installed"
        ))
    })?;
    if status.success() {
        Ok(())
    } else {
        // git has said why on the inherited stderr.
        Err(CommandError::shown(ErrorKind::Internal))
    }
}
