//! `git agent mcp`: the MCP servers the agent can use; list them, check one, trust a project's
//! `.mcp.json`, or probe any server by URL or command (the entry point of the MCP conformance suite).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use super::context::Context;
use super::error::{CommandError, ErrorKind};
use crate::config::mcp::{self as mcp_config, Entry, McpConfig, Origin, PROJECT_FILE};
use crate::config::Settings;
use crate::tools::mcp::{self, render, Failure, ServerSpec, Started, TransportSpec};

/// List, check, trust or probe MCP servers
///
/// Servers come from [mcp_servers.<name>] tables in your config file and from a project's .mcp.json, which
/// starts nothing until you trust its content with `git agent mcp trust`.
#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(subcommand)]
    command: McpCommand,
}

#[derive(Debug, Subcommand)]
enum McpCommand {
    /// List the configured servers and where each comes from
    List {
        /// Print one JSON object per server
        #[arg(long)]
        json: bool,
    },
    /// Start a server, do the handshake, list its tools and say what went wrong
    Check {
        /// The server's name
        name: String,
        /// Print the result as one JSON object
        #[arg(long)]
        json: bool,
    },
    /// Trust the project's .mcp.json as it is now, so sessions start its servers
    Trust,
    /// Connect to any server (an http(s) URL, or a command and its arguments) and list its tools
    ///
    /// With --call it also calls a tool; with --call-all (implied when MCP_CONFORMANCE_SCENARIO is set, as the
    /// MCP conformance suite does) it calls every tool with sample arguments made from its schema.
    Probe {
        /// Call this tool after listing
        #[arg(long, value_name = "TOOL", conflicts_with = "call_all")]
        call: Option<String>,
        /// The arguments of --call, as a JSON object
        #[arg(long, value_name = "JSON", requires = "call", default_value = "{}")]
        args: String,
        /// Call every tool with sample arguments (only for test servers: tools may change things)
        #[arg(long)]
        call_all: bool,
        /// Seconds for the start and the handshake
        #[arg(long, value_name = "SECS", default_value_t = 10.0)]
        timeout: f64,
        /// A URL, or a command and its arguments
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "URL|COMMAND"
        )]
        target: Vec<String>,
    },
}

pub fn run(ctx: &Context, args: McpArgs) -> Result<(), CommandError> {
    match args.command {
        McpCommand::List { json } => list(ctx, json),
        McpCommand::Check { name, json } => check(ctx, &name, json),
        McpCommand::Trust => trust(ctx),
        McpCommand::Probe {
            call,
            args,
            call_all,
            timeout,
            target,
        } => {
            let call_all = call_all || std::env::var_os("MCP_CONFORMANCE_SCENARIO").is_some();
            let call = match call {
                Some(name) => Some((name, parse_args(&args)?)),
                None => None,
            };
            probe(ctx, &target, call, call_all, timeout)
        }
    }
}

/// The repository of the current directory, if any: (work tree, git directory).
fn repo(ctx: &Context) -> Option<(PathBuf, PathBuf)> {
    let store = ctx.store().ok()?;
    Some((
        store.workdir().to_path_buf(),
        store.common_dir().to_path_buf(),
    ))
}

/// Every configured server of this repository, and the directory servers run in (the work tree).
fn load(ctx: &Context) -> Result<(McpConfig, PathBuf), CommandError> {
    // The agent's original environment, secrets included: `${VAR}` may name one.
    let env = |name: &str| ctx.env(name);
    let settings = Settings::load(ctx.cwd(), &env)?;
    let repo = repo(ctx);
    let config = mcp_config::load(
        &settings.user.mcp_servers,
        &settings.user.path,
        repo.as_ref().map(|(w, g)| (w.as_path(), g.as_path())),
        &env,
    );
    let root = repo.map_or_else(|| ctx.cwd().to_path_buf(), |(w, _)| w);
    Ok((config, root))
}

fn list(ctx: &Context, as_json: bool) -> Result<(), CommandError> {
    let (config, _) = load(ctx)?;
    for entry in &config.entries {
        if as_json {
            print_json(&entry_json(entry));
        } else {
            let state = match (&entry.spec, entry.enabled) {
                (Err(_), _) => "invalid",
                (Ok(_), false) => "disabled",
                (Ok(_), true) => "enabled",
            };
            println!(
                "{:<16} {state:<9} {}",
                visible(&entry.name),
                describe(entry)
            );
            println!(
                "{:<16} {:<9} from {}",
                "",
                "",
                shown(&entry.origin.to_string())
            );
            if let Err(problem) = &entry.spec {
                println!("{:<16} {:<9} {}", "", "", shown(problem));
            }
        }
    }
    if let Some(project) = &config.project {
        if let Some(error) = &project.error {
            eprintln!(
                "warning: {}: {}; its servers are not used",
                project.path.display(),
                shown(error)
            );
        } else if !project.trusted {
            if as_json {
                for name in &project.names {
                    print_json(
                        &json!({"name": name, "origin": project.path, "trusted": false, "enabled": false}),
                    );
                }
            } else {
                for name in &project.names {
                    println!(
                        "{:<16} {:<9} from {}",
                        visible(name),
                        "untrusted",
                        project.path.display()
                    );
                }
            }
            if let Some(notice) = config.untrusted_notice() {
                for line in notice.lines() {
                    eprintln!("{}", prefix_hint(&visible(line)));
                }
            }
        }
    }
    if config.entries.is_empty() && config.project.is_none() && !as_json {
        eprintln!("no MCP servers configured");
        eprintln!("hint: add [mcp_servers.<name>] with command or url to your config (git agent config path), or a {PROJECT_FILE} to the repository");
    }
    Ok(())
}

