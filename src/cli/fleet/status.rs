//! `git agent fleet status` and `fleet results`: what the remote's refs say about a fleet, read only from the
//! remote (claims and results fetched as objects, no local ref written), every record checked before use.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use clap::Args;

use super::common::{now, parse_duration, Target};
use crate::cli::context::Context;
use crate::cli::error::CommandError;
use crate::store::fleet::queue::{Kind, Queue, QueueError};
use crate::store::fleet::record::{shown, Claim, TaskResult};

/// Show a fleet's progress: queued, claimed (by whom, lease left), done, failed
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    target: Target,

    /// Print one JSON object instead of text
    #[arg(long)]
    json: bool,

    /// Refresh until every task has a result (a progress line on a terminal)
    #[arg(long)]
    watch: bool,

    /// How often --watch refreshes
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    interval: Duration,
}

/// List each task of a fleet: status, branch, check passed, files changed, tokens and cost
#[derive(Debug, Args)]
pub struct ResultsArgs {
    #[command(flatten)]
    target: Target,

    /// Print one JSON object a line instead of text
    #[arg(long)]
    json: bool,
}

/// A claim as seen now.
struct Running {
    worker: String,
    left: i64,
    attempt: u32,
}

/// A fleet as its refs say.
#[derive(Default)]
struct Snapshot {
    tasks: Vec<String>,
    claims: BTreeMap<String, Running>,
    results: BTreeMap<String, TaskResult>,
    refused: Vec<String>,
    cancelled: bool,
    strange: Vec<String>,
    refs: usize,
}

impl Snapshot {
    fn queued(&self) -> usize {
        self.tasks
            .iter()
            .filter(|t| !self.claims.contains_key(*t) && !self.results.contains_key(*t))
            .count()
    }

    fn running(&self) -> impl Iterator<Item = (&String, &Running)> {
        self.claims
            .iter()
            .filter(|(t, c)| c.left > 0 && !self.results.contains_key(*t))
    }

    fn expired(&self) -> usize {
        self.claims
            .iter()
            .filter(|(t, c)| c.left <= 0 && !self.results.contains_key(*t))
            .count()
    }

    fn by_outcome(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for result in self.results.values() {
            *counts.entry(result.outcome.as_str()).or_insert(0) += 1;
        }
        counts
    }
}

fn snapshot(queue: &Queue) -> Result<Snapshot, QueueError> {
    let listing = queue.list()?;
    if listing.meta.is_none() && listing.tasks.is_empty() && listing.results.is_empty() {
        return Err(QueueError::NoFleet(queue.fleet().to_owned()));
    }
    let mut wanted: Vec<String> = listing
        .claims
        .keys()
        .map(|t| queue.task_ref(Kind::Claims, t))
        .collect();
    wanted.extend(
        listing
            .results
            .keys()
            .map(|t| queue.task_ref(Kind::Results, t)),
    );
    queue.fetch(&wanted)?;
    let mut snap = Snapshot {
        tasks: listing.tasks.keys().cloned().collect(),
        cancelled: listing.cancel.is_some(),
        strange: listing.strange.clone(),
        refs: listing.ref_count(),
        ..Snapshot::default()
    };
    let time = now();
    for (task, oid) in &listing.claims {
        match queue.read::<Claim>(*oid, "claim.json", Claim::check) {
            Ok(claim) => {
                snap.claims.insert(
                    task.clone(),
                    Running {
                        worker: claim.worker,
                        left: claim.expires - time,
                        attempt: claim.attempt,
                    },
                );
            }
            Err(err) => snap.refused.push(format!("claim of {task}: {err}")),
        }
    }
    for (task, oid) in &listing.results {
        match queue.read::<TaskResult>(*oid, "result.json", TaskResult::check) {
            Ok(result) if &result.task == task => {
                snap.results.insert(task.clone(), result);
            }
            Ok(_) => snap
                .refused
                .push(format!("result of {task}: names another task")),
            Err(err) => snap.refused.push(format!("result of {task}: {err}")),
        }
    }
    // Results of tasks whose queue refs were removed by gc still count.
    for task in snap.results.keys() {
        if !snap.tasks.contains(task) {
            snap.tasks.push(task.clone());
        }
    }
    snap.tasks.sort();
    Ok(snap)
}

