//! `git agent acp` against real ACP clients nobody here wrote: acpx (npm, on the Node 22 binary from npm) and
//! the Python SDK's client (PyPI `agent-client-protocol`), plus a raw JSON-RPC client of our own for what those
//! cannot be made to send at a chosen moment (a steering prompt mid-turn, a cancel while a command runs, a
//! cancelled permission question, bad lines). Every line the agent writes in the partner runs is checked
//! against ACP's v1 JSON Schema (npm `@agentclientprotocol/sdk`) with Python's `jsonschema`
//! (`tests/acp/validate.py`), which also proves stdout carries nothing but ACP messages.
//!
//! `.ci/run` installs the partners into a cache folder and points `GIT_AGENT_ACP_PARTNERS` at it (`npm/` with
//! acpx, the SDK and Node 22, `venv/` with jsonschema and agent-client-protocol). Without that variable the
//! partner tests say loudly that they were skipped and pass; the raw-client tests always run.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{self, call, run, session_id, user_state, Reply, Server, TestRepo};

const PARTNERS_VAR: &str = "GIT_AGENT_ACP_PARTNERS";
/// How long any one protocol message may take to arrive before the test calls it a hang.
const WAIT: Duration = Duration::from_secs(30);

use crate::common::partners::Partners;

/// What `.ci/run` installs under `GIT_AGENT_ACP_PARTNERS`.
const INSTALLS: &str = "acpx, the ACP schema and the Python ACP client";

/// The ACP partners; a test that needs them is ignored by a plain `cargo test` and fails without them.
fn partners() -> Partners {
    Partners::require(PARTNERS_VAR, INSTALLS)
}

impl Partners {
    fn acpx(&self) -> PathBuf {
        self.path("npm/node_modules/.bin/acpx")
    }

    fn python(&self) -> PathBuf {
        self.path("venv/bin/python")
    }

    fn schema(&self) -> PathBuf {
        self.path("npm/node_modules/@agentclientprotocol/sdk/schema/v1/schema.json")
    }

    /// Checks both logs of a run against the schema; returns the validator's summary (message counts).
    fn validate(&self, client_log: &Path, agent_log: &Path) -> Value {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp/validate.py");
        let out = run(Command::new(self.python())
            .arg(script)
            .arg(self.schema())
            .arg(client_log)
            .arg(agent_log));
        assert_eq!(
            out.status.code(),
            Some(0),
            "the agent wrote messages that are not valid ACP:\n{out}"
        );
        serde_json::from_str(out.stdout())
            .unwrap_or_else(|e| panic!("summary not JSON ({e}): {out}"))
    }
}

/// The recording wrapper acpx starts instead of `git agent acp`, and what it recorded: per agent process
/// (acpx starts one per command, and request ids start over in each), both directions of the protocol.
struct Recording {
    dir: PathBuf,
    wrapper: PathBuf,
}

/// One agent process's conversation with its client.
struct Run {
    client_log: PathBuf,
    agent_log: PathBuf,
    client: Vec<Value>,
    agent: Vec<Value>,
}