/// File- and server-supplied text as it may reach the terminal: escape sequences, other control characters
/// and bidi overrides replaced (issue 23, finding 6: a `.mcp.json` argument or a tool description could
/// retitle, clear or rewrite the very screen that asks for trust).
fn shown(text: &str) -> String {
    crate::protocol::Untrusted::text(text).to_string()
}

/// A command line or a name with every control character and invisible formatting character written out
/// (`\r`, `\x1b`, `\u{202e}`), so what the user reads before trusting is exactly what will run: a
/// `\r\e[K` in an argument must not hide `curl ... | sh` behind a harmless command.
fn visible(text: &str) -> String {
    crate::safety::quote::visible(text)
}

fn prefix_hint(line: &str) -> String {
    if line.starts_with("hint:") {
        line.to_string()
    } else {
        format!("warning: {line}")
    }
}

/// How a server is reached, for people: the command line or the URL, never env or header values.
fn describe(entry: &Entry) -> String {
    match &entry.spec {
        Ok(spec) => describe_spec(spec),
        Err(_) => String::new(),
    }
}

fn describe_spec(spec: &ServerSpec) -> String {
    match &spec.transport {
        TransportSpec::Stdio {
            command, args, env, ..
        } => {
            let mut line = std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ");
            if !env.is_empty() {
                let names: Vec<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
                line.push_str(&format!(" (env: {})", visible(&names.join(", "))));
            }
            visible(&crate::safety::redact::redact(&line))
        }
        TransportSpec::Http { url, headers } => {
            let mut line = visible(&crate::safety::redact::redact(
                url.split('?').next().unwrap_or(url),
            ));
            if !headers.is_empty() {
                let names: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
                line.push_str(&format!(" (headers: {})", visible(&names.join(", "))));
            }
            line
        }
    }
}

fn entry_json(entry: &Entry) -> Value {
    let mut value = json!({
        "name": entry.name,
        "origin": entry.origin.to_string(),
        "project": matches!(entry.origin, Origin::Project { .. }),
        "enabled": entry.enabled,
    });
    match &entry.spec {
        Ok(spec) => {
            value["transport"] = json!(match spec.transport {
                TransportSpec::Stdio { .. } => "stdio",
                TransportSpec::Http { .. } => "http",
            });
            value["target"] = json!(describe_spec(spec));
        }
        Err(problem) => value["error"] = json!(problem),
    }
    value
}

