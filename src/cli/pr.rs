//! `git agent pr`: push a session's branch, log and notes, and open a pull request whose title and body are
//! written from the session (prompt, summary, steps with their reasons, checks run, files, tokens).
//!
//! The forge is driven through its own CLI when one is on PATH (`gh`, `glab`, `tea`), which knows the
//! user's login and the forge's API; otherwise the body is left in a file and git's push output (which names
//! the compare link on most forges) is what the user gets. `--stdout` prints a `git request-pull`-style
//! message instead and pushes nothing, for email workflows.

use std::path::{Path, PathBuf};

use clap::Args;

use super::accept::{parse_note, Range};
use super::context::Context;
use super::error::{CommandError, ErrorKind};
use crate::agent::journal;
use crate::protocol::Event;
use crate::store::review::REVIEW_REF;
use crate::store::{LogContents, ObjectId, Store};

/// Push the session's branch, log and notes and open a pull request with a body built from the session
///
/// Opens it with `gh pr create`, `glab mr create` or `tea pr create` when one is on PATH; otherwise prints
/// the path of the body file (git's push output usually names the link to open the request).
#[derive(Debug, Args)]
pub struct PrArgs {
    /// The session (any unique prefix of its id; default: the newest)
    id: Option<String>,

    /// The remote to push to (default: origin, or the only remote)
    #[arg(long, value_name = "REMOTE")]
    remote: Option<String>,

    /// The branch the pull request goes into (default: your branch's upstream, else the remote's HEAD)
    #[arg(long, value_name = "BRANCH")]
    base: Option<String>,

    /// The branch name on the remote (default: agent/<id>)
    #[arg(long, value_name = "NAME")]
    branch: Option<String>,

    /// The pull request's title (default: the first line of the prompt)
    #[arg(long, value_name = "TITLE")]
    title: Option<String>,

    /// Open it as a draft
    #[arg(long)]
    draft: bool,

    /// Print a `git request-pull`-style message instead of pushing (for email)
    #[arg(long, conflicts_with = "draft")]
    stdout: bool,
}

pub fn run(ctx: &Context, args: PrArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let id = store.resolve_session(args.id.as_deref())?;
    let log = store.read_log(&id)?;
    let range = Range::of(store, &log.meta)?;
    let remote = remote(store, args.remote.as_deref())?;
    let base = match &args.base {
        Some(b) => b.clone(),
        None => base_branch(store, &remote)?,
    };
    let branch = args.branch.clone().unwrap_or_else(|| format!("agent/{id}"));
    check_branch_name(store, &branch)?;
    let title = args.title.clone().unwrap_or_else(|| {
        let first = first_line(&log.meta.prompt, "git-agent session");
        crate::protocol::Untrusted::name(&first).to_string()
    });
    let body = body(store, &log, &range)?;
    if args.stdout {
        print!(
            "{}",
            request_pull(store, &range, &remote, &branch, &title, &body)?
        );
        return Ok(());
    }
    let file = write_body(store, &id, &body)?;
    push(store, &range, &remote, &branch)?;
    match forge(store, &remote) {
        Some(cli) => open(&cli, &title, &file, &body, &base, &branch, args.draft),
        None => {
            eprintln!(
                "pushed {branch} to {remote}; no gh, glab or tea on PATH: open the pull request into {base} on \
                 the forge (git printed its link above, if the forge gives one) with the body in:"
            );
            println!("{}", file.display());
            Ok(())
        }
    }
}

/// `--remote`, else `origin`, else the only remote.
fn remote(store: &Store, asked: Option<&str>) -> Result<String, CommandError> {
    let remotes = String::from_utf8_lossy(&store.git_output(&["remote"])?).into_owned();
    let remotes: Vec<&str> = remotes.lines().collect();
    let pick = match asked {
        Some(r) => Some(r),
        None if remotes.contains(&"origin") => Some("origin"),
        None if remotes.len() == 1 => Some(remotes[0]),
        None => None,
    };
    match pick {
        Some(r) if remotes.contains(&r) => Ok(r.to_owned()),
        Some(r) => Err(CommandError::user(format!("there is no remote {r:?}"))
            .hint("`git remote -v` lists them; add one with `git remote add origin <url>`")),
        None => Err(CommandError::user(
            "no remote to push to: there is no origin and not exactly one remote",
        )
        .hint("name one with --remote, or add one with `git remote add origin <url>`")),
    }
}

