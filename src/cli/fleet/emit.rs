//! `git agent fleet emit`: a ready file for an engine a team already runs, each of its N workers running
//! `git agent fleet work` on its node. We write no scheduler: machines, retries of crashed nodes and quotas
//! stay the engine's; the queue in the remote's refs is what they share.
//!
//! Every value that lands in a file is either checked to a safe alphabet (fleet, remote, model, variable
//! names) or written as a quoted string of the file's own syntax (JSON strings are YAML strings; shell words
//! are single-quoted).

use clap::{Args, ValueEnum};

use crate::cli::error::CommandError;
use crate::store::fleet::record::{check_id, check_model, shown};

/// GitHub refuses a matrix of more jobs than this.
const GITHUB_MAX_MATRIX: u64 = 256;
/// GitHub-hosted runners stop a job after six hours.
const GITHUB_MAX_MINUTES: u64 = 360;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Engine {
    /// A GitHub Actions workflow with a matrix of N jobs
    GithubActions,
    /// A Kubernetes Indexed Job with parallelism N
    Kubernetes,
    /// A Slurm batch script for `sbatch --array=0-(N-1)`
    Slurm,
}

/// Print a ready file for an engine (GitHub Actions, Kubernetes, Slurm) running N fleet workers
#[derive(Debug, Args)]
pub struct EmitArgs {
    /// The engine
    #[arg(value_enum, value_name = "ENGINE")]
    engine: Engine,

    /// How many workers (matrix jobs, pods, array tasks); GitHub allows at most 256 per matrix
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    workers: u64,

    /// The fleet the workers serve
    #[arg(long, value_name = "FLEET")]
    fleet: String,

    /// The remote holding the queue, as the worker's clone names it
    #[arg(long, value_name = "REMOTE", default_value = "origin")]
    remote: String,

    /// Workers per node (`fleet work --jobs`)
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=256))]
    jobs: u64,

    /// The model, as <provider>/<model> (default: the workers' configuration)
    #[arg(long, value_name = "PROVIDER/MODEL")]
    model: Option<String>,

    /// The variable that holds the model's key, taken from the engine's secrets
    #[arg(long, value_name = "NAME", default_value = "OPENAI_API_KEY")]
    key_env: String,

    /// How a node installs git-agent
    #[arg(
        long,
        value_name = "CMD",
        default_value = "cargo install --locked git-agent"
    )]
    install: String,

    /// The lease of each claim (`fleet work --lease`)
    #[arg(long, value_name = "DURATION", default_value = "10m")]
    lease: String,

    /// Each worker's time limit in minutes (GitHub-hosted jobs stop at 360)
    #[arg(long, value_name = "MINUTES", default_value_t = 360, value_parser = clap::value_parser!(u64).range(1..))]
    time_limit: u64,

    /// Kubernetes: the container image (it needs git and git-agent, or what --install needs)
    #[arg(long, value_name = "IMAGE", default_value = "rust:1-bookworm")]
    image: String,

    /// Kubernetes: the repository URL each pod clones (default: the remote's URL here)
    #[arg(long, value_name = "URL")]
    repo_url: Option<String>,
}

pub fn run(args: EmitArgs) -> Result<(), CommandError> {
    check(&args)?;
    let text = match args.engine {
        Engine::GithubActions => github(&args)?,
        Engine::Kubernetes => kubernetes(&args)?,
        Engine::Slurm => slurm(&args),
    };
    print!("{text}");
    Ok(())
}

fn check(args: &EmitArgs) -> Result<(), CommandError> {
    check_id("fleet id", &args.fleet)?;
    let safe_remote = !args.remote.is_empty()
        && !args.remote.starts_with('-')
        && args
            .remote
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/:@+-".contains(c));
    if !safe_remote {
        return Err(CommandError::user(format!(
            "invalid remote {}: use a remote's name or a plain URL",
            shown(&args.remote)
        )));
    }
    if let Some(model) = &args.model {
        check_model(model)?;
    }
    let key_ok = args
        .key_env
        .starts_with(|c: char| c.is_ascii_uppercase() || c == '_')
        && args
            .key_env
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    if !key_ok {
        return Err(CommandError::user(format!(
            "invalid variable name {}: use A-Z, 0-9 and _",
            shown(&args.key_env)
        )));
    }
    super::common::parse_duration(&args.lease).map_err(CommandError::user)?;
    Ok(())
}