fn check(ctx: &Context, name: &str, as_json: bool) -> Result<(), CommandError> {
    let (config, root) = load(ctx)?;
    let Some(entry) = config.entries.iter().find(|e| e.name == name) else {
        if let Some(project) = config
            .project
            .as_ref()
            .filter(|p| p.names.iter().any(|n| n == name))
        {
            return Err(CommandError::user(format!(
                "server '{name}' is defined in {}, whose content is not trusted yet",
                project.path.display()
            ))
            .hint("read the file, then run `git agent mcp trust`"));
        }
        let known: Vec<&str> = config.entries.iter().map(|e| e.name.as_str()).collect();
        return Err(CommandError::user(format!(
            "no MCP server named '{name}' (configured: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )));
    };
    let spec = entry.spec.as_ref().map_err(|problem| {
        CommandError::config(format!(
            "server '{name}' ({}) cannot be used: {problem}",
            entry.origin
        ))
    })?;
    run_async(async {
        let result = mcp::start(spec, &root).await;
        let client = result.as_ref().ok().map(|s| s.client.clone());
        let code = report(spec, result, as_json);
        if let Some(client) = client {
            client.shutdown().await;
        }
        code
    })?
}

/// Prints the outcome of a start (the caller shuts the server down); exit 1 when it failed.
fn report(
    spec: &ServerSpec,
    result: Result<Started, Failure>,
    as_json: bool,
) -> Result<(), CommandError> {
    match result {
        Ok(started) => {
            let info = started.client.info();
            if as_json {
                let tools: Vec<Value> = started
                    .tools
                    .iter()
                    .map(|t| json!({"name": t.name, "read_only": t.read_only, "model_name": mcp::names::tool_name(&spec.name, &t.name), "invalid": t.invalid}))
                    .collect();
                print_json(
                    &json!({"name": spec.name, "ok": true, "server": info.name, "version": info.version,
                           "protocol_version": info.protocol_version, "tools": tools, "filtered": started.filtered}),
                );
            } else {
                println!(
                    "{}: connected to {} {} (MCP {}), {} tool{}{}",
                    visible(&spec.name),
                    visible(or_unnamed(&info.name)),
                    visible(&info.version),
                    visible(&info.protocol_version),
                    started.tools.len(),
                    if started.tools.len() == 1 { "" } else { "s" },
                    if started.filtered > 0 {
                        format!(
                            " ({} held back by enabled_tools/disabled_tools)",
                            started.filtered
                        )
                    } else {
                        String::new()
                    }
                );
                for tool in &started.tools {
                    let first = tool.description.lines().next().unwrap_or_default();
                    let marker = if tool.read_only { " [read-only]" } else { "" };
                    let about = match &tool.invalid {
                        Some(problem) => format!(
                            "(not offered: its inputSchema is not valid JSON Schema: {problem})"
                        ),
                        None => crate::tools::short(first, 80),
                    };
                    println!("  {}{marker}  {}", visible(&tool.name), shown(&about));
                }
            }
            Ok(())
        }
        Err(failure) => {
            if as_json {
                print_json(
                    &json!({"name": spec.name, "ok": false, "error": failure.message, "stderr": failure.stderr}),
                );
                return Err(CommandError::shown(ErrorKind::Internal));
            }
            let detail = if failure.stderr.is_empty() {
                vec!["(it wrote nothing to stderr)".to_string()]
            } else {
                std::iter::once("its last stderr lines:".to_string())
                    .chain(
                        failure
                            .stderr
                            .iter()
                            .map(|line| format!("  {}", shown(line))),
                    )
                    .collect()
            };
            Err(CommandError::internal(format!(
                "MCP server '{}' failed: {}",
                visible(&spec.name),
                shown(&failure.message)
            ))
            .detail(detail))
        }
    }
}

fn or_unnamed(name: &str) -> &str {
    if name.is_empty() {
        "an unnamed server"
    } else {
        name
    }
}

fn trust(ctx: &Context) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let (workdir, git_dir) = (store.workdir(), store.common_dir());
    let path = workdir.join(PROJECT_FILE);
    let bytes = std::fs::read(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => CommandError::user(format!(
            "{} does not exist: nothing to trust",
            path.display()
        )),
        _ => CommandError::internal(format!("cannot read {}: {e}", path.display())),
    })?;
    let servers = mcp_config::parse_project(&bytes, &|name| ctx.env(name))
        .map_err(|e| CommandError::config(format!("{}: {e}; nothing trusted", path.display())))?;
    let hash =
        mcp_config::trust(git_dir, &bytes).map_err(|e| CommandError::internal(e.to_string()))?;
    // What was trusted is shown, so a user who ran this without reading the file still sees the commands.
    println!(
        "trusted {} ({}): sessions here will start:",
        path.display(),
        &hash[..12.min(hash.len())]
    );
    for (name, spec) in &servers {
        match spec {
            Ok(spec) => println!("  {}: {}", visible(name), describe_spec(spec)),
            Err(problem) => println!("  {}: (unusable: {})", visible(name), shown(problem)),
        }
    }
    println!("a change to the file needs `git agent mcp trust` again");
    Ok(())
}

fn usage(message: impl Into<String>) -> CommandError {
    CommandError::new(ErrorKind::Usage, message)
}

fn parse_args(text: &str) -> Result<Value, CommandError> {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(usage("--args must be a JSON object")),
        Err(e) => Err(usage(format!("--args is not valid JSON: {e}"))),
    }
}

fn probe(
    ctx: &Context,
    target: &[String],
    call: Option<(String, Value)>,
    call_all: bool,
    timeout: f64,
) -> Result<(), CommandError> {
    let first = target
        .first()
        .ok_or_else(|| usage("probe needs a URL or a command"))?;
    let transport = if first.starts_with("http://") || first.starts_with("https://") {
        if target.len() > 1 {
            return Err(usage("a URL takes no further arguments"));
        }
        TransportSpec::Http {
            url: first.clone(),
            headers: Vec::new(),
        }
    } else {
        TransportSpec::Stdio {
            command: first.clone(),
            args: target[1..].to_vec(),
            env: Vec::new(),
            cwd: None,
        }
    };
    let mut spec = ServerSpec::new("probe", transport);
    spec.startup_timeout = Duration::try_from_secs_f64(timeout)
        .ok()
        .filter(|t| !t.is_zero())
        .ok_or_else(|| usage("--timeout must be a positive number of seconds"))?;
    let root = repo(ctx).map_or_else(|| ctx.cwd().to_path_buf(), |(w, _)| w);
    run_async(probe_calls(spec, root, call, call_all))?
}