pub fn run(ctx: &Context, args: StatusArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let queue = args.target.queue(store)?;
    let tty = std::io::stderr().is_terminal();
    loop {
        let snap = snapshot(&queue)?;
        let finished = snap.results.len() >= snap.tasks.len() || snap.cancelled;
        if args.json {
            println!("{}", status_json(&queue, &snap));
        } else if args.watch && tty && !finished {
            eprint!("\r\x1b[K{}", progress_line(&snap));
            let _ = std::io::stderr().flush();
        } else {
            if args.watch && tty {
                eprintln!();
            }
            print_status(&queue, &snap);
        }
        if !args.watch || finished {
            return Ok(());
        }
        std::thread::sleep(args.interval);
    }
}

/// `[#####.....] 30/60 done, 6 running, 24 queued`
fn progress_line(snap: &Snapshot) -> String {
    let total = snap.tasks.len().max(1);
    let width = 30;
    let filled = snap.results.len() * width / total;
    format!(
        "[{}{}] {}/{} done, {} running, {} queued",
        "#".repeat(filled),
        ".".repeat(width - filled),
        snap.results.len(),
        snap.tasks.len(),
        snap.running().count(),
        snap.queued()
    )
}

fn print_status(queue: &Queue, snap: &Snapshot) {
    let outcomes: Vec<String> = snap
        .by_outcome()
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    println!(
        "fleet {} on {}: {} tasks: {} finished ({}), {} running, {} expired, {} queued{}",
        queue.fleet(),
        shown(queue.remote()),
        snap.tasks.len(),
        snap.results.len(),
        if outcomes.is_empty() {
            "none".into()
        } else {
            outcomes.join(", ")
        },
        snap.running().count(),
        snap.expired(),
        snap.queued(),
        if snap.cancelled { " (cancelled)" } else { "" }
    );
    for (task, claim) in snap.running() {
        println!(
            "  {task}: claimed by {} (attempt {}, lease {} s left)",
            claim.worker, claim.attempt, claim.left
        );
    }
    for problem in snap.refused.iter().chain(&snap.strange) {
        println!("  refused: {problem}");
    }
}

fn status_json(queue: &Queue, snap: &Snapshot) -> serde_json::Value {
    let running: Vec<serde_json::Value> = snap
        .running()
        .map(|(task, c)| {
            serde_json::json!({"task": task, "worker": c.worker, "attempt": c.attempt, "lease_left": c.left})
        })
        .collect();
    serde_json::json!({
        "fleet": queue.fleet(),
        "tasks": snap.tasks.len(),
        "queued": snap.queued(),
        "running": running,
        "expired": snap.expired(),
        "finished": snap.results.len(),
        "outcomes": snap.by_outcome(),
        "cancelled": snap.cancelled,
        "refs": snap.refs,
        "refused": snap.refused.len() + snap.strange.len(),
    })
}

pub fn results(ctx: &Context, args: ResultsArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let queue = args.target.queue(store)?;
    let snap = snapshot(&queue)?;
    for task in &snap.tasks {
        let line = match snap.results.get(task) {
            Some(r) if args.json => serde_json::to_string(r).unwrap_or_default(),
            Some(r) => format!(
                "{task}\t{}\t{}\t{} file{}\t{} tokens{}",
                r.outcome.as_str(),
                r.branch.as_deref().unwrap_or("-"),
                r.files_changed,
                if r.files_changed == 1 { "" } else { "s" },
                r.input_tokens + r.output_tokens,
                r.cost_usd.map_or(String::new(), |c| format!("\t${c:.4}"))
            ),
            None => {
                let state = if snap.claims.contains_key(task) {
                    "running"
                } else {
                    "queued"
                };
                if args.json {
                    serde_json::json!({"task": task, "outcome": state}).to_string()
                } else {
                    format!("{task}\t{state}")
                }
            }
        };
        println!("{line}");
    }
    for problem in snap.refused.iter().chain(&snap.strange) {
        eprintln!("warning: refused {}", crate::protocol::neutralize(problem));
    }
    Ok(())
}
