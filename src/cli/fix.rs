//! `git agent fix`: run the project's check on the tree being judged; if it fails, let the agent fix it on
//! `agent/<id>` (the loop is [`crate::agent::fix`]), then say how it went and how to take the fix.
//!
//! The tree being judged is the working tree (the check runs right there, as the user would run it), the
//! staged tree (`--staged`: a scratch checkout of the index, `GIT_INDEX_FILE` honoured, so a pre-commit hook
//! judges what `git commit` is about to commit) or a commit (`--commit`: a scratch checkout of it). A passing
//! check creates nothing. The hooks ([`super::hook`]) use the same steps with their own budget and words.
//!
//! Exit codes: 0 the check passes (as it was, or on `agent/<id>` after the fix), 3 it still fails (the branch
//! keeps the attempt), 1 an error, 130 interrupted.

use std::path::PathBuf;

use clap::Args;

use super::accept;
use super::ask::SessionFlags;
use super::context::Context;
use super::error::{CommandError, ErrorKind};
use crate::agent::check::{self, Check, CheckRun};
use crate::agent::fix::{self as fixing, FixEnd, FixOptions};
use crate::agent::{self, TurnControl};
use crate::protocol::{Event, Status};
use crate::store::{StartFrom, Store};
use crate::ui;

/// Run the project's check; if it fails, let the agent fix it on a branch
///
/// The check is --check, else `check` in .git-agent.toml (which runs only once trusted: see `git agent
/// trust`), else `check` in your own config file. It runs on the working tree (default), the staged
/// tree (--staged: unstaged edits play no part) or a commit (--commit). A passing check exits 0 and creates
/// nothing. A failing one starts a session whose prompt holds the goal and the check's output; after each
/// of the model's attempts the check runs again in the session's checkout, up to --max-attempts. Exit 0 when
/// it passes on agent/<id>, 3 when it does not (the branch keeps the attempt), 1 on errors.
#[derive(Debug, Args)]
pub struct FixArgs {
    /// The check to run, a shell command (default: `check` in .git-agent.toml)
    #[arg(long, value_name = "CMD")]
    check: Option<String>,

    /// Judge the staged tree (the index) instead of the working tree: unstaged edits play no part
    #[arg(long, conflicts_with = "commit")]
    staged: bool,

    /// Judge this commit (a branch, tag or commit id) instead of the working tree
    #[arg(long, value_name = "REV")]
    commit: Option<String>,

    /// Bring a passing fix into your working tree (and, with --staged, your index), three-way as accept does
    #[arg(long)]
    apply: bool,

    /// How many times the model may try, each attempt followed by a run of the check
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    max_attempts: u32,

    #[command(flatten)]
    pub(super) session: SessionFlags,
}

/// Which tree the check judges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Target {
    WorkTree,
    /// The index; `GIT_INDEX_FILE` names it in a hook.
    Staged,
    Commit(String),
}

/// The first run of the check, and where a fix would start.
pub(super) struct Judged {
    pub run: CheckRun,
    pub from: StartFrom,
    /// The tree in words: `the working tree`, `the staged tree`, `commit 1a2b3c4`.
    pub tree: String,
}

pub fn run(ctx: &mut Context, args: FixArgs) -> Result<(), CommandError> {
    let flags = &args.session;
    if flags.resume().is_some() {
        return Err(CommandError::new(
            ErrorKind::Usage,
            "fix starts a session of its own: --resume and --continue are for `git agent ask`",
        ));
    }
    let target = match (&args.commit, args.staged) {
        (Some(rev), _) => Target::Commit(rev.clone()),
        (None, true) => Target::Staged,
        (None, false) => Target::WorkTree,
    };
    if flags.here && target != Target::WorkTree {
        return Err(CommandError::new(
            ErrorKind::Usage,
            "--here works in your working tree, so it judges the working tree: drop --staged/--commit",
        ));
    }
    let check = resolve_check(ctx, args.check.as_deref())?;
    let runtime = super::context::runtime()
        .map_err(|e| CommandError::internal(format!("cannot start the async runtime: {e}")))?;
    let control = TurnControl::new();
    let code = runtime.block_on(async {
        let ctrl_c = control.cancel_on_ctrl_c();
        let result = fix_command(ctx, &args, &check, &target, &control).await;
        ctrl_c.abort();
        result
    })?;
    exit(code)
}