/// The async part of `probe`: start, list, call, stop, on one runtime (the connection's tasks live on it).
async fn probe_calls(
    spec: ServerSpec,
    root: PathBuf,
    call: Option<(String, Value)>,
    call_all: bool,
) -> Result<(), CommandError> {
    let started = match mcp::start(&spec, &root).await {
        Ok(started) => started,
        failed => return report(&spec, failed, false),
    };
    let calls: Vec<(String, Value)> = match call {
        Some(call) => vec![call],
        None if call_all => started
            .tools
            .iter()
            .map(|t| (t.name.clone(), sample_arguments(&t.input_schema)))
            .collect(),
        None => Vec::new(),
    };
    let client = started.client.clone();
    let listed = report(&spec, Ok(started), false);
    let mut failed = false;
    for (name, arguments) in calls {
        let call = client.call_tool(
            &name,
            arguments.clone(),
            spec.tool_timeout,
            None,
            std::future::pending(),
        );
        match call.await {
            Ok(result) => {
                let rendered = render::render(&result);
                let state = if rendered.is_error {
                    "tool error"
                } else {
                    "ok"
                };
                println!(
                    "call {} {arguments}: {state}\n{}",
                    visible(&name),
                    indent(&shown(&rendered.content))
                );
            }
            Err(error) => {
                failed = true;
                eprintln!(
                    "error: call {} failed: {}",
                    visible(&name),
                    shown(&error.to_string())
                );
            }
        }
    }
    client.shutdown().await;
    if failed {
        return Err(CommandError::shown(ErrorKind::Internal));
    }
    listed
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Arguments for a smoke call: each required property gets its schema's default, first example, first enum
/// value or const, else a plain value of its type.
fn sample_arguments(schema: &Value) -> Value {
    let mut args = serde_json::Map::new();
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for name in required.iter().filter_map(Value::as_str) {
        let property = schema
            .pointer(&format!("/properties/{name}"))
            .cloned()
            .unwrap_or_default();
        args.insert(name.to_string(), sample_value(&property));
    }
    Value::Object(args)
}

fn sample_value(property: &Value) -> Value {
    if let Some(value) = property
        .get("default")
        .or_else(|| property.pointer("/examples/0"))
        .or_else(|| property.pointer("/enum/0"))
        .or_else(|| property.get("const"))
    {
        return value.clone();
    }
    let kind = match property.get("type") {
        Some(Value::Array(kinds)) => kinds.first().and_then(Value::as_str).unwrap_or("string"),
        Some(Value::String(kind)) => kind.as_str(),
        _ => "string",
    };
    match kind {
        "number" | "integer" => json!(1),
        "boolean" => json!(false),
        "array" => json!([]),
        "object" => sample_arguments(property),
        "null" => Value::Null,
        _ => json!("probe"),
    }
}

/// Runs a future on the command's runtime.
fn run_async<T>(future: impl std::future::Future<Output = T>) -> Result<T, CommandError> {
    let runtime = super::context::runtime()
        .map_err(|e| CommandError::internal(format!("cannot start the async runtime: {e}")))?;
    Ok(runtime.block_on(future))
}

/// One JSON line on stdout, with the C1 and bidi controls that serde leaves raw escaped: names, versions and
/// errors come from servers and files.
fn print_json(value: &Value) {
    println!("{}", crate::protocol::json_for_terminal(value.to_string()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_arguments_fill_required_properties() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"type": "number"}, "b": {"type": "integer"}, "s": {"type": "string"},
                "e": {"enum": ["x", "y"]}, "d": {"type": "string", "default": "dflt"},
                "o": {"type": "object", "properties": {"n": {"type": "boolean"}}, "required": ["n"]},
                "optional": {"type": "string"}
            },
            "required": ["a", "b", "s", "e", "d", "o"]
        });
        assert_eq!(
            sample_arguments(&schema),
            json!({"a": 1, "b": 1, "s": "probe", "e": "x", "d": "dflt", "o": {"n": false}})
        );
        assert_eq!(sample_arguments(&json!({"type": "object"})), json!({}));
    }

    #[test]
    fn descriptions_never_show_values() {
        let spec = ServerSpec::new(
            "s",
            TransportSpec::Http {
                url: "https://h/mcp?token=abc".into(),
                headers: vec![("Authorization".into(), "Bearer sekrit-value".into())],
            },
        );
        let shown = describe_spec(&spec);
        assert_eq!(shown, "https://h/mcp (headers: Authorization)");
    }
}
