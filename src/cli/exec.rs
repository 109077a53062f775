//! `git agent exec`: the headless entry that `@openai/codex-sdk` drives. The SDK spawns its CLI as
//! `<path> exec --experimental-json [--config k=v]... [--model M] [--sandbox S] [--cd DIR] [--skip-git-repo-check]
//! [--output-schema FILE] [resume <thread id>] [--image F]...`, writes the prompt to stdin, closes it, and reads
//! JSONL events ([`crate::ui::codex`]). Codex's options are translated into a session's flags here, through the
//! same definitions `ask` parses, so the two commands run the same session; the thread id is the session id.
//!
//! The SDK's `baseUrl` arrives as `--config openai_base_url="..."` and its `apiKey` as `CODEX_API_KEY` in the
//! environment: both become the `openai` provider's `OPENAI_BASE_URL` and `OPENAI_API_KEY` for this run. What is
//! mapped and what is ignored is listed in docs/integrations.md.

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use clap::{Args, Subcommand};

use super::ask::SessionFlags;
use super::context::{runtime, Context};
use super::error::{CommandError, ErrorKind};
use crate::protocol::{Event, Never, Sink};
use crate::ui::codex::{CodexSink, StepChanges};

/// Run one task for an SDK or a script: Codex's exec options and JSONL events
///
/// Made for @openai/codex-sdk (set its codexPathOverride to git-agent): with --experimental-json (or --json)
/// stdout carries Codex's events (thread.started, turn.started, item.*, turn.completed or turn.failed), and
/// the thread id is the session id, so 'exec resume <id>' continues the same agent/<id> branch. Without it,
/// exec prints as ask does. The prompt is the argument, or stdin when it is missing or '-'.
#[derive(Debug, Args)]
pub struct ExecArgs {
    #[command(subcommand)]
    command: Option<ExecCommand>,

    /// The task ('-' or none: read it from stdin)
    #[arg(value_name = "PROMPT")]
    prompt: Option<String>,

    #[command(flatten)]
    options: ExecOptions,
}

#[derive(Debug, Subcommand)]
enum ExecCommand {
    /// Continue a session (a thread) by id, or the newest with --last
    Resume(ResumeArgs),
}

#[derive(Debug, Args)]
struct ResumeArgs {
    /// The session (thread) id, or any unique prefix of it
    #[arg(value_name = "SESSION_ID")]
    session_id: Option<String>,

    /// The task ('-' or none: read it from stdin)
    #[arg(value_name = "PROMPT")]
    prompt: Option<String>,

    /// Continue the newest session
    #[arg(long)]
    last: bool,
}

/// Codex's exec options; global, so they may also follow `resume <id>` (the SDK puts `--image` there).
#[derive(Debug, Args)]
struct ExecOptions {
    /// Print Codex's JSONL events on stdout (what the SDK passes)
    #[arg(long, global = true)]
    experimental_json: bool,

    /// The same as --experimental-json (Codex's newer name for it)
    #[arg(long, global = true)]
    json: bool,

    /// Model as <provider>/<model>, or a model of the default provider (openai)
    #[arg(long, short = 'm', global = true, value_name = "MODEL")]
    model: Option<String>,

    /// Codex's sandbox: read-only (read-only shell sandbox, no edits), workspace-write (workspace sandbox)
    /// or danger-full-access (no sandbox)
    #[arg(long, short = 's', global = true, value_name = "SANDBOX_MODE",
          value_parser = ["read-only", "workspace-write", "danger-full-access"])]
    sandbox: Option<String>,

    /// Work in DIR (a directory of a git repository) instead of the current directory
    #[arg(long = "cd", short = 'C', global = true, value_name = "DIR")]
    cd: Option<PathBuf>,

    /// Another directory shell commands may write to (with the workspace sandbox)
    #[arg(long, global = true, value_name = "DIR")]
    add_dir: Vec<PathBuf>,

    /// Accepted for Codex's callers; git-agent always needs a git repository (the session is a branch)
    #[arg(long, global = true)]
    skip_git_repo_check: bool,

    /// A JSON Schema file the final answer must match (the model is told to answer with such JSON)
    #[arg(long, global = true, value_name = "FILE")]
    output_schema: Option<PathBuf>,

    /// A Codex config override key=value (TOML value); openai_base_url, model, sandbox_mode and
    /// sandbox_workspace_write.network_access are used, the rest is ignored
    #[arg(long, short = 'c', global = true, value_name = "key=value")]
    config: Vec<String>,

    /// Write the final answer to FILE as well
    #[arg(long, short = 'o', global = true, value_name = "FILE")]
    output_last_message: Option<PathBuf>,

    /// An image to attach to the prompt (PNG, JPEG, GIF or WebP, checked as for ask); repeatable
    #[arg(long, short = 'i', global = true, value_name = "FILE")]
    image: Vec<PathBuf>,

    /// Accepted for Codex's callers and ignored (a label for new threads)
    #[arg(long, global = true, value_name = "SOURCE")]
    thread_source: Option<String>,

    /// Accepted for Codex's callers and ignored (an OpenAI-only programme)
    #[arg(long, global = true, value_name = "PROGRAM")]
    cyber_access_program: Option<String>,
}

