//! `git agent accept`: bring a session's change into the user's working tree, three-way per file.
//!
//! The planning and the writing are the store's ([`crate::store::land`]): the user's current file is *ours*,
//! the session's start (step 0 or base) the *base*, the tip *theirs*. This command renders the plan, refuses
//! on conflicts with `--no-conflicts` / `--commit` (nothing at all is written then), and touches the index
//! only when asked: `--index` stages the accepted paths, `--commit` commits them with `git commit` (the
//! user's hooks run) built in a temporary index, so a refused commit leaves the index as it was
//! ([`crate::store::commit`]); the commit holds the change merged onto HEAD, never the user's uncommitted
//! lines in the same files. `--series` makes one commit per agent step, with the step's reason as message.
//!
//! A landing keeps a record until it is done; `--continue` / `--abort` finish or undo one that was killed.

use clap::Args;

use super::context::Context;
use super::error::CommandError;
use crate::config::file::Attribution;
use crate::protocol::{self, Event, Untrusted};
use crate::safety::tree_path::shown;
use crate::store::commit::Committed;
use crate::store::land::{Action, FilePlan, Plan, Side, Skip};
use crate::store::land_record::PathRecovery;
use crate::store::{LogContents, Meta, ObjectId, Store};

/// Apply the session's change to your working tree (three-way per file; conflicts are reported)
///
/// Only the agent's change is applied: from step 0 (your own captured changes) or the base, to the tip.
/// Edits you made since the session started are never overwritten, nothing is written through a symbolic
/// link, and submodules are never moved. Your index and branches change only with --index or --commit.
#[derive(Debug, Args)]
pub struct AcceptArgs {
    /// The session (any unique prefix of its id; default: the newest)
    id: Option<String>,

    /// Also stage the accepted files in your index
    #[arg(long)]
    index: bool,

    /// Also commit the accepted files on the current branch (your git hooks run); refuses on conflicts
    #[arg(long)]
    commit: bool,

    /// With --commit: one commit per agent step, each with the step's reason as its message
    #[arg(long, requires = "commit")]
    series: bool,

    /// Refuse, changing nothing, if any file would get conflict markers
    #[arg(long)]
    no_conflicts: bool,

    /// Finish an accept that was interrupted (killed, or the machine went down)
    #[arg(long = "continue", conflicts_with_all = ["abort", "id", "commit", "index", "no_conflicts"])]
    continue_landing: bool,

    /// Undo an accept that was interrupted: files get back what they had before it
    #[arg(long, conflicts_with_all = ["id", "commit", "index", "no_conflicts"])]
    abort: bool,
}

pub fn run(ctx: &Context, args: AcceptArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    if args.continue_landing || args.abort {
        return resume(store, args.continue_landing);
    }
    let id = store.resolve_session(args.id.as_deref())?;
    // The summary only: the transcript (a pulled one may be any size) is read when a message needs it.
    let meta = read_meta(store, &id)?;
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
    let range = Range::of(store, &meta)?;
    let env = |name: &str| ctx.env(name);
    let attribution = crate::config::Settings::load(ctx.cwd(), &env)?.attribution();
    if args.series {
        return series(store, &store.read_log(&id)?, &range, attribution);
    }
    let plan = store.plan_landing(range.from, range.tip, &range.label)?;
    if plan.files.is_empty() {
        eprintln!("session {id} changed nothing: nothing to accept");
        return Ok(());
    }
    refuse_unresolved(&plan, &id)?;
    let conflicts = plan.conflicts().count();
    if conflicts > 0 && (args.no_conflicts || args.commit) {
        for file in plan.conflicts() {
            match file.action {
                Action::Skip(Skip::Refused(_)) => eprintln!("{}", line(file, &range.label)),
                _ => eprintln!("  conflict  {}", shown(&file.path)),
            }
        }
        return Err(CommandError::user(format!(
            "{conflicts} file{} changed by you and by session {id} conflict; nothing was changed",
            plural(conflicts)
        ))
        .hint(format!(
            "run `git agent accept {id}` to get conflict markers, or `git agent diff {id}` to look first"
        )));
    }
    // The commit is the change applied to HEAD, not the working tree's files (they may hold the user's own
    // uncommitted lines): planned now, so a change that only applies on top of those refuses before
    // anything is written.
    let on_head = if args.commit {
        Some(on_head(store, &range)?)
    } else {
        None
    };
    land(
        store,
        &plan,
        &format!("accept of session {id}"),
        &range.label,
    )?;
    let paths = landed_paths(&plan);
    if conflicts > 0 {
        if args.index {
            // The clean files are staged all the same; the ones that need the user are named.
            stage(store, &plan, &paths)?;
            eprintln!(
                "staged the {} file{} that landed cleanly; not staged: {}",
                paths.len(),
                plural(paths.len()),
                not_staged(&plan)
            );
        }
        return Err(attention(&plan, &range.label));
    }
    if let Some(versions) = on_head {
        let message = squash_message(&id, &store.read_log(&id)?, attribution);
        let files: Vec<(&str, Side)> = versions
            .iter()
            .map(|(path, side)| (path.as_str(), side.clone()))
            .collect();
        return match store.commit_versions(&files, &message) {
            Ok(Committed::Commit(_)) => {
                eprintln!("committed session {id} on your current branch");
                Ok(())
            }
            Ok(Committed::Nothing) => {
                eprintln!("your branch already has session {id}'s change: nothing to commit");
                Ok(())
            }
            Err(err) => Err(commit_failed(err, &paths)),
        };
    }
    if args.index {
        stage(store, &plan, &paths)?;
        eprintln!("accepted session {id} into your working tree and index (not committed)");
    } else {
        eprintln!("accepted session {id} into your working tree (not committed)");
    }
    Ok(())
}