/// The command's work, once its arguments are known: judge, fix, report, apply.
async fn fix_command(
    ctx: &mut Context,
    args: &FixArgs,
    check: &Check,
    target: &Target,
    control: &TurnControl,
) -> Result<i32, CommandError> {
    let judged = judge(ctx, check, target, control).await?;
    if judged.run.interrupted {
        return Ok(agent::EXIT_INTERRUPTED);
    }
    if judged.run.passed {
        nothing_to_fix(ctx, check, &judged.tree);
        return Ok(0);
    }
    let end = repair(
        ctx,
        &judged,
        check,
        args.max_attempts,
        &args.session,
        control,
    )
    .await?;
    let accept_command = if target == &Target::Staged {
        format!("git agent accept {} --index", end.id)
    } else {
        format!("git agent accept {}", end.id)
    };
    report(ctx, check, &end, &accept_command, false)?;
    if args.apply && end.passed {
        apply(ctx.store()?, &end.id, target == &Target::Staged)?;
    }
    Ok(end.exit_code)
}

/// The check from `--check`, else from the settings files, else an error that says how to set it.
pub(super) fn resolve_check(ctx: &Context, flag: Option<&str>) -> Result<Check, CommandError> {
    let env = |name: &str| ctx.env(name);
    let settings = crate::config::Settings::load(ctx.cwd(), &env)?;
    let command =
        match flag.or(settings.check()) {
            Some(command) if !command.trim().is_empty() => command.to_owned(),
            _ => return Err(CommandError::user(
                "no check to run: name the command that tells whether the code is right",
            )
            .hint("pass it once: git agent fix --check \"cargo test\"")
            .hint(
                "or set it for the repository: git agent config set --repo check \"cargo test\"",
            )),
        };
    if flag.is_none() {
        require_trusted_check(ctx, &settings)?;
    }
    Ok(Check {
        command,
        timeout: settings.check_timeout().unwrap_or(check::DEFAULT_TIMEOUT),
    })
}

/// When the check in force is the repository's (its `.git-agent.toml` wins over the user's file), the user
/// must have trusted it: a cloned repository's check is someone else's command (issue 22, finding 6).
pub(super) fn require_trusted_check(
    ctx: &Context,
    settings: &crate::config::Settings,
) -> Result<(), CommandError> {
    match settings.repo.check.as_deref() {
        Some(command) => super::trust::require(ctx, &crate::config::trust::Item::check(command)),
        None => Ok(()),
    }
}

/// Runs the check once on the tree `target` names (see the module docs), shown as attempt 0.
pub(super) async fn judge(
    ctx: &mut Context,
    check: &Check,
    target: &Target,
    control: &TurnControl,
) -> Result<Judged, CommandError> {
    let store = ctx.store()?.clone();
    let pool = pool_size(ctx);
    let (from, tree, scratch) = match target {
        Target::WorkTree => (StartFrom::WorkTree, "the working tree".to_owned(), None),
        Target::Staged => {
            let index = index_file(ctx);
            let tree = store.index_tree(index.as_deref())?;
            // The work tree is the staged tree: the check runs there, as the user would run it, with their
            // build state, and nothing is checked out.
            let scratch = if store.index_is_worktree(index.as_deref())? {
                None
            } else {
                Some(store.scratch_checkout(store.tree_commit(tree)?, pool)?)
            };
            (StartFrom::Tree(tree), "the staged tree".to_owned(), scratch)
        }
        Target::Commit(rev) => {
            let commit = store.resolve_commit(rev)?;
            let scratch = store.scratch_checkout(commit, pool)?;
            let short = commit.to_hex_with_len(7).to_string();
            (
                StartFrom::Commit(commit),
                format!("commit {short}"),
                Some(scratch),
            )
        }
    };
    let dir = match &scratch {
        Some(scratch) => scratch.root().to_path_buf(),
        None => store.workdir().to_path_buf(),
    };
    let sink = ctx.sink();
    sink.emit(&Event::CheckStarted {
        attempt: 0,
        command: check.command.clone(),
        tree: tree.clone(),
    });
    // The user's own tree, as they would run the check themselves: no sandbox yet.
    let run = check
        .run(&dir, None, control)
        .await
        .map_err(|e| CommandError::user(e.to_string()))?;
    fixing::emit_check(sink, 0, &check.command, &tree, &run);
    // The scratch checkout goes back to the pool before a session would take one.
    drop(scratch);
    Ok(Judged { run, from, tree })
}

