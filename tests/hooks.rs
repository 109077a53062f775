//! `git agent hook` with real git hooks: `git commit` and `git push` run the installed scripts, which run the
//! project's check and, in fix mode, the scripted agent. Every hook run here has stdin closed and the
//! runner's timeout (`common::run`): a hook that prompted or hung would fail the test, not block it.
//!
//! Contract (issue 12): the check judges the staged tree (pre-commit) or each pushed commit (pre-push); a
//! failure refuses the commit or push and, in fix mode, leaves the fix on agent/<id> with the command that
//! takes it; an existing hook is chained (runs first, same arguments and input, its failure is the hook's)
//! and `uninstall` restores it byte for byte and mode for mode; core.hooksPath is honoured; hooks never
//! prompt, never recurse, and `GIT_AGENT_SKIP=1` skips them.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::common::partners::Partners;
use crate::common::{
    agent_branches, call, fsck, run, session_id, user_state, Output, Reply, Server, TestRepo,
};

const GOOD_CALC: &str = "add() { echo $(( $1 + $2 )); }\n";
/// The user's change: a new `mul`, and `add` broken on the way.
const BAD_CALC: &str = "add() { echo $(( $1 - $2 )); }\nmul() { echo $(( $1 * $2 )); }\n";
/// The agent's fix: `add` repaired, `mul` kept.
const FIXED_CALC: &str = "add() { echo $(( $1 + $2 )); }\nmul() { echo $(( $1 * $2 )); }\n";
const TEST_SH: &str = ". ./calc.sh\ngot=$(add 2 2)\n[ \"$got\" = 4 ] || { echo \"FAIL: add 2 2 gave $got, expected 4\"; exit 1; }\necho ok\n";

/// A repository whose check (`sh test.sh`, in `.git-agent.toml`) passes on HEAD.
fn project() -> TestRepo {
    let repo = TestRepo::new();
    repo.write("calc.sh", GOOD_CALC);
    repo.write("test.sh", TEST_SH);
    repo.write(".git-agent.toml", "check = \"sh test.sh\"\n");
    repo.commit_all("calc with a test");
    trust(&repo);
    repo
}

/// `git agent trust`: the user consents to the repository's check as it now is.
fn trust(repo: &TestRepo) {
    repo.run_agent(&Server::start(vec![]), &["trust"])
        .assert_code(0);
}

/// The scripted model that repairs `calc.sh`.
fn fixing_model() -> Server {
    Server::start(vec![
        Reply::tool_calls(vec![call(
            "write_file",
            json!({"path": "calc.sh", "content": FIXED_CALC}),
        )]),
        Reply::text("add adds again."),
    ])
}

/// `git args` with the agent's hermetic environment and this build's git-agent on PATH, stdin closed,
/// under the runner's timeout.
fn git(repo: &TestRepo, server: &Server, args: &[&str]) -> Output {
    run(&mut repo.via(server, "git", args))
}

fn agent(repo: &TestRepo, server: &Server, args: &[&str]) -> Output {
    run(&mut repo.via(server, "git", &[&["agent"], args].concat()))
}

fn mode_of(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn write_hook(path: &Path, script: &str, mode: u32) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, script).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// The session id printed in `take it: git agent accept <id> ...`.
fn accept_id(out: &Output) -> String {
    let line = out
        .stderr()
        .lines()
        .find(|l| l.starts_with("take it:"))
        .unwrap_or_else(|| panic!("no accept command\n{out}"));
    line.split_whitespace().nth(5).unwrap().to_owned()
}