/// Each path of the session's change as the squash commit has it: merged three-way onto HEAD's version.
/// Refused, nothing changed, when that merge needs the user: the change then overlaps uncommitted work of
/// theirs (step 0's, or made since), which must not be committed as the agent's.
fn on_head(store: &Store, range: &Range) -> Result<Vec<(String, Side)>, CommandError> {
    let head = store.head_commit_if_any()?;
    let plan = store.plan_landing_on(range.from, range.tip, &range.label, head)?;
    let overlaps: Vec<&str> = plan.conflicts().map(|f| f.path.as_str()).collect();
    if !overlaps.is_empty() {
        return Err(CommandError::user(format!(
            "session {}'s change in {} file{} only applies on top of your uncommitted changes there, which \
             must not be committed as the agent's; nothing was changed",
            range.id,
            overlaps.len(),
            plural(overlaps.len())
        ))
        .detail(overlaps.iter().map(|p| format!("  uncommitted  {p}")))
        .hint(format!(
            "commit those changes first, or `git agent accept {}` (without --commit) and commit yourself",
            range.id
        )));
    }
    Ok(plan
        .files
        .iter()
        .map(|f| (f.path.clone(), f.result()))
        .collect())
}

/// The paths a landing left for the user, for `--index`'s report (refused ones shown neutralised).
fn not_staged(plan: &Plan) -> String {
    let names: Vec<String> = plan
        .conflicts()
        .map(|f| match &f.action {
            Action::Skip(Skip::Refused(refusal)) => shown(&refusal.path),
            _ => shown(&f.path),
        })
        .collect();
    names.join(", ")
}

/// What a landing that needs the user says: how many files have markers, how many were kept as theirs.
pub(super) fn attention(plan: &Plan, label: &str) -> CommandError {
    let marked = plan
        .files
        .iter()
        .filter(|f| matches!(f.action, Action::Conflict(_)))
        .count();
    let refused = plan
        .files
        .iter()
        .filter(|f| matches!(f.action, Action::Skip(Skip::Refused(_))))
        .count();
    let kept = plan.conflicts().count() - marked - refused;
    let mut parts = Vec::new();
    if refused > 0 {
        parts.push(format!(
            "{refused} path{} of the change refused and not landed (listed above: a name git would refuse \
             to check out)",
            plural(refused)
        ));
    }
    if marked > 0 {
        parts.push(format!(
            "{marked} conflict{} with your changes: resolve the markers (<<<<<<< yours / >>>>>>> {label})",
            plural(marked)
        ));
    }
    if kept > 0 {
        parts.push(format!(
            "{kept} file{} kept as yours (listed above with the command that shows theirs)",
            plural(kept)
        ));
    }
    CommandError::user(parts.join("; "))
}

