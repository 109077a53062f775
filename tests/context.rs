//! Context engineering end to end (issue 7): project instructions, staying inside a small context window by
//! pruning and compaction, resume after compaction, loop guards, the plan and the finish tool.
//!
//! Every assertion is on what the scripted server received, or on what the user sees.

use serde_json::json;

use crate::common::long_session::{big_file, long_session, SUMMARY, WINDOW};
use crate::common::server::prompt_tokens;
use crate::common::{call, run, session_id, Output, Reply, Server, TestRepo};

/// How far over the threshold a request may be that the agent's estimate put under it. The agent decides
/// on its calibrated byte estimate of the next request, the server counts the body it received: they differ
/// by a few tokens, more or fewer with the length of the temp paths in the system prompt (a run of the whole
/// suite once saw 11,205 against a threshold of 11,200).
const ESTIMATE_SLACK: u64 = 50;

fn agent_with(repo: &TestRepo, server: &Server, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = repo.agent(server, args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run(&mut cmd)
}

#[test]
fn agents_md_at_root_in_the_system_prompt_and_subdirectory_after_first_read_once() {
    let repo = TestRepo::new();
    repo.write("AGENTS.md", "ROOT-RULES-7781: run make check\n");
    repo.write("sub/AGENTS.md", "SUB-RULES-4412: tabs, not spaces\n");
    repo.write("sub/code.txt", "alpha\nbeta\n");
    repo.write("other/x.txt", "x\n");
    repo.commit_all("instructions");
    let read_sub = call("read_file", json!({"path": "sub/code.txt"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![call("read_file", json!({"path": "other/x.txt"}))]),
        Reply::tool_calls(vec![read_sub.clone()]),
        Reply::tool_calls(vec![call("list_files", json!({"path": "sub"}))]),
        Reply::text("done"),
    ]);
    repo.run_agent(&server, &["ask", "read things"])
        .assert_code(0);
    let sent = server.requests();
    assert_eq!(sent.len(), 4);
    assert!(
        sent[0].system().contains("ROOT-RULES-7781"),
        "{}",
        sent[0].system()
    );
    let subs = |i: usize| sent[i].raw_body.matches("SUB-RULES-4412").count();
    assert_eq!((subs(0), subs(1)), (0, 0), "not before sub/ is touched");
    assert_eq!(subs(2), 1, "after the first read in sub/");
    assert_eq!(subs(3), 1, "once, not again on the next call there");
    // It comes right after the result of the call that touched the directory.
    let messages = sent[2].messages();
    let at = messages
        .iter()
        .position(|m| m["tool_call_id"] == read_sub.id.as_str())
        .expect("the read's result");
    assert!(messages[at + 1]["content"]
        .as_str()
        .is_some_and(|c| c.contains("SUB-RULES-4412") && c.contains("sub/AGENTS.md")));
    let show = repo.run_agent(&server, &["show"]);
    assert!(
        show.stdout().contains("-- instructions from sub/AGENTS.md"),
        "{show}"
    );
}

#[test]
fn long_session_stays_under_a_small_window_compacts_at_the_threshold_and_resumes_from_it() {
    let repo = TestRepo::new();
    let script = long_session(&repo);
    assert_eq!(script.len(), 60);
    let server = Server::start(script);
    server.count_prompt_tokens();
    server.answer_summaries(Reply::text(SUMMARY));
    let window = WINDOW.to_string();
    let out = agent_with(
        &repo,
        &server,
        &[("GIT_AGENT_CONTEXT_WINDOW", &window)],
        &["ask", "--max-steps", "100", "read every data file"],
    );
    out.assert_code(0);
    assert!(out.stdout().contains("Read all 57 files."), "{out}");
    let sent = server.requests();
    for (i, r) in sent.iter().enumerate() {
        assert!(
            prompt_tokens(r) <= WINDOW,
            "request {i} has {} tokens, over the window of {WINDOW}",
            prompt_tokens(r)
        );
    }
    let summaries: Vec<usize> = (0..sent.len()).filter(|&i| !sent[i].has_tools()).collect();
    let sizes: Vec<u64> = sent.iter().map(prompt_tokens).collect();
    assert!(
        !summaries.is_empty(),
        "a 60-step session of 6 KB reads must compact: {sizes:?}"
    );
    let at = summaries[0];
    // At the threshold: the request before the compaction was near 80% of the window (within one step's
    // growth of it), not far below.
    let threshold = WINDOW * 8 / 10;
    let before = prompt_tokens(&sent[at - 1]);
    assert!(
        before + 2_500 > threshold && before <= threshold + ESTIMATE_SLACK,
        "compaction came at {before} tokens, threshold {threshold}"
    );
    // The summarising request carries the older messages, not the tools.
    assert!(
        sent[at].raw_body.contains("FILE-00-LINE-000")
            || sent[at].raw_body.contains("data/f00.txt")
    );
    // The request after it: the summary and the plan, and the oldest reads are gone.
    let after = &sent[at + 1];
    let first_user = &after.user_texts()[0];
    assert!(first_user.contains("SUMMARY-MARK-5521"), "{first_user}");
    assert!(first_user.contains("PLAN-ITEM-READ-ALL"), "{first_user}");
    assert!(
        first_user.contains("read every data file"),
        "the goal, verbatim"
    );
    assert!(
        !after.raw_body.contains("data/f00.txt"),
        "old calls are replaced"
    );
    assert!(prompt_tokens(after) < before, "compaction made room");
    // Never compacted in a loop: compactions are far apart.
    for pair in summaries.windows(2) {
        assert!(pair[1] - pair[0] > 5, "compactions at {summaries:?}");
    }
    let show = repo.run_agent(&server, &["show"]);
    assert!(
        show.stdout().contains("older messages summarised"),
        "{show}"
    );
    assert!(show.stdout().contains("-- plan (2 of 2 done)"), "{show}");

    // Resume: the conversation continues from the compacted state, not from the full history.
    let id = session_id(&repo);
    let resumed = Server::start(vec![Reply::text("resumed")]);
    resumed.count_prompt_tokens();
    let out = agent_with(
        &repo,
        &resumed,
        &[("GIT_AGENT_CONTEXT_WINDOW", &window)],
        &["ask", "--resume", &id, "anything left?"],
    );
    out.assert_code(0);
    let first = &resumed.requests()[0];
    let last_summary = sent[*summaries.last().expect("one at least") + 1].user_texts()[0].clone();
    assert_eq!(
        first.user_texts()[0],
        last_summary,
        "starts from the summary"
    );
    assert!(!first.raw_body.contains("data/f00.txt"));
    assert!(
        first.raw_body.contains("PLAN-ITEM-REPORT"),
        "the plan comes back"
    );
    assert!(prompt_tokens(first) <= WINDOW);
}

/// Twelve 6 KB reads, then an answer, with pruning off so each step adds about 1,500 tokens: the largest
/// request is near 20,000 tokens, so a window under that must show as compaction at 80% of it.
fn twelve_reads(repo: &TestRepo) -> Server {
    for n in 0..12 {
        repo.write(&format!("data/f{n:02}.txt"), &big_file(n));
    }
    repo.commit_all("data");
    let mut script: Vec<Reply> = (0..12)
        .map(|n| {
            Reply::tool_calls(vec![call(
                "read_file",
                json!({"path": format!("data/f{n:02}.txt")}),
            )])
        })
        .collect();
    script.push(Reply::text("READ-ALL-DONE"));
    let server = Server::start(script);
    server.count_prompt_tokens();
    server.answer_summaries(Reply::text(SUMMARY));
    server
}

/// Runs the twelve reads against `server` with no window set anywhere (the test model is in no table);
/// returns the model requests.
fn run_twelve_reads(repo: &TestRepo, server: &Server) -> Vec<crate::common::server::Request> {
    run_twelve_reads_with(repo, server, &[])
}

fn run_twelve_reads_with(
    repo: &TestRepo,
    server: &Server,
    env: &[(&str, &str)],
) -> Vec<crate::common::server::Request> {
    let mut env = env.to_vec();
    env.push(("GIT_AGENT_PRUNE", "0"));
    run_twelve_reads_as_set(repo, server, &env)
}

/// The twelve reads with `env` alone: pruning as the settings say.
fn run_twelve_reads_as_set(
    repo: &TestRepo,
    server: &Server,
    env: &[(&str, &str)],
) -> Vec<crate::common::server::Request> {
    let out = agent_with(
        repo,
        server,
        env,
        &["ask", "--max-steps", "30", "read the data files"],
    );
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), "READ-ALL-DONE", "{out}");
    assert!(!out.stderr().contains("error"), "{out}");
    server.requests()
}

