//! Providers, configuration and network faults, end to end: the real binary against the scripted server
//! speaking OpenAI Chat Completions or Anthropic Messages over loopback.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::server::{anthropic, openai_chunk, openai_events};
use crate::common::{
    agent_commits, call, fsck, raw_call, run, session_id, user_state, Output, Reply, Server,
    TestRepo, API_KEY,
};

/// The wire formats a test runs against.
#[derive(Clone, Copy, Debug)]
enum Provider {
    OpenAi,
    Anthropic,
}

/// The agent pointed at `server` as `provider`, with a user config file holding `config` (retry delays
/// short enough for tests).
fn agent(
    repo: &TestRepo,
    server: &Server,
    provider: Provider,
    config: &str,
    args: &[&str],
) -> Command {
    let path = repo.root().join("config.toml");
    let retry = if config.contains("[retry]") {
        ""
    } else {
        "\n[retry]\nbase_delay = 0.01\n"
    };
    std::fs::write(&path, format!("{config}{retry}")).expect("write config");
    let mut cmd = repo.agent(server, args);
    cmd.env("GIT_AGENT_CONFIG", &path);
    if let Provider::Anthropic = provider {
        cmd.env("GIT_AGENT_MODEL", "anthropic/test-model")
            .env("ANTHROPIC_BASE_URL", server.root_url())
            .env("ANTHROPIC_API_KEY", API_KEY)
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL");
    }
    cmd
}

fn ask(repo: &TestRepo, server: &Server, provider: Provider, config: &str) -> Output {
    run(&mut agent(
        repo,
        server,
        provider,
        config,
        &["ask", "do the task"],
    ))
}

/// Stderr lines starting with `warning:`.
fn warnings(out: &Output) -> Vec<&str> {
    out.stderr()
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect()
}

fn tool_session(provider: Provider) {
    let repo = TestRepo::new();
    let before = user_state(&repo);
    let write = call(
        "write_file",
        json!({"path": "notes/日本.txt", "content": "emoji 🎉 and 漢字\n"}),
    );
    let read = call("read_file", json!({"path": "notes/日本.txt"}));
    let reread = call("read_file", json!({"path": "notes/日本.txt"}));
    let list = call("list_files", json!({"path": "notes"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![write.clone()]),
        Reply::tool_calls(vec![read.clone()]),
        Reply::tool_calls(vec![reread.clone()]),
        Reply::tool_calls(vec![list.clone()]),
        Reply::text("Wrote and checked the note."),
    ]);
    let out = ask(&repo, &server, provider, "");
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), "Wrote and checked the note.");
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    // The body is read to its end after the end-of-stream event, so one connection serves the session's
    // requests (no new TCP and TLS handshake per step). The context-window probe (two GETs, one after the
    // other) starts right after the first reply; on a loaded machine each of its GETs can win the race with
    // a reply's connection going back to the pool and open one more: 7 requests over at most 3 connections.
    assert!(
        server.connections() <= 3,
        "{} connections for 5 model requests and the probe's 2",
        server.connections()
    );
    let (path, key_header) = match provider {
        Provider::OpenAi => ("/v1/chat/completions", "authorization"),
        Provider::Anthropic => ("/v1/messages", "x-api-key"),
    };
    for request in &requests {
        assert_eq!(request.path, path);
        assert!(request
            .header(key_header)
            .is_some_and(|v| v.contains(API_KEY)));
    }
    if let Provider::Anthropic = provider {
        assert_eq!(requests[0].header("anthropic-version"), Some("2023-06-01"));
        assert!(requests[0].body["system"].is_array());
    }
    assert!(requests[1]
        .tool_result(&write.id)
        .contains("notes/日本.txt"));
    assert!(requests[2]
        .tool_result(&read.id)
        .contains("emoji 🎉 and 漢字"));
    assert!(requests[3]
        .tool_result(&reread.id)
        .contains("emoji 🎉 and 漢字"));
    assert!(requests[4].tool_result(&list.id).contains("日本.txt"));
    let id = session_id(&repo);
    assert_eq!(agent_commits(&repo, &id).len(), 1);
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:notes/日本.txt")]),
        "emoji 🎉 and 漢字\n"
    );
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