/// Where a session's change starts and ends, and how conflict markers name it.
pub(super) struct Range {
    pub id: String,
    /// Step 0 (the user's captured work is not the agent's) or the base.
    pub from: ObjectId,
    pub base: ObjectId,
    pub tip: ObjectId,
    /// `agent/<id>`.
    pub label: String,
}

/// The summary of session `id` (`meta.json`), without its transcript.
pub(super) fn read_meta(store: &Store, id: &str) -> Result<Meta, CommandError> {
    Ok(store
        .read_meta(id)?
        .ok_or_else(|| crate::store::StoreError::NoSession(id.to_owned()))?)
}

impl Range {
    pub(super) fn of(store: &Store, meta: &Meta) -> Result<Range, CommandError> {
        let tip = super::context::session_tip(store, meta)?;
        let parse = |hex: &str| {
            ObjectId::from_hex(hex.as_bytes())
                .map_err(|e| CommandError::internal(format!("bad commit in the session log: {e}")))
        };
        Ok(Range {
            id: meta.id.clone(),
            from: parse(meta.step0.as_deref().unwrap_or(&meta.base))?,
            base: parse(&meta.base)?,
            tip,
            label: format!("agent/{}", meta.id),
        })
    }
}

/// Refuses (nothing written) while files still have the conflict markers of an earlier accept: landing
/// again would nest them (issue 17, defect 11).
pub(super) fn refuse_unresolved(plan: &Plan, id: &str) -> Result<(), CommandError> {
    let files: Vec<&str> = plan.unresolved().map(|f| f.path.as_str()).collect();
    if files.is_empty() {
        return Ok(());
    }
    Err(CommandError::user(format!(
        "{} still {} the conflict markers of an earlier accept; nothing was changed",
        files.join(", "),
        if files.len() == 1 { "has" } else { "have" }
    ))
    .hint(format!(
        "resolve the markers (<<<<<<< yours / >>>>>>> agent/{id}) first, or take your version back with \
         `git checkout -- <file>`"
    )))
}

/// Lands `plan` with a record kept (see [`crate::store::land_record`]), a line for each path as it is done.
pub(super) fn land(
    store: &Store,
    plan: &Plan,
    what: &str,
    label: &str,
) -> Result<(), CommandError> {
    store.land(plan, what, |file| eprintln!("{}", line(file, label)))?;
    Ok(())
}

/// The paths that now hold the change as planned (written or already there), conflicts and kept paths
/// left out: what `--index` stages and `--commit` commits.
pub(super) fn landed_paths(plan: &Plan) -> Vec<&str> {
    plan.files
        .iter()
        .filter(|f| !f.needs_attention())
        .map(|f| f.path.as_str())
        .collect()
}

/// Stages exactly `paths` of `plan`'s change (deletions too) in the user's index, merged with what they had
/// staged there: their unstaged edits in those files stay unstaged ([`Store::stage_change()`]).
pub(super) fn stage(store: &Store, plan: &Plan, paths: &[&str]) -> Result<(), CommandError> {
    let left = store.stage_change(plan, paths).map_err(|e| {
        CommandError::user(format!(
            "the files are in your working tree, but staging them failed: {e}"
        ))
    })?;
    if left.is_empty() {
        return Ok(());
    }
    Err(CommandError::user(format!(
        "{} file{} of the change {} in your working tree but not staged; the rest is staged",
        left.len(),
        plural(left.len()),
        if left.len() == 1 { "is" } else { "are" }
    ))
    .detail(
        left.iter()
            .map(|u| format!("  not staged  {} ({})", u.path, u.why)),
    )
    .hint("stage what you want of them with `git add -p <file>`"))
}

/// What a refused `accept --commit` says: exactly where the files are.
fn commit_failed(err: crate::store::StoreError, paths: &[&str]) -> CommandError {
    CommandError::user(format!(
        "{err}: the accepted files are in your working tree, uncommitted; your index is as it was"
    ))
    .detail(paths.iter().map(|p| format!("  uncommitted  {p}")))
    .hint("fix what the hook reported, then `git add` and `git commit` them yourself")
}

