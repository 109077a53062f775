//! `git agent push`: share sessions (logs, branches, notes) through a remote, refusing to push key values.

use clap::Args;

use super::context::Context;
use super::error::CommandError;
use crate::safety::redact;
use crate::store::share::PUSH_REFSPECS;

/// Push sessions, memory and skills (refs/agent/*), session branches (agent/*), notes and review records to a remote
///
/// Refuses if anything to be pushed contains the value of a key from the environment (*_API_KEY, *_TOKEN,
/// *_SECRET). Nothing is forced; if the remote's notes or memory moved on, run `git agent pull` first.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The remote (default: origin)
    #[arg(default_value = "origin")]
    remote: String,
}

pub fn run(ctx: &Context, args: PushArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let notes = store.notes_refs()?;
    let mut refs = vec!["--glob=refs/agent/*", "--glob=refs/heads/agent/*"];
    refs.extend(&notes);
    refuse_leaks(store, &refs)?;
    let mut cmd = super::context::git_inherit(store.workdir());
    cmd.args(["push", &args.remote]);
    cmd.args(PUSH_REFSPECS);
    cmd.args(notes.iter().map(|n| format!("{n}:{n}")));
    let status = cmd.status().map_err(|e| {
        CommandError::internal(format!(
            "could not run git ({e}): make sure git is installed"
        ))
    })?;
    if !status.success() {
        return Err(
            CommandError::user(format!("git push to {} failed (see above)", args.remote)).hint(
                format!(
                    "if the remote has sessions, notes or memory you lack, run `git agent pull {}` first",
                    args.remote
                ),
            ),
        );
    }
    Ok(())
}

/// Refuses when an object reachable from `refs` (and not already published) holds a known secret.
pub(super) fn refuse_leaks(store: &crate::store::Store, refs: &[&str]) -> Result<(), CommandError> {
    let leaks = {
        let redactor = redact::global()
            .read()
            .map_err(|_| CommandError::internal("the secret list is unavailable"))?;
        store.secrets_in_refs(refs, &redactor).map_err(|e| {
            CommandError::internal(format!(
                "could not check what would be pushed for secrets: {e}"
            ))
        })?
    };
    if let Some(leak) = leaks.first() {
        let place = if leak.path.is_empty() {
            String::new()
        } else {
            format!(" ({})", leak.path)
        };
        return Err(CommandError::user(format!(
            "refusing to push: object {}{place} under refs/agent, agent/* or refs/notes/agent holds a known secret ({})",
            leak.object, leak.kind
        ))
        .hint(format!(
            "find it with `git log --all --find-object={}`, then remove that session (`git agent discard --purge <id>`)",
            leak.object
        )));
    }
    Ok(())
}
