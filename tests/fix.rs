//! `git agent fix` end to end: the real binary, real checks (shell commands), the scripted model.
//!
//! Contract (issue 12): the check runs first on the tree being judged; a passing check exits 0 and creates
//! nothing; a failing one starts a session whose prompt holds the goal and the check's output, the check runs
//! again in the session's checkout after each attempt, exit 0 when it passes on agent/<id>, 3 when it does
//! not (branch kept), 1 on errors; every run is in the session log (`show`, `--json`).

use serde_json::{json, Value};

use crate::common::{
    agent_branches, call, fsck, run, session_id, user_state, Reply, Server, TestRepo,
};

/// The check of these tests: passes once `file.txt` holds the word `fixed`.
const CHECK: &str = "grep -q fixed file.txt || { echo \"FAIL: file.txt is not fixed\"; exit 1; }";

/// The model's fix: `file.txt` rewritten, then an answer.
fn fixing_model() -> Vec<Reply> {
    vec![
        Reply::tool_calls(vec![call(
            "write_file",
            json!({"path": "file.txt", "content": "fixed\n"}),
        )]),
        Reply::text("file.txt now says fixed."),
    ]
}

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

/// No branch, no session log, no checkout: nothing at all.
fn assert_nothing_created(repo: &TestRepo) {
    assert_eq!(agent_branches(repo), Vec::<String>::new());
    assert_eq!(repo.git(&["for-each-ref", "refs/agent/"]), "");
    assert!(
        !repo.path().join(".git/agent/worktrees").exists() || {
            let entries = std::fs::read_dir(repo.path().join(".git/agent/worktrees")).unwrap();
            entries.count() == 0
        }
    );
}

#[test]
fn a_passing_check_exits_0_and_creates_nothing() {
    let repo = TestRepo::new();
    let server = Server::start(vec![]);
    let before = user_state(&repo);
    let out = repo.run_agent(&server, &["fix", "--check", "grep -q one file.txt"]);
    out.assert_code(0);
    assert!(
        out.stderr()
            .contains("passes on the working tree: nothing to fix"),
        "{out}"
    );
    assert!(server.requests().is_empty(), "no model request");
    assert_nothing_created(&repo);
    assert_eq!(user_state(&repo), before);
    // The same with --json: one check event and done, nothing else.
    let out = repo.run_agent(&server, &["fix", "--json", "--check", "true"]);
    out.assert_code(0);
    let types: Vec<String> = json_lines(out.stdout())
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(types, ["check", "done"]);
    assert_nothing_created(&repo);
}

#[test]
fn a_failing_check_is_fixed_on_a_branch_and_every_run_is_recorded() {
    let repo = TestRepo::new();
    repo.write("notes.txt", "the user's own uncommitted note\n");
    let before = user_state(&repo);
    let server = Server::start(fixing_model());
    let out = repo.run_agent(&server, &["fix", "--check", CHECK]);
    out.assert_code(0);
    let id = session_id(&repo);
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:file.txt")]),
        "fixed\n"
    );
    // The first prompt holds the goal and the check's output.
    let first = server.requests()[0].user_texts().join("\n");
    assert!(first.contains(&format!("Make `{CHECK}` pass")), "{first}");
    assert!(first.contains("FAIL: file.txt is not fixed"), "{first}");
    assert!(first.contains("exit 1"), "{first}");
    assert!(
        first.contains("do not delete, skip or ignore tests"),
        "{first}"
    );
    let stderr = out.stderr();
    assert!(
        stderr.contains(&format!("fixed: `{CHECK}` passes on agent/{id}")),
        "{out}"
    );
    assert!(
        stderr.contains(&format!("take it:    git agent accept {id}")),
        "{out}"
    );
    assert!(stderr.contains("1 file changed"), "the diff stat: {out}");
    assert!(!stderr.contains("may weaken"), "an honest fix: {out}");
    // The user's tree, index and branches: as they were.
    assert_eq!(user_state(&repo), before);
    // The log has both runs: the failing one before the session and the passing one after the attempt.
    let show = run(&mut repo.agent(&server, &["show", &id]));
    show.assert_code(0);
    let transcript = show.stdout();
    assert!(
        transcript.contains(&format!("check `{CHECK}` on the working tree")),
        "{transcript}"
    );
    assert!(transcript.contains("failed: exit 1"), "{transcript}");
    assert!(
        transcript.contains(&format!("check `{CHECK}` on agent/{id} (after attempt 1)")),
        "{transcript}"
    );
    assert!(transcript.contains("passed ("), "{transcript}");
    let log = run(&mut repo.agent(&server, &["log"]));
    assert!(log.stdout().contains("done"), "{}", log.stdout());
    fsck(&repo);
}

