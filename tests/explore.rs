//! The explore subagent (issue 11): a read-only child loop with its own context and step budget, several at
//! once, their summaries back to the parent, their transcripts in the session log, their use charged to the
//! parent's budgets.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::server::PROMPT_TOKENS;
use crate::common::{agent_commits, call, run, session_id, Gate, Reply, Server, TestRepo};

fn explore(task: &str) -> crate::common::server::ToolCall {
    call("explore", json!({"task": task}))
}

/// The names of the tools a request offered.
fn offered(request: &crate::common::server::Request) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| {
                    t["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The requests of the conversation whose first user message contains `marker`.
fn conversation(server: &Server, marker: &str) -> Vec<crate::common::server::Request> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.user_texts().first().is_some_and(|t| t.contains(marker)))
        .collect()
}

#[test]
fn two_explore_calls_run_at_once_and_their_summaries_come_back() {
    let repo = TestRepo::new();
    repo.write("src/alpha.rs", "fn alpha() {}\n");
    repo.write("src/beta.rs", "// beta lives here\nfn beta() {}\n");
    repo.commit_all("code");
    let (a, b) = (
        explore("MARK-A: where is alpha defined?"),
        explore("MARK-B: where is beta defined?"),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![a.clone(), b.clone()]),
        Reply::text("both found"),
    ]);
    // Each child's first reply is held until both children's first requests have arrived: run one after the
    // other, the second would never start while the first waits.
    let gate = Gate::new();
    let read_a = call("read_file", json!({"path": "src/alpha.rs"}));
    let search_b = call("search", json!({"pattern": "fn beta"}));
    server.script_for(
        "MARK-A",
        vec![
            Reply::tool_calls(vec![read_a.clone()]).held(&gate),
            Reply::text("alpha is at src/alpha.rs:1"),
        ],
    );
    server.script_for(
        "MARK-B",
        vec![
            Reply::tool_calls(vec![search_b.clone()]).held(&gate),
            Reply::text("beta is at src/beta.rs:2"),
        ],
    );
    let child = repo
        .agent(&server, &["ask", "--json", "find alpha and beta"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let both = loop {
        let seen = (
            conversation(&server, "MARK-A").len(),
            conversation(&server, "MARK-B").len(),
        );
        if seen == (1, 1) || Instant::now() > deadline {
            break seen;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    gate.open();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(
        both,
        (1, 1),
        "both children were waiting at once\n{stdout}\n{stderr}"
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");

    // The children: their own context (a system prompt of their own, the task as the only user message at
    // first), only the read-only tools, and their tool results.
    let child_a = conversation(&server, "MARK-A");
    assert_eq!(child_a.len(), 2);
    assert!(
        child_a[0].system().starts_with("You are an explorer"),
        "{}",
        child_a[0].system()
    );
    assert!(
        !child_a[0].system().contains("find alpha and beta"),
        "the child sees nothing of the parent"
    );
    assert_eq!(offered(&child_a[0]), ["read_file", "list_files", "search"]);
    assert!(child_a[1].tool_result(&read_a.id).contains("fn alpha() {}"));
    let child_b = conversation(&server, "MARK-B");
    assert!(child_b[1]
        .tool_result(&search_b.id)
        .contains("src/beta.rs:2:fn beta() {}"));

    // The parent: both summaries as the explore calls' results.
    let parent = conversation(&server, "find alpha and beta");
    assert_eq!(parent.len(), 2);
    assert!(offered(&parent[0]).contains(&"explore".to_owned()));
    assert!(parent[1]
        .tool_result(&a.id)
        .starts_with("alpha is at src/alpha.rs:1"));
    assert!(parent[1]
        .tool_result(&b.id)
        .starts_with("beta is at src/beta.rs:2"));
    assert!(parent[1]
        .tool_result(&b.id)
        .contains("[explorer: 2 requests, 1 tool call]"));

    // --json marks the children's events with the parent call's id.
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let nested: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_call" && e.get("parent").is_some())
        .collect();
    assert_eq!(nested.len(), 2, "{stdout}");
    let read = nested.iter().find(|e| e["name"] == "read_file").unwrap();
    assert_eq!(read["parent"], json!(a.id));
    assert!(events
        .iter()
        .any(|e| e["type"] == "tool_result" && e["id"] == json!(b.id) && e["ok"] == true));
    // The session's usage counts the children's requests: 2 of the parent, 2 of each child.
    let usage = events
        .iter()
        .find(|e| e["type"] == "usage" && e["scope"] == "session")
        .unwrap();
    assert_eq!(
        usage["input_tokens"].as_u64(),
        Some(6 * PROMPT_TOKENS),
        "{usage}"
    );

    // The log keeps the children's transcripts, nested; `show` prints their calls as a live run does: one dim
    // line each under the call that started them.
    let id = session_id(&repo);
    let show = run(&mut repo.agent(&server, &["show", &id]));
    show.assert_code(0);
    assert!(
        show.stdout
            .contains("● explore \"MARK-A: where is alpha defined?\""),
        "{}",
        show.stdout
    );
    assert!(
        show.stdout.contains("  ┊ read src/alpha.rs\n"),
        "{}",
        show.stdout
    );
    assert_eq!(
        show.stdout.matches("\n  ┊ ").count(),
        2,
        "one line per child call: {}",
        show.stdout
    );
    // A resume rebuilds the parent's conversation only.
    let again = Server::start(vec![Reply::text("ok")]);
    run(&mut repo.agent(&again, &["ask", "--resume", &id, "thanks"])).assert_code(0);
    let resumed = &again.requests()[0];
    assert!(
        !resumed.user_texts().iter().any(|t| t.contains("MARK-A")),
        "child tasks are not parent messages"
    );
    assert_eq!(resumed.tool_results().len(), 2);
}

#[test]
fn a_child_that_tries_to_edit_or_run_is_refused() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::tool_calls(vec![explore("MARK-E: fix file.txt")]),
        Reply::text("done"),
    ]);
    let edit = call(
        "edit_file",
        json!({"path": "file.txt", "old_string": "two", "new_string": "2"}),
    );
    let runs = call("run", json!({"command": "touch pwned"}));
    server.script_for(
        "MARK-E",
        vec![
            Reply::tool_calls(vec![edit.clone(), runs.clone()]),
            Reply::text("I cannot edit; change two to 2 in file.txt:2"),
        ],
    );
    repo.run_agent(&server, &["ask", "explore it"])
        .assert_code(0);
    let child = conversation(&server, "MARK-E");
    for id in [&edit.id, &runs.id] {
        let result = child[1].tool_result(id);
        assert!(
            result.contains("is not available to the explorer")
                && result.contains("cannot edit files or run commands"),
            "{result}"
        );
    }
    let id = session_id(&repo);
    assert!(agent_commits(&repo, &id).is_empty(), "no step was made");
    let checkout = repo.path().join(".git/agent/worktrees").join(&id);
    assert!(!checkout.join("pwned").exists());
    assert_eq!(
        std::fs::read_to_string(checkout.join("file.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
}

#[test]
fn children_use_the_explore_model_and_their_own_budget_and_the_parents() {
    let repo = TestRepo::new();
    repo.write(
        ".git-agent.toml",
        "explore_model = \"openai/cheap-model\"\nexplore_max_steps = 2\n",
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![explore("MARK-S: look around")]),
        Reply::text("done"),
    ]);
    let list = call("list_files", json!({}));
    server.script_for(
        "MARK-S",
        vec![
            Reply::tool_calls(vec![list.clone()]),
            Reply::text("there is file.txt"),
        ],
    );
    repo.run_agent(&server, &["ask", "explore"]).assert_code(0);
    let child = conversation(&server, "MARK-S");
    assert_eq!(child.len(), 2);
    assert_eq!(child[0].body["model"], "cheap-model");
    assert_eq!(
        conversation(&server, "explore")[0].body["model"],
        "test-model"
    );
    // Its last request offers no tools and asks for the summary.
    assert!(!child[1].has_tools());
    assert!(child[1]
        .user_texts()
        .last()
        .unwrap()
        .contains("last request"));

    // The parent's --max-steps counts the child's requests: 1 of the parent and 2 of the child use 3.
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::tool_calls(vec![explore("MARK-T: look")]),
        Reply::text("never sent"),
    ]);
    server.script_for(
        "MARK-T",
        vec![
            Reply::tool_calls(vec![call("list_files", json!({}))]),
            Reply::text("found it"),
        ],
    );
    let out = repo.run_agent(&server, &["ask", "--max-steps", "3", "explore"]);
    out.assert_code(3);
    assert_eq!(server.requests().len(), 3, "{out}");
    assert!(
        out.stderr.contains("stopped after 3 model requests"),
        "{out}"
    );
    // A child that hits the parent's budget stops and says so.
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::tool_calls(vec![explore("MARK-U: look")]),
        Reply::text("done"),
    ]);
    server.script_for(
        "MARK-U",
        vec![
            Reply::tool_calls(vec![call("list_files", json!({}))]),
            Reply::text("found"),
        ],
    );
    let out = repo.run_agent(&server, &["ask", "--max-steps", "2", "explore"]);
    out.assert_code(3);
    let results = &conversation(&server, "MARK-U");
    assert_eq!(results.len(), 1, "the child got one request of the two");
}

