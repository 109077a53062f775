//! `git agent config`: show, change and locate the settings files (DESIGN section 3).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::context::Context;
use super::error::{CommandError, ErrorKind};
use crate::config::{self, edit, file, file::Scope};

/// Get, set or edit settings, or print where the settings files are
///
/// Settings live in the user's config file ($GIT_AGENT_CONFIG, else ~/.config/git-agent/config.toml) and in
/// an optional .git-agent.toml at the top of the repository (repository settings only: never keys,
/// endpoints or headers). The repository file wins over the user's.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    command: ConfigCommand,
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print a setting's value (the repository file first, then the user's)
    Get {
        /// The setting, e.g. model or providers.local.base_url
        key: String,
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Change a setting, keeping the file's comments and order
    Set {
        /// The setting, e.g. model, idle_timeout, providers.local.base_url
        key: String,
        /// The value; numbers for timeouts and counts, text otherwise
        value: String,
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Open the settings file in $VISUAL or $EDITOR, then check it
    Edit {
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Print the path of the settings file
    Path {
        #[command(flatten)]
        scope: ScopeArgs,
    },
}

#[derive(Debug, Args)]
struct ScopeArgs {
    /// Use the user's config file (the default for set, edit and path)
    #[arg(long, conflicts_with = "repo")]
    user: bool,
    /// Use the repository's .git-agent.toml
    #[arg(long)]
    repo: bool,
}

/// Runs `config`.
pub fn run(ctx: &Context, args: ConfigArgs) -> Result<(), CommandError> {
    match args.command {
        ConfigCommand::Get { key, scope } => get(ctx, &key, &scope),
        ConfigCommand::Set { key, value, scope } => set(ctx, &key, &value, &scope),
        ConfigCommand::Edit { scope } => edit_file(ctx, &scope),
        ConfigCommand::Path { scope } => target(ctx, &scope).map(|(path, _)| {
            println!("{}", path.display());
        }),
    }
}

/// The file a command writes to: the user's unless `--repo`.
fn target(ctx: &Context, scope: &ScopeArgs) -> Result<(PathBuf, Scope), CommandError> {
    if scope.repo {
        let path = config::repo_config_path(ctx.cwd()).ok_or_else(|| {
            CommandError::user("not in a git repository, so there is no .git-agent.toml")
        })?;
        return Ok((path, Scope::Repo));
    }
    let path = config::user_config_path(&|name: &str| ctx.env(name)).ok_or_else(|| {
        CommandError::config("cannot find the user's config directory")
            .hint("set GIT_AGENT_CONFIG to a file path")
    })?;
    Ok((path, Scope::User))
}

fn read(path: &Path) -> Result<String, CommandError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(err) => Err(CommandError::config(format!(
            "cannot read {}: {err}",
            path.display()
        ))),
    }
}

fn get(ctx: &Context, key: &str, scope: &ScopeArgs) -> Result<(), CommandError> {
    let mut files = Vec::new();
    if scope.user || scope.repo {
        files.push(target(ctx, scope)?.0);
    } else {
        files.extend(config::repo_config_path(ctx.cwd()));
        files.extend(config::user_config_path(&|name: &str| ctx.env(name)));
    }
    for path in files {
        if let Some(value) = edit::get(&read(&path)?, key)? {
            println!("{value}");
            return Ok(());
        }
    }
    // Like `git config --get`: an unset key is exit 1 with no output.
    Err(CommandError::shown(ErrorKind::Config))
}

fn set(ctx: &Context, key: &str, value: &str, scope: &ScopeArgs) -> Result<(), CommandError> {
    let (path, scope) = target(ctx, scope)?;
    let text = read(&path)?;
    let updated = edit::set(&text, key, value)?;
    // The new file must pass the same checks as on load, or nothing is written.
    let parsed = file::parse(&path, &updated, scope)?;
    write_atomically(&path, &updated)?;
    // The user typed this check themselves: it is theirs, so it needs no separate `git agent trust`.
    if let (Scope::Repo, "check", Some(command)) = (scope, key, parsed.check.as_deref()) {
        let ledger = crate::config::trust::Ledger::for_repo(ctx.store()?.common_dir());
        ledger
            .trust(&[crate::config::trust::Item::check(command)])
            .map_err(|e| CommandError::internal(e.to_string()))?;
    }
    Ok(())
}

fn write_atomically(path: &Path, text: &str) -> Result<(), CommandError> {
    let fail = |err: std::io::Error| {
        CommandError::internal(format!("cannot write {}: {err}", path.display()))
    };
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, text).map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(fail)
}

fn edit_file(ctx: &Context, scope: &ScopeArgs) -> Result<(), CommandError> {
    let (path, scope) = target(ctx, scope)?;
    if !path.exists() {
        write_atomically(&path, "")?;
    }
    open_in_editor(ctx, &path)?;
    file::load(&path, scope).map_err(|err| {
        CommandError::from(err)
            .hint("the file was saved as is; run 'git agent config edit' again to fix it")
    })?;
    Ok(())
}

/// Opens `path` in `$GIT_AGENT_EDITOR`, `$VISUAL` or `$EDITOR` (else vi) and waits for it (also `memory edit`).
pub(super) fn open_in_editor(ctx: &Context, path: &Path) -> Result<(), CommandError> {
    let editor = ["GIT_AGENT_EDITOR", "VISUAL", "EDITOR"]
        .iter()
        .find_map(|name| ctx.env(name).filter(|e| !e.trim().is_empty()))
        .unwrap_or_else(|| "vi".to_string());
    // Through the shell, as git does, so `EDITOR="code --wait"` works.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$@\""))
        .arg(&editor)
        .arg(path)
        .status()
        .map_err(|err| CommandError::user(format!("cannot run the editor '{editor}': {err}")))?;
    if !status.success() {
        return Err(CommandError::user(format!(
            "the editor '{editor}' failed ({status})"
        )));
    }
    Ok(())
}