/// The window the server reported is the one the session kept to: every request fits in it, and the first
/// compaction came within one step below 80% of it (so neither the default nor a smaller window was used).
fn assert_kept_to(sent: &[crate::common::server::Request], window: u64) {
    assert_compacted_at(sent, window, 0.8);
}

/// Every request fits in `window`, and the first compaction came within one step below `share` of it.
fn assert_compacted_at(sent: &[crate::common::server::Request], window: u64, share: f64) {
    let sizes: Vec<u64> = sent.iter().map(prompt_tokens).collect();
    assert!(
        sizes.iter().all(|&size| size <= window),
        "every request under {window}: {sizes:?}"
    );
    let at = (0..sent.len())
        .find(|&i| !sent[i].has_tools())
        .unwrap_or_else(|| panic!("no compaction under a window of {window}: {sizes:?}"));
    let threshold = (window as f64 * share) as u64;
    let before = sizes[at - 1];
    assert!(
        before + 2_500 > threshold && before <= threshold + ESTIMATE_SLACK,
        "compaction came at {before} tokens, threshold {threshold}: {sizes:?}"
    );
}

fn probed_paths(server: &Server) -> Vec<String> {
    server
        .probes()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

#[test]
fn the_window_llama_cpp_reports_in_props_is_the_window_the_session_keeps_to() {
    let repo = TestRepo::new();
    let server = twelve_reads(&repo);
    server.props(12_000);
    // A list that would say otherwise is not asked once /props answered.
    server.models(vec![json!({"id": "test-model", "max_model_len": 100_000})]);
    let sent = run_twelve_reads(&repo, &server);
    assert_kept_to(&sent, 12_000);
    assert_eq!(probed_paths(&server), ["GET /props"], "asked once");
    let probe = &server.probes()[0];
    assert!(
        probe
            .header("authorization")
            .is_some_and(|v| v.contains(crate::common::API_KEY)),
        "the key goes along (servers started with --api-key want it)"
    );
}

/// Issue 16: the window an endpoint reported is asked once and remembered for the user (in their cache
/// directory), not asked again before the next session, which keeps to it all the same, nor in another
/// repository (issue 29: a server's window does not depend on the repository).
#[test]
fn a_reported_window_is_asked_once_and_remembered_for_the_next_session() {
    let repo = TestRepo::new();
    // The data files (its own server is not used).
    drop(twelve_reads(&repo));
    let reads = || {
        let mut script: Vec<Reply> = (0..12)
            .map(|n| {
                Reply::tool_calls(vec![call(
                    "read_file",
                    json!({"path": format!("data/f{n:02}.txt")}),
                )])
            })
            .collect();
        script.push(Reply::text("READ-ALL-DONE"));
        script
    };
    let mut script = reads();
    script.extend(reads());
    script.push(Reply::text("OTHER-REPOSITORY-DONE"));
    let server = Server::start(script);
    server.count_prompt_tokens();
    server.answer_summaries(Reply::text(SUMMARY));
    server.props(12_000);
    let first = run_twelve_reads(&repo, &server);
    assert_kept_to(&first, 12_000);
    assert_eq!(probed_paths(&server), ["GET /props"]);
    let all = run_twelve_reads(&repo, &server);
    assert_kept_to(&all[first.len()..], 12_000);
    assert_eq!(probed_paths(&server), ["GET /props"], "asked again");

    let other = repo.root().join("other");
    repo.git(&["clone", "-q", ".", other.to_str().unwrap()]);
    let mut cmd = repo.agent(&server, &["ask", "hello"]);
    cmd.current_dir(&other);
    let out = run(&mut cmd);
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), "OTHER-REPOSITORY-DONE", "{out}");
    assert_eq!(
        probed_paths(&server),
        ["GET /props"],
        "asked again in another repository"
    );
    assert!(repo
        .root()
        .join("home/.cache/git-agent/windows.json")
        .is_file());
    assert!(!repo.path().join(".git/agent/windows.json").exists());
}

