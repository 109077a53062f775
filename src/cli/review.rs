//! `git agent review`: take or leave a session's change hunk by hunk, with comments kept in git.
//!
//! The change is the one `diff` shows (from step 0 or the base, to the tip), cut into hunks by
//! [`crate::store::hunks`]. Decisions come from the terminal ([`super::review_tty`], like `git add -p`) or
//! from arguments and a JSON-lines file for scripts and editors. What is taken lands in the working tree as
//! `accept` lands a change: three-way, through [`crate::store::land`], with theirs built from the base and the
//! taken hunks only, so nothing of the user's is lost. Every decision is recorded in
//! `refs/notes/agent-review` ([`crate::store::review`]); the comments on hunks left go to the model on the
//! next `ask --resume` (or at once with `--send`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, IsTerminal};

use clap::{Args, FromArgMatches};
use serde::Deserialize;

use super::accept::{self, Range};
use super::context::Context;
use super::error::{CommandError, ErrorKind};
use super::review_tty::Unit;
use crate::safety::tree_path::{check_str, shown, EntryKind};
use crate::store::hunks::{FileChange, Hunk};
use crate::store::land::Side;
use crate::store::review::{Decision, Record, Verdict, REVIEW_REF};
use crate::store::Store;

/// Take or leave the session's change hunk by hunk; comments are kept in git and sent to the agent
///
/// In a terminal it walks the change like `git add -p`: y take, n leave, c leave with a comment, s split,
/// e edit, a/d take/leave the rest of the file, q quit, ? help. Without one, give the decisions with
/// --take, --leave and --decisions. Taken hunks go into your working tree three-way, as `accept` does;
/// every decision is recorded in refs/notes/agent-review on the session's tip.
#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// The session (any unique prefix of its id; default: the newest)
    id: Option<String>,

    /// Take every hunk of these files
    #[arg(long, value_name = "PATH", num_args = 1..)]
    take: Vec<String>,

    /// Leave every hunk of these files
    #[arg(long, value_name = "PATH", num_args = 1..)]
    leave: Vec<String>,

    /// The comment for the files given to --leave (sent to the agent on resume)
    #[arg(long, value_name = "TEXT", requires = "leave")]
    comment: Option<String>,

    /// Decisions as JSON lines ('-': stdin): {"path", "hunk" (its @@ header) or "index", "decision": "take"|"leave", "comment"}
    #[arg(long, value_name = "FILE")]
    decisions: Option<String>,

    /// Also stage the files the taken hunks went into
    #[arg(long)]
    index: bool,

    /// List the change's hunks as JSON lines (path, index, header, text) and change nothing
    #[arg(long, conflicts_with_all = ["take", "leave", "decisions", "send", "index"])]
    list: bool,

    /// Then resume the session so the agent revises what was left (optional prompt)
    #[arg(long, value_name = "PROMPT", num_args = 0..=1, default_missing_value = "")]
    send: Option<String>,
}

