//! What sessions cost: tokens times prices in `--json`, `log`, `show` and the session log; `--max-cost`;
//! `git agent stats` over sessions made here and pulled from another clone (issue 28).

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::common::server::{call, openai_chunk, openai_events, Reply, Server};
use crate::common::{fsck, run, session_id, Output, TestRepo};

/// USD per million tokens of `openai/test-model` in the tests' config.
const INPUT: f64 = 2.0;
const CACHED: f64 = 0.5;
const OUTPUT: f64 = 8.0;
/// Every scripted reply reports 11 prompt and 7 completion tokens.
const REQUEST_USD: f64 = (11.0 * INPUT + 7.0 * OUTPUT) / 1e6;

/// A user config file pricing the test model, as `GIT_AGENT_CONFIG` names it.
fn priced(repo: &TestRepo, input: f64, output: f64) -> String {
    let path = repo.root().join("prices.toml");
    let text = format!(
        "[prices.\"openai/test-model\"]\ninput = {input:?}\ncached_input = {CACHED:?}\noutput = {output:?}\n"
    );
    std::fs::write(&path, text).expect("write the config");
    path.display().to_string()
}

fn agent_with(repo: &TestRepo, server: &Server, config: &str, args: &[&str]) -> Output {
    run(repo.agent(server, args).env("GIT_AGENT_CONFIG", config))
}

fn events(out: &Output) -> Vec<Value> {
    out.stdout()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

fn meta(repo: &TestRepo, id: &str) -> Value {
    let text = repo.git(&["show", &format!("refs/agent/sessions/{id}:meta.json")]);
    serde_json::from_str(&text).expect("meta.json")
}

#[test]
fn a_sessions_cost_is_its_tokens_times_the_prices() {
    let repo = TestRepo::new();
    let config = priced(&repo, INPUT, OUTPUT);
    let read = Reply::tool_calls(vec![call("read_file", json!({"path": "README.md"}))]);
    // The last reply reports 1000 prompt tokens of which 400 came from the provider's cache.
    let cached = Reply::sse_raw(openai_events(&[
        openai_chunk(json!({"role": "assistant", "content": "read it"}), None),
        openai_chunk(json!({}), Some("stop")),
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
               "choices": [], "usage": {"prompt_tokens": 1000, "completion_tokens": 100,
               "prompt_tokens_details": {"cached_tokens": 400}}}),
    ]));
    let server = Server::start(vec![read, cached]);
    let out = agent_with(
        &repo,
        &server,
        &config,
        &["ask", "--json", "read the readme"],
    );
    out.assert_code(0);
    let usage: Vec<Value> = events(&out)
        .into_iter()
        .filter(|e| e["type"] == "usage")
        .collect();
    assert_eq!(usage.len(), 3, "{out}");
    let cached_usd = (600.0 * INPUT + 400.0 * CACHED + 100.0 * OUTPUT) / 1e6;
    let first = usage[0]["cost_usd"].as_f64().expect("a priced request");
    assert!(close(first, REQUEST_USD), "{first}");
    let second = usage[1]["cost_usd"].as_f64().expect("a priced request");
    assert!(close(second, cached_usd), "{second}");
    let running = usage[1]["session_cost_usd"]
        .as_f64()
        .expect("a running total");
    assert!(close(running, REQUEST_USD + cached_usd), "{running}");
    assert_eq!(usage[2]["scope"], "session");
    let total = usage[2]["cost_usd"].as_f64().expect("the session's cost");
    assert!(close(total, REQUEST_USD + cached_usd), "{total}");

    let id = session_id(&repo);
    let stored = meta(&repo, &id);
    assert!(
        close(stored["cost_usd"].as_f64().unwrap(), total),
        "{stored}"
    );
    assert_eq!(stored["cached_tokens"], 400, "{stored}");
    // 0.002278 USD, as people read it.
    let log = agent_with(&repo, &server, &config, &["log"]);
    assert!(log.stdout().contains("$0.0023"), "{log}");
    let show = agent_with(&repo, &server, &config, &["show", &id]);
    assert!(show.stdout().contains("cost $0.0023"), "{show}");
    fsck(&repo);
}

#[test]
fn a_model_without_a_price_costs_unknown_and_refuses_a_cost_budget() {
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::text("hi")]);
    let out = repo.run_agent(&server, &["ask", "--json", "say hi"]);
    out.assert_code(0);
    let usage: Vec<Value> = events(&out)
        .into_iter()
        .filter(|e| e["type"] == "usage")
        .collect();
    assert!(usage.iter().all(|e| e["cost_usd"].is_null()), "{out}");
    let log = repo.run_agent(&server, &["log"]);
    assert!(log.stdout().contains("unknown"), "{log}");
    assert!(!log.stdout().contains('$'), "{log}");

    let before = repo.git(&["for-each-ref"]);
    let refused = repo.run_agent(&server, &["ask", "--max-cost", "1", "say hi"]);
    refused.assert_code(2);
    assert_eq!(
        refused.first_stderr_line(),
        "error: --max-cost needs the price of openai/test-model, which is unknown",
        "{refused}"
    );
    assert!(refused.stderr().contains("[prices.\"openai/test-model\"]"));
    assert_eq!(
        repo.git(&["for-each-ref"]),
        before,
        "no session was started"
    );
}