#[test]
fn pre_commit_fixes_a_failing_check_and_the_fix_then_commits() {
    let repo = project();
    let server = fixing_model();
    agent(&repo, &server, &["hook", "install"]).assert_code(0);
    // The user stages a change that breaks the test, and has unstaged and untracked work besides.
    repo.write("calc.sh", BAD_CALC);
    repo.git(&["add", "calc.sh"]);
    repo.write("README.md", "# demo\n\nan unstaged edit\n");
    repo.write("scratch.txt", "untracked\n");
    let before = user_state(&repo);
    let head = repo.git(&["rev-parse", "HEAD"]);
    let out = git(&repo, &server, &["commit", "-q", "-m", "subtract instead"]);
    out.assert_code(1);
    let stderr = out.stderr();
    assert!(
        stderr.contains("check `sh test.sh` on the staged tree"),
        "{out}"
    );
    assert!(stderr.contains("FAIL: add 2 2 gave 0, expected 4"), "{out}");
    assert!(
        stderr.contains("at most 20 steps, 5m"),
        "the hook budget: {out}"
    );
    let id = accept_id(&out);
    assert!(
        stderr.contains(&format!("take it:    git agent accept {id} --index")),
        "{out}"
    );
    assert!(stderr.contains("the commit was not made"), "{out}");
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), head, "no commit was made");
    assert_eq!(user_state(&repo), before, "nothing of the user's changed");
    assert_eq!(session_id(&repo), id);
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:calc.sh")]),
        FIXED_CALC
    );
    // The check ran on the staged tree: the session's step 0 is it, the unstaged edit is not in it.
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}~1:README.md")]),
        "# demo\n"
    );
    // Take the fix into the working tree and the index, then commit: the hook passes now.
    agent(&repo, &server, &["accept", &id, "--index"]).assert_code(0);
    assert_eq!(
        fs::read_to_string(repo.path().join("calc.sh")).unwrap(),
        FIXED_CALC
    );
    let out = git(&repo, &server, &["commit", "-q", "-m", "subtract, fixed"]);
    out.assert_code(0);
    assert_eq!(
        repo.git(&["show", "HEAD:calc.sh"]),
        FIXED_CALC,
        "the commit holds the user's change with the fix"
    );
    // The unstaged edit and the untracked file stayed the user's, unstaged and uncommitted.
    assert_eq!(
        repo.git(&["status", "--porcelain"]),
        " M README.md\n?? scratch.txt\n"
    );
    assert_eq!(
        fs::read_to_string(repo.path().join("README.md")).unwrap(),
        "# demo\n\nan unstaged edit\n"
    );
    assert_eq!(server.remaining(), 0);
    fsck(&repo);
}

/// `accept <id> --index` stages the fix, not the user's unstaged hunks in the same file: the index entry is
/// a three-way merge of what they staged (here more than the hook judged) with the fix, and the working
/// tree keeps the unstaged edit, which `git commit` leaves out.
#[test]
fn taking_the_fix_into_the_index_leaves_unstaged_edits_in_that_file_unstaged() {
    let repo = project();
    let server = fixing_model();
    agent(&repo, &server, &["hook", "install"]).assert_code(0);
    let note = "# an unstaged note\n";
    repo.write("calc.sh", BAD_CALC);
    repo.git(&["add", "calc.sh"]);
    repo.write("calc.sh", &format!("{BAD_CALC}{note}"));
    let out = git(&repo, &server, &["commit", "-q", "-m", "mul"]);
    out.assert_code(1);
    let id = accept_id(&out);
    // Meanwhile the user stages one more function and keeps the note unstaged.
    let sub = "sub() { echo $(( $1 - $2 )); }\n";
    repo.write("calc.sh", &format!("{BAD_CALC}{sub}"));
    repo.git(&["add", "calc.sh"]);
    repo.write("calc.sh", &format!("{BAD_CALC}{sub}{note}"));
    agent(&repo, &server, &["accept", &id, "--index"]).assert_code(0);
    assert_eq!(
        repo.git(&["show", ":calc.sh"]),
        format!("{FIXED_CALC}{sub}"),
        "the index has the fix and what was staged, not the note"
    );
    assert_eq!(
        fs::read_to_string(repo.path().join("calc.sh")).unwrap(),
        format!("{FIXED_CALC}{sub}{note}")
    );
    assert_eq!(
        repo.git(&["diff", "--", "calc.sh"])
            .lines()
            .filter(|l| l.starts_with(['+', '-']) && !l.starts_with("+++") && !l.starts_with("---"))
            .collect::<Vec<_>>(),
        ["+# an unstaged note"]
    );
    git(&repo, &server, &["commit", "-q", "-m", "mul and sub"]).assert_code(0);
    assert_eq!(
        repo.git(&["show", "HEAD:calc.sh"]),
        format!("{FIXED_CALC}{sub}")
    );
    assert_eq!(repo.git(&["status", "--porcelain"]), " M calc.sh\n");
    fsck(&repo);
}