pub fn run(ctx: &mut Context, args: ReviewArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let id = store.resolve_session(args.id.as_deref())?;
    // The summary only: a pulled transcript may be any size, and review needs none of it.
    let meta = accept::read_meta(store, &id)?;
    let range = Range::of(store, &meta)?;
    let changes = store.file_changes(range.from, range.tip)?;
    if args.list {
        return list(&changes);
    }
    // This repository's own record, as accept checks it: a pulled log could claim anything.
    if store.is_here(&id) {
        // The change is already in the user's files: taking would change nothing, leaving would not remove it.
        return Err(CommandError::user(format!(
            "session {id} worked in your working tree (--here): its changes are already there, so review \
             can neither take nor leave them; nothing was changed"
        ))
        .hint(format!(
            "`git add -p` takes hunks into your index, `git restore -p` drops them from your files; \
             `git agent ask --resume {id} \"...\"` tells the agent what to change"
        )));
    }
    if changes.is_empty() {
        eprintln!("session {id} changed nothing: nothing to review");
        return Ok(());
    }
    // With --send and no earlier comment the agent has not seen, this round's comments are all it can send.
    let earlier = args.send.is_some()
        && !store
            .unresolved_review(&id, range.from, range.tip)?
            .is_empty();
    let scripted = !args.take.is_empty() || !args.leave.is_empty() || args.decisions.is_some();
    let units = if scripted {
        let units = scripted_units(ctx, &args, &changes)?;
        if args.send.is_some() && !earlier && !commented(&units) {
            // Known before anything is done: refuse with nothing changed.
            return Err(nothing_to_send(&id, "nothing was changed"));
        }
        units
    } else if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        super::review_tty::walk(store, &changes)?
    } else {
        return Err(CommandError::new(
            ErrorKind::Usage,
            "no decisions: run `git agent review` in a terminal, or give --take, --leave or --decisions",
        )
        .hint(format!("`git agent review {id} --list` lists the hunks")));
    };
    if units.is_empty() {
        eprintln!("no decisions made: nothing changed");
        return match args.send {
            Some(prompt) if earlier => send(ctx, &id, &prompt),
            Some(_) => Err(nothing_to_send(&id, "nothing was changed")),
            None => Ok(()),
        };
    }
    let plan = taken_plan(store, &range, &changes, &units)?;
    if let Some(old) = store.interrupted_landing()? {
        return Err(CommandError::user(format!(
            "an earlier {} was interrupted: finish it with `git agent accept --continue` or undo it with \
             `git agent accept --abort` first",
            old.what
        )));
    }
    accept::refuse_unresolved(&plan, &id)?;
    record(store, &range, &changes, &units)?;
    accept::land(
        store,
        &plan,
        &format!("review of session {id}"),
        &range.label,
    )?;
    summary(&units, &range);
    if plan.conflicts().next().is_some() {
        return Err(accept::attention(&plan, &range.label));
    }
    if args.index {
        accept::stage(store, &plan, &accept::landed_paths(&plan))?;
    }
    match args.send {
        // A walk in the terminal is only known once it is done: its decisions are kept, the send refused.
        Some(_) if !earlier && !commented(&units) => Err(nothing_to_send(
            &id,
            &format!("your decisions are kept in {REVIEW_REF}"),
        )),
        Some(prompt) => send(ctx, &id, &prompt),
        None => Ok(()),
    }
}

/// Whether a hunk was left with a comment for the agent.
fn commented(units: &[Unit]) -> bool {
    units
        .iter()
        .any(|u| u.verdict == Verdict::Leave && u.comment.is_some())
}

/// `--send` with no comment the agent has not seen: resuming would send it nothing to revise.
fn nothing_to_send(id: &str, outcome: &str) -> CommandError {
    CommandError::user(format!(
        "no comment to send: session {id} has no hunk left with a comment the agent has not seen; {outcome}"
    ))
    .hint(format!(
        "leave a hunk with `c` (or --leave PATH --comment TEXT) to send it; `git agent ask --resume {id} \"...\"` \
         resumes without one"
    ))
}

/// `--list`: every hunk as a JSON line, the numbering `--decisions` uses.
fn list(changes: &[FileChange]) -> Result<(), CommandError> {
    let mut out = String::new();
    for change in changes {
        // A path the policy refuses is listed as refused, shown neutralised, never as an ordinary file.
        if let Err(refusal) = check_str(&change.path, EntryKind::File) {
            let line = serde_json::json!({"path": shown(&refusal.path), "refused": refusal.rule.describe()});
            out.push_str(&line.to_string());
            out.push('\n');
            continue;
        }
        let mut lines: Vec<serde_json::Value> = change
            .hunks
            .iter()
            .enumerate()
            .map(|(n, h)| {
                serde_json::json!({"path": change.path, "index": n, "hunk": h.header(), "text": h.text()})
            })
            .collect();
        if let Some(why) = change.whole {
            lines.push(serde_json::json!({"path": change.path, "whole": why}));
        }
        for line in lines {
            // Paths and hunks are the model's: no raw bidi or C1 control on the terminal.
            out.push_str(&crate::protocol::json_for_terminal(line.to_string()));
            out.push('\n');
        }
    }
    print!("{out}");
    Ok(())
}

/// A line of `--decisions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionLine {
    path: String,
    #[serde(default)]
    hunk: Option<String>,
    #[serde(default)]
    index: Option<usize>,
    decision: Verdict,
    #[serde(default)]
    comment: Option<String>,
}

