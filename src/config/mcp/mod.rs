//! Which MCP servers a session gets: the `[mcp_servers.<name>]` tables of the user's config.toml (Codex's
//! keys) and a project's `.mcp.json` (Claude Code's format), turned into [`ServerSpec`]s.
//!
//! A project file comes with whatever the user cloned, and a stdio server is a command: so a `.mcp.json`
//! starts nothing until the user trusted it (`git agent trust`, or `git agent mcp trust`). Trust is kept in
//! the user's own state ([`super::trust`]), keyed by a hash of the file's content, so a file that changed (a
//! pull, a branch switch) needs trusting again. A repository's `.git-agent.toml` may not define servers at all, for the same
//! reason.
//!
//! Values may hold keys (env values, headers, a bearer token from `bearer_token_env_var`): they are
//! registered with the redactor, so they never reach git, and only their names are ever shown. `${VAR}` and
//! `${VAR:-default}` are expanded in `.mcp.json` (as Claude Code does) and in config.toml's `env` and
//! `http_headers` values, reading the agent's original environment (secrets included, see
//! `safety::secrets`): that is how a key reaches a server without being written into a file.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value as Json;
use toml_edit::Item;

use super::error::ConfigError;
use super::syntax::{span_of, Ctx, KeyType, Scope, Span};

pub use super::syntax::PROJECT_FILE;

const SERVER_KEYS: &str = "command, args, env, cwd, url, http_headers, bearer_token_env_var, \
                           startup_timeout_sec, tool_timeout_sec, enabled, enabled_tools, disabled_tools";

/// How long a server gets to start and answer `initialize` and `tools/list` unless configured otherwise
/// (Codex's default).
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one tool call may take unless configured otherwise (Codex's default).
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// Everything needed to start and use one server. Values may hold secrets (env, headers), so `Debug`
/// shows only names.
#[derive(Clone, PartialEq)]
pub struct ServerSpec {
    /// The name the user gave it (`[mcp_servers.<name>]`, a key of `mcpServers`).
    pub name: String,
    pub transport: TransportSpec,
    pub startup_timeout: Duration,
    pub tool_timeout: Duration,
    /// Only these tools, when set (`enabled_tools`).
    pub enabled_tools: Option<Vec<String>>,
    /// Never these tools (`disabled_tools`).
    pub disabled_tools: Vec<String>,
    /// The sandbox a stdio server starts under, when the session gives it one: a repository's server starts
    /// in the checkout the model writes to, where `python -m tools.srv`, `npm run mcp` or `go run ./cmd`
    /// run whatever the model wrote there (issue 23, finding 1).
    pub sandbox: Option<Confinement>,
}

/// A session's sandbox as a server's: compared by identity, as two specs share one session's sandbox.
#[derive(Clone, Debug)]
pub struct Confinement(pub std::sync::Arc<crate::safety::sandbox::Sandbox>);

impl PartialEq for Confinement {
    fn eq(&self, other: &Confinement) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// How to reach a server.
#[derive(Clone, PartialEq)]
pub enum TransportSpec {
    Stdio {
        command: String,
        args: Vec<String>,
        /// Added to the (already scrubbed) environment of the agent.
        env: Vec<(String, String)>,
        /// The working directory; the session's checkout when `None`.
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        /// Sent with every request (a bearer token from `bearer_token_env_var` is among them).
        headers: Vec<(String, String)>,
    },
}

impl fmt::Debug for ServerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerSpec")
            .field("name", &self.name)
            .field("transport", &self.transport)
            .field("startup_timeout", &self.startup_timeout)
            .field("tool_timeout", &self.tool_timeout)
            .field("enabled_tools", &self.enabled_tools)
            .field("disabled_tools", &self.disabled_tools)
            .field("sandboxed", &self.sandbox.is_some())
            .finish()
    }
}

// Env and header values may be keys: only their names are shown.
impl fmt::Debug for TransportSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = |pairs: &[(String, String)]| -> Vec<String> {
            pairs.iter().map(|(name, _)| name.clone()).collect()
        };
        match self {
            TransportSpec::Stdio {
                command,
                args,
                env,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &names(env))
                .field("cwd", cwd)
                .finish(),
            TransportSpec::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &names(headers))
                .finish(),
        }
    }
}