/// The upstream of the current branch on `remote`, else the remote's HEAD, else the current branch.
fn base_branch(store: &Store, remote: &str) -> Result<String, CommandError> {
    let text = |args: &[&str]| {
        store
            .git_output(args)
            .ok()
            .map(|o| String::from_utf8_lossy(&o).trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    if let Some(upstream) = text(&[
        "rev-parse",
        "--abbrev-ref",
        "--symbolic-full-name",
        "@{upstream}",
    ]) {
        if let Some(name) = upstream.strip_prefix(&format!("{remote}/")) {
            return Ok(name.to_owned());
        }
    }
    if let Some(head) = text(&[
        "symbolic-ref",
        "--short",
        &format!("refs/remotes/{remote}/HEAD"),
    ]) {
        if let Some(name) = head.strip_prefix(&format!("{remote}/")) {
            return Ok(name.to_owned());
        }
    }
    text(&["symbolic-ref", "--short", "HEAD"]).ok_or_else(|| {
        CommandError::user("cannot tell which branch the pull request goes into")
            .hint("name it with --base")
    })
}

fn check_branch_name(store: &Store, branch: &str) -> Result<(), CommandError> {
    let full = format!("refs/heads/{branch}");
    store
        .git_output(&["check-ref-format", &full])
        .map(|_| ())
        .map_err(|_| {
            CommandError::new(
                ErrorKind::Usage,
                format!("{branch:?} is not a valid branch name"),
            )
        })
}

/// Pushes the session's tip as `branch`, its log and the notes; refused before anything is sent when a
/// known secret is in them. Nothing is forced.
fn push(store: &Store, range: &Range, remote: &str, branch: &str) -> Result<(), CommandError> {
    let log_ref = crate::store::session_log::log_ref(&range.id);
    let tip = range.tip.to_string();
    let notes = store.notes_refs()?;
    let mut scan = vec![tip.as_str(), log_ref.as_str()];
    scan.extend(&notes);
    super::push::refuse_leaks(store, &scan)?;
    let mut cmd = super::context::git_inherit(store.workdir());
    cmd.args(["push", remote])
        .arg(format!("{tip}:refs/heads/{branch}"))
        .arg(format!("{log_ref}:{log_ref}"));
    cmd.args(notes.iter().map(|n| format!("{n}:{n}")));
    let status = cmd.status().map_err(|e| {
        CommandError::internal(format!(
            "could not run git ({e}): make sure git is installed"
        ))
    })?;
    if status.success() {
        Ok(())
    } else {
        Err(CommandError::user(format!(
            "git push to {remote} failed (see above): no pull request was opened"
        ))
        .hint(format!(
            "if the remote's notes or branch moved on, run `git agent pull {remote}` first"
        )))
    }
}

/// The forge CLI to open the request with: the one the remote's host suggests, else the first on PATH.
fn forge(store: &Store, remote: &str) -> Option<String> {
    let url = store
        .git_output(&["remote", "get-url", remote])
        .map(|o| String::from_utf8_lossy(&o).to_lowercase())
        .unwrap_or_default();
    let mut order = vec!["gh", "glab", "tea"];
    if url.contains("gitlab") {
        order.rotate_left(1);
    } else if url.contains("gitea") || url.contains("codeberg") {
        order.rotate_left(2);
    }
    order
        .into_iter()
        .find(|cli| on_path(cli))
        .map(str::to_owned)
}

fn on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(name))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// Runs the forge's CLI with the user's terminal (it may ask to log in).
fn open(
    cli: &str,
    title: &str,
    file: &Path,
    body: &str,
    base: &str,
    branch: &str,
    draft: bool,
) -> Result<(), CommandError> {
    let mut cmd = std::process::Command::new(cli);
    let file = file.to_string_lossy();
    match cli {
        "gh" => cmd
            .args(["pr", "create", "--title", title, "--body-file", &file])
            .args(["--base", base, "--head", branch]),
        "glab" => cmd
            .args(["mr", "create", "--title", title])
            .args(description_args(cli, &["mr", "create"], &file, body))
            .args(["--target-branch", base, "--source-branch", branch, "--yes"]),
        _ => cmd
            .args(["pr", "create", "--title", title])
            .args(description_args(cli, &["pr", "create"], &file, body))
            .args(["--base", base, "--head", branch]),
    };
    if draft {
        cmd.arg("--draft");
    }
    let status = cmd
        .status()
        .map_err(|e| CommandError::internal(format!("could not run {cli}: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(CommandError::user(format!(
            "`{cli}` could not open the pull request (see above); {branch} is pushed and the body is in {file}"
        )))
    }
}