/// What was done to one path, as a line of the listing. The path comes from the session's tree (model
/// output, or a pulled branch): shown with its control characters visible (issue 22, finding 8).
pub(super) fn line(file: &FilePlan, label: &str) -> String {
    let path = &shown(&file.path);
    let what = match &file.action {
        Action::AlreadyApplied => "unchanged",
        Action::Write => "updated",
        Action::Delete => "deleted",
        Action::Merged(_) => "merged",
        Action::Conflict(_) => "CONFLICT",
        Action::Skip(Skip::Refused(refusal)) => {
            return format!("  refused   {refusal}: not landed, nothing written there")
        }
        Action::Skip(why) => {
            return format!("  kept      {path} (yours; {why}; theirs: git show {label}:{path})")
        }
    };
    format!("  {what:<9} {path}")
}

pub(super) fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `--continue` / `--abort`: finishes or undoes the landing that was interrupted in this working tree.
fn resume(store: &Store, forward: bool) -> Result<(), CommandError> {
    let Some(landing) = store.interrupted_landing()? else {
        return Err(CommandError::user(
            "there is no interrupted accept in this working tree: nothing to continue or abort",
        ));
    };
    let what = landing.what.clone();
    let outcomes = if forward {
        store.finish_landing(landing)?
    } else {
        store.undo_landing(landing)?
    };
    let mut changed_since = 0;
    for (path, outcome) in &outcomes {
        let word = match (outcome, forward) {
            (PathRecovery::Written, true) => "updated",
            (PathRecovery::Written, false) => "restored",
            (PathRecovery::AsIs, _) => "unchanged",
            (PathRecovery::ChangedSince, _) => {
                changed_since += 1;
                "kept"
            }
        };
        let note = if *outcome == PathRecovery::ChangedSince {
            " (changed since the accept stopped: left as it is)"
        } else {
            ""
        };
        eprintln!("  {word:<9} {}{note}", shown(path));
    }
    let done = if forward { "finished" } else { "undid" };
    eprintln!("{done} the interrupted {what}");
    if changed_since > 0 {
        eprintln!(
            "warning: {changed_since} file{} changed since: check {} with `git diff`",
            plural(changed_since),
            if changed_since == 1 { "it" } else { "them" }
        );
    }
    Ok(())
}