#[test]
fn an_existing_hook_is_chained_runs_first_and_uninstall_restores_it() {
    let repo = project();
    let server = Server::start(vec![]);
    let order = repo.root().join("order.log");
    let hook = repo.path().join(".git/hooks/pre-commit");
    let user_hook = format!(
        "#!/bin/sh\n# the user's own hook\necho \"user hook $#\" >> {}\n[ ! -f {}/fail ] \n",
        order.display(),
        repo.root().display()
    );
    write_hook(&hook, &user_hook, 0o750);
    repo.write(
        ".git-agent.toml",
        &format!(
            "check = \"echo check >> {} && sh test.sh\"\n",
            order.display()
        ),
    );
    repo.commit_all("the check logs itself");
    trust(&repo);
    fs::remove_file(&order).ok();
    let out = agent(&repo, &server, &["hook", "install"]);
    out.assert_code(0);
    assert!(out.stderr().contains("is kept as"), "{out}");
    let chained = repo.path().join(".git/hooks/pre-commit.git-agent-chained");
    assert_eq!(fs::read_to_string(&chained).unwrap(), user_hook);
    assert_eq!(mode_of(&chained), 0o750);
    // Idempotent: a second install changes nothing, and never chains itself.
    let installed = fs::read(&hook).unwrap();
    let out = agent(&repo, &server, &["hook", "install"]);
    out.assert_code(0);
    assert!(out.stderr().contains("already installed"), "{out}");
    assert_eq!(fs::read(&hook).unwrap(), installed);
    assert_eq!(fs::read_to_string(&chained).unwrap(), user_hook);
    let status = agent(&repo, &server, &["hook", "status"]);
    assert!(
        status
            .stdout()
            .contains("pre-commit: installed (mode from [hooks] mode, else fix); chains"),
        "{status}"
    );
    // The user's hook runs first, then the check.
    repo.write("a.txt", "a\n");
    repo.git(&["add", "a.txt"]);
    git(&repo, &server, &["commit", "-q", "-m", "a"]).assert_code(0);
    assert_eq!(fs::read_to_string(&order).unwrap(), "user hook 0\ncheck\n");
    // When the user's hook fails, the commit fails as before, and the check does not run.
    fs::write(repo.root().join("fail"), "").unwrap();
    repo.write("b.txt", "b\n");
    repo.git(&["add", "b.txt"]);
    let head = repo.git(&["rev-parse", "HEAD"]);
    git(&repo, &server, &["commit", "-q", "-m", "b"]).assert_code(1);
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), head);
    assert_eq!(
        fs::read_to_string(&order).unwrap(),
        "user hook 0\ncheck\nuser hook 0\n"
    );
    // Uninstall: the user's hook is back, byte for byte and mode for mode.
    let out = agent(&repo, &server, &["hook", "uninstall"]);
    out.assert_code(0);
    assert_eq!(fs::read_to_string(&hook).unwrap(), user_hook);
    assert_eq!(mode_of(&hook), 0o750);
    assert!(!chained.exists());
    assert!(server.requests().is_empty());
}

#[test]
fn a_relative_core_hooks_path_is_honoured() {
    let repo = project();
    let server = Server::start(vec![]);
    repo.git(&["config", "core.hooksPath", ".githooks"]);
    let out = agent(&repo, &server, &["hook", "install", "--mode", "check"]);
    out.assert_code(0);
    let hook = repo.path().join(".githooks/pre-commit");
    assert!(hook.is_file(), "{out}");
    assert_eq!(mode_of(&hook), 0o755);
    // Where git itself looks.
    let git_path = repo.git(&["rev-parse", "--git-path", "hooks"]);
    assert_eq!(
        fs::canonicalize(repo.path().join(git_path.trim())).unwrap(),
        fs::canonicalize(repo.path().join(".githooks")).unwrap()
    );
    assert!(!repo.path().join(".git/hooks/pre-commit").exists());
    let status = agent(&repo, &server, &["hook", "status"]);
    assert!(
        status.stdout().contains("(core.hooksPath = .githooks)"),
        "{status}"
    );
    assert!(
        status
            .stdout()
            .contains("pre-commit: installed (mode check)"),
        "{status}"
    );
    // Check mode: a failing check refuses the commit, says how to fix it, and starts no agent.
    repo.write("calc.sh", BAD_CALC);
    repo.git(&["add", "calc.sh"]);
    let out = git(&repo, &server, &["commit", "-q", "-m", "broken"]);
    out.assert_code(1);
    assert!(
        out.stderr()
            .contains("git-agent: `sh test.sh` fails on the staged tree (exit 1)"),
        "{out}"
    );
    assert!(
        out.stderr()
            .contains("hint: let the agent fix it: git agent fix --staged"),
        "{out}"
    );
    assert!(agent_branches(&repo).is_empty());
}

