//! Subagents and commands defined in files (issue 26): `.claude/agents/*.md` behind the `agent` tool, with
//! their tool lists and step commits naming them; `.claude/commands/*.md` as `/name args` in `ask`, piped
//! chat and (in `acp.rs`) ACP. Real binary, real repositories, the scripted model server.

use std::fs;

use serde_json::{json, Value};

use crate::common::{agent_commits, call, run, session_id, Reply, Server, TestRepo};

const REVIEWER: &str = "---\nname: reviewer\ndescription: Reviews a change and reports problems\ntools: Read, Grep\n---\nYou are a careful reviewer. Report problems with path:line.\n";
const WRITER: &str = "---\nname: writer\ndescription: Writes documentation\ntools:\n  - Read\n  - Write\n---\nYou write documentation.\n";
pub const FIX_ISSUE: &str = "---\ndescription: Fix an issue by number\nargument-hint: <issue number>\nallowed-tools: Read, Grep, Edit\n---\nFix issue #$ARGUMENTS following our conventions (issue $1).\n";

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
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

#[test]
fn a_reviewer_restricted_to_read_and_grep_answers_and_cannot_edit() {
    let repo = TestRepo::new();
    repo.write(".claude/agents/reviewer.md", REVIEWER);
    repo.commit_all("a reviewer");
    let delegate = call(
        "agent",
        json!({"name": "reviewer", "task": "review file.txt for typos"}),
    );
    let read = call("read_file", json!({"path": "file.txt"}));
    let edit = call(
        "edit_file",
        json!({"path": "file.txt", "old_string": "two", "new_string": "2"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![delegate.clone()]),
        Reply::text("the reviewer found nothing"),
    ]);
    server.script_for(
        "review file.txt for typos",
        vec![
            Reply::tool_calls(vec![read.clone(), edit.clone()]),
            Reply::text("file.txt:2 reads fine; no typos"),
        ],
    );

    let out = repo.run_agent(&server, &["ask", "--yes", "get a review"]);

    out.assert_code(0);
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "{out}");
    assert!(
        tool_names(&requests[0].body).contains(&"agent".to_owned()),
        "the parent is offered the agent tool"
    );
    let child = &requests[1];
    assert!(
        child.system().contains("You are a careful reviewer"),
        "{}",
        child.system()
    );
    let mut offered = tool_names(&child.body);
    offered.sort();
    assert_eq!(offered, ["read_file", "search"], "only Read and Grep");
    let refused = requests[2].tool_result(&edit.id);
    assert!(
        refused.contains("`edit_file` is not among the tools of the subagent reviewer"),
        "{refused}"
    );
    assert!(requests[2].tool_result(&read.id).contains("two"));
    let answer = requests[3].tool_result(&delegate.id);
    assert!(
        answer.contains("file.txt:2 reads fine; no typos"),
        "{answer}"
    );
    let id = session_id(&repo);
    assert!(agent_commits(&repo, &id).is_empty(), "nothing was edited");
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:file.txt")]),
        "one\ntwo\nthree\n"
    );
}

#[test]
fn an_editing_subagents_steps_are_commits_on_the_sessions_branch_naming_it() {
    let repo = TestRepo::new();
    repo.write(".claude/agents/writer.md", WRITER);
    repo.commit_all("a writer");
    let delegate = call(
        "agent",
        json!({"name": "writer", "task": "document the project in NOTES.md"}),
    );
    let write = call(
        "write_file",
        json!({"path": "NOTES.md", "content": "# Notes\n"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![delegate.clone()]),
        Reply::text("documented"),
    ]);
    server.script_for(
        "document the project in NOTES.md",
        vec![
            Reply::text_and_tool_calls("Writing the notes.", vec![write]),
            Reply::text("wrote NOTES.md"),
        ],
    );

    let out = repo.run_agent(&server, &["ask", "--yes", "document it"]);

    out.assert_code(0);
    let id = session_id(&repo);
    let commits = agent_commits(&repo, &id);
    assert_eq!(commits.len(), 1, "{out}");
    let subject = repo.git(&["log", "-1", "--format=%s", &commits[0]]);
    assert!(subject.contains("[subagent writer]"), "{subject}");
    let note = repo.git(&["notes", "--ref=agent", "show", &commits[0]]);
    assert!(
        note.contains("subagent writer: Writing the notes."),
        "{note}"
    );
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:NOTES.md")]),
        "# Notes\n"
    );
    assert!(server.requests()[3]
        .tool_result(&delegate.id)
        .contains("wrote NOTES.md"));
}

#[test]
fn git_agent_agents_lists_them_with_their_source() {
    let repo = TestRepo::new();
    repo.write(".claude/agents/reviewer.md", REVIEWER);
    repo.write(
        ".codex/agents/tester.toml",
        "name = \"tester\"\ndescription = \"Runs the tests\"\ntools = [\"Bash\"]\ninstructions = \"Run the tests.\"\n",
    );
    let server = Server::start(vec![]);
    let out = repo.run_agent(&server, &["agents"]);
    out.assert_code(0);
    assert!(
        out.stdout()
            .contains("reviewer  .claude/agents/reviewer.md"),
        "{out}"
    );
    assert!(out.stdout().contains("tools: Read, Grep"), "{out}");
    assert!(
        out.stdout().contains("tester  .codex/agents/tester.toml"),
        "{out}"
    );
}

#[test]
fn a_fix_issue_command_runs_in_ask_with_its_arguments_and_narrowed_tools() {
    let repo = TestRepo::new();
    repo.write(".claude/commands/fix-issue.md", FIX_ISSUE);
    repo.commit_all("a command");
    let run_call = call("run", json!({"command": "echo hi > new.txt"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![run_call.clone()]),
        Reply::text("fixed"),
    ]);

    let out = repo.run_agent(&server, &["ask", "--yes", "/fix-issue", "123"]);

    out.assert_code(0);
    let requests = server.requests();
    let texts = requests[0].user_texts();
    assert!(
        texts
            .iter()
            .any(|t| t == "Fix issue #123 following our conventions (issue 123)."),
        "{texts:?}"
    );
    let offered = tool_names(&requests[0].body);
    assert!(offered.contains(&"edit_file".to_owned()), "{offered:?}");
    assert!(!offered.contains(&"run".to_owned()), "{offered:?}");
    let refused = requests[1].tool_result(&run_call.id);
    assert!(
        refused.contains("/fix-issue allows only Read, Grep, Edit"),
        "{refused}"
    );
    let id = session_id(&repo);
    assert!(
        agent_commits(&repo, &id).is_empty(),
        "the command did not run"
    );
}

#[test]
fn a_fix_issue_command_in_piped_chat_is_listed_by_help_and_expanded() {
    let repo = TestRepo::new();
    repo.write(".claude/commands/fix-issue.md", FIX_ISSUE);
    repo.commit_all("a command");
    let server = Server::start(vec![Reply::text("on it")]);
    let input = repo.root().join("stdin.txt");
    fs::write(&input, "/help\n/fix-issue 42\n").unwrap();
    let mut cmd = repo.agent(&server, &["chat"]);
    cmd.stdin(fs::File::open(&input).unwrap());

    let out = run(&mut cmd);

    out.assert_code(0);
    assert!(
        out.stdout().contains("/fix-issue <issue number>")
            && out
                .stdout()
                .contains("Fix an issue by number (.claude/commands/fix-issue.md)"),
        "{out}"
    );
    let texts = server.requests()[0].user_texts();
    assert!(
        texts
            .iter()
            .any(|t| t == "Fix issue #42 following our conventions (issue 42)."),
        "{texts:?}"
    );
}
