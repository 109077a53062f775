//! Language servers (issue 25): the diagnostics delta after edits (pyright), `references`/`definition`
//! (typescript-language-server, clangd), `rename` across files as one step commit, and the rules on what may
//! start: a repository's server only once trusted, a crashing server reported once, nothing left running.
//!
//! The real servers come from `.ci/run` (`GIT_AGENT_LSP_PARTNERS`: npm's pyright, typescript-language-server
//! and typescript under `node_modules/.bin`, and clangd from apt on PATH).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::common::partners::Partners;
use crate::common::server::{call, Reply, Server};
use crate::common::{run, session_id, Output, TestRepo};

const INSTALLS: &str =
    "pyright@1.1.414, typescript-language-server@6.0.2 and typescript 5 (npm), clangd (apt)";

/// The partners' bin directory put first on PATH.
fn lsp_path() -> String {
    let partners = Partners::require("GIT_AGENT_LSP_PARTNERS", INSTALLS);
    let bin = partners.path("node_modules/.bin");
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The agent with the partners on PATH and a diagnostics wait for a loaded CI machine (a cold pyright
/// takes a few seconds for its first check).
fn agent_with_path(repo: &TestRepo, server: &Server, path: &str, args: &[&str]) -> Output {
    let config = repo.root().join("lsp-config.toml");
    std::fs::write(&config, "[lsp]\ndiagnostics_wait = 20\n").unwrap();
    let mut cmd = repo.agent(server, args);
    cmd.env("PATH", path).env("GIT_AGENT_CONFIG", &config);
    run(&mut cmd)
}

/// Processes whose working directory is under `dir` (a server runs in the session's checkout).
fn processes_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let cwd = entry.path().join("cwd");
        if let Ok(target) = std::fs::read_link(&cwd) {
            if target.starts_with(&dir) {
                let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
                found.push(String::from_utf8_lossy(&cmdline).replace('\0', " "));
            }
        }
    }
    found
}

fn wait_until_gone(dir: &Path) -> Vec<String> {
    for _ in 0..50 {
        let left = processes_under(dir);
        if left.is_empty() {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    processes_under(dir)
}

/// A user config naming a server for `.txt` files, given `startup_timeout` seconds to start.
fn user_server(repo: &TestRepo, command: &str, args: &[&str], startup_timeout: u32) -> PathBuf {
    let config = repo.root().join("config.toml");
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    std::fs::write(
        &config,
        format!(
            "[lsp]\nstartup_timeout = {startup_timeout}\n[lsp.text]\ncommand = {command:?}\nargs = [{}]\n\
             extensions = [\"txt\"]\n",
            args.join(", ")
        ),
    )
    .unwrap();
    config
}

fn two_edits() -> (Vec<Reply>, crate::common::server::ToolCall) {
    let first = call(
        "edit_file",
        json!({"path": "file.txt", "old_string": "two", "new_string": "2"}),
    );
    let second = call(
        "edit_file",
        json!({"path": "file.txt", "old_string": "three", "new_string": "3"}),
    );
    let replies = vec![
        Reply::tool_calls(vec![first]),
        Reply::tool_calls(vec![second.clone()]),
        Reply::text("done"),
    ];
    (replies, second)
}

#[test]
fn a_hanging_server_is_given_up_once_and_left_running_nowhere() {
    let repo = TestRepo::new();
    let config = user_server(&repo, "sleep", &["3075"], 1);
    let (replies, second) = two_edits();
    let server = Server::start(replies);
    let mut cmd = repo.agent(&server, &["ask", "edit twice"]);
    cmd.env("GIT_AGENT_CONFIG", &config);
    let begun = std::time::Instant::now();

    let out = run(&mut cmd);

    out.assert_code(0);
    assert_eq!(
        out.stderr().matches("no answer to initialize").count(),
        1,
        "{out}"
    );
    // The second edit did not wait for it again.
    assert!(
        begun.elapsed() < std::time::Duration::from_secs(10),
        "{out}"
    );
    let result = server.requests()[2].tool_result(&second.id);
    assert!(!result.starts_with("error"), "{result}");
    assert!(
        wait_until_gone(repo.path()).is_empty(),
        "the hung server outlived the session"
    );
}

#[test]
#[cfg_attr(
    git_agent_portable,
    ignore = "needs the Linux supervisor: without it a killed agent's servers live on"
)]
fn kill_9_of_the_agent_takes_its_language_server_with_it() {
    let repo = TestRepo::new();
    let config = user_server(&repo, "sleep", &["3076"], 120);
    let (replies, _) = two_edits();
    let server = Server::start(replies);
    let mut cmd = repo.agent(&server, &["ask", "edit"]);
    cmd.env("GIT_AGENT_CONFIG", &config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let started = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        processes_under(repo.path())
            .iter()
            .any(|p| p.contains("3076"))
    });
    assert!(started, "the server never started");
    child.kill().unwrap();
    child.wait().unwrap();
    let left = wait_until_gone(repo.path());
    assert!(left.is_empty(), "left running after kill -9: {left:?}");
}