/// Starts the fix session for a check that failed as `judged` says, with the session options of `flags`.
pub(super) async fn repair(
    ctx: &mut Context,
    judged: &Judged,
    check: &Check,
    max_attempts: u32,
    flags: &SessionFlags,
    control: &TurnControl,
) -> Result<FixEnd, CommandError> {
    let mut options = flags.options(ctx, None)?;
    options.title = Some(format!("fix: make `{}` pass", check.command));
    let fix = FixOptions {
        check: check.clone(),
        max_attempts,
        from: judged.from,
        tree: judged.tree.clone(),
    };
    let cwd = ctx.cwd().to_path_buf();
    let mut approver = ui::approver(flags.yes, flags.json);
    let sink = ctx.sink();
    let end = fixing::fix(
        &cwd,
        options,
        &fix,
        &judged.run,
        sink,
        approver.as_mut(),
        control,
    )
    .await?;
    Ok(end)
}

/// A passing check: said on stderr, and as `done` with `--json`.
fn nothing_to_fix(ctx: &mut Context, check: &Check, tree: &str) {
    if ctx.json() {
        ctx.sink().emit(&Event::Done {
            status: Status::Done.clone(),
            answer: "".to_owned(),
            exit_code: 0,
        });
    } else {
        eprintln!("`{}` passes on {tree}: nothing to fix", check.command);
    }
}

/// Tells how the fix ended: the `fix` and `done` events, and for a person the outcome, the diff stat, the
/// signs of a weakened check and the commands to look at and take the fix (`accept_command`).
///
/// `in_hook`: git sends a hook's stdout to its stderr, so the answer is not printed a second time there
/// (the summary quotes it).
pub(super) fn report(
    ctx: &mut Context,
    check: &Check,
    end: &FixEnd,
    accept_command: &str,
    in_hook: bool,
) -> Result<(), CommandError> {
    let findings: Vec<String> = end.findings.iter().map(|f| f.to_string()).collect();
    let lines = if ctx.json() {
        Vec::new()
    } else {
        summary(ctx.store()?, check, end, accept_command)
    };
    let sink = ctx.sink();
    sink.emit(&Event::Usage {
        usage: end.usage,
        cost: end.cost.known(),
    });
    sink.emit(&Event::Fixed {
        passed: end.passed,
        branch: end.branch.clone(),
        attempts: end.attempts,
        steps: end.steps,
        findings: findings.clone(),
    });
    sink.emit(&Event::Done {
        status: end.status.clone(),
        answer: if in_hook {
            "".to_owned()
        } else {
            end.answer.clone()
        },
        exit_code: end.exit_code,
    });
    // After `done`, which ends the streamed text's last line.
    for line in &lines {
        eprintln!("{}", ui::neutralize(line));
    }
    Ok(())
}