#[test]
fn the_same_tool_session_passes_with_openai() {
    tool_session(Provider::OpenAi);
}

#[test]
fn the_same_tool_session_passes_with_anthropic() {
    tool_session(Provider::Anthropic);
}

#[test]
fn a_connection_dropped_mid_stream_is_retried() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::text("this reply will be cut off").dropped_after(5),
        Reply::text("Second try worked."),
    ]);
    let out = ask(&repo, &server, Provider::OpenAi, "");
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), "Second try worked.");
    assert_eq!(server.requests().len(), 2);
    let warned = warnings(&out);
    assert_eq!(warned.len(), 1, "{out}");
    assert!(warned[0].contains("cut off"), "{out}");
}

#[test]
fn a_tool_call_cut_by_a_dropped_connection_is_never_run() {
    let repo = TestRepo::new();
    let write = call("write_file", json!({"path": "x.txt", "content": "x"}));
    let server = Server::start(vec![
        // Anthropic's stream carries explicit block ends: the call never completed.
        Reply::tool_calls(vec![write]).dropped_after(6),
        Reply::text("Nothing written."),
    ]);
    let out = ask(&repo, &server, Provider::Anthropic, "");
    out.assert_code(0);
    assert_eq!(server.requests().len(), 2);
    let id = session_id(&repo);
    assert!(agent_commits(&repo, &id).is_empty());
    assert!(server.requests()[1].tool_results().is_empty());
}

#[test]
fn a_stall_past_the_idle_timeout_is_retried() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::text("stalls here").stalled_after(3, Duration::from_secs(30)),
        Reply::text("After the stall."),
    ]);
    let out = ask(&repo, &server, Provider::OpenAi, "idle_timeout = 0.3\n");
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), "After the stall.");
    assert!(warnings(&out)[0].contains("idle timeout"), "{out}");
    // The stalled connection was closed by the client, not left to time out on the server.
    assert_eq!(server.wait_for_hangups(1), 1);
}

#[test]
fn the_idle_timeout_can_come_from_the_environment() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::text("stalls").stalled_after(2, Duration::from_secs(30)),
        Reply::text("ok"),
    ]);
    let out = run(agent(&repo, &server, Provider::OpenAi, "", &["ask", "go"])
        .env("GIT_AGENT_IDLE_TIMEOUT", "0.3"));
    out.assert_code(0);
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn rate_limit_429_waits_for_retry_after() {
    let repo = TestRepo::new();
    let body = json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}});
    let server = Server::start(vec![
        Reply::status_with(429, &[("Retry-After", "1")], &body.to_string()),
        Reply::text("Done after waiting."),
    ]);
    let out = ask(&repo, &server, Provider::OpenAi, "");
    out.assert_code(0);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    // The wait is the server's, not the 10 ms backoff of the test config.
    let waited = requests[1].at.duration_since(requests[0].at);
    assert!(waited >= Duration::from_millis(950), "waited {waited:?}");
    assert!(warnings(&out)[0].contains("retrying in 1.0 s"), "{out}");
}

#[test]
fn overloaded_529_then_success() {
    let repo = TestRepo::new();
    let body =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let server = Server::start(vec![
        Reply::status_with(529, &[], &body.to_string()),
        Reply::text("Made it."),
    ]);
    let out = ask(&repo, &server, Provider::Anthropic, "");
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), "Made it.");
    assert!(warnings(&out)[0].contains("HTTP 529"), "{out}");
}

#[test]
fn server_errors_give_up_after_the_bound_with_one_clear_line() {
    let repo = TestRepo::new();
    let server = Server::start((0..5).map(|_| Reply::status(500, "boom")).collect());
    let out = ask(&repo, &server, Provider::OpenAi, "");
    out.assert_code(1);
    // The default bound: four attempts in all.
    assert_eq!(server.requests().len(), 4);
    assert_eq!(warnings(&out).len(), 3, "{out}");
    let errors: Vec<&str> = out
        .stderr()
        .lines()
        .filter(|l| l.starts_with("error:"))
        .collect();
    assert_eq!(
        errors,
        ["error: model request failed (HTTP 500): boom"],
        "{out}"
    );
    assert!(agent_branches_left(&repo).is_empty());
}