#[test]
fn a_linked_worktree_uses_the_common_hooks_directory() {
    let repo = project();
    let server = Server::start(vec![]);
    let linked = repo.root().join("linked");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        linked.to_str().unwrap(),
    ]);
    let out = run(repo
        .via(
            &server,
            "git",
            &["agent", "hook", "install", "--mode", "check"],
        )
        .current_dir(&linked));
    out.assert_code(0);
    assert!(repo.path().join(".git/hooks/pre-commit").is_file(), "{out}");
    let git_path = run(Command::new("git")
        .args(["rev-parse", "--path-format=absolute", "--git-path", "hooks"])
        .current_dir(&linked));
    assert_eq!(
        PathBuf::from(git_path.stdout().trim()),
        repo.path().join(".git/hooks")
    );
    // A commit in the linked worktree runs the hook, on that worktree's staged tree.
    fs::write(linked.join("calc.sh"), BAD_CALC).unwrap();
    run(Command::new("git")
        .args(["add", "calc.sh"])
        .current_dir(&linked))
    .assert_code(0);
    let out = run(repo
        .via(&server, "git", &["commit", "-q", "-m", "broken"])
        .current_dir(&linked));
    out.assert_code(1);
    assert!(out.stderr().contains("fails on the staged tree"), "{out}");
}

#[test]
fn pre_push_blocks_a_failing_push_and_leaves_the_fix_on_a_branch() {
    let repo = project();
    let server = fixing_model();
    let remote = repo.root().join("remote.git");
    repo.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
    repo.git(&["remote", "add", "origin", remote.to_str().unwrap()]);
    repo.git(&["branch", "old"]);
    repo.git(&["push", "-q", "origin", "main", "old"]);
    let pushed = repo.git(&["rev-parse", "main"]);
    agent(&repo, &server, &["hook", "install", "pre-push"]).assert_code(0);
    repo.write("calc.sh", BAD_CALC);
    repo.commit_all("subtract instead");
    let failing = repo.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let out = git(&repo, &server, &["push", "-q", "origin", "main"]);
    assert_ne!(out.code(), 0, "{out}");
    let stderr = out.stderr();
    assert!(
        stderr.contains(&format!("check `sh test.sh` on commit {}", &failing[..7])),
        "{out}"
    );
    assert!(stderr.contains("the push was refused"), "{out}");
    let id = accept_id(&out);
    assert!(
        stderr.contains(&format!(
            "git agent accept {id} --commit   (on main; then push again)"
        )),
        "{out}"
    );
    // The remote did not get the failing commit; agent/<id> has the fix, on top of it.
    let remote_main = Command::new("git")
        .args(["--git-dir", remote.to_str().unwrap(), "rev-parse", "main"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&remote_main.stdout), pushed);
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:calc.sh")]),
        FIXED_CALC
    );
    assert_eq!(
        repo.git(&["rev-parse", &format!("agent/{id}~1")]).trim(),
        failing
    );
    // A deletion is not checked: it pushes no commit.
    let out = git(&repo, &server, &["push", "-q", "origin", "--delete", "old"]);
    out.assert_code(0);
    fsck(&repo);
}

