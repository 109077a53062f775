//! `git agent pull`: fetch shared sessions and merge the remote's notes, review records,
//! memory and skills into ours (never overwriting them).
//!
//! Session logs and branches are fetched beside ours and then taken one by one: created or fast-forwarded,
//! except the sessions started here, which a pull never moves (issue 17, defect 1).
//!
//! Sessions are fetched by `refs/agent/sessions/*`, not `refs/agent/*`: memory is merged, and a plain fetch
//! into `refs/agent/memory` would be refused as soon as both sides wrote to it (a ref family that is merged
//! needs its own refspec, as notes, memory and skills have).

use clap::Args;

use super::context::Context;
use super::error::CommandError;
use crate::protocol::Untrusted;
use crate::safety::tree_path::shown;
use crate::store::memory::{memory_fetch_refspec, remote_memory_ref};
use crate::store::share::{remote_notes_ref, remote_review_ref, sessions_fetch_refspecs};
use crate::store::skills::remote_skills_ref;

/// Fetch sessions, session branches, notes, review records, memory and skills from a remote; notes, review
/// records, memory and skills are merged, not overwritten
#[derive(Debug, Args)]
pub struct PullArgs {
    /// The remote (default: origin)
    #[arg(default_value = "origin")]
    remote: String,
}

pub fn run(ctx: &Context, args: PullArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let notes = remote_notes_ref(&args.remote);
    let memory = remote_memory_ref(&args.remote);
    let skills = remote_skills_ref(&args.remote);
    // Sessions by name: `refs/agent/*` would also take refs that are merged rather than fetched over
    // (memory, skills). Beside ours, not over them: a session started here is never moved by a pull (see
    // `store::share`). The remote's notes, memory and skills land beside ours and are merged below; forced
    // because only we write there. Globs, so a remote without them is not an error.
    let mut refspecs = sessions_fetch_refspecs(&args.remote).to_vec();
    refspecs.push(format!("+refs/notes/agent*:{notes}*"));
    refspecs.push(memory_fetch_refspec(&args.remote));
    refspecs.push(format!("+refs/agent/skills*:{skills}*"));
    // Through a scratch repository, ref by ref with git's fsck checks: a hostile ref keeps none of its
    // objects here and blocks none of the others (issue 22, finding 3).
    let fetched = store.fetch_quarantined(&args.remote, &refspecs)?;
    for refused in &fetched.refused {
        eprintln!(
            "warning: {} of {} ({}) was not taken: {}; none of its objects were kept",
            refused.what, args.remote, refused.remote_ref, refused.why
        );
    }
    if !fetched.refused.is_empty() {
        eprintln!(
            "hint: inspect what {} holds without keeping it: `git ls-remote {} <ref>`, or fetch it into a \
             scratch repository (`git init --bare /tmp/x && git -C /tmp/x fetch <url> <ref>`)",
            args.remote, args.remote
        );
    }
    let sessions = store.take_pulled_sessions(&args.remote)?;
    for refused in &sessions.refused {
        eprintln!(
            "warning: the session log {} of {} was not taken: {}; inspect it with `git log -p {}`",
            Untrusted::name(&refused.id),
            args.remote,
            Untrusted::name(&refused.why),
            Untrusted::name(&refused.staged)
        );
    }
    for kept in &sessions.kept {
        let why = if kept.local {
            "the session was started here, and a pull never moves its refs"
        } else {
            "theirs does not follow yours (not a fast-forward)"
        };
        eprintln!(
            "warning: {} left as it was: {why}; {}'s version is at {} (compare with `git log {} {}`)",
            kept.ours, args.remote, kept.theirs, kept.ours, kept.theirs
        );
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
    if let Some(theirs) = store.ref_target(&memory)? {
        // Every entry and index line checked first; what fails is left out, the rest merged.
        let (theirs, left_out) = store.checked_memory(theirs)?;
        for item in &left_out {
            eprintln!(
                "warning: memory of {} (in {memory}): {} left out: {}; inspect it with `git show {memory}:{}`",
                args.remote,
                shown(&item.path),
                shown(&item.why),
                shown(&item.path)
            );
        }
        let merged = store.merge_memory(theirs, &args.remote)?;
        if merged.commit.is_some() {
            let mut line = format!(
                "merged the memory of {}: {} added, {} updated",
                args.remote, merged.added, merged.updated
            );
            if !merged.review.is_empty() {
                line.push_str(&format!(
                    ", {} edited on both sides ({}): keep one version with `git agent memory edit <id>`",
                    merged.review.len(),
                    Untrusted::name(&merged.review.join(", "))
                ));
            }
            eprintln!("{line}");
        }
    }
    if let Some(theirs) = store.ref_target(&skills)? {
        let before = stored_skill_names(store);
        let report = store.merge_skills(theirs, &args.remote)?;
        for (name, why) in &report.skipped {
            eprintln!(
                "warning: skill {} of {} (in {skills}) was not merged: {}; inspect it with \
                 `git ls-tree -r -l {skills} -- {}`",
                shown(name),
                args.remote,
                // The reason may quote the pulled name or front matter (issue 22, finding 8).
                Untrusted::name(why),
                shown(name)
            );
        }
        report_taken_skills(store, &args.remote, &before, &report.taken);
        for name in &report.conflicts {
            // A pulled tree's name: shown neutralised (issue 22, finding 8).
            let name = Untrusted::name(name);
            eprintln!(
                "warning: skill {name} changed here and on {}: kept ours; theirs is in {skills}:{name} \
                 (`git archive {skills} {name} | tar -x -C <dir>`, then `git agent skill add <dir>/{name}`)",
                args.remote
            );
        }
    }
    Ok(())
}

/// The names of the skills stored in `refs/agent/skills` now.
fn stored_skill_names(store: &crate::store::Store) -> std::collections::BTreeSet<String> {
    store
        .read_skills()
        .map(|tree| tree.skills.into_iter().map(|s| s.name).collect())
        .unwrap_or_default()
}

/// Says which skills a pull brought: new ones, changed ones (a remote may rewrite a skill the user relied
/// on), and those that the user's own skill of the same name shadows, so sessions keep using theirs (issue
/// 22, finding 11). Names come from the remote's tree, so they are shown neutralised.
fn report_taken_skills(
    store: &crate::store::Store,
    remote: &str,
    before: &std::collections::BTreeSet<String>,
    taken: &[String],
) {
    if taken.is_empty() {
        return;
    }
    let (changed, new): (Vec<&String>, Vec<&String>) =
        taken.iter().partition(|name| before.contains(*name));
    let list = |names: &[&String]| {
        names
            .iter()
            .map(|n| Untrusted::name(n).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let remote = Untrusted::name(remote);
    if !new.is_empty() {
        eprintln!("skills from {remote}: new {}", list(&new));
    }
    if !changed.is_empty() {
        eprintln!(
            "skills from {remote}: changed {} (see `git agent skill show NAME`)",
            list(&changed)
        );
    }
    let catalog = crate::store::skills::sources::Catalog::load(store, dirs::home_dir().as_deref());
    for name in taken {
        let own = catalog
            .find(name)
            .filter(|skill| skill.source != crate::store::skills::sources::Source::Ref);
        if let Some(own) = own {
            eprintln!(
                "skill {} from {remote} is not used: your own {} of the same name comes first \
                 (remove or rename it to use the pulled one)",
                Untrusted::name(name),
                Untrusted::name(&own.source.shown(name))
            );
        }
    }
}