impl ServerSpec {
    /// A spec with the default timeouts and no tool filter.
    pub fn new(name: impl Into<String>, transport: TransportSpec) -> ServerSpec {
        ServerSpec {
            name: name.into(),
            transport,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            enabled_tools: None,
            disabled_tools: Vec::new(),
            sandbox: None,
        }
    }

    /// The values of its env variables and headers: whatever their names, a server may print them, so what
    /// it prints is redacted of them (issue 23, finding 4).
    pub fn secrets(&self) -> impl Iterator<Item = &str> {
        let pairs = match &self.transport {
            TransportSpec::Stdio { env, .. } => env,
            TransportSpec::Http { headers, .. } => headers,
        };
        pairs.iter().map(|(_, value)| value.as_str())
    }

    /// Whether the filters let the model see `tool`.
    pub fn offers(&self, tool: &str) -> bool {
        let enabled = self
            .enabled_tools
            .as_ref()
            .is_none_or(|list| list.iter().any(|t| t == tool));
        enabled && !self.disabled_tools.iter().any(|t| t == tool)
    }
}

/// One `[mcp_servers.<name>]` table as written (before `${VAR}` expansion).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct McpTable {
    pub name: String,
    pub command: Option<String>,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<String>,
    pub url: Option<String>,
    pub http_headers: Vec<(String, String)>,
    pub bearer_token_env_var: Option<String>,
    pub startup_timeout: Option<Duration>,
    pub tool_timeout: Option<Duration>,
    pub enabled: bool,
    pub enabled_tools: Option<Vec<String>>,
    pub disabled_tools: Vec<String>,
    /// Where the table starts.
    pub line: usize,
}

/// The type of `mcp_servers.<name>.<rest>`, for `config get|set`.
pub(super) fn key_type(rest: &[&str]) -> Option<KeyType> {
    match rest {
        ["command" | "cwd" | "url" | "bearer_token_env_var"] => Some(KeyType::String),
        ["args" | "enabled_tools" | "disabled_tools"] => Some(KeyType::StringList),
        ["env" | "http_headers"] => Some(KeyType::Table),
        ["env" | "http_headers", _] => Some(KeyType::String),
        ["startup_timeout_sec" | "tool_timeout_sec"] => Some(KeyType::Seconds),
        ["enabled"] => Some(KeyType::Bool),
        _ => None,
    }
}