/// `--config` keys the SDK passes that mean nothing here, accepted without a warning: approvals (exec never
/// asks: a call that would need approval is refused), reasoning effort and web search (provider features the
/// model settings decide).
const IGNORED_KEYS: &[&str] = &["approval_policy", "model_reasoning_effort", "web_search"];

/// What Codex's options ask of the session, once read.
#[derive(Debug, Default, PartialEq)]
struct Mapped {
    /// `ask`'s flags for the same session.
    words: Vec<String>,
    base_url: Option<String>,
    /// Keys that were not used (a warning names them).
    unused: Vec<String>,
}

/// Runs `exec`: translates the options, reads the prompt, runs one turn and maps its end to the exit code.
pub fn run(ctx: &mut Context, args: ExecArgs) -> Result<(), CommandError> {
    let options = &args.options;
    if let Some(dir) = &options.cd {
        let dir = ctx.cwd().join(dir);
        ctx.set_cwd(dir);
    }
    // First, so that every error after this point reaches the SDK as an event too.
    let answer = install_sink(ctx, options.json || options.experimental_json);
    if !ctx.cwd().is_dir() {
        return Err(CommandError::user(format!(
            "--cd {}: no such directory",
            ctx.cwd().display()
        )));
    }
    let mapped = map_options(options, args.command.as_ref())?;
    for key in &mapped.unused {
        eprintln!(
            "warning: --config {key} is not used by git-agent exec (see docs/integrations.md)"
        );
    }
    map_provider(ctx, &mapped);
    let mut prompt = read_prompt(prompt_arg(&args))?;
    if let Some(schema) = &options.output_schema {
        prompt.push_str(&schema_instruction(&ctx.cwd().join(schema))?);
    }
    let flags = SessionFlags::from_words(&mapped.words)?;
    let mut session = flags.options(ctx, flags.resume())?;
    session
        .safety
        .sandbox
        .writable
        .extend(options.add_dir.iter().map(|d| ctx.cwd().join(d)));
    let images = super::ask::load_images(ctx, &options.image, &session.model)?;
    let runtime = runtime()
        .map_err(|e| CommandError::internal(format!("cannot start the async runtime: {e}")))?;
    let cwd = ctx.cwd().to_path_buf();
    // Nobody can answer a question: what would need approval is refused, as in Codex's exec.
    let mut approver = Never;
    let code = runtime.block_on(crate::agent::ask(
        &cwd,
        &prompt,
        images,
        session,
        ctx.sink(),
        &mut approver,
    ))?;
    if let Some(path) = &options.output_last_message {
        write_answer(&ctx.cwd().join(path), &answer)?;
    }
    super::ask::exit_status(code)
}

/// Makes the command's sink: Codex's events with `json`, else `ask`'s output; returns where the turn's answer
/// will be kept (for `--output-last-message`).
fn install_sink(ctx: &mut Context, json: bool) -> Arc<Mutex<Option<String>>> {
    let inner: Box<dyn Sink> = if json {
        let dir = ctx.cwd().to_path_buf();
        Box::new(CodexSink::stdout(Some(step_changes(dir))))
    } else {
        crate::ui::sink(false)
    };
    let answer = Arc::new(Mutex::new(None));
    ctx.set_sink(Box::new(KeepsAnswer {
        inner,
        answer: Arc::clone(&answer),
    }));
    answer
}

/// The SDK's `baseUrl` (`--config openai_base_url=...`) and `apiKey` (`CODEX_API_KEY`) as the `openai`
/// provider's variables, for this run only: Codex speaks to OpenAI's API, so that is the provider they mean.
fn map_provider(ctx: &mut Context, mapped: &Mapped) {
    if let Some(url) = mapped.base_url.clone() {
        ctx.set_env("OPENAI_BASE_URL", url);
    }
    if let Some(key) = ctx.env("CODEX_API_KEY").filter(|k| !k.trim().is_empty()) {
        ctx.set_env("OPENAI_API_KEY", key);
    }
}

/// Passes every event on to `inner` and keeps the turn's answer, for `--output-last-message`.
struct KeepsAnswer {
    inner: Box<dyn Sink>,
    answer: Arc<Mutex<Option<String>>>,
}