#[test]
fn an_untrusted_repositorys_server_is_not_started() {
    let repo = TestRepo::new();
    let marker = repo.root().join("server-ran");
    let script = repo.root().join("server.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ntouch {}\nexec sleep 30\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    repo.write(
        ".git-agent.toml",
        &format!(
            "[lsp.project]\ncommand = {:?}\nextensions = [\"txt\"]\n",
            script.display().to_string()
        ),
    );
    repo.commit_all("a project server");
    let edit = call(
        "edit_file",
        json!({"path": "file.txt", "old_string": "two", "new_string": "2"}),
    );
    let server = Server::start(vec![Reply::tool_calls(vec![edit]), Reply::text("done")]);

    let out = repo.run_agent(&server, &["ask", "edit"]);

    out.assert_code(0);
    assert!(
        out.stderr()
            .contains("the language servers in .git-agent.toml are not trusted"),
        "{out}"
    );
    assert!(!marker.exists(), "the untrusted server ran: {out}");
    let requests = server.requests();
    let offered = requests[0].body.to_string();
    assert!(
        !offered.contains("\"rename\""),
        "lsp tools offered: {offered}"
    );
    let trust = repo.run_agent(&server, &["trust", "--list"]);
    assert!(
        trust.stdout().contains("lsp-servers") || trust.stdout().contains("language servers"),
        "{trust}"
    );
}

#[test]
fn a_crashing_server_is_reported_once_and_the_session_goes_on() {
    let repo = TestRepo::new();
    let config = user_server(&repo, "sh", &["-c", "echo broken config >&2; exit 3"], 30);
    let (replies, _) = two_edits();
    let server = Server::start(replies);
    let mut cmd = repo.agent(&server, &["ask", "edit twice"]);
    cmd.env("GIT_AGENT_CONFIG", &config);

    let out = run(&mut cmd);

    out.assert_code(0);
    let reports = out.stderr().matches("language server text").count();
    assert_eq!(reports, 1, "reported {reports} times: {out}");
    assert!(
        out.stderr().contains("the session goes on without it"),
        "{out}"
    );
    let id = session_id(&repo);
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:file.txt")]),
        "one\n2\n3\n"
    );
    assert!(wait_until_gone(repo.path()).is_empty());
}