#[test]
fn the_window_vllm_lists_as_max_model_len_is_the_window_the_session_keeps_to() {
    let repo = TestRepo::new();
    let server = twelve_reads(&repo);
    server.models(vec![
        json!({"id": "other-model", "object": "model", "max_model_len": 100_000}),
        json!({"id": "test-model", "object": "model", "owned_by": "vllm", "max_model_len": 10_000}),
    ]);
    let sent = run_twelve_reads(&repo, &server);
    assert_kept_to(&sent, 10_000);
    assert_eq!(
        probed_paths(&server),
        ["GET /props", "GET /v1/models"],
        "/props answered 404, so the model list was asked"
    );
}

#[test]
fn the_context_length_ollama_shows_is_the_window_the_session_keeps_to() {
    let repo = TestRepo::new();
    let server = twelve_reads(&repo);
    server.ollama_show(json!({
        "parameters": "temperature 0.6",
        "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 11_000},
    }));
    server.props(100_000);
    let base = server.base_url();
    let sent = run_twelve_reads_with(
        &repo,
        &server,
        &[
            ("GIT_AGENT_MODEL", "ollama/test-model"),
            ("OLLAMA_BASE_URL", &base),
        ],
    );
    assert_kept_to(&sent, 11_000);
    assert_eq!(probed_paths(&server), ["POST /api/show"]);
    assert_eq!(server.probes()[0].body, json!({"model": "test-model"}));
}

