//! Event hooks (issue 26): Claude Code's hook files, run by the real binary around a scripted model's calls in
//! real repositories. `.claude/settings.json` and Codex's `.codex/hooks.json` are read alike; a repository's
//! hooks run nothing until `git agent trust`; the user's own config needs no trust.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{agent_commits, call, run, session_id, Output, Reply, Server, TestRepo};

/// The hook script that refuses `rm`, as a team would keep it next to its settings.
const BLOCK_RM: &str = r#"#!/bin/sh
input=$(cat)
case "$input" in
  *'"command":"rm '*) echo "rm is not allowed here: leave files in place" >&2; exit 2 ;;
esac
exit 0
"#;

/// A hook file in the shape Claude Code and Codex share: `event` -> one matcher group -> `command`.
fn hooks_file(entries: &[(&str, &str, &str, Option<u64>)]) -> String {
    let mut events = serde_json::Map::new();
    for (event, matcher, command, timeout) in entries {
        let mut hook = json!({"type": "command", "command": command});
        if let Some(timeout) = timeout {
            hook["timeout"] = json!(timeout);
        }
        let groups = events.entry(event.to_string()).or_insert_with(|| json!([]));
        groups
            .as_array_mut()
            .unwrap()
            .push(json!({"matcher": matcher, "hooks": [hook]}));
    }
    serde_json::to_string_pretty(&json!({"hooks": events})).unwrap()
}

/// Writes and commits the hook file `path` (and the rm-blocking script), then trusts the repository.
fn with_hooks(repo: &TestRepo, path: &str, text: &str, trust: bool) {
    repo.write(".claude/hooks/block-rm.sh", BLOCK_RM);
    repo.write(path, text);
    repo.commit_all("event hooks");
    if trust {
        let server = Server::start(vec![]);
        repo.run_agent(&server, &["trust"]).assert_code(0);
    }
}

fn hook_events(out: &Output) -> Vec<Value> {
    out.stdout()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "hook")
        .collect()
}

/// The `rm` the model tries is refused with the hook's message, the file stays, and a harmless command
/// that the same matcher sees runs.
fn rm_is_blocked(path: &str) {
    let repo = TestRepo::new();
    let settings = hooks_file(&[(
        "PreToolUse",
        "Bash",
        "sh \"$CLAUDE_PROJECT_DIR\"/.claude/hooks/block-rm.sh",
        None,
    )]);
    with_hooks(&repo, path, &settings, true);
    let rm = call("run", json!({"command": "rm file.txt"}));
    let echo = call("run", json!({"command": "echo hi > new.txt"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![rm.clone(), echo.clone()]),
        Reply::text("done"),
    ]);

    let out = repo.run_agent(&server, &["ask", "--yes", "--json", "clean up"]);

    out.assert_code(0);
    let refused = server.requests()[1].tool_result(&rm.id);
    assert!(
        refused.contains("rm is not allowed here: leave files in place"),
        "{refused}\n{out}"
    );
    let id = session_id(&repo);
    repo.git(&["cat-file", "-e", &format!("agent/{id}:file.txt")]);
    repo.git(&["cat-file", "-e", &format!("agent/{id}:new.txt")]);
    assert_eq!(
        agent_commits(&repo, &id).len(),
        1,
        "only the echo made a step"
    );
    let hooks = hook_events(&out);
    assert_eq!(hooks.len(), 2, "{out}");
    assert_eq!(hooks[0]["event"], "PreToolUse");
    assert_eq!(hooks[0]["source"], path);
    assert!(hooks[0]["outcome"]
        .as_str()
        .unwrap()
        .starts_with("blocked: rm is not allowed"));
    assert_eq!(hooks[1]["outcome"], "ok");
    // Recorded in the session log: `show` replays the hook lines.
    let show = repo.run_agent(&server, &["show", &id]);
    assert!(
        show.stderr().contains("hook PreToolUse") || show.stdout().contains("hook PreToolUse"),
        "{show}"
    );
}

#[test]
fn a_pre_tool_use_hook_that_exits_2_refuses_rm_and_the_file_stays() {
    rm_is_blocked(".claude/settings.json");
}

#[test]
fn the_same_hook_from_codex_hooks_json() {
    rm_is_blocked(".codex/hooks.json");
}

#[test]
fn post_tool_use_additional_context_reaches_the_next_request() {
    let repo = TestRepo::new();
    let answer = r#"echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"file.txt is generated: edit gen.py instead"}}'"#;
    let settings = hooks_file(&[("PostToolUse", "Read", answer, None)]);
    with_hooks(&repo, ".claude/settings.json", &settings, true);
    let read = call("read_file", json!({"path": "file.txt"}));
    let server = Server::start(vec![Reply::tool_calls(vec![read]), Reply::text("done")]);

    let out = repo.run_agent(&server, &["ask", "read it"]);

    out.assert_code(0);
    let texts = server.requests()[1].user_texts();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("file.txt is generated: edit gen.py instead")),
        "{texts:?}\n{out}"
    );
    assert!(out.stderr().contains("hook PostToolUse"), "{out}");
}