/// A server that streams without end (here one `data:` line of 70 MB) is cut off at the reply limit, once,
/// with one line saying so, and leaves nothing of the user's changed.
#[test]
fn a_reply_without_end_is_cut_off_with_one_clear_line() {
    let repo = TestRepo::new();
    let before = user_state(&repo);
    let mut writes = vec!["data: ".to_string()];
    writes.extend((0..70).map(|_| "x".repeat(1 << 20)));
    let server = Server::start(vec![Reply::sse_raw(writes), Reply::text("never asked")]);
    let out = ask(&repo, &server, Provider::OpenAi, "");
    out.assert_code(1);
    assert_eq!(server.requests().len(), 1, "not retried: {out}");
    let last = out.stderr().lines().last().unwrap_or_default().to_string();
    assert!(
        last.starts_with("error: malformed reply from the model: the reply went on past 64 MB"),
        "{out}"
    );
    assert_eq!(user_state(&repo), before);
}

#[test]
fn retry_bound_comes_from_the_config() {
    let repo = TestRepo::new();
    let server = Server::start((0..5).map(|_| Reply::status(503, "busy")).collect());
    let out = ask(
        &repo,
        &server,
        Provider::OpenAi,
        "[retry]\nmax_attempts = 2\nbase_delay = 0.01\n",
    );
    out.assert_code(1);
    assert_eq!(server.requests().len(), 2);
}

fn agent_branches_left(repo: &TestRepo) -> Vec<String> {
    crate::common::agent_branches(repo)
}

#[test]
fn unauthorized_anthropic_names_the_variable_and_does_not_retry() {
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::status(401, "invalid x-api-key")]);
    let out = ask(&repo, &server, Provider::Anthropic, "");
    out.assert_code(1);
    assert_eq!(
        out.first_stderr_line(),
        "error: authentication failed (HTTP 401): invalid x-api-key"
    );
    assert!(
        out.stderr().contains("hint: check ANTHROPIC_API_KEY"),
        "{out}"
    );
    assert!(!out.stderr().contains(API_KEY) && !out.stdout().contains(API_KEY));
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn context_length_400_trims_old_tool_output_once_then_retries() {
    let repo = TestRepo::new();
    let first = call("read_file", json!({"path": "file.txt"}));
    let second = call("read_file", json!({"path": "README.md"}));
    let overflow = json!({"error": {"message": "This model's maximum context length is 8192 tokens.",
                                    "type": "invalid_request_error", "code": "context_length_exceeded"}});
    let server = Server::start(vec![
        Reply::tool_calls(vec![first.clone()]),
        Reply::tool_calls(vec![second.clone()]),
        Reply::status_with(400, &[], &overflow.to_string()),
        Reply::text("Fits now."),
    ]);
    let out = ask(&repo, &server, Provider::OpenAi, "");
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), "Fits now.");
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert!(requests[2].tool_result(&first.id).contains("two"));
    assert!(requests[3]
        .tool_result(&first.id)
        .contains("removed to fit"));
    assert!(requests[3].tool_result(&second.id).contains("# demo"));
}

#[test]
fn context_length_400_twice_stops_with_the_providers_message() {
    let repo = TestRepo::new();
    let overflow = json!({"error": {"message": "prompt is too long: 300000 tokens > 200000 maximum",
                                    "type": "invalid_request_error"}});
    let server = Server::start(vec![
        Reply::tool_calls(vec![call("read_file", json!({"path": "file.txt"}))]),
        Reply::tool_calls(vec![call("read_file", json!({"path": "README.md"}))]),
        Reply::status_with(400, &[], &overflow.to_string()),
        Reply::status_with(400, &[], &overflow.to_string()),
        Reply::text("never"),
    ]);
    let out = ask(&repo, &server, Provider::OpenAi, "");
    out.assert_code(1);
    assert_eq!(server.requests().len(), 4);
    let error = out
        .stderr()
        .lines()
        .find(|l| l.starts_with("error:"))
        .expect("error line");
    assert!(error.contains("prompt is too long"), "{out}");
}