/// The lines a person gets at the end of a fix.
pub(super) fn summary(
    store: &Store,
    check: &Check,
    end: &FixEnd,
    accept_command: &str,
) -> Vec<String> {
    let mut lines = vec![String::new()];
    let attempts = format!(
        "{} attempt{}, {} step{}",
        end.attempts,
        accept::plural(end.attempts as usize),
        end.steps,
        accept::plural(end.steps as usize)
    );
    if end.passed {
        lines.push(format!(
            "fixed: `{}` passes on {} ({attempts})",
            check.command, end.branch
        ));
    } else if end.status == Status::Interrupted {
        lines.push(format!(
            "interrupted: {} keeps what was done so far ({attempts})",
            end.branch
        ));
    } else {
        lines.push(format!(
            "not fixed: `{}` still fails on {} ({}; {attempts}; session {})",
            check.command, end.branch, end.last.end, end.status
        ));
    }
    let range = format!("{}..{}", end.from, end.tip);
    if let Ok(stat) = store.git_output(&["diff", "--stat", "--no-color", &range]) {
        let stat = String::from_utf8_lossy(&stat);
        lines.extend(stat.lines().map(|l| l.to_owned()));
    }
    if !end.findings.is_empty() {
        lines.push("warning: the fix may weaken the check; look before you take it:".into());
        lines.extend(end.findings.iter().map(|f| format!("  {f}")));
    }
    let answer = end.answer.trim();
    if !answer.is_empty() {
        let first: Vec<&str> = answer.lines().take(6).collect();
        lines.push(format!("the agent says: {}", first.join("\n  ")));
    }
    if end.passed {
        lines.push(format!("take it:    {accept_command}"));
    }
    lines.push(format!("look first: git agent diff {}", end.id));
    if !end.passed && end.status != Status::Interrupted {
        lines.push(format!(
            "go on:      git agent ask --resume {} \"...\"",
            end.id
        ));
    }
    lines
}

/// `--apply`: the fix into the working tree (and the index when `index`), three-way, with accept's planning
/// and writing; conflicts are listed and fail the command.
fn apply(store: &Store, id: &str, index: bool) -> Result<(), CommandError> {
    let log = store.read_log(id)?;
    let range = accept::Range::of(store, &log.meta)?;
    let plan = store.plan_landing(range.from, range.tip, &range.label)?;
    accept::refuse_unresolved(&plan, id)?;
    accept::land(store, &plan, &format!("fix of session {id}"), &range.label)?;
    if plan.conflicts().count() > 0 {
        return Err(accept::attention(&plan, &range.label));
    }
    if index {
        accept::stage(store, &plan, &accept::landed_paths(&plan))?;
        eprintln!("applied the fix of session {id} to your working tree and index (not committed)");
    } else {
        eprintln!("applied the fix of session {id} to your working tree (not committed)");
    }
    Ok(())
}

/// The index a hook is given (`GIT_INDEX_FILE`, relative to where git started the hook), if any.
pub(super) fn index_file(ctx: &Context) -> Option<PathBuf> {
    let value = std::env::var_os("GIT_INDEX_FILE").filter(|v| !v.is_empty())?;
    Some(ctx.cwd().join(value))
}

/// `worktree_pool`: how many scratch checkouts the pool keeps for the next check.
fn pool_size(ctx: &Context) -> usize {
    let env = |name: &str| ctx.env(name);
    crate::config::Settings::load(ctx.cwd(), &env)
        .ok()
        .and_then(|s| s.worktree_pool())
        .unwrap_or(crate::store::DEFAULT_POOL)
}

/// The command's exit code as a result: 3 and 130 were explained already.
pub(super) fn exit(code: i32) -> Result<(), CommandError> {
    match code {
        0 => Ok(()),
        agent::EXIT_UNFINISHED => Err(CommandError::shown(ErrorKind::Unfinished)),
        agent::EXIT_INTERRUPTED => Err(CommandError::shown(ErrorKind::Interrupted)),
        _ => Err(CommandError::shown(ErrorKind::User)),
    }
}
