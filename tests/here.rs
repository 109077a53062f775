//! `ask --here`: the agent works in the user's own working tree, still committing each step to `agent/<id>`;
//! the user's HEAD, index and branches are never written, and nothing ever removes that working tree.
//!
//! Contract: DESIGN.md sections 2 (`--here`) and 4 (step 0, the branch, the checkout "unless --here").

use std::fs;

use serde_json::json;

use crate::common::{
    agent_commits, agent_worktrees, call, fsck, run, session_id, trailer, user_state, Reply,
    Server, TestRepo,
};

/// What `--here` must never change: HEAD, the index (listing and raw bytes) and the user's branches.
fn head_index_branches(repo: &TestRepo) -> String {
    let index = fs::read(repo.path().join(".git/index")).expect("the repo has an index");
    let branches = crate::common::user_branches(repo);
    format!(
        "HEAD {}{}index {} bytes, {:x}\n{}branches\n{branches}",
        repo.git(&["rev-parse", "--symbolic-full-name", "HEAD"]),
        repo.git(&["rev-parse", "HEAD"]),
        index.len(),
        fnv(&index),
        repo.git(&["ls-files", "-s"]),
    )
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// A repo with a subdirectory and uncommitted work of every kind: staged, modified, untracked.
fn repo_with_work_in_progress() -> TestRepo {
    let repo = TestRepo::new();
    repo.write("src/lib.rs", "pub fn f() {}\n");
    repo.commit_all("add src");
    repo.write("staged.txt", "staged by the user\n");
    repo.git(&["add", "staged.txt"]);
    repo.write("README.md", "# demo\nedited, not staged\n");
    repo.write("wip.md", "my own work in progress\n");
    repo
}

fn read(repo: &TestRepo, path: &str) -> Option<String> {
    fs::read_to_string(repo.path().join(path)).ok()
}

#[test]
fn here_changes_the_work_tree_and_commits_each_step_to_the_branch() {
    let repo = repo_with_work_in_progress();
    let before = head_index_branches(&repo);
    let edit = call(
        "edit_file",
        json!({"path": "file.txt", "old_string": "two", "new_string": "TWO"}),
    );
    let make = call(
        "run",
        json!({"command": "printf 'made by a command\\n' > src/gen.txt"}),
    );
    let server = Server::start(vec![
        Reply::text_and_tool_calls("Shout two.", vec![edit]),
        Reply::text_and_tool_calls("Generate a file.", vec![make]),
        Reply::text("Done: shouted two and generated src/gen.txt."),
    ]);
    // From a subdirectory: the tools work from the repository's top level all the same.
    let mut cmd = repo.agent(&server, &["ask", "--here", "shout and generate"]);
    cmd.current_dir(repo.path().join("src"));
    let out = run(&mut cmd);
    out.assert_code(0);
    let id = session_id(&repo);

    // The results are in the user's working tree, next to the user's own uncommitted work.
    assert_eq!(
        read(&repo, "file.txt").as_deref(),
        Some("one\nTWO\nthree\n")
    );
    assert_eq!(
        read(&repo, "src/gen.txt").as_deref(),
        Some("made by a command\n")
    );
    assert_eq!(
        read(&repo, "wip.md").as_deref(),
        Some("my own work in progress\n")
    );
    assert!(
        agent_worktrees(&repo).is_empty(),
        "--here makes no checkout"
    );
    assert_eq!(head_index_branches(&repo), before, "HEAD, index, branches");

    // agent/<id>: step 0 (the user's work), then one commit per step, with trailers.
    let commits = agent_commits(&repo, &id);
    assert_eq!(commits.len(), 3, "step 0 plus two steps: {commits:?}");
    for (n, commit) in commits.iter().enumerate() {
        assert_eq!(trailer(&repo, commit, "Agent-Session"), id);
        assert_eq!(trailer(&repo, commit, "Agent-Step"), n.to_string());
    }
    let show = |rev: &str, path: &str| repo.git(&["show", &format!("{rev}:{path}")]);
    assert_eq!(show(&commits[0], "wip.md"), "my own work in progress\n");
    assert_eq!(show(&commits[0], "staged.txt"), "staged by the user\n");
    assert_eq!(
        show(&commits[0], "README.md"),
        "# demo\nedited, not staged\n"
    );
    assert_eq!(show(&commits[0], "file.txt"), "one\ntwo\nthree\n");
    let files = |rev: &str| repo.git(&["diff-tree", "--no-commit-id", "--name-only", "-r", rev]);
    assert_eq!(files(&commits[1]), "file.txt\n");
    assert_eq!(files(&commits[2]), "src/gen.txt\n");

    // The session says it worked here.
    let meta = repo.git(&["show", &format!("refs/agent/sessions/{id}:meta.json")]);
    let meta: serde_json::Value = serde_json::from_str(&meta).expect("meta.json is JSON");
    assert_eq!(meta["here"], true);
    let server = Server::start(vec![]);
    let log = repo.run_agent(&server, &["log"]);
    assert!(log.stdout().contains("[here]"), "{}", log.stdout());
    let shown = repo.run_agent(&server, &["show", &id]);
    assert!(shown.stdout().contains("--here"), "{}", shown.stdout());
    fsck(&repo);
}

#[test]
fn a_failing_first_request_with_here_leaves_everything_as_it_was() {
    let repo = repo_with_work_in_progress();
    let refs = repo.git(&["for-each-ref", "--format=%(refname) %(objectname)"]);
    let before = head_index_branches(&repo);
    let state = user_state(&repo);
    let server = Server::start(vec![Reply::status(401, "Incorrect API key provided.")]);
    let out = repo.run_agent(&server, &["ask", "--here", "do something"]);
    out.assert_code(1);
    assert!(
        out.first_stderr_line().starts_with("error:"),
        "{}",
        out.stderr()
    );
    // Read before anything else can touch the index: byte for byte as it was.
    assert_eq!(head_index_branches(&repo), before);
    assert_eq!(user_state(&repo), state, "work tree, index, HEAD, stash");
    assert_eq!(
        repo.git(&["for-each-ref", "--format=%(refname) %(objectname)"]),
        refs,
        "no refs left behind"
    );
    assert!(agent_worktrees(&repo).is_empty());
    fsck(&repo);
}

#[test]
fn discard_of_a_here_session_deletes_the_branch_and_keeps_the_work_tree() {
    let repo = repo_with_work_in_progress();
    let add = call("write_file", json!({"path": "a.txt", "content": "alpha\n"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![add]),
        Reply::text("Added a.txt."),
    ]);
    repo.run_agent(&server, &["ask", "--here", "add alpha"])
        .assert_code(0);
    let id = session_id(&repo);

    // --resume continues in the working tree: no checkout appears.
    let more = call(
        "write_file",
        json!({"path": "src/b.txt", "content": "beta\n"}),
    );
    let server = Server::start(vec![Reply::tool_calls(vec![more]), Reply::text("Added b.")]);
    repo.run_agent(&server, &["ask", "--resume", &id, "add beta too"])
        .assert_code(0);
    assert_eq!(read(&repo, "src/b.txt").as_deref(), Some("beta\n"));
    assert!(agent_worktrees(&repo).is_empty());
    assert_eq!(agent_commits(&repo, &id).len(), 3);

    let state = user_state(&repo);
    let server = Server::start(vec![]);
    let out = repo.run_agent(&server, &["discard", &id]);
    out.assert_code(0);
    assert_eq!(user_state(&repo), state, "the working tree keeps its files");
    assert_eq!(read(&repo, "a.txt").as_deref(), Some("alpha\n"));
    assert!(repo
        .git(&["for-each-ref", "refs/heads/agent/"])
        .trim()
        .is_empty());
    assert!(!repo
        .git(&["for-each-ref", &format!("refs/agent/sessions/{id}")])
        .is_empty());
    repo.run_agent(&server, &["discard", "--purge", &id])
        .assert_code(0);
    assert!(repo.git(&["for-each-ref", "refs/agent/"]).trim().is_empty());
    assert_eq!(user_state(&repo), state);
    fsck(&repo);
}

#[test]
fn undo_of_a_here_session_restores_files_but_never_a_later_edit() {
    let repo = repo_with_work_in_progress();
    let before = head_index_branches(&repo);
    let edit = call(
        "edit_file",
        json!({"path": "file.txt", "old_string": "two", "new_string": "TWO"}),
    );
    let add = call(
        "write_file",
        json!({"path": "src/a.txt", "content": "alpha\n"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![edit]),
        Reply::tool_calls(vec![add]),
        Reply::text("Done."),
    ]);
    repo.run_agent(&server, &["ask", "--here", "two edits"])
        .assert_code(0);
    let id = session_id(&repo);
    let tip = repo.git(&["rev-parse", &format!("agent/{id}")]);
    let server = Server::start(vec![]);

    // The user edits src/a.txt after the agent: undoing step 2 would overwrite that, so it is refused.
    repo.write("src/a.txt", "alpha, improved by the user\n");
    let out = repo.run_agent(&server, &["undo", &id]);
    out.assert_code(1);
    assert!(
        out.first_stderr_line().starts_with("error:")
            && out.first_stderr_line().contains("src/a.txt"),
        "{}",
        out.stderr()
    );
    assert_eq!(
        read(&repo, "src/a.txt").as_deref(),
        Some("alpha, improved by the user\n")
    );
    assert_eq!(repo.git(&["rev-parse", &format!("agent/{id}")]), tip);

    // Back to the agent's content: the undo goes through and removes the file step 2 created.
    repo.write("src/a.txt", "alpha\n");
    repo.run_agent(&server, &["undo", &id]).assert_code(0);
    assert_eq!(read(&repo, "src/a.txt"), None);
    assert_eq!(
        read(&repo, "file.txt").as_deref(),
        Some("one\nTWO\nthree\n")
    );
    assert_eq!(trailer(&repo, &format!("agent/{id}"), "Agent-Step"), "1");

    // And step 1: file.txt is back to what step 0 had; the user's own work is untouched.
    repo.run_agent(&server, &["undo", &id]).assert_code(0);
    assert_eq!(
        read(&repo, "file.txt").as_deref(),
        Some("one\ntwo\nthree\n")
    );
    assert_eq!(
        read(&repo, "wip.md").as_deref(),
        Some("my own work in progress\n")
    );
    assert_eq!(
        read(&repo, "README.md").as_deref(),
        Some("# demo\nedited, not staged\n")
    );
    assert_eq!(head_index_branches(&repo), before, "HEAD, index, branches");
    assert!(agent_worktrees(&repo).is_empty());
    fsck(&repo);
}

#[test]
#[cfg_attr(git_agent_portable, ignore = "needs Landlock: Linux only")]
fn the_sandbox_lets_commands_write_the_work_tree_but_not_its_git_dir() {
    if git_agent::platform::landlock_abi() < 1 {
        eprintln!("SKIPPED: this kernel does not support Landlock");
        return;
    }
    let repo = repo_with_work_in_progress();
    let before = head_index_branches(&repo);
    // A script hides its commands from the guard: only the sandbox stands in the way.
    let script = "echo hook > .git/hooks/pre-commit\necho x > .git/index\ngit branch evil\n\
                  echo in > src/inside.txt\necho more >> file.txt\n";
    let write = call("write_file", json!({"path": "src/w.sh", "content": script}));
    let exec = call(
        "run",
        json!({"command": "sh src/w.sh; git status --short >/dev/null && echo status-ok"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![write, exec.clone()]),
        Reply::text("done"),
    ]);
    let out = repo.run_agent(
        &server,
        &["ask", "--here", "--sandbox", "workspace", "try the git dir"],
    );
    out.assert_code(0);
    let result = server
        .requests()
        .pop()
        .expect("follow-up")
        .tool_result(&exec.id);
    assert!(
        !repo.path().join(".git/hooks/pre-commit").exists(),
        "{result}"
    );
    assert_eq!(repo.git(&["branch", "--list", "evil"]), "", "{result}");
    assert!(
        result.contains("status-ok"),
        "git status works read-only: {result}"
    );
    assert_eq!(
        read(&repo, "src/inside.txt").as_deref(),
        Some("in\n"),
        "{result}"
    );
    assert_eq!(
        read(&repo, "file.txt").as_deref(),
        Some("one\ntwo\nthree\nmore\n"),
        "{result}"
    );
    assert_eq!(head_index_branches(&repo), before, "{result}");
    let id = session_id(&repo);
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:src/inside.txt")]),
        "in\n"
    );
}

