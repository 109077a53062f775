//! `git agent fleet submit`: tasks from JSONL or CSV, written as one ref per task under
//! `refs/agent/fleet/<fleet>/tasks/` on the remote in one atomic push.

use std::io::Read;
use std::path::PathBuf;

use clap::Args;

use super::common::now;
use crate::cli::context::Context;
use crate::cli::error::CommandError;
use crate::store::fleet::input;
use crate::store::fleet::queue::{Expect, Pushed, Queue, Update};
use crate::store::fleet::record::{check_model, FleetMeta, Task};

/// Queue tasks on a remote: JSONL (one task object a line), or CSV rows with --template
///
/// Each JSONL line is an object with `id`, `prompt` and optionally `base`, `check`, `model`, `max_steps`,
/// `max_tokens`. A CSV file's first row names its columns; --template 'Migrate {path} to v2' makes each row's
/// prompt, and its `id` column (or the row number) the task's id. Submitting to an existing fleet adds tasks;
/// an id already there is refused and nothing is written.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// The remote to queue on (a remote's name, a URL or a path)
    #[arg(value_name = "REMOTE")]
    remote: String,

    /// The tasks file ('-' reads stdin)
    #[arg(value_name = "TASKS")]
    tasks: PathBuf,

    /// The fleet's id (default: fleet-<unix time>)
    #[arg(long, value_name = "FLEET")]
    fleet: Option<String>,

    /// Read TASKS as CSV and make each row's prompt from this template ({column} is the row's value)
    #[arg(long, value_name = "TEXT")]
    template: Option<String>,

    /// Model for tasks that name none, as <provider>/<model>
    #[arg(long, value_name = "PROVIDER/MODEL")]
    model: Option<String>,

    /// Check for tasks that name none: a shell command that decides passed or failed (workers run it only
    /// with --allow-check)
    #[arg(long, value_name = "CMD")]
    check: Option<String>,

    /// Model requests per task, for tasks that name none
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_steps: Option<u32>,
}

pub fn run(ctx: &Context, args: SubmitArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let text = read_tasks(&args.tasks)?;
    let mut tasks = match &args.template {
        Some(template) => input::from_csv(&text, template)?,
        None => input::from_jsonl(&text)?,
    };
    if let Some(model) = &args.model {
        check_model(model)?;
    }
    for task in &mut tasks {
        apply_defaults(task, &args);
        task.check()?;
    }
    let fleet = args
        .fleet
        .clone()
        .unwrap_or_else(|| format!("fleet-{}", now()));
    let queue = Queue::new(store, &args.remote, &fleet)?;
    let listing = queue.list()?;
    if listing.cancel.is_some() {
        return Err(CommandError::user(format!(
            "fleet {fleet} was cancelled: submit to a new fleet (--fleet)"
        )));
    }
    let mut updates = Vec::with_capacity(tasks.len() + 1);
    if listing.meta.is_none() {
        let meta = FleetMeta {
            fleet: fleet.clone(),
            tasks: tasks.len(),
            submitted_by: submitter(ctx),
            submitted_at: now(),
            model: args.model.clone(),
            check: args.check.clone(),
        };
        let message = format!("fleet {fleet}: {} tasks", tasks.len());
        let commit = queue.write("fleet.json", &meta, None, &message)?;
        updates.push(Update {
            dst: queue.meta_ref(),
            new: Some(commit),
            expect: Expect::Absent,
        });
    }
    for task in &tasks {
        if listing.tasks.contains_key(&task.id) {
            return Err(CommandError::user(format!(
                "task {} is already in fleet {fleet}: give it another id",
                task.id
            )));
        }
        let commit = queue.write("task.json", task, None, &format!("task {}", task.id))?;
        updates.push(Update {
            dst: queue.task_ref(crate::store::fleet::queue::Kind::Tasks, &task.id),
            new: Some(commit),
            expect: Expect::Absent,
        });
    }
    match queue.push(&updates)? {
        Pushed::Done => {}
        Pushed::Conflict(refs) => {
            return Err(CommandError::user(format!(
                "fleet {fleet} changed while submitting ({} already exists): nothing was written",
                refs.first().map_or("a ref", String::as_str)
            )))
        }
        Pushed::Transient(why) => {
            return Err(CommandError::user(format!(
                "could not push the tasks to {}: {why}",
                args.remote
            ))
            .hint("nothing was written (the push is atomic): try again"))
        }
    }
    println!("{fleet}");
    eprintln!(
        "Queued {} task{} in fleet {fleet} on {}; start workers with `git agent fleet work {} --fleet {fleet}`",
        tasks.len(),
        if tasks.len() == 1 { "" } else { "s" },
        args.remote,
        args.remote
    );
    Ok(())
}

/// The submit's defaults for what a task leaves out.
fn apply_defaults(task: &mut Task, args: &SubmitArgs) {
    if task.model.is_none() {
        task.model.clone_from(&args.model);
    }
    if task.check.is_none() {
        task.check.clone_from(&args.check);
    }
    if task.max_steps.is_none() {
        task.max_steps = args.max_steps;
    }
}

/// Who submits: git's committer identity, else the user name.
fn submitter(ctx: &Context) -> String {
    let name = ctx
        .env("GIT_COMMITTER_NAME")
        .or_else(|| ctx.env("USER"))
        .unwrap_or_else(|| "unknown".into());
    name.chars().filter(|c| !c.is_control()).take(100).collect()
}

fn read_tasks(path: &std::path::Path) -> Result<String, CommandError> {
    let mut text = String::new();
    let result = if path.as_os_str() == "-" {
        std::io::stdin().read_to_string(&mut text)
    } else {
        std::fs::File::open(path).and_then(|mut f| f.read_to_string(&mut text))
    };
    result.map_err(|e| {
        CommandError::user(format!("cannot read the tasks {}: {e}", path.display()))
            .hint("give a JSONL file (or CSV with --template), or '-' for stdin")
    })?;
    Ok(text)
}
