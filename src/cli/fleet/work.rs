//! `git agent fleet work`: claim tasks from a remote's queue and run each as an ordinary session.
//!
//! A claim is the creation of `claims/<task>` on the remote by a push whose lease expects the ref absent, so
//! of two workers that try at once exactly one wins; the loser's push is rejected and it takes another task.
//! The claim carries an expiry, renewed by compare-and-swap at a third of the lease while the task runs; a
//! claim that expired (its worker was killed, its node lost) is taken over by the same compare-and-swap on
//! the old claim commit. The task runs as a child `git agent ask` (its own process, so a crash of the
//! session is a failed task, not a dead worker); then one atomic push carries the session's branch, its log,
//! its notes (a ref of the task's own, so workers never contend on `refs/notes/agent`), the result (expected
//! absent: written once) and the claim's deletion (expected to be ours: a worker that lost its claim writes
//! nothing). Transient push failures are retried with back-off while the lease keeps being renewed.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::Args;

use super::common::{host_name, now, parse_duration, Target};
use crate::cli::context::Context;
use crate::cli::error::CommandError;
use crate::store::fleet::queue::{
    jittered, Backoff, Expect, Kind, Pushed, Queue, QueueError, Update,
};
use crate::store::fleet::record::{shown, Claim, Task, TaskEnd, TaskResult};
use crate::store::{ObjectId, Store};

/// Claim tasks from a remote's queue and run each as a session, until none is left
///
/// Each task runs as `git agent ask` in this repository (a check, when the task has one and this worker
/// allows it with --allow-check, then decides passed or failed). The session's branch, log and notes and the
/// task's result are pushed to the remote. A worker leaves when every task has a result, staying while
/// others hold live claims (to take over one whose lease expires); with --wait it keeps polling for new tasks.
#[derive(Debug, Args)]
pub struct WorkArgs {
    #[command(flatten)]
    target: Target,

    /// Stop after claiming this many tasks (all workers of this process together)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_tasks: Option<u64>,

    /// Run this many workers in this process
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=256))]
    jobs: u64,

    /// How long a claim holds without renewal (renewed at a third of it): 500ms, 90s, 10m
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    lease: Duration,

    /// Keep polling for new tasks when none is left, instead of leaving
    #[arg(long)]
    wait: bool,

    /// How often to look at the queue again while waiting
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    poll: Duration,

    /// Run a task's check when it is exactly CMD (repeatable); a task whose check is not allowed fails
    #[arg(long, value_name = "CMD")]
    allow_check: Vec<String>,

    /// This worker's name in claims and results (default: <host>-<pid>); jobs get -1, -2, ...
    #[arg(long, value_name = "NAME")]
    worker: Option<String>,
}

/// What the workers of one process share.
struct Shared<'a> {
    args: &'a WorkArgs,
    fleet: String,
    claimed: AtomicUsize,
    finished: AtomicUsize,
    lost: AtomicUsize,
    errors: Mutex<Vec<String>>,
    /// Serialises the worktree bookkeeping of base checkouts (`git worktree add` locks one file).
    worktrees: Mutex<()>,
}

