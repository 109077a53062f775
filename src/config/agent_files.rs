//! Subagents and commands defined in files, as other agents keep them (issue 26): subagents in
//! `.claude/agents/*.md`, `.agents/agents/*.md` (front matter `name`, `description`, `tools`, `model`; the
//! body is the system prompt) and Codex's `.codex/agents/*.toml`; commands in `.claude/commands/*.md` and
//! `.agents/commands/*.md` (front matter `description`, `argument-hint`, `allowed-tools`, `model`; the body is
//! the prompt, with `$ARGUMENTS` and `$1`..`$9`). Each from the repository and from the home directory; on a
//! name found twice the repository's wins, then the earlier directory.
//!
//! They need no trust, unlike event hooks: they are prompts, not commands, read like the repository's
//! AGENTS.md, which the model reads anyway. What they could ask for is bounded elsewhere: a subagent's or a
//! command's tool list can only narrow the session's tools, and every call still passes the session's
//! policy, approvals, sandbox and event hooks.

use std::path::Path;

/// Where subagents live, relative to the repository or the home directory; `toml` for Codex's files.
const AGENT_DIRS: [(&str, bool); 3] = [
    (".claude/agents", false),
    (".agents/agents", false),
    (".codex/agents", true),
];
/// Where commands live.
const COMMAND_DIRS: [&str; 2] = [".claude/commands", ".agents/commands"];
/// The largest definition file read (a prompt, not a data set).
const MAX_FILE: u64 = 256 * 1024;

/// One subagent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentDef {
    pub name: String,
    pub description: String,
    /// The tools it may use, as written (Claude Code's names or ours); `None`: all of the session's.
    pub tools: Option<Vec<String>>,
    /// `provider/model`, or `None` for the session's (Claude Code's `inherit`, `sonnet`, ... included).
    pub model: Option<String>,
    pub prompt: String,
    /// The file, as a person names it (`.claude/agents/reviewer.md`, `~/.codex/agents/x.toml`).
    pub source: String,
}

/// One command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileCommand {
    pub name: String,
    pub description: String,
    pub argument_hint: String,
    /// `allowed-tools`: the tools a turn it starts may use; `None`: all.
    pub allowed_tools: Option<Vec<String>>,
    pub model: Option<String>,
    pub body: String,
    pub source: String,
}

impl FileCommand {
    /// The prompt for `/name args`: `$ARGUMENTS` is `args` as typed, `$1`..`$9` its words; a body that
    /// names neither gets the arguments appended, so they are never lost.
    pub fn expand(&self, args: &str) -> String {
        let words: Vec<&str> = args.split_whitespace().collect();
        let mut text = self.body.replace("$ARGUMENTS", args);
        for n in (1..=9).rev() {
            let word = words.get(n - 1).copied().unwrap_or_default();
            text = text.replace(&format!("${n}"), word);
        }
        if !self.body.contains('$') && !args.is_empty() {
            text = format!("{}\n\n{args}", text.trim_end());
        }
        text
    }
}

/// Whether `tool` (our name) is in `list` (a subagent's `tools`, a command's `allowed-tools`), by its own
/// name or Claude Code's; `Bash(git diff:*)` counts as `Bash` (the session's rules judge the command).
pub fn tool_allowed(list: &[String], tool: &str) -> bool {
    let claude = super::event_hooks::claude_name(tool);
    list.iter().any(|entry| {
        let name = entry.split('(').next().unwrap_or_default().trim();
        name == tool || Some(name) == claude || name == "*"
    })
}

/// Subagents of the repository at `workdir` and of `home`; and the problems of files left out.
pub fn load_agents(workdir: &Path, home: Option<&Path>) -> (Vec<AgentDef>, Vec<String>) {
    let mut agents: Vec<AgentDef> = Vec::new();
    let mut problems = Vec::new();
    for (root, shown) in roots(workdir, home) {
        for (dir, toml) in AGENT_DIRS {
            let ext = if toml { "toml" } else { "md" };
            for (path, text) in files(&root.join(dir), ext) {
                let source = format!("{shown}{dir}/{}", file_name(&path));
                let parsed = if toml {
                    parse_codex_agent(&text, &path, &source)
                } else {
                    parse_agent(&text, &path, &source)
                };
                match parsed {
                    Ok(agent) if agents.iter().any(|a| a.name == agent.name) => {}
                    Ok(agent) => agents.push(agent),
                    Err(problem) => problems.push(format!("{source}: {problem}")),
                }
            }
        }
    }
    (agents, problems)
}