impl Recording {
    /// Writes the wrapper: the same process (exec) with both of its streams copied to `<pid>.in` and
    /// `<pid>.out`, its pid listed so the test can find the runs in order and wait for them to exit.
    fn new(repo: &TestRepo) -> Recording {
        let dir = repo.root().join("acp-runs");
        std::fs::create_dir_all(&dir).expect("create the recording dir");
        let wrapper = repo.root().join("acp-agent");
        let script = "#!/bin/bash\n\
            echo $$ >> \"$ACP_TEST_DIR/pids\"\n\
            exec git agent acp $ACP_TEST_FLAGS < <(tee -a \"$ACP_TEST_DIR/$$.in\") > >(tee -a \"$ACP_TEST_DIR/$$.out\")\n";
        std::fs::write(&wrapper, script).expect("write the wrapper");
        let mut perms = std::fs::metadata(&wrapper).expect("stat").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&wrapper, perms).expect("chmod the wrapper");
        Recording { dir, wrapper }
    }

    fn pids(&self) -> Vec<String> {
        let pids = std::fs::read_to_string(self.dir.join("pids")).unwrap_or_default();
        pids.split_whitespace().map(String::from).collect()
    }

    /// Every agent process's conversation so far, oldest first.
    fn runs(&self) -> Vec<Run> {
        self.pids()
            .into_iter()
            .map(|pid| {
                let (client_log, agent_log) = (
                    self.dir.join(format!("{pid}.in")),
                    self.dir.join(format!("{pid}.out")),
                );
                Run {
                    client: lines_of(&std::fs::read_to_string(&client_log).unwrap_or_default()),
                    agent: lines_of(&std::fs::read_to_string(&agent_log).unwrap_or_default()),
                    client_log,
                    agent_log,
                }
            })
            .collect()
    }

    /// The only agent process's conversation.
    fn only(&self) -> Run {
        let mut runs = self.runs();
        assert_eq!(runs.len(), 1, "one agent process");
        runs.remove(0)
    }

    /// Waits until every agent process the wrapper started has exited (acpx's queue owner keeps one alive
    /// for its `--ttl` after a prompt), so the next acpx process must start and attach a new one.
    fn wait_for_exits(&self) {
        let deadline = Instant::now() + WAIT;
        for pid in self.pids() {
            while Path::new(&format!("/proc/{pid}")).exists() {
                assert!(
                    Instant::now() < deadline,
                    "agent process {pid} did not exit"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Checks every run against the schema.
    fn validate(&self, partners: &Partners) {
        for run in self.runs() {
            partners.validate(&run.client_log, &run.agent_log);
        }
    }
}

fn lines_of(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect()
}

/// acpx with `args`, the repo's hermetic environment, Node 22 and this build first on PATH, and the
/// recording wrapper's files.
fn acpx(
    partners: &Partners,
    repo: &TestRepo,
    server: &Server,
    rec: &Recording,
    args: &[&str],
) -> Command {
    let bin = Path::new(env!("CARGO_BIN_EXE_git-agent"))
        .parent()
        .expect("the binary lives in a directory");
    let path = format!(
        "{}:{}:{}",
        partners.node22().display(),
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let acpx = partners.acpx();
    let mut cmd = repo.via(server, &acpx.to_string_lossy(), args);
    cmd.env("PATH", path)
        .env("ACP_TEST_DIR", &rec.dir)
        .env("ACP_TEST_FLAGS", "");
    cmd
}

/// The `session/update`s of the agent's lines, as `(sessionUpdate, update)`.
fn updates(lines: &[Value]) -> Vec<(String, Value)> {
    lines
        .iter()
        .filter(|l| l["method"] == "session/update")
        .map(|l| {
            let update = l["params"]["update"].clone();
            (
                update["sessionUpdate"].as_str().unwrap_or("?").to_string(),
                update,
            )
        })
        .collect()
}

/// The final status each tool call reached (`completed`/`failed`), asserting every call got one.
fn final_statuses(lines: &[Value]) -> Vec<(String, String)> {
    let mut calls: Vec<(String, String)> = Vec::new();
    for (kind, update) in updates(lines) {
        let id = update["toolCallId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match kind.as_str() {
            "tool_call" => calls.push((id, update["status"].as_str().unwrap_or("?").to_string())),
            "tool_call_update" => {
                if let Some(status) = update["status"].as_str() {
                    let call = calls.iter_mut().find(|(c, _)| *c == id);
                    let (_, last) =
                        call.unwrap_or_else(|| panic!("an update of a call never shown: {update}"));
                    assert!(
                        !matches!(last.as_str(), "completed" | "failed"),
                        "an update after the final one: {update}"
                    );
                    *last = status.to_string();
                }
            }
            _ => {}
        }
    }
    for (id, status) in &calls {
        assert!(
            matches!(status.as_str(), "completed" | "failed"),
            "tool call {id} was left {status}"
        );
    }
    calls
}

/// The result of the agent's answer to the client's request of `method` (the last one).
fn answer_to<'a>(client: &[Value], agent: &'a [Value], method: &str) -> &'a Value {
    let id = &client
        .iter()
        .rev()
        .find(|m| m["method"] == method && m.get("id").is_some())
        .unwrap_or_else(|| panic!("the client never sent {method}"))["id"];
    agent
        .iter()
        .find(|m| m["id"] == *id && m.get("method").is_none())
        .unwrap_or_else(|| panic!("no answer to {method} (id {id})"))
}

#[test]
#[ignore = "needs the ACP partners: run by .ci/run"]
fn acpx_exec_reads_edits_and_runs_and_the_edit_is_a_commit() {
    let partners = partners();
    let repo = TestRepo::new();
    let before = user_state(&repo);
    let read = call("read_file", json!({"path": "file.txt"}));
    let edit = call(
        "edit_file",
        json!({"path": "file.txt", "old_string": "two", "new_string": "TWO"}),
    );
    let cat = call("run", json!({"command": "cat file.txt"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![read.clone()]),
        Reply::text_and_tool_calls("Now the edit.", vec![edit.clone()]),
        Reply::tool_calls(vec![cat.clone()]),
        Reply::text("file.txt says TWO now."),
    ]);
    let rec = Recording::new(&repo);
    let out = run(&mut acpx(
        &partners,
        &repo,
        &server,
        &rec,
        &[
            "--agent",
            &rec.wrapper.to_string_lossy(),
            "--approve-all",
            "--format",
            "json",
            "--ttl",
            "1",
            "exec",
            "make two loud",
        ],
    ));
    out.assert_code(0);
    assert!(
        out.stdout().contains("\"stopReason\":\"end_turn\""),
        "{out}"
    );
    let run = rec.only();
    let (client, agent) = (&run.client, &run.agent);
    assert_eq!(
        answer_to(client, agent, "session/prompt")["result"]["stopReason"],
        "end_turn"
    );

    // The edit is a step commit on agent/<id>, made in the agent's checkout; the user's tree is as it was.
    let id = session_id(&repo);
    assert_eq!(
        answer_to(client, agent, "session/new")["result"]["sessionId"],
        id.as_str()
    );
    let commits = common::agent_commits(&repo, &id);
    assert_eq!(commits.len(), 1, "one step: {commits:?}");
    assert_eq!(common::trailer(&repo, &commits[0], "Agent-Step"), "1");
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:file.txt")]),
        "one\nTWO\nthree\n"
    );
    assert_eq!(user_state(&repo), before);

    // Each call: kind, title, locations, rawInput, then a final status; the edit carries its diff.
    let statuses = final_statuses(agent);
    assert_eq!(
        statuses,
        [read.id.clone(), edit.id.clone(), cat.id.clone()].map(|i| (i, "completed".to_string()))
    );
    let ups = updates(agent);
    let shown = |call: &str| {
        ups.iter()
            .find(|(k, u)| k == "tool_call" && u["toolCallId"] == call)
            .map(|(_, u)| u.clone())
            .unwrap_or_else(|| panic!("no tool_call {call}"))
    };
    assert_eq!(shown(&read.id)["kind"], "read");
    assert_eq!(shown(&edit.id)["kind"], "edit");
    assert_eq!(shown(&cat.id)["kind"], "execute");
    assert_eq!(shown(&cat.id)["rawInput"]["command"], "cat file.txt");
    let location = &shown(&read.id)["locations"][0];
    assert!(
        location["path"].as_str().unwrap().ends_with("/file.txt"),
        "{location}"
    );
    assert_eq!(location["line"], 1);
    let done = |call: &str| {
        ups.iter()
            .rev()
            .find(|(k, u)| k == "tool_call_update" && u["toolCallId"] == call)
            .map(|(_, u)| u.clone())
            .unwrap_or_else(|| panic!("no final update of {call}"))
    };
    let diff = &done(&edit.id)["content"][0];
    assert_eq!(diff["type"], "diff", "{diff}");
    assert_eq!(
        (diff["oldText"].as_str(), diff["newText"].as_str()),
        (Some("one\ntwo\nthree\n"), Some("one\nTWO\nthree\n"))
    );
    assert!(
        diff["path"].as_str().unwrap().starts_with('/'),
        "absolute: {diff}"
    );
    assert_eq!(done(&edit.id)["locations"][0]["line"], 2, "the edited line");
    let ran = done(&cat.id)["content"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(ran.contains("TWO"), "the command's output is shown: {ran}");
    let texts: String = ups
        .iter()
        .filter(|(k, _)| k == "agent_message_chunk")
        .map(|(_, u)| u["content"]["text"].as_str().unwrap_or_default())
        .collect();
    assert!(
        texts.contains("Now the edit.") && texts.contains("file.txt says TWO now."),
        "{texts}"
    );
    let summary = partners.validate(&run.client_log, &run.agent_log);
    assert!(
        summary["counts"]["notification session/update tool_call"] == 3,
        "{summary}"
    );
}

/// A named session across acpx processes: each starts a new agent process, which reattaches the session
/// (acpx 0.19.1 prefers session/resume when it is offered, and falls back to session/load) and commits on
/// the same branch.
#[test]
#[ignore = "needs the ACP partners: run by .ci/run"]
fn a_second_acpx_process_continues_the_named_session_on_its_branch() {
    let partners = partners();
    let repo = TestRepo::new();
    let first = call("write_file", json!({"path": "a.txt", "content": "first\n"}));
    let second = call(
        "write_file",
        json!({"path": "b.txt", "content": "second\n"}),
    );
    let third = call("write_file", json!({"path": "c.txt", "content": "third\n"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![first]),
        Reply::text("wrote a.txt"),
        Reply::tool_calls(vec![second]),
        Reply::text("wrote b.txt"),
        Reply::tool_calls(vec![third]),
        Reply::text("wrote c.txt"),
    ]);
    let rec = Recording::new(&repo);
    let agent = rec.wrapper.to_string_lossy().into_owned();
    let acpx_run = |flags: &str, args: &[&str]| {
        let mut all = vec![
            "--agent",
            agent.as_str(),
            "--approve-all",
            "--format",
            "json",
            "--ttl",
            "1",
        ];
        all.extend_from_slice(args);
        let mut cmd = acpx(&partners, &repo, &server, &rec, &all);
        cmd.env("ACP_TEST_FLAGS", flags);
        let out = run(&mut cmd);
        rec.wait_for_exits();
        out
    };
    acpx_run("", &["sessions", "new"]).assert_code(0);
    let id = session_id(&repo);
    acpx_run("", &["write a"]).assert_code(0);
    // A new agent process: it is offered session/resume and takes it.
    acpx_run("", &["write b"]).assert_code(0);
    let methods = |lines: &[Value]| -> Vec<String> {
        lines
            .iter()
            .filter_map(|l| l["method"].as_str().map(String::from))
            .collect()
    };
    let runs = rec.runs();
    assert_eq!(runs.len(), 3, "one agent process per acpx command");
    assert!(methods(&runs[0].client).contains(&"session/new".to_string()));
    for run in &runs[1..] {
        let sent = methods(&run.client);
        assert!(sent.contains(&"session/resume".to_string()), "{sent:?}");
        // Resume reattaches without replay: nothing of the stored conversation comes before its answer.
        let resume = run
            .client
            .iter()
            .find(|m| m["method"] == "session/resume")
            .expect("a session/resume request");
        let answered = run
            .agent
            .iter()
            .position(|m| m["id"] == resume["id"] && m.get("method").is_none())
            .expect("session/resume is answered");
        let replayed: Vec<&Value> = run.agent[..answered]
            .iter()
            .filter(|m| m["method"] == "session/update")
            .collect();
        assert!(replayed.is_empty(), "resume replayed: {replayed:?}");
        assert_eq!(
            answer_to(&run.client, &run.agent, "session/prompt")["result"]["stopReason"],
            "end_turn"
        );
    }
    // Without session/resume on offer, the next process reattaches with session/load, which replays.
    acpx_run("--no-resume", &["write c"]).assert_code(0);
    let last_run = rec.runs().pop().expect("a fourth run");
    let (client, agent_lines) = (&last_run.client, &last_run.agent);
    let load = client
        .iter()
        .find(|m| m["method"] == "session/load")
        .unwrap_or_else(|| panic!("no session/load in {:?}", methods(client)));
    assert_eq!(load["params"]["sessionId"], id.as_str());
    let answered = agent_lines
        .iter()
        .position(|m| m["id"] == load["id"] && m.get("method").is_none())
        .expect("session/load is answered");
    let replayed: Vec<String> = agent_lines[..answered]
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| {
            m["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    for said in ["write a", "wrote a.txt", "write b", "wrote b.txt"] {
        assert!(
            replayed.iter().any(|t| t == said),
            "{said:?} not replayed before the answer: {replayed:?}"
        );
    }
    // One branch, three steps, and the last request carried the whole conversation.
    assert_eq!(common::agent_commits(&repo, &id).len(), 3);
    for file in ["a.txt", "b.txt", "c.txt"] {
        repo.git(&["cat-file", "-e", &format!("agent/{id}:{file}")]);
    }
    let last = server.requests().pop().expect("requests");
    assert_eq!(last.user_texts()[..3], ["write a", "write b", "write c"]);
    final_statuses(agent_lines);
    rec.validate(&partners);
}

#[test]
#[ignore = "needs the ACP partners: run by .ci/run"]
fn acpx_cancel_during_a_stalled_model_request_answers_cancelled() {
    let partners = partners();
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::text("too late").stalled_after(1, Duration::from_secs(40))
    ]);
    let rec = Recording::new(&repo);
    let agent = rec.wrapper.to_string_lossy().into_owned();
    let base = [
        "--agent",
        agent.as_str(),
        "--approve-all",
        "--format",
        "json",
        "--ttl",
        "1",
    ];
    let with = |args: &[&str]| {
        let mut all = base.to_vec();
        all.extend_from_slice(args);
        acpx(&partners, &repo, &server, &rec, &all)
    };
    run(&mut with(&["sessions", "new"])).assert_code(0);
    let started = Instant::now();
    let mut prompt = with(&["wait for it"]);
    let prompt = std::thread::spawn(move || run(&mut prompt));
    let deadline = Instant::now() + WAIT;
    while server.requests().is_empty() {
        assert!(Instant::now() < deadline, "the model request never came");
        std::thread::sleep(Duration::from_millis(20));
    }
    run(&mut with(&["cancel"])).assert_code(0);
    let out = prompt.join().expect("the prompt's acpx");
    assert_eq!(out.code(), 0, "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "ended by the cancel, not the stall"
    );
    assert_eq!(
        server.wait_for_hangups(1),
        1,
        "the model request was dropped"
    );
    rec.wait_for_exits();
    let prompted = rec.runs().pop().expect("the prompt's agent process");
    let (client, agent_lines) = (&prompted.client, &prompted.agent);
    assert!(
        client.iter().any(|m| m["method"] == "session/cancel"),
        "acpx sent session/cancel"
    );
    let answer = answer_to(client, agent_lines, "session/prompt");
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    rec.validate(&partners);
}

#[test]
#[ignore = "needs the ACP partners: run by .ci/run"]
fn acpx_deny_all_refuses_a_risky_command_and_exits_5() {
    let partners = partners();
    let repo = TestRepo::new();
    let push = call("run", json!({"command": "git push origin HEAD"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![push.clone()]),
        Reply::text("I could not push: you refused."),
    ]);
    let rec = Recording::new(&repo);
    let agent = rec.wrapper.to_string_lossy().into_owned();
    let out = run(&mut acpx(
        &partners,
        &repo,
        &server,
        &rec,
        &[
            "--agent",
            &agent,
            "--deny-all",
            "--format",
            "json",
            "--ttl",
            "1",
            "exec",
            "push it",
        ],
    ));
    assert_eq!(out.code(), 5, "acpx's permission-denied exit\n{out}");
    let run = rec.only();
    let (client, agent_lines) = (&run.client, &run.agent);
    // The question comes after the call it is about, and names it.
    let shown = agent_lines
        .iter()
        .position(|m| {
            m["params"]["update"]["sessionUpdate"] == "tool_call"
                && m["params"]["update"]["toolCallId"] == push.id.as_str()
        })
        .expect("the call was shown");
    let asked = agent_lines
        .iter()
        .position(|m| m["method"] == "session/request_permission")
        .expect("permission was asked");
    assert!(shown < asked, "asked about a call the client had not seen");
    let question = &agent_lines[asked]["params"];
    assert_eq!(question["toolCall"]["toolCallId"], push.id.as_str());
    let kinds: Vec<&str> = question["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["allow_once", "allow_always", "reject_once", "reject_always"]
    );
    // A refusal the model is told about, and the turn goes on to its end: not a cancel.
    assert_eq!(
        final_statuses(agent_lines),
        [(push.id.clone(), "failed".to_string())]
    );
    let told = server.requests()[1].tool_result(&push.id);
    assert!(told.contains("declined"), "{told}");
    assert_eq!(
        answer_to(client, agent_lines, "session/prompt")["result"]["stopReason"],
        "end_turn"
    );
    rec.validate(&partners);
}

#[test]
#[ignore = "needs the ACP partners: run by .ci/run"]
fn the_python_sdk_client_prompts_lists_and_loads_a_session() {
    let partners = partners();
    let repo = TestRepo::new();
    let write = call("write_file", json!({"path": "a.txt", "content": "first\n"}));
    let server = Server::start(vec![
        Reply::text_and_tool_calls("Writing.", vec![write.clone()]),
        Reply::text("wrote a.txt"),
        Reply::text("still here"),
    ]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp/client.py");
    let repo_path = repo.path().to_string_lossy().into_owned();
    let mut cmd = repo.via(
        &server,
        &partners.python().to_string_lossy(),
        &[
            &script.to_string_lossy(),
            &repo_path,
            "write a",
            "anything else?",
        ],
    );
    let out = run(&mut cmd);
    out.assert_code(0);
    let seen: Value = serde_json::from_str(out.stdout()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(seen["initialize"]["protocolVersion"], 1);
    assert_eq!(seen["initialize"]["loadSession"], true);
    assert_eq!(seen["initialize"]["agent"], "git-agent");
    let id = session_id(&repo);
    assert_eq!(seen["first"]["sessionId"], id.as_str());
    assert_eq!(seen["first"]["stopReason"], "end_turn");
    assert!(
        seen["listed"].as_array().unwrap().contains(&json!(id)),
        "{seen}"
    );
    let kinds = |updates: &Value| -> Vec<String> {
        updates
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["sessionUpdate"].as_str().unwrap().to_string())
            .collect()
    };
    let replayed = kinds(&seen["replayed"]);
    for wanted in [
        "user_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
    ] {
        assert!(
            replayed.iter().any(|k| k == wanted),
            "no {wanted} replayed: {replayed:?}"
        );
    }
    let prompt = &seen["replayed"][0];
    assert_eq!(prompt["content"]["text"], "write a", "{prompt}");
    let last = seen["replayed"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|u| u["toolCallId"] == write.id.as_str())
        .unwrap();
    assert_eq!(
        last["status"], "completed",
        "replayed with its final status"
    );
    assert_eq!(seen["second"]["stopReason"], "end_turn");
    let last_request = server.requests().pop().unwrap();
    assert_eq!(
        last_request.user_texts(),
        ["write a", "anything else?"],
        "the loaded conversation went on"
    );
    assert_eq!(common::agent_commits(&repo, &id).len(), 1);
}

/// A client of our own on the agent's pipes, reading every line the agent writes.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    /// Everything written by each side, in order, for the schema check.
    sent: Vec<String>,
    got: Vec<String>,
    next_id: u64,
}

impl Raw {
    fn start(repo: &TestRepo, server: &Server, flags: &[&str]) -> Raw {
        Raw::start_with_stderr(repo, server, flags, Stdio::inherit())
    }

    /// [`Raw::start`] with the agent's stderr going to `stderr`.
    fn start_with_stderr(repo: &TestRepo, server: &Server, flags: &[&str], stderr: Stdio) -> Raw {
        let mut args = vec!["acp"];
        args.extend_from_slice(flags);
        let mut child = repo
            .agent(server, &args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start git agent acp");
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        Raw {
            child,
            stdin,
            lines,
            sent: Vec::new(),
            got: Vec::new(),
            next_id: 100,
        }
    }

    fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{line}").expect("write to the agent");
        stdin.flush().expect("flush");
        self.sent.push(line.to_string());
    }

    fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send_line(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        id
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send_line(&json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string());
    }

    /// The next message; every line must be a JSON object.
    fn next(&mut self) -> Value {
        let line = self.lines.recv_timeout(WAIT).unwrap_or_else(|_| {
            panic!(
                "no message from the agent within {WAIT:?}; so far: {:#?}",
                self.got
            )
        });
        self.got.push(line.clone());
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {line:?}"));
        assert_eq!(value["jsonrpc"], "2.0", "{line}");
        value
    }

    /// Messages up to and including the first one `stop` accepts.
    fn until(&mut self, stop: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let message = self.next();
            let done = stop(&message);
            seen.push(message);
            if done {
                return seen;
            }
        }
    }

    /// Messages up to the answer to request `id`; returns them with the answer last.
    fn answer(&mut self, id: u64) -> Vec<Value> {
        self.until(|m| m["id"] == id && m.get("method").is_none())
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.answer(id).pop().expect("the answer")
    }

    fn initialize(&mut self) -> Value {
        self.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
    }

    fn new_session(&mut self, repo: &TestRepo) -> String {
        let answer = self.call("session/new", json!({"cwd": repo.path(), "mcpServers": []}));
        answer["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"))
            .to_string()
    }

    /// Closes stdin, waits for the process to exit, and checks what it wrote (when the partners are here).
    fn finish(mut self, repo: &TestRepo) {
        drop(self.stdin.take());
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "git agent acp did not exit after stdin closed"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "git agent acp exited with {status}");
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
            self.got.push(line);
        }
        let dir = repo.root();
        let (client, agent) = (dir.join("raw-client.log"), dir.join("raw-agent.log"));
        std::fs::write(&client, self.sent.join("\n") + "\n").expect("write the log");
        std::fs::write(
            &agent,
            self.got
                .iter()
                .map(|l| format!("{l}\n"))
                .collect::<String>(),
        )
        .expect("write the log");
        // The schema check, the second half of every raw-client test, runs wherever the partners are (under
        // CI always); the first half is about git-agent alone and needs none.
        if crate::common::partners::optional(PARTNERS_VAR, INSTALLS).is_some() {
            partners().validate(&client, &agent);
        }
    }
}