#[test]
fn a_user_prompt_submit_hook_adds_context_and_a_stop_hook_sends_the_model_back_once() {
    let repo = TestRepo::new();
    let stop = r#"grep -q '"stop_hook_active":true' && exit 0; echo "run the tests before you stop" >&2; exit 2"#;
    let settings = hooks_file(&[
        (
            "UserPromptSubmit",
            "",
            "echo ticket ABC-123 is about the parser",
            None,
        ),
        ("Stop", "", stop, None),
    ]);
    with_hooks(&repo, ".claude/settings.local.json", &settings, true);
    let server = Server::start(vec![Reply::text("done"), Reply::text("tested, done")]);

    let out = repo.run_agent(&server, &["ask", "fix the ticket"]);

    out.assert_code(0);
    assert_eq!(out.stdout().trim(), "tested, done", "{out}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{out}");
    let first = requests[0].user_texts();
    assert!(first.iter().any(|t| t == "fix the ticket"), "{first:?}");
    assert!(
        first
            .iter()
            .any(|t| t.contains("ticket ABC-123 is about the parser")),
        "{first:?}"
    );
    let second = requests[1].user_texts();
    assert!(
        second
            .iter()
            .any(|t| t.contains("run the tests before you stop")),
        "{second:?}"
    );
}

#[test]
fn a_hanging_pre_tool_use_hook_blocks_the_call_after_its_timeout() {
    let repo = TestRepo::new();
    let settings = hooks_file(&[("PreToolUse", "*", "sleep 30", Some(1))]);
    with_hooks(&repo, ".claude/settings.json", &settings, true);
    let write = call("run", json!({"command": "echo hi > new.txt"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![write.clone()]),
        Reply::text("done"),
    ]);

    let started = Instant::now();
    let out = repo.run_agent(&server, &["ask", "--yes", "write"]);

    out.assert_code(0);
    assert!(started.elapsed() < Duration::from_secs(20), "{out}");
    let refused = server.requests()[1].tool_result(&write.id);
    assert!(refused.contains("timed out after 1s"), "{refused}");
    assert!(refused.contains("fail closed"), "{refused}");
    let id = session_id(&repo);
    assert!(
        agent_commits(&repo, &id).is_empty(),
        "the command did not run"
    );
}

/// The marker a hook appends to: under the test HOME's `.cache`, which the sandbox lets commands write.
fn marker(repo: &TestRepo) -> PathBuf {
    let cache = repo.root().join("home/.cache");
    fs::create_dir_all(&cache).unwrap();
    cache.join("hook-ran")
}

fn runs(marker: &Path) -> usize {
    fs::read_to_string(marker).map_or(0, |t| t.lines().count())
}

fn untrusted_hooks_run_nothing_until_trusted(path: &str) {
    let repo = TestRepo::new();
    let marker = marker(&repo);
    let append = format!("cat > /dev/null; echo ran >> {}", marker.display());
    let settings = hooks_file(&[
        ("UserPromptSubmit", "", &append, None),
        ("PreToolUse", "", &append, None),
    ]);
    with_hooks(&repo, path, &settings, false);
    let list = call("list_files", json!({"path": "."}));
    let script = || vec![Reply::tool_calls(vec![list.clone()]), Reply::text("done")];

    let server = Server::start(script());
    let out = repo.run_agent(&server, &["ask", "look"]);
    out.assert_code(0);
    assert_eq!(runs(&marker), 0, "an untrusted hook ran: {out}");
    assert!(
        out.stderr().contains(&format!(
            "warning: {path} define event hooks that were not run: not trusted yet"
        )) && out.stderr().contains("git agent trust"),
        "{out}"
    );

    let trust = repo.run_agent(&server, &["trust", "--list"]);
    assert!(
        trust.stdout().contains(&format!("event hooks (commands sessions run before and after tool calls) in {path} [not trusted]")),
        "{trust}"
    );
    repo.run_agent(&server, &["trust"]).assert_code(0);
    let server = Server::start(script());
    let out = repo.run_agent(&server, &["ask", "look again"]);
    out.assert_code(0);
    assert_eq!(runs(&marker), 2, "the trusted hooks ran once each: {out}");
    assert!(!out.stderr().contains("not trusted yet"), "{out}");

    // A change needs trust again.
    repo.write(path, &settings.replace("echo ran", "echo changed"));
    let server = Server::start(script());
    repo.run_agent(&server, &["ask", "and again"])
        .assert_code(0);
    assert_eq!(
        runs(&marker),
        2,
        "a changed hook file ran before it was trusted"
    );
}