/// Commands of the repository at `workdir` and of `home`.
pub fn load_commands(workdir: &Path, home: Option<&Path>) -> Vec<FileCommand> {
    let mut commands: Vec<FileCommand> = Vec::new();
    for (root, shown) in roots(workdir, home) {
        for dir in COMMAND_DIRS {
            for (path, text) in files(&root.join(dir), "md") {
                let name = stem(&path);
                if !valid_name(&name) || commands.iter().any(|c| c.name == name) {
                    continue;
                }
                let (front, body) = front_matter(&text);
                let field = |key: &str| field(&front, key);
                commands.push(FileCommand {
                    description: field("description").unwrap_or_default(),
                    argument_hint: field("argument-hint").unwrap_or_default(),
                    allowed_tools: field("allowed-tools").map(|t| list(&t)),
                    model: field("model").and_then(|m| own_model(&m)),
                    body: body.trim().to_owned(),
                    source: format!("{shown}{dir}/{}", file_name(&path)),
                    name,
                });
            }
        }
    }
    commands
}

/// The repository first (its definitions win), then the home directory, each with how a source is shown.
fn roots(workdir: &Path, home: Option<&Path>) -> Vec<(std::path::PathBuf, &'static str)> {
    let mut roots = vec![(workdir.to_path_buf(), "")];
    if let Some(home) = home.filter(|h| *h != workdir) {
        roots.push((home.to_path_buf(), "~/"));
    }
    roots
}

/// The `*.ext` files of `dir`, by name, as text (unreadable, huge or non-UTF-8 ones left out).
fn files(dir: &Path, ext: &str) -> Vec<(std::path::PathBuf, String)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|p| {
            let text = crate::safety::bounded::read_text_or_skip(
                &p,
                "an agent or command file",
                MAX_FILE,
            )?;
            Some((p, text))
        })
        .collect()
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Letters, digits, `-` and `_`: what a `/name` or a tool argument can carry.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn parse_agent(text: &str, path: &Path, source: &str) -> Result<AgentDef, String> {
    let (front, body) = front_matter(text);
    let name = field(&front, "name").unwrap_or_else(|| stem(path));
    if !valid_name(&name) {
        return Err(format!("the name '{name}' is not letters, digits, - and _"));
    }
    if body.trim().is_empty() {
        return Err("no system prompt (the body after the front matter is empty)".into());
    }
    Ok(AgentDef {
        description: field(&front, "description").unwrap_or_default(),
        tools: field(&front, "tools").map(|t| list(&t)),
        model: field(&front, "model").and_then(|m| own_model(&m)),
        prompt: body.trim().to_owned(),
        source: source.to_owned(),
        name,
    })
}

/// Codex's subagent file: `name`, `description`, `model`, `tools`, and the prompt as `instructions` (or
/// `developer_instructions`, `prompt`).
fn parse_codex_agent(text: &str, path: &Path, source: &str) -> Result<AgentDef, String> {
    let doc = toml_edit::Document::parse(text.to_owned()).map_err(|e| e.message().to_owned())?;
    let string = |key: &str| doc.get(key).and_then(|v| v.as_str()).map(str::to_owned);
    let name = string("name").unwrap_or_else(|| stem(path));
    if !valid_name(&name) {
        return Err(format!("the name '{name}' is not letters, digits, - and _"));
    }
    let prompt = string("instructions")
        .or_else(|| string("developer_instructions"))
        .or_else(|| string("prompt"))
        .filter(|p| !p.trim().is_empty())
        .ok_or("no `instructions`: the subagent's system prompt")?;
    let tools = match doc.get("tools") {
        Some(item) => match item.as_array() {
            Some(array) => Some(
                array
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect(),
            ),
            None => item.as_str().map(list),
        },
        None => None,
    };
    Ok(AgentDef {
        description: string("description").unwrap_or_default(),
        tools,
        model: string("model").and_then(|m| own_model(&m)),
        prompt: prompt.trim().to_owned(),
        source: source.to_owned(),
        name,
    })
}