#[test]
fn a_malformed_sse_line_is_a_clear_error_not_a_panic() {
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::sse_raw(vec![
        "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n".into(),
        "data: {\"choices\": [oops\n\n".into(),
    ])]);
    let out = ask(&repo, &server, Provider::OpenAi, "");
    out.assert_code(1);
    let error = out
        .stderr()
        .lines()
        .find(|l| l.starts_with("error:"))
        .expect("error line");
    assert!(
        error.starts_with("error: malformed reply from the model: a chunk is not valid JSON"),
        "{out}"
    );
    assert!(!out.stderr().contains("panicked"), "{out}");
    assert_eq!(
        server.requests().len(),
        1,
        "malformed replies are not retried"
    );
}

#[test]
fn crlf_line_endings_and_data_without_a_space() {
    let repo = TestRepo::new();
    let chunks = [
        openai_chunk(json!({"role": "assistant", "content": "Line "}), None),
        openai_chunk(json!({"content": "endings ✓"}), None),
        openai_chunk(json!({}), Some("stop")),
    ];
    let writes: Vec<String> = chunks
        .iter()
        .map(|c| format!("data:{c}\r\n\r\n"))
        .chain(["data:[DONE]\r\n\r\n".to_string()])
        .collect();
    // Every write split inside its CRLF, so `\r` and `\n` arrive in different reads.
    let writes = writes
        .iter()
        .flat_map(|w| {
            let cut = w.len() - 3;
            [w[..cut].to_string(), w[cut..].to_string()]
        })
        .collect();
    let server = Server::start(vec![Reply::sse_raw(writes)]);
    let out = ask(&repo, &server, Provider::OpenAi, "");
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), "Line endings ✓");
}

#[test]
fn unknown_event_types_and_comments_are_ignored() {
    let repo = TestRepo::new();
    let mut events = vec![anthropic::message_start()];
    events.push(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}));
    events.push(json!({"type": "future_event_type", "payload": {"x": 1}}));
    events.push(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Still fine."}}));
    events.push(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "future_delta", "x": 2}}));
    events.push(json!({"type": "content_block_stop", "index": 0}));
    events.extend(anthropic::end("end_turn"));
    let mut writes = vec![": a comment line\n\n".to_string()];
    writes.extend(anthropic::writes(&events));
    let server = Server::start(vec![Reply::sse_raw(writes)]);
    let out = ask(&repo, &server, Provider::Anthropic, "");
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), "Still fine.");
}

#[test]
fn a_tool_call_cut_by_finish_reason_length_is_not_run() {
    let repo = TestRepo::new();
    let chunks = [
        openai_chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_len", "type": "function",
                   "function": {"name": "write_file", "arguments": "{\"path\": \"big.txt\", \"content\": \"aaa"}}]}),
            None,
        ),
        openai_chunk(json!({}), Some("length")),
    ];
    let server = Server::start(vec![
        Reply::sse_raw(openai_events(&chunks)),
        Reply::text("I will write it in smaller pieces."),
    ]);
    let out = ask(&repo, &server, Provider::OpenAi, "");
    out.assert_code(0);
    let requests = server.requests();
    let result = requests[1].tool_result("call_len");
    assert!(
        result.contains("cut off by the output token limit"),
        "{result}"
    );
    // The cut-off arguments are not sent back as they were: llama.cpp's server rejects invalid JSON there.
    let assistant = requests[1]
        .messages()
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("assistant turn");
    assert_eq!(assistant["tool_calls"][0]["function"]["arguments"], "{}");
    let id = session_id(&repo);
    assert!(agent_commits(&repo, &id).is_empty());
    assert!(!repo.root().join("big.txt").exists());
}