pub fn run(ctx: &Context, args: WorkArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let fleet = args.target.queue(store)?.fleet().to_owned();
    let base_name = match &args.worker {
        Some(name) => name.clone(),
        None => format!("{}-{}", host_name(), std::process::id()),
    };
    crate::store::fleet::record::check_worker(&base_name)?;
    let shared = Shared {
        args: &args,
        fleet,
        claimed: AtomicUsize::new(0),
        finished: AtomicUsize::new(0),
        lost: AtomicUsize::new(0),
        errors: Mutex::new(Vec::new()),
        worktrees: Mutex::new(()),
    };
    let start = Instant::now();
    std::thread::scope(|scope| {
        for job in 1..=args.jobs {
            let name = if args.jobs == 1 {
                base_name.clone()
            } else {
                format!("{base_name}-{job}")
            };
            let store = store.clone();
            let shared = &shared;
            scope.spawn(move || {
                if let Err(err) = worker_loop(&store, shared, &name) {
                    if let Ok(mut errors) = shared.errors.lock() {
                        errors.push(format!("{name}: {err}"));
                    }
                }
            });
        }
    });
    let errors = shared.errors.lock().map(|e| e.clone()).unwrap_or_default();
    eprintln!(
        "fleet {}: {} task{} finished, {} lost to other workers, by {} worker{} in {:.1} s",
        shared.fleet,
        shared.finished.load(Ordering::SeqCst),
        if shared.finished.load(Ordering::SeqCst) == 1 {
            ""
        } else {
            "s"
        },
        shared.lost.load(Ordering::SeqCst),
        args.jobs,
        if args.jobs == 1 { "" } else { "s" },
        start.elapsed().as_secs_f64()
    );
    match errors.first() {
        None => Ok(()),
        Some(first) => Err(CommandError::user(format!("a worker stopped: {first}"))
            .detail(errors.iter().skip(1).cloned())),
    }
}

/// A claim won: the claim commit now on the remote, and the record it holds.
struct Won {
    task: String,
    /// The task's commit, as listed.
    task_commit: ObjectId,
    claim: ObjectId,
    record: Claim,
}

/// One worker: list, claim, run, push, until nothing is left (or --max-tasks).
fn worker_loop(store: &Store, shared: &Shared, name: &str) -> Result<(), QueueError> {
    let queue = Queue::new(store, &shared.args.target.remote, &shared.fleet)?;
    let mut unreachable_since: Option<Instant> = None;
    loop {
        if let Some(max) = shared.args.max_tasks {
            if shared.claimed.load(Ordering::SeqCst) as u64 >= max {
                return Ok(());
            }
        }
        let looking = Instant::now();
        let listing = match queue.list() {
            Ok(listing) => {
                unreachable_since = None;
                listing
            }
            // A remote that is away for a moment (a network blip, a restart) is waited for, within limits.
            Err(QueueError::Unreachable { detail, .. })
                if unreachable_since.is_none_or(|t| t.elapsed() < Backoff::default().give_up) =>
            {
                unreachable_since.get_or_insert_with(Instant::now);
                eprintln!("fleet: {name}: the remote is unreachable ({detail}); trying again");
                std::thread::sleep(jittered(shared.args.poll));
                continue;
            }
            Err(err) => return Err(err),
        };
        if listing.meta.is_none() && !shared.args.wait {
            return Err(QueueError::NoFleet(shared.fleet.clone()));
        }
        if listing.cancel.is_some() {
            eprintln!(
                "fleet: {name}: fleet {} was cancelled; leaving",
                shared.fleet
            );
            return Ok(());
        }
        let open: Vec<&String> = listing
            .tasks
            .keys()
            .filter(|id| !listing.results.contains_key(*id))
            .collect();
        if open.is_empty() && !shared.args.wait {
            return Ok(());
        }
        match claim_one(&queue, shared, name, &listing, &open)? {
            // The task's last claim was deleted with its result in one push: a claim won on a listing
            // taken before that push is a claim on a finished task (bench-fleet.sh saw 4 in 160).
            Some(won) if queue.remote_has(&queue.task_ref(Kind::Results, &won.task))? => {
                release(&queue, &won);
            }
            Some(won) => {
                shared.claimed.fetch_add(1, Ordering::SeqCst);
                eprintln!(
                    "fleet: {name}: claimed task {} (attempt {}, {} ms)",
                    won.task,
                    won.record.attempt,
                    looking.elapsed().as_millis()
                );
                run_claimed(&queue, shared, name, won)?;
            }
            None => std::thread::sleep(jittered(shared.args.poll)),
        }
    }
}

/// Deletes a claim that is no longer needed (best effort: an expired claim of a finished task is harmless).
fn release(queue: &Queue, won: &Won) {
    let update = Update {
        dst: queue.task_ref(Kind::Claims, &won.task),
        new: None,
        expect: Expect::Is(won.claim),
    };
    let _ = queue.push(&[update]);
}