fn stop_reason(answer: &Value) -> &str {
    answer["result"]["stopReason"]
        .as_str()
        .unwrap_or_else(|| panic!("not a prompt result: {answer}"))
}

#[test]
fn raw_initialize_capabilities_and_bad_requests() {
    let repo = TestRepo::new();
    let server = Server::start(vec![]);
    let mut acp = Raw::start(&repo, &server, &[]);
    let init = acp.initialize();
    let result = &init["result"];
    assert_eq!(result["protocolVersion"], 1);
    assert_eq!(result["agentInfo"]["name"], "git-agent");
    let caps = &result["agentCapabilities"];
    assert_eq!(caps["loadSession"], true);
    assert_eq!(caps["promptCapabilities"]["embeddedContext"], true);
    assert_eq!(caps["promptCapabilities"]["image"], false);
    assert_eq!(caps["mcpCapabilities"], json!({"http": true, "sse": false}));
    assert_eq!(
        caps["sessionCapabilities"],
        json!({"list": {}, "resume": {}, "close": {}})
    );

    let error = |answer: &Value| {
        answer["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("not an error: {answer}"))
    };
    assert_eq!(error(&acp.call("_zed/whatever", json!({}))), -32601);
    assert_eq!(
        error(&acp.call("session/set_mode", json!({"sessionId": "x", "modeId": "y"}))),
        -32601
    );
    let unknown = acp.call(
        "session/prompt",
        json!({"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]}),
    );
    assert_eq!(error(&unknown), -32002, "{unknown}");
    let relative = acp.call("session/new", json!({"cwd": "repo", "mcpServers": []}));
    assert_eq!(error(&relative), -32602, "{relative}");
    let outside = acp.call("session/new", json!({"cwd": repo.root(), "mcpServers": []}));
    assert!(
        outside["error"]["message"]
            .as_str()
            .unwrap()
            .contains("git"),
        "{outside}"
    );
    let missing = acp.call(
        "session/load",
        json!({"sessionId": "abcdef", "cwd": repo.path(), "mcpServers": []}),
    );
    assert_eq!(error(&missing), -32002, "{missing}");
    // Not JSON, or not JSON-RPC: answered, and the connection goes on.
    acp.send_line("{not json");
    assert_eq!(error(&acp.next()), -32700);
    acp.send_line(r#"{"id": 7, "method": "initialize"}"#);
    let invalid = acp.next();
    assert_eq!((invalid["id"].as_i64(), error(&invalid)), (Some(7), -32600));
    // Notifications of unknown methods get no answer at all; the next request is answered next.
    acp.notify("_zed/ping", json!({}));
    let listed = acp.call("session/list", json!({"cwd": repo.path()}));
    assert_eq!(listed["result"]["sessions"], json!([]), "{listed}");
    acp.finish(&repo);
    assert!(
        common::agent_branches(&repo).is_empty(),
        "nothing was started"
    );
}

#[test]
fn raw_a_prompt_during_a_turn_steers_it_and_is_answered_with_the_turn() {
    let repo = TestRepo::new();
    let slow = call("run", json!({"command": "sleep 2"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![slow.clone()]),
        Reply::text("done, and noted"),
    ]);
    let mut acp = Raw::start(&repo, &server, &[]);
    acp.initialize();
    let sid = acp.new_session(&repo);
    let first = acp.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "start"}]}),
    );
    acp.until(|m| {
        m["params"]["update"]["toolCallId"] == slow.id.as_str()
            && m["params"]["update"]["status"] == "in_progress"
    });
    let second = acp.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "also note this"}]}),
    );
    let seen = acp.until(|m| m["id"] == second && m.get("method").is_none());
    let answers: Vec<&Value> = seen.iter().filter(|m| m.get("result").is_some()).collect();
    assert_eq!(answers.len(), 2, "{seen:#?}");
    assert_eq!(answers[0]["id"], first);
    assert_eq!(stop_reason(answers[0]), "end_turn");
    assert_eq!(answers[0]["result"]["_meta"]["steered"], false);
    assert_eq!(stop_reason(answers[1]), "end_turn");
    assert_eq!(answers[1]["result"]["_meta"]["steered"], true);
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "the steering joined the running turn");
    assert_eq!(requests[1].user_texts(), ["start", "also note this"]);
    acp.finish(&repo);
}

