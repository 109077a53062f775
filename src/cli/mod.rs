//! The command line: one file per subcommand, one dispatch `match`, and the one place where errors become
//! exit codes and `error:` lines.

mod accept;
mod acp;
mod agents;
mod ask;
pub mod chat;
mod config;
mod context;
mod diff;
mod discard;
mod error;
mod exec;
mod fix;
mod fleet;
mod gc;
mod hook;
mod log;
mod lsp;
mod mcp;
mod memory;
mod parse;
mod pr;
mod pull;
mod push;
mod review;
mod review_tty;
mod show;
mod skill;
mod stats;
mod trust;
mod undo;

pub use context::Context;
pub use error::{CommandError, ErrorKind};
use parse::Command;

use crate::protocol::Event;

/// Answers a lone `--version` (or `-V`) and exits, before clap builds its command tree and before anything
/// else is set up: that tree is most of what a start-up touches, and `--version` is what scripts and package
/// managers probe with. The text is clap's own (`git-agent <version>`), so both paths print the same line.
/// Returns when something else was asked.
pub fn answer_version() {
    let mut args = std::env::args_os().skip(1);
    let asked =
        matches!(args.next(), Some(a) if a == "--version" || a == "-V") && args.next().is_none();
    if !asked {
        return;
    }
    // One write of a constant line and out: no formatting, no buffered stdout to set up or flush at exit.
    let line = concat!("git-agent ", env!("CARGO_PKG_VERSION"), "\n");
    let failed = "git-agent: error: cannot write the version to standard output\n";
    // _exit(2) after the write: nothing of ours is left to flush or drop (the line went out unbuffered).
    crate::sys::stdio::print_and_exit(line, failed)
}

/// Parses the command line, runs the subcommand and returns the process exit code.
pub fn run() -> i32 {
    crate::agent::footprint::mark("start");
    let cli = match parse::parse() {
        Ok(cli) => cli,
        Err(err) => {
            // clap prints its own usage message (with the usage line and colours); --help and --version
            // arrive here too and are not errors.
            let _ = err.print();
            return if err.use_stderr() {
                ErrorKind::Usage.exit_code()
            } else {
                0
            };
        }
    };
    let mut ctx = match Context::new(cli.command.json()) {
        Ok(ctx) => ctx,
        Err(err) => return fail(None, err),
    };
    let result = match cli.command {
        Command::Ask(args) => ask::run(&mut ctx, args),
        Command::Acp(args) => acp::run(&mut ctx, args),
        Command::Agents(args) => agents::run(&ctx, args),
        Command::Chat(args) => chat::run(&mut ctx, args),
        Command::Exec(args) => exec::run(&mut ctx, args),
        Command::Config(args) => config::run(&ctx, args),
        Command::Log(args) => log::run(&ctx, args),
        Command::Show(args) => show::run(&ctx, args),
        Command::Diff(args) => diff::run(&ctx, args),
        Command::Undo(args) => undo::run(&ctx, args),
        Command::Accept(args) => accept::run(&ctx, args),
        Command::Review(args) => review::run(&mut ctx, args),
        Command::Pr(args) => pr::run(&ctx, args),
        Command::Discard(args) => discard::run(&ctx, args),
        Command::Fix(args) => fix::run(&mut ctx, args),
        Command::Fleet(args) => fleet::run(&ctx, args),
        Command::Hook(args) => hook::run(&mut ctx, args),
        Command::Gc(args) => gc::run(&ctx, args),
        Command::Mcp(args) => mcp::run(&ctx, args),
        Command::Memory(args) => memory::run(&ctx, args),
        Command::Push(args) => push::run(&ctx, args),
        Command::Pull(args) => pull::run(&ctx, args),
        Command::Skill(args) => skill::run(&ctx, args),
        Command::Stats(args) => stats::run(&ctx, args),
        Command::Trust(args) => trust::run(&ctx, args),
        Command::Lsp(args) => lsp::run(&ctx, args),
    };
    match result {
        Ok(()) => 0,
        Err(err) => fail(Some(&mut ctx), err),
    }
}

/// Shows `err` and returns its exit code. The only place that prints `error:` and `hint:` lines.
///
/// With `--json` the error is also an `error` event on stdout (DESIGN section 5); when the command has a
/// terminal sink, the error goes through it so that it starts on its own line after streamed text.
fn fail(ctx: Option<&mut Context>, err: CommandError) -> i32 {
    if err.is_shown() {
        return err.exit_code();
    }
    let text = err.text();
    match ctx {
        Some(ctx) if ctx.json() => {
            ctx.sink().emit(&Event::Error {
                message: text.clone(),
            });
            print_error(&text);
        }
        Some(ctx) => match ctx.open_sink() {
            Some(sink) => sink.emit(&Event::Error { message: text }),
            None => print_error(&text),
        },
        None => print_error(&text),
    }
    err.exit_code()
}

/// Prints an error as git does: one `error:` line first, then the detail and `hint:` lines. Each line
/// through the one neutraliser: an error may quote a cloned repository's settings key or a pulled name
/// (issue 22, finding 8), as the terminal sink's `error:` line does.
fn print_error(text: &str) {
    use crate::protocol::Untrusted;
    let mut lines = text.lines();
    if let Some(first) = lines.next() {
        eprintln!("error: {}", Untrusted::text(first));
    }
    for line in lines {
        eprintln!("{}", Untrusted::text(line));
    }
}

#[cfg(test)]
mod tests {
    use super::parse::Cli;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