/// `--commit --series`: one commit per agent step on the user's branch (step 0 is the user's own work and
/// stays uncommitted), each landed three-way and committed through the user's hooks. Refused, with nothing
/// changed, when files of the session have uncommitted changes or any step would conflict.
fn series(
    store: &Store,
    log: &LogContents,
    range: &Range,
    attribution: Attribution,
) -> Result<(), CommandError> {
    let id = &range.id;
    let steps = store.step_commits(range.from, range.tip)?;
    if steps.is_empty() {
        eprintln!("session {id} made no steps: nothing to accept");
        return Ok(());
    }
    // Every path some step changes, also those a later step puts back (not in from..tip): each step
    // commits its files as the working tree has them, so none may hold uncommitted work of the user's.
    let mut touched = std::collections::BTreeSet::new();
    let mut parent = range.from;
    for &step in &steps {
        touched.extend(store.changes(parent, step)?.into_iter().map(|c| c.path));
        parent = step;
    }
    let touched: Vec<&str> = touched.iter().map(String::as_str).collect();
    let dirty = store.uncommitted(&touched)?;
    if !dirty.is_empty() {
        return Err(CommandError::user(format!(
            "{} file{} that session {id} changes {} uncommitted changes of yours; nothing was changed",
            dirty.len(),
            plural(dirty.len()),
            if dirty.len() == 1 { "has" } else { "have" }
        ))
        .detail(dirty.iter().map(|p| format!("  uncommitted  {p}")))
        .hint("commit or stash them first (`git stash`), or accept the session without --series"));
    }
    let landed = store.landed_steps(id, range.base)?;
    let plans = store.plan_series(range.from, &steps, &range.label)?;
    let mut conflicts: Vec<String> = Vec::new();
    for (plan, &commit) in plans.iter().zip(&steps) {
        if store.step_of(commit)? > landed {
            conflicts.extend(plan.conflicts().map(|f| f.path.clone()));
        }
    }
    if !conflicts.is_empty() {
        conflicts.sort();
        conflicts.dedup();
        return Err(CommandError::user(format!(
            "{} file{} would conflict with your branch in a step of session {id}; nothing was changed",
            conflicts.len(),
            plural(conflicts.len())
        ))
        .detail(conflicts.iter().map(|p| format!("  conflict  {p}")))
        .hint(format!(
            "`git agent accept {id}` merges the whole change with conflict markers instead"
        )));
    }
    let mut parent = range.from;
    let mut made = Vec::new();
    for commit in steps {
        let (from, step) = (parent, store.step_of(commit)?);
        parent = commit;
        if step <= landed {
            eprintln!("step {step}: already on your branch");
            continue;
        }
        let plan = store.plan_landing(from, commit, &range.label)?;
        if plan.conflicts().next().is_some() {
            return Err(CommandError::user(format!(
                "step {step} of session {id} conflicts with files changed while it was landing: stopped"
            ))
            .hint("look at `git status`; the steps before it are committed"));
        }
        land(
            store,
            &plan,
            &format!("accept of session {id} (step {step})"),
            &range.label,
        )?;
        let paths = landed_paths(&plan);
        let message = step_message(store, log, step, commit, attribution)?;
        match store.commit_paths(&paths, &message) {
            Ok(Committed::Commit(c)) => {
                let subject = message.lines().next().unwrap_or_default();
                eprintln!(
                    "step {step}: committed {} {}",
                    short(c),
                    Untrusted::name(subject)
                );
                made.push(c);
            }
            Ok(Committed::Nothing) => eprintln!("step {step}: already on your branch"),
            Err(err) => {
                let done = if made.is_empty() {
                    "no step was committed".to_owned()
                } else {
                    format!(
                        "committed before it: {}",
                        made.iter()
                            .map(|c| short(*c))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                return Err(CommandError::user(format!(
                    "step {step}: {err}: its files are in your working tree, uncommitted; your index is as it was"
                ))
                .detail([format!("  {done}; the later steps were not applied")])
                .detail(paths.iter().map(|p| format!("  uncommitted  {p}")))
                .hint(format!(
                    "fix what the hook reported and commit those files, then `git agent accept --commit --series {id}` lands the rest"
                )));
            }
        }
    }
    eprintln!(
        "committed session {id} as {} commit{} on your current branch",
        made.len(),
        plural(made.len())
    );
    Ok(())
}

fn short(c: ObjectId) -> String {
    c.to_string()[..7].to_owned()
}

/// The commit message of one step: the model's stated reason (from the step's note) as subject and body,
/// the step's action, then the trailers. The reason is model text: it goes through
/// [`protocol::commit_subject()`] and [`protocol::commit_prose()`], so git-agent's trailers are the only ones.
fn step_message(
    store: &Store,
    log: &LogContents,
    step: u32,
    commit: ObjectId,
    attribution: Attribution,
) -> Result<String, CommandError> {
    let note = store.note(commit)?.unwrap_or_default();
    let (label, why) = parse_note(&note);
    let label = label.unwrap_or_else(|| format!("step {step}"));
    let why = why.filter(|w| !w.starts_with("(the model gave no reason"));
    let (subject, body) = match &why {
        Some(why) => subject_and_body(why),
        None => (protocol::commit_subject(&label), String::new()),
    };
    let label = protocol::commit_subject(&label);
    let mut message = subject;
    if !body.is_empty() {
        message.push_str("\n\n");
        message.push_str(&body);
    }
    message.push_str(&format!(
        "\n\nStep {step} of agent/{}: {label}\n\n",
        log.meta.id
    ));
    message.push_str(&trailers(
        &log.meta.id,
        Some(step),
        &log.meta.model,
        attribution,
    ));
    Ok(message)
}

/// A subject (the first line, cut to 72 characters) and a body from model text: the body repeats the first
/// line only when the subject had to cut it, and every line is made plain prose.
fn subject_and_body(reason: &str) -> (String, String) {
    let first = protocol::commit_subject(reason);
    let subject = cut(&first, 72);
    let rest = reason.trim().split_once('\n').map_or("", |(_, rest)| rest);
    let body = if subject == first {
        protocol::commit_prose(rest)
    } else {
        protocol::commit_prose(reason)
    };
    // Models often restate their first line: a body that opens with the subject again drops that line.
    let body = match body.split_once('\n') {
        Some((opening, rest)) if opening.trim() == subject => {
            rest.trim_start_matches('\n').to_owned()
        }
        None if body.trim() == subject => String::new(),
        _ => body,
    };
    (subject, body)
}

/// The label (`edit src/a.rs`) and the reason of a step's note (`step N: <label>` / `call: ...` / `why: ...`,
/// see `agent::journal::step_note`); the first note when several were appended.
pub(super) fn parse_note(note: &str) -> (Option<String>, Option<String>) {
    let first = note.split("\n\nstep ").next().unwrap_or_default();
    let label = first
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("step "))
        .and_then(|l| l.split_once(": "))
        .map(|(_, label)| label.trim().to_owned());
    let why = first
        .find("\nwhy: ")
        .map(|at| first[at + "\nwhy: ".len()..].trim().to_owned())
        .filter(|w| !w.is_empty());
    (label, why)
}

/// `text` cut to at most `max` characters at a word, with an ellipsis when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let head: String = text.chars().take(max - 1).collect();
    let head = match head.rfind(' ') {
        Some(at) if at > max / 2 => &head[..at],
        _ => &head,
    };
    format!("{}…", head.trim_end())
}