#[test]
fn an_untrusted_repositorys_hooks_run_nothing_until_trusted() {
    untrusted_hooks_run_nothing_until_trusted(".claude/settings.json");
}

#[test]
fn an_untrusted_codex_hooks_json_runs_nothing_until_trusted() {
    untrusted_hooks_run_nothing_until_trusted(".codex/hooks.json");
}

#[test]
fn the_users_own_config_needs_no_trust_and_hooks_see_claude_fields() {
    let repo = TestRepo::new();
    let seen = repo.root().join("home/.cache/seen.json");
    fs::create_dir_all(seen.parent().unwrap()).unwrap();
    let config = repo.root().join("config.toml");
    fs::write(
        &config,
        format!(
            "[[event_hooks.PreToolUse]]\nmatcher = \"Edit|Write\"\nhooks = [{{ type = \"command\", command = \"cat > {}\" }}]\n",
            seen.display()
        ),
    )
    .unwrap();
    let write = call("write_file", json!({"path": "notes.md", "content": "hi\n"}));
    let server = Server::start(vec![Reply::tool_calls(vec![write]), Reply::text("done")]);

    let out = run(repo
        .agent(&server, &["ask", "write notes"])
        .env("GIT_AGENT_CONFIG", &config));

    out.assert_code(0);
    let input: Value = serde_json::from_str(&fs::read_to_string(&seen).unwrap()).unwrap();
    let id = session_id(&repo);
    assert_eq!(input["hook_event_name"], "PreToolUse");
    assert_eq!(input["tool_name"], "Write");
    assert_eq!(input["tool_input"]["file_path"], "notes.md");
    assert_eq!(input["session_id"], id.as_str());
    assert_eq!(input["agent_branch"], format!("agent/{id}"));
    assert_eq!(input["step_commit"].as_str().unwrap().len(), 40);
    assert!(
        input["cwd"]
            .as_str()
            .unwrap()
            .contains(".git/agent/worktrees"),
        "{input}"
    );
}

#[test]
fn an_explorers_calls_meet_the_same_pre_tool_use_hooks() {
    let repo = TestRepo::new();
    let deny = r#"echo '{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"secrets live in file.txt: do not read it"}}'"#;
    let settings = hooks_file(&[("PreToolUse", "Read", deny, None)]);
    with_hooks(&repo, ".claude/settings.json", &settings, true);
    let explore = call("explore", json!({"task": "what is in file.txt?"}));
    let read = call("read_file", json!({"path": "file.txt"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![explore.clone()]),
        Reply::text("done"),
    ]);
    server.script_for(
        "what is in file.txt?",
        vec![
            Reply::tool_calls(vec![read.clone()]),
            Reply::text("could not read it"),
        ],
    );

    let out = repo.run_agent(&server, &["ask", "explore"]);

    out.assert_code(0);
    let child = server
        .requests()
        .into_iter()
        .find(|r| r.tool_results().iter().any(|(id, _)| *id == read.id))
        .expect("the explorer's second request");
    let refused = child.tool_result(&read.id);
    assert!(
        refused.contains("blocked by event-hook: secrets live in file.txt"),
        "{refused}"
    );
}

#[test]
fn a_blocked_prompt_never_reaches_the_model_and_updated_input_is_what_runs() {
    let repo = TestRepo::new();
    let gate = r#"grep -q 'deploy' && { echo "no deploys from the agent" >&2; exit 2; }; exit 0"#;
    let rewrite = r#"echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"echo rewritten > new.txt"}}}'"#;
    let settings = hooks_file(&[
        ("UserPromptSubmit", "", gate, None),
        ("PreToolUse", "Bash", rewrite, None),
    ]);
    with_hooks(&repo, ".claude/settings.json", &settings, true);
    let server = Server::start(vec![]);
    let out = repo.run_agent(&server, &["ask", "deploy to production"]);
    out.assert_code(3);
    assert!(out.stderr().contains("no deploys from the agent"), "{out}");
    assert!(server.requests().is_empty(), "the prompt reached the model");

    let echo = call("run", json!({"command": "echo original > new.txt"}));
    let server = Server::start(vec![Reply::tool_calls(vec![echo]), Reply::text("done")]);
    let out = repo.run_agent(&server, &["ask", "--yes", "write a file"]);
    out.assert_code(0);
    let ids = crate::common::agent_branches(&repo);
    let tips: Vec<String> = ids
        .iter()
        .filter_map(|id| {
            std::process::Command::new("git")
                .args([
                    "-C",
                    &repo.path().display().to_string(),
                    "show",
                    &format!("agent/{id}:new.txt"),
                ])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        })
        .collect();
    assert_eq!(tips, ["rewritten\n"], "{out}");
}
