//! Phase timings (issue 29): `GIT_AGENT_TIMINGS=<file>` appends one JSON line per phase of a session to the
//! file, `GIT_AGENT_TIMINGS=1` writes them to stderr, and without the variable nothing of them appears. The
//! figures themselves are not asserted (they depend on the machine); which phases are named is.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::common::{call, Reply, Server, TestRepo};

/// A 3-step task over a repository with work in progress (a modified file and an untracked one, so step 0
/// captures them): read, edit, run, then the answer.
fn task() -> (TestRepo, Server) {
    let repo = TestRepo::new();
    repo.write("file.txt", "one\ntwo\nthree\nfour\n");
    repo.write("notes.txt", "untracked\n");
    let server = Server::start(vec![
        Reply::tool_calls(vec![call("read_file", json!({"path": "file.txt"}))]),
        Reply::tool_calls(vec![call(
            "edit_file",
            json!({"path": "file.txt", "old_string": "two", "new_string": "2"}),
        )]),
        Reply::tool_calls(vec![call("run", json!({"command": "cat file.txt"}))]),
        Reply::text("done"),
    ]);
    (repo, server)
}

/// The timing lines of `text`: every line that parses as a JSON object with a `phase`.
fn timing_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|value| value.get("phase").is_some())
        .collect()
}

/// The task run with `GIT_AGENT_TIMINGS` set to a file in the repository: the repository, its server, the
/// file and the run.
fn timed_task() -> (TestRepo, Server, std::path::PathBuf, crate::common::Output) {
    let (repo, server) = task();
    let file = repo.root().join("timings.jsonl");
    let out = crate::common::run(
        repo.agent(&server, &["ask", "edit the file"])
            .env("GIT_AGENT_TIMINGS", &file),
    );
    out.assert_code(0);
    (repo, server, file, out)
}

#[test]
fn every_phase_of_a_session_is_one_json_line_in_the_file() {
    let (_repo, server, file, out) = timed_task();
    assert!(
        !out.stderr().contains("\"phase\""),
        "with a file, stderr stays free of timings: {}",
        out.stderr()
    );
    let text = std::fs::read_to_string(&file).expect("the timings file was written");
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect();
    for line in &lines {
        assert!(line["ms"].as_f64().is_some(), "no ms in {line}");
        assert!(line["pid"].as_u64().is_some(), "no pid in {line}");
    }
    let phases: BTreeSet<&str> = lines.iter().filter_map(|l| l["phase"].as_str()).collect();
    for phase in [
        "start",
        "config",
        "runtime",
        "store open",
        "step 0",
        "checkout",
        "isolation",
        "request",
        "reply",
        "tool",
        "step commit",
        "fold",
        "exit",
    ] {
        assert!(phases.contains(phase), "no {phase:?} line in:\n{text}");
    }
    assert_eq!(lines.first().map(|l| &l["phase"]), Some(&json!("start")));
    assert_eq!(lines.last().map(|l| &l["phase"]), Some(&json!("exit")));
    let step0 = lines.iter().find(|l| l["phase"] == "step 0").unwrap();
    assert_eq!(step0["captured"], true, "the work in progress is step 0");
    let requests: Vec<&Value> = lines.iter().filter(|l| l["phase"] == "request").collect();
    assert_eq!(
        requests.len(),
        server.requests().len(),
        "one line a request"
    );
    assert!(requests.iter().all(|r| r["bytes"].as_u64() > Some(0)));
    let tools: Vec<&str> = lines
        .iter()
        .filter(|l| l["phase"] == "tool")
        .filter_map(|l| l["name"].as_str())
        .collect();
    assert_eq!(tools, ["read_file", "edit_file", "run"]);
    let step = lines.iter().find(|l| l["phase"] == "step commit").unwrap();
    assert!(step["took_ms"].as_f64().is_some());
    assert_eq!(step["step"], 1);
}

