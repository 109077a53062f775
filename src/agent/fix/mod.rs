//! `git agent fix`'s loop, for the command line, the hooks and CI alike: a check failed; open a session whose
//! first prompt holds the goal and the check's output, let the model work one turn, run the check again in
//! the session's checkout (in the session's sandbox: it now runs code the model wrote), and while it still
//! fails feed the new output back as the next turn's prompt, up to `max_attempts` and within the budgets,
//! which count for the whole fix, not per attempt. Every run of the check is recorded in the session log
//! ([`Event::Check`]), the first one included, so `show` and `--json` tell the whole story.
//!
//! The session starts from the tree that was judged ([`StartFrom`]): the user's work tree, the staged tree
//! as step 0 (`--staged`), or a commit as the base (`--commit`); what the fix changed is then exactly
//! `step0-or-base..agent/<id>`. The front-end decides what a passing fix leads to (a summary, the accept
//! command, `--apply`).

pub mod audit;
mod prompt;

use std::path::Path;
use std::time::{Duration, Instant};

use crate::protocol::{Approver, Cost, Event, Sink, Status, Usage};
use crate::store::{ObjectId, StartFrom};

use super::check::{Check, CheckRun};
use super::control::TurnControl;
use super::{AgentError, AgentSession, SessionOptions, EXIT_INTERRUPTED, EXIT_UNFINISHED};

pub use audit::Finding;

/// What to fix and how often to try.
#[derive(Clone, Debug)]
pub struct FixOptions {
    pub check: Check,
    /// Turns of the model, each followed by a run of the check (at least 1).
    pub max_attempts: u32,
    /// What the session starts from: the tree that was judged.
    pub from: StartFrom,
    /// That tree in words, for the prompt and the log (`the working tree`, `the staged tree`, ...).
    pub tree: String,
}

/// How a fix ended.
#[derive(Clone, Debug)]
pub struct FixEnd {
    pub id: String,
    /// `agent/<id>`.
    pub branch: String,
    /// The check passes on the branch's tip.
    pub passed: bool,
    /// Turns the model had.
    pub attempts: u32,
    /// The last run of the check.
    pub last: CheckRun,
    /// The model's last answer (its summary of the fix).
    pub answer: String,
    /// How the session is recorded: `done`, `check_failed`, `interrupted`, or the budget that stopped it.
    pub status: Status,
    /// 0 passed, 3 not (the branch keeps the work), 130 interrupted.
    pub exit_code: i32,
    /// Where the fix's change starts (step 0 or the base) and ends.
    pub from: ObjectId,
    pub tip: ObjectId,
    pub steps: u32,
    /// Signs that the fix weakened the check (see [`audit`]).
    pub findings: Vec<Finding>,
    pub usage: Usage,
    pub cost: Cost,
}

/// Fixes the check that failed with `first` (run on `fix.tree`, before any session): see the module docs.
/// `sink` hears the session's events and each run of the check; the turns' own `done` and summary are kept
/// from it, the front-end shows the fix's.
pub async fn fix(
    cwd: &Path,
    options: SessionOptions,
    fix: &FixOptions,
    first: &CheckRun,
    sink: &mut dyn Sink,
    approver: &mut dyn Approver,
    control: &TurnControl,
) -> Result<FixEnd, AgentError> {
    let mut session = AgentSession::open_from(cwd, options, fix.from, sink).await?;
    let result = attempts(&mut session, fix, first, sink, approver, control).await;
    session.shutdown_mcp().await;
    session.close();
    result
}

