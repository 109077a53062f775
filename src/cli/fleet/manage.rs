//! `git agent fleet cancel`, `fleet gc` and `fleet pr`: stopping a fleet, removing its queue once finished
//! (results and sessions stay; the tasks' notes are folded into `refs/notes/agent` first), and opening a
//! pull request per passed task through `git agent pr`.

use std::process::{Command, Stdio};

use clap::Args;

use super::common::{now, Target};
use crate::cli::context::Context;
use crate::cli::error::CommandError;
use crate::store::fleet::queue::{Expect, Kind, Pushed, Queue, QueueError, Update};
use crate::store::fleet::record::{check_id, TaskEnd, TaskResult};
use crate::store::NOTES_REF;

/// Stop handing out a fleet's tasks (running ones finish; workers leave)
#[derive(Debug, Args)]
pub struct CancelArgs {
    #[command(flatten)]
    target: Target,
}

/// Remove a finished fleet's queue refs (tasks, claims, notes folded into refs/notes/agent); results stay
#[derive(Debug, Args)]
pub struct GcArgs {
    #[command(flatten)]
    target: Target,

    /// Remove the queue even though some tasks have no result (they are dropped)
    #[arg(long)]
    force: bool,
}

/// Open a pull request per finished task through `git agent pr` (the remote must be a named remote)
#[derive(Debug, Args)]
pub struct PrArgs {
    #[command(flatten)]
    target: Target,

    /// Only tasks whose check passed (default: passed, and done tasks without a check)
    #[arg(long)]
    passed: bool,

    /// Open them as drafts
    #[arg(long)]
    draft: bool,

    /// Print the sessions that would get a pull request, and do nothing
    #[arg(long)]
    dry_run: bool,
}

pub fn cancel(ctx: &Context, args: CancelArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let queue = args.target.queue(store)?;
    let record = serde_json::json!({"fleet": queue.fleet(), "at": now()});
    let commit = queue.write(
        "cancel.json",
        &record,
        None,
        &format!("cancel fleet {}", queue.fleet()),
    )?;
    let update = Update {
        dst: queue.cancel_ref(),
        new: Some(commit),
        expect: Expect::Absent,
    };
    match queue.push(&[update])? {
        Pushed::Done => eprintln!(
            "Cancelled fleet {}: workers take no more of its tasks",
            queue.fleet()
        ),
        Pushed::Conflict(_) => eprintln!("Fleet {} was cancelled already", queue.fleet()),
        Pushed::Transient(why) => {
            return Err(CommandError::user(format!(
                "could not cancel fleet {}: {why}",
                queue.fleet()
            )))
        }
    }
    Ok(())
}

pub fn gc(ctx: &Context, args: GcArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let queue = args.target.queue(store)?;
    let listing = queue.list()?;
    let open: Vec<&String> = listing
        .tasks
        .keys()
        .filter(|t| !listing.results.contains_key(*t))
        .collect();
    if !open.is_empty() && !args.force {
        return Err(CommandError::user(format!(
            "fleet {} is not finished: {} task{} without a result (first: {})",
            queue.fleet(),
            open.len(),
            if open.len() == 1 { "" } else { "s" },
            open[0]
        ))
        .hint("wait for the workers, or pass --force to drop the unfinished tasks"));
    }
    fold_notes(&queue, &listing)?;
    let mut updates = Vec::new();
    for (kind, map) in [
        (Kind::Tasks, &listing.tasks),
        (Kind::Claims, &listing.claims),
        (Kind::Notes, &listing.notes),
    ] {
        for (task, oid) in map {
            updates.push(Update {
                dst: queue.task_ref(kind, task),
                new: None,
                expect: Expect::Is(*oid),
            });
        }
    }
    for (dst, oid) in [
        (queue.meta_ref(), listing.meta),
        (queue.cancel_ref(), listing.cancel),
    ] {
        if let Some(oid) = oid {
            updates.push(Update {
                dst,
                new: None,
                expect: Expect::Is(oid),
            });
        }
    }
    let removed = updates.len();
    if removed > 0 {
        match queue.push(&updates)? {
            Pushed::Done => {}
            Pushed::Conflict(refs) => {
                return Err(CommandError::user(format!(
                    "fleet {} changed during gc ({} moved): nothing was removed; run it again",
                    queue.fleet(),
                    refs.first().map_or("a ref", String::as_str)
                )))
            }
            Pushed::Transient(why) => {
                return Err(CommandError::user(format!(
                    "could not remove the queue: {why}"
                )))
            }
        }
    }
    eprintln!(
        "Removed {removed} queue ref{} of fleet {}; {} result{} stay",
        if removed == 1 { "" } else { "s" },
        queue.fleet(),
        listing.results.len(),
        if listing.results.len() == 1 { "" } else { "s" }
    );
    Ok(())
}