#[test]
fn a_server_answering_404_to_both_falls_back_to_the_default_window_without_error() {
    let repo = TestRepo::new();
    let server = twelve_reads(&repo);
    let sent = run_twelve_reads(&repo, &server);
    assert_eq!(probed_paths(&server), ["GET /props", "GET /v1/models"]);
    let sizes: Vec<u64> = sent.iter().map(prompt_tokens).collect();
    assert!(
        sent.iter().all(|r| r.has_tools()),
        "no compaction under the default window: {sizes:?}"
    );
    let largest = sizes.iter().copied().max().unwrap_or(0);
    assert!(
        largest > 12_000,
        "the session ran past the windows the other tests report: {sizes:?}"
    );
}

/// A user config file holding `text`, as `GIT_AGENT_CONFIG` names it.
fn user_config(repo: &TestRepo, text: &str) -> String {
    let path = repo.root().join("config.toml");
    std::fs::write(&path, text).expect("write the config");
    path.display().to_string()
}

#[test]
fn context_window_at_the_top_level_of_config_toml_is_the_window_the_session_keeps_to() {
    let repo = TestRepo::new();
    let server = twelve_reads(&repo);
    // The server would report another window; a configured one is not even asked for.
    server.props(100_000);
    let config = user_config(&repo, "context_window = 12000\n");
    let sent = run_twelve_reads_with(&repo, &server, &[("GIT_AGENT_CONFIG", &config)]);
    assert_kept_to(&sent, 12_000);
    assert!(
        probed_paths(&server).is_empty(),
        "{:?}",
        probed_paths(&server)
    );
}

