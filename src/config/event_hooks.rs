//! Event hooks: commands run at points of a session (before a tool call, after one, when the user submits a
//! prompt, when the turn stops, ...), in the format Claude Code made the convention (issue 26). Named "event
//! hooks" everywhere so nobody takes them for git's hooks (`git agent hook` is about those).
//!
//! Where they come from, each source read whole:
//! - the repository: `.claude/settings.json`, `.claude/settings.local.json` and Codex's `.codex/hooks.json`;
//!   they are commands a clone brings along, so they run only once the user trusted that file's exact
//!   content ([`super::trust::Kind::EventHooks`]);
//! - the user's own: `~/.claude/settings.json`, `~/.codex/hooks.json` and `event_hooks` in the user's
//!   config file (the same shape in TOML: `[[event_hooks.PreToolUse]]` with `matcher` and `hooks`, or a
//!   `command` directly), which need no trust.
//!
//! The shape: `{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command":
//! "...", "timeout": 30}]}]}}` (the `hooks` wrapper may be left out). Events this version does not know
//! (Claude Code has more) are skipped; a file that is not that shape is a problem reported once, never a
//! failed session.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

/// The repository's hook files, relative to the top of its work tree, in the order they are read.
pub const REPO_FILES: [&str; 3] = [
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".codex/hooks.json",
];
/// The user's own hook files, relative to the home directory.
const HOME_FILES: [&str; 2] = [".claude/settings.json", ".codex/hooks.json"];
/// A hook's time limit when it names none (Claude Code's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The points of a session a hook can run at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HookEvent {
    SessionStart,
    UserPromptSubmit,
    PreToolUse,
    PostToolUse,
    PostToolUseFailure,
    PreCompact,
    Stop,
    SubagentStop,
    SessionEnd,
    /// The agent asks the user's approval for a call.
    Notification,
}

impl HookEvent {
    /// Every event, in the order a session meets them.
    pub const ALL: [HookEvent; 10] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::PostToolUseFailure,
        HookEvent::PreCompact,
        HookEvent::Stop,
        HookEvent::SubagentStop,
        HookEvent::SessionEnd,
        HookEvent::Notification,
    ];

    /// The name in the files and in `hook_event_name`.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PostToolUseFailure => "PostToolUseFailure",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::Notification => "Notification",
        }
    }

    fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|e| e.as_str() == name)
    }
}

/// One command to run at one event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventHook {
    pub event: HookEvent,
    /// Which tools (or, for other events, which sources) it is for: a regular expression matched against
    /// the whole name; empty or `*` for all.
    pub matcher: String,
    /// A shell command (`sh -c`), run in the session's checkout.
    pub command: String,
    pub timeout: Duration,
    /// The file it comes from, as a person would name it (`.claude/settings.json`, `~/.codex/hooks.json`).
    pub source: String,
}

impl EventHook {
    /// Whether the hook is for `names` (a tool's Claude Code name and its own, or a source like `startup`).
    pub fn matches(&self, names: &[&str]) -> bool {
        let matcher = self.matcher.trim();
        if matcher.is_empty() || matcher == "*" || names.is_empty() {
            return true;
        }
        // Anchored: `Bash` is the Bash tool and not `BashOutput`, as in Claude Code; `Edit|Write` works.
        let Ok(regex) = grep_regex::RegexMatcher::new(&format!("^(?:{matcher})$")) else {
            return false;
        };
        names
            .iter()
            .any(|name| grep_matcher::Matcher::is_match(&regex, name.as_bytes()).unwrap_or(false))
    }
}

/// The Claude Code name of one of our tools, which matchers written for Claude Code use; `None` when the
/// tool has only its own name (MCP tools are already `mcp__server__tool`).
pub fn claude_name(tool: &str) -> Option<&'static str> {
    Some(match tool {
        "run" => "Bash",
        "edit_file" => "Edit",
        "write_file" => "Write",
        "read_file" => "Read",
        "search" => "Grep",
        "list_files" => "Glob",
        "web_fetch" => "WebFetch",
        "explore" | "agent" => "Task",
        _ => return None,
    })
}