#[test]
fn reasoning_is_shown_collapsed_and_kept_out_of_the_answer() {
    let repo = TestRepo::new();
    let chunks = [
        openai_chunk(
            json!({"reasoning_content": "Considering the request."}),
            None,
        ),
        openai_chunk(json!({"content": "<think>more private"}), None),
        openai_chunk(json!({"content": " thoughts</think>\n\nThe answer."}), None),
        openai_chunk(json!({}), Some("stop")),
    ];
    let server = Server::start(vec![Reply::sse_raw(openai_events(&chunks))]);
    let out = ask(&repo, &server, Provider::OpenAi, "");
    out.assert_code(0);
    assert_eq!(out.stdout(), "The answer.\n");
    assert!(!out.stderr().contains("private"), "{out}");
    assert!(out.stderr().contains("thinking… (45 chars)"), "{out}");
    // The reasoning never goes back to the model as the assistant's words either.
    let json_out = run(&mut agent(
        &repo,
        &server,
        Provider::OpenAi,
        "",
        &["ask", "--json", "x"],
    ));
    assert!(!json_out.stdout().contains("private"));
}

#[test]
fn usage_per_request_and_per_session() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::tool_calls(vec![call("read_file", json!({"path": "file.txt"}))]),
        Reply::text("done"),
    ]);
    let out = run(&mut agent(
        &repo,
        &server,
        Provider::Anthropic,
        "",
        &["ask", "--json", "go"],
    ));
    out.assert_code(0);
    let usage: Vec<Value> = out
        .stdout()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON line"))
        .filter(|e| e["type"] == "usage")
        .collect();
    assert_eq!(usage.len(), 3, "{out}");
    for (n, event) in usage[..2].iter().enumerate() {
        assert_eq!(event["scope"], "request");
        assert_eq!(event["request"], n as u64 + 1);
        assert_eq!(event["input_tokens"], 11);
        assert_eq!(event["output_tokens"], 7);
    }
    assert_eq!(usage[2]["scope"], "session");
    assert_eq!(usage[2]["input_tokens"], 22);
    assert_eq!(usage[2]["output_tokens"], 14);
    let human = ask(
        &repo,
        &Server::start(vec![Reply::text("hi")]),
        Provider::OpenAi,
        "",
    );
    assert!(
        human
            .stderr()
            .contains("tokens 11 in, 7 out over 1 request"),
        "{human}"
    );
}

#[test]
fn provider_tables_reach_the_wire() {
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::text("ok")]);
    let config = format!(
        r#"
model = "corp/some-model"
[providers.corp]
base_url = "{}"
api_key_command = "echo corp-secret-key"
headers = {{ "X-Team" = "core" }}
drop_params = ["stream_options"]
max_tokens = 321
max_tokens_param = "max_completion_tokens"
[providers.corp.extra_body]
top_k = 20
chat_template_kwargs = {{ enable_thinking = false }}
"#,
        server.base_url()
    );
    let out = run(
        agent(&repo, &server, Provider::OpenAi, &config, &["ask", "go"])
            .env_remove("GIT_AGENT_MODEL"),
    );
    out.assert_code(0);
    assert!(out.stderr().contains("(corp/some-model)"), "{out}");
    assert!(!out.stderr().contains("corp-secret-key"));
    let request = &server.requests()[0];
    assert_eq!(
        request.header("authorization"),
        Some("Bearer corp-secret-key")
    );
    assert_eq!(request.header("x-team"), Some("core"));
    assert_eq!(request.body["model"], "some-model");
    assert_eq!(request.body["max_completion_tokens"], 321);
    assert!(request.body.get("max_tokens").is_none());
    assert!(request.body.get("stream_options").is_none());
    assert_eq!(request.body["top_k"], 20);
    assert_eq!(
        request.body["chat_template_kwargs"]["enable_thinking"],
        false
    );
}