#[test]
fn a_provider_table_overrides_the_top_level_and_the_environment_overrides_both() {
    let text = "context_window = 16000\ncompact_at = 0.9\n\
                [providers.openai]\ncontext_window = 12000\ncompact_at = 0.5\n";
    let repo = TestRepo::new();
    let server = twelve_reads(&repo);
    let config = user_config(&repo, text);
    let sent = run_twelve_reads_with(&repo, &server, &[("GIT_AGENT_CONFIG", &config)]);
    assert_compacted_at(&sent, 12_000, 0.5);

    let repo = TestRepo::new();
    let server = twelve_reads(&repo);
    let config = user_config(&repo, text);
    let sent = run_twelve_reads_with(
        &repo,
        &server,
        &[
            ("GIT_AGENT_CONFIG", &config),
            ("GIT_AGENT_CONTEXT_WINDOW", "11000"),
            ("GIT_AGENT_COMPACT_AT", "0.8"),
        ],
    );
    assert_kept_to(&sent, 11_000);
}

#[test]
fn prune_and_compact_at_the_top_level_turn_them_off_and_the_environment_turns_them_back_on() {
    let pruned = |sent: &[crate::common::server::Request]| {
        sent.iter().any(|r| {
            r.tool_results()
                .iter()
                .any(|(_, content)| content.starts_with("[output pruned"))
        })
    };
    // prune = false in the file does what GIT_AGENT_PRUNE=0 does for the other tests.
    let repo = TestRepo::new();
    let server = twelve_reads(&repo);
    let config = user_config(&repo, "context_window = 12000\nprune = false\n");
    let sent = run_twelve_reads_as_set(&repo, &server, &[("GIT_AGENT_CONFIG", &config)]);
    assert!(!pruned(&sent), "prune = false: nothing pruned");
    assert_kept_to(&sent, 12_000);

    let repo = TestRepo::new();
    let server = twelve_reads(&repo);
    let config = user_config(&repo, "context_window = 12000\nprune = false\n");
    let sent = run_twelve_reads_as_set(
        &repo,
        &server,
        &[("GIT_AGENT_CONFIG", &config), ("GIT_AGENT_PRUNE", "1")],
    );
    assert!(pruned(&sent), "GIT_AGENT_PRUNE=1 wins over prune = false");

    // compact = false: the session runs past 80% of the window without a summarising request.
    let repo = TestRepo::new();
    let server = twelve_reads(&repo);
    let config = user_config(&repo, "context_window = 12000\ncompact = false\n");
    let sent = run_twelve_reads_with(&repo, &server, &[("GIT_AGENT_CONFIG", &config)]);
    let sizes: Vec<u64> = sent.iter().map(prompt_tokens).collect();
    assert!(sent.iter().all(|r| r.has_tools()), "no summary: {sizes:?}");
    assert!(
        sizes.iter().any(|&s| s > 12_000 * 8 / 10),
        "it ran past the threshold: {sizes:?}"
    );
}

#[test]
fn bad_context_settings_name_file_line_and_key_and_config_set_checks_them() {
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::text("never")]);
    for (text, line) in [
        (
            "model = \"openai/m\"\ncompact_at = 2\n",
            ":2: compact_at: expected a share of the window",
        ),
        ("prune = \"no\"\n", ":1: prune: expected true or false"),
        (
            "[providers.openai]\n\ncontext_window = -5\n",
            ":3: providers.openai.context_window: expected a whole number of at least 1",
        ),
    ] {
        let config = user_config(&repo, text);
        let out = agent_with(
            &repo,
            &server,
            &[("GIT_AGENT_CONFIG", &config)],
            &["ask", "go"],
        );
        out.assert_code(1);
        assert!(
            out.first_stderr_line()
                .starts_with(&format!("error: {config}{line}")),
            "{out}"
        );
    }
    repo.write(".git-agent.toml", "compact = \"off\"\n");
    let config = user_config(&repo, "");
    let out = agent_with(
        &repo,
        &server,
        &[("GIT_AGENT_CONFIG", &config)],
        &["ask", "go"],
    );
    out.assert_code(1);
    assert!(
        out.first_stderr_line()
            .ends_with(".git-agent.toml:1: compact: expected true or false"),
        "{out}"
    );
    std::fs::remove_file(repo.path().join(".git-agent.toml")).expect("remove the repo file");
    assert!(server.requests().is_empty());

    let config_cmd = |args: &[&str]| {
        let mut cmd = repo.agent(&server, &["config"]);
        cmd.args(args).env("GIT_AGENT_CONFIG", &config);
        run(&mut cmd)
    };
    config_cmd(&["set", "context_window", "16000"]).assert_code(0);
    config_cmd(&["set", "compact_at", "0.7"]).assert_code(0);
    config_cmd(&["set", "prune", "false"]).assert_code(0);
    let out = config_cmd(&["get", "context_window"]);
    out.assert_code(0);
    assert_eq!(out.stdout(), "16000\n");
    let written = std::fs::read_to_string(&config).expect("read the config");
    assert_eq!(
        written,
        "context_window = 16000\ncompact_at = 0.7\nprune = false\n"
    );
    let out = config_cmd(&["set", "compact_at", "80"]);
    out.assert_code(1);
    assert!(
        out.first_stderr_line()
            .contains(":2: compact_at: expected a share"),
        "{out}"
    );
    let out = config_cmd(&["set", "compact", "off"]);
    out.assert_code(1);
    assert!(
        out.first_stderr_line()
            .contains("compact: expected true or false"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(&config).expect("read the config"),
        written,
        "a rejected value writes nothing"
    );
}

