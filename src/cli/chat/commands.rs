//! The slash commands of a chat, in one table ([`COMMANDS`]: name, argument hint, description) and one
//! dispatcher ([`run`]) that works on an open [`AgentSession`] and answers with text, never touching the
//! terminal. The terminal chat and the piped one use both; ACP can list [`COMMANDS`] in
//! `available_commands_update` and pass a prompt `/name args` through [`parse`] and [`run`] the same way.
//!
//! What a command cannot do on the session alone (leave, start or switch sessions) it asks of the front-end
//! with an [`Action`].

use std::path::Path;

use crate::agent::{AgentSession, TurnControl};
use crate::config;
use crate::protocol::Sink;

use super::super::context::Context;
use super::super::error::CommandError;

/// One slash command.
#[derive(Debug, PartialEq, Eq)]
pub struct SlashCommand {
    /// Without the `/`.
    pub name: &'static str,
    /// What follows the name, as `/help` shows it (`[N]`, `<id>`); empty when nothing does.
    pub args: &'static str,
    pub description: &'static str,
}

/// Every slash command, in the order `/help` lists them.
pub const COMMANDS: &[SlashCommand] = &[
    cmd("help", "", "list the commands and keys"),
    cmd(
        "diff",
        "[--stat]",
        "the session's change so far (from step 0 or the base)",
    ),
    cmd(
        "undo",
        "[N]",
        "move the branch back N steps (default 1), checkout too",
    ),
    cmd(
        "accept",
        "",
        "bring the session's change into your working tree (three-way)",
    ),
    cmd("review", "", "take or leave the change hunk by hunk"),
    cmd(
        "compact",
        "[focus]",
        "summarise the older conversation now, with an optional focus",
    ),
    cmd(
        "context",
        "",
        "how much of the context window the conversation uses",
    ),
    cmd(
        "model",
        "[provider/model]",
        "show the model, or switch to another for the next turns",
    ),
    cmd("plan", "", "the plan the agent keeps"),
    cmd("memory", "", "project memory"),
    cmd("skills", "", "skills"),
    cmd(
        "sessions",
        "",
        "the sessions of this repository, newest first",
    ),
    cmd(
        "resume",
        "<id>",
        "switch to another session (any unique id prefix)",
    ),
    cmd("new", "", "start a new session"),
    cmd("exit", "", "leave (the session can be resumed)"),
];

const fn cmd(name: &'static str, args: &'static str, description: &'static str) -> SlashCommand {
    SlashCommand {
        name,
        args,
        description,
    }
}

/// A line that is a slash command.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// A known command and the rest of the line (trimmed).
    Known(&'static SlashCommand, &'a str),
    /// `/name` that no command has, with the names close to it.
    Unknown {
        name: &'a str,
        close: Vec<&'static str>,
    },
}

/// `Some` when `line` is a slash command: it starts with `/` and a name of letters, digits and `-`. A path
/// such as `/usr/bin/env is missing` is a prompt, and so is a line starting with a space.
pub fn parse(line: &str) -> Option<Parsed<'_>> {
    let line = line.trim_end();
    let rest = line.strip_prefix('/')?;
    let (name, args) = match rest.find(char::is_whitespace) {
        Some(at) => (&rest[..at], rest[at..].trim()),
        None => (rest, ""),
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return None;
    }
    Some(match COMMANDS.iter().find(|c| c.name == name) {
        Some(command) => Parsed::Known(command, args),
        None => Parsed::Unknown {
            name,
            close: close_to(name),
        },
    })
}

/// [`parse`] for a chat on `session`: `/name` of a command defined in a file (`.claude/commands/*.md`) is
/// not a slash command of the chat but a prompt, which the session expands (a built-in name wins).
pub fn parse_for<'a>(line: &'a str, session: &AgentSession) -> Option<Parsed<'a>> {
    match parse(line)? {
        Parsed::Unknown { name, .. } if session.file_commands().iter().any(|c| c.name == name) => {
            None
        }
        parsed => Some(parsed),
    }
}

/// The names of the built-in commands.
pub fn names() -> Vec<String> {
    COMMANDS.iter().map(|c| c.name.to_owned()).collect()
}

