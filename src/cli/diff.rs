//! `git agent diff`: the session's change as a unified diff, rendered by git itself (colour and pager on a TTY).

use clap::Args;

use super::context::Context;
use super::error::{CommandError, ErrorKind};
use crate::safety::tree_path::{check_str, EntryKind, Refusal};

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
    let tip = super::context::session_tip(store, &meta)?;
    // The agent's change starts after step 0: your own captured work is not presented as the agent's.
    let from = match (&meta.step0, args.all) {
        (Some(step0), false) => step0.clone(),
        _ => meta.base.clone(),
    };
    let (shown, refused) = policy_split(store, &from, tip)?;
    for refusal in &refused {
        eprintln!("  refused   {refusal}: accept and review will not write it");
    }
    if !refused.is_empty() && shown.is_empty() {
        return Ok(());
    }
    let mut cmd = super::context::git_inherit(store.workdir());
    cmd.arg("diff");
    if args.stat {
        cmd.arg("--stat");
    }
    cmd.arg(&from).arg(tip.to_string()).arg("--");
    if !refused.is_empty() {
        // Only the paths the policy lets land: a refused one is listed above, never shown as a file.
        cmd.args(shown.iter().map(|p| format!(":(literal){p}")));
    }
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

/// The changed paths the tree path policy lets land, and the refusals of the others
/// ([`crate::safety::tree_path`]).
fn policy_split(
    store: &crate::store::Store,
    from: &str,
    tip: crate::store::ObjectId,
) -> Result<(Vec<String>, Vec<Refusal>), CommandError> {
    let from = store.resolve_commit(from)?;
    let mut shown = Vec::new();
    let mut refused = Vec::new();
    for change in store.changes(from, tip)? {
        match check_str(&change.path, EntryKind::File) {
            Ok(()) => shown.push(change.path),
            Err(refusal) => refused.push(refusal),
        }
    }
    Ok((shown, refused))
}
