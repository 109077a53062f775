//! `git agent ask`: run one task to completion, non-interactively.

use std::io::Read;
use std::time::Duration;

use clap::Args;

use super::context::{runtime, Context};
use super::error::{CommandError, ErrorKind};
use crate::agent::{self, Resume, SessionOptions};
use crate::config;
use crate::safety::rules::Rules;
use crate::safety::sandbox::{Mode, SandboxConfig};
use crate::ui;

/// Run one task to completion and print the answer
///
/// The agent works in its own checkout on the branch agent/<id>; every step that changes files is one commit
/// there. Your working tree, index and branches are not touched. With --here it works in your working tree
/// instead (files there change), still committing each step to agent/<id>; your HEAD, index and branches stay.
#[derive(Debug, Args)]
pub struct AskArgs {
    /// The goal, in plain words ('-' reads it from stdin)
    #[arg(required = true, value_name = "PROMPT")]
    prompt: Vec<String>,

    /// Give the model an image (PNG, JPEG, GIF or WebP; at most max_image_size, 5 MiB by default) after the
    /// prompt; repeatable
    #[arg(long, value_name = "PATH")]
    image: Vec<std::path::PathBuf>,

    /// Print Claude Code's print-mode output on stdout: stream-json (one message a line), or json (the
    /// final result alone); text is the default
    #[arg(long, value_name = "FORMAT", default_value = "text", conflicts_with = "json",
          value_parser = ["text", "json", "stream-json"])]
    output_format: String,

    #[command(flatten)]
    pub(super) session: SessionFlags,
}

/// The options of a session, shared by `ask` and `chat`.
#[derive(Debug, Clone, Args)]
pub(super) struct SessionFlags {
    /// Model as <provider>/<model> (e.g. openai/gpt-4.1, ollama/qwen3:8b) [env: GIT_AGENT_MODEL]
    #[arg(long, short = 'm', value_name = "PROVIDER/MODEL")]
    pub(super) model: Option<String>,

    /// Print JSON events, one per line, on stdout instead of text
    #[arg(long)]
    pub(super) json: bool,

    /// Stop with exit code 3 after this many model requests
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) max_steps: u32,

    /// Stop with exit code 3 after this long: seconds, or with a unit (90s, 20m, 2h)
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub(super) max_time: Option<Duration>,

    /// Stop with exit code 3 once the session's model requests used this many tokens (input plus output)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_tokens: Option<u64>,

    /// Stop with exit code 3 once the session's model requests cost this many US dollars (the model needs a
    /// price: built in, or [prices."provider/model"] in your config)
    #[arg(long, value_name = "USD", value_parser = parse_usd)]
    max_cost: Option<f64>,

    /// Default timeout of shell commands the agent runs, in seconds
    #[arg(long, value_name = "SECS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    run_timeout: u64,

    /// Continue session <ID> (any unique prefix): same conversation, branch and checkout
    #[arg(long, value_name = "ID", conflicts_with = "continue_latest")]
    pub(super) resume: Option<String>,

    /// Continue the newest session
    #[arg(long = "continue")]
    pub(super) continue_latest: bool,

    /// Work in your own working tree instead of a separate checkout, still committing each step to agent/<id>
    #[arg(long)]
    pub(super) here: bool,

    #[command(flatten)]
    pub(super) safety: SafetyFlags,

    /// Never prompt: risky commands that would need approval are refused (as in non-interactive runs)
    #[arg(long, short = 'y')]
    pub(super) yes: bool,

    /// Neither read nor write project memory (refs/agent/memory) in this run
    #[arg(long)]
    pub(super) no_memory: bool,
}

impl SessionFlags {
    /// The flags as a command line without any of them gives them (the hooks start from these), so the
    /// defaults live in one place: the flags' definitions.
    pub(super) fn defaults() -> Result<SessionFlags, CommandError> {
        SessionFlags::from_words(&[])
    }

    /// The flags `words` give (`["--sandbox", "read-only"]`), the defaults for the rest: how `exec` turns
    /// Codex's options into ours through the same definitions.
    pub(super) fn from_words(words: &[String]) -> Result<SessionFlags, CommandError> {
        use clap::{Args as _, FromArgMatches as _};
        let command = SessionFlags::augment_args(clap::Command::new("defaults"));
        let argv = std::iter::once("defaults").chain(words.iter().map(String::as_str));
        command
            .try_get_matches_from(argv)
            .and_then(|matches| SessionFlags::from_arg_matches(&matches))
            .map_err(|e| CommandError::internal(format!("invalid session flags {words:?}: {e}")))
    }

