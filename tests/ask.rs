//! `git agent ask` end to end: the real binary in a temp repo against a scripted model.
//!
//! Contract (DESIGN.md sections 2, 4, 5): the agent works on `agent/<id>` in `.git/agent/worktrees/<id>`, one
//! commit per file-changing tool call with `Agent-Session`/`Agent-Step` trailers, the answer on stdout, the
//! user's HEAD, index, branches and files untouched, tool failures returned to the model.

use std::fs;

use serde_json::{json, Value};

use crate::common::{
    agent_branches, agent_commits, agent_worktrees, call, closed_port_url, fsck, raw_call, run,
    session_id, trailer, user_state, Reply, Server, TestRepo, API_KEY,
};

/// `Agent-Step` of `rev` as a number.
fn step_of(repo: &TestRepo, rev: &str) -> u32 {
    let step = trailer(repo, rev, "Agent-Step");
    step.parse()
        .unwrap_or_else(|_| panic!("{rev} has no numeric Agent-Step trailer: {step:?}"))
}

/// Asserts a failed start left no agent branch and no agent checkout behind.
fn assert_no_session_left(repo: &TestRepo) {
    assert_eq!(
        agent_branches(repo),
        Vec::<String>::new(),
        "no agent branch may be left"
    );
    assert_eq!(
        agent_worktrees(repo),
        Vec::<String>::new(),
        "no agent checkout may be left"
    );
}

/// Asserts a tool result reads as a failure the model can act on, not as the tool's normal output.
fn assert_tool_error(content: &str, what: &str) {
    let lower = content.to_lowercase();
    let words = [
        "error",
        "invalid",
        "unknown",
        "not found",
        "no match",
        "not unique",
        "outside",
        "not allowed",
        "denied",
        "fail",
        "cannot",
        "could not",
        "does not",
        "matches",
        "occurr",
    ];
    assert!(
        words.iter().any(|w| lower.contains(w)),
        "{what}: expected an error message, got {content:?}"
    );
}

#[test]
fn read_edit_run_answer_makes_one_step_commit_and_leaves_the_user_alone() {
    let repo = TestRepo::new();
    repo.write(
        "test.sh",
        "grep -q new file.txt && echo CHECK-PASSED || echo CHECK-FAILED\n",
    );
    repo.commit_all("add a check");
    let before = user_state(&repo);
    let read = call("read_file", json!({"path": "file.txt"}));
    let edit = call(
        "edit_file",
        json!({"path": "file.txt", "old_string": "two", "new_string": "new"}),
    );
    let check = call("run", json!({"command": "sh test.sh"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![read.clone()]),
        Reply::tool_calls(vec![edit.clone()]),
        Reply::tool_calls(vec![check.clone()]),
        Reply::text("Replaced two with new; the check passes."),
    ]);

    let out = repo.run_agent(&server, &["ask", "replace two with new in file.txt"]);

    out.assert_code(0);
    assert!(
        out.stdout()
            .contains("Replaced two with new; the check passes."),
        "{out}"
    );
    let id = session_id(&repo);
    let commits = agent_commits(&repo, &id);
    assert_eq!(
        commits.len(),
        1,
        "one commit for the edit, none for read or run: {commits:?}"
    );
    assert_eq!(trailer(&repo, &commits[0], "Agent-Session"), id);
    assert!(step_of(&repo, &commits[0]) >= 1);
    assert_eq!(
        repo.git(&["diff", "--name-only", "HEAD", &format!("agent/{id}")]),
        "file.txt\n"
    );
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:file.txt")]),
        "one\nnew\nthree\n"
    );
    let checkout = repo.path().join(".git/agent/worktrees").join(&id);
    assert_eq!(
        fs::read_to_string(checkout.join("file.txt")).expect("the checkout holds file.txt"),
        "one\nnew\nthree\n"
    );
    assert_eq!(user_state(&repo), before);
    fsck(&repo);

    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let first = &requests[0];
    assert_eq!(first.path, "/v1/chat/completions");
    assert_eq!(first.header("authorization"), Some("Bearer test-key"));
    assert_eq!(first.body["model"], "test-model");
    assert_eq!(first.body["stream"], true);
    let tools: Vec<&str> = first.body["tools"]
        .as_array()
        .expect("tools are offered")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    for tool in [
        "read_file",
        "list_files",
        "search",
        "edit_file",
        "write_file",
        "run",
    ] {
        assert!(tools.contains(&tool), "{tool} not offered: {tools:?}");
    }
    assert!(
        first.raw_body.contains("replace two with new in file.txt"),
        "the prompt is sent"
    );
    assert!(
        requests[1].tool_result(&read.id).contains("two"),
        "read_file returns the file"
    );
    // The request after the edit carries the assistant's call and the edit's result.
    let calls = requests[2]
        .messages()
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .filter(|c| c["id"] == edit.id.as_str())
        .count();
    assert_eq!(calls, 1, "the edit call is replayed once in the history");
    assert!(!requests[2].tool_result(&edit.id).is_empty());
    let check_result = requests[3].tool_result(&check.id);
    assert!(
        check_result.contains("CHECK-PASSED") && !check_result.contains("CHECK-FAILED"),
        "{check_result:?}"
    );
}

