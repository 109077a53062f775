//! The `mcp` section read through the whole file parser, as `Settings::load` reads it.

use super::*;
use crate::config::file::{parse, FileConfig};

fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |k| {
        pairs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

fn user(text: &str) -> Result<FileConfig, ConfigError> {
    parse(Path::new("/cfg/config.toml"), text, Scope::User)
}

#[test]
fn expansion_of_vars_and_defaults() {
    let env = env_of(&[
        ("HOME", "/home/u"),
        ("GITHUB_TOKEN", "ghp_x"),
        ("EMPTY", ""),
    ]);
    assert_eq!(expand("${HOME}/x", &env), Ok(("/home/u/x".into(), false)));
    assert_eq!(
        expand("a${NOPE:-dflt}b", &env),
        Ok(("adfltb".into(), false))
    );
    assert_eq!(expand("${EMPTY:-d}", &env), Ok(("d".into(), false)));
    assert_eq!(expand("${NOPE:-}", &env), Ok(("".into(), false)));
    assert_eq!(
        expand("Bearer ${GITHUB_TOKEN}", &env),
        Ok(("Bearer ghp_x".into(), true))
    );
    assert_eq!(
        expand("$HOME and $$", &env),
        Ok(("$HOME and $$".into(), false))
    );
    assert_eq!(
        expand("${NOPE}", &env),
        Err("environment variable NOPE is not set".into())
    );
    assert!(expand("${HOME", &env).unwrap_err().contains("closing"));
    assert!(expand("${1X}", &env).unwrap_err().contains("does not name"));
}

#[test]
fn codex_tables() {
    let config = user(
        r#"
[mcp_servers.everything]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-everything", "stdio"]
env = { "LOG" = "debug", "API_KEY" = "${MY_KEY}" }
startup_timeout_sec = 20
tool_timeout_sec = 5.5
enabled_tools = ["echo"]

[mcp_servers.remote]
url = "http://127.0.0.1:3001/mcp"
http_headers = { "X-Team" = "core" }
bearer_token_env_var = "REMOTE_TOKEN"
enabled = false
"#,
    )
    .expect("valid");
    assert_eq!(config.mcp_servers.len(), 2);
    let everything = &config.mcp_servers[0];
    assert_eq!(everything.line, 2);
    assert_eq!(everything.startup_timeout, Some(Duration::from_secs(20)));
    let env = env_of(&[
        ("MY_KEY", "key-value-123456"),
        ("REMOTE_TOKEN", "tok-abcdefgh"),
    ]);
    let loaded = load(
        &config.mcp_servers,
        Path::new("/cfg/config.toml"),
        None,
        &env,
    );
    let spec = loaded.entries[0].spec.clone().expect("a spec");
    assert_eq!(spec.tool_timeout, Duration::from_millis(5500));
    assert!(spec.offers("echo") && !spec.offers("get-sum"));
    match &spec.transport {
        TransportSpec::Stdio { env, .. } => {
            assert!(env.contains(&("API_KEY".into(), "key-value-123456".into())))
        }
        other => panic!("{other:?}"),
    }
    assert!(!format!("{spec:?}").contains("key-value-123456"));
    assert!(!loaded.entries[1].enabled);
    match &loaded.entries[1].spec.clone().expect("a spec").transport {
        TransportSpec::Http { headers, .. } => {
            assert!(headers.contains(&("Authorization".into(), "Bearer tok-abcdefgh".into())))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(loaded.to_start().count(), 1);
    // The keys went to the redactor, so they never reach git.
    assert!(
        !crate::safety::redact::redact("x key-value-123456 tok-abcdefgh").contains("key-value")
    );
    let missing = load(
        &config.mcp_servers,
        Path::new("/c"),
        None,
        &env_of(&[("MY_KEY", "k")]),
    );
    assert_eq!(
        missing.entries[1].spec,
        Err("bearer_token_env_var REMOTE_TOKEN is not set".into())
    );
}

#[test]
fn bad_tables_name_line_and_key() {
    let err = user("[mcp_servers.x]\nargs = [\"a\"]\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains(":1: mcp_servers.x: needs `command`"), "{err}");
    let err = user("[mcp_servers.x]\ncommand = \"a\"\nurl = \"http://h\"\n").unwrap_err();
    assert!(err.to_string().contains("both"), "{err}");
    let err = user("[mcp_servers.x]\ncommand = \"a\"\ntimeout = 3\n").unwrap_err();
    assert!(
        err.to_string()
            .contains(":3: mcp_servers.x.timeout: unknown key"),
        "{err}"
    );
    let err = user("[mcp_servers.\"a b\"]\ncommand = \"a\"\n").unwrap_err();
    assert!(err.to_string().contains("letters, digits"), "{err}");
    let err = user("[mcp_servers.x]\nurl = \"http://h\"\nargs = [\"a\"]\n").unwrap_err();
    assert!(err.to_string().contains("for `command` servers"), "{err}");
    let err = parse(
        Path::new(".git-agent.toml"),
        "[mcp_servers.x]\ncommand = \"sh\"\n",
        Scope::Repo,
    )
    .unwrap_err();
    assert!(err.to_string().contains("not allowed"), "{err}");
}

#[test]
fn claude_code_project_file() {
    let text = br#"{"mcpServers": {
            "git": {"type": "stdio", "command": "${VENV:-/opt}/bin/mcp-server-git", "args": ["--repository", "."],
                    "env": {"GIT_TOKEN": "${SECRET_GIT_TOKEN}"}},
            "web": {"type": "http", "url": "http://127.0.0.1:${PORT}/mcp", "headers": {"Authorization": "Bearer ${API_TOKEN}"}},
            "old": {"type": "sse", "url": "http://h/sse"},
            "broken": {"command": "x", "env": {"A": "${UNSET_VAR}"}}
        }}"#;
    let env = env_of(&[
        ("SECRET_GIT_TOKEN", "git-secret-0001"),
        ("PORT", "4321"),
        ("API_TOKEN", "api-secret-0002"),
    ]);
    let servers = parse_project(text, &env).expect("parses");
    let names: Vec<&str> = servers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["broken", "git", "old", "web"]);
    let spec = |name: &str| {
        servers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s.clone())
            .unwrap()
    };
    match spec("git").expect("valid").transport {
        TransportSpec::Stdio {
            command, args, env, ..
        } => {
            assert_eq!(command, "/opt/bin/mcp-server-git");
            assert_eq!(args, ["--repository", "."]);
            assert_eq!(env, [("GIT_TOKEN".into(), "git-secret-0001".into())]);
        }
        other => panic!("{other:?}"),
    }
    match spec("web").expect("valid").transport {
        TransportSpec::Http { url, headers } => {
            assert_eq!(url, "http://127.0.0.1:4321/mcp");
            assert_eq!(headers[0].1, "Bearer api-secret-0002");
        }
        other => panic!("{other:?}"),
    }
    assert!(spec("old").unwrap_err().contains("not supported"));
    assert_eq!(
        spec("broken").unwrap_err(),
        "env A: environment variable UNSET_VAR is not set"
    );
    let redacted = crate::safety::redact::redact("git-secret-0001 api-secret-0002");
    assert!(!redacted.contains("secret-000"), "{redacted}");
    assert!(parse_project(b"{}", &env).is_err());
    assert!(parse_project(b"not json", &env).is_err());
}