#[test]
fn raw_cancel_kills_a_running_command_and_closes_its_call() {
    let repo = TestRepo::new();
    let slow = call("run", json!({"command": "sleep 30"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![slow.clone()]),
        Reply::text("never"),
    ]);
    let mut acp = Raw::start(&repo, &server, &[]);
    acp.initialize();
    let sid = acp.new_session(&repo);
    let started = Instant::now();
    let prompt = acp.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "wait"}]}),
    );
    acp.until(|m| {
        m["params"]["update"]["toolCallId"] == slow.id.as_str()
            && m["params"]["update"]["status"] == "in_progress"
    });
    acp.notify("session/cancel", json!({"sessionId": sid}));
    let seen = acp.answer(prompt);
    let answer = seen.last().unwrap();
    assert_eq!(stop_reason(answer), "cancelled", "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the command was killed, not waited for"
    );
    let closed = seen
        .iter()
        .find(|m| m["params"]["update"]["toolCallId"] == slow.id.as_str())
        .expect("the call got a final update before the answer");
    assert_eq!(closed["params"]["update"]["status"], "failed", "{closed}");
    assert_eq!(
        server.requests().len(),
        1,
        "no model request after the cancel"
    );
    // The session lives on: the next prompt is a new turn.
    acp.finish(&repo);
}

