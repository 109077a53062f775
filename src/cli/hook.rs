//! `git agent hook`: git hooks that call the agent. `install` writes the scripts of the top-level `hooks/`
//! folder (small POSIX sh that calls `git agent hook run <name> "$@"`, so users can read what is installed)
//! into the repository's hooks directory; `run` is what they call; `uninstall` and `status` do the obvious.
//!
//! - The hooks directory is git's: `core.hooksPath` (relative to the top of the work tree, or absolute),
//!   else `hooks` in the common git dir, so a linked worktree shares its main worktree's hooks.
//! - A hook that is there already is chained, never replaced: it is renamed to `<name>.git-agent-chained`
//!   (a rename keeps its bytes and mode) and runs first, with the same arguments and input; if it fails, the
//!   commit or push fails as before. `uninstall` renames it back.
//! - git-agent's own hook, edited by the user, is never lost: before `install` replaces it or `uninstall`
//!   removes it, a copy is kept as `<name>.git-agent-edited` (refused when such a copy exists already).
//! - A directory another hook manager owns (husky's `.husky/_`, lefthook's hooks) is theirs: installing
//!   there needs `--force`, because they rewrite or rename what they did not write.
//! - `run` never prompts (the agent gets the [`crate::protocol::Never`] approver: hooks run without a
//!   terminal, or inside editors) and never recurses: within an agent run (the
//!   [`crate::tools::process::IN_AGENT`] marker) and with `GIT_AGENT_SKIP=1` it does nothing but the chained
//!   hook. The agent's own step commits are written in-process and run no hooks at all.

use std::io::{IsTerminal, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use super::ask::SessionFlags;
use super::context::Context;
use super::error::{CommandError, ErrorKind};
use super::fix::{self, Judged, Target};
use crate::agent::check::{duration_words, Check};
use crate::agent::TurnControl;
use crate::config::file::HookMode;
use crate::store::Store;

/// The scripts, as the repository's `hooks/` folder has them.
const PRE_COMMIT: &str = include_str!("../../hooks/pre-commit");
const PRE_PUSH: &str = include_str!("../../hooks/pre-push");
/// The line that marks a hook as git-agent's.
const MARKER: &str = "# git-agent-hook: ";
/// The line of the scripts that `install --mode` sets.
const MODE_LINE: &str = "GIT_AGENT_INSTALLED_MODE=";
/// What a chained hook is renamed to: `<name>` + this.
const CHAINED: &str = ".git-agent-chained";
/// Where a copy of git-agent's hook with the user's edits in it is kept before install replaces it or
/// uninstall removes it: `<name>` + this.
const EDITED: &str = ".git-agent-edited";
/// The budget of a fix started by a hook, unless `[hooks]` says otherwise.
const HOOK_MAX_STEPS: u32 = 20;
const HOOK_MAX_TIME: Duration = Duration::from_secs(5 * 60);

/// Install, remove, run or list the git hooks that call the agent (pre-commit, pre-push)
///
/// The hooks run the project's check (`check` in .git-agent.toml) on what is being committed or pushed and
/// refuse the commit or push when it fails; in fix mode the agent first fixes it on a branch agent/<id> and
/// prints the command that takes the fix. An existing hook is kept and runs first; uninstall puts it back.
#[derive(Debug, Args)]
pub struct HookArgs {
    #[command(subcommand)]
    command: HookCommand,
}

#[derive(Debug, Subcommand)]
enum HookCommand {
    /// Install git-agent's hooks (default: pre-commit) into the repository's hooks directory
    Install {
        /// The hooks to install
        #[arg(value_enum)]
        hooks: Vec<HookName>,
        /// fix: the agent fixes a failing check on a branch; check: only report (default: [hooks] mode,
        /// else fix)
        #[arg(long, value_name = "MODE", value_parser = ["fix", "check"])]
        mode: Option<String>,
        /// Install into a hooks directory another hook manager (husky, lefthook) owns, chaining its hook
        #[arg(long)]
        force: bool,
    },
    /// Remove git-agent's hooks (default: all) and put back the hooks they chained, as they were
    Uninstall {
        #[arg(value_enum)]
        hooks: Vec<HookName>,
    },
    /// Run a hook as git does (what the installed scripts call)
    Run {
        #[arg(value_enum)]
        name: HookName,
        /// fix or check (default: GIT_AGENT_HOOK_MODE, else [hooks] mode, else fix)
        #[arg(long, value_name = "MODE", value_parser = ["fix", "check"])]
        mode: Option<String>,
        /// Do not run the chained hook (for hook frameworks that run git-agent as one of their hooks)
        #[arg(long)]
        no_chained: bool,
        /// The hook's arguments, as git gives them (pre-push: the remote's name and URL)
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<String>,
    },
    /// Say which hooks are installed, in which directory, and what they chain
    Status,
}

/// The hooks git-agent has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum HookName {
    PreCommit,
    PrePush,
}