#[test]
fn acp_session_servers() {
    let servers = serde_json::json!([
        {"name": "fs", "command": "/bin/mcp-fs", "args": ["/w"], "env": [{"name": "LOG", "value": "1"}]},
        {"type": "http", "name": "web", "url": "https://h/mcp", "headers": [{"name": "Authorization", "value": "Bearer acp-token-123"}]},
        {"type": "sse", "name": "old", "url": "https://h/sse", "headers": []}
    ]);
    let parsed = parse_acp(&servers).expect("a list");
    assert_eq!(parsed.len(), 3);
    match &parsed[0].1.as_ref().expect("stdio").transport {
        TransportSpec::Stdio {
            command, args, env, ..
        } => {
            assert_eq!(
                (command.as_str(), args.as_slice()),
                ("/bin/mcp-fs", &["/w".to_string()][..])
            );
            assert_eq!(env, &[("LOG".to_string(), "1".to_string())]);
        }
        other => panic!("{other:?}"),
    }
    match &parsed[1].1.as_ref().expect("http").transport {
        TransportSpec::Http { headers, .. } => assert_eq!(headers[0].1, "Bearer acp-token-123"),
        other => panic!("{other:?}"),
    }
    assert!(parsed[2].1.is_err());
    assert!(parse_acp(&serde_json::json!({})).is_err());
}

#[test]
fn a_project_file_starts_nothing_until_its_content_is_trusted() {
    let dir = std::env::temp_dir().join(format!("git-agent-mcp-trust-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let git_dir = dir.join(".git");
    std::fs::create_dir_all(&git_dir).expect("mkdir");
    let file = br#"{"mcpServers": {"s": {"command": "true"}}}"#;
    std::fs::write(dir.join(PROJECT_FILE), file).expect("write");
    let env = env_of(&[]);
    let before = load(&[], Path::new("/c"), Some((&dir, &git_dir)), &env);
    assert!(before.entries.is_empty());
    let notice = before.untrusted_notice().expect("a notice");
    assert!(
        notice.contains("git agent mcp trust") && notice.contains("(s)"),
        "{notice}"
    );
    trust(&git_dir, file).expect("trust");
    let after = load(&[], Path::new("/c"), Some((&dir, &git_dir)), &env);
    assert_eq!(after.entries.len(), 1);
    assert!(after.untrusted_notice().is_none());
    // A changed file is a new file.
    std::fs::write(
        dir.join(PROJECT_FILE),
        br#"{"mcpServers": {"s": {"command": "rm"}}}"#,
    )
    .expect("write");
    let changed = load(&[], Path::new("/c"), Some((&dir, &git_dir)), &env);
    assert!(changed.entries.is_empty() && changed.untrusted_notice().is_some());
    let _ = std::fs::remove_dir_all(&dir);
}