#[test]
fn run_that_creates_a_file_makes_a_step_commit() {
    let repo = TestRepo::new();
    let before = user_state(&repo);
    let server = Server::start(vec![
        Reply::tool_calls(vec![call("run", json!({"command": "echo hi > new.txt"}))]),
        Reply::text("Created new.txt."),
    ]);

    let out = repo.run_agent(&server, &["ask", "create new.txt"]);

    out.assert_code(0);
    let id = session_id(&repo);
    let commits = agent_commits(&repo, &id);
    assert_eq!(commits.len(), 1, "{commits:?}");
    assert_eq!(repo.git(&["show", &format!("agent/{id}:new.txt")]), "hi\n");
    assert_eq!(trailer(&repo, &commits[0], "Agent-Session"), id);
    assert!(step_of(&repo, &commits[0]) >= 1);
    assert!(
        !repo.path().join("new.txt").exists(),
        "the file is made in the agent's checkout, not the user's"
    );
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

#[test]
fn step_commits_carry_the_local_utc_offset_as_git_finds_it() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::tool_calls(vec![call("run", json!({"command": "echo hi > new.txt"}))]),
        Reply::text("Created new.txt."),
    ]);
    // POSIX TZ: "IST-5:30" is five and a half hours east of UTC; git prints it +0530.
    // The test environment pins both dates; here the clock is what is asked.
    let out = run(repo
        .agent(&server, &["ask", "create new.txt"])
        .env("TZ", "IST-5:30")
        .env_remove("GIT_AUTHOR_DATE")
        .env_remove("GIT_COMMITTER_DATE"));
    out.assert_code(0);
    let id = session_id(&repo);
    let dates = repo.git(&["log", "-1", "--format=%ai|%ci", &format!("agent/{id}")]);
    for date in dates.trim().split('|') {
        assert!(
            date.ends_with(" +0530"),
            "author and committer dates: {dates:?}"
        );
    }
}

/// Step 0 skips the HEAD-to-index comparison only when the index's cache tree names HEAD's tree: after
/// `reset --soft` the cache tree is still valid but names the newer tree, and what that leaves staged is
/// captured; in a clean index an unstaged edit is still found.
#[test]
fn step_zero_trusts_the_cache_tree_only_when_it_names_head() {
    let repo = TestRepo::new();
    repo.write("extra.txt", "added in the second commit\n");
    repo.commit_all("second");
    repo.git(&["reset", "-q", "--soft", "HEAD~1"]);
    let server = Server::start(vec![Reply::text("ok")]);
    repo.run_agent(&server, &["ask", "look"]).assert_code(0);
    let id = session_id(&repo);
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:extra.txt")]),
        "added in the second commit\n",
        "the staged file is in step 0"
    );

    let clean = TestRepo::new();
    clean.write("README.md", "# edited, not staged\n");
    let server = Server::start(vec![Reply::text("ok")]);
    clean.run_agent(&server, &["ask", "look"]).assert_code(0);
    let id = session_id(&clean);
    assert_eq!(
        clean.git(&["show", &format!("agent/{id}:README.md")]),
        "# edited, not staged\n"
    );
}

