//! `git agent pr` (issue 13) against a bare remote: what is pushed (branch, session log, notes), the body
//! written from the session, a `gh` test double that records how it is called, `--stdout` as
//! `git request-pull` would write it, and a session made in another clone.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::common::landing::{agent, session};
use crate::common::{call, fsck, run, user_state, Output, Reply, Server, TestRepo};

/// A repository whose `main` is pushed, with upstream, to a bare `remote.git`; returns the bare path.
fn with_remote(repo: &TestRepo) -> PathBuf {
    let bare = repo.root().join("remote.git");
    repo.git(&["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()]);
    repo.git(&["remote", "add", "origin", bare.to_str().unwrap()]);
    repo.git(&["push", "-q", "-u", "origin", "main"]);
    bare
}

fn work(repo: &TestRepo) -> String {
    session(
        repo,
        "Add alpha and shout two\n\nsecond line of the prompt",
        vec![
            Reply::text_and_tool_calls(
                "Add a.txt with the greeting.",
                vec![call(
                    "write_file",
                    json!({"path": "a.txt", "content": "alpha\n"}),
                )],
            ),
            Reply::tool_calls(vec![call("run", json!({"command": "echo checked"}))]),
            Reply::text_and_tool_calls(
                "Shout two, as asked.",
                vec![call(
                    "edit_file",
                    json!({"path": "file.txt", "old_string": "two", "new_string": "TWO"}),
                )],
            ),
            Reply::text("Added a.txt and shouted two."),
        ],
    )
}

/// A directory with an executable `gh` that appends its arguments, one a line, and `--` to `log`.
fn gh_double(root: &Path) -> (PathBuf, PathBuf) {
    let bin = root.join("bin");
    fs::create_dir_all(&bin).unwrap();
    let log = root.join("gh.log");
    let gh = bin.join("gh");
    fs::write(
        &gh,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> '{}'; done\necho -- >> '{}'\n",
            log.display(),
            log.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&gh, fs::Permissions::from_mode(0o755)).unwrap();
    (bin, log)
}

fn remote_refs(bare: &Path) -> String {
    let out = std::process::Command::new("git")
        .args([
            "--git-dir",
            bare.to_str().unwrap(),
            "for-each-ref",
            "--format=%(refname) %(objectname)",
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn pr(repo: &TestRepo, path: &str, args: &[&str]) -> Output {
    let server = Server::start(vec![]);
    let mut cmd = repo.agent(&server, args);
    cmd.env("PATH", path);
    run(&mut cmd)
}

#[test]
fn pr_pushes_branch_log_and_notes_and_calls_gh_once() {
    let repo = TestRepo::new();
    let bare = with_remote(&repo);
    let id = work(&repo);
    let before = user_state(&repo);
    let (bin, log) = gh_double(repo.root());
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());

    let out = pr(&repo, &path, &["pr", &id]);
    out.assert_code(0);
    let tip = repo.git(&["rev-parse", &format!("agent/{id}")]);
    let refs = remote_refs(&bare);
    assert!(
        refs.contains(&format!("refs/heads/agent/{id} {}", tip.trim())),
        "{refs}"
    );
    assert!(
        refs.contains(&format!("refs/agent/sessions/{id} ")),
        "{refs}"
    );
    assert!(refs.contains("refs/notes/agent "), "{refs}");

    let calls = fs::read_to_string(&log).unwrap();
    assert_eq!(
        calls.matches("--\n").count(),
        1,
        "gh is called exactly once:\n{calls}"
    );
    let args: Vec<&str> = calls.lines().filter(|l| *l != "--").collect();
    let body_file = repo.path().join(format!(".git/agent/pr/{id}.md"));
    assert_eq!(
        args,
        [
            "pr",
            "create",
            "--title",
            "Add alpha and shout two",
            "--body-file",
            body_file.to_str().unwrap(),
            "--base",
            "main",
            "--head",
            &format!("agent/{id}"),
        ]
    );
    let body = fs::read_to_string(&body_file).unwrap();
    for needle in [
        "> Add alpha and shout two",
        "> second line of the prompt",
        "## Summary\n\nAdded a.txt and shouted two.",
        "## Checks run\n\n- `echo checked`: passed",
        "a.txt",
        "file.txt",
        &format!("Session `{id}`"),
    ] {
        assert!(body.contains(needle), "{needle:?} missing from:\n{body}");
    }
    let steps: Vec<&str> = body
        .split("## Steps\n\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(steps.len(), 2, "one line per step:\n{body}");
    assert!(
        steps[0].starts_with("1. `") && steps[0].ends_with("Add a.txt with the greeting."),
        "{steps:?}"
    );
    assert!(
        steps[1].starts_with("2. `") && steps[1].ends_with("Shout two, as asked."),
        "{steps:?}"
    );
    assert_eq!(
        user_state(&repo),
        before,
        "pr changes nothing of the user's"
    );
    fsck(&repo);
}

#[test]
fn pr_without_a_forge_cli_prints_the_body_file_and_stdout_pushes_nothing() {
    let repo = TestRepo::new();
    let bare = with_remote(&repo);
    let id = work(&repo);
    let before = user_state(&repo);
    // --stdout: a request-pull message, nothing pushed.
    let refs_before = remote_refs(&bare);
    let out = agent(&repo, &["pr", "--stdout", &id]);
    out.assert_code(0);
    let text = out.stdout();
    for needle in [
        "The following changes since commit",
        "are available in the Git repository at:",
        &format!("{} agent/{id}", bare.display()),
        "for you to fetch changes up to",
        "Add alpha and shout two",
        "## Steps",
        "Test User (",
        // The test model has no price: the footer says so rather than guess.
        " out · cost unknown · log:",
    ] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }
    assert_eq!(remote_refs(&bare), refs_before, "--stdout pushes nothing");

    // No gh, glab or tea on PATH (only git and sh): pushed, and the body file's path on stdout.
    let bin = repo.root().join("only-git");
    fs::create_dir_all(&bin).unwrap();
    for tool in ["git", "sh"] {
        let real = String::from_utf8(
            std::process::Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        std::os::unix::fs::symlink(real.trim(), bin.join(tool)).unwrap();
    }
    let out = pr(
        &repo,
        bin.to_str().unwrap(),
        &["pr", &id, "--branch", "feature/alpha"],
    );
    out.assert_code(0);
    let file = out.stdout().trim();
    assert!(file.ends_with(&format!(".git/agent/pr/{id}.md")), "{out}");
    assert!(fs::read_to_string(file).unwrap().contains("## Summary"));
    assert!(out.stderr().contains("no gh, glab or tea on PATH"), "{out}");
    assert!(remote_refs(&bare).contains("refs/heads/feature/alpha "));
    assert_eq!(user_state(&repo), before);
    // A bad branch name is a usage error before anything happens.
    let bad = agent(&repo, &["pr", &id, "--branch", "bad..name"]);
    bad.assert_code(2);
    fsck(&repo);
}

#[test]
fn pr_works_on_a_session_pulled_from_another_clone() {
    let a = TestRepo::new();
    let bare = with_remote(&a);
    let id = work(&a);
    agent(&a, &["push"]).assert_code(0);
    let b = TestRepo::new();
    b.git(&["remote", "add", "origin", bare.to_str().unwrap()]);
    b.git(&["fetch", "-q", "origin"]);
    b.git(&["branch", "-q", "--set-upstream-to=origin/main", "main"]);
    agent(&b, &["pull"]).assert_code(0);
    let before = user_state(&b);
    let out = agent(&b, &["pr", "--stdout", &id]);
    out.assert_code(0);
    assert!(
        out.stdout().contains("Added a.txt and shouted two."),
        "{out}"
    );
    let (bin, log) = gh_double(b.root());
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    pr(&b, &path, &["pr", &id, "--draft", "--title", "From B"]).assert_code(0);
    let calls = fs::read_to_string(&log).unwrap();
    assert!(
        calls.contains("From B\n") && calls.contains("--draft\n"),
        "{calls}"
    );
    assert_eq!(user_state(&b), before);
    fsck(&b);
}

/// `--remote` and `--base` choose where the branch goes and what the pull request goes into: the other
/// remote gets the branch, the log, the notes and the review records; origin gets nothing; gh is asked for
/// the base given.
#[test]
fn pr_to_another_remote_and_base_pushes_there_with_the_review_records() {
    let repo = TestRepo::new();
    let origin = with_remote(&repo);
    let fork = repo.root().join("fork.git");
    repo.git(&["init", "-q", "--bare", "-b", "main", fork.to_str().unwrap()]);
    repo.git(&["remote", "add", "fork", fork.to_str().unwrap()]);
    let id = work(&repo);
    agent(
        &repo,
        &[
            "review",
            &id,
            "--leave",
            "file.txt",
            "--comment",
            "keep two quiet",
        ],
    )
    .assert_code(0);
    let origin_before = remote_refs(&origin);
    let before = user_state(&repo);
    let (bin, log) = gh_double(repo.root());
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());

    let out = pr(
        &repo,
        &path,
        &["pr", &id, "--remote", "fork", "--base", "develop"],
    );
    out.assert_code(0);
    let refs = remote_refs(&fork);
    let tip = repo.git(&["rev-parse", &format!("agent/{id}")]);
    for needle in [
        format!("refs/heads/agent/{id} {}", tip.trim()),
        format!("refs/agent/sessions/{id} "),
        "refs/notes/agent ".to_owned(),
        "refs/notes/agent-review ".to_owned(),
    ] {
        assert!(
            refs.contains(&needle),
            "{needle} missing on the fork:\n{refs}"
        );
    }
    assert_eq!(remote_refs(&origin), origin_before, "origin got nothing");
    let calls = fs::read_to_string(&log).unwrap();
    let args: Vec<&str> = calls.lines().filter(|l| *l != "--").collect();
    let base = args.iter().position(|a| *a == "--base").expect("--base");
    assert_eq!(args[base + 1], "develop", "{calls}");
    assert_eq!(calls.matches("--\n").count(), 1, "{calls}");
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}