#[test]
fn raw_a_cancelled_permission_question_cancels_and_reject_always_is_remembered() {
    let repo = TestRepo::new();
    let push = call("run", json!({"command": "git push origin HEAD"}));
    let again = call("run", json!({"command": "git push origin HEAD"}));
    let third = call("run", json!({"command": "git push origin HEAD"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![push.clone()]),
        Reply::tool_calls(vec![again.clone()]),
        Reply::tool_calls(vec![third.clone()]),
        Reply::text("fine, I will not push"),
    ]);
    let mut acp = Raw::start(&repo, &server, &[]);
    acp.initialize();
    let sid = acp.new_session(&repo);
    let prompt = acp.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "push"}]}),
    );
    let asked = acp
        .until(|m| m["method"] == "session/request_permission")
        .pop()
        .unwrap();
    acp.send_line(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "cancelled"}}}).to_string());
    let answer = acp.answer(prompt).pop().unwrap();
    assert_eq!(
        stop_reason(&answer),
        "cancelled",
        "a cancelled question is a cancel, not a no: {answer}"
    );
    assert_eq!(server.requests().len(), 1);

    let prompt = acp.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "try again"}]}),
    );
    let asked = acp
        .until(|m| m["method"] == "session/request_permission")
        .pop()
        .unwrap();
    assert_eq!(asked["params"]["toolCall"]["toolCallId"], again.id.as_str());
    acp.send_line(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "selected", "optionId": "reject_always"}}}).to_string());
    let seen = acp.answer(prompt);
    assert!(
        !seen
            .iter()
            .any(|m| m["method"] == "session/request_permission"),
        "asked again after reject_always"
    );
    assert_eq!(stop_reason(seen.last().unwrap()), "end_turn");
    let requests = server.requests();
    assert!(requests[2].tool_result(&again.id).contains("declined"));
    assert!(requests[3].tool_result(&third.id).contains("declined"));
    acp.finish(&repo);
}