/// Merges every task's notes and the remote's `refs/notes/agent` into ours, and pushes ours there by
/// compare-and-swap, retrying when another writer moved it meanwhile.
fn fold_notes(
    queue: &Queue,
    listing: &crate::store::fleet::queue::Listing,
) -> Result<(), CommandError> {
    if listing.notes.is_empty() {
        return Ok(());
    }
    let store = queue.store();
    let wanted: Vec<String> = listing
        .notes
        .keys()
        .map(|t| queue.task_ref(Kind::Notes, t))
        .collect();
    queue.fetch(&wanted)?;
    for oid in listing.notes.values() {
        store.merge_notes(*oid)?;
    }
    for _ in 0..20 {
        let theirs = remote_ref(queue, NOTES_REF)?;
        let expect = match theirs {
            Some(oid) => {
                queue.fetch(&[NOTES_REF.to_owned()])?;
                store.merge_notes(oid)?;
                Expect::Is(oid)
            }
            None => Expect::Absent,
        };
        let Some(ours) = store.ref_target(NOTES_REF)? else {
            return Ok(());
        };
        let update = Update {
            dst: NOTES_REF.to_owned(),
            new: Some(ours),
            expect,
        };
        match queue.push(&[update])? {
            Pushed::Done => return Ok(()),
            Pushed::Conflict(_) | Pushed::Transient(_) => {
                std::thread::sleep(crate::store::fleet::queue::jittered(
                    std::time::Duration::from_millis(200),
                ));
            }
        }
    }
    Err(CommandError::user(format!(
        "could not fold the notes into {NOTES_REF} on the remote: it kept moving; run gc again"
    )))
}

/// Where `name` points on the queue's remote.
fn remote_ref(queue: &Queue, name: &str) -> Result<Option<crate::store::ObjectId>, QueueError> {
    let out = crate::store::git::command(queue.store().workdir())
        .args(["ls-remote", queue.remote(), name])
        .stdin(Stdio::null())
        .output()
        .map_err(crate::store::StoreError::GitMissing)?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.split_once('\t').filter(|(_, n)| *n == name))
        .and_then(|(oid, _)| crate::store::ObjectId::from_hex(oid.as_bytes()).ok()))
}

pub fn pr(ctx: &Context, args: PrArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let queue = args.target.queue(store)?;
    if check_id("remote name", &args.target.remote).is_err() {
        return Err(CommandError::user(format!(
            "fleet pr needs a named remote, not {}",
            crate::store::fleet::record::shown(&args.target.remote)
        ))
        .hint("add it with `git remote add NAME URL`"));
    }
    let listing = queue.list()?;
    let wanted: Vec<String> = listing
        .results
        .keys()
        .map(|t| queue.task_ref(Kind::Results, t))
        .collect();
    queue.fetch(&wanted)?;
    let mut chosen = Vec::new();
    for (task, oid) in &listing.results {
        let Ok(result) = queue.read::<TaskResult>(*oid, "result.json", TaskResult::check) else {
            eprintln!("warning: the result of task {task} is refused (not a valid record)");
            continue;
        };
        let take = match result.outcome {
            TaskEnd::Passed => true,
            TaskEnd::Done => !args.passed,
            _ => false,
        };
        if let (true, Some(session)) = (take, result.session) {
            chosen.push((task.clone(), session));
        }
    }
    if args.dry_run {
        for (task, session) in &chosen {
            println!("{task}\t{session}");
        }
        return Ok(());
    }
    if chosen.is_empty() {
        eprintln!(
            "No task of fleet {} qualifies for a pull request",
            queue.fleet()
        );
        return Ok(());
    }
    own_command(ctx, &["pull", &args.target.remote])?;
    let mut failed = Vec::new();
    for (task, session) in &chosen {
        let mut argv = vec![
            "pr",
            session.as_str(),
            "--remote",
            args.target.remote.as_str(),
        ];
        if args.draft {
            argv.push("--draft");
        }
        if own_command(ctx, &argv).is_err() {
            failed.push(task.clone());
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CommandError::user(format!(
            "{} of {} pull requests failed (tasks: {})",
            failed.len(),
            chosen.len(),
            failed.join(", ")
        )))
    }
}

/// Runs this binary with `argv` in the current directory, with the user's streams.
fn own_command(ctx: &Context, argv: &[&str]) -> Result<(), CommandError> {
    let exe = std::env::current_exe()
        .map_err(|e| CommandError::internal(format!("cannot find the git-agent binary: {e}")))?;
    let mut cmd = Command::new(exe);
    crate::store::git::without_redirects(&mut cmd);
    let status = cmd
        .args(argv)
        .current_dir(ctx.cwd())
        .envs(crate::safety::secrets::all())
        .status()
        .map_err(|e| CommandError::internal(format!("cannot start git-agent: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(CommandError::user(format!(
            "git agent {} failed",
            argv.join(" ")
        )))
    }
}