#[test]
fn uncommitted_and_untracked_changes_are_captured_as_step_zero() {
    let repo = TestRepo::new();
    repo.write("README.md", "# demo, staged\n");
    repo.git(&["add", "README.md"]);
    repo.write("file.txt", "one\nTWO by the user\nthree\n");
    repo.write("notes/todo.txt", "untracked note\n");
    let head = repo.git(&["rev-parse", "HEAD"]);
    let before = user_state(&repo);
    let read = call("read_file", json!({"path": "file.txt"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![read.clone()]),
        Reply::text("I see your change."),
    ]);

    let out = repo.run_agent(&server, &["ask", "what did I change?"]);

    out.assert_code(0);
    let id = session_id(&repo);
    let commits = agent_commits(&repo, &id);
    assert_eq!(
        commits.len(),
        1,
        "only the capture; read_file changes nothing: {commits:?}"
    );
    assert_eq!(
        repo.git(&["rev-parse", &format!("{}^", commits[0])]),
        head,
        "step 0 sits directly on HEAD"
    );
    assert_eq!(step_of(&repo, &commits[0]), 0);
    assert_eq!(trailer(&repo, &commits[0], "Agent-Session"), id);
    let branch = format!("agent/{id}");
    assert_eq!(
        repo.git(&["show", &format!("{branch}:file.txt")]),
        "one\nTWO by the user\nthree\n"
    );
    assert_eq!(
        repo.git(&["show", &format!("{branch}:README.md")]),
        "# demo, staged\n"
    );
    assert_eq!(
        repo.git(&["show", &format!("{branch}:notes/todo.txt")]),
        "untracked note\n"
    );
    assert_eq!(
        user_state(&repo),
        before,
        "the user's index, files and untracked files are untouched"
    );
    assert!(
        server.requests()[1]
            .tool_result(&read.id)
            .contains("TWO by the user"),
        "the agent sees what the user sees"
    );
    fsck(&repo);
}

#[test]
fn tool_failures_go_back_to_the_model_and_the_session_continues() {
    let repo = TestRepo::new();
    repo.write("dup.txt", "a\ndup\nb\nc\ndup\n");
    repo.commit_all("add dup.txt");
    fs::write(repo.root().join("outside"), "SECRET-OUTSIDE\n")
        .expect("write a file outside the repo");
    let before = user_state(&repo);
    let bad_json = raw_call("read_file", "{not json");
    let unknown = call("no_such_tool", json!({}));
    let escape = call("read_file", json!({"path": "../outside"}));
    let ambiguous = call(
        "edit_file",
        json!({"path": "dup.txt", "old_string": "dup", "new_string": "x"}),
    );
    let missing = call(
        "edit_file",
        json!({"path": "file.txt", "old_string": "absent text", "new_string": "x"}),
    );
    let calls = [bad_json, unknown, escape, ambiguous, missing];
    let mut script: Vec<Reply> = calls
        .iter()
        .map(|c| Reply::tool_calls(vec![c.clone()]))
        .collect();
    script.push(Reply::text("Everything failed, as scripted."));
    let server = Server::start(script);

    let out = repo.run_agent(&server, &["ask", "try things"]);

    out.assert_code(0);
    assert!(
        out.stdout().contains("Everything failed, as scripted."),
        "{out}"
    );
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        6,
        "one follow-up request per failed call, then the answer"
    );
    let result = |i: usize| requests[i + 1].tool_result(&calls[i].id);
    assert_tool_error(&result(0), "invalid JSON");
    assert!(
        result(0).to_lowercase().contains("json"),
        "the parse error says JSON: {:?}",
        result(0)
    );
    assert_tool_error(&result(1), "unknown tool");
    assert!(
        result(1).contains("no_such_tool"),
        "names the unknown tool: {:?}",
        result(1)
    );
    assert_tool_error(&result(2), "path outside the repo");
    assert!(
        !result(2).contains("SECRET-OUTSIDE"),
        "a file outside the repo must not be read"
    );
    assert_tool_error(&result(3), "non-unique old_string");
    assert!(
        result(3).contains('5'),
        "lists the matching lines (2 and 5): {:?}",
        result(3)
    );
    assert_tool_error(&result(4), "missing old_string");
    let id = session_id(&repo);
    assert_eq!(
        agent_commits(&repo, &id),
        Vec::<String>::new(),
        "failed calls change nothing"
    );
    assert_eq!(
        fs::read_to_string(repo.root().join("outside")).expect("still there"),
        "SECRET-OUTSIDE\n"
    );
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

#[test]
fn no_key_and_no_base_url_fails_before_creating_anything() {
    let repo = TestRepo::new();
    let before = user_state(&repo);
    let server = Server::start(vec![]);
    let mut cmd = repo.agent(&server, &["ask", "hello"]);
    cmd.env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL");

    let out = run(&mut cmd);

    out.assert_code(1);
    assert!(out.first_stderr_line().starts_with("error: "), "{out}");
    assert!(
        out.stderr().contains("OPENAI_API_KEY"),
        "the error names the missing variable\n{out}"
    );
    assert_no_session_left(&repo);
    assert_eq!(user_state(&repo), before);
    assert!(server.requests().is_empty());
}