/// The longest description passed as one argument: Linux refuses to start a program with an argument over
/// 128 KiB (`MAX_ARG_STRLEN`), which made a long body fail after the push (issue 22).
const MAX_DESCRIPTION_ARG: usize = 100 * 1024;

/// How `glab`/`tea` get the body: from the file (`--description-file`) when the installed version has that
/// flag, else as `--description`, cut to [`MAX_DESCRIPTION_ARG`] at a line with a note saying so.
fn description_args(cli: &str, create: &[&str], file: &str, body: &str) -> Vec<String> {
    let help = std::process::Command::new(cli)
        .args(create)
        .arg("--help")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    let has_file_flag =
        help.is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("--description-file"));
    if has_file_flag {
        return vec!["--description-file".into(), file.into()];
    }
    vec!["--description".into(), fit_description(cli, body)]
}

/// `body`, or its head cut at a line so that it fits in one argument, with a last line that says so.
fn fit_description(cli: &str, body: &str) -> String {
    if body.len() <= MAX_DESCRIPTION_ARG {
        return body.to_owned();
    }
    let mut end = MAX_DESCRIPTION_ARG;
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    let head = &body[..end];
    let head = head.rfind('\n').map_or(head, |at| &head[..at]);
    format!(
        "{head}\n\n(cut at {} KiB of {} KiB: {cli} takes the description as one command-line argument)\n",
        head.len() / 1024,
        body.len() / 1024
    )
}

fn write_body(store: &Store, id: &str, body: &str) -> Result<PathBuf, CommandError> {
    let dir = store.common_dir().join("agent").join("pr");
    std::fs::create_dir_all(&dir)
        .map_err(|e| CommandError::internal(format!("cannot create {}: {e}", dir.display())))?;
    let file = dir.join(format!("{id}.md"));
    std::fs::write(&file, body)
        .map_err(|e| CommandError::internal(format!("cannot write {}: {e}", file.display())))?;
    Ok(file)
}

/// The pull request's body, Markdown: the prompt, the summary, the steps and their reasons, the checks run,
/// the files changed, the tokens. Passes secret redaction (it is published).
fn body(store: &Store, log: &LogContents, range: &Range) -> Result<String, CommandError> {
    let meta = &log.meta;
    let mut out = prompts(log);
    let summary = journal::events(&log.events)
        .into_iter()
        .rev()
        .find_map(|e| match e {
            Event::TurnEnd { answer, .. } if !answer.trim().is_empty() => Some(answer),
            _ => None,
        });
    if let Some(summary) = summary {
        out.push_str(&format!("\n## Summary\n\n{}\n", summary.trim()));
    }
    let steps = store.step_commits(range.from, range.tip)?;
    if !steps.is_empty() {
        out.push_str("\n## Steps\n\n");
    }
    for commit in &steps {
        let step = store.step_of(*commit)?;
        let note = store.note(*commit)?.unwrap_or_default();
        let (label, why) = parse_note(&note);
        let label = label.unwrap_or_else(|| format!("step {step}"));
        let why = why
            .filter(|w| !w.starts_with("(the model gave no reason"))
            .map(|w| format!(": {}", first_line(&w, "")))
            .unwrap_or_default();
        let short = &commit.to_string()[..7];
        out.push_str(&format!("{step}. `{label}` ({short}){why}\n"));
    }
    let checks = checks(&log.events);
    if !checks.is_empty() {
        out.push_str("\n## Checks run\n\n");
        for line in checks {
            out.push_str(&format!("- {line}\n"));
        }
    }
    let stat = store.git_output(&[
        "diff",
        "--stat",
        &range.from.to_string(),
        &range.tip.to_string(),
    ])?;
    let stat = String::from_utf8_lossy(&stat);
    if !stat.trim().is_empty() {
        out.push_str(&format!(
            "\n## Files changed\n\n```\n{}\n```\n",
            stat.trim_end()
        ));
    }
    if meta.step0.is_some() {
        out.push_str(
            "\nThe branch starts with step 0: the uncommitted work of whoever started the session, as it was then.\n",
        );
    }
    out.push_str(&format!(
        "\n---\nSession `{}` · {} · {} step{} · tokens {} in, {} out · cost {} · log: `refs/agent/sessions/{}` (`git agent pull` then `git agent show {}`); review records: `{REVIEW_REF}`\n",
        meta.id,
        meta.model,
        steps.len(),
        if steps.len() == 1 { "" } else { "s" },
        meta.input_tokens,
        meta.output_tokens,
        crate::protocol::format_usd(meta.cost_usd),
        meta.id,
        meta.id,
    ));
    // Prompts, answers and step reasons are model or user text, published and shown by `gh pr view`,
    // `--stdout` and the forge's own tools: no control or bidi character survives (issue 22, finding 8).
    Ok(crate::protocol::neutralize(&crate::store::sanitize(&out)).into_owned())
}