impl HookName {
    const ALL: [HookName; 2] = [HookName::PreCommit, HookName::PrePush];

    fn as_str(self) -> &'static str {
        match self {
            HookName::PreCommit => "pre-commit",
            HookName::PrePush => "pre-push",
        }
    }

    fn script(self) -> &'static str {
        match self {
            HookName::PreCommit => PRE_COMMIT,
            HookName::PrePush => PRE_PUSH,
        }
    }
}

pub fn run(ctx: &mut Context, args: HookArgs) -> Result<(), CommandError> {
    match args.command {
        HookCommand::Install { hooks, mode, force } => {
            let hooks = if hooks.is_empty() {
                vec![HookName::PreCommit]
            } else {
                hooks
            };
            install(ctx.store()?, &hooks, mode.as_deref(), force)
        }
        HookCommand::Uninstall { hooks } => {
            let hooks = if hooks.is_empty() {
                HookName::ALL.to_vec()
            } else {
                hooks
            };
            uninstall(ctx.store()?, &hooks)
        }
        HookCommand::Status => status(ctx.store()?),
        HookCommand::Run {
            name,
            mode,
            no_chained,
            args,
        } => run_hook(ctx, name, mode.as_deref(), no_chained, &args),
    }
}

/// Where git looks for this repository's hooks (see the module docs), and the `core.hooksPath` that says so.
fn hooks_dir(store: &Store) -> (PathBuf, Option<String>) {
    let config = store.repo().config_snapshot();
    let configured = config.trusted_path("core.hooksPath").ok().flatten();
    match configured {
        Some(path) => {
            let raw = config
                .string("core.hooksPath")
                .map(|s| s.to_string())
                .unwrap_or_else(|| path.display().to_string());
            (store.workdir().join(path), Some(raw))
        }
        None => (store.common_dir().join("hooks"), None),
    }
}

/// What a hook file is, read without following a link's target for the marker.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    Missing,
    /// git-agent's, with the mode its script sets (empty: the config's).
    Ours {
        mode: String,
    },
    /// Someone else's: a user's script, or a manager's (named when recognised).
    Theirs {
        manager: Option<&'static str>,
    },
}

fn read_hook(path: &Path) -> Found {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            if text.lines().any(|l| l.starts_with(MARKER)) {
                let mode = text
                    .lines()
                    .find_map(|l| l.strip_prefix(MODE_LINE))
                    .unwrap_or_default()
                    .trim()
                    .to_owned();
                Found::Ours { mode }
            } else {
                Found::Theirs {
                    manager: manager_of_text(&text),
                }
            }
        }
        Err(_) if std::fs::symlink_metadata(path).is_ok() => Found::Theirs { manager: None },
        Err(_) => Found::Missing,
    }
}

/// The hook manager a hook script comes from, by what it says.
fn manager_of_text(text: &str) -> Option<&'static str> {
    if text.contains("husky") {
        Some("husky")
    } else if text.contains("lefthook") {
        Some("lefthook")
    } else if text.contains("pre-commit.com") || text.contains("File generated by pre-commit") {
        Some("the pre-commit framework")
    } else {
        None
    }
}

