//! `git agent push`: share sessions (logs, branches, notes) through a remote, refusing to push key values.

use clap::Args;

use super::context::Context;
use super::error::CommandError;
use crate::safety::redact;
use crate::store::share::{remote_notes_ref, remote_review_ref, NOTES_REFS, PUSH_REFSPECS};

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
    // Notes are one ref per kind that every clone writes: a concurrent push moves the remote's notes first and
    // ours is refused ("fetch first"). Theirs is then merged into ours and the push tried again, with back-off,
    // until it converges (issue 27: 16 clones pushing at once).
    let mut delay = std::time::Duration::from_millis(100);
    let start = std::time::Instant::now();
    let mut only_notes = false;
    loop {
        let mut cmd = super::context::git_inherit(store.workdir());
        cmd.args(["push", "--porcelain", &args.remote]);
        // After the first try only the notes are behind: the other refs went through.
        if !only_notes {
            cmd.args(PUSH_REFSPECS);
        }
        cmd.args(notes.iter().map(|n| format!("{n}:{n}")));
        let out = cmd
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| {
                CommandError::internal(format!(
                    "could not run git ({e}): make sure git is installed"
                ))
            })?;
        if out.status.success() {
            // The remote's own words (its hooks' `remote:` lines) are text from outside: neutralised.
            eprint!(
                "{}",
                crate::protocol::neutralize(&String::from_utf8_lossy(&out.stderr))
            );
            return Ok(());
        }
        let behind = notes_behind(&out.stdout);
        if behind && start.elapsed() < NOTES_GIVE_UP && merge_their_notes(store, &args.remote)? {
            only_notes = true;
            std::thread::sleep(crate::store::fleet::queue::jittered(delay));
            delay = (delay * 2).min(std::time::Duration::from_secs(4));
            continue;
        }
        show_rejections(&out);
        break;
    }
    Err(
        CommandError::user(format!("git push to {} failed (see above)", args.remote)).hint(
            format!(
            "if the remote has sessions, notes or memory you lack, run `git agent pull {}` first",
            args.remote
        ),
        ),
    )
}

/// How long a push whose notes keep being refused merges theirs and tries again.
const NOTES_GIVE_UP: std::time::Duration = std::time::Duration::from_secs(180);

/// True when every ref the push refused is a notes ref that moved on the remote, or was being moved (the
/// others went through).
fn notes_behind(porcelain: &[u8]) -> bool {
    let text = String::from_utf8_lossy(porcelain);
    let refused: Vec<&str> = text.lines().filter(|l| l.starts_with('!')).collect();
    !refused.is_empty()
        && refused.iter().all(|line| {
            let dst = line
                .split('\t')
                .nth(1)
                .and_then(|r| r.split_once(':'))
                .map_or("", |(_, d)| d);
            // "[remote rejected] (failed to update ref)": another push held the remote's ref lock.
            let raced = ["(fetch first)", "(non-fast-forward)", "[remote rejected]"];
            NOTES_REFS.contains(&dst) && raced.iter().any(|why| line.contains(why))
        })
}

/// Fetches the remote's notes (quarantined, as a pull does) and merges them into ours; false when the remote
/// is no named remote (its notes have no place to land) or nothing could be merged.
fn merge_their_notes(store: &crate::store::Store, remote: &str) -> Result<bool, CommandError> {
    let named = !remote.is_empty()
        && remote
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !remote.starts_with(['.', '-']);
    if !named {
        return Ok(false);
    }
    let notes = remote_notes_ref(remote);
    let fetched = store.fetch_quarantined(remote, &[format!("+refs/notes/agent*:{notes}*")])?;
    if !fetched.refused.is_empty() {
        return Ok(false);
    }
    if let Some(theirs) = store.ref_target(&notes)? {
        store.merge_notes(theirs)?;
    }
    if let Some(theirs) = store.ref_target(&remote_review_ref(remote))? {
        store.merge_review_notes(theirs)?;
    }
    Ok(true)
}

/// git's own words for a failed push: its stderr, and the refused refs of its porcelain output.
fn show_rejections(out: &std::process::Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in stderr.lines() {
        eprintln!("{}", crate::protocol::neutralize(line));
    }
    for line in String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('!'))
    {
        eprintln!("{}", crate::safety::quote::visible(line));
    }
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