/// The decisions of `--take`, `--leave` and `--decisions`, checked against the change before anything is
/// done: an unknown path or hunk is a usage error naming it.
fn scripted_units(
    ctx: &Context,
    args: &ReviewArgs,
    changes: &[FileChange],
) -> Result<Vec<Unit>, CommandError> {
    let store = ctx.store()?;
    let prefix = cwd_prefix(ctx, store);
    let find = |path: &str| -> Result<usize, CommandError> {
        let rel = normalise(&prefix, path);
        changes.iter().position(|c| c.path == rel).ok_or_else(|| {
            CommandError::new(
                ErrorKind::Usage,
                format!("{path}: not a path the session changed"),
            )
            .hint("`git agent review --list` lists the session's hunks")
        })
    };
    let mut units = Vec::new();
    let mut whole: BTreeMap<usize, Verdict> = BTreeMap::new();
    for (paths, verdict) in [(&args.take, Verdict::Take), (&args.leave, Verdict::Leave)] {
        for path in paths {
            let file = find(path)?;
            if whole.insert(file, verdict).is_some_and(|v| v != verdict) {
                return Err(CommandError::new(
                    ErrorKind::Usage,
                    format!("{path}: given to both --take and --leave"),
                ));
            }
        }
    }
    for (&file, &verdict) in &whole {
        let comment = (verdict == Verdict::Leave)
            .then(|| args.comment.clone())
            .flatten();
        units.push(Unit {
            file,
            hunk: None,
            index: None,
            verdict,
            comment,
        });
    }
    if let Some(source) = &args.decisions {
        for (n, line) in read_lines(source)?.iter().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let bad = |why: String| {
                CommandError::new(ErrorKind::Usage, format!("{source}:{}: {why}", n + 1))
            };
            let d: DecisionLine = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
            let file = find(&d.path).map_err(|e| bad(e.message().to_owned()))?;
            if whole.contains_key(&file) {
                return Err(bad(format!("{}: also given to --take or --leave", d.path)));
            }
            let hunks = &changes[file].hunks;
            let index = match (&d.hunk, d.index) {
                (Some(header), _) => Some(
                    hunks
                        .iter()
                        .position(|h| h.header() == header.trim())
                        .ok_or_else(|| bad(format!("{}: no hunk {header}", d.path)))?,
                ),
                (None, Some(i)) if i < hunks.len() => Some(i),
                (None, Some(i)) => {
                    return Err(bad(format!(
                        "{}: no hunk {i} (it has {})",
                        d.path,
                        hunks.len()
                    )))
                }
                (None, None) => None,
            };
            if units.iter().any(|u: &Unit| {
                u.file == file && (u.index == index || u.index.is_none() || index.is_none())
            }) {
                return Err(bad(format!("{}: decided twice", d.path)));
            }
            units.push(Unit {
                file,
                hunk: index.map(|i| hunks[i].clone()),
                index,
                verdict: d.decision,
                comment: d.comment.filter(|c| !c.trim().is_empty()),
            });
        }
    }
    Ok(units)
}

fn read_lines(source: &str) -> Result<Vec<String>, CommandError> {
    let text = if source == "-" {
        let mut lines = Vec::new();
        for line in std::io::stdin().lock().lines() {
            lines.push(line.map_err(|e| {
                CommandError::user(format!("cannot read the decisions from stdin: {e}"))
            })?);
        }
        return Ok(lines);
    } else {
        std::fs::read_to_string(source)
            .map_err(|e| CommandError::user(format!("cannot read {source}: {e}")))?
    };
    Ok(text.lines().map(str::to_owned).collect())
}