/// Issue 17: where mount namespaces are available, `--here --sandbox workspace` binds the git dir read-only
/// over itself, so commands may create and delete entries at the top of the work tree while `.git` stays
/// read-only; elsewhere the top level stays closed (today's rule) and a notice says so.
#[test]
#[cfg_attr(git_agent_portable, ignore = "needs Landlock: Linux only")]
fn here_under_the_sandbox_creates_top_level_files_while_git_stays_read_only() {
    if git_agent::platform::landlock_abi() < 1 {
        eprintln!("SKIPPED: this kernel does not support Landlock");
        return;
    }
    let available = git_agent::platform::isolation().is_namespace();
    // With the namespace where the kernel allows it, and the fallback (forced off) everywhere.
    for namespaces in [available, false] {
        let repo = repo_with_work_in_progress();
        let before = head_index_branches(&repo);
        let state = user_state(&repo);
        let config_before = fs::read(repo.path().join(".git/config")).unwrap();
        // A script hides its commands from the guard: only the sandbox stands in the way.
        let script = "echo top > top.txt && echo made-top\necho gone > gone.txt && rm gone.txt && echo removed-top\n\
                      echo '[core] hooksPath = /tmp' >> .git/config && echo wrote-config\n\
                      mv .git .git-moved && echo moved-git\necho hook > .git/hooks/pre-commit && echo hooked\n";
        let write = call("write_file", json!({"path": "src/w.sh", "content": script}));
        let exec = call("run", json!({"command": "sh src/w.sh"}));
        let server = Server::start(vec![
            Reply::tool_calls(vec![write, exec.clone()]),
            Reply::text("done"),
        ]);
        let mut cmd = repo.agent(
            &server,
            &[
                "ask",
                "--json",
                "--here",
                "--sandbox",
                "workspace",
                "touch the top level",
            ],
        );
        if !namespaces {
            cmd.env("GIT_AGENT_ISOLATION", "off");
        }
        let out = run(&mut cmd);
        out.assert_code(0);
        let result = server
            .requests()
            .pop()
            .expect("follow-up")
            .tool_result(&exec.id);
        // Never, with or without namespaces: the git dir is read-only to commands.
        for refused in ["wrote-config", "moved-git", "hooked"] {
            assert!(!result.contains(refused), "{refused}: {result}");
        }
        assert_eq!(
            fs::read(repo.path().join(".git/config")).unwrap(),
            config_before
        );
        assert!(!repo.path().join(".git/hooks/pre-commit").exists());
        assert!(!repo.path().join(".git-moved").exists());
        if namespaces {
            assert!(
                result.contains("made-top") && result.contains("removed-top"),
                "{result}"
            );
            assert_eq!(read(&repo, "top.txt").as_deref(), Some("top\n"));
            assert!(!repo.path().join("gone.txt").exists());
            let id = session_id(&repo);
            assert_eq!(repo.git(&["show", &format!("agent/{id}:top.txt")]), "top\n");
            assert!(
                !out.stdout().contains("\"topic\":\"sandbox\""),
                "{}",
                out.stdout()
            );
        } else {
            assert!(!result.contains("made-top"), "{result}");
            assert!(
                out.stdout().contains("\"topic\":\"sandbox\""),
                "the fallback is announced: {}",
                out.stdout()
            );
        }
        assert_eq!(head_index_branches(&repo), before, "{result}");
        // Nothing else of the user's changed: only the script the agent wrote and the file it made.
        crate::common::landing::assert_only(&repo, &state, &["src/w.sh", "top.txt"], &[]);
        fsck(&repo);
    }
}