/// `Agent-Session` (always), `Agent-Step` (a series commit), `Co-authored-by` (unless `attribution = "none"`).
fn trailers(id: &str, step: Option<u32>, model: &str, attribution: Attribution) -> String {
    let mut out = format!("Agent-Session: {id}\n");
    if let Some(step) = step {
        out.push_str(&format!("Agent-Step: {step}\n"));
    }
    if attribution == Attribution::CoAuthoredBy {
        let model = if model.is_empty() {
            String::new()
        } else {
            format!(" ({model})")
        };
        out.push_str(&format!(
            "Co-authored-by: git-agent{model} <git-agent@noreply.invalid>\n"
        ));
    }
    out
}

/// The prompt's first line as subject, the agent's last answer as body, and the trailers.
fn squash_message(id: &str, log: &LogContents, attribution: Attribution) -> String {
    let subject = log
        .meta
        .prompt
        .lines()
        .next()
        .unwrap_or("git-agent session")
        .trim();
    let answer = crate::agent::journal::events(&log.events)
        .into_iter()
        .rev()
        .find_map(|e| match e {
            Event::TurnEnd { answer, .. } if !answer.trim().is_empty() => Some(answer),
            _ => None,
        })
        .unwrap_or_default();
    let body = protocol::commit_prose(answer.split("\n\n").next().unwrap_or_default());
    let body = body.trim();
    let mut message = protocol::commit_subject(subject);
    if !body.is_empty() {
        message.push_str("\n\n");
        message.push_str(body);
    }
    message.push_str("\n\n");
    message.push_str(&trailers(id, None, &log.meta.model, attribution));
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_gives_its_label_and_reason() {
        let note = "step 2: edit a.txt\ncall: edit_file {}\nwhy: Rename it.\nSecond line.\n\nstep 2: again\nwhy: no\n";
        let (label, why) = parse_note(note);
        assert_eq!(label.as_deref(), Some("edit a.txt"));
        assert_eq!(why.as_deref(), Some("Rename it.\nSecond line."));
        assert_eq!(parse_note(""), (None, None));
    }

    #[test]
    fn subjects_are_cut_at_a_word() {
        assert_eq!(cut("short", 72), "short");
        let long = "word ".repeat(30);
        let cut = cut(&long, 72);
        assert!(cut.chars().count() <= 72 && cut.ends_with("word…"), "{cut}");
    }

    #[test]
    fn attribution_adds_or_omits_the_co_author() {
        let with = trailers("abc123", Some(1), "openai/x", Attribution::CoAuthoredBy);
        assert_eq!(
            with,
            "Agent-Session: abc123\nAgent-Step: 1\nCo-authored-by: git-agent (openai/x) <git-agent@noreply.invalid>\n"
        );
        assert_eq!(
            trailers("abc123", None, "openai/x", Attribution::None),
            "Agent-Session: abc123\n"
        );
    }
}