#[test]
fn a_bad_config_names_file_line_and_key() {
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::text("never")]);
    let out = ask(
        &repo,
        &server,
        Provider::OpenAi,
        "idle_timeout = 5\nidel_timeout = 5\n",
    );
    out.assert_code(1);
    let path = repo.root().join("config.toml");
    assert_eq!(
        out.first_stderr_line(),
        format!(
            "error: {}:2: idel_timeout: unknown key (known keys: model, connect_timeout, idle_timeout, context_window, compact_at, prune, compact, attribution, max_capture_size, max_image_size, worktree_pool, explore_model, explore_max_steps, check, check_timeout, mcp_startup_wait, [retry], [skills], [hooks], [memory], [event_hooks], [prices], [web_search], [providers.<name>], [mcp_servers.<name>], [lsp])",
            path.display()
        )
    );
    repo.write(
        ".git-agent.toml",
        "[providers.openai]\napi_key_command = \"cat ~/.key\"\n",
    );
    let out = ask(&repo, &server, Provider::OpenAi, "");
    out.assert_code(1);
    assert!(
        out.first_stderr_line().ends_with(
            ".git-agent.toml:2: providers.openai.api_key_command: not allowed in a repository's \
             .git-agent.toml (a cloned repository could send your key elsewhere); set it in your user \
             config (see: git agent config path)"
        ),
        "{out}"
    );
    assert_eq!(server.requests().len(), 0);
}

#[test]
fn repo_config_model_beats_user_config_and_env_beats_both() {
    let repo = TestRepo::new();
    repo.write(".git-agent.toml", "model = \"openai/from-repo\"\n");
    let server = Server::start(vec![Reply::text("a"), Reply::text("b")]);
    let out = run(agent(
        &repo,
        &server,
        Provider::OpenAi,
        "model = \"openai/from-user\"\n",
        &["ask", "go"],
    )
    .env_remove("GIT_AGENT_MODEL"));
    out.assert_code(0);
    assert_eq!(server.requests()[0].body["model"], "from-repo");
    let out = run(&mut agent(
        &repo,
        &server,
        Provider::OpenAi,
        "",
        &["ask", "go"],
    ));
    out.assert_code(0);
    assert_eq!(server.requests()[1].body["model"], "test-model");
}

#[test]
fn config_set_keeps_comments_and_validates() {
    let repo = TestRepo::new();
    let path = repo.root().join("config.toml");
    let original = "# my git-agent settings\n\
                    model = \"openai/gpt-4.1\"  # what I use at work\n\
                    \n\
                    # timeouts in seconds\n\
                    idle_timeout = 60\n";
    std::fs::write(&path, original).expect("write config");
    let server = Server::start(Vec::new());
    let config = |args: &[&str]| {
        let mut cmd = repo.agent(&server, &[]);
        cmd.arg("config").args(args).env("GIT_AGENT_CONFIG", &path);
        run(&mut cmd)
    };
    config(&["set", "model", "anthropic/claude-sonnet-4-5"]).assert_code(0);
    let text = std::fs::read_to_string(&path).expect("read config");
    assert_eq!(
        text,
        original.replace("openai/gpt-4.1", "anthropic/claude-sonnet-4-5")
    );
    let out = config(&["get", "model"]);
    out.assert_code(0);
    assert_eq!(out.stdout(), "anthropic/claude-sonnet-4-5\n");
    let out = config(&["set", "idle_timeout", "soon"]);
    out.assert_code(1);
    assert!(
        out.first_stderr_line()
            .contains("idle_timeout: expected a number of seconds"),
        "{out}"
    );
    let out = config(&["set", "providers.x.api_key", "sk-live-123"]);
    out.assert_code(1);
    assert!(!out.stderr().contains("sk-live-123"), "{out}");
    assert_eq!(
        std::fs::read_to_string(&path).expect("read"),
        text,
        "failed sets write nothing"
    );
    config(&["get", "connect_timeout"]).assert_code(1);
    let out = config(&["path"]);
    assert_eq!(out.stdout().trim(), path.display().to_string());
}

#[test]
fn config_edit_runs_the_editor_and_checks_the_result() {
    let repo = TestRepo::new();
    let path = repo.root().join("sub/config.toml");
    let server = Server::start(Vec::new());
    let out = run(repo
        .agent(&server, &["config", "edit"])
        .env("GIT_AGENT_CONFIG", &path)
        .env("EDITOR", "printf 'model = 3\\n' >"));
    out.assert_code(1);
    assert!(
        out.first_stderr_line()
            .ends_with("config.toml:1: model: expected a string"),
        "{out}"
    );
    assert!(
        out.stderr().contains("hint: the file was saved as is"),
        "{out}"
    );
}

