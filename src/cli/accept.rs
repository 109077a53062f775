//! `git agent accept`: bring a session's change into the user's working tree, three-way per file.
//!
//! The planning and the writing are the store's ([`crate::store::land`]): the user's current file is *ours*,
//! the session's start (step 0 or base) the *base*, the tip *theirs*. This command renders the plan, refuses
//! on conflicts with `--no-conflicts` / `--commit` (nothing at all is written then), and only with
//! `--commit` touches the index: it stages and commits exactly the accepted paths with `git commit`, so the
//! user's hooks run.

use std::path::Path;

use clap::Args;

use super::{CommandError, Context};
use crate::agent::journal::Event;
use crate::store::land::{Action, FilePlan, Plan};
use crate::store::ObjectId;

/// Apply the session's change to your working tree (three-way per file; conflicts are reported)
///
/// Only the agent's change is applied: from step 0 (your own captured changes) or the base, to the tip.
/// Edits you made since the session started are never overwritten.
#[derive(Debug, Args)]
pub struct AcceptArgs {
    /// The session (any unique prefix of its id; default: the newest)
    id: Option<String>,

    /// Also commit the accepted files on the current branch (your git hooks run); refuses on conflicts
    #[arg(long)]
    commit: bool,

    /// Refuse, changing nothing, if any file would get conflict markers
    #[arg(long)]
    no_conflicts: bool,
}

pub fn run(ctx: &Context, args: AcceptArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let id = store.resolve_session(args.id.as_deref())?;
    let log = store.read_log(&id)?;
    let meta = &log.meta;
    // This repository's own record, not the log's: a pulled log could claim anything.
    if store.is_here(&id) {
        // Its changes are already in the user's working tree: a three-way merge would only report conflicts.
        return Err(CommandError::user(format!(
            "session {id} worked in your working tree (--here): its changes are already there"
        ))
        .hint(format!(
            "review them with `git diff`, commit them with `git commit`; `git log agent/{id}` lists the steps"
        )));
    }
    let tip = super::session_tip(store, meta)?;
    let from = meta.step0.as_deref().unwrap_or(&meta.base);
    let from = ObjectId::from_hex(from.as_bytes())
        .map_err(|e| CommandError::internal(format!("bad base in the session log: {e}")))?;
    let label = format!("agent/{id}");
    let plan = store.plan_landing(from, tip, &label)?;
    if plan.files.is_empty() {
        eprintln!("session {id} changed nothing: nothing to accept");
        return Ok(());
    }
    let conflicts = plan.conflicts().count();
    if conflicts > 0 && (args.no_conflicts || args.commit) {
        for file in plan.conflicts() {
            eprintln!("  conflict  {}", file.path);
        }
        return Err(CommandError::user(format!(
            "{conflicts} file{} changed by you and by session {id} conflict; nothing was changed",
            plural(conflicts)
        ))
        .hint(format!(
            "run `git agent accept {id}` to get conflict markers, or `git agent diff {id}` to look first"
        )));
    }
    let applied = apply(store, &plan, &label)?;
    if conflicts > 0 {
        return Err(CommandError::user(format!(
            "{conflicts} conflict{} with your changes: resolve the markers (<<<<<<< yours / >>>>>>> {label})",
            plural(conflicts)
        )));
    }
    if args.commit {
        return commit(&plan.root, &id, &log, &applied);
    }
    eprintln!("accepted session {id} into your working tree (not committed)");
    Ok(())
}

/// Applies `plan` file by file, a line for each as it is done; returns the paths written.
fn apply<'p>(
    store: &crate::store::Store,
    plan: &'p Plan,
    label: &str,
) -> Result<Vec<&'p str>, CommandError> {
    let mut applied = Vec::new();
    for file in &plan.files {
        store
            .apply_file(plan, file)
            .map_err(|e| CommandError::from(e).context(&file.path))?;
        eprintln!("{}", line(file, label));
        if file.writes() {
            applied.push(file.path.as_str());
        }
    }
    Ok(applied)
}

/// What was done to one path, as a line of the listing.
fn line(file: &FilePlan, label: &str) -> String {
    let path = &file.path;
    let what = match &file.action {
        Action::AlreadyApplied => "unchanged",
        Action::Write => "updated",
        Action::Delete => "deleted",
        Action::Merged(_) => "merged",
        Action::Conflict(_) => "CONFLICT",
        Action::Skip(why) => {
            return format!("  kept      {path} (yours; {why}; theirs: git show {label}:{path})")
        }
    };
    format!("  {what:<9} {path}")
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Stages and commits exactly `paths` with `git commit`, so the user's hooks run; other staged work stays staged.
fn commit(
    root: &Path,
    id: &str,
    log: &crate::store::LogContents,
    paths: &[&str],
) -> Result<(), CommandError> {
    if paths.is_empty() {
        eprintln!("your working tree already has session {id}'s change: nothing to commit");
        return Ok(());
    }
    let run = |args: &[&str]| -> Result<(), CommandError> {
        let status = super::git_inherit(root)
            .arg("--literal-pathspecs")
            .args(args)
            .args(paths)
            .status()
            .map_err(|e| CommandError::internal(format!("could not run git: {e}")))?;
        if status.success() {
            Ok(())
        } else {
            Err(CommandError::user(format!(
                "`git {}` failed: the accepted files are in your working tree, uncommitted",
                args.first().copied().unwrap_or_default()
            )))
        }
    };
    let message = commit_message(id, log);
    run(&["add", "-A", "--"])?;
    run(&["commit", "-q", "-m", &message, "--"])?;
    eprintln!("committed session {id} on your current branch");
    Ok(())
}

/// The prompt's first line as subject, the agent's last answer as body, and the session trailer.
fn commit_message(id: &str, log: &crate::store::LogContents) -> String {
    let subject = log
        .meta
        .prompt
        .lines()
        .next()
        .unwrap_or("git-agent session")
        .trim();
    let answer = log
        .events
        .iter()
        .rev()
        .filter_map(Event::from_json)
        .find_map(|e| match e {
            Event::End { answer, .. } if !answer.trim().is_empty() => Some(answer),
            _ => None,
        })
        .unwrap_or_default();
    let body = answer.split("\n\n").next().unwrap_or_default().trim();
    let mut message = subject.to_owned();
    if !body.is_empty() {
        message.push_str("\n\n");
        message.push_str(body);
    }
    message.push_str(&format!("\n\nAgent-Session: {id}\n"));
    message
}
