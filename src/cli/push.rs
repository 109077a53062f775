//! `git agent push`: share sessions (logs, branches, notes) through a remote, refusing to push key values.

use clap::Args;

use crate::store::share::{env_secrets, PUSH_REFSPECS};

/// Push sessions (refs/agent/*), session branches (agent/*) and notes (refs/notes/agent) to a remote
///
/// Refuses if anything to be pushed contains the value of a key from the environment (*_API_KEY, *_TOKEN,
/// *_SECRET). Nothing is forced; if the remote's notes moved on, run `git agent pull` first.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The remote (default: origin)
    #[arg(default_value = "origin")]
    remote: String,
}

pub fn run(args: PushArgs) -> Result<i32, String> {
    let store = super::open_store()?;
    let secrets = env_secrets();
    if let Some((name, blob)) = store.find_secret(&secrets).map_err(|e| e.to_string())? {
        return Err(format!(
            "refusing to push: object {blob} under refs/agent, agent/* or refs/notes/agent contains the value of ${name}\n\
             hint: find it with `git log --all --find-object={blob}`, then discard that session (`git agent discard --purge <id>`)"
        ));
    }
    let mut cmd = super::git_inherit(store.workdir());
    cmd.args(["push", &args.remote]);
    // A missing notes ref would fail the whole push.
    let has_notes = store
        .ref_target(crate::store::NOTES_REF)
        .map_err(|e| e.to_string())?
        .is_some();
    cmd.args(
        PUSH_REFSPECS
            .iter()
            .filter(|s| has_notes || !s.starts_with("refs/notes/")),
    );
    let status = cmd
        .status()
        .map_err(|e| format!("could not run git ({e}): make sure git is installed"))?;
    if !status.success() {
        return Err(format!(
            "git push to {} failed (see above)\nhint: if the remote has sessions or notes you lack, run `git agent pull {}` first",
            args.remote, args.remote
        ));
    }
    Ok(0)
}