/// A manager that owns the directory `dir` (it rewrites or renames hooks it did not write), if any: husky
/// (`.husky/_`, with its `h` runner) or lefthook (its scripts).
fn owner_of(dir: &Path, name: HookName) -> Option<&'static str> {
    if dir.ends_with(".husky/_") || dir.join("h").is_file() && dir.join("husky.sh").exists() {
        return Some("husky");
    }
    match read_hook(&dir.join(name.as_str())) {
        Found::Theirs {
            manager: Some(m @ ("husky" | "lefthook")),
        } => Some(m),
        _ => None,
    }
}

/// What to do instead of installing into a manager's directory.
fn manager_advice(manager: &str, name: HookName) -> String {
    let name = name.as_str();
    match manager {
        "husky" => format!(
            "husky rewrites that directory: add `git agent hook run {name} \"$@\"` to .husky/{name} instead"
        ),
        _ => format!(
            "lefthook renames hooks it did not write and never runs them: add `git agent hook run {name}` as \
             a command of {name} in lefthook.yml instead"
        ),
    }
}

/// `install`: each hook written (atomically, mode 0755), an existing one chained; idempotent.
fn install(
    store: &Store,
    hooks: &[HookName],
    mode: Option<&str>,
    force: bool,
) -> Result<(), CommandError> {
    let (dir, configured) = hooks_dir(store);
    for &name in hooks {
        if let Some(manager) = owner_of(&dir, name) {
            if !force {
                let place = match &configured {
                    Some(raw) => format!("core.hooksPath is {raw}, which {manager} owns"),
                    None => format!(
                        "{} is managed by {manager}",
                        dir.join(name.as_str()).display()
                    ),
                };
                return Err(CommandError::user(format!("{place}: nothing was installed"))
                    .hint(manager_advice(manager, name))
                    .hint("or install there anyway, chaining its hook: git agent hook install --force"));
            }
        }
    }
    std::fs::create_dir_all(&dir)
        .map_err(|e| CommandError::user(format!("cannot create {}: {e}", dir.display())))?;
    for &name in hooks {
        install_one(&dir, name, mode, owner_of(&dir, name))?;
    }
    Ok(())
}

/// Installs one hook into `dir`, chaining what is there; `owner` is the manager that owns `dir`, if any.
fn install_one(
    dir: &Path,
    name: HookName,
    mode: Option<&str>,
    owner: Option<&str>,
) -> Result<(), CommandError> {
    let target = dir.join(name.as_str());
    let chained = chained_path(dir, name);
    let script = with_mode(name.script(), mode);
    let shown = target.display();
    match read_hook(&target) {
        Found::Ours { mode: old } => {
            if std::fs::read(&target).is_ok_and(|bytes| bytes == script.as_bytes()) {
                eprintln!("{}: already installed in {shown}", name.as_str());
                return Ok(());
            }
            let kept = keep_edits(dir, name, &old)?;
            write_script(&target, &script)?;
            match kept {
                Some(kept) => eprintln!(
                    "{}: updated {shown}; it had edits of yours, kept in {}",
                    name.as_str(),
                    kept.display()
                ),
                None => eprintln!("{}: updated {shown}", name.as_str()),
            }
        }
        Found::Missing => {
            write_script(&target, &script)?;
            eprintln!("{}: installed {shown}", name.as_str());
        }
        Found::Theirs { manager } => {
            if std::fs::symlink_metadata(&chained).is_ok() {
                return Err(CommandError::user(format!(
                    "{shown} and {} both exist and neither is git-agent's: nothing was changed",
                    chained.display()
                ))
                .hint(format!(
                    "move one of them away, then run `git agent hook install {}` again",
                    name.as_str()
                )));
            }
            std::fs::rename(&target, &chained).map_err(|e| {
                CommandError::user(format!("cannot move {shown} aside to chain it: {e}"))
            })?;
            if let Err(err) = write_script(&target, &script) {
                // Put theirs back: nothing half-installed.
                let _ = std::fs::rename(&chained, &target);
                return Err(err);
            }
            let whose = manager
                .or(owner)
                .map(|m| format!(" ({m}'s)"))
                .unwrap_or_default();
            eprintln!(
                "{}: installed {shown}; the hook that was there{whose} is kept as {} and runs first",
                name.as_str(),
                chained.display()
            );
        }
    }
    Ok(())
}