/// Claims a free task, else takes over an expired claim; `None` when every open task is held.
fn claim_one(
    queue: &Queue,
    shared: &Shared,
    name: &str,
    listing: &crate::store::fleet::queue::Listing,
    open: &[&String],
) -> Result<Option<Won>, QueueError> {
    let free: Vec<&String> = open
        .iter()
        .copied()
        .filter(|id| !listing.claims.contains_key(*id))
        .collect();
    // Workers start at different places in the list, so that they rarely race for the same task.
    let offset = spread(free.len());
    for id in free.iter().cycle().skip(offset).take(free.len()) {
        let task_commit = listing.tasks[*id];
        if let Some(won) = try_claim(queue, shared, name, (id, task_commit), Expect::Absent, 1)? {
            return Ok(Some(won));
        }
    }
    let held: Vec<String> = open
        .iter()
        .filter(|id| listing.claims.contains_key(**id))
        .map(|id| queue.task_ref(Kind::Claims, id))
        .collect();
    if held.is_empty() {
        return Ok(None);
    }
    // A claim deleted since the listing (its task finished) fails the fetch: look again later.
    if let Err(QueueError::Unreachable { .. }) = queue.fetch(&held) {
        return Ok(None);
    }
    for id in open {
        let Some(&old) = listing.claims.get(*id) else {
            continue;
        };
        // A claim that cannot be read (hostile or damaged) holds nothing: it is taken over like an expired one.
        let (expired, attempt) = match queue.read::<Claim>(old, "claim.json", Claim::check) {
            Ok(claim) if claim.task == **id => (claim.expires <= now(), claim.attempt),
            Ok(_) | Err(QueueError::Refused { .. }) => (true, 0),
            Err(err) => return Err(err),
        };
        if !expired {
            continue;
        }
        let task_commit = listing.tasks[*id];
        let task = (id.as_str(), task_commit);
        if let Some(won) = try_claim(queue, shared, name, task, Expect::Is(old), attempt + 1)? {
            eprintln!("fleet: {name}: took over the expired claim on task {id}");
            return Ok(Some(won));
        }
    }
    Ok(None)
}

/// A random place in `0..len`, so that workers that listed the queue at the same moment rarely race for the
/// same task (a fixed place per worker made neighbours collide again and again as the list shrank).
fn spread(len: usize) -> usize {
    crate::sys::random::jitter_below(len as u64) as usize
}

/// Pushes a claim on `task` expecting `expect`; `None` when another worker got there first.
fn try_claim(
    queue: &Queue,
    shared: &Shared,
    name: &str,
    (task, task_commit): (&str, ObjectId),
    expect: Expect,
    attempt: u32,
) -> Result<Option<Won>, QueueError> {
    let record = Claim {
        task: task.to_owned(),
        worker: name.to_owned(),
        expires: now() + lease_secs(shared.args.lease),
        attempt,
    };
    let parent = match expect {
        Expect::Is(old) => Some(old),
        Expect::Absent => None,
    };
    let message = format!("claim {task} by {name} (attempt {attempt})");
    let claim = queue.write("claim.json", &record, parent, &message)?;
    let update = Update {
        dst: queue.task_ref(Kind::Claims, task),
        new: Some(claim),
        expect,
    };
    let pushed = queue.push_retrying(&[update], short_backoff(), |why, wait| {
        eprintln!(
            "fleet: {name}: claiming task {task} failed ({why}); retrying in {:.1} s",
            wait.as_secs_f64()
        );
    })?;
    Ok(match pushed {
        Pushed::Done => Some(Won {
            task: task.to_owned(),
            task_commit,
            claim,
            record,
        }),
        Pushed::Conflict(_) | Pushed::Transient(_) => None,
    })
}

/// Retries of a claim: brief, since another task is as good as this one.
fn short_backoff() -> Backoff {
    Backoff {
        give_up: Duration::from_secs(5),
        ..Backoff::default()
    }
}