#[test]
fn ctrl_c_closes_the_connection_at_once_and_keeps_the_partial_text() {
    let repo = TestRepo::new();
    let server =
        Server::start(vec![Reply::text("partial answer, and then the rest")
            .stalled_after(6, Duration::from_secs(50))]);
    let mut child = agent(&repo, &server, Provider::OpenAi, "", &["ask", "go"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the agent");
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut pipe = child.stderr.take().expect("piped");
    let reader = thread::spawn({
        let stderr = Arc::clone(&stderr);
        move || {
            let mut buf = [0; 256];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                stderr.lock().expect("lock").push_str(&text);
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while !stderr.lock().expect("lock").contains("partial answer") {
        assert!(
            Instant::now() < deadline,
            "no partial text: {}",
            stderr.lock().expect("lock")
        );
        thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("piped")
        .read_to_string(&mut stdout)
        .expect("read stdout");
    let status = child.wait().expect("wait");
    reader.join().expect("reader");
    assert_eq!(status.code(), Some(130), "{}", stderr.lock().expect("lock"));
    assert_eq!(stdout.trim(), "partial answer,");
    // The server saw the hang-up while it was still stalling: the provider stops generating.
    assert_eq!(server.wait_for_hangups(1), 1);
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn anthropic_thinking_blocks_are_sent_back_with_their_signature() {
    let repo = TestRepo::new();
    let read = raw_call("read_file", "{\"path\": \"file.txt\"}");
    let mut events = vec![anthropic::message_start()];
    events.push(json!({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "thinking", "thinking": "", "signature": ""}}));
    events.push(json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "thinking_delta", "thinking": "I should read it."}}));
    events.push(json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "signature_delta", "signature": "sig-123"}}));
    events.push(json!({"type": "content_block_stop", "index": 0}));
    events.push(json!({"type": "content_block_start", "index": 1,
                       "content_block": {"type": "tool_use", "id": read.id, "name": "read_file", "input": {}}}));
    events.push(json!({"type": "content_block_delta", "index": 1,
                       "delta": {"type": "input_json_delta", "partial_json": read.arguments}}));
    events.push(json!({"type": "content_block_stop", "index": 1}));
    events.extend(anthropic::end("tool_use"));
    let server = Server::start(vec![
        Reply::sse_raw(anthropic::writes(&events)),
        Reply::text("Read it."),
    ]);
    let out = ask(&repo, &server, Provider::Anthropic, "");
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), "Read it.");
    let follow_up = &server.requests()[1];
    let assistant = follow_up
        .messages()
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("assistant turn");
    assert_eq!(
        assistant["content"][0],
        json!({"type": "thinking", "thinking": "I should read it.", "signature": "sig-123"})
    );
    assert!(follow_up.tool_result(&read.id).contains("two"));
}

#[test]
fn a_cut_off_call_of_an_own_tool_is_shown_before_its_result() {
    let repo = TestRepo::new();
    let chunks = [
        openai_chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_plan", "type": "function",
                   "function": {"name": "plan_update", "arguments": "{\"items\": [{\"text\": \"rea"}}]}),
            None,
        ),
        openai_chunk(json!({}), Some("length")),
    ];
    let server = Server::start(vec![
        Reply::sse_raw(openai_events(&chunks)),
        Reply::text("Planned in shorter words."),
    ]);
    let out = repo.run_agent(&server, &["ask", "--json", "plan it"]);
    out.assert_code(0);
    let events: Vec<Value> = out
        .stdout()
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON event per line"))
        .collect();
    let at = |kind: &str| {
        events
            .iter()
            .position(|e| e["type"] == kind && e["id"] == "call_plan")
            .unwrap_or_else(|| panic!("no {kind} for call_plan\n{out}"))
    };
    // A front-end (ACP, --json) never gets a result for a call it did not see.
    assert!(at("tool_call") < at("tool_result"), "{out}");
    let call = &events[at("tool_call")];
    assert_eq!(call["name"], "plan_update", "{out}");
}