#[test]
fn json_gives_check_fix_and_done_events() {
    let repo = TestRepo::new();
    let server = Server::start(fixing_model());
    let out = repo.run_agent(&server, &["fix", "--json", "--check", CHECK]);
    out.assert_code(0);
    let events = json_lines(out.stdout());
    let checks: Vec<&Value> = events.iter().filter(|e| e["type"] == "check").collect();
    assert_eq!(checks.len(), 2, "{events:?}");
    assert_eq!(checks[0]["passed"], false);
    assert_eq!(checks[0]["attempt"], 0);
    assert_eq!(checks[0]["exit_code"], 1);
    assert_eq!(checks[0]["tree"], "the working tree");
    assert!(checks[0]["output"]
        .as_str()
        .unwrap()
        .contains("FAIL: file.txt is not fixed"));
    assert_eq!(checks[1]["passed"], true);
    assert_eq!(checks[1]["attempt"], 1);
    let id = session_id(&repo);
    let fix = events
        .iter()
        .find(|e| e["type"] == "fix")
        .expect("a fix event");
    assert_eq!(fix["passed"], true);
    assert_eq!(fix["branch"], format!("agent/{id}"));
    assert_eq!(fix["attempts"], 1);
    let done: Vec<&Value> = events.iter().filter(|e| e["type"] == "done").collect();
    assert_eq!(done.len(), 1, "one done for the whole fix: {events:?}");
    assert_eq!(done[0]["exit_code"], 0);
    assert_eq!(events.last().unwrap()["type"], "done");
}

#[test]
fn a_fix_that_cannot_fix_exits_3_with_the_branch_kept() {
    let repo = TestRepo::new();
    let attempt = |n: u32| {
        vec![
            Reply::tool_calls(vec![call(
                "write_file",
                json!({"path": "file.txt", "content": format!("attempt {n}\n")}),
            )]),
            Reply::text("tried"),
        ]
    };
    let mut script = attempt(1);
    script.extend(attempt(2));
    let server = Server::start(script);
    let out = repo.run_agent(&server, &["fix", "--max-attempts", "2", "--check", CHECK]);
    out.assert_code(3);
    let id = session_id(&repo);
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:file.txt")]),
        "attempt 2\n",
        "the branch keeps the last attempt"
    );
    // The second attempt was told the check still fails, with its new output.
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let again = requests[2].user_texts().join("\n");
    assert!(again.contains("it still fails (exit 1"), "{again}");
    assert!(again.contains("attempt 2 of 2"), "{again}");
    assert!(
        out.stderr()
            .contains(&format!("not fixed: `{CHECK}` still fails on agent/{id}")),
        "{out}"
    );
    let log = run(&mut repo.agent(&server, &["log"]));
    assert!(log.stdout().contains("check_failed"), "{}", log.stdout());
    fsck(&repo);
}

#[test]
fn staged_judges_the_index_and_ignores_unstaged_changes() {
    let repo = TestRepo::new();
    let server = Server::start(vec![]);
    // Staged: fixed. Unstaged on top: broken again. The staged tree passes.
    repo.write("file.txt", "fixed\n");
    repo.git(&["add", "file.txt"]);
    repo.write("file.txt", "broken by an unstaged edit\n");
    let before = user_state(&repo);
    let out = repo.run_agent(&server, &["fix", "--staged", "--check", CHECK]);
    out.assert_code(0);
    assert!(out.stderr().contains("passes on the staged tree"), "{out}");
    assert_nothing_created(&repo);
    assert_eq!(user_state(&repo), before);
}