/// The names Tab completes in a chat on `session`: the built-in commands, then those defined in files.
pub fn names_for(session: &AgentSession) -> Vec<String> {
    let mut names = names();
    for command in session.file_commands() {
        if !names.contains(&command.name) {
            names.push(command.name.clone());
        }
    }
    names
}

/// Commands that `name` may have meant: those it begins, or at most two edits away.
fn close_to(name: &str) -> Vec<&'static str> {
    COMMANDS
        .iter()
        .map(|c| c.name)
        .filter(|c| c.starts_with(name) || name.starts_with(c) || edits(name, c) <= 2)
        .collect()
}

/// Levenshtein distance.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(row[j]).min(cur)
            };
            prev = cur;
        }
    }
    row[b.len()]
}

/// What the front-end should do after a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Continue,
    /// Leave (`/exit`).
    Exit,
    /// Close this session and open a new one (`/new`).
    New,
    /// Close this session and continue the one with this id (`/resume`), resolved already.
    Resume(String),
    /// Run `git agent review` on the terminal (it asks hunk by hunk), then [`Action::Reload`]. A front-end
    /// without a terminal runs [`review`] without arguments instead, which says what to give it.
    Review,
    /// Close this session and open it again, so the comments of a review join the conversation (the agent
    /// reads them when a session is resumed).
    Reload,
}

/// A command's answer: text for the user (a unified diff when `diff`, which a terminal may colour) and
/// what to do next.
#[derive(Debug)]
pub struct Reply {
    pub text: String,
    pub diff: bool,
    pub action: Action,
}

impl Reply {
    fn text(text: impl Into<String>) -> Reply {
        Reply {
            text: text.into(),
            diff: false,
            action: Action::Continue,
        }
    }

    fn action(text: impl Into<String>, action: Action) -> Reply {
        Reply {
            action,
            ..Reply::text(text)
        }
    }
}

/// What a command runs with: the session, where its events go (`/compact` asks the model), the control
/// that cancels it, and the command context (directory, environment).
pub struct Env<'a> {
    pub session: &'a mut AgentSession,
    pub sink: &'a mut dyn Sink,
    pub control: &'a TurnControl,
    pub ctx: &'a Context,
}

/// Runs a parsed command. An unknown one is an error that names the close ones.
pub async fn run(parsed: &Parsed<'_>, env: Env<'_>) -> Result<Reply, CommandError> {
    let (command, args) = match parsed {
        Parsed::Known(command, args) => (*command, *args),
        Parsed::Unknown { name, close } => return Err(unknown(name, close)),
    };
    match command.name {
        "help" => Ok(Reply::text(help(env.session.file_commands()))),
        "diff" => diff(env.session, args),
        "undo" => undo(env.session, args),
        "accept" => {
            let text = own(env.ctx.cwd(), "accept", env.session.id(), args)?;
            Ok(Reply::text(text))
        }
        "review" if args.is_empty() => Ok(Reply::action("", Action::Review)),
        "review" => review(env.ctx.cwd(), env.session.id(), args),
        "compact" => {
            let focus = (!args.is_empty()).then_some(args);
            let done = env.session.compact(focus, env.sink, env.control).await?;
            Ok(Reply::text(if done {
                "compacted: the older conversation is a summary now"
            } else if env.control.is_cancelled() {
                "compaction cancelled"
            } else {
                "nothing to compact yet: the conversation is only the newest exchange"
            }))
        }
        "context" => Ok(Reply::text(context(env.session))),
        "model" => model(env, args).await,
        "plan" => Ok(Reply::text(plan(env.session))),
        "memory" => Ok(Reply::text(memory(env.session))),
        "skills" => Ok(Reply::text(skills(env.session))),
        "sessions" => sessions(env.session),
        "resume" => resume(env.session, args),
        "new" => Ok(Reply::action("", Action::New)),
        "exit" => Ok(Reply::action("", Action::Exit)),
        other => Err(CommandError::internal(format!(
            "/{other} is in the table but has no handler"
        ))),
    }
}

fn unknown(name: &str, close: &[&str]) -> CommandError {
    let err = CommandError::user(format!("unknown command /{name}"));
    if close.is_empty() {
        err.hint("/help lists the commands; start the line with a space to send it as a prompt")
    } else {
        let close: Vec<String> = close.iter().map(|c| format!("/{c}")).collect();
        err.hint(format!("did you mean {}?", close.join(", ")))
    }
}

