//! The command line: one file per subcommand, one dispatch `match`, and the one place where errors become
//! exit codes and `error:` lines.

mod ask;
mod config;

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
    }
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
