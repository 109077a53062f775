//! `git agent trust`: show everything this repository asks git-agent to run and record the user's trust in
//! it; and [`require()`], the gate every command that would run a repository's item goes through (the model
//! is [`crate::config::trust`]).
//!
//! The text shown is exactly what would run, every control character made visible, so a command that hides
//! part of itself from the terminal (`\r`, escape sequences, bidirectional overrides) cannot be trusted
//! unread. Running `git agent trust` is the consent: it needs no terminal, so scripts and CI can trust a
//! repository they vetted. Without a terminal, an untrusted item is refused with a hint; on one, the user
//! is asked once, y/N.

use std::io::{BufRead, IsTerminal, Write};

use clap::Args;

use super::context::Context;
use super::error::CommandError;
use crate::config::trust::{self, Item, Kind, Ledger, Standing};
use crate::config::Settings;
use crate::safety::quote::visible;

/// Show what this repository asks git-agent to run, and trust it
///
/// A repository can ask git-agent to run things: a `check` in .git-agent.toml (run by `fix` and the git
/// hooks), the MCP servers of .mcp.json (started by sessions) and the event hooks of .claude/settings.json,
/// .claude/settings.local.json and .codex/hooks.json (run by sessions around tool calls), and the file-system
/// monitor hook core.fsmonitor names in .git/config (run by step 0). None of it runs until you trust its exact
/// content in this repository; a change (a pull, a branch switch) needs trust again. Without --list this
/// prints each item, with control characters made visible, and records your trust in it as it is now.
/// Trust is kept in your own state directory, never in the repository. A check you give with --check or
/// put in your own config file is yours and needs no trust.
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// Only show what the repository asks to run and whether it is trusted (or changed since); trust nothing
    #[arg(long)]
    list: bool,
}

pub fn run(ctx: &Context, args: TrustArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let env = |name: &str| ctx.env(name);
    let settings = Settings::load(ctx.cwd(), &env)?;
    let repo_lsp = &settings.repo.lsp;
    let repo_lsp = (!repo_lsp.servers.is_empty()).then_some(repo_lsp.text.as_str());
    let fsmonitor = store.repository_fsmonitor();
    let items = trust::asked(
        store.workdir(),
        settings.repo.check.as_deref(),
        repo_lsp,
        fsmonitor.as_deref(),
    );
    if items.is_empty() {
        println!("this repository asks git-agent to run nothing (no check in .git-agent.toml, no .mcp.json, no event hooks, no core.fsmonitor)");
        return Ok(());
    }
    let ledger = Ledger::for_repo(store.common_dir());
    for item in &items {
        let standing = match ledger.standing(item) {
            Standing::Trusted => "trusted",
            Standing::Changed => "changed since you trusted it",
            Standing::New => "not trusted",
        };
        println!("{} in {} [{standing}]:", item.kind.words(), item.source);
        print!("{}", shown(item));
    }
    if args.list {
        return Ok(());
    }
    ledger
        .trust(&items)
        .map_err(|e| CommandError::internal(e.to_string()))?;
    println!("trusted as shown: a change to any of it needs `git agent trust` again");
    Ok(())
}

/// The item's text as a person must read it: a command on one line, a file line by line, each with its
/// control characters made visible.
fn shown(item: &Item) -> String {
    match item.kind {
        Kind::Check | Kind::FsMonitor => format!("  {}\n", visible(&item.text)),
        Kind::McpServers | Kind::EventHooks | Kind::LspServers => item
            .text
            .split('\n')
            .map(|line| format!("  | {}\n", visible(line)))
            .collect(),
    }
}

/// Lets `item`, which the repository asks to run, go on: at once when the user trusted it; after a y on
/// the terminal when there is one; otherwise refused with the ways to go on, and nothing run.
pub(super) fn require(ctx: &Context, item: &Item) -> Result<(), CommandError> {
    let ledger = Ledger::for_repo(ctx.store()?.common_dir());
    let what = match ledger.standing(item) {
        Standing::Trusted => return Ok(()),
        Standing::Changed => "changed since you trusted it",
        Standing::New => "is not trusted yet",
    };
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if interactive && ask(item, what) {
        return ledger
            .trust(std::slice::from_ref(item))
            .map_err(|e| CommandError::internal(e.to_string()));
    }
    let mut err = CommandError::user(format!(
        "the {} in {} {what}: nothing was run",
        item.kind.as_str(),
        item.source
    ))
    .hint("read what the repository asks to run and trust it: git agent trust");
    if item.kind == Kind::Check {
        err = err.hint("or run a check of your own: git agent fix --check CMD");
    }
    Err(err)
}

/// Asks on the terminal whether to run and trust `item`; only `y` or `yes` is a yes.
fn ask(item: &Item, what: &str) -> bool {
    let mut err = std::io::stderr();
    let _ = write!(
        err,
        "{} asks to run its {}, which {what}:\n{}run it, and trust it until it changes? [y/N] ",
        item.source,
        item.kind.words(),
        shown(item)
    );
    let _ = err.flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}