impl Sink for KeepsAnswer {
    fn emit(&mut self, event: &Event) {
        if let Event::Done { answer, .. } = event {
            if let Ok(mut kept) = self.answer.lock() {
                *kept = Some(answer.clone());
            }
        }
        self.inner.emit(event);
    }

    fn wants_diffs(&self) -> bool {
        self.inner.wants_diffs()
    }
}

/// Writes the turn's answer to `path` (`-o`), as Codex writes its last message; nothing when there was none.
fn write_answer(path: &Path, answer: &Mutex<Option<String>>) -> Result<(), CommandError> {
    let Some(text) = answer.lock().ok().and_then(|a| a.clone()) else {
        return Ok(());
    };
    if text.is_empty() {
        return Ok(());
    }
    std::fs::write(path, text).map_err(|e| {
        CommandError::user(format!(
            "cannot write the answer to --output-last-message {}: {e}",
            path.display()
        ))
    })
}

/// The prompt argument: `exec PROMPT`, `exec resume ID PROMPT`, or `exec resume --last PROMPT` (where the
/// one word is the prompt, as Codex reads it).
fn prompt_arg(args: &ExecArgs) -> Option<&str> {
    match &args.command {
        Some(ExecCommand::Resume(resume)) if resume.last && resume.prompt.is_none() => {
            resume.session_id.as_deref()
        }
        Some(ExecCommand::Resume(resume)) => resume.prompt.as_deref(),
        None => args.prompt.as_deref(),
    }
}

/// Codex's options as `ask`'s flags, the base URL, and the `--config` keys not used.
fn map_options(
    options: &ExecOptions,
    command: Option<&ExecCommand>,
) -> Result<Mapped, CommandError> {
    let mut mapped = Mapped::default();
    let mut model = options.model.clone();
    let mut sandbox = options.sandbox.clone();
    let mut network = None;
    for item in &options.config {
        let (key, value) = parse_override(item)?;
        match (key.as_str(), value) {
            ("openai_base_url", Value::Text(url)) => mapped.base_url = Some(url),
            ("model", Value::Text(name)) => {
                model.get_or_insert(name);
            }
            ("sandbox_mode", Value::Text(mode)) => {
                sandbox.get_or_insert(mode);
            }
            ("sandbox_workspace_write.network_access", Value::Bool(on)) => network = Some(on),
            (key, _) if IGNORED_KEYS.contains(&key) => {}
            (key, _) => mapped.unused.push(key.to_owned()),
        }
    }
    let words = &mut mapped.words;
    if let Some(model) = model {
        words.extend(["--model".into(), model]);
    }
    let full_access = match sandbox.as_deref() {
        None => false,
        Some("read-only") => {
            // Codex's read-only forbids edits too; our sandbox confines commands, the rule the file tools.
            words.extend(["--sandbox", "read-only", "--deny", "Edit"].map(String::from));
            false
        }
        Some("workspace-write") => {
            words.extend(["--sandbox", "workspace"].map(String::from));
            false
        }
        Some("danger-full-access") => {
            words.extend(["--sandbox", "off"].map(String::from));
            true
        }
        Some(other) => {
            return Err(CommandError::new(
                ErrorKind::Usage,
                format!("unknown sandbox mode '{other}': use read-only, workspace-write or danger-full-access"),
            ))
        }
    };
    // Full access has the network anyway; elsewhere Codex's switch turns it off.
    if network == Some(false) && !full_access {
        words.push("--no-network".into());
    }
    match command {
        Some(ExecCommand::Resume(resume)) if resume.last => words.push("--continue".into()),
        Some(ExecCommand::Resume(ResumeArgs {
            session_id: Some(id),
            ..
        })) => words.extend(["--resume".into(), id.clone()]),
        Some(ExecCommand::Resume(_)) => {
            return Err(CommandError::new(
                ErrorKind::Usage,
                "exec resume needs a session id, or --last for the newest session",
            ))
        }
        None => {}
    }
    Ok(mapped)
}

/// A `--config` value: the TOML scalars the mapped keys take; anything else is kept as text (Codex reads a
/// value that is not TOML as the literal string).
#[derive(Debug, PartialEq)]
enum Value {
    Text(String),
    Bool(bool),
    Other,
}