#[test]
fn an_explore_model_that_cannot_be_reached_as_configured_is_an_error_before_anything_starts() {
    let repo = TestRepo::new();
    repo.write(".git-agent.toml", "explore_model = \"groq/llama\"\n");
    let server = Server::start(vec![Reply::text("never")]);
    let out = repo.run_agent(&server, &["ask", "x"]);
    out.assert_code(1);
    assert!(
        out.first_stderr_line().contains(
            "explore_model 'groq/llama': no API key for provider 'groq': set GROQ_API_KEY"
        ),
        "{out}"
    );
    assert!(crate::common::agent_branches(&repo).is_empty());
    assert!(server.requests().is_empty());
}

#[test]
fn the_parents_max_tokens_stops_a_child() {
    // Each scripted request costs PROMPT_TOKENS + COMPLETION_TOKENS: the parent's first request and the
    // child's first fit in 30 tokens, the child's second does not.
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::tool_calls(vec![explore("MARK-V: look")]),
        Reply::text("never sent"),
    ]);
    server.script_for(
        "MARK-V",
        vec![
            Reply::tool_calls(vec![call("list_files", json!({}))]),
            Reply::text("found"),
        ],
    );
    let out = repo.run_agent(&server, &["ask", "--max-tokens", "30", "explore"]);
    out.assert_code(3);
    assert_eq!(
        conversation(&server, "MARK-V").len(),
        1,
        "the child stopped at the parent's budget: {out}"
    );
    assert!(out.stderr.contains("--max-tokens 30"), "{out}");
}