impl Ctx<'_> {
    /// The `mcp_servers` table: one table per server.
    pub(super) fn mcp_servers(
        &self,
        item: &Item,
        span: Span,
    ) -> Result<Vec<McpTable>, ConfigError> {
        if self.scope == Scope::Repo {
            return Err(self.error(
                span,
                "mcp_servers",
                "not allowed in a repository's .git-agent.toml (a cloned repository could run commands); \
                 put project servers in .mcp.json, which starts nothing until `git agent mcp trust`",
            ));
        }
        let table = self.table(item, "mcp_servers", span)?;
        let mut servers = Vec::new();
        for (name, item) in table.iter() {
            let span = span_of(table, name, item);
            servers.push(self.mcp_server(name, item, span)?);
        }
        Ok(servers)
    }

    fn mcp_server(&self, name: &str, item: &Item, span: Span) -> Result<McpTable, ConfigError> {
        let prefix = format!("mcp_servers.{name}");
        if !valid_name(name) {
            return Err(self.error(
                span,
                &prefix,
                "a server name may hold only letters, digits, `_` and `-`",
            ));
        }
        let table = self.table(item, &prefix, span.clone())?;
        let mut server = McpTable {
            name: name.to_string(),
            enabled: true,
            line: span
                .clone()
                .map_or(1, |s| super::syntax::line_of(self.text, s.start)),
            ..McpTable::default()
        };
        for (key, item) in table.iter() {
            let span = span_of(table, key, item);
            let full = format!("{prefix}.{key}");
            match key {
                "command" => server.command = Some(self.string(item, &full, span)?),
                "args" => server.args = self.strings(item, &full, span)?,
                "env" => server.env = self.string_table(item, &full, span)?,
                "cwd" => server.cwd = Some(self.string(item, &full, span)?),
                "url" => {
                    let url = self.string(item, &full, span.clone())?;
                    if !(url.starts_with("http://") || url.starts_with("https://")) {
                        return Err(self.error(span, &full, "expected an http:// or https:// URL"));
                    }
                    server.url = Some(url);
                }
                "http_headers" => server.http_headers = self.headers(item, &full, span)?,
                "bearer_token_env_var" => {
                    server.bearer_token_env_var = Some(self.string(item, &full, span)?)
                }
                "startup_timeout_sec" => {
                    server.startup_timeout = Some(self.seconds(item, &full, span)?)
                }
                "tool_timeout_sec" => server.tool_timeout = Some(self.seconds(item, &full, span)?),
                "enabled" => server.enabled = self.boolean(item, &full, span)?,
                "enabled_tools" => server.enabled_tools = Some(self.strings(item, &full, span)?),
                "disabled_tools" => server.disabled_tools = self.strings(item, &full, span)?,
                _ => return Err(self.unknown(&full, span, SERVER_KEYS)),
            }
        }
        self.check_transport(&server, &prefix, span)?;
        Ok(server)
    }

    /// Exactly one of `command` and `url`, and no keys of the other transport.
    fn check_transport(
        &self,
        server: &McpTable,
        prefix: &str,
        span: Span,
    ) -> Result<(), ConfigError> {
        let problem = match (&server.command, &server.url) {
            (None, None) => {
                Some("needs `command` (a stdio server) or `url` (a Streamable HTTP server)")
            }
            (Some(_), Some(_)) => {
                Some("has both `command` and `url`; a server is one or the other")
            }
            (Some(_), None)
                if !server.http_headers.is_empty() || server.bearer_token_env_var.is_some() =>
            {
                Some("http_headers and bearer_token_env_var are for `url` servers")
            }
            (None, Some(_))
                if !server.args.is_empty() || !server.env.is_empty() || server.cwd.is_some() =>
            {
                Some("args, env and cwd are for `command` servers")
            }
            _ => None,
        };
        match problem {
            Some(message) => Err(self.error(span, prefix, message)),
            None => Ok(()),
        }
    }

    fn strings(&self, item: &Item, key: &str, span: Span) -> Result<Vec<String>, ConfigError> {
        let value = self.value(item, key, span.clone())?;
        value
            .as_array()
            .and_then(|array| {
                array
                    .iter()
                    .map(|v| v.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
            })
            .ok_or_else(|| self.error(span, key, "expected an array of strings"))
    }

    fn string_table(
        &self,
        item: &Item,
        key: &str,
        span: Span,
    ) -> Result<Vec<(String, String)>, ConfigError> {
        let table = self.table(item, key, span)?;
        let mut pairs = Vec::new();
        for (name, item) in table.iter() {
            let span = span_of(table, name, item);
            let full = format!("{key}.{name}");
            match self.value(item, &full, span.clone())?.as_str() {
                Some(text) => pairs.push((name.to_string(), text.to_string())),
                None => return Err(self.error(span, &full, "expected a string")),
            }
        }
        Ok(pairs)
    }
}

/// Server names as Codex accepts them: they become part of tool names and rule patterns.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Where a server was defined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    User { path: PathBuf, line: usize },
    Project { path: PathBuf },
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::User { path, line } => write!(f, "{}:{line}", path.display()),
            Origin::Project { path } => write!(f, "{}", path.display()),
        }
    }
}

/// One configured server: its spec, or why it cannot be used (a `${VAR}` that is not set, a bad entry in
/// `.mcp.json`).
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub name: String,
    pub origin: Origin,
    pub enabled: bool,
    pub spec: Result<ServerSpec, String>,
}

/// The state of the project's `.mcp.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Project {
    pub path: PathBuf,
    /// Whether the user trusted this content.
    pub trusted: bool,
    /// The servers it defines (started only when trusted).
    pub names: Vec<String>,
    /// Why it could not be read, if it could not.
    pub error: Option<String>,
}

/// Every server a session in this repository may start.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct McpConfig {
    /// User servers first, then a trusted project's (a name the user defined wins).
    pub entries: Vec<Entry>,
    pub project: Option<Project>,
}

impl McpConfig {
    /// The servers to start: enabled, and valid.
    pub fn to_start(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| e.enabled)
    }

    /// The sentence for a project file that was skipped because it is not trusted, if it was.
    pub fn untrusted_notice(&self) -> Option<String> {
        let project = self
            .project
            .as_ref()
            .filter(|p| !p.trusted && p.error.is_none())?;
        Some(format!(
            "{} defines MCP servers ({}) that were not started: this file's content is not trusted yet\n\
             hint: read it, then run `git agent mcp trust` to start them in later sessions",
            project.path.display(),
            project.names.join(", ")
        ))
    }
}