/// A lease in whole seconds, at least one.
fn lease_secs(lease: Duration) -> i64 {
    lease.as_secs().max(1) as i64
}

/// The claim held while a task runs: its current commit, renewed by one thread, read by the final push.
struct Lease {
    current: Mutex<ObjectId>,
    lost: AtomicBool,
    done: AtomicBool,
}

/// Runs a claimed task, keeping its lease, and pushes what it made.
fn run_claimed(queue: &Queue, shared: &Shared, name: &str, won: Won) -> Result<(), QueueError> {
    let lease = Lease {
        current: Mutex::new(won.claim),
        lost: AtomicBool::new(false),
        done: AtomicBool::new(false),
    };
    std::thread::scope(|scope| {
        // gix handles are not shared between threads: the renewer writes through its own.
        let store = queue.store().clone();
        let (won, lease) = (&won, &lease);
        scope.spawn(move || {
            if let Ok(own) = Queue::new(&store, &shared.args.target.remote, &shared.fleet) {
                renew(&own, shared, name, won, lease);
            }
        });
        let outcome = run_and_push(queue, shared, name, won, lease);
        lease.done.store(true, Ordering::SeqCst);
        outcome
    })
}

/// Renews the claim at a third of the lease until the task is done or the claim was lost.
fn renew(queue: &Queue, shared: &Shared, name: &str, won: &Won, lease: &Lease) {
    let every = shared.args.lease / 3;
    let mut last = Instant::now();
    while !lease.done.load(Ordering::SeqCst) && !lease.lost.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50).min(every));
        if last.elapsed() < every {
            continue;
        }
        let Ok(mut current) = lease.current.lock() else {
            return;
        };
        if lease.done.load(Ordering::SeqCst) {
            return;
        }
        let record = Claim {
            expires: now() + lease_secs(shared.args.lease),
            ..won.record.clone()
        };
        let message = format!("renew claim {} by {name}", won.task);
        let Ok(next) = queue.write("claim.json", &record, Some(*current), &message) else {
            continue;
        };
        let update = Update {
            dst: queue.task_ref(Kind::Claims, &won.task),
            new: Some(next),
            expect: Expect::Is(*current),
        };
        match queue.push(&[update]) {
            Ok(Pushed::Done) => {
                *current = next;
                last = Instant::now();
            }
            Ok(Pushed::Conflict(_)) => {
                eprintln!(
                    "fleet: {name}: lost the claim on task {} (another worker took it over)",
                    won.task
                );
                lease.lost.store(true, Ordering::SeqCst);
            }
            // Tried again at the next tick; the lease has two thirds of its time left for that.
            Ok(Pushed::Transient(_)) | Err(_) => {}
        }
    }
}

/// What the child session reported on its JSON stream.
#[derive(Debug, Default)]
struct SessionReport {
    session: Option<String>,
    files: BTreeSet<String>,
    input_tokens: u64,
    output_tokens: u64,
    cost_usd: Option<f64>,
    exit_code: i32,
    last_error: String,
}