#[test]
fn raw_load_replays_before_answering_and_close_ends_the_session() {
    let repo = TestRepo::new();
    let plan = call(
        "plan_update",
        json!({"items": [{"step": "write the file", "status": "in_progress"}, {"step": "check it", "status": "pending"}]}),
    );
    let write = call("write_file", json!({"path": "a.txt", "content": "hello\n"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![plan.clone()]),
        Reply::text_and_tool_calls("Writing it.", vec![write.clone()]),
        Reply::tool_calls(vec![call(
            "plan_update",
            json!({"items": [{"step": "write the file", "status": "done"}, {"step": "check it", "status": "done"}]}),
        )]),
        Reply::text("All written."),
        Reply::text("Still here."),
    ]);
    let mut acp = Raw::start(&repo, &server, &[]);
    acp.initialize();
    let sid = acp.new_session(&repo);
    let prompt = acp.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "write a.txt"}]}),
    );
    let seen = acp.answer(prompt);
    let plans: Vec<&Value> = seen
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "plan")
        .collect();
    assert_eq!(plans.len(), 2, "the plan after each update");
    assert_eq!(
        plans[0]["params"]["update"]["entries"],
        json!([
            {"content": "write the file", "priority": "medium", "status": "in_progress"},
            {"content": "check it", "priority": "medium", "status": "pending"}
        ])
    );
    assert!(seen
        .iter()
        .any(|m| m["params"]["update"]["sessionUpdate"] == "usage_update"));
    acp.finish(&repo);

    let mut acp = Raw::start(&repo, &server, &[]);
    acp.initialize();
    let load = acp.request(
        "session/load",
        json!({"sessionId": sid, "cwd": repo.path(), "mcpServers": []}),
    );
    let seen = acp.answer(load);
    let answer = seen.last().unwrap();
    assert_eq!(answer["result"], json!({}), "{answer}");
    let replayed: Vec<&Value> = seen[..seen.len() - 1]
        .iter()
        .map(|m| &m["params"]["update"])
        .collect();
    let kinds: Vec<&str> = replayed
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap())
        .collect();
    assert_eq!(kinds[0], "user_message_chunk", "{kinds:?}");
    assert_eq!(replayed[0]["content"]["text"], "write a.txt");
    for wanted in [
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
    ] {
        assert!(kinds.contains(&wanted), "no {wanted} replayed: {kinds:?}");
    }
    let write_final = replayed
        .iter()
        .rev()
        .find(|u| u["toolCallId"] == write.id.as_str())
        .unwrap();
    assert_eq!(write_final["status"], "completed");
    // After the answer: the commands, then the session takes prompts as before.
    let prompt = acp.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "more?"}]}),
    );
    assert_eq!(stop_reason(acp.answer(prompt).last().unwrap()), "end_turn");
    let texts = server.requests().last().unwrap().user_texts();
    assert_eq!(
        (
            texts.first().map(String::as_str),
            texts.last().map(String::as_str)
        ),
        (Some("write a.txt"), Some("more?"))
    );
    let closed = acp.call("session/close", json!({"sessionId": sid}));
    assert_eq!(closed["result"], json!({}), "{closed}");
    let after = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "hello?"}]}),
    );
    assert_eq!(after["error"]["code"], -32002, "{after}");
    let listed = acp.call("session/list", json!({"cwd": repo.path()}));
    assert_eq!(
        listed["result"]["sessions"][0]["sessionId"],
        sid.as_str(),
        "{listed}"
    );
    assert_eq!(listed["result"]["sessions"][0]["title"], "write a.txt");
    acp.finish(&repo);
    assert_eq!(common::agent_commits(&repo, &sid).len(), 1);
}