/// Gathers the servers of the user's file and, when the repository has one, its `.mcp.json`.
/// `workdir` is the repository's work tree, `git_dir` its common git directory (where trust is kept), `env`
/// the agent's original environment.
pub fn load(
    user: &[McpTable],
    user_path: &Path,
    repo: Option<(&Path, &Path)>,
    env: &dyn Fn(&str) -> Option<String>,
) -> McpConfig {
    let mut config = McpConfig::default();
    for table in user {
        config.entries.push(Entry {
            name: table.name.clone(),
            origin: Origin::User {
                path: user_path.to_path_buf(),
                line: table.line,
            },
            enabled: table.enabled,
            spec: user_spec(table, env),
        });
    }
    let Some((workdir, git_dir)) = repo else {
        return config;
    };
    let path = workdir.join(PROJECT_FILE);
    let Some(bytes) = crate::safety::bounded::read_or_skip(
        &path,
        "a configuration file",
        crate::safety::bounded::CONFIG_LIMIT,
    ) else {
        return config;
    };
    let trusted = is_trusted(git_dir, &bytes);
    let mut project = Project {
        path: path.clone(),
        trusted,
        names: Vec::new(),
        error: None,
    };
    match parse_project(&bytes, env) {
        Err(message) => project.error = Some(message),
        Ok(servers) => {
            for (name, spec) in servers {
                project.names.push(name.clone());
                if !trusted || config.entries.iter().any(|e| e.name == name) {
                    continue;
                }
                config.entries.push(Entry {
                    name,
                    origin: Origin::Project { path: path.clone() },
                    enabled: true,
                    spec: spec.map(|spec| anchored_in(spec, workdir)),
                });
            }
        }
    }
    config.project = Some(project);
    config
}

/// A project server whose command and script arguments name files of the repository, pointed at the user's
/// own work tree: the server runs in the session's checkout, where the model writes, and `sh tools/srv.sh`
/// started there would run whatever the model wrote into it, outside the sandbox, on the next `--resume`
/// (issue 23, finding 1). The user trusted `.mcp.json` as it reads in their work tree, so the files it names
/// are taken from there. A relative command with a `/` is always anchored; an argument is when it names a
/// file of the work tree (`--repository .` names a folder and stays relative to the checkout).
fn anchored_in(mut spec: ServerSpec, workdir: &Path) -> ServerSpec {
    let TransportSpec::Stdio {
        command, args, cwd, ..
    } = &mut spec.transport
    else {
        return spec;
    };
    let base = cwd
        .as_ref()
        .map_or_else(|| workdir.to_path_buf(), |c| workdir.join(c));
    if command.contains('/') && Path::new(command.as_str()).is_relative() {
        *command = base.join(command.as_str()).display().to_string();
    }
    for arg in args.iter_mut() {
        let relative = !arg.starts_with('-') && Path::new(arg.as_str()).is_relative();
        if relative && base.join(arg.as_str()).is_file() {
            *arg = base.join(arg.as_str()).display().to_string();
        }
    }
    spec
}

/// The files of the work tree `workdir` that a project server's (anchored) command line names: what it will
/// run, and what a `--here` session, which writes into that same tree, must not have changed.
pub fn files_run(spec: &ServerSpec, workdir: &Path) -> Vec<PathBuf> {
    let TransportSpec::Stdio { command, args, .. } = &spec.transport else {
        return Vec::new();
    };
    std::iter::once(command)
        .chain(args)
        .map(Path::new)
        .filter(|p| p.is_absolute() && p.starts_with(workdir) && p.is_file())
        .filter_map(|p| p.strip_prefix(workdir).ok().map(Path::to_path_buf))
        .collect()
}