fn run_and_push(
    queue: &Queue,
    shared: &Shared,
    name: &str,
    won: &Won,
    lease: &Lease,
) -> Result<(), QueueError> {
    let started = Instant::now();
    let task_ref = queue.task_ref(Kind::Tasks, &won.task);
    queue.fetch(std::slice::from_ref(&task_ref))?;
    let (report, outcome, base) =
        match queue.read::<Task>(won.task_commit, "task.json", Task::check) {
            Ok(task) if task.id == won.task => run_task(queue, shared, &task, lease),
            Ok(_) => refused("the task's id differs from its ref"),
            Err(QueueError::Refused { why, .. }) => refused(&why),
            Err(err) => return Err(err),
        };
    if lease.lost.load(Ordering::SeqCst) {
        shared.lost.fetch_add(1, Ordering::SeqCst);
        if let Some(session) = &report.session {
            eprintln!(
                "fleet: {name}: session {session} of task {} stays local",
                won.task
            );
        }
        return Ok(());
    }
    let result = TaskResult {
        task: won.task.clone(),
        outcome,
        worker: name.to_owned(),
        attempt: won.record.attempt,
        session: report.session.clone(),
        branch: report.session.as_ref().map(|s| format!("agent/{s}")),
        exit_code: report.exit_code,
        files_changed: report.files.len() as u32,
        input_tokens: report.input_tokens,
        output_tokens: report.output_tokens,
        cost_usd: report.cost_usd,
        seconds: started.elapsed().as_secs_f64(),
        finished: now(),
        // A finished task's stderr holds its answer's summary, not a reason.
        detail: match outcome {
            TaskEnd::Done | TaskEnd::Passed => String::new(),
            _ => redacted(&report.last_error),
        },
    };
    let updates = final_updates(queue, &result, base)?;
    let pushed = push_holding(queue, name, &won.task, &updates, lease)?;
    match pushed {
        Pushed::Done => {
            shared.finished.fetch_add(1, Ordering::SeqCst);
            eprintln!(
                "fleet: {name}: task {} {} ({}, {:.1} s)",
                won.task,
                result.outcome.as_str(),
                result
                    .session
                    .as_deref()
                    .map_or("no session".to_owned(), |s| format!("session {s}")),
                result.seconds
            );
        }
        Pushed::Conflict(refs) => {
            shared.lost.fetch_add(1, Ordering::SeqCst);
            eprintln!(
                "fleet: {name}: the result of task {} was not written: {} changed on the remote (another worker took it over)",
                won.task,
                refs.first().map_or("a ref", String::as_str)
            );
        }
        Pushed::Transient(why) => {
            eprintln!(
                "fleet: {name}: gave up pushing task {} ({why}); its lease will expire and another worker runs it",
                won.task
            );
        }
    }
    Ok(())
}

/// The result of a task that could not be read: an error, written so that no worker tries it again.
fn refused(why: &str) -> (SessionReport, TaskEnd, Option<ObjectId>) {
    let report = SessionReport {
        exit_code: 1,
        last_error: format!("task refused: {why}"),
        ..SessionReport::default()
    };
    (report, TaskEnd::Error, None)
}

/// Runs `task` as a child session (in a checkout of its base when it names one), then its check.
fn run_task(
    queue: &Queue,
    shared: &Shared,
    task: &Task,
    lease: &Lease,
) -> (SessionReport, TaskEnd, Option<ObjectId>) {
    if let Some(check) = &task.check {
        if !shared.args.allow_check.iter().any(|c| c == check) {
            let report = SessionReport {
                exit_code: 1,
                last_error: format!(
                    "the task's check {} is not allowed on this worker (--allow-check)",
                    shown(check)
                ),
                ..SessionReport::default()
            };
            return (report, TaskEnd::Error, None);
        }
    }
    let store = queue.store();
    let prepared = match &task.base {
        Some(base) => base_checkout(queue, shared, base).map(|(dir, oid)| (Some(dir), oid)),
        None => store
            .head_commit()
            .map(|oid| (None, oid))
            .map_err(|e| e.to_string()),
    };
    let (dir, base) = match prepared {
        Ok(found) => found,
        Err(why) => {
            let report = SessionReport {
                exit_code: 1,
                last_error: why,
                ..SessionReport::default()
            };
            return (report, TaskEnd::Error, None);
        }
    };
    let cwd = dir.clone().unwrap_or_else(|| store.workdir().to_path_buf());
    let mut report = run_session(&cwd, task, lease);
    let mut outcome = match report.exit_code {
        0 => TaskEnd::Done,
        3 => TaskEnd::Unfinished,
        _ => TaskEnd::Error,
    };
    if let (Some(check), Some(session), TaskEnd::Done) = (&task.check, &report.session, outcome) {
        outcome = match run_check(store, shared, session, check) {
            Ok(true) => TaskEnd::Passed,
            Ok(false) => TaskEnd::Failed,
            Err(why) => {
                report.last_error = why;
                TaskEnd::Error
            }
        };
    }
    if let Some(dir) = dir {
        remove_worktree(store, shared, &dir);
    }
    (report, outcome, Some(base))
}

