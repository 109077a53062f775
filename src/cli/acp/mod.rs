//! `git agent acp`: the Agent Client Protocol (version 1) over stdio, for editors and orchestrators.
//!
//! The client starts the process and speaks newline-delimited JSON-RPC 2.0 on its stdin and stdout; stdout
//! carries nothing else ([`stdio`] makes sure of it), logs go to stderr. Each ACP session is a git-agent
//! session as `ask` makes one (branch `agent/<id>`, its own checkout, one commit per step, the log in
//! `refs/agent/sessions/<id>`), held open by [`server`] for any number of prompts.
//!
//! - [`server`]: the dispatcher (one reader, one writer, a task per turn) and the methods;
//! - [`prompt`]: a prompt's content blocks as the turn's text;
//! - [`commands`]: chat's slash commands, the ones that work over ACP;
//! - [`stdio`]: the protocol's private copies of fds 0 and 1.

mod commands;
mod prompt;
mod server;
mod stdio;

use std::time::Duration;

use clap::Args;

use super::context::Context;
use super::error::CommandError;
use server::Defaults;

/// Serve the Agent Client Protocol (v1) on stdin and stdout, for editors
///
/// An editor (Zed, JetBrains, Neovim plugins) or an orchestrator (acpx) starts `git agent acp` and talks to it
/// over stdin and stdout. Every session works as `git agent ask` does: on its own branch agent/<id> in its own
/// checkout, one commit per step; your working tree, index and branches are not touched. Risky commands are
/// put to the editor as permission requests. Logs go to stderr.
#[derive(Debug, Args)]
pub struct AcpArgs {
    /// Model as <provider>/<model> for every session (default: GIT_AGENT_MODEL, then the config files)
    #[arg(long, short = 'm', value_name = "PROVIDER/MODEL")]
    model: Option<String>,

    /// End a turn with stopReason max_turn_requests after this many model requests
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    max_steps: u32,

    /// End a turn with stopReason max_tokens once its model requests used this many tokens
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_tokens: Option<u64>,

    /// Default timeout of shell commands the agent runs, in seconds
    #[arg(long, value_name = "SECS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    run_timeout: u64,

    #[command(flatten)]
    safety: super::ask::SafetyFlags,

    /// Do not offer session/resume: clients then reattach with session/load, which replays the conversation
    #[arg(long)]
    no_resume: bool,
}

/// Runs the server until the client closes stdin. Bad options fail before the protocol starts, as any
/// command's do.
pub fn run(_ctx: &mut Context, args: AcpArgs) -> Result<(), CommandError> {
    // Checked now, so bad rules fail before the protocol starts; each session builds its own.
    args.safety.options()?;
    let defaults = Defaults {
        model: args.model,
        max_steps: args.max_steps,
        max_tokens: args.max_tokens,
        run_timeout: Duration::from_secs(args.run_timeout),
        sandbox: args.safety.sandbox()?,
        allow: args.safety.allow,
        deny: args.safety.deny,
        resume: !args.no_resume,
    };
    let runtime = super::context::runtime()
        .map_err(|e| CommandError::internal(format!("cannot start the async runtime: {e}")))?;
    let (input, output) = stdio::take()
        .map_err(|e| CommandError::internal(format!("cannot take over stdin and stdout: {e}")))?;
    let local = tokio::task::LocalSet::new();
    runtime.block_on(local.run_until(server::serve(input, output, defaults)));
    Ok(())
}