/// A user table as a spec; `${VAR}` in env and header values expanded, the bearer token looked up.
fn user_spec(table: &McpTable, env: &dyn Fn(&str) -> Option<String>) -> Result<ServerSpec, String> {
    let transport = match (&table.command, &table.url) {
        (Some(command), _) => TransportSpec::Stdio {
            command: command.clone(),
            args: table.args.clone(),
            env: expand_env_pairs(&table.env, env)?,
            cwd: table.cwd.as_ref().map(PathBuf::from),
        },
        (None, Some(url)) => {
            let mut headers = expand_header_pairs(&table.http_headers, env)?;
            if let Some(var) = &table.bearer_token_env_var {
                let token = env(var)
                    .filter(|t| !t.trim().is_empty())
                    .ok_or_else(|| format!("bearer_token_env_var {var} is not set"))?;
                crate::safety::redact::register(&token, var);
                headers.push(("Authorization".into(), format!("Bearer {}", token.trim())));
            }
            TransportSpec::Http {
                url: url.clone(),
                headers,
            }
        }
        // Parsing guarantees one of the two.
        (None, None) => return Err("needs `command` or `url`".into()),
    };
    let mut spec = ServerSpec::new(&table.name, transport);
    spec.startup_timeout = table.startup_timeout.unwrap_or(DEFAULT_STARTUP_TIMEOUT);
    spec.tool_timeout = table.tool_timeout.unwrap_or(DEFAULT_TOOL_TIMEOUT);
    spec.enabled_tools = table.enabled_tools.clone();
    spec.disabled_tools = table.disabled_tools.clone();
    Ok(spec)
}