/// A detached checkout of `base` (fetched from the remote) under `.git/agent/fleet/`.
fn base_checkout(
    queue: &Queue,
    shared: &Shared,
    base: &str,
) -> Result<(PathBuf, ObjectId), String> {
    let full = if base.starts_with("refs/") {
        base.to_owned()
    } else {
        format!("refs/heads/{base}")
    };
    let store = queue.store();
    let out = crate::store::git::command(store.workdir())
        .args(["ls-remote", "--refs", queue.remote(), &full])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not run git: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let oid = text
        .lines()
        .find_map(|l| {
            l.split_once('\t')
                .filter(|(_, n)| *n == full)
                .map(|(o, _)| o.to_owned())
        })
        .and_then(|o| ObjectId::from_hex(o.as_bytes()).ok())
        .ok_or_else(|| format!("the base {} is not on the remote", shown(base)))?;
    queue
        .fetch(std::slice::from_ref(&full))
        .map_err(|e| e.to_string())?;
    let dir = add_worktree(store, shared, "base", oid)?
        .ok_or_else(|| format!("could not check out the base {}", shown(base)))?;
    Ok((dir, oid))
}

/// A detached checkout of `commit` in a fresh folder under `.git/agent/fleet` (`<what>-<pid>-<serial>`);
/// `None` when git refused it. The workers of one process add and remove worktrees one at a time: git
/// locks its worktree list, and two at once fail.
fn add_worktree(
    store: &Store,
    shared: &Shared,
    what: &str,
    commit: ObjectId,
) -> Result<Option<PathBuf>, String> {
    let dir = store.common_dir().join("agent").join("fleet").join(format!(
        "{what}-{}-{}",
        std::process::id(),
        next_serial()
    ));
    let _guard = shared.worktrees.lock();
    let status = crate::store::git::command(store.workdir())
        .args(["worktree", "add", "--quiet", "--detach"])
        .arg(&dir)
        .arg(commit.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("could not run git: {e}"))?;
    Ok(status.success().then_some(dir))
}

fn next_serial() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::SeqCst)
}

fn remove_worktree(store: &Store, shared: &Shared, dir: &Path) {
    let _guard = shared.worktrees.lock();
    let _ = crate::store::git::command(store.workdir())
        .args(["worktree", "remove", "--force"])
        .arg(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Runs `git agent ask --json --yes -` in `cwd` with the task's prompt on stdin; kills it when the claim is
/// lost.
fn run_session(cwd: &Path, task: &Task, lease: &Lease) -> SessionReport {
    let mut report = SessionReport {
        exit_code: 1,
        ..SessionReport::default()
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            report.last_error = format!("cannot find the git-agent binary: {e}");
            return report;
        }
    };
    let mut cmd = Command::new(exe);
    crate::store::git::without_redirects(&mut cmd);
    cmd.current_dir(cwd)
        .args(["ask", "--json", "--yes"])
        // The secret variables were moved out of this process's environment at start-up.
        .envs(crate::safety::secrets::all())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(model) = &task.model {
        cmd.arg(format!("--model={model}"));
    }
    if let Some(n) = task.max_steps {
        cmd.arg(format!("--max-steps={n}"));
    }
    if let Some(n) = task.max_tokens {
        cmd.arg(format!("--max-tokens={n}"));
    }
    // The prompt goes through stdin: never an argument that could read as an option.
    cmd.arg("-");
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            report.last_error = format!("cannot start git-agent: {e}");
            return report;
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(task.prompt.as_bytes());
    }
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    std::thread::scope(|scope| {
        let events = scope.spawn(|| stdout.map(read_events).unwrap_or_default());
        let tail = scope.spawn(|| stderr.map(last_line).unwrap_or_default());
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if lease.lost.load(Ordering::SeqCst) => {
                    let _ = child.kill();
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                Err(_) => break None,
            }
        };
        let mut events = events.join().unwrap_or_default();
        events.last_error = tail.join().unwrap_or_default();
        events.exit_code = status.and_then(|s| s.code()).unwrap_or(1);
        events
    })
}

