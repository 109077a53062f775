//! `git agent lsp status`: the language servers sessions may start in this repository: configured where,
//! found on PATH or not, and (with `--start`) whether each starts, how fast, or its error.

use std::time::Duration;

use clap::{Args, Subcommand};

use super::context::Context;
use super::error::CommandError;
use crate::config::trust::{Item, Ledger, Standing};
use crate::config::Settings;
use crate::lsp::spec;

/// Show the language servers sessions may start
///
/// A built-in default (rust-analyzer, pyright, typescript-language-server, gopls, clangd,
/// bash-language-server) counts only when its binary is on PATH; [lsp.<name>] tables in your config add or
/// override servers; a repository's tables count once trusted (git agent trust).
#[derive(Debug, Args)]
pub struct LspArgs {
    #[command(subcommand)]
    command: LspCommand,
}

#[derive(Debug, Subcommand)]
enum LspCommand {
    /// List configured servers: where each is defined, whether it is found, enabled, and its last error
    Status(StatusArgs),
}

#[derive(Debug, Args)]
struct StatusArgs {
    /// Start each server found on the repository's work tree, report its start-up time or its error, and stop it
    #[arg(long)]
    start: bool,
}

pub fn run(ctx: &Context, args: LspArgs) -> Result<(), CommandError> {
    match args.command {
        LspCommand::Status(status) => run_status(ctx, &status),
    }
}

fn run_status(ctx: &Context, args: &StatusArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let env = |name: &str| ctx.env(name);
    let settings = Settings::load(ctx.cwd(), &env)?;
    let repo = &settings.repo.lsp;
    let trusted = !repo.servers.is_empty()
        && Ledger::for_repo(store.common_dir()).standing(&Item::lsp_servers(&repo.text))
            == Standing::Trusted;
    let specs = spec::resolve(&settings.user.lsp, repo, trusted);
    let mut out = String::new();
    for spec in &specs {
        let found = spec.found();
        let state = match (&found, spec.enabled) {
            (_, false) => "disabled".to_string(),
            (None, true) => "not found on PATH".to_string(),
            (Some(path), true) => format!("found at {}", path.display()),
        };
        let command = std::iter::once(spec.command.as_str())
            .chain(spec.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        out.push_str(&format!(
            "{}: {command} ({}) — {state}; files: {}\n",
            spec.name,
            spec.origin,
            spec.extensions.join(" ")
        ));
        if args.start && spec.enabled && found.is_some() {
            out.push_str(&format!("  {}\n", try_start(spec, store.workdir())));
        }
    }
    if !repo.servers.is_empty() && !trusted {
        out.push_str(
            "the language servers in .git-agent.toml are not trusted and do not start: git agent trust\n",
        );
    }
    print!("{}", crate::protocol::Untrusted::text(&out));
    Ok(())
}

/// Starts `spec` on `root` and stops it again: `started in 0.4 s` or what went wrong.
fn try_start(spec: &spec::ServerSpec, root: &std::path::Path) -> String {
    let sandbox = crate::safety::sandbox::Sandbox::off();
    match crate::lsp::client::Server::start(spec, root, &sandbox, Duration::from_secs(30)) {
        Ok(server) => {
            let took = server.startup;
            server.shutdown();
            format!("running: started in {:.1} s", took.as_secs_f64())
        }
        Err(err) => format!("last error: {err}"),
    }
}