#[test]
fn raw_slash_commands_are_listed_and_do_what_they_say() {
    let repo = TestRepo::new();
    let write = call("write_file", json!({"path": "a.txt", "content": "hello\n"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![write]),
        Reply::text("wrote it"),
    ]);
    let mut acp = Raw::start(&repo, &server, &[]);
    acp.initialize();
    let new = acp.request("session/new", json!({"cwd": repo.path(), "mcpServers": []}));
    let sid = acp.answer(new).pop().unwrap()["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let listed =
        acp.until(|m| m["params"]["update"]["sessionUpdate"] == "available_commands_update");
    let commands = listed.last().unwrap()["params"]["update"]["availableCommands"].clone();
    let names: Vec<&str> = commands
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["diff", "undo", "accept", "compact", "context", "model", "plan", "sessions"]
    );
    let undo = commands
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "undo")
        .unwrap();
    assert_eq!(undo["input"]["hint"], "[N]");
    assert!(
        undo["description"].as_str().unwrap().contains("steps"),
        "{undo}"
    );

    let mut say = |text: &str| -> (String, Value) {
        let id = acp.request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
        );
        let seen = acp.answer(id);
        let said: String = seen
            .iter()
            .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
            .map(|m| {
                m["params"]["update"]["content"]["text"]
                    .as_str()
                    .unwrap_or_default()
            })
            .collect();
        (said, seen.last().unwrap().clone())
    };
    let (said, answer) = say("write a.txt");
    assert_eq!(stop_reason(&answer), "end_turn");
    assert_eq!(said, "wrote it");
    let (said, _) = say("/diff");
    assert!(
        said.starts_with("```diff\n") && said.contains("+hello"),
        "{said}"
    );
    let (said, _) = say("/undo");
    assert!(said.contains("undid 1 step, now at step 0"), "{said}");
    assert!(
        common::agent_commits(&repo, &sid).is_empty(),
        "/undo moved the branch back"
    );
    let (said, answer) = say("/exit");
    assert!(said.contains("not available here"), "{said}");
    assert_eq!(stop_reason(&answer), "end_turn");
    let (said, _) = say("/dif");
    assert!(
        said.contains("unknown command /dif") && said.contains("/diff"),
        "{said}"
    );
    let (said, _) = say("/context");
    assert!(said.contains("tokens"), "{said}");
    assert_eq!(
        server.requests().len(),
        2,
        "commands do not go to the model"
    );
    acp.finish(&repo);
}

#[test]
#[ignore = "needs the ACP partners: run by .ci/run"]
fn the_editors_mcp_servers_start_for_its_session() {
    let partners = partners();
    let everything = partners.path("npm/node_modules/.bin/mcp-server-everything");
    let repo = TestRepo::new();
    let echo = call(
        "mcp__everything__echo",
        json!({"message": "hello from the editor"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![echo.clone()]),
        Reply::text("it echoed"),
    ]);
    let mut acp = Raw::start(&repo, &server, &[]);
    // A client that shows notices hears about the entry that cannot be used.
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"session": {"notices": {}}}}),
    );
    let servers = json!([
        {"name": "everything", "command": everything, "args": ["stdio"], "env": [{"name": "LOG_LEVEL", "value": "info"}]},
        {"type": "sse", "name": "legacy", "url": "http://127.0.0.1:9/sse", "headers": []}
    ]);
    let new = acp.request(
        "session/new",
        json!({"cwd": repo.path(), "mcpServers": servers}),
    );
    let sid = acp.answer(new).pop().unwrap()["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let notice = acp
        .until(|m| m["params"]["update"]["sessionUpdate"] == "notice")
        .pop()
        .unwrap();
    let title = notice["params"]["update"]["title"].as_str().unwrap();
    assert!(
        title.contains("legacy") && title.contains("not supported"),
        "{notice}"
    );
    let prompt = acp.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "echo"}]}),
    );
    let seen = acp.answer(prompt);
    assert_eq!(stop_reason(seen.last().unwrap()), "end_turn");
    let finished = seen
        .iter()
        .rev()
        .find(|m| m["params"]["update"]["toolCallId"] == echo.id.as_str())
        .expect("the MCP call was shown");
    assert_eq!(
        finished["params"]["update"]["status"], "completed",
        "{finished}"
    );
    let told = server.requests()[1].tool_result(&echo.id);
    assert_eq!(
        told, "Echo: hello from the editor",
        "the server's real result"
    );
    acp.finish(&repo);
}

#[test]
fn raw_a_model_refusal_ends_the_turn_as_refusal() {
    use crate::common::server::{openai_chunk, openai_events};
    let repo = TestRepo::new();
    let refusal = Reply::sse_raw(openai_events(&[
        openai_chunk(
            json!({"role": "assistant", "content": "I can't help with that."}),
            None,
        ),
        openai_chunk(json!({}), Some("content_filter")),
    ]));
    let server = Server::start(vec![refusal]);
    let mut acp = Raw::start(&repo, &server, &[]);
    acp.initialize();
    let sid = acp.new_session(&repo);
    let prompt = acp.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "do something bad"}]}),
    );
    let answer = acp.answer(prompt).pop().unwrap();
    assert_eq!(stop_reason(&answer), "refusal", "{answer}");
    assert_eq!(server.requests().len(), 1);
    acp.finish(&repo);
}

#[test]
fn raw_budgets_end_a_turn_with_their_stop_reasons() {
    let repo = TestRepo::new();
    let look = || call("list_files", json!({"path": "."}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![look()]),
        Reply::tool_calls(vec![look()]),
    ]);
    for (flags, reason) in [
        (["--max-steps", "1"], "max_turn_requests"),
        (["--max-tokens", "1"], "max_tokens"),
    ] {
        let mut acp = Raw::start(&repo, &server, &flags);
        acp.initialize();
        let sid = acp.new_session(&repo);
        let prompt = acp.request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "look around"}]}),
        );
        let seen = acp.answer(prompt);
        let answer = seen.last().unwrap();
        assert_eq!(stop_reason(answer), reason, "{flags:?}: {answer}");
        // The stop report was never streamed by the model: it comes as a message.
        let said: String = seen
            .iter()
            .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
            .map(|m| {
                m["params"]["update"]["content"]["text"]
                    .as_str()
                    .unwrap_or_default()
            })
            .collect();
        assert!(said.contains("Stopped unfinished"), "{said}");
        acp.finish(&repo);
    }
    assert_eq!(server.requests().len(), 2, "one request each");
}

#[test]
fn raw_load_after_a_crash_closes_the_call_that_never_finished() {
    let repo = TestRepo::new();
    let slow = call("run", json!({"command": "sleep 30"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![slow.clone()]),
        Reply::text("back"),
    ]);
    let mut acp = Raw::start(&repo, &server, &[]);
    acp.initialize();
    let sid = acp.new_session(&repo);
    acp.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "wait"}]}),
    );
    acp.until(|m| {
        m["params"]["update"]["toolCallId"] == slow.id.as_str()
            && m["params"]["update"]["status"] == "in_progress"
    });
    acp.child.kill().expect("kill -9 the agent");
    let _ = acp.child.wait();

    let mut acp = Raw::start(&repo, &server, &[]);
    acp.initialize();
    let load = acp.request(
        "session/load",
        json!({"sessionId": sid, "cwd": repo.path(), "mcpServers": []}),
    );
    let seen = acp.answer(load);
    assert_eq!(seen.last().unwrap()["result"], json!({}));
    let last = seen
        .iter()
        .rev()
        .find(|m| m["params"]["update"]["toolCallId"] == slow.id.as_str())
        .expect("the call is replayed");
    assert_eq!(
        last["params"]["update"]["status"], "failed",
        "closed, not left pending: {last}"
    );
    let prompt = acp.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "again"}]}),
    );
    assert_eq!(stop_reason(acp.answer(prompt).last().unwrap()), "end_turn");
    acp.finish(&repo);
}