/// The session's prompts, quoted: the one prompt, or each turn's (a session resumed with `ask --resume`
/// has several, and the last answer below replies to the last of them, not the first).
fn prompts(log: &LogContents) -> String {
    let mut turns: Vec<String> = journal::events(&log.events)
        .into_iter()
        .filter_map(|e| match e {
            Event::Prompt { content } => Some(content),
            _ => None,
        })
        .collect();
    if turns.is_empty() {
        turns.push(log.meta.prompt.clone());
    }
    let quote = |text: &str| -> String { text.lines().map(|l| format!("> {l}\n")).collect() };
    if turns.len() == 1 {
        return format!("## Prompt\n\n{}", quote(&turns[0]));
    }
    let mut out = String::from("## Prompts\n");
    for (n, turn) in turns.iter().enumerate() {
        out.push_str(&format!("\nTurn {}:\n\n{}", n + 1, quote(turn)));
    }
    out
}

/// The `run` commands of the session with their results, as lines (`` `cargo test`: ok ``), at most 20.
fn checks(events: &[serde_json::Value]) -> Vec<String> {
    let mut commands: Vec<(String, String)> = Vec::new();
    let mut lines = Vec::new();
    for event in journal::events(events) {
        match event {
            Event::Reply { tool_calls, .. } => {
                for call in tool_calls.into_iter().filter(|c| c.name == "run") {
                    let command = serde_json::from_str::<serde_json::Value>(&call.arguments)
                        .ok()
                        .and_then(|v| v["command"].as_str().map(str::to_owned));
                    if let Some(command) = command {
                        commands.push((call.id, command));
                    }
                }
            }
            Event::ToolResult {
                id, ok, summary, ..
            } => {
                if let Some(at) = commands.iter().position(|(call, _)| *call == id) {
                    let (_, command) = commands.remove(at);
                    let result = if ok { "passed" } else { "failed" };
                    lines.push(format!(
                        "`{}`: {result} ({})",
                        first_line(&command, ""),
                        first_line(&summary, "")
                    ));
                }
            }
            _ => {}
        }
    }
    if lines.len() > 20 {
        let more = lines.len() - 20;
        lines.drain(..more);
        lines.insert(0, format!("({more} earlier commands not listed)"));
    }
    lines
}

/// A `git request-pull`-style message: where the change starts and ends, where to fetch it, the body, the
/// shortlog and the diffstat.
fn request_pull(
    store: &Store,
    range: &Range,
    remote: &str,
    branch: &str,
    title: &str,
    body: &str,
) -> Result<String, CommandError> {
    let line = |commit: ObjectId| -> Result<String, CommandError> {
        let out = store.git_output(&["log", "-1", "--format=%s (%cs)", &commit.to_string()])?;
        Ok(String::from_utf8_lossy(&out).trim().to_owned())
    };
    let url = store
        .git_output(&["remote", "get-url", remote])
        .map(|o| String::from_utf8_lossy(&o).trim().to_owned())
        .unwrap_or_else(|_| remote.to_owned());
    let span = format!("{}..{}", range.base, range.tip);
    let shortlog = store.git_output(&["shortlog", &span])?;
    let stat = store.git_output(&[
        "diff",
        "--stat",
        &range.base.to_string(),
        &range.tip.to_string(),
    ])?;
    let rule = "-".repeat(64);
    Ok(format!(
        "The following changes since commit {}:\n\n  {}\n\nare available in the Git repository at:\n\n  {url} {branch}\n\n\
         for you to fetch changes up to {}:\n\n  {}\n\n{rule}\n{title}\n\n{body}{rule}\n{}\n{}",
        range.base,
        line(range.base)?,
        range.tip,
        line(range.tip)?,
        String::from_utf8_lossy(&shortlog).trim_end(),
        String::from_utf8_lossy(&stat),
    ))
}

/// The first line of `text`, trimmed and cut to 72 characters; `fallback` when it is empty.
fn first_line(text: &str, fallback: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or(fallback);
    if line.chars().count() > 72 {
        format!("{}…", line.chars().take(71).collect::<String>())
    } else {
        line.to_owned()
    }
}