#[test]
fn unreachable_model_server_fails_with_one_line_and_no_session_left() {
    let repo = TestRepo::new();
    let before = user_state(&repo);
    let server = Server::start(vec![]);
    let mut cmd = repo.agent(&server, &["ask", "hello"]);
    cmd.env("OPENAI_BASE_URL", closed_port_url());

    let out = run(&mut cmd);

    out.assert_code(1);
    assert!(out.first_stderr_line().starts_with("error: "), "{out}");
    assert!(out.stdout().is_empty(), "no answer on stdout\n{out}");
    assert_no_session_left(&repo);
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

#[test]
fn authentication_failure_is_reported_without_the_key() {
    let repo = TestRepo::new();
    let before = user_state(&repo);
    let server = Server::start(vec![Reply::status(401, "Incorrect API key provided.")]);

    let out = repo.run_agent(&server, &["ask", "hello"]);

    out.assert_code(1);
    assert!(out.first_stderr_line().starts_with("error: "), "{out}");
    let stderr = out.stderr().to_lowercase();
    assert!(
        stderr.contains("401") || stderr.contains("authentication"),
        "{out}"
    );
    assert!(
        !out.stderr().contains(API_KEY) && !out.stdout().contains(API_KEY),
        "the key leaked\n{out}"
    );
    assert_eq!(server.requests().len(), 1, "a 401 is not retried");
    assert_no_session_left(&repo);
    assert_eq!(user_state(&repo), before);
}

#[test]
fn max_steps_stops_unfinished_with_exit_3_and_keeps_the_work() {
    let repo = TestRepo::new();
    let before = user_state(&repo);
    let script = (1..=5)
        .map(|n| {
            Reply::tool_calls(vec![call(
                "write_file",
                json!({"path": format!("f{n}.txt"), "content": format!("{n}\n")}),
            )])
        })
        .collect();
    let server = Server::start(script);

    let out = repo.run_agent(&server, &["ask", "--max-steps", "2", "write five files"]);

    assert_eq!(out.code(), 3, "3 means stopped unfinished\n{out}");
    let id = session_id(&repo);
    assert_eq!(
        agent_commits(&repo, &id).len(),
        2,
        "two steps ran and were committed"
    );
    assert_eq!(repo.git(&["show", &format!("agent/{id}:f2.txt")]), "2\n");
    assert!(
        repo.git(&["ls-tree", "--name-only", &format!("agent/{id}")])
            .lines()
            .all(|f| f != "f3.txt"),
        "step 3 never ran"
    );
    assert!(
        server.requests().len() <= 3,
        "the agent stops asking the model"
    );
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

#[test]
fn json_output_escapes_c1_and_bidi_controls_from_model_text() {
    let repo = TestRepo::new();
    let answer = "red \u{9b}31m text, \u{202e}reversed\u{202c} and \u{2066}isolated\u{2069}";
    let server = Server::start(vec![Reply::text(answer)]);

    let out = repo.run_agent(&server, &["ask", "--json", "say something"]);

    out.assert_code(0);
    let raw: Vec<char> = out
        .stdout()
        .chars()
        .filter(|c| {
            ('\u{80}'..='\u{9f}').contains(c)
                || ('\u{202a}'..='\u{202e}').contains(c)
                || ('\u{2066}'..='\u{2069}').contains(c)
                || matches!(c, '\u{200e}' | '\u{200f}' | '\u{61c}')
        })
        .collect();
    assert!(raw.is_empty(), "raw controls {raw:?} on stdout:\n{out}");
    assert!(
        out.stdout().contains("\\u009b"),
        "the CSI is escaped:\n{out}"
    );
    let events: Vec<Value> = out
        .stdout()
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}\n{out}"))
        })
        .collect();
    let streamed: String = events
        .iter()
        .filter(|e| e["type"] == "text")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert_eq!(
        streamed, answer,
        "text deltas decode to the model's text:\n{out}"
    );
    let done = events
        .iter()
        .find(|e| e["type"] == "done")
        .unwrap_or_else(|| panic!("no done event:\n{out}"));
    assert_eq!(
        done["answer"], answer,
        "the answer decodes to the model's text:\n{out}"
    );
    fsck(&repo);
}