    /// The session these flags open: `--resume <id>`, `--continue`, or a new one.
    pub(super) fn resume(&self) -> Option<Resume> {
        match (&self.resume, self.continue_latest) {
            (Some(id), _) => Some(Resume::Id(id.clone())),
            (None, true) => Some(Resume::Latest),
            (None, false) => None,
        }
    }

    /// The options of a session opened with these flags in `ctx` (settings files and environment read now);
    /// `resume` says which session.
    pub(super) fn options(
        &self,
        ctx: &Context,
        resume: Option<Resume>,
    ) -> Result<SessionOptions, CommandError> {
        let env = |name: &str| ctx.env(name);
        let settings = config::Settings::load(ctx.cwd(), &env)?;
        let model = settings.resolve(self.model.as_deref(), &env)?;
        let (connect_timeout, idle_timeout) = settings.timeouts(&env)?;
        if self.max_cost.is_some() && model.price.is_none() {
            // A budget in dollars over tokens of unknown price would never stop anything.
            let name = model.display_name();
            return Err(CommandError::new(
                ErrorKind::Usage,
                format!("--max-cost needs the price of {name}, which is unknown"),
            )
            .hint(format!(
                "add [prices.\"{name}\"] with input, cached_input and output (USD per million tokens) to {}",
                settings.user.path.display()
            )));
        }
        crate::sys::timings::mark("config", &[]);
        Ok(SessionOptions {
            model,
            max_steps: self.max_steps,
            max_time: self.max_time,
            max_tokens: self.max_tokens,
            max_cost: self.max_cost,
            run_timeout: Duration::from_secs(self.run_timeout),
            connect_timeout,
            idle_timeout,
            retry: settings.retry_policy(),
            resume,
            here: self.here,
            safety: self.safety.options()?,
            title: None,
            memory: settings.memory().filter(|_| !self.no_memory),
            settings,
        })
    }
}

/// Runs `ask`: the agent's exit status becomes the command's (3 unfinished, 130 interrupted), whose reason
/// the sink has already shown.
pub fn run(ctx: &mut Context, args: AskArgs) -> Result<(), CommandError> {
    let claude_format = args.output_format != "text";
    if claude_format {
        // First, so that every error after this point is a `result` on stdout too.
        let stream = args.output_format == "stream-json";
        let sink = ui::stream_json::StreamJsonSink::stdout(stream, ctx.cwd());
        ctx.set_sink(Box::new(sink));
    }
    let prompt = read_prompt(&args.prompt)?;
    let flags = &args.session;
    let options = flags.options(ctx, flags.resume())?;
    let images = load_images(ctx, &args.image, &options.model)?;
    let runtime = runtime()
        .map_err(|e| CommandError::internal(format!("cannot start the async runtime: {e}")))?;
    crate::agent::footprint::mark("runtime");
    crate::sys::timings::mark("runtime", &[]);
    let cwd = ctx.cwd().to_path_buf();
    // A program reads stdout: nobody to ask, as with --json.
    let mut approver = ui::approver(flags.yes, flags.json || claude_format);
    let code = runtime.block_on(agent::ask(
        &cwd,
        &prompt,
        images,
        options,
        ctx.sink(),
        approver.as_mut(),
    ))?;
    exit_status(code)
}

/// The agent's exit status as the command's result (3 unfinished, 130 interrupted), whose reason the sink
/// has already shown.
pub(super) fn exit_status(code: i32) -> Result<(), CommandError> {
    match code {
        0 => Ok(()),
        agent::EXIT_UNFINISHED => Err(CommandError::shown(ErrorKind::Unfinished)),
        agent::EXIT_INTERRUPTED => Err(CommandError::shown(ErrorKind::Interrupted)),
        code if code == agent::exit_terminated(crate::sys::signal::SIGTERM) => Err(
            CommandError::shown(ErrorKind::Terminated(crate::sys::signal::SIGTERM)),
        ),
        code if code == agent::exit_terminated(crate::sys::signal::SIGHUP) => Err(
            CommandError::shown(ErrorKind::Terminated(crate::sys::signal::SIGHUP)),
        ),
        other => Err(CommandError::internal(format!(
            "the agent ended with an unknown status ({other})"
        ))),
    }
}