/// The worker's command line, one shell string; `worker` is a shell expression naming the worker.
fn work_command(args: &EmitArgs, worker: &str) -> String {
    // The model goes through GIT_AGENT_MODEL in each file's environment.
    format!(
        "git agent fleet work {} --fleet {} --jobs {} --lease {} --worker \"{worker}\"",
        args.remote, args.fleet, args.jobs, args.lease
    )
}

/// A JSON string: a valid double-quoted YAML scalar.
fn yaml_str(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

/// A single-quoted shell word.
fn sh_word(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

fn github(args: &EmitArgs) -> Result<String, CommandError> {
    if args.workers > GITHUB_MAX_MATRIX {
        return Err(CommandError::user(format!(
            "GitHub allows at most {GITHUB_MAX_MATRIX} jobs per matrix, not {}",
            args.workers
        ))
        .hint("use fewer workers with more --jobs each, or several workflows"));
    }
    let minutes = args.time_limit.min(GITHUB_MAX_MINUTES);
    let workers: Vec<String> = (1..=args.workers).map(|n| n.to_string()).collect();
    let model_env = args
        .model
        .as_ref()
        .map(|m| format!("      GIT_AGENT_MODEL: {}\n", yaml_str(m)))
        .unwrap_or_default();
    let work = work_command(args, "gha-${{ github.run_id }}-${{ matrix.worker }}");
    Ok(format!(
        "# git-agent fleet {fleet}: {n} workers, each running `git agent fleet work` until no task is left.\n\
         # Limits: at most 256 jobs per matrix; a GitHub-hosted job stops after 360 minutes (timeout-minutes).\n\
         # Secrets: {key} (the model's key). The workers push sessions, notes and results: contents: write.\n\
         name: git-agent fleet {fleet}\n\
         on:\n  workflow_dispatch:\n\
         permissions:\n  contents: write\n\
         concurrency:\n  group: git-agent-fleet-{fleet}\n  cancel-in-progress: false\n\
         jobs:\n  work:\n    runs-on: ubuntu-latest\n    timeout-minutes: {minutes}\n\
         \x20   strategy:\n      fail-fast: false\n      max-parallel: {n}\n      matrix:\n        worker: [{list}]\n\
         \x20   env:\n      {key}: ${{{{ secrets.{key} }}}}\n{model_env}\
         \x20   steps:\n\
         \x20     - uses: actions/checkout@v4\n        with:\n          fetch-depth: 0\n\
         \x20     - name: Install git-agent\n        run: {install}\n\
         \x20     - name: Identify the worker's commits\n        run: |\n          git config user.name \"git-agent fleet\"\n          git config user.email \"git-agent-fleet@users.noreply.github.com\"\n\
         \x20     - name: Work\n        run: {work}\n",
        fleet = args.fleet,
        n = args.workers,
        key = args.key_env,
        list = workers.join(", "),
        install = yaml_str(&args.install),
        work = yaml_str(&work),
    ))
}

/// A DNS-1123 label from the fleet id (Kubernetes names: lowercase letters, digits, '-').
fn dns_label(fleet: &str) -> String {
    let mut label: String = fleet
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    label.truncate(40);
    let label = label.trim_matches('-');
    format!(
        "git-agent-fleet-{}",
        if label.is_empty() { "x" } else { label }
    )
}

fn kubernetes(args: &EmitArgs) -> Result<String, CommandError> {
    let repo_url = args
        .repo_url
        .clone()
        .unwrap_or_else(|| "https://example.com/your/repo.git".into());
    let work = work_command(args, "k8s-${JOB_NAME}-${JOB_COMPLETION_INDEX}");
    let script = format!(
        "set -eu\n\
         git config --global credential.helper 'store --file=/var/run/git-agent/git/credentials'\n\
         git config --global user.name 'git-agent fleet'\n\
         git config --global user.email 'git-agent-fleet@localhost'\n\
         command -v git-agent >/dev/null || {install}\n\
         git clone --quiet {url} /work/repo\n\
         cd /work/repo\n\
         exec {work}\n",
        install = args.install,
        url = sh_word(&repo_url),
    );
    let model_env = args
        .model
        .as_ref()
        .map(|m| {
            format!(
                "            - name: GIT_AGENT_MODEL\n              value: {}\n",
                yaml_str(m)
            )
        })
        .unwrap_or_default();
    let name = dns_label(&args.fleet);
    Ok(format!(
        "# git-agent fleet {fleet}: an Indexed Job of {n} pods, each running `git agent fleet work`.\n\
         # Secrets: git-agent-keys (key {key}: the model's key) and git-agent-git (key credentials: a\n\
         # git-credential-store line with push rights). Requests are sized from scripts/bench-fleet.sh: a worker\n\
         # and its session stay well under 512 MiB; raise them with --jobs.\n\
         apiVersion: batch/v1\n\
         kind: Job\n\
         metadata:\n  name: {name}\n  labels:\n    app.kubernetes.io/name: git-agent-fleet\n\
         spec:\n  completionMode: Indexed\n  completions: {n}\n  parallelism: {n}\n  backoffLimit: {backoff}\n\
         \x20 activeDeadlineSeconds: {deadline}\n  ttlSecondsAfterFinished: 86400\n\
         \x20 template:\n    metadata:\n      labels:\n        app.kubernetes.io/name: git-agent-fleet\n\
         \x20   spec:\n      restartPolicy: Never\n      containers:\n        - name: worker\n          image: {image}\n\
         \x20         command: [\"/bin/sh\", \"-c\"]\n          args:\n            - {script}\n\
         \x20         env:\n            - name: JOB_NAME\n              value: {name}\n\
         \x20           - name: {key}\n              valueFrom:\n                secretKeyRef:\n                  name: git-agent-keys\n                  key: {key}\n{model_env}\
         \x20         resources:\n            requests:\n              cpu: {cpu}m\n              memory: {mem}Mi\n            limits:\n              memory: {limit}Mi\n\
         \x20         volumeMounts:\n            - name: git-credentials\n              mountPath: /var/run/git-agent/git\n              readOnly: true\n\
         \x20     volumes:\n        - name: git-credentials\n          secret:\n            secretName: git-agent-git\n",
        fleet = args.fleet,
        n = args.workers,
        key = args.key_env,
        backoff = args.workers.saturating_mul(2),
        deadline = args.time_limit * 60,
        image = yaml_str(&args.image),
        script = yaml_str(&script),
        cpu = 250 * args.jobs,
        mem = 256 * args.jobs,
        limit = 1024 * args.jobs,
    ))
}

fn slurm(args: &EmitArgs) -> String {
    let hours = args.time_limit / 60;
    let minutes = args.time_limit % 60;
    let work = work_command(args, "slurm-${SLURM_ARRAY_JOB_ID}-${SLURM_ARRAY_TASK_ID}");
    let model = args
        .model
        .as_ref()
        .map(|m| format!("export GIT_AGENT_MODEL={}\n", sh_word(m)))
        .unwrap_or_default();
    format!(
        "#!/bin/sh\n\
         # git-agent fleet {fleet}: {n} array tasks, each running `git agent fleet work` in a clone of the repository.\n\
         # Submit from the clone: sbatch this-file (the array is in the header; logs go to the node's /tmp, not the clone). {key} must be in the environment\n\
         # sbatch passes on (--export=ALL, the default). Limits: the cluster's MaxArraySize and the partition's\n\
         # time limit (--time below).\n\
         #SBATCH --job-name=git-agent-fleet-{fleet}\n\
         #SBATCH --array=0-{last}\n\
         #SBATCH --time={hours:02}:{minutes:02}:00\n\
         #SBATCH --ntasks=1\n\
         #SBATCH --cpus-per-task={jobs}\n\
         #SBATCH --mem={mem}M\n\
         #SBATCH --output=/tmp/%x-%A_%a.out\n\
         set -eu\n\
         cd \"${{GIT_AGENT_FLEET_REPO:-$SLURM_SUBMIT_DIR}}\"\n\
         {model}exec {work}\n",
        fleet = args.fleet,
        n = args.workers,
        key = args.key_env,
        last = args.workers - 1,
        jobs = args.jobs,
        mem = 1024 * args.jobs,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_and_labels_are_safe() {
        assert_eq!(sh_word("a'b"), "'a'\\''b'");
        assert_eq!(dns_label("My_Fleet.1"), "git-agent-fleet-my-fleet-1");
        assert_eq!(yaml_str("a\"b\n"), "\"a\\\"b\\n\"");
    }
}