/// Reads the hooks of one file's JSON: `{"hooks": {...}}` or the events object itself.
pub fn parse(value: &Value, source: &str) -> Result<Vec<EventHook>, String> {
    let events = match value.get("hooks") {
        Some(hooks) => hooks,
        None if value.is_object() => value,
        None => return Err(format!("{source}: expected a JSON object")),
    };
    let Some(events) = events.as_object() else {
        return Err(format!("{source}: `hooks` must be an object of events"));
    };
    let mut hooks = Vec::new();
    for (name, groups) in events {
        let Some(event) = HookEvent::parse(name) else {
            continue;
        };
        let Some(groups) = groups.as_array() else {
            return Err(format!(
                "{source}: `{name}` must be a list of matcher groups"
            ));
        };
        for group in groups {
            let matcher = group
                .get("matcher")
                .and_then(Value::as_str)
                .unwrap_or_default();
            // The nested form, or a command given directly in the group (a shorthand for the TOML table).
            let commands: Vec<&Value> = match group.get("hooks").and_then(Value::as_array) {
                Some(list) => list.iter().collect(),
                None => vec![group],
            };
            for entry in commands {
                let kind = entry
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("command");
                if kind != "command" {
                    // `prompt` hooks ask a model; this version runs commands only.
                    continue;
                }
                let Some(command) = entry.get("command").and_then(Value::as_str) else {
                    return Err(format!("{source}: a `{name}` hook has no `command`"));
                };
                let timeout = entry
                    .get("timeout")
                    .and_then(Value::as_f64)
                    .filter(|t| *t > 0.0)
                    .map_or(DEFAULT_TIMEOUT, Duration::from_secs_f64);
                hooks.push(EventHook {
                    event,
                    matcher: matcher.to_owned(),
                    command: command.to_owned(),
                    timeout,
                    source: source.to_owned(),
                });
            }
        }
    }
    Ok(hooks)
}

/// Whether a file's text defines any hook (a `settings.json` that only sets permissions asks to run nothing).
pub fn defines_hooks(text: &str) -> bool {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|value| parse(&value, "").ok())
        .is_some_and(|hooks| !hooks.is_empty())
}

/// A repository hook file's content, for trust: its path and text, when it defines hooks.
pub fn repo_files(workdir: &Path) -> Vec<(String, String)> {
    REPO_FILES
        .iter()
        .filter_map(|rel| {
            let text = crate::safety::bounded::read_text_or_skip(
                &workdir.join(rel),
                "a settings file",
                crate::safety::bounded::CONFIG_LIMIT,
            )?;
            defines_hooks(&text).then(|| ((*rel).to_owned(), text))
        })
        .collect()
}

/// Every hook a session in the repository at `workdir` runs, and what was left out.
#[derive(Debug, Default)]
pub struct Found {
    pub hooks: Vec<EventHook>,
    /// Repository files with hooks whose content the user has not trusted (nothing of them runs).
    pub untrusted: Vec<String>,
    /// Files that could not be read as hooks.
    pub problems: Vec<String>,
}

/// Reads the hooks: the user's own files and config (`own`, the JSON shape of `event_hooks`), then those
/// of the repository's files that `trusted(path, text)` says the user trusted.
pub fn load(
    workdir: &Path,
    home: Option<&Path>,
    own: Option<&Value>,
    trusted: &dyn Fn(&str, &str) -> bool,
) -> Found {
    let mut found = Found::default();
    let take = |found: &mut Found, value: Result<Value, String>, source: &str| match value
        .and_then(|v| parse(&v, source))
    {
        Ok(hooks) => found.hooks.extend(hooks),
        Err(problem) => found.problems.push(problem),
    };
    if let Some(home) = home {
        for rel in HOME_FILES {
            if let Some(text) = crate::safety::bounded::read_text_or_skip(
                &home.join(rel),
                "a settings file",
                crate::safety::bounded::CONFIG_LIMIT,
            ) {
                let value = serde_json::from_str(&text).map_err(|e| format!("~/{rel}: {e}"));
                take(&mut found, value, &format!("~/{rel}"));
            }
        }
    }
    if let Some(own) = own {
        take(&mut found, Ok(own.clone()), "event_hooks in your config");
    }
    for (rel, text) in repo_files(workdir) {
        if !trusted(&rel, &text) {
            found.untrusted.push(rel);
            continue;
        }
        let value = serde_json::from_str(&text).map_err(|e| format!("{rel}: {e}"));
        take(&mut found, value, &rel);
    }
    found
}