#[test]
#[ignore = "needs pyright: run by .ci/run"]
fn pyright_reports_a_new_type_error_then_its_fix_and_never_old_warnings() {
    let path = lsp_path();
    let repo = TestRepo::new();
    repo.write(
        "pyrightconfig.json",
        "{\"reportUnusedExpression\": \"warning\"}\n",
    );
    repo.write("a.py", "def f(x: int) -> int:\n    return x\n\n1 == 1\n");
    let old: String = (0..500).map(|i| format!("{i} == {i}\n")).collect();
    repo.write("old.py", &old);
    repo.commit_all("python");
    let read_old = call("read_file", json!({"path": "old.py"}));
    let breaks = call(
        "edit_file",
        json!({"path": "a.py", "old_string": "-> int:", "new_string": "-> str:"}),
    );
    let fixes = call(
        "edit_file",
        json!({"path": "a.py", "old_string": "-> str:", "new_string": "-> int:"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![read_old, breaks.clone()]),
        Reply::tool_calls(vec![fixes.clone()]),
        Reply::text("done"),
    ]);

    let out = agent_with_path(&repo, &server, &path, &["ask", "--json", "type it"]);

    out.assert_code(0);
    let requests = server.requests();
    let broke = requests[1].tool_result(&breaks.id);
    assert!(
        broke.contains("a.py:2:") && broke.contains("error") && broke.contains("str"),
        "no new error in the edit's result: {broke}\n{out}"
    );
    assert!(!broke.contains("old.py"), "old warnings shown: {broke}");
    assert!(
        !broke.contains("warning"),
        "an old warning of a.py shown: {broke}"
    );
    let fixed = requests[2].tool_result(&fixes.id);
    assert!(fixed.contains("no new problems"), "{fixed}");
    assert!(fixed.contains("0 errors left"), "{fixed}");
    let events: Vec<serde_json::Value> = out
        .stdout()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &serde_json::Value| e["type"] == "diagnostics")
        .collect();
    assert_eq!(events.len(), 2, "{out}");
    assert_eq!(events[0]["errors"], 1, "{events:?}");
    assert_eq!(events[1]["errors"], 0, "{events:?}");
    let id = session_id(&repo);
    let notes = repo.git(&["log", "--notes=agent", &format!("agent/{id}")]);
    assert!(notes.contains("diagnostics: 1 error left"), "{notes}");
    assert!(notes.contains("diagnostics: 0 errors left"), "{notes}");
    // The session log keeps them: `show` replays the line under the result.
    let show = repo.run_agent(&server, &["show", &id]);
    assert!(
        show.stdout().contains("1 new error") || show.stderr().contains("1 new error"),
        "{show}"
    );
    assert!(
        wait_until_gone(repo.path()).is_empty(),
        "a server outlived the session"
    );
}

fn ts_project(repo: &TestRepo) {
    repo.write(
        "tsconfig.json",
        "{\"compilerOptions\": {\"strict\": true, \"noEmit\": true, \"module\": \"commonjs\", \"target\": \"es2020\"}}\n",
    );
    repo.write(
        "util.ts",
        "export function greet(name: string): string {\n  return \"hi \" + name;\n}\n",
    );
    repo.write(
        "a.ts",
        "import { greet } from \"./util\";\nexport const a = greet(\"a\");\n",
    );
    repo.write(
        "b.ts",
        "import { greet } from \"./util\";\nexport const b = greet(\"b\") + greet(\"c\");\n",
    );
    repo.commit_all("typescript");
}

#[test]
#[ignore = "needs typescript-language-server: run by .ci/run"]
fn typescript_references_and_definition() {
    let path = lsp_path();
    let repo = TestRepo::new();
    ts_project(&repo);
    let refs = call(
        "lsp",
        json!({"operation": "references", "path": "util.ts", "line": 1, "column": 17}),
    );
    let def = call(
        "lsp",
        json!({"operation": "definition", "path": "b.ts", "line": 2, "column": 18}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![refs.clone(), def.clone()]),
        Reply::text("done"),
    ]);

    let out = agent_with_path(&repo, &server, &path, &["ask", "where is greet used"]);

    out.assert_code(0);
    let requests = server.requests();
    let found = requests[1].tool_result(&refs.id);
    for site in ["a.ts:2:", "b.ts:2:", "util.ts:1:"] {
        assert!(found.contains(site), "{site} missing: {found}\n{out}");
    }
    let definition = requests[1].tool_result(&def.id);
    assert!(
        definition.contains("util.ts:1: export function greet"),
        "{definition}"
    );
}