#[test]
fn the_same_call_repeated_is_reminded_then_stopped_with_exit_3() {
    let repo = TestRepo::new();
    let same = || Reply::tool_calls(vec![call("read_file", json!({"path": "file.txt"}))]);
    let server = Server::start(vec![same(), same(), same(), same(), same(), same()]);
    let out = repo.run_agent(&server, &["ask", "loop"]);
    out.assert_code(3);
    let sent = server.requests();
    assert_eq!(sent.len(), 4, "stopped at the fourth repeat");
    let reminded = |i: usize| {
        sent[i]
            .user_texts()
            .iter()
            .any(|t| t.contains("Loop guard"))
    };
    assert!(!reminded(2), "not before the third call");
    assert!(reminded(3), "after the third call");
    assert!(out.stderr().contains("repeated"), "{out}");
    assert!(
        out.stdout().contains("Stopped unfinished"),
        "a summary: {out}"
    );
    let show = repo.run_agent(&server, &["show"]);
    assert!(show.stdout().contains("-- loop"), "{show}");
}

#[test]
fn the_same_failing_check_after_edits_is_reminded_then_stopped() {
    let repo = TestRepo::new();
    repo.write(
        "check.sh",
        "echo 'assertion failed: SAME-FAILURE'; exit 1\n",
    );
    repo.commit_all("check");
    let check = || Reply::tool_calls(vec![call("run", json!({"command": "sh check.sh"}))]);
    let edit = |n: u32| {
        Reply::tool_calls(vec![call(
            "write_file",
            json!({"path": "fix.txt", "content": format!("attempt {n}\n")}),
        )])
    };
    let server = Server::start(vec![
        check(),
        edit(1),
        check(),
        edit(2),
        check(),
        edit(3),
        check(),
    ]);
    let out = repo.run_agent(&server, &["ask", "make the check pass"]);
    out.assert_code(3);
    let sent = server.requests();
    assert_eq!(sent.len(), 5, "stopped after the third identical failure");
    assert!(sent[3]
        .user_texts()
        .iter()
        .any(|t| t.contains("same output")));
    assert!(out.stderr().contains("same output"), "{out}");
}

#[test]
fn open_plan_items_get_a_reminder_before_the_session_may_finish() {
    let repo = TestRepo::new();
    let plan = call(
        "plan_update",
        json!({"items": [{"step": "OPEN-STEP-1", "status": "done"}, {"step": "OPEN-STEP-2", "status": "pending"}]}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![plan]),
        Reply::text("all done"),
        Reply::tool_calls(vec![call(
            "finish",
            json!({"status": "completed", "summary": "done for real"}),
        )]),
    ]);
    let out = repo.run_agent(&server, &["ask", "two steps"]);
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), "done for real");
    let sent = server.requests();
    assert_eq!(sent.len(), 3, "the plain answer did not end the session");
    let reminder = sent[2].user_texts().last().cloned().unwrap_or_default();
    assert!(
        reminder.contains("1 open item") && reminder.contains("[ ] OPEN-STEP-2"),
        "{reminder}"
    );
    let show = repo.run_agent(&server, &["show"]);
    assert!(show.stdout().contains("[x] OPEN-STEP-1"), "{show}");
}