#[test]
fn max_cost_stops_the_session_with_exit_3() {
    let repo = TestRepo::new();
    // 18 tokens at 10,000 USD per million: 0.18 USD a request.
    let config = priced(&repo, 10_000.0, 10_000.0);
    let read = || Reply::tool_calls(vec![call("read_file", json!({"path": "README.md"}))]);
    let server = Server::start(vec![read(), read(), read(), Reply::text("done")]);
    let out = agent_with(
        &repo,
        &server,
        &config,
        &["ask", "--json", "--max-cost", "0.30", "read a lot"],
    );
    out.assert_code(3);
    assert_eq!(server.requests().len(), 2, "{out}");
    let done = events(&out)
        .into_iter()
        .find(|e| e["type"] == "done")
        .expect("a done event");
    assert_eq!(done["status"], "max_cost", "{out}");
    let answer = done["answer"].as_str().unwrap_or_default();
    assert!(
        answer.contains("stopped after spending $0.3600 (--max-cost 0.3)"),
        "the reason names the budget: {out}"
    );
    assert_eq!(meta(&repo, &session_id(&repo))["status"], "max_cost");
}

/// `git agent` in `dir` (the repo or a clone), priced by `config` when given, as `author`.
fn agent_in(
    repo: &TestRepo,
    dir: &Path,
    server: &Server,
    config: Option<&str>,
    author: &str,
    args: &[&str],
) -> Output {
    let mut cmd: Command = repo.agent(server, args);
    cmd.current_dir(dir).env("GIT_AUTHOR_NAME", author);
    if let Some(config) = config {
        cmd.env("GIT_AGENT_CONFIG", config);
    }
    run(&mut cmd)
}

#[test]
fn stats_sums_the_sessions_made_here_and_pulled_from_another_clone() {
    let repo = TestRepo::new();
    let config = priced(&repo, INPUT, OUTPUT);
    let bare = repo.root().join("remote.git");
    repo.git(&["init", "-q", "--bare", bare.to_str().unwrap()]);
    repo.git(&["remote", "add", "origin", bare.to_str().unwrap()]);
    repo.git(&["push", "-q", "origin", "main"]);
    let clone = repo.root().join("clone");
    repo.git(&[
        "clone",
        "-q",
        bare.to_str().unwrap(),
        clone.to_str().unwrap(),
    ]);

    let here = repo.path().to_path_buf();
    let replies = |n: usize| Server::start((0..n).map(|_| Reply::text("ok")).collect());
    let server = replies(12);
    for n in 0..12 {
        let prompt = format!("task {n}");
        agent_in(
            &repo,
            &here,
            &server,
            Some(&config),
            "Ann",
            &["ask", &prompt],
        )
        .assert_code(0);
    }
    // In the other clone: 6 priced sessions and 2 with no price, pushed, then pulled here.
    let server = replies(8);
    for n in 0..8 {
        let prompt = format!("their task {n}");
        let priced = (n < 6).then_some(config.as_str());
        agent_in(&repo, &clone, &server, priced, "Bob", &["ask", &prompt]).assert_code(0);
    }
    let idle = Server::start(vec![]);
    agent_in(&repo, &clone, &idle, None, "Bob", &["push"]).assert_code(0);
    agent_in(&repo, &here, &idle, None, "Ann", &["pull"]).assert_code(0);

    let stats = agent_in(
        &repo,
        &here,
        &idle,
        None,
        "Ann",
        &["stats", "--by", "author"],
    );
    stats.assert_code(0);
    let lines: Vec<&str> = stats.stdout().lines().collect();
    assert_eq!(lines.len(), 3, "{stats}");
    // 18 priced sessions of one request each: 18 x 0.000078 USD.
    let total = format!("${:.4}", 18.0 * REQUEST_USD);
    assert!(
        lines[0].starts_with("total  20 sessions  0 steps  tokens 220 in, 140 out  cost ")
            && lines[0].contains(&format!("cost {total} + 2 sessions unknown  burn ")),
        "{stats}"
    );
    assert!(lines[1].starts_with("Ann  12 sessions"), "{stats}");
    assert!(
        lines[2].starts_with("Bob  8 sessions") && lines[2].contains("+ 2 sessions unknown"),
        "{stats}"
    );
    let by_model = agent_in(
        &repo,
        &here,
        &idle,
        None,
        "Ann",
        &["stats", "--by", "model", "--since", "1d"],
    );
    assert!(
        by_model.stdout().contains("openai/test-model  20 sessions"),
        "{by_model}"
    );
    let bad = agent_in(
        &repo,
        &here,
        &idle,
        None,
        "Ann",
        &["stats", "--since", "3y"],
    );
    bad.assert_code(2);
    fsck(&repo);
}