/// The table, the commands defined in files, then the keys of the terminal chat.
fn help(own: &[crate::config::agent_files::FileCommand]) -> String {
    let width = COMMANDS
        .iter()
        .map(|c| c.name.len() + 1 + c.args.len())
        .max()
        .unwrap_or(0);
    let mut out = String::from("commands:\n");
    for c in COMMANDS {
        let usage = if c.args.is_empty() {
            c.name.to_owned()
        } else {
            format!("{} {}", c.name, c.args)
        };
        out.push_str(&format!("  /{usage:<width$}  {}\n", c.description));
    }
    let own: Vec<_> = own
        .iter()
        .filter(|c| !COMMANDS.iter().any(|b| b.name == c.name))
        .collect();
    if !own.is_empty() {
        out.push_str("commands from files:\n");
        for c in own {
            let usage = format!("{} {}", c.name, c.argument_hint);
            out.push_str(&format!(
                "  /{:<width$}  {} ({})\n",
                usage.trim_end(),
                crate::protocol::neutralize(&c.description),
                c.source
            ));
        }
    }
    out.push_str(
        "keys:\n  Enter sends; Alt-Enter, Ctrl-J or a trailing \\ adds a line; Tab completes a command\n  \
         while a turn runs: type and Enter to steer it; Ctrl-C or Esc Esc cancels it\n  \
         Ctrl-O shows the last reasoning; Ctrl-L clears; Ctrl-Z suspends; Ctrl-C twice or Ctrl-D exits",
    );
    out
}

/// `/diff [--stat]`: git's diff from step 0 (or the base) to the tip, captured.
fn diff(session: &AgentSession, args: &str) -> Result<Reply, CommandError> {
    let s = session.session();
    let from = s.step0.unwrap_or(s.base).to_string();
    let mut cmd = crate::store::git::command(session.store().workdir());
    cmd.arg("diff").arg("--no-color");
    match args {
        "" => {}
        "--stat" => {
            cmd.arg("--stat");
        }
        other => {
            return Err(CommandError::user(format!(
                "/diff takes --stat or nothing, not '{other}'"
            )))
        }
    }
    cmd.arg(&from).arg(s.tip.to_string()).arg("--");
    let out = captured(&mut cmd, "git diff")?;
    if out.trim().is_empty() {
        return Ok(Reply::text(format!(
            "no change yet on {} (step {})",
            session.branch(),
            s.steps
        )));
    }
    Ok(Reply {
        text: out.trim_end().to_owned(),
        diff: args.is_empty(),
        action: Action::Continue,
    })
}

/// `/undo [N]` through the session (a separate `git agent undo` would be refused: this process holds the
/// session's lock).
fn undo(session: &mut AgentSession, args: &str) -> Result<Reply, CommandError> {
    let n = if args.is_empty() {
        1
    } else {
        match args.parse::<u32>() {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(CommandError::user(format!(
                    "/undo takes a number of steps (1 or more), not '{args}'"
                )))
            }
        }
    };
    let undone = session.undo(n)?;
    let branch = session.branch();
    Ok(Reply::text(format!(
        "{branch}: undid {n} step{}, now at step {} ({})\nhint: to redo, run `git update-ref refs/heads/{branch} {}`",
        plural(n as usize),
        undone.steps,
        undone.to.to_hex_with_len(7),
        undone.from
    )))
}

/// `git agent review <id> [args]` with its output captured (no terminal: the decisions come from `args`),
/// then [`Action::Reload`] so comments on what was left reach the agent.
pub fn review(cwd: &Path, id: &str, args: &str) -> Result<Reply, CommandError> {
    let text = own(cwd, "review", id, args)?;
    Ok(Reply::action(text, Action::Reload))
}

/// `git agent <command> <id> <args>` run by this very executable, its output captured; a failure is an
/// error carrying its message and hints.
fn own(cwd: &Path, command: &str, id: &str, args: &str) -> Result<String, CommandError> {
    let mut cmd = own_command(cwd, command, id, args)?;
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| CommandError::internal(format!("cannot run `git agent {command}`: {e}")))?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    let text = text.trim_end().to_owned();
    if out.status.success() {
        Ok(text)
    } else {
        let text = text.strip_prefix("error: ").unwrap_or(&text).to_owned();
        Err(CommandError::user(text))
    }
}