#[test]
fn staged_fixes_start_from_the_staged_tree() {
    let repo = TestRepo::new();
    // Staged: broken. Unstaged on top: a fix the check must not see, and an untracked file.
    repo.write("file.txt", "staged, still broken\n");
    repo.git(&["add", "file.txt"]);
    repo.write("file.txt", "fixed in the working tree only\n");
    repo.write("untracked.txt", "not staged\n");
    let before = user_state(&repo);
    let server = Server::start(fixing_model());
    let out = repo.run_agent(&server, &["fix", "--staged", "--check", CHECK]);
    out.assert_code(0);
    let id = session_id(&repo);
    let first = server.requests()[0].user_texts().join("\n");
    assert!(first.contains("on the staged tree"), "{first}");
    // Step 0 is the staged tree, not the working tree.
    let step0 = format!("agent/{id}~1");
    assert_eq!(
        repo.git(&["show", &format!("{step0}:file.txt")]),
        "staged, still broken\n"
    );
    assert!(repo
        .git(&["ls-tree", "--name-only", &step0])
        .lines()
        .all(|name| name != "untracked.txt"));
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:file.txt")]),
        "fixed\n"
    );
    assert!(
        out.stderr()
            .contains(&format!("take it:    git agent accept {id} --index")),
        "{out}"
    );
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

#[test]
fn commit_judges_a_commit_and_starts_the_fix_from_it() {
    let repo = TestRepo::new();
    repo.write("file.txt", "fixed\n");
    repo.commit_all("passing");
    repo.write("file.txt", "broken\n");
    repo.commit_all("failing");
    let server = Server::start(fixing_model());
    let out = repo.run_agent(&server, &["fix", "--commit", "HEAD~1", "--check", CHECK]);
    out.assert_code(0);
    assert!(out.stderr().contains("passes on commit"), "{out}");
    assert_nothing_created(&repo);
    let failing = repo.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let out = repo.run_agent(&server, &["fix", "--commit", &failing, "--check", CHECK]);
    out.assert_code(0);
    let id = session_id(&repo);
    assert_eq!(
        repo.git(&["rev-parse", &format!("agent/{id}~1")]).trim(),
        failing,
        "the fix starts from the commit judged"
    );
    let out = repo.run_agent(
        &server,
        &["fix", "--commit", "no-such-rev", "--check", CHECK],
    );
    out.assert_code(1);
    assert!(
        out.first_stderr_line()
            .contains("\"no-such-rev\" does not name a commit"),
        "{out}"
    );
}

#[test]
fn without_a_check_it_says_how_to_set_one_and_the_config_sets_it() {
    let repo = TestRepo::new();
    let server = Server::start(vec![]);
    let out = repo.run_agent(&server, &["fix"]);
    out.assert_code(1);
    assert_eq!(
        out.first_stderr_line(),
        "error: no check to run: name the command that tells whether the code is right"
    );
    assert!(
        out.stderr()
            .contains("hint: or set it for the repository: git agent config set --repo check"),
        "{out}"
    );
    let set = repo.run_agent(&server, &["config", "set", "--repo", "check", "true"]);
    set.assert_code(0);
    let out = repo.run_agent(&server, &["fix"]);
    out.assert_code(0);
    assert!(out.stderr().contains("`true` passes"), "{out}");
}

#[test]
fn a_fix_that_weakens_the_check_is_reported_as_such() {
    let repo = TestRepo::new();
    repo.write("tests/a.sh", "exit 0\n");
    repo.write("tests/b.sh", "echo b fails; exit 1\n");
    repo.commit_all("tests");
    let check = "for t in tests/*.sh; do sh \"$t\" || exit 1; done";
    let server = Server::start(vec![
        Reply::tool_calls(vec![call("run", json!({"command": "rm tests/b.sh"}))]),
        Reply::text("removed the failing test"),
    ]);
    let out = repo.run_agent(&server, &["fix", "--sandbox", "off", "--check", check]);
    out.assert_code(0);
    assert!(
        out.stderr()
            .contains("warning: the fix may weaken the check; look before you take it:"),
        "{out}"
    );
    assert!(
        out.stderr().contains("tests/b.sh: deletes a test file"),
        "{out}"
    );
}

#[test]
fn apply_brings_a_passing_fix_into_the_working_tree() {
    let repo = TestRepo::new();
    repo.write("notes.txt", "mine\n");
    let server = Server::start(fixing_model());
    let out = repo.run_agent(&server, &["fix", "--apply", "--check", CHECK]);
    out.assert_code(0);
    assert_eq!(
        std::fs::read_to_string(repo.path().join("file.txt")).unwrap(),
        "fixed\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.path().join("notes.txt")).unwrap(),
        "mine\n"
    );
    assert_eq!(
        repo.git(&["diff", "--cached", "--name-only"]),
        "",
        "the index is not touched without --staged"
    );
    assert!(out.stderr().contains("applied the fix of session"), "{out}");
}