#[test]
fn json_output_is_one_event_per_line() {
    let repo = TestRepo::new();
    let write = call("write_file", json!({"path": "out.txt", "content": "x\n"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![write.clone()]),
        Reply::text("All good."),
    ]);

    let out = repo.run_agent(&server, &["ask", "--json", "write out.txt"]);

    out.assert_code(0);
    let events: Vec<Value> = out
        .stdout()
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}\n{out}"))
        })
        .collect();
    let types: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_else(|| panic!("no type: {e}")))
        .collect();
    let known = [
        "session",
        "text",
        "tool_call",
        "tool_result",
        "permission",
        "step",
        "usage",
        "done",
        "error",
    ];
    assert!(
        types.iter().all(|t| known.contains(t)),
        "unknown event type in {types:?}"
    );
    for wanted in [
        "session",
        "tool_call",
        "permission",
        "tool_result",
        "step",
        "done",
    ] {
        assert!(types.contains(&wanted), "no {wanted} event in {types:?}");
    }
    assert_eq!(types.last(), Some(&"done"), "done comes last");
    let id = session_id(&repo);
    let session = &events[types
        .iter()
        .position(|t| *t == "session")
        .expect("checked above")];
    assert!(
        session.to_string().contains(&id),
        "the session event names {id}: {session}"
    );
    let tip = repo.git(&["rev-parse", &format!("agent/{id}")]);
    let step = &events[types
        .iter()
        .position(|t| *t == "step")
        .expect("checked above")];
    assert!(
        step.to_string().contains(&tip[..7]),
        "the step event names its commit {tip}: {step}"
    );
    let tool_call = &events[types
        .iter()
        .position(|t| *t == "tool_call")
        .expect("checked above")];
    assert_eq!(tool_call["name"], "write_file");
    assert!(
        events
            .last()
            .expect("non-empty")
            .to_string()
            .contains("All good."),
        "done carries the answer"
    );
}

#[test]
fn several_tool_calls_in_one_response_run_in_order() {
    let repo = TestRepo::new();
    let write = call("write_file", json!({"path": "a.txt", "content": "1\n"}));
    let edit = call(
        "edit_file",
        json!({"path": "a.txt", "old_string": "1", "new_string": "2"}),
    );
    let read = call("read_file", json!({"path": "a.txt"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![write.clone(), edit.clone(), read.clone()]),
        Reply::text("a.txt says 2."),
    ]);

    let out = repo.run_agent(&server, &["ask", "make a.txt"]);

    out.assert_code(0);
    let id = session_id(&repo);
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:a.txt")]),
        "2\n",
        "the edit ran after the write"
    );
    let commits = agent_commits(&repo, &id);
    assert_eq!(
        commits.len(),
        2,
        "one commit per file-changing call: {commits:?}"
    );
    assert!(
        step_of(&repo, &commits[0]) < step_of(&repo, &commits[1]),
        "steps count up"
    );
    let results = server.requests()[1].tool_results();
    let order: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(
        order,
        [write.id.as_str(), edit.id.as_str(), read.id.as_str()],
        "results come back in call order"
    );
    assert!(
        results[2].1.contains('2') && !results[2].1.contains("1\n"),
        "read sees the edited file: {:?}",
        results[2].1
    );
    fsck(&repo);
}

/// `GIT_AGENT_FOOTPRINT` (what scripts/bench-fleet.py reads): one line per part a session sets up, each with the
/// process's resident memory at that point; and nothing at all without the variable.
#[test]
fn footprint_marks_are_written_only_when_asked_for() {
    let repo = TestRepo::new();
    let report = repo.path().join(".git").join("footprint.jsonl");
    let server = Server::start(vec![
        Reply::tool_calls(vec![call("read_file", json!({"path": "file.txt"}))]),
        Reply::text("done"),
    ]);
    let mut cmd = repo.agent(&server, &["ask", "look"]);
    cmd.env("GIT_AGENT_FOOTPRINT", &report);
    run(&mut cmd).assert_code(0);
    let marks: Vec<Value> = fs::read_to_string(&report)
        .expect("the marks were written")
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object a line"))
        .collect();
    let names: Vec<&str> = marks.iter().filter_map(|m| m["at"].as_str()).collect();
    assert_eq!(
        names,
        [
            "start",
            "runtime",
            "client",
            "repository",
            "open",
            "first reply",
            "checkout",
            "close"
        ],
        "{marks:?}"
    );
    for mark in &marks {
        let rss = mark["rss_kb"].as_u64().unwrap_or(0);
        let peak = mark["hwm_kb"].as_u64().unwrap_or(0);
        assert!(
            rss > 0 && peak >= rss,
            "resident and peak memory read: {mark}"
        );
    }

    let server = Server::start(vec![Reply::text("done")]);
    repo.run_agent(&server, &["ask", "again"]).assert_code(0);
    assert_eq!(
        fs::read_to_string(&report)
            .map(|text| text.lines().count())
            .ok(),
        Some(marks.len()),
        "a session without the variable adds no mark"
    );
}
