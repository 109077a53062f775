//! `git agent fleet`: tasks queued in a remote's refs (`refs/agent/fleet/<fleet>/...`), claimed by atomic ref
//! updates and run as ordinary sessions by workers on any engine (a CI matrix, a Kubernetes Job, a Slurm
//! array). The queue's format is [`crate::store::fleet`]; one file here per subcommand.

mod common;
mod emit;
mod manage;
mod status;
mod submit;
mod work;

use clap::{Args, Subcommand};

use super::context::Context;
use super::error::CommandError;

/// Run many tasks through one git remote: submit, work, status, results, pr, emit, cancel, gc
///
/// The queue lives in the remote's refs under refs/agent/fleet/<fleet>/: one ref per task, claim and result,
/// readable with plain git. Workers claim a task by creating its claim ref with a push that fails if it exists.
#[derive(Debug, Args)]
pub struct FleetArgs {
    #[command(subcommand)]
    command: FleetCommand,
}

#[derive(Debug, Subcommand)]
enum FleetCommand {
    Submit(submit::SubmitArgs),
    Work(work::WorkArgs),
    Status(status::StatusArgs),
    Results(status::ResultsArgs),
    Pr(manage::PrArgs),
    Emit(emit::EmitArgs),
    Cancel(manage::CancelArgs),
    Gc(manage::GcArgs),
}

pub fn run(ctx: &Context, args: FleetArgs) -> Result<(), CommandError> {
    match args.command {
        FleetCommand::Submit(args) => submit::run(ctx, args),
        FleetCommand::Work(args) => work::run(ctx, args),
        FleetCommand::Status(args) => status::run(ctx, args),
        FleetCommand::Results(args) => status::results(ctx, args),
        FleetCommand::Pr(args) => manage::pr(ctx, args),
        FleetCommand::Emit(args) => emit::run(args),
        FleetCommand::Cancel(args) => manage::cancel(ctx, args),
        FleetCommand::Gc(args) => manage::gc(ctx, args),
    }
}
