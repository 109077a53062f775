//! The command line: one file per subcommand, one dispatch `match`, and the one place where errors become
//! exit codes and `error:` lines.

mod accept;
mod ask;
mod config;
mod diff;
mod discard;
mod log;
mod mcp;
mod pull;
mod push;
mod show;
mod undo;

use clap::{Parser, Subcommand};

/// A git-native coding agent: `git agent ask "goal"` works on a scratch branch, one commit per step
#[derive(Debug, Parser)]
#[command(
    name = "git-agent",
    bin_name = "git agent",
    version,
    propagate_version = true
)]
#[command(after_help = "See 'git help agent' (man git-agent) for the full manual.")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Ask(ask::AskArgs),
    Config(config::ConfigArgs),
    Log(log::LogArgs),
    Show(show::ShowArgs),
    Diff(diff::DiffArgs),
    Undo(undo::UndoArgs),
    Accept(accept::AcceptArgs),
    Discard(discard::DiscardArgs),
    Mcp(mcp::McpArgs),
    Push(push::PushArgs),
    Pull(pull::PullArgs),
}

/// Parses the command line, runs the subcommand and returns the process exit code.
pub fn run() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            // clap uses 0 for --help/--version and 2 for usage errors, as DESIGN section 2 wants.
            return err.exit_code();
        }
    };
    match cli.command {
        Command::Ask(args) => ask::run(args),
        Command::Config(args) => config::run(args),
        Command::Log(args) => report(log::run(args)),
        Command::Show(args) => report(show::run(args)),
        Command::Diff(args) => report(diff::run(args)),
        Command::Undo(args) => report(undo::run(args)),
        Command::Accept(args) => report(accept::run(args)),
        Command::Discard(args) => report(discard::run(args)),
        Command::Mcp(args) => report(mcp::run(args)),
        Command::Push(args) => report(push::run(args)),
        Command::Pull(args) => report(pull::run(args)),
    }
}

/// The exit code of a command that returns one or a message for the user.
fn report(result: Result<i32, String>) -> i32 {
    result.unwrap_or_else(|message| {
        print_error(&message);
        1
    })
}

/// The repository of the current directory.
pub(crate) fn open_store() -> Result<crate::store::Store, String> {
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    crate::store::Store::open(&cwd).map_err(|e| e.to_string())
}

/// Where the session's branch points now, or why there is nothing to look at (`discard` removed it).
pub(crate) fn session_tip(
    store: &crate::store::Store,
    meta: &crate::store::Meta,
) -> Result<crate::store::ObjectId, String> {
    store
        .branch_tip(&meta.branch)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!(
                "session {} was discarded: its branch {} is gone",
                meta.id, meta.branch
            )
        })
}

/// Unix seconds as `YYYY-MM-DD HH:MM` (UTC).
pub(crate) fn when(secs: i64) -> String {
    let (y, m, d) = crate::agent::civil_from_days(secs.div_euclid(86_400));
    let rest = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60
    )
}

/// A git command run in `dir` with the user's stdout and stderr (so pagers, colour and hooks behave as in git).
pub(crate) fn git_inherit(dir: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new("git");
    cmd.current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE");
    cmd
}

/// Prints an error as git does: one `error:` line first, then optional detail and hints.
pub(crate) fn print_error(message: &str) {
    let mut lines = message.lines();
    if let Some(first) = lines.next() {
        eprintln!("error: {first}");
    }
    for line in lines {
        eprintln!("{line}");
    }
}

/// Returns a runtime for the async parts (HTTP streaming). One thread: the agent does one thing at a time and
/// a second thread would only cost memory.
pub(crate) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