/// The script with its mode line set to `mode` (none: the configuration's).
fn with_mode(script: &str, mode: Option<&str>) -> String {
    match mode {
        Some(mode) => script.replacen(
            &format!("\n{MODE_LINE}\n"),
            &format!("\n{MODE_LINE}{mode}\n"),
            1,
        ),
        None => script.to_owned(),
    }
}

/// Copies git-agent's hook in `dir` to `<name>.git-agent-edited` when it is not as install wrote it (for the
/// mode it sets): its differences are the user's edits, which replacing or removing it would destroy
/// (issue 22). Refused, with nothing changed, when such a copy exists already.
fn keep_edits(dir: &Path, name: HookName, mode: &str) -> Result<Option<PathBuf>, CommandError> {
    let target = dir.join(name.as_str());
    let pristine = with_mode(name.script(), Some(mode));
    if std::fs::read(&target).is_ok_and(|bytes| bytes == pristine.as_bytes()) {
        return Ok(None);
    }
    let kept = dir.join(format!("{}{EDITED}", name.as_str()));
    if std::fs::symlink_metadata(&kept).is_ok() {
        return Err(CommandError::user(format!(
            "{} has edits of yours and {} exists already: nothing was changed",
            target.display(),
            kept.display()
        ))
        .hint(format!(
            "keep what you need from both, remove {}, then run the command again",
            kept.display()
        )));
    }
    // A copy, not a rename: the hook stays in place until the caller replaces or removes it.
    std::fs::copy(&target, &kept).map_err(|e| {
        CommandError::user(format!(
            "cannot keep a copy of your edited {} as {}: {e}; nothing was changed",
            target.display(),
            kept.display()
        ))
    })?;
    Ok(Some(kept))
}

fn chained_path(dir: &Path, name: HookName) -> PathBuf {
    dir.join(format!("{}{CHAINED}", name.as_str()))
}

/// Writes `script` to `target` through a temp file in the same directory, executable, renamed into place.
fn write_script(target: &Path, script: &str) -> Result<(), CommandError> {
    let temp = target.with_extension(format!("git-agent-{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(script.as_bytes())?;
        file.set_permissions(std::fs::Permissions::from_mode(0o755))?;
        file.sync_all()?;
        std::fs::rename(&temp, target)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        CommandError::user(format!("cannot write {}: {e}", target.display()))
    })
}

/// `uninstall`: git-agent's hooks removed, each chained hook renamed back (bytes and mode as they were).
fn uninstall(store: &Store, hooks: &[HookName]) -> Result<(), CommandError> {
    let (dir, _) = hooks_dir(store);
    for &name in hooks {
        let target = dir.join(name.as_str());
        let chained = chained_path(&dir, name);
        match read_hook(&target) {
            Found::Ours { mode } => {
                if let Some(kept) = keep_edits(&dir, name, &mode)? {
                    eprintln!(
                        "{}: {} had edits of yours: kept in {}",
                        name.as_str(),
                        target.display(),
                        kept.display()
                    );
                }
                std::fs::remove_file(&target).map_err(|e| {
                    CommandError::user(format!("cannot remove {}: {e}", target.display()))
                })?;
                if std::fs::symlink_metadata(&chained).is_ok() {
                    std::fs::rename(&chained, &target).map_err(|e| {
                        CommandError::user(format!(
                            "removed git-agent's {}, but could not put back {}: {e}",
                            name.as_str(),
                            chained.display()
                        ))
                        .hint(format!(
                            "rename it yourself: mv {} {}",
                            chained.display(),
                            target.display()
                        ))
                    })?;
                    eprintln!(
                        "{}: removed; the hook it chained is back at {}",
                        name.as_str(),
                        target.display()
                    );
                } else {
                    eprintln!("{}: removed {}", name.as_str(), target.display());
                }
            }
            Found::Theirs { .. } => {
                eprintln!(
                    "{}: {} is not git-agent's: left as it is",
                    name.as_str(),
                    target.display()
                );
            }
            Found::Missing => eprintln!("{}: not installed", name.as_str()),
        }
    }
    Ok(())
}