/// The images of `--image`, each checked (a PNG, JPEG, GIF or WebP within the cap) before a session starts,
/// and refused outright when the model's provider says it takes none. Relative paths are the user's, from
/// the directory the command runs in.
pub(super) fn load_images(
    ctx: &Context,
    paths: &[std::path::PathBuf],
    model: &config::ModelConfig,
) -> Result<Vec<crate::protocol::Image>, CommandError> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    if !model.vision {
        return Err(CommandError::user(
            crate::tools::image::ImageError::NoVision {
                model: model.display_name(),
            }
            .to_string(),
        ));
    }
    paths
        .iter()
        .map(|path| {
            let source = path.display().to_string();
            crate::tools::image::load(&ctx.cwd().join(path), &source, model.max_image_size)
                .map_err(|e| CommandError::user(e.to_string()))
        })
        .collect()
}

/// The safety flags `ask`, `chat`, `fix` and `acp` share.
#[derive(Debug, Clone, Args)]
pub(super) struct SafetyFlags {
    /// Allow tool calls matching RULE without asking, e.g. 'Run(cargo test*)', 'Run(git push:*)', 'Read(.env)'
    #[arg(long, value_name = "RULE")]
    pub(super) allow: Vec<String>,

    /// Refuse tool calls matching RULE, e.g. 'Run(curl:*)', 'Edit(**/migrations/**)', 'run'; deny wins over allow
    #[arg(long, value_name = "RULE")]
    pub(super) deny: Vec<String>,

    /// Confine shell commands: workspace (writes only in the checkout, temp and caches), read-only, or off
    #[arg(long, value_name = "MODE", default_value = "auto", value_parser = ["auto", "workspace", "read-only", "off"])]
    sandbox: String,

    /// Turn network access off for shell commands (needs the sandbox)
    #[arg(long)]
    no_network: bool,
}

impl SafetyFlags {
    /// The sandbox the flags ask for; `--no-network` without a sandbox is an error.
    pub(super) fn sandbox(&self) -> Result<SandboxConfig, CommandError> {
        let mode: Mode = self.sandbox.parse().map_err(CommandError::user)?;
        if self.no_network && mode == Mode::Off {
            return Err(CommandError::user(
                "--no-network needs the sandbox: drop --sandbox off",
            ));
        }
        Ok(SandboxConfig {
            mode,
            network: !self.no_network,
            writable: Vec::new(),
        })
    }

    /// Rules from the flags (the config's `[permissions]` and `[sandbox]` are added by the config module)
    /// and the sandbox mode.
    pub(super) fn options(&self) -> Result<agent::SafetyOptions, CommandError> {
        Ok(agent::SafetyOptions {
            rules: Rules::from_lists(&self.allow, &self.deny)?,
            sandbox: self.sandbox()?,
        })
    }
}

/// `90`, `90s`, `20m` or `2h` as a duration.
/// A `--max-cost` amount: US dollars above zero (`0.50`, `$2`).
fn parse_usd(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_start_matches('$');
    match number.parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd > 0.0 => Ok(usd),
        _ => Err(format!(
            "expected an amount of US dollars above zero (e.g. 0.50), not '{text}'"
        )),
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration: use seconds, or 90s, 20m, 2h"))?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("unknown unit in '{text}': use s, m or h")),
    };
    if secs == 0 {
        return Err("the duration must be more than 0".into());
    }
    Ok(Duration::from_secs(secs))
}

/// The prompt words joined by spaces, or stdin when the only word is `-`. Stdin that is not UTF-8 is
/// taken with its bad bytes replaced (U+FFFD, as piped chat lines are) and said so once: it used to be
/// refused outright (issue 22, audit finding 4).
fn read_prompt(words: &[String]) -> Result<String, CommandError> {
    let prompt = if words.len() == 1 && words[0] == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| CommandError::user(format!("cannot read the prompt from stdin: {e}")))?;
        match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(bad) => {
                eprintln!(
                    "warning: the prompt on stdin is not UTF-8: its invalid bytes were replaced with U+FFFD"
                );
                String::from_utf8_lossy(bad.as_bytes()).into_owned()
            }
        }
    } else {
        words.join(" ")
    };
    if prompt.trim().is_empty() {
        return Err(CommandError::user(
            "the prompt is empty: say what the agent should do",
        ));
    }
    Ok(prompt)
}