/// Env values expanded; values of secret-looking names (and anything expanded from a secret variable) are
/// registered with the redactor.
fn expand_env_pairs(
    pairs: &[(String, String)],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, String> {
    pairs
        .iter()
        .map(|(name, value)| {
            let (value, secret) = expand(value, env).map_err(|e| format!("env {name}: {e}"))?;
            if secret || crate::safety::secrets::is_secret_name(name) {
                crate::safety::redact::register(&value, name);
            }
            Ok((name.clone(), value))
        })
        .collect()
}

/// Header values expanded; every value is registered with the redactor (headers are how keys travel).
fn expand_header_pairs(
    pairs: &[(String, String)],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, String> {
    pairs
        .iter()
        .map(|(name, value)| {
            let (value, _) = expand(value, env).map_err(|e| format!("header {name}: {e}"))?;
            let token = value.strip_prefix("Bearer ").unwrap_or(&value);
            crate::safety::redact::register(token, &format!("header {name}"));
            Ok((name.clone(), value))
        })
        .collect()
}

/// Expands `${VAR}` and `${VAR:-default}`; `$` not followed by `{` stays as it is. Returns the text and
/// whether a secret-looking variable went into it. A variable that is not set and has no default is an
/// error naming it.
pub fn expand(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<(String, bool), String> {
    let mut out = String::with_capacity(text.len());
    let mut secret = false;
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("`${{` without a closing `}}` in {text:?}"))?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        let valid = !name.is_empty()
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !name.as_bytes()[0].is_ascii_digit();
        if !valid {
            return Err(format!("`${{{inner}}}` does not name a variable"));
        }
        match (env(name).filter(|v| !v.is_empty()), default) {
            (Some(value), _) => {
                secret |= crate::safety::secrets::is_secret_name(name);
                out.push_str(&value);
            }
            (None, Some(default)) => out.push_str(default),
            (None, None) => return Err(format!("environment variable {name} is not set")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok((out, secret))
}

/// One server of `.mcp.json`: its name, and its spec or why it cannot be used.
pub type ProjectServer = (String, Result<ServerSpec, String>);

/// Parses `.mcp.json`: `{"mcpServers": {"<name>": {...}}}`. A file that is not JSON or has no
/// `mcpServers` object is an error; a bad entry only makes that server unusable.
pub fn parse_project(
    bytes: &[u8],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<ProjectServer>, String> {
    let value: Json = serde_json::from_slice(bytes).map_err(|e| format!("not valid JSON: {e}"))?;
    let servers = value
        .get("mcpServers")
        .and_then(Json::as_object)
        .ok_or("no `mcpServers` object")?;
    Ok(servers
        .iter()
        .map(|(name, entry)| (name.clone(), project_spec(name, entry, env)))
        .collect())
}

fn project_spec(
    name: &str,
    entry: &Json,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerSpec, String> {
    if !valid_name(name) {
        return Err("a server name may hold only letters, digits, `_` and `-`".into());
    }
    let text = |key: &str| -> Result<Option<String>, String> {
        match entry.get(key) {
            None | Some(Json::Null) => Ok(None),
            Some(Json::String(s)) => expand(s, env)
                .map(|(s, _)| Some(s))
                .map_err(|e| format!("{key}: {e}")),
            Some(_) => Err(format!("`{key}` must be a string")),
        }
    };
    let pairs = |key: &str| -> Result<Vec<(String, String)>, String> {
        match entry.get(key) {
            None | Some(Json::Null) => Ok(Vec::new()),
            Some(Json::Object(map)) => map
                .iter()
                .map(|(k, v)| {
                    v.as_str()
                        .map(|v| (k.clone(), v.to_string()))
                        .ok_or_else(|| format!("`{key}.{k}` must be a string"))
                })
                .collect(),
            Some(_) => Err(format!("`{key}` must be an object of strings")),
        }
    };
    let kind = text("type")?;
    let command = text("command")?;
    let url = text("url")?;
    let transport = match (kind.as_deref(), command, url) {
        (None | Some("stdio"), Some(command), _) => {
            let args = match entry.get("args") {
                None | Some(Json::Null) => Vec::new(),
                Some(Json::Array(items)) => items
                    .iter()
                    .map(|a| {
                        a.as_str()
                            .ok_or_else(|| "`args` must be strings".to_string())
                            .and_then(|a| expand(a, env).map(|(a, _)| a).map_err(|e| format!("args: {e}")))
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err("`args` must be an array of strings".into()),
            };
            TransportSpec::Stdio {
                command,
                args,
                env: expand_env_pairs(&pairs("env")?, env)?,
                cwd: text("cwd")?.map(PathBuf::from),
            }
        }
        (None | Some("http" | "streamable-http" | "streamableHttp"), None, Some(url)) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!("`url` must be an http:// or https:// URL, not {url:?}"));
            }
            TransportSpec::Http {
                url,
                headers: expand_header_pairs(&pairs("headers")?, env)?,
            }
        }
        (Some("sse"), _, _) => {
            return Err("type \"sse\" (the old HTTP+SSE transport) is not supported; use a Streamable HTTP endpoint (type \"http\")".into())
        }
        (Some(other), _, _) if !matches!(other, "stdio" | "http" | "streamable-http" | "streamableHttp") => {
            return Err(format!("unknown type {other:?} (known: stdio, http)"))
        }
        (Some("stdio"), None, _) => return Err("a stdio server needs `command`".into()),
        _ => return Err("needs `command` (stdio) or `url` (http)".into()),
    };
    Ok(ServerSpec::new(name, transport))
}

/// The `mcpServers` of ACP's `session/new` (an editor's list, trusted as the user's own):
/// `[{name, command, args, env: [{name, value}]}, {type: "http", name, url, headers: [{name, value}]}]`.
/// Not a list is an error; a bad entry only makes that server unusable.
pub fn parse_acp(servers: &Json) -> Result<Vec<ProjectServer>, String> {
    let list = servers.as_array().ok_or("`mcpServers` must be an array")?;
    Ok(list
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let name = entry
                .get("name")
                .and_then(Json::as_str)
                .map_or_else(|| format!("server{}", i + 1), str::to_string);
            // ACP spells env and headers as lists of {name, value}; `.mcp.json` as objects.
            let mut object = entry.clone();
            for key in ["env", "headers"] {
                if let Some(Json::Array(pairs)) = entry.get(key) {
                    let map: serde_json::Map<String, Json> = pairs
                        .iter()
                        .filter_map(|p| {
                            Some((
                                p.get("name")?.as_str()?.to_string(),
                                p.get("value")?.clone(),
                            ))
                        })
                        .collect();
                    object[key] = Json::Object(map);
                }
            }
            // No `${VAR}` expansion: the editor sends values, not templates.
            let spec = project_spec(&name, &object, &|_| None);
            (name, spec)
        })
        .collect())
}

/// A hash of the file's content, as git would name it as a blob.
/// Whether this content of `.mcp.json` was trusted in this repository (see [`super::trust`]).
pub fn is_trusted(git_dir: &Path, bytes: &[u8]) -> bool {
    super::trust::Ledger::for_repo(git_dir).standing(&super::trust::Item::mcp_servers(bytes))
        == super::trust::Standing::Trusted
}

/// Records that the user trusts this content; returns its hash.
pub fn trust(git_dir: &Path, bytes: &[u8]) -> Result<String, super::trust::TrustError> {
    let item = super::trust::Item::mcp_servers(bytes);
    super::trust::Ledger::for_repo(git_dir).trust(std::slice::from_ref(&item))?;
    Ok(item.hash())
}

#[cfg(test)]
mod tests;