/// The loop proper, on an open session.
async fn attempts(
    session: &mut AgentSession,
    fix: &FixOptions,
    first: &CheckRun,
    sink: &mut dyn Sink,
    approver: &mut dyn Approver,
    control: &TurnControl,
) -> Result<FixEnd, AgentError> {
    // The first run was shown when it ran, before there was a session to log it in.
    let shown = &mut super::start::Quiet;
    session.record_check(0, &fix.tree, &fix.check.command, first, shown)?;
    let budget = session.parts.limits;
    let started = Instant::now();
    let tree = format!("agent/{}", session.id());
    let mut prompt = prompt::first(&fix.check.command, &fix.tree, first);
    let mut usage = Usage::default();
    let mut cost = Cost::default();
    let mut attempt = 0;
    let (last, answer, status) = loop {
        attempt += 1;
        let spent = usage.input_tokens + usage.output_tokens;
        session.parts.limits.max_steps = budget
            .max_steps
            .saturating_sub(session.parts.context.requests())
            .max(1);
        session.parts.limits.max_time = budget.max_time.map(|t| {
            t.saturating_sub(started.elapsed())
                .max(Duration::from_secs(1))
        });
        session.parts.limits.max_tokens = budget.max_tokens.map(|t| t.saturating_sub(spent).max(1));
        session.parts.limits.max_cost = budget.max_cost.map(|c| (c - cost.usd).max(0.0));
        let end = {
            let mut turn_sink = TurnSink(&mut *sink);
            session
                .turn(&prompt, &mut turn_sink, approver, control)
                .await?
        };
        usage.add(&end.usage);
        cost.add(&end.cost);
        if end.status == Status::Interrupted {
            let run = interrupted_run(first);
            break (run, end.answer, Status::Interrupted);
        }
        let run = run_check(session, fix, attempt, &tree, sink, control).await?;
        if run.passed {
            break (run, end.answer, Status::Done);
        }
        if run.interrupted {
            break (run, end.answer, Status::Interrupted);
        }
        // A budget or a loop guard ended the turn: another attempt would start with nothing left. A model
        // that says it is blocked is believed: trying again would only push it to weaken the check.
        let out_of_budget = end.status.is_unfinished();
        if attempt >= fix.max_attempts || out_of_budget {
            let status = if out_of_budget && end.status != Status::Blocked {
                end.status
            } else {
                Status::CheckFailed
            };
            break (run, end.answer, status);
        }
        prompt = prompt::again(&fix.check.command, attempt, fix.max_attempts, &run);
    };
    session.parts.limits = budget;
    session.set_status(&status)?;
    let s = session.session();
    let from = s.step0.unwrap_or(s.base);
    let tip = s.tip;
    let findings = audit::audit(session.store(), from, tip, &fix.check.command)?;
    let exit_code = match (&status, last.passed) {
        (_, true) => 0,
        (Status::Interrupted, _) => EXIT_INTERRUPTED,
        _ => EXIT_UNFINISHED,
    };
    Ok(FixEnd {
        id: session.id().to_owned(),
        branch: session.branch().to_owned(),
        passed: last.passed,
        attempts: attempt,
        last,
        answer,
        status,
        exit_code,
        from,
        tip,
        steps: session.steps(),
        findings,
        usage,
        cost,
    })
}

/// Runs the check in the session's checkout, in its sandbox, shown and recorded as attempt `attempt`.
async fn run_check(
    session: &mut AgentSession,
    fix: &FixOptions,
    attempt: u32,
    tree: &str,
    sink: &mut dyn Sink,
    control: &TurnControl,
) -> Result<CheckRun, AgentError> {
    let command = &fix.check.command;
    sink.emit(&Event::CheckStarted {
        attempt,
        command: command.to_owned(),
        tree: tree.to_owned(),
    });
    let root = session.session().root().to_path_buf();
    let sandbox = std::sync::Arc::clone(&session.parts.tools.sandbox);
    let run = fix
        .check
        .run(&root, Some(sandbox.as_ref()), control)
        .await?;
    session.record_check(attempt, tree, command, &run, sink)?;
    Ok(run)
}

/// Shows a run of the check.
pub fn emit_check(sink: &mut dyn Sink, attempt: u32, command: &str, tree: &str, run: &CheckRun) {
    sink.emit(&check_event(attempt, command, tree, run));
}

/// A run of the check as an event ([`Event::Check`]).
fn check_event(attempt: u32, command: &str, tree: &str, run: &CheckRun) -> Event {
    Event::Check {
        attempt,
        command: command.to_owned(),
        tree: tree.to_owned(),
        passed: run.passed,
        end: run.end.clone(),
        code: run.code,
        duration_ms: millis(run.duration),
        output: run.output.clone(),
    }
}

/// What stands for the last run when the turn was interrupted before the check ran again.
fn interrupted_run(first: &CheckRun) -> CheckRun {
    CheckRun {
        passed: false,
        end: "interrupted".into(),
        interrupted: true,
        ..first.clone()
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl AgentSession {
    /// Records a run of the check in the session log and shows it on `sink` (see [`super::journal::Event::Check`]).
    fn record_check(
        &mut self,
        attempt: u32,
        tree: &str,
        command: &str,
        run: &CheckRun,
        sink: &mut dyn Sink,
    ) -> Result<(), AgentError> {
        let event = check_event(attempt, command, tree, run);
        super::journal::record(&mut self.parts.work.log, sink, event)?;
        Ok(())
    }

    /// Sets the status the session is listed with, and folds the log.
    fn set_status(&mut self, status: &Status) -> Result<(), AgentError> {
        self.parts.work.log.meta.status = status.clone();
        self.parts.work.log.fold(&self.parts.work.store)?;
        Ok(())
    }
}

/// The sink of one attempt's turn: everything but the turn's own end (`done` and the summary lines), which
/// would announce every attempt as the end; the fix's front-end shows how the whole fix ended.
struct TurnSink<'a>(&'a mut dyn Sink);

impl Sink for TurnSink<'_> {
    fn emit(&mut self, event: &Event) {
        if !matches!(event, Event::Done { .. } | Event::Summary { .. }) {
            self.0.emit(event);
        }
    }
}