/// A model that puts `fixed` on the first line of `file.txt` and keeps the rest.
fn first_line_model(rest: &str) -> Vec<Reply> {
    vec![
        Reply::tool_calls(vec![call(
            "write_file",
            json!({"path": "file.txt", "content": format!("fixed\n{rest}")}),
        )]),
        Reply::text("file.txt now says fixed."),
    ]
}

#[test]
fn apply_staged_stages_the_fix_and_leaves_unstaged_edits_of_that_file_unstaged() {
    let repo = TestRepo::new();
    let rest = "b\nc\nd\ne\n";
    repo.write("file.txt", &format!("a\n{rest}"));
    repo.git(&["add", "file.txt"]);
    repo.write("file.txt", &format!("a\n{rest}mine\n"));
    let server = Server::start(first_line_model(rest));
    let out = repo.run_agent(&server, &["fix", "--staged", "--apply", "--check", CHECK]);
    out.assert_code(0);
    assert!(
        out.stderr().contains("to your working tree and index"),
        "{out}"
    );
    assert_eq!(repo.git(&["show", ":file.txt"]), format!("fixed\n{rest}"));
    assert_eq!(
        std::fs::read_to_string(repo.path().join("file.txt")).unwrap(),
        format!("fixed\n{rest}mine\n")
    );
    fsck(&repo);
}

#[test]
fn accept_index_leaves_a_file_unstaged_when_what_was_staged_conflicts_with_the_fix() {
    let repo = TestRepo::new();
    let rest = "b\nc\nd\ne\n";
    repo.write("file.txt", &format!("a\n{rest}"));
    repo.git(&["add", "file.txt"]);
    let server = Server::start(first_line_model(rest));
    repo.run_agent(&server, &["fix", "--staged", "--check", CHECK])
        .assert_code(0);
    let id = session_id(&repo);
    // The user stages another first line, and has the judged one in the working tree.
    repo.write("file.txt", &format!("A\n{rest}"));
    repo.git(&["add", "file.txt"]);
    repo.write("file.txt", &format!("a\n{rest}"));
    let out = repo.run_agent(&server, &["accept", &id, "--index"]);
    out.assert_code(1);
    assert!(
        out.stderr().contains(
            "\nerror: 1 file of the change is in your working tree but not staged; the rest is staged\n"
        ),
        "{out}"
    );
    assert!(
        out.stderr()
            .contains("not staged  file.txt (what you staged conflicts with the change)"),
        "{out}"
    );
    assert_eq!(
        repo.git(&["show", ":file.txt"]),
        format!("A\n{rest}"),
        "the index is as it was"
    );
    assert_eq!(
        std::fs::read_to_string(repo.path().join("file.txt")).unwrap(),
        format!("fixed\n{rest}")
    );
}

/// Issue 12 (the hook's cost, and "creates nothing"): when the work tree holds exactly the index, `--staged`
/// runs the check in the work tree itself: ignored build state is there, and no scratch checkout is made
/// (`git worktree list` shows only the user's). With an untracked file beside it, the check runs in a scratch
/// checkout of the index, where the ignored state is not.
#[test]
fn staged_runs_in_place_when_the_work_tree_is_the_index() {
    let repo = TestRepo::new();
    repo.write(".gitignore", "build/\n");
    repo.commit_all("ignore build");
    repo.write("build/state", "built\n");
    repo.write("file.txt", "staged\n");
    repo.git(&["add", "file.txt"]);
    let server = Server::start(vec![]);
    let check = "test -f build/state || { echo 'FAIL: not built'; exit 1; }";
    let before = user_state(&repo);
    let out = repo.run_agent(&server, &["fix", "--staged", "--check", check]);
    out.assert_code(0);
    assert!(out.stderr().contains("passes on the staged tree"), "{out}");
    assert_eq!(
        repo.git(&["worktree", "list", "--porcelain"])
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1,
        "no checkout was made"
    );
    assert_nothing_created(&repo);
    assert_eq!(user_state(&repo), before);
    repo.write("notes.txt", "untracked\n");
    let server = Server::start(vec![Reply::text("cannot fix that")]);
    let out = repo.run_agent(
        &server,
        &["fix", "--staged", "--max-attempts", "1", "--check", check],
    );
    assert!(
        out.stderr().contains("FAIL: not built"),
        "a scratch checkout of the index has no build/: {out}"
    );
}