#[test]
fn hooks_never_recurse_skip_on_request_and_the_model_cannot_skip_them() {
    let repo = project();
    // The model tries git's own escape hatch, then reports what its commands see.
    let no_verify = call(
        "run",
        json!({"command": "git commit --no-verify -qm sneaky"}),
    );
    let marker = call("run", json!({"command": "echo marker=$GIT_AGENT_IN_RUN"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![no_verify.clone()]),
        Reply::tool_calls(vec![marker.clone()]),
        Reply::tool_calls(vec![call(
            "write_file",
            json!({"path": "calc.sh", "content": GOOD_CALC}),
        )]),
        Reply::text("fixed"),
    ]);
    agent(&repo, &server, &["hook", "install"]).assert_code(0);
    repo.write("calc.sh", BAD_CALC);
    repo.git(&["add", "calc.sh"]);
    // GIT_AGENT_SKIP=1: the check is skipped, the commit goes through.
    let out = run(repo
        .via(&server, "git", &["commit", "-q", "-m", "skipped"])
        .env("GIT_AGENT_SKIP", "1"));
    out.assert_code(0);
    assert!(
        out.stderr().contains("pre-commit skipped (GIT_AGENT_SKIP)"),
        "{out}"
    );
    // Within an agent run (the marker set), the hook does nothing at all.
    repo.write("calc.sh", "add() { echo 5; }\n");
    repo.git(&["add", "calc.sh"]);
    let out = run(repo
        .via(&server, "git", &["commit", "-q", "-m", "inside"])
        .env("GIT_AGENT_IN_RUN", "1"));
    out.assert_code(0);
    assert_eq!(out.stderr(), "", "{out}");
    assert!(server.requests().is_empty());
    // A fix run by the hook: the model's --no-verify is refused, its commands carry the marker.
    repo.write("calc.sh", BAD_CALC);
    repo.git(&["add", "calc.sh"]);
    let out = git(&repo, &server, &["commit", "-q", "-m", "broken"]);
    out.assert_code(1);
    let requests = server.requests();
    let refused = requests[1].tool_result(&no_verify.id);
    assert!(refused.contains("--no-verify"), "{refused}");
    assert!(refused.contains("git-no-verify"), "{refused}");
    assert!(
        requests[2].tool_result(&marker.id).contains("marker=1"),
        "{}",
        requests[2].tool_result(&marker.id)
    );
    let id = accept_id(&out);
    // The agent's own step commits ran no hook: one session, no nested one.
    assert_eq!(agent_branches(&repo), [id]);
}

/// Files as husky 9.1.7 writes them (`husky` in a repository): `core.hooksPath=.husky/_`, one stub per hook
/// that sources `h`, which runs `.husky/<name>`: the husky of the test that runs without the partners.
fn husky_by_hand(repo: &TestRepo) {
    let dir = repo.path().join(".husky/_");
    fs::create_dir_all(&dir).unwrap();
    let h = "#!/usr/bin/env sh\n[ \"$HUSKY\" = \"2\" ] && set -x\nn=$(basename \"$0\")\ns=$(dirname \"$(dirname \"$0\")\")/$n\n\n[ ! -f \"$s\" ] && exit 0\n\n[ \"${HUSKY-}\" = \"0\" ] && exit 0\n\nexport PATH=\"node_modules/.bin:$PATH\"\nsh -e \"$s\" \"$@\"\nc=$?\n\n[ $c != 0 ] && echo \"husky - $n script failed (code $c)\"\nexit $c\n";
    fs::write(dir.join("h"), h).unwrap();
    fs::write(dir.join("husky.sh"), "echo deprecated\n").unwrap();
    fs::write(dir.join(".gitignore"), "*").unwrap();
    for name in ["pre-commit", "pre-push"] {
        write_hook(
            &dir.join(name),
            "#!/usr/bin/env sh\n. \"$(dirname \"$0\")/h\"",
            0o755,
        );
    }
    repo.git(&["config", "core.hooksPath", ".husky/_"]);
}

/// A hook partner `.ci/run` installed under `GIT_AGENT_HOOK_PARTNERS` (`npm/...` or `venv/...`); a test that
/// needs one is ignored by a plain `cargo test` and fails without it.
fn partner(rel: &str) -> PathBuf {
    Partners::require(
        "GIT_AGENT_HOOK_PARTNERS",
        "husky, lefthook and the pre-commit framework",
    )
    .path(rel)
}