/// The notice for repository hook files left out because they are not trusted.
pub fn untrusted_notice(files: &[String]) -> Option<String> {
    (!files.is_empty()).then(|| {
        format!(
            "{} define event hooks that were not run: not trusted yet; read them and trust them with `git agent trust`",
            files.join(", ")
        )
    })
}

/// A TOML value (the `event_hooks` table of the user's config) as JSON, so it reads like the JSON files.
pub fn toml_to_json(item: &toml_edit::Item) -> Value {
    match item {
        toml_edit::Item::Value(value) => toml_value(value),
        toml_edit::Item::Table(table) => Value::Object(
            table
                .iter()
                .map(|(k, v)| (k.to_owned(), toml_to_json(v)))
                .collect(),
        ),
        toml_edit::Item::ArrayOfTables(tables) => Value::Array(
            tables
                .iter()
                .map(|t| toml_to_json(&toml_edit::Item::Table(t.clone())))
                .collect(),
        ),
        toml_edit::Item::None => Value::Null,
    }
}

fn toml_value(value: &toml_edit::Value) -> Value {
    use toml_edit::Value as T;
    match value {
        T::String(s) => Value::String(s.value().clone()),
        T::Integer(i) => Value::from(*i.value()),
        T::Float(f) => Value::from(*f.value()),
        T::Boolean(b) => Value::Bool(*b.value()),
        T::Datetime(d) => Value::String(d.value().to_string()),
        T::Array(items) => Value::Array(items.iter().map(toml_value).collect()),
        T::InlineTable(table) => Value::Object(
            table
                .iter()
                .map(|(k, v)| (k.to_owned(), toml_value(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_claude_shape_and_the_flat_one_read_alike() {
        let claude = serde_json::json!({"hooks": {"PreToolUse": [{"matcher": "Bash",
            "hooks": [{"type": "command", "command": "./block.sh", "timeout": 5}]}],
            "PermissionRequest": [{"hooks": [{"type": "command", "command": "x"}]}]}});
        let hooks = parse(&claude, ".claude/settings.json").expect("parses");
        assert_eq!(hooks.len(), 1, "unknown events are skipped");
        assert_eq!(hooks[0].event, HookEvent::PreToolUse);
        assert_eq!(hooks[0].timeout, Duration::from_secs(5));
        let flat = serde_json::json!({"Stop": [{"command": "true"}]});
        let hooks = parse(&flat, "config").expect("parses");
        assert_eq!(
            (hooks[0].event, hooks[0].timeout),
            (HookEvent::Stop, DEFAULT_TIMEOUT)
        );
        assert!(parse(&serde_json::json!({"hooks": {"Stop": 1}}), "f").is_err());
    }

    #[test]
    fn matchers_are_anchored_regexes_over_both_names() {
        let hook = |matcher: &str| EventHook {
            event: HookEvent::PreToolUse,
            matcher: matcher.into(),
            command: String::new(),
            timeout: DEFAULT_TIMEOUT,
            source: String::new(),
        };
        assert!(hook("Bash").matches(&["Bash", "run"]));
        assert!(hook("run").matches(&["Bash", "run"]));
        assert!(!hook("Bas").matches(&["Bash", "run"]));
        assert!(hook("Edit|Write").matches(&["Write", "write_file"]));
        assert!(hook("*").matches(&["Read", "read_file"]));
        assert!(hook("mcp__git__.*").matches(&["mcp__git__status"]));
        assert!(!hook("(").matches(&["Bash"]), "a bad regex matches nothing");
    }

    #[test]
    fn toml_reads_as_the_json_shape() {
        let doc: toml_edit::Document<String> = toml_edit::Document::parse(
            "[[event_hooks.PreToolUse]]\nmatcher = \"Bash\"\nhooks = [{type = \"command\", command = \"x\", timeout = 2}]\n"
                .to_owned(),
        )
        .expect("toml");
        let json = toml_to_json(&doc["event_hooks"]);
        let hooks = parse(&json, "config").expect("parses");
        assert_eq!(hooks[0].matcher, "Bash");
        assert_eq!(hooks[0].timeout, Duration::from_secs(2));
    }
}