/// The facts of `ask --json`'s events: the session, files changed, tokens and cost.
fn read_events(stdout: impl Read) -> SessionReport {
    let mut report = SessionReport::default();
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        match event.get("type").and_then(|t| t.as_str()) {
            Some("session") => {
                report.session = event.get("id").and_then(|v| v.as_str()).map(str::to_owned);
            }
            Some("step") => {
                if let Some(files) = event.get("files").and_then(|f| f.as_array()) {
                    report
                        .files
                        .extend(files.iter().filter_map(|f| f.as_str()).map(str::to_owned));
                }
            }
            Some("usage") if event.get("scope").and_then(|s| s.as_str()) != Some("request") => {
                let n = |k: &str| {
                    event
                        .get(k)
                        .and_then(serde_json::Value::as_u64)
                        .unwrap_or(0)
                };
                report.input_tokens = n("input_tokens");
                report.output_tokens = n("output_tokens");
                report.cost_usd = event.get("cost_usd").and_then(serde_json::Value::as_f64);
            }
            Some("error") => {
                if let Some(m) = event.get("message").and_then(|m| m.as_str()) {
                    report.last_error = m.to_owned();
                }
            }
            _ => {}
        }
    }
    report
}

/// The last non-empty line of a stream, cut to 300 characters.
fn last_line(stream: impl Read) -> String {
    let mut last = String::new();
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { break };
        if !line.trim().is_empty() {
            last = line;
        }
    }
    last.chars().take(300).collect()
}

/// `text` with known secrets masked and controls escaped: it goes into a ref others read.
fn redacted(text: &str) -> String {
    let masked = match crate::safety::redact::global().read() {
        Ok(r) => r.redact(text).into_owned(),
        Err(_) => String::new(),
    };
    crate::safety::quote::visible(&masked)
}

/// Runs the allowed `check` on a fresh checkout of the session's branch: exit 0 is passed.
fn run_check(store: &Store, shared: &Shared, session: &str, check: &str) -> Result<bool, String> {
    let tip = store
        .ref_target(&format!("refs/heads/agent/{session}"))
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("session {session} has no branch"))?;
    let dir = add_worktree(store, shared, "check", tip)?
        .ok_or("could not check out the session's branch for its check")?;
    let mut cmd = Command::new("sh");
    crate::store::git::without_redirects(&mut cmd);
    cmd.args(["-c", check])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let status = confine_check(&mut cmd, store, &dir).and_then(|()| {
        cmd.status()
            .map_err(|e| format!("could not run the check: {e}"))
    });
    remove_worktree(store, shared, &dir);
    status.map(|s| s.success())
}

/// Puts the check under the sandbox a session's commands get, as `fix` does for its re-check: the check runs
/// the session's code, which the model wrote from a task someone pushed, and outside the sandbox it could
/// write this repository's `.git` (a hook every later commit runs) or anything else (issue 23: nothing the
/// session could have changed runs outside the sandbox).
fn confine_check(cmd: &mut Command, store: &Store, dir: &Path) -> Result<(), String> {
    use crate::safety::sandbox::{Sandbox, SandboxConfig};
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    let sandbox = Sandbox::new(&SandboxConfig::default(), dir, store.common_dir(), None);
    let prepared = sandbox
        .prepare()
        .map_err(|e| format!("could not sandbox the check: {e}"))?;
    prepared.install(cmd);
    Ok(())
}