/// `status`: the directory, and for each hook what is installed and chained.
fn status(store: &Store) -> Result<(), CommandError> {
    let (dir, configured) = hooks_dir(store);
    let mut out = String::new();
    match &configured {
        Some(raw) => out.push_str(&format!(
            "hooks directory: {} (core.hooksPath = {raw})\n",
            dir.display()
        )),
        None => out.push_str(&format!("hooks directory: {}\n", dir.display())),
    }
    for name in HookName::ALL {
        if let Some(manager) = owner_of(&dir, name) {
            out.push_str(&format!(
                "{}: this directory is {manager}'s\n",
                name.as_str()
            ));
        }
        let line = match read_hook(&dir.join(name.as_str())) {
            Found::Ours { mode } => {
                let mode = if mode.is_empty() {
                    "mode from [hooks] mode, else fix".to_owned()
                } else {
                    format!("mode {mode}")
                };
                let chained = chained_path(&dir, name);
                let chain = match read_hook(&chained) {
                    Found::Missing => String::new(),
                    Found::Theirs { manager: Some(m) } => {
                        format!("; chains {} ({m}'s)", chained.display())
                    }
                    _ => format!("; chains {}", chained.display()),
                };
                format!("installed ({mode}){chain}")
            }
            Found::Theirs { manager: Some(m) } => format!("not installed ({m}'s hook is there)"),
            Found::Theirs { manager: None } => "not installed (another hook is there)".into(),
            Found::Missing => "not installed".into(),
        };
        out.push_str(&format!("{}: {line}\n", name.as_str()));
    }
    print!("{out}");
    Ok(())
}

/// `run <name>`: the chained hook first, then git-agent's part (see the module docs).
fn run_hook(
    ctx: &mut Context,
    name: HookName,
    mode: Option<&str>,
    no_chained: bool,
    args: &[String],
) -> Result<(), CommandError> {
    // pre-push's refs arrive on stdin, and both hooks need them; git gives pre-commit nothing there.
    let input = match name {
        HookName::PrePush => read_input(),
        HookName::PreCommit => Vec::new(),
    };
    if !no_chained {
        let (dir, _) = hooks_dir(ctx.store()?);
        run_chained(&chained_path(&dir, name), name, args, &input)?;
    }
    if std::env::var_os(crate::tools::process::IN_AGENT).is_some() {
        // Started from within an agent run (the model's own `git commit`, a check's tests): never recurse.
        return Ok(());
    }
    if std::env::var("GIT_AGENT_SKIP").is_ok_and(|v| !v.is_empty() && v != "0") {
        eprintln!("git-agent: {} skipped (GIT_AGENT_SKIP)", name.as_str());
        return Ok(());
    }
    let env = |name: &str| ctx.env(name);
    let settings = crate::config::Settings::load(ctx.cwd(), &env)?;
    let Some(command) = settings.check().map(str::to_owned) else {
        eprintln!(
            "warning: git-agent's {} hook has no check to run: set one with \
             `git agent config set --repo check \"cargo test\"`",
            name.as_str()
        );
        return Ok(());
    };
    // A repository's check runs only once trusted, in a hook as anywhere (issue 22, finding 6).
    super::fix::require_trusted_check(ctx, &settings)?;
    let check = Check {
        command,
        timeout: settings
            .check_timeout()
            .unwrap_or(crate::agent::check::DEFAULT_TIMEOUT),
    };
    let hooks = settings.hooks();
    let mode = mode
        .map(str::to_owned)
        .or_else(|| std::env::var("GIT_AGENT_HOOK_MODE").ok())
        .filter(|m| !m.is_empty())
        .and_then(|m| HookMode::parse(&m))
        .or(hooks.mode)
        .unwrap_or_default();
    let budget = (
        hooks.max_steps.unwrap_or(HOOK_MAX_STEPS),
        hooks.max_time.unwrap_or(HOOK_MAX_TIME),
    );
    let runtime = super::context::runtime()
        .map_err(|e| CommandError::internal(format!("cannot start the async runtime: {e}")))?;
    let control = TurnControl::new();
    let hook = Hook {
        check,
        mode,
        budget,
    };
    runtime.block_on(async {
        let ctrl_c = control.cancel_on_ctrl_c();
        let result = match name {
            HookName::PreCommit => hook.pre_commit(ctx, &control).await,
            HookName::PrePush => hook.pre_push(ctx, &input, &control).await,
        };
        ctrl_c.abort();
        result
    })
}