/// A model named in a file, if it is one of ours (`provider/model`); Claude Code's aliases (`inherit`,
/// `sonnet`, `opus`, `haiku`) mean the session's model.
fn own_model(model: &str) -> Option<String> {
    let model = model.trim();
    model.contains('/').then(|| model.to_owned())
}

/// `Read, Grep`, `[Read, Grep]`, or YAML's `- Read` lines (joined by [`front_matter`]) as a list.
fn list(text: &str) -> Vec<String> {
    text.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split([',', '\n'])
        .map(|t| {
            t.trim()
                .trim_start_matches('-')
                .trim()
                .trim_matches(['"', '\''])
        })
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Splits `---` front matter from the body: the front matter as `key: value` pairs (a key followed by
/// indented `- item` lines gets them, one a line), YAML's quoting removed. No front matter: all body.
fn front_matter(text: &str) -> (Vec<(String, String)>, &str) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return (Vec::new(), text);
    };
    let (front, body) = match rest.find("\n---") {
        Some(at) => {
            let after = &rest[at + 4..];
            let body = after.find('\n').map_or("", |nl| &after[nl + 1..]);
            (&rest[..at], body)
        }
        None => return (Vec::new(), text),
    };
    let mut pairs: Vec<(String, String)> = Vec::new();
    for line in front.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || trimmed.is_empty() {
            continue;
        }
        if let (Some(item), Some(last)) = (trimmed.strip_prefix("- "), pairs.last_mut()) {
            if line.starts_with([' ', '-']) {
                if !last.1.is_empty() {
                    last.1.push('\n');
                }
                last.1.push_str(item.trim());
                continue;
            }
        }
        if let Some((key, value)) = trimmed.split_once(':') {
            let value = value.trim().trim_matches(['"', '\'']).to_owned();
            pairs.push((key.trim().to_owned(), value));
        }
    }
    (pairs, body)
}

fn field(pairs: &[(String, String)], key: &str) -> Option<String> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_lists_and_bodies() {
        let text = "---\nname: reviewer\ndescription: \"Reviews code\"\ntools: Read, Grep\nmodel: sonnet\n---\nYou review.\n";
        let agent = parse_agent(text, Path::new("x.md"), "src").expect("parses");
        assert_eq!(agent.name, "reviewer");
        assert_eq!(agent.description, "Reviews code");
        assert_eq!(
            agent.tools,
            Some(vec!["Read".to_owned(), "Grep".to_owned()])
        );
        assert_eq!((agent.model, agent.prompt.as_str()), (None, "You review."));
        let yaml = "---\ntools:\n  - Read\n  - Edit\nmodel: openai/gpt-4.1\n---\nbody";
        let agent = parse_agent(yaml, Path::new("writer.md"), "src").expect("parses");
        assert_eq!(agent.name, "writer");
        assert_eq!(
            agent.tools,
            Some(vec!["Read".to_owned(), "Edit".to_owned()])
        );
        assert_eq!(agent.model.as_deref(), Some("openai/gpt-4.1"));
        let codex = "name = \"x\"\ntools = [\"Read\"]\ninstructions = \"do\"\n";
        let agent = parse_codex_agent(codex, Path::new("x.toml"), "src").expect("parses");
        assert_eq!(
            (agent.tools, agent.prompt.as_str()),
            (Some(vec!["Read".to_owned()]), "do")
        );
    }

    #[test]
    fn arguments_expand() {
        let command = FileCommand {
            name: "fix-issue".into(),
            description: String::new(),
            argument_hint: String::new(),
            allowed_tools: None,
            model: None,
            body: "Fix issue #$1 ($ARGUMENTS), priority $2.".into(),
            source: String::new(),
        };
        assert_eq!(
            command.expand("123 high"),
            "Fix issue #123 (123 high), priority high."
        );
        let plain = FileCommand {
            body: "Review the code.".into(),
            ..command
        };
        assert_eq!(plain.expand("src/"), "Review the code.\n\nsrc/");
    }
}