/// The command line of `git agent <command> <id> <args>` (arguments split as a shell would, quotes
/// grouping), for a front-end that runs it on the terminal.
pub fn own_command(
    cwd: &Path,
    command: &str,
    id: &str,
    args: &str,
) -> Result<std::process::Command, CommandError> {
    let exe = std::env::current_exe().map_err(|e| {
        CommandError::internal(format!("cannot find the git-agent executable: {e}"))
    })?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg(command).arg(id).args(split(args)?).current_dir(cwd);
    Ok(cmd)
}

/// Words as a shell splits them: whitespace between, `'...'` and `"..."` grouping.
fn split(args: &str) -> Result<Vec<String>, CommandError> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote = None;
    for c in args.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_with(String::new).push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    if quote.is_some() {
        return Err(CommandError::user(format!("unbalanced quote in '{args}'")));
    }
    words.extend(word);
    Ok(words)
}

fn context(session: &AgentSession) -> String {
    let (used, window) = (session.context_used(), session.context_window());
    let share = (used.saturating_mul(100)).checked_div(window).unwrap_or(0);
    let usage = session.usage();
    format!(
        "context: about {used} of {window} tokens ({share}%): the conversation and the tool schemas the next \
         request carries\nsession: {} tokens in, {} out so far (cost {}); {} step{} on {}\nhint: /compact \
         [focus] summarises the older conversation now",
        usage.input_tokens,
        usage.output_tokens,
        crate::protocol::format_usd(session.cost()),
        session.steps(),
        plural(session.steps() as usize),
        session.branch()
    )
}

/// `/model` shows the model; `/model provider/model` switches to it (resolved as `--model` would be).
async fn model(env: Env<'_>, args: &str) -> Result<Reply, CommandError> {
    let session = env.session;
    if args.is_empty() {
        return Ok(Reply::text(format!(
            "model: {} (context window {} tokens)\nhint: /model <provider>/<model> switches",
            session.model_name(),
            session.context_window()
        )));
    }
    let lookup = |name: &str| env.ctx.env(name);
    let settings = config::Settings::load(env.ctx.cwd(), &lookup)?;
    let model = settings.resolve(Some(args), &lookup)?;
    session.set_model(model).await?;
    Ok(Reply::text(format!(
        "model: {} from the next turn on (context window {} tokens)",
        session.model_name(),
        session.context_window()
    )))
}

/// The entries this session was given and its proposals not written yet; the store itself is
/// `git agent memory list`'s.
fn memory(session: &AgentSession) -> String {
    let memory = session.memory();
    if !memory.is_on() {
        return "memory is off for this session (--no-memory, or memory.enabled = false in the config)".into();
    }
    let injected = memory.injected();
    let mut out = if injected.is_empty() {
        "memory: no entries given to this session".to_owned()
    } else {
        format!(
            "memory: {} entr{} given to this session: {}",
            injected.len(),
            if injected.len() == 1 { "y" } else { "ies" },
            injected.join(", ")
        )
    };
    for pending in memory.pending() {
        out.push_str(&format!("\nproposed: {}", pending.proposal.text));
    }
    if !memory.pending().is_empty() {
        out.push_str("\n(proposals become entries when the session ends done)");
    }
    out.push_str(
        "\nhint: `git agent memory list` shows every entry, `git agent memory show <id>` one",
    );
    out
}

/// The skills the model can load, with their use counts, and the ones left out and why.
fn skills(session: &AgentSession) -> String {
    let catalog = session.skills();
    let mut out = if catalog.skills.is_empty() {
        "no skills: put Agent Skills folders in .agents/skills/ or store them with `git agent skill add`"
            .to_owned()
    } else {
        format!(
            "{} skill{}:",
            catalog.skills.len(),
            plural(catalog.skills.len())
        )
    };
    for skill in &catalog.skills {
        out.push_str(&format!(
            "\n  {} ({}, {} use{}, {} done): {}",
            skill.name(),
            skill.source.shown(skill.name()),
            skill.stats.uses,
            plural(skill.stats.uses as usize),
            skill.stats.successes,
            skill.doc.description.lines().next().unwrap_or_default()
        ));
    }
    for skill in &catalog.shadowed {
        out.push_str(&format!(
            "\n  {} at {} is shadowed by an earlier source",
            skill.name(),
            skill.source.shown(skill.name())
        ));
    }
    for problem in &catalog.problems {
        out.push_str(&format!("\n  {problem}"));
    }
    out
}