/// Issue 23, finding 2: an explorer's tool results pass the same redactor, with the same known secrets (the
/// values of the repository's `.env`), as the parent's: the identical `search` comes back alike from both.
#[test]
fn an_explorers_results_are_redacted_like_the_parents() {
    let repo = TestRepo::new();
    repo.write(".env", "API_TOKEN=zq8Pv3-secret-value-77\n");
    repo.write("notes.txt", "the token is zq8Pv3-secret-value-77 here\n");
    repo.commit_all("config");
    let parent_search = call("search", json!({"pattern": "token is"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![
            parent_search.clone(),
            explore("MARK-R: find the token"),
        ]),
        Reply::text("done"),
    ]);
    let child_search = call("search", json!({"pattern": "token is"}));
    server.script_for(
        "MARK-R",
        vec![
            Reply::tool_calls(vec![child_search.clone()]),
            Reply::text("it is in notes.txt:1"),
        ],
    );
    let out = repo.run_agent(&server, &["ask", "--json", "PARENT-Q: where is it?"]);
    out.assert_code(0);
    let parent = conversation(&server, "PARENT-Q");
    let parents = parent.last().unwrap().tool_result(&parent_search.id);
    let child = conversation(&server, "MARK-R");
    let childs = child[1].tool_result(&child_search.id);
    assert!(parents.contains("notes.txt"), "{parents}");
    assert!(!parents.contains("zq8Pv3-secret-value-77"), "{parents}");
    assert!(!childs.contains("zq8Pv3-secret-value-77"), "{childs}");
    assert_eq!(
        childs, parents,
        "the child's result is redacted like the parent's"
    );
    assert!(!out.stdout.contains("zq8Pv3-secret-value-77"), "{out}");
}

/// Issue 23, finding 12: a child whose model calls tools on its last, tool-less request stops there:
/// `explore_max_steps` requests in all, those calls never run, and the parent's call gets a result.
#[test]
fn explore_max_steps_holds_when_the_model_calls_tools_on_the_last_request() {
    let repo = TestRepo::new();
    repo.write(".git-agent.toml", "explore_max_steps = 3\n");
    repo.commit_all("config");
    let parent_call = explore("MARK-M: look forever");
    let server = Server::start(vec![
        Reply::tool_calls(vec![parent_call.clone()]),
        Reply::text("done"),
    ]);
    let replies = (0..20)
        .map(|_| Reply::tool_calls(vec![call("list_files", json!({}))]))
        .collect();
    server.script_for("MARK-M", replies);
    let out = repo.run_agent(&server, &["ask", "explore"]);
    out.assert_code(0);
    let child = conversation(&server, "MARK-M");
    assert_eq!(child.len(), 3, "explore_max_steps requests and no more");
    assert!(!child[2].has_tools());
    let parent = conversation(&server, "explore");
    let result = parent.last().unwrap().tool_result(&parent_call.id);
    assert!(
        result.contains("stopped before it answered") && result.contains("explore_max_steps is 3"),
        "{result}"
    );
    assert_eq!(
        server.requests().len(),
        5,
        "1 + 3 child requests + 1: {out}"
    );
}