/// `key=value`, the value read as TOML.
fn parse_override(item: &str) -> Result<(String, Value), CommandError> {
    let Some((key, raw)) = item.split_once('=') else {
        return Err(CommandError::new(
            ErrorKind::Usage,
            format!("--config {item}: expected key=value"),
        ));
    };
    let value = match raw.trim().parse::<toml_edit::Value>() {
        Ok(toml_edit::Value::String(s)) => Value::Text(s.value().clone()),
        Ok(toml_edit::Value::Boolean(b)) => Value::Bool(*b.value()),
        Ok(_) => Value::Other,
        Err(_) => Value::Text(raw.trim().to_owned()),
    };
    Ok((key.trim().to_owned(), value))
}

/// The prompt: the argument, or stdin when there is none or it is `-`.
fn read_prompt(arg: Option<&str>) -> Result<String, CommandError> {
    let prompt = match arg {
        Some(text) if text != "-" => text.to_owned(),
        _ => {
            let mut stdin = std::io::stdin();
            if stdin.is_terminal() {
                return Err(CommandError::new(
                    ErrorKind::Usage,
                    "exec needs a prompt: give it as an argument or on stdin",
                ));
            }
            let mut text = String::new();
            stdin.read_to_string(&mut text).map_err(|e| {
                CommandError::user(format!("cannot read the prompt from stdin: {e}"))
            })?;
            text
        }
    };
    if prompt.trim().is_empty() {
        return Err(CommandError::user(
            "the prompt is empty: say what the agent should do",
        ));
    }
    Ok(prompt)
}

/// What the prompt gains from `--output-schema FILE`: the schema, and the instruction to answer with JSON
/// matching it (the chat APIs' structured-output modes are not used: not every provider has one, and
/// several refuse it next to tools).
fn schema_instruction(path: &Path) -> Result<String, CommandError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CommandError::user(format!(
            "cannot read --output-schema {}: {e}",
            path.display()
        ))
    })?;
    let schema: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        CommandError::user(format!(
            "--output-schema {} is not JSON: {e}",
            path.display()
        ))
    })?;
    Ok(format!(
        "\n\nYour final answer must be a single JSON value, and nothing else, that matches this JSON Schema:\n{schema}\n"
    ))
}

/// Reads what a step commit changed in the repository of `dir`, for the `file_change` items.
fn step_changes(dir: PathBuf) -> StepChanges {
    Box::new(move |commit: &str| {
        let store = crate::store::Store::open(&dir).ok()?;
        let id = crate::store::ObjectId::from_hex(commit.as_bytes()).ok()?;
        let parent = store.repo().find_commit(id).ok()?.parent_ids().next()?;
        let changes = store.changes(parent.detach(), id).ok()?;
        Some(changes.into_iter().map(|c| (c.path, c.status)).collect())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        exec: ExecArgs,
    }

    fn mapped(argv: &[&str]) -> Mapped {
        let cli = Cli::try_parse_from(std::iter::once("exec").chain(argv.iter().copied())).unwrap();
        map_options(&cli.exec.options, cli.exec.command.as_ref()).unwrap()
    }

    #[test]
    fn the_sdks_arguments_map_to_a_session() {
        let m = mapped(&[
            "--experimental-json",
            "--config",
            "openai_base_url=\"http://127.0.0.1:9/v1\"",
            "--model",
            "gpt-test",
            "--sandbox",
            "read-only",
            "--cd",
            "/tmp",
            "--skip-git-repo-check",
            "--config",
            "approval_policy=\"never\"",
            "--config",
            "sandbox_workspace_write.network_access=false",
            "--config",
            "shell_environment_policy.inherit=\"all\"",
            "resume",
            "abc123",
            "--image",
            "x.png",
        ]);
        assert_eq!(m.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(
            m.words,
            [
                "--model",
                "gpt-test",
                "--sandbox",
                "read-only",
                "--deny",
                "Edit",
                "--no-network",
                "--resume",
                "abc123"
            ]
        );
        assert_eq!(m.unused, ["shell_environment_policy.inherit"]);
    }

    #[test]
    fn full_access_and_the_newest_session() {
        let m = mapped(&[
            "--sandbox",
            "danger-full-access",
            "resume",
            "--last",
            "go on",
        ]);
        assert_eq!(m.words, ["--sandbox", "off", "--continue"]);
        let m = mapped(&["-c", "sandbox_mode=workspace-write", "task"]);
        assert_eq!(m.words, ["--sandbox", "workspace"]);
    }

    #[test]
    fn config_values_are_toml_or_text() {
        assert_eq!(
            parse_override("a=\"x\"").unwrap(),
            ("a".into(), Value::Text("x".into()))
        );
        assert_eq!(parse_override("a=true").unwrap().1, Value::Bool(true));
        assert_eq!(parse_override("a=3").unwrap().1, Value::Other);
        assert_eq!(
            parse_override("a=bare").unwrap().1,
            Value::Text("bare".into())
        );
        assert!(parse_override("novalue").is_err());
    }
}
