//! `git agent pull`: fetch shared sessions and merge the remote's notes into ours (never overwriting them).

use clap::Args;

use crate::store::share::remote_notes_ref;

/// Fetch sessions, session branches and notes from a remote; notes are merged, not overwritten
#[derive(Debug, Args)]
pub struct PullArgs {
    /// The remote (default: origin)
    #[arg(default_value = "origin")]
    remote: String,
}

pub fn run(args: PullArgs) -> Result<i32, String> {
    let store = super::open_store()?;
    let notes = remote_notes_ref(&args.remote);
    let status = super::git_inherit(store.workdir())
        .args(["fetch", &args.remote])
        .arg("refs/agent/*:refs/agent/*")
        .arg("refs/heads/agent/*:refs/heads/agent/*")
        // The remote's notes land beside ours and are merged below; forced because only we write there.
        // A glob, so a remote without notes is not an error.
        .arg(format!("+refs/notes/agent*:{notes}*"))
        .status()
        .map_err(|e| format!("could not run git ({e}): make sure git is installed"))?;
    let mut code = 0;
    if !status.success() {
        // git names the rejected refs; the rest was fetched. Notes may be missing on the remote.
        eprintln!("warning: git fetch reported problems (see above); what could be fetched was");
        code = 1;
    }
    if let Some(theirs) = store.ref_target(&notes).map_err(|e| e.to_string())? {
        if store.merge_notes(theirs).map_err(|e| e.to_string())? {
            eprintln!("merged the notes of {} into refs/notes/agent", args.remote);
        }
    }
    Ok(code)
}