fn plan(session: &AgentSession) -> String {
    let plan = session.plan();
    if plan.is_empty() {
        return "no plan yet: the agent keeps one with plan_update on longer tasks".into();
    }
    format!(
        "plan ({} of {} done):\n{}",
        plan.done(),
        plan.items.len(),
        plan.render().trim_end()
    )
}

/// `/sessions`: as `git agent log`, the current one marked.
fn sessions(session: &AgentSession) -> Result<Reply, CommandError> {
    let store = session.store();
    let mut out = String::new();
    let all = store.list_sessions()?;
    for meta in all.iter().take(20) {
        let mark = if meta.id == session.id() { "*" } else { " " };
        let prompt = meta.prompt.lines().next().unwrap_or_default();
        let line = format!(
            "{mark} {}  {}  {:<11} {:>3} step{}  {prompt}",
            meta.id,
            super::super::context::when(meta.created),
            meta.status.as_str(),
            meta.steps,
            if meta.steps == 1 { " " } else { "s" },
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if all.len() > 20 {
        out.push_str(&format!(
            "... and {} older (`git agent log` lists them all)\n",
            all.len() - 20
        ));
    }
    out.push_str("hint: /resume <id> switches to one");
    Ok(Reply::text(out))
}

fn resume(session: &AgentSession, args: &str) -> Result<Reply, CommandError> {
    if args.is_empty() {
        return Err(CommandError::user(
            "/resume needs a session id: /sessions lists them",
        ));
    }
    let id = session.store().resolve_session(Some(args))?;
    if id == session.id() {
        return Ok(Reply::text(format!("already in session {id}")));
    }
    Ok(Reply::action("", Action::Resume(id)))
}

/// Runs `cmd` with its output captured; a failure is an error with git's message.
fn captured(cmd: &mut std::process::Command, what: &str) -> Result<String, CommandError> {
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| CommandError::internal(format!("cannot run {what}: {e}")))?;
    if !out.status.success() {
        return Err(CommandError::internal(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_commands_only_when_they_start_with_a_name() {
        let undo = COMMANDS.iter().find(|c| c.name == "undo").unwrap();
        assert_eq!(parse("/undo 2"), Some(Parsed::Known(undo, "2")));
        assert_eq!(parse("/undo  "), Some(Parsed::Known(undo, "")));
        assert_eq!(
            parse(" /undo"),
            None,
            "a leading space sends it as a prompt"
        );
        assert_eq!(parse("/usr/bin/env is missing"), None);
        assert_eq!(parse("fix the /undo command"), None);
        assert_eq!(parse("/"), None);
        assert_eq!(
            parse("/dif"),
            Some(Parsed::Unknown {
                name: "dif",
                close: vec!["diff"]
            })
        );
        assert_eq!(
            parse("/contxt"),
            Some(Parsed::Unknown {
                name: "contxt",
                close: vec!["context"]
            })
        );
        assert!(
            matches!(parse("/zzzzzz"), Some(Parsed::Unknown { close, .. }) if close.is_empty())
        );
    }

    #[test]
    fn the_table_is_complete_and_help_lists_it() {
        let names = names();
        for wanted in [
            "diff", "undo", "accept", "review", "compact", "context", "model", "plan", "memory",
            "skills", "sessions", "resume", "new", "exit", "help",
        ] {
            assert!(names.iter().any(|n| n == wanted), "/{wanted} missing");
        }
        let text = help(&[]);
        for c in COMMANDS {
            assert!(text.contains(&format!("/{}", c.name)), "{text}");
        }
        assert_eq!(
            split("--leave a.rs --comment 'not like this' \"b c\"").unwrap(),
            ["--leave", "a.rs", "--comment", "not like this", "b c"]
        );
        assert!(split("'open").is_err());
        let err = unknown("dif", &["diff"]);
        assert_eq!(err.message(), "unknown command /dif");
        assert_eq!(err.hints(), ["did you mean /diff?"]);
    }
}