#[test]
fn timings_go_to_stderr_with_1_and_nowhere_without_the_switch() {
    let (repo, server) = task();
    let out = crate::common::run(
        repo.agent(&server, &["ask", "edit the file"])
            .env("GIT_AGENT_TIMINGS", "1"),
    );
    out.assert_code(0);
    let phases: BTreeSet<String> = timing_lines(out.stderr())
        .iter()
        .filter_map(|l| l["phase"].as_str().map(str::to_owned))
        .collect();
    assert!(
        phases.contains("start") && phases.contains("tool") && phases.contains("exit"),
        "timings on stderr: {}",
        out.stderr()
    );
    assert_eq!(
        out.stdout().trim(),
        "done",
        "stdout carries only the answer"
    );

    let (repo, server) = task();
    let out = repo.run_agent(&server, &["ask", "edit the file"]);
    out.assert_code(0);
    assert!(
        timing_lines(out.stderr()).is_empty() && !out.stderr().contains("\"phase\""),
        "no timings without the switch: {}",
        out.stderr()
    );
}

/// Issue 29: the first model request does not wait for the isolation probe (a fork of the agent into new
/// namespaces, which only commands need): the probe begins once the request is out, and the first command
/// still runs isolated as the probe found.
#[test]
fn the_isolation_probe_begins_after_the_first_request_left() {
    let (_repo, _server, file, _out) = timed_task();
    let text = std::fs::read_to_string(&file).expect("the timings file was written");
    let lines = timing_lines(&text);
    let at = |phase: &str| {
        lines
            .iter()
            .find(|l| l["phase"] == phase)
            .unwrap_or_else(|| panic!("no {phase:?} line in:\n{text}"))
    };
    let request = at("request")["ms"].as_f64().unwrap();
    let probe = at("isolation");
    let began = probe["ms"].as_f64().unwrap() - probe["took_ms"].as_f64().unwrap();
    // Both figures are rounded to the microsecond.
    assert!(
        began + 0.002 >= request,
        "the probe began at {began} ms, before the first request left at {request} ms:\n{text}"
    );
    let tool = at("tool")["ms"].as_f64().unwrap();
    assert!(probe["ms"].as_f64().unwrap() <= tool, "{text}");
}

/// With an MCP server configured (the small stdio server of `mcp_hostile`, here slow to start), the first
/// request's wait for it is the phase `mcp wait`, once, and its stop at the end is `mcp shutdown`; a session
/// without servers has neither.
#[test]
fn the_wait_for_mcp_servers_and_their_shutdown_are_phases() {
    let (repo, server) = task();
    let config = crate::mcp_hostile::entry(&repo, "slow", &json!({"delay": 0.3}), "");
    let config_path = repo.root().join("config.toml");
    std::fs::write(&config_path, config).unwrap();
    let file = repo.root().join("timings.jsonl");
    let out = crate::common::run(
        repo.agent(&server, &["ask", "edit the file"])
            .env("GIT_AGENT_CONFIG", &config_path)
            .env("GIT_AGENT_TIMINGS", &file),
    );
    out.assert_code(0);
    let text = std::fs::read_to_string(&file).expect("the timings file was written");
    let lines = timing_lines(&text);
    let of =
        |phase: &str| -> Vec<&Value> { lines.iter().filter(|l| l["phase"] == phase).collect() };
    let wait = of("mcp wait");
    assert_eq!(wait.len(), 1, "one wait, before the first request:\n{text}");
    assert_eq!(
        (wait[0]["servers"].as_u64(), wait[0]["connected"].as_u64()),
        (Some(1), Some(1)),
        "{text}"
    );
    let took = wait[0]["took_ms"].as_f64().expect("took_ms");
    assert!(took > 0.0, "{text}");
    let first_request = of("request")[0]["ms"].as_f64().unwrap();
    assert!(wait[0]["ms"].as_f64().unwrap() <= first_request, "{text}");
    let shutdown = of("mcp shutdown");
    assert_eq!(shutdown.len(), 1, "{text}");
    assert_eq!(shutdown[0]["servers"], 1, "{text}");
    assert!(shutdown[0]["took_ms"].as_f64().is_some(), "{text}");
    let exit = of("exit")[0]["ms"].as_f64().unwrap();
    assert!(shutdown[0]["ms"].as_f64().unwrap() <= exit, "{text}");

    let (_repo, _server, file, _out) = timed_task();
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        !text.contains("\"mcp "),
        "no MCP phases without servers:\n{text}"
    );
}