/// The final push: the session's branch, log and notes, the result, and the claim's deletion.
fn final_updates(
    queue: &Queue,
    result: &TaskResult,
    base: Option<ObjectId>,
) -> Result<Vec<Update>, QueueError> {
    let store = queue.store();
    let mut updates = Vec::new();
    let mut pushed_refs: Vec<String> = Vec::new();
    if let Some(session) = &result.session {
        let branch = format!("refs/heads/agent/{session}");
        let log = format!("refs/agent/sessions/{session}");
        for name in [&branch, &log] {
            if let Some(oid) = store.ref_target(name)? {
                pushed_refs.push(name.clone());
                updates.push(Update {
                    dst: name.clone(),
                    new: Some(oid),
                    expect: Expect::Absent,
                });
            }
        }
        if let (Some(tip), Some(base)) = (store.ref_target(&branch)?, base) {
            let notes = session_notes(store, base, tip)?;
            if !notes.is_empty() {
                let message = format!("notes of session {session} (task {})", result.task);
                let commit = queue.write_notes(&notes, &message)?;
                pushed_refs.push(commit.to_string());
                updates.push(Update {
                    dst: queue.task_ref(Kind::Notes, &result.task),
                    new: Some(commit),
                    expect: Expect::Absent,
                });
            }
        }
    }
    let mut result = result.clone();
    if leaks(store, &pushed_refs) {
        // Nothing of the session leaves this machine; the result says why.
        updates.clear();
        result.outcome = TaskEnd::Error;
        result.detail = "the session holds a known secret: it was not pushed".into();
    }
    let message = format!("result of {}: {}", result.task, result.outcome.as_str());
    let commit = queue.write("result.json", &result, None, &message)?;
    updates.push(Update {
        dst: queue.task_ref(Kind::Results, &result.task),
        new: Some(commit),
        expect: Expect::Absent,
    });
    Ok(updates)
}

/// True when an object reachable from `refs` holds the value of a known key (what `git agent push` refuses).
fn leaks(store: &Store, refs: &[String]) -> bool {
    if refs.is_empty() {
        return false;
    }
    let refs: Vec<&str> = refs.iter().map(String::as_str).collect();
    match crate::safety::redact::global().read() {
        Ok(redactor) => store
            .secrets_in_refs(&refs, &redactor)
            .map_or(true, |found| !found.is_empty()),
        Err(_) => true,
    }
}

/// The notes of `refs/notes/agent` on the commits between `base` and `tip`.
fn session_notes(
    store: &Store,
    base: ObjectId,
    tip: ObjectId,
) -> Result<Vec<(ObjectId, String)>, QueueError> {
    let range = format!("{base}..{tip}");
    let listing = store.git_output(&["rev-list", "--max-count=10000", &range])?;
    let mut notes = Vec::new();
    for line in String::from_utf8_lossy(&listing).lines() {
        let Ok(commit) = ObjectId::from_hex(line.trim().as_bytes()) else {
            continue;
        };
        if let Some(text) = store.note(commit)? {
            notes.push((commit, text));
        }
    }
    Ok(notes)
}

/// Pushes `updates` plus the deletion of our claim (as it is at each try), retrying transient failures with
/// back-off; the lease keeps being renewed between tries.
fn push_holding(
    queue: &Queue,
    name: &str,
    task: &str,
    updates: &[Update],
    lease: &Lease,
) -> Result<Pushed, QueueError> {
    let backoff = Backoff::default();
    let start = Instant::now();
    let mut delay = backoff.first;
    loop {
        let pushed = {
            let current = lease.current.lock().map_err(|_| {
                QueueError::Invalid(crate::store::fleet::record::Invalid(
                    "the lease lock is poisoned".into(),
                ))
            })?;
            if lease.lost.load(Ordering::SeqCst) {
                return Ok(Pushed::Conflict(vec![queue.task_ref(Kind::Claims, task)]));
            }
            let mut all = updates.to_vec();
            all.push(Update {
                dst: queue.task_ref(Kind::Claims, task),
                new: None,
                expect: Expect::Is(*current),
            });
            queue.push(&all)?
        };
        match pushed {
            Pushed::Transient(why) if start.elapsed() < backoff.give_up => {
                let wait = jittered(delay);
                eprintln!(
                    "fleet: {name}: pushing task {task} failed ({why}); retrying in {:.1} s",
                    wait.as_secs_f64()
                );
                std::thread::sleep(wait);
                delay = (delay * 2).min(backoff.max);
            }
            other => return Ok(other),
        }
    }
}