#[test]
#[ignore = "needs typescript-language-server: run by .ci/run"]
fn a_rename_across_three_files_is_one_step_and_undo_takes_it_back() {
    let path = lsp_path();
    let repo = TestRepo::new();
    ts_project(&repo);
    let rename = call(
        "rename",
        json!({"path": "util.ts", "line": 1, "column": 17, "new_name": "welcome"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![rename.clone()]),
        Reply::text("done"),
    ]);

    let out = agent_with_path(&repo, &server, &path, &["ask", "rename greet"]);

    out.assert_code(0);
    let result = server.requests()[1].tool_result(&rename.id);
    assert!(result.contains("renamed in 3 files"), "{result}");
    let id = session_id(&repo);
    let branch = format!("agent/{id}");
    let files = repo.git(&["show", "--name-only", "--format=", &branch]);
    let mut files: Vec<&str> = files.lines().collect();
    files.sort();
    assert_eq!(files, ["a.ts", "b.ts", "util.ts"]);
    let b = repo.git(&["show", &format!("{branch}:b.ts")]);
    assert!(
        b.contains("welcome(\"b\") + welcome(\"c\")") && !b.contains("greet"),
        "{b}"
    );
    // The project's own check passes on the branch.
    let checkout = repo.root().join("check");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        &checkout.display().to_string(),
        &branch,
    ]);
    let tsc = Command::new("tsc")
        .arg("-p")
        .arg(&checkout)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(
        tsc.status.success(),
        "{}",
        String::from_utf8_lossy(&tsc.stdout)
    );
    let undo = repo.run_agent(&server, &["undo", &id]);
    undo.assert_code(0);
    let util = repo.git(&["show", &format!("{branch}:util.ts")]);
    assert!(util.contains("function greet"), "{util}");
}

#[test]
#[ignore = "needs clangd: run by .ci/run"]
fn clangd_references_and_definition() {
    let path = lsp_path();
    let repo = TestRepo::new();
    repo.write("compile_flags.txt", "-std=c11\n");
    repo.write("util.h", "int add(int a, int b);\n");
    repo.write(
        "util.c",
        "#include \"util.h\"\nint add(int a, int b) { return a + b; }\n",
    );
    repo.write(
        "main.c",
        "#include \"util.h\"\nint main(void) {\n  int a = add(1, 2);\n  return a + add(3, 4);\n}\n",
    );
    repo.commit_all("c");
    // From a call site: every call of the translation unit (clangd finds other files only with an index).
    let refs = call(
        "lsp",
        json!({"operation": "references", "path": "main.c", "line": 3, "column": 11}),
    );
    let def = call(
        "lsp",
        json!({"operation": "definition", "path": "main.c", "line": 4, "column": 14}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![refs.clone(), def.clone()]),
        Reply::text("done"),
    ]);

    let out = agent_with_path(&repo, &server, &path, &["ask", "where is add used"]);

    out.assert_code(0);
    let requests = server.requests();
    let found = requests[1].tool_result(&refs.id);
    for site in [
        "main.c:3: int a = add(1, 2);",
        "main.c:4: return a + add(3, 4);",
    ] {
        assert!(found.contains(site), "{site} missing: {found}");
    }
    let definition = requests[1].tool_result(&def.id);
    assert!(
        definition.contains("util.h:1: int add(int a, int b);")
            || definition.contains("util.c:2: int add(int a, int b)"),
        "{definition}"
    );
}

#[test]
#[ignore = "needs pyright: run by .ci/run"]
fn replace_symbol_is_one_step_and_a_commands_change_gets_diagnostics_too() {
    let path = lsp_path();
    let repo = TestRepo::new();
    repo.write(
        "a.py",
        "def f(x: int) -> int:\n    return x\n\n\ndef g() -> int:\n    return f(1)\n",
    );
    repo.commit_all("python");
    let replace = call(
        "replace_symbol",
        json!({"path": "a.py", "symbol": "f", "new_text": "def f(x: int) -> int:\n    return x * 2"}),
    );
    let breaks = call(
        "run",
        json!({"command": "sed -i 's/return f(1)/return f(\"one\")/' a.py"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![replace.clone()]),
        Reply::tool_calls(vec![breaks.clone()]),
        Reply::text("done"),
    ]);

    let out = agent_with_path(&repo, &server, &path, &["ask", "double it"]);

    out.assert_code(0);
    let requests = server.requests();
    let replaced = requests[1].tool_result(&replace.id);
    assert!(replaced.contains("replaced in 1 file: a.py"), "{replaced}");
    let id = session_id(&repo);
    let a = repo.git(&["show", &format!("agent/{id}~1:a.py")]);
    assert_eq!(
        a,
        "def f(x: int) -> int:\n    return x * 2\n\n\ndef g() -> int:\n    return f(1)\n"
    );
    let ran = requests[2].tool_result(&breaks.id);
    assert!(
        ran.contains("a.py:6:") && ran.contains("error"),
        "no new error after the command: {ran}"
    );
}