#[test]
fn raw_a_prompt_waiting_to_steer_a_cancelled_turn_is_cancelled_too() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::text("late").stalled_after(1, Duration::from_secs(40))
    ]);
    let mut acp = Raw::start(&repo, &server, &[]);
    acp.initialize();
    let sid = acp.new_session(&repo);
    let first = acp.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
    );
    let deadline = Instant::now() + WAIT;
    while server.requests().is_empty() {
        assert!(Instant::now() < deadline, "no model request");
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = acp.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "and this"}]}),
    );
    acp.notify("session/cancel", json!({"sessionId": sid}));
    let seen = acp.until(|m| m["id"] == second && m.get("method").is_none());
    let answers: Vec<&Value> = seen.iter().filter(|m| m.get("result").is_some()).collect();
    assert_eq!(answers.len(), 2, "{seen:#?}");
    assert_eq!(
        (answers[0]["id"].as_u64(), stop_reason(answers[0])),
        (Some(first), "cancelled")
    );
    assert_eq!(
        (answers[1]["id"].as_u64(), stop_reason(answers[1])),
        (Some(second), "cancelled")
    );
    assert_eq!(
        answers[1]["result"]["_meta"]["steered"], false,
        "it never joined"
    );
    assert_eq!(server.requests().len(), 1, "no turn ran for it");
    acp.finish(&repo);
}

/// Issue 23, finding 16: `session/load` takes exact ids only (an empty id or a prefix is refused with a
/// JSON-RPC error, never opens whichever session it matches), the full id of a session open in this process
/// reattaches it, and editor-supplied MCP server names reach stderr with their control characters made inert.
#[test]
fn raw_load_takes_exact_ids_and_reattaches_and_server_names_are_inert() {
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::text("hello")]);
    let log = repo.root().join("acp-stderr.log");
    let stderr = std::fs::File::create(&log).expect("create the stderr log");
    let mut acp = Raw::start_with_stderr(&repo, &server, &[], Stdio::from(stderr));
    acp.initialize();
    let evil = "evil\u{1b}]0;pwned\u{7}\u{1b}[2J\u{202e}name";
    let answer = acp.call(
        "session/new",
        json!({"cwd": repo.path(), "mcpServers": [
            {"name": evil, "command": "/nonexistent/mcp-server", "args": [], "env": []}
        ]}),
    );
    let sid = answer["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
        .to_string();
    let prompt = acp.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}),
    );
    acp.answer(prompt);
    let load = |acp: &mut Raw, id: &str| {
        acp.call(
            "session/load",
            json!({"sessionId": id, "cwd": repo.path(), "mcpServers": []}),
        )
    };
    let empty = load(&mut acp, "");
    assert_eq!(empty["error"]["code"], -32602, "{empty}");
    let prefix = load(&mut acp, &sid[..4]);
    assert_eq!(prefix["error"]["code"], -32002, "{prefix}");
    let message = prefix["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.contains("in use"), "{prefix}");
    let full = load(&mut acp, &sid);
    assert_eq!(
        full["result"],
        json!({}),
        "the open session is reattached: {full}"
    );
    acp.finish(&repo);
    let stderr = std::fs::read_to_string(&log).expect("read the stderr log");
    assert!(stderr.contains("pwned"), "the name is shown: {stderr}");
    for raw in ['\u{1b}', '\u{7}', '\u{202e}'] {
        assert!(!stderr.contains(raw), "{raw:?} reached stderr: {stderr:?}");
    }
}

/// Issue 23, finding 17: one ACP message over the limit is refused with a JSON-RPC error under its id, read
/// through without being held (a 50 MB line once peaked at 623 MB), and the connection goes on.
#[test]
fn raw_a_huge_message_is_refused_and_costs_no_memory() {
    let repo = TestRepo::new();
    let server = Server::start(vec![]);
    let mut acp = Raw::start(&repo, &server, &[]);
    acp.initialize();
    let filler = "x".repeat(50 * 1024 * 1024);
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"session/prompt","params":{{"sessionId":"s","prompt":[{{"type":"text","text":"{filler}"}}]}}}}"#
    );
    acp.send_line(&line);
    // The schema check reads the client's log: the same request, without its 50 MB.
    let placeholder = line.replace(&filler, "(50 MB of text)");
    if let Some(sent) = acp.sent.last_mut() {
        *sent = placeholder;
    }
    let refused = acp.answer(9).pop().expect("the answer");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("at most 8 MiB"), "{message}");
    let listed = acp.call("session/list", json!({"cwd": repo.path()}));
    assert_eq!(listed["result"]["sessions"], json!([]), "{listed}");
    let status = std::fs::read_to_string(format!("/proc/{}/status", acp.child.id()))
        .expect("read the agent's /proc status");
    let peak_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status");
    eprintln!("peak RSS after a 50 MB message: {peak_kb} kB");
    assert!(peak_kb < 80 * 1024, "peak RSS {peak_kb} kB");
    acp.finish(&repo);
}

#[test]
fn raw_a_command_from_a_file_is_listed_and_runs_as_a_prompt() {
    let repo = TestRepo::new();
    repo.write(".claude/commands/fix-issue.md", crate::subagents::FIX_ISSUE);
    repo.commit_all("a command");
    let server = Server::start(vec![Reply::text("fixing 7")]);
    let mut acp = Raw::start(&repo, &server, &[]);
    acp.initialize();
    let new = acp.request("session/new", json!({"cwd": repo.path(), "mcpServers": []}));
    let sid = acp.answer(new).pop().unwrap()["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let listed =
        acp.until(|m| m["params"]["update"]["sessionUpdate"] == "available_commands_update");
    let commands = listed.last().unwrap()["params"]["update"]["availableCommands"].clone();
    let fix = commands
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "fix-issue")
        .unwrap_or_else(|| panic!("{commands}"));
    assert_eq!(fix["description"], "Fix an issue by number");
    assert_eq!(fix["input"]["hint"], "<issue number>");

    let id = acp.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "/fix-issue 7"}]}),
    );
    let answer = acp.answer(id).pop().unwrap();
    assert_eq!(stop_reason(&answer), "end_turn");
    let texts = server.requests()[0].user_texts();
    assert!(
        texts
            .iter()
            .any(|t| t == "Fix issue #7 following our conventions (issue 7)."),
        "{texts:?}"
    );
    acp.finish(&repo);
}
