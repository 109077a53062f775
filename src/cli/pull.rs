//! `git agent pull`: fetch shared sessions and merge the remote's notes into ours (never overwriting them).

use clap::Args;

use super::{CommandError, Context, ErrorKind};
use crate::store::share::{remote_notes_ref, remote_review_ref};

/// Fetch sessions, session branches, notes and review records from a remote; notes are merged, not overwritten
#[derive(Debug, Args)]
pub struct PullArgs {
    /// The remote (default: origin)
    #[arg(default_value = "origin")]
    remote: String,
}

pub fn run(ctx: &Context, args: PullArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let notes = remote_notes_ref(&args.remote);
    let status = super::git_inherit(store.workdir())
        .args(["fetch", &args.remote])
        .arg("refs/agent/*:refs/agent/*")
        .arg("refs/heads/agent/*:refs/heads/agent/*")
        // The remote's notes land beside ours and are merged below; forced because only we write there.
        // A glob, so a remote without notes is not an error.
        .arg(format!("+refs/notes/agent*:{notes}*"))
        .status()
        .map_err(|e| {
            CommandError::internal(format!(
                "could not run git ({e}): make sure git is installed"
            ))
        })?;
    if !status.success() {
        // git names the rejected refs; the rest was fetched. Notes may be missing on the remote.
        eprintln!("warning: git fetch reported problems (see above); what could be fetched was");
    }
    if let Some(theirs) = store.ref_target(&notes)? {
        if store.merge_notes(theirs)? {
            eprintln!("merged the notes of {} into refs/notes/agent", args.remote);
        }
    }
    // Review records are sets of lines: merged by line union, so both sides' decisions stay.
    if let Some(theirs) = store.ref_target(&remote_review_ref(&args.remote))? {
        if store.merge_review_notes(theirs)? {
            eprintln!(
                "merged the review records of {} into {}",
                args.remote,
                crate::store::review::REVIEW_REF
            );
        }
    }
    if status.success() {
        Ok(())
    } else {
        // The warning above and git's own messages said what went wrong.
        Err(CommandError::shown(ErrorKind::Internal))
    }
}