/// The directory of the command relative to the work tree's root (`src/` when run in `src`), so paths on
/// the command line mean what they mean to git.
fn cwd_prefix(ctx: &Context, store: &Store) -> String {
    let cwd = std::fs::canonicalize(ctx.cwd()).unwrap_or_else(|_| ctx.cwd().to_path_buf());
    cwd.strip_prefix(store.workdir())
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `path` given in the directory `prefix`, as a repository-relative path (`.` and `..` resolved).
fn normalise(prefix: &str, path: &str) -> String {
    let mut parts: Vec<&str> = prefix.split('/').filter(|p| !p.is_empty()).collect();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

/// The landing plan of what was taken: for each path with something taken, theirs is the base with the
/// taken hunks applied (the tip's version when all of them were).
fn taken_plan(
    store: &Store,
    range: &Range,
    changes: &[FileChange],
    units: &[Unit],
) -> Result<crate::store::land::Plan, CommandError> {
    let mut theirs: Vec<(String, Side)> = Vec::new();
    let files: BTreeSet<usize> = units.iter().map(|u| u.file).collect();
    for file in files {
        let change = &changes[file];
        let taken: Vec<&Unit> = units
            .iter()
            .filter(|u| u.file == file && u.verdict == Verdict::Take)
            .collect();
        if taken.is_empty() {
            continue;
        }
        let side = if taken.iter().any(|u| u.hunk.is_none()) {
            change.theirs.clone()
        } else {
            let hunks: Vec<&Hunk> = taken.iter().filter_map(|u| u.hunk.as_ref()).collect();
            change
                .theirs_with(&hunks)
                .map_err(|e| CommandError::user(format!("{}: {e}", change.path)))?
        };
        theirs.push((change.path.clone(), side));
    }
    Ok(store.plan_landing_with(range.from, range.tip, &range.label, theirs)?)
}

/// Records every decision on the session's tip.
fn record(
    store: &Store,
    range: &Range,
    changes: &[FileChange],
    units: &[Unit],
) -> Result<(), CommandError> {
    let reviewer = store.reviewer();
    let records = units
        .iter()
        .map(|u| {
            let change = &changes[u.file];
            let (hunk, text) = match &u.hunk {
                Some(h) => (Some((h.header(), u.index.unwrap_or_default())), h.text()),
                // The whole path: all its hunks (none for a path that is not text).
                None => (
                    None,
                    change
                        .hunks
                        .iter()
                        .map(|h| format!("{}\n{}", h.header(), h.text()))
                        .collect(),
                ),
            };
            Decision::new(
                &range.id,
                range.tip,
                range.from,
                &change.path,
                hunk,
                &text,
                u.verdict,
                u.comment.as_deref(),
                &reviewer,
            )
            .map(Record::Decision)
        })
        .collect::<Result<Vec<Record>, _>>()?;
    store.add_review(range.tip, &records)?;
    Ok(())
}

/// What was decided, in one line.
fn summary(units: &[Unit], range: &Range) {
    let took = units.iter().filter(|u| u.verdict == Verdict::Take).count();
    let left = units.len() - took;
    let comments = units.iter().filter(|u| u.comment.is_some()).count();
    let tip = range.tip.to_string();
    eprintln!(
        "took {took}, left {left} ({comments} with a comment); recorded in {REVIEW_REF} on {}",
        &tip[..7]
    );
    if comments > 0 {
        eprintln!(
            "hint: `git agent ask --resume {} \"...\"` sends the comments to the agent",
            range.id
        );
    }
}

/// `--send`: resume the session; the unresolved comments go with the prompt (see `agent::session`).
fn send(ctx: &mut Context, id: &str, prompt: &str) -> Result<(), CommandError> {
    let prompt = if prompt.trim().is_empty() {
        "Revise your change as the review comments ask."
    } else {
        prompt
    };
    let command = <super::ask::AskArgs as Args>::augment_args(clap::Command::new("ask"));
    // After `--`, a prompt that starts with `-` is the prompt, not options to parse again.
    let matches = command
        .try_get_matches_from(["ask", "--resume", id, "--", prompt])
        .map_err(|e| CommandError::internal(format!("cannot build the resume command: {e}")))?;
    let args = super::ask::AskArgs::from_arg_matches(&matches)
        .map_err(|e| CommandError::internal(format!("cannot build the resume command: {e}")))?;
    super::ask::run(ctx, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_relative_to_the_directory_the_command_runs_in() {
        assert_eq!(normalise("", "a.txt"), "a.txt");
        assert_eq!(normalise("src", "a.rs"), "src/a.rs");
        assert_eq!(normalise("src/x", "../b.rs"), "src/b.rs");
        assert_eq!(normalise("src", "./../README.md"), "README.md");
    }
}