/// All of stdin, unless it is a terminal (a hook run by hand): a hook never waits for input.
fn read_input() -> Vec<u8> {
    let mut input = Vec::new();
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let _ = stdin.lock().read_to_end(&mut input);
    }
    input
}

/// Runs the chained hook at `path`, if there is one, with `args` and `input` and the user's environment
/// (secrets included: it is the user's own hook, as git would have run it). Its failure is the hook's.
fn run_chained(
    path: &Path,
    name: HookName,
    args: &[String],
    input: &[u8],
) -> Result<(), CommandError> {
    let Ok(md) = std::fs::metadata(path) else {
        return Ok(());
    };
    if md.permissions().mode() & 0o111 == 0 {
        // git does not run a hook that is not executable, and neither does the chain.
        eprintln!(
            "hint: {} is not executable, so git would not run it either: skipped",
            path.display()
        );
        return Ok(());
    }
    let mut cmd = chained_command(path, name);
    cmd.args(args).envs(crate::safety::secrets::all());
    let stdin = if name == HookName::PrePush {
        Stdio::piped()
    } else {
        Stdio::inherit()
    };
    let mut child = cmd.stdin(stdin).spawn().map_err(|e| {
        CommandError::user(format!(
            "cannot run the chained hook {}: {e}",
            path.display()
        ))
    })?;
    if let Some(mut pipe) = child.stdin.take() {
        // A hook that does not read its input closes the pipe early: that is not an error.
        let _ = pipe.write_all(input);
    }
    let status = child
        .wait()
        .map_err(|e| CommandError::internal(format!("cannot wait for {}: {e}", path.display())))?;
    if status.success() {
        return Ok(());
    }
    // git says nothing more than the hook did; the exit code is the answer.
    Err(CommandError::shown(ErrorKind::User))
}

/// How the chained hook at `path` is started so that it sees itself as `<dir>/<name>`, the path git would
/// have started it by. Hook stubs find their runner and the user's script through `$0`: husky's
/// `.husky/_/pre-commit` sources `$(dirname "$0")/h`, which runs `.husky/$(basename "$0")`; started as
/// `pre-commit.git-agent-chained` it would find no script and pass silently. So a plain `sh` script is
/// sourced by `sh -c` with `$0` set to the hook's own name; anything else (bash, Python, a binary, a
/// shebang with options) is executed as it is.
fn chained_command(path: &Path, name: HookName) -> std::process::Command {
    let first_line = std::fs::read(path)
        .ok()
        .and_then(|bytes| {
            let line = bytes.split(|b| *b == b'\n').next()?.to_vec();
            String::from_utf8(line).ok()
        })
        .unwrap_or_default();
    let plain_sh = matches!(
        first_line.trim_end(),
        "#!/bin/sh" | "#!/usr/bin/env sh" | "#!/bin/dash" | "#!/usr/bin/sh"
    );
    let original = path.with_file_name(name.as_str());
    if plain_sh {
        let mut cmd = std::process::Command::new("sh");
        // `$0` is `<dir>/<name>`; the chained file is that name with the suffix.
        cmd.arg("-c")
            .arg(format!(". \"$0{CHAINED}\""))
            .arg(original);
        cmd
    } else {
        std::process::Command::new(path)
    }
}

/// git-agent's part of a hook: the check, its mode and the budget of a fix.
struct Hook {
    check: Check,
    mode: HookMode,
    /// `--max-steps` and `--max-time` of a fix.
    budget: (u32, Duration),
}

impl Hook {
    /// The check on the staged tree; on failure a fix in fix mode, and the commit refused either way.
    async fn pre_commit(
        &self,
        ctx: &mut Context,
        control: &TurnControl,
    ) -> Result<(), CommandError> {
        let judged = fix::judge(ctx, &self.check, &Target::Staged, control).await?;
        if judged.run.passed {
            return Ok(());
        }
        if judged.run.interrupted {
            return Err(CommandError::shown(ErrorKind::Interrupted));
        }
        let accept = |id: &str| format!("git agent accept {id} --index   (then git commit again)");
        self.failed(ctx, &judged, &Target::Staged, &accept, control)
            .await?;
        eprintln!("git-agent: the commit was not made");
        Err(CommandError::shown(ErrorKind::User))
    }