/// Runs an installed hook manager's `args` in the repository, as its user would.
fn run_partner(repo: &TestRepo, rel: &str, args: &[&str]) {
    let out = run(Command::new(partner(rel))
        .args(args)
        .current_dir(repo.path())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1"));
    out.assert_code(0);
}

#[test]
fn a_husky_directory_needs_force_and_husky_still_runs_its_script() {
    a_husky_directory_needs_force(husky_by_hand);
}

#[test]
#[ignore = "needs husky: run by .ci/run"]
fn the_real_huskys_directory_needs_force_and_husky_still_runs_its_script() {
    a_husky_directory_needs_force(|repo| run_partner(repo, "npm/node_modules/.bin/husky", &[]));
}

/// `install` refuses a directory husky owns without `--force`, and with it husky's script still runs,
/// chained; `husky` sets the repository up (the real one, or its files written by hand).
fn a_husky_directory_needs_force(husky: impl FnOnce(&TestRepo)) {
    let repo = project();
    let server = Server::start(vec![]);
    husky(&repo);
    let order = repo.root().join("order.log");
    repo.write(
        ".husky/pre-commit",
        &format!("echo husky-script >> {}\n", order.display()),
    );
    let stub = repo.path().join(".husky/_/pre-commit");
    let husky_stub = fs::read(&stub).unwrap();
    let out = agent(&repo, &server, &["hook", "install"]);
    out.assert_code(1);
    assert_eq!(
        out.first_stderr_line(),
        "error: core.hooksPath is .husky/_, which husky owns: nothing was installed"
    );
    assert!(
        out.stderr()
            .contains("add `git agent hook run pre-commit \"$@\"` to .husky/pre-commit"),
        "{out}"
    );
    assert_eq!(fs::read(&stub).unwrap(), husky_stub);
    let out = agent(&repo, &server, &["hook", "install", "--force"]);
    out.assert_code(0);
    assert!(out.stderr().contains("(husky's) is kept as"), "{out}");
    repo.write("a.txt", "a\n");
    repo.git(&["add", "a.txt"]);
    git(&repo, &server, &["commit", "-q", "-m", "a"]).assert_code(0);
    assert_eq!(
        fs::read_to_string(&order).unwrap(),
        "husky-script\n",
        "husky's stub, chained, still found .husky/pre-commit"
    );
    agent(&repo, &server, &["hook", "uninstall"]).assert_code(0);
    assert_eq!(fs::read(&stub).unwrap(), husky_stub);
}

#[test]
fn a_lefthook_hook_needs_force() {
    a_lefthook_hook_needs_force_with(|repo| {
        write_hook(
            &repo.path().join(".git/hooks/pre-commit"),
            "#!/bin/sh\ncall_lefthook run \"pre-commit\" \"$@\"\n",
            0o755,
        );
    });
}

#[test]
#[ignore = "needs lefthook: run by .ci/run"]
fn the_real_lefthooks_hook_needs_force() {
    a_lefthook_hook_needs_force_with(|repo| {
        run_partner(repo, "npm/node_modules/.bin/lefthook", &["install"]);
    });
}

/// `install` refuses a hook lefthook wrote without `--force`, and `uninstall` gives it back byte for byte;
/// `lefthook` installs its hook (the real one, or a hook like it written by hand).
fn a_lefthook_hook_needs_force_with(lefthook: impl FnOnce(&TestRepo)) {
    let repo = project();
    let server = Server::start(vec![]);
    let hook = repo.path().join(".git/hooks/pre-commit");
    repo.write(
        "lefthook.yml",
        "pre-commit:\n  commands:\n    hello:\n      run: echo hi\n",
    );
    lefthook(&repo);
    let theirs = fs::read(&hook).unwrap();
    let out = agent(&repo, &server, &["hook", "install"]);
    out.assert_code(1);
    assert!(
        out.first_stderr_line().contains("is managed by lefthook"),
        "{out}"
    );
    assert!(out.stderr().contains("lefthook.yml"), "{out}");
    assert_eq!(fs::read(&hook).unwrap(), theirs);
    agent(&repo, &server, &["hook", "install", "--force"]).assert_code(0);
    agent(&repo, &server, &["hook", "uninstall"]).assert_code(0);
    assert_eq!(fs::read(&hook).unwrap(), theirs);
}

/// The pre-commit framework, from `.ci/run`'s venv.
fn pre_commit() -> PathBuf {
    partner("venv/bin/pre-commit")
}

fn pre_commit_cmd(repo: &TestRepo, server: &Server, program: &Path, args: &[&str]) -> Output {
    let mut cmd = repo.via(server, program.to_str().unwrap(), args);
    cmd.env("PRE_COMMIT_HOME", repo.root().join("pre-commit-home"));
    run(&mut cmd)
}

#[test]
#[ignore = "needs the pre-commit framework: run by .ci/run"]
fn the_pre_commit_framework_runs_the_hook_from_this_repository() {
    let program = pre_commit();
    let repo = project();
    let server = Server::start(vec![]);
    let this = env!("CARGO_MANIFEST_DIR");
    let out = pre_commit_cmd(
        &repo,
        &server,
        &program,
        &["try-repo", this, "git-agent-fix", "--files", "calc.sh"],
    );
    out.assert_code(0);
    assert!(out.stdout().contains("Passed"), "{out}");
    repo.write("calc.sh", BAD_CALC);
    repo.git(&["add", "calc.sh"]);
    let mut cmd = repo.via(
        &server,
        program.to_str().unwrap(),
        &["try-repo", this, "git-agent-fix", "--files", "calc.sh"],
    );
    cmd.env("PRE_COMMIT_HOME", repo.root().join("pre-commit-home"))
        .env("GIT_AGENT_HOOK_MODE", "check");
    let out = run(&mut cmd);
    out.assert_code(1);
    assert!(out.stdout().contains("Failed"), "{out}");
    assert!(
        out.stdout()
            .contains("`sh test.sh` fails on the staged tree"),
        "{out}"
    );
}

#[test]
#[ignore = "needs the pre-commit framework: run by .ci/run"]
fn the_pre_commit_frameworks_own_hook_is_chained() {
    let program = pre_commit();
    let repo = project();
    let server = Server::start(vec![]);
    let order = repo.root().join("order.log");
    repo.write(
        ".pre-commit-config.yaml",
        &format!(
            "repos:\n- repo: local\n  hooks:\n  - id: log\n    name: log\n    entry: sh -c 'echo framework >> {}'\n    language: system\n    pass_filenames: false\n    always_run: true\n",
            order.display()
        ),
    );
    repo.write(
        ".git-agent.toml",
        &format!(
            "check = \"echo check >> {} && sh test.sh\"\n",
            order.display()
        ),
    );
    repo.commit_all("pre-commit config");
    trust(&repo);
    pre_commit_cmd(&repo, &server, &program, &["install"]).assert_code(0);
    let framework_hook = fs::read(repo.path().join(".git/hooks/pre-commit")).unwrap();
    let out = agent(&repo, &server, &["hook", "install"]);
    out.assert_code(0);
    assert!(
        out.stderr()
            .contains("(the pre-commit framework's) is kept as"),
        "{out}"
    );
    repo.write("a.txt", "a\n");
    repo.git(&["add", "a.txt"]);
    let mut cmd = repo.via(&server, "git", &["commit", "-q", "-m", "a"]);
    cmd.env("PRE_COMMIT_HOME", repo.root().join("pre-commit-home"));
    let out = run(&mut cmd);
    out.assert_code(0);
    assert_eq!(fs::read_to_string(&order).unwrap(), "framework\ncheck\n");
    agent(&repo, &server, &["hook", "uninstall"]).assert_code(0);
    assert_eq!(
        fs::read(repo.path().join(".git/hooks/pre-commit")).unwrap(),
        framework_hook
    );
}

/// A mode set in the environment wins over the installed script's default (it used to be overwritten by the
/// script), and in fix mode an agent that cannot start still leaves the ways past the hook in its error.
#[test]
fn the_environments_mode_wins_and_a_fix_that_cannot_start_says_how_to_go_on() {
    let repo = project();
    let server = Server::start(vec![]);
    agent(&repo, &server, &["hook", "install"]).assert_code(0);
    repo.write("calc.sh", BAD_CALC);
    repo.git(&["add", "calc.sh"]);
    let mut cmd = repo.via(&server, "git", &["commit", "-q", "-m", "broken"]);
    cmd.env("GIT_AGENT_HOOK_MODE", "check");
    let out = run(&mut cmd);
    out.assert_code(1);
    assert!(
        out.stderr()
            .contains("hint: let the agent fix it: git agent fix --staged"),
        "check mode: {out}"
    );
    assert!(server.requests().is_empty(), "no agent ran: {out}");
    assert_eq!(agent_branches(&repo), Vec::<String>::new());
    // Fix mode with a model whose key is missing: the error, then the hints.
    let mut cmd = repo.via(&server, "git", &["commit", "-q", "-m", "broken"]);
    cmd.env("GIT_AGENT_MODEL", "anthropic/claude-sonnet-4-5")
        .env_remove("ANTHROPIC_API_KEY");
    let out = run(&mut cmd);
    out.assert_code(1);
    let stderr = out.stderr();
    assert!(stderr.contains("error: "), "{out}");
    assert!(
        stderr.contains("hint: only check, never fix: git agent hook install --mode check"),
        "{out}"
    );
    assert!(
        stderr.contains("hint: skip the hook once: GIT_AGENT_SKIP=1, or --no-verify"),
        "{out}"
    );
    assert_eq!(
        repo.git(&["log", "--format=%s", "-1"]),
        "calc with a test\n"
    );
}