#[test]
fn finish_blocked_exits_3_with_the_summary_as_the_answer() {
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::tool_calls(vec![call(
        "finish",
        json!({"status": "blocked", "summary": "BLOCKED: the API key for the staging server is missing"}),
    )])]);
    let out = repo.run_agent(&server, &["ask", "deploy"]);
    out.assert_code(3);
    assert_eq!(
        out.stdout().trim(),
        "BLOCKED: the API key for the staging server is missing"
    );
    let log = repo.run_agent(&server, &["log"]);
    assert!(log.stdout().contains("blocked"), "{log}");
}

#[test]
fn token_and_time_budgets_stop_with_exit_3() {
    let repo = TestRepo::new();
    let read = || Reply::tool_calls(vec![call("read_file", json!({"path": "README.md"}))]);
    let server = Server::start(vec![read(), read()]);
    server.count_prompt_tokens();
    let out = repo.run_agent(&server, &["ask", "--max-tokens", "100", "read"]);
    out.assert_code(3);
    assert!(out.stderr().contains("--max-tokens 100"), "{out}");
    assert_eq!(
        server.requests().len(),
        1,
        "the budget is checked before each request"
    );

    let sleep = Reply::tool_calls(vec![call("run", json!({"command": "sleep 2"}))]);
    let server = Server::start(vec![sleep, Reply::text("never sent")]);
    let out = repo.run_agent(&server, &["ask", "--max-time", "1s", "sleep"]);
    out.assert_code(3);
    assert!(out.stderr().contains("--max-time 1"), "{out}");
    assert_eq!(server.requests().len(), 1);
}

/// Issue 23, finding 11: `--max-time` cancels the request or stream in flight, an explorer's included, and
/// the session ends with exit 3 by about the budget, not when the model is done.
#[test]
fn max_time_cancels_a_running_request_a_stream_and_an_explorer() {
    use crate::common::{run_within, Gate};
    use std::time::{Duration, Instant};
    let explore = call("explore", json!({"task": "MARK-X: look slowly"}));
    let cases = [
        ("a 20 s request", "request"),
        ("a 25 s stream", "stream"),
        ("an explorer's request", "explore"),
    ];
    for (what, case) in cases {
        let repo = TestRepo::new();
        let gate = Gate::new();
        let server = match case {
            // The server holds the reply before its headers.
            "request" => Server::start(vec![Reply::text("late").held(&gate)]),
            // Two chunks of the answer, then 25 s of nothing.
            "stream" => Server::start(vec![Reply::text("a partial answer that goes on")
                .stalled_after(2, Duration::from_secs(25))]),
            _ => {
                let server = Server::start(vec![
                    Reply::tool_calls(vec![explore.clone()]),
                    Reply::text("never sent"),
                ]);
                server.script_for("MARK-X", vec![Reply::text("late").held(&gate)]);
                server
            }
        };
        let start = Instant::now();
        let out = run_within(
            &mut repo.agent(&server, &["ask", "--max-time", "5s", "take your time"]),
            Duration::from_secs(40),
        );
        let elapsed = start.elapsed();
        gate.open();
        assert_eq!(out.code(), 3, "{what}: {out}");
        assert!(out.stderr().contains("--max-time 5"), "{what}: {out}");
        assert!(
            elapsed < Duration::from_secs(12),
            "{what}: took {elapsed:?}\n{out}"
        );
        if case == "stream" {
            assert_eq!(server.wait_for_hangups(1), 1, "the stream was dropped");
        }
    }
}