    /// The check on every pushed tip (deletions skipped); the push refused if any fails, a fix for each in
    /// fix mode.
    async fn pre_push(
        &self,
        ctx: &mut Context,
        input: &[u8],
        control: &TurnControl,
    ) -> Result<(), CommandError> {
        let mut tips: Vec<(String, String)> = Vec::new();
        for line in String::from_utf8_lossy(input).lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [local_ref, local_oid, _remote_ref, _remote_oid] = fields[..] else {
                continue;
            };
            let deletion = local_oid.bytes().all(|b| b == b'0');
            if !deletion && !tips.iter().any(|(_, oid)| oid == local_oid) {
                tips.push((local_ref.to_owned(), local_oid.to_owned()));
            }
        }
        let mut failed = 0;
        for (local_ref, oid) in &tips {
            let target = Target::Commit(oid.clone());
            let judged = fix::judge(ctx, &self.check, &target, control).await?;
            if judged.run.interrupted {
                return Err(CommandError::shown(ErrorKind::Interrupted));
            }
            if judged.run.passed {
                continue;
            }
            failed += 1;
            let branch = local_ref.trim_start_matches("refs/heads/");
            let accept = |id: &str| {
                format!("git agent accept {id} --commit   (on {branch}; then push again)")
            };
            self.failed(ctx, &judged, &target, &accept, control).await?;
        }
        if failed == 0 {
            return Ok(());
        }
        eprintln!(
            "git-agent: the push was refused: `{}` fails on {failed} of the {} commit{} being pushed",
            self.check.command,
            tips.len(),
            super::accept::plural(tips.len())
        );
        Err(CommandError::shown(ErrorKind::User))
    }

    /// A failed check: reported, and in fix mode fixed on a branch with the hook's budget; `accept` gives
    /// the command that takes the fix of a session.
    async fn failed(
        &self,
        ctx: &mut Context,
        judged: &Judged,
        target: &Target,
        accept: &dyn Fn(&str) -> String,
        control: &TurnControl,
    ) -> Result<(), CommandError> {
        let retry = match target {
            Target::Staged => "git agent fix --staged".to_owned(),
            Target::Commit(oid) => format!("git agent fix --commit {}", &oid[..oid.len().min(12)]),
            Target::WorkTree => "git agent fix".to_owned(),
        };
        if self.mode == HookMode::Check {
            eprintln!(
                "git-agent: `{}` fails on {} ({})",
                self.check.command, judged.tree, judged.run.end
            );
            eprintln!("hint: let the agent fix it: {retry}");
            eprintln!("hint: skip the hook once: GIT_AGENT_SKIP=1, or --no-verify");
            return Ok(());
        }
        let (max_steps, max_time) = self.budget;
        eprintln!(
            "git-agent: `{}` fails on {}: fixing it on a branch (at most {max_steps} steps, {})",
            self.check.command,
            judged.tree,
            duration_words(max_time)
        );
        let mut flags = SessionFlags::defaults()?;
        flags.max_steps = max_steps;
        flags.max_time = Some(max_time);
        // A hook never asks: risky commands the rules do not allow are refused.
        flags.yes = true;
        let end = fix::repair(ctx, judged, &self.check, 3, &flags, control)
            .await
            .map_err(|err| {
                // The agent could not start (no model configured, say): the ways past the hook still hold.
                err.hint(format!("let the agent fix it once that is fixed: {retry}"))
                    .hint("only check, never fix: git agent hook install --mode check")
                    .hint("skip the hook once: GIT_AGENT_SKIP=1, or --no-verify")
            })?;
        fix::report(ctx, &self.check, &end, &accept(&end.id), true)?;
        if end.exit_code == crate::agent::EXIT_INTERRUPTED {
            return Err(CommandError::shown(ErrorKind::Interrupted));
        }
        Ok(())
    }
}
