//! `git agent accept` hardened (issue 17, defects 2, 4, 9, 11, 14) and `accept --commit --series` (issue 13),
//! each test ending on the user's state (HEAD, branches, index, working tree bytes and modes, stash) and
//! `git fsck --strict`.
//!
//! Session branches with contents the agent's tools refuse to make (links out of the repository, files under a
//! submodule, big files) are crafted with plain git on top of a real scripted session (`common::landing`).

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::landing::{agent, assert_only, craft, session};
use crate::common::{call, fsck, run, trailer, user_state, Reply, TestRepo};

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

fn hook(repo: &TestRepo, name: &str, script: &str) {
    let path = repo.path().join(".git/hooks").join(name);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A session that did nothing (its branch sits at the base), to craft steps on.
fn empty_session(repo: &TestRepo) -> String {
    session(repo, "look around", vec![Reply::text("Nothing to change.")])
}

fn numbered(lines: usize) -> String {
    (0..lines).map(|i| format!("line {i}\n")).collect()
}

/// Defect 2, as the sweep found it: `kill -9` while accept writes a big file both sides changed. The file
/// must hold the user's bytes or the merge, with its mode, never a prefix; `--abort` then restores the rest.
#[test]
fn kill_minus_9_while_writing_a_big_file_never_leaves_it_half_written() {
    let repo = TestRepo::new();
    let body = numbered(600_000); // ~7 MB
    repo.write("big.txt", &body);
    repo.commit_all("big file");
    let id = empty_session(&repo);
    craft(&repo, &id, 1, "edit the head of big.txt", |dir| {
        fs::write(dir.join("big.txt"), format!("AGENT\n{body}")).unwrap();
    });
    let mine = format!("{body}USER\n");
    repo.write("big.txt", &mine);
    fs::set_permissions(
        repo.path().join("big.txt"),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let merged = format!("AGENT\n{body}USER\n");
    let before = user_state(&repo);
    let big = repo.path().join("big.txt");
    let server = crate::common::Server::start(vec![]);
    let mut caught = false;
    for _ in 0..5 {
        let mut child = repo
            .agent(&server, &["accept", &id])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        // Kill the moment a write starts: the file changes size (a write in place) or a temp file appears.
        let killed = loop {
            if child.try_wait().unwrap().is_some() {
                break false;
            }
            let size = fs::symlink_metadata(&big).map(|m| m.len()).unwrap_or(0);
            let temp = fs::read_dir(repo.path()).unwrap().any(|e| {
                let name = e.unwrap().file_name();
                name.to_string_lossy().starts_with(".big.txt.")
            });
            if size != mine.len() as u64 || temp {
                child.kill().unwrap();
                child.wait().unwrap();
                break true;
            }
            assert!(Instant::now() < deadline, "accept hung");
        };
        if !killed {
            // It finished between two polls: start over from the user's version.
            assert_eq!(fs::read_to_string(&big).unwrap(), merged);
            fs::write(&big, &mine).unwrap();
            fs::set_permissions(&big, fs::Permissions::from_mode(0o600)).unwrap();
            continue;
        }
        caught = true;
        let now = fs::read(&big).unwrap();
        assert!(
            now == mine.as_bytes() || now == merged.as_bytes(),
            "big.txt is neither yours nor the merge after kill -9: {} bytes of {}",
            now.len(),
            mine.len()
        );
        assert_eq!(mode(&big), 0o600, "the mode is kept");
        break;
    }
    assert!(caught, "accept was never caught writing");
    // The interrupted accept is refused a second time until it is finished or undone; --abort undoes it.
    let again = agent(&repo, &["accept", &id]);
    if repo.path().join(".git/agent/landing/record.json").exists() {
        again.assert_code(1);
        assert!(
            again.first_stderr_line().contains("was interrupted")
                && again.stderr().contains("--continue")
                && again.stderr().contains("--abort"),
            "{again}"
        );
        agent(&repo, &["accept", "--abort"]).assert_code(0);
        assert_eq!(user_state(&repo), before);
    } else {
        // Killed before the landing began: nothing was written, and a new accept simply runs.
        again.assert_code(0);
    }
    fsck(&repo);
}

/// Defect 2 at every durable write: killed at each crash point of accept, every path holds the version
/// before or after, and `--continue` finishes / `--abort` undoes exactly.
#[test]
fn kill_minus_9_at_every_point_of_accept_then_continue_or_abort() {
    let setup = || {
        let repo = TestRepo::new();
        repo.write("merge.txt", "1\n2\n3\n4\n5\n6\n7\n8\n9\n");
        repo.write("gone.txt", "to be deleted\n");
        repo.commit_all("files");
        let id = empty_session(&repo);
        craft(&repo, &id, 1, "several changes", |dir| {
            fs::write(dir.join("merge.txt"), "one\n2\n3\n4\n5\n6\n7\n8\n9\n").unwrap();
            fs::write(dir.join("file.txt"), "one\nTWO\nthree\n").unwrap();
            fs::remove_file(dir.join("gone.txt")).unwrap();
            fs::create_dir_all(dir.join("new/dir")).unwrap();
            fs::write(dir.join("new/dir/n.txt"), "new\n").unwrap();
            symlink("../README.md", dir.join("new/readme")).unwrap();
        });
        repo.write("merge.txt", "1\n2\n3\n4\n5\n6\n7\n8\nnine\n");
        fs::set_permissions(
            repo.path().join("merge.txt"),
            fs::Permissions::from_mode(0o640),
        )
        .unwrap();
        (repo, id)
    };
    // The state a clean accept gives.
    let (repo, id) = setup();
    let before = user_state(&repo);
    agent(&repo, &["accept", &id]).assert_code(0);
    let after = user_state(&repo);
    assert_eq!(
        fs::read_to_string(repo.path().join("merge.txt")).unwrap(),
        "one\n2\n3\n4\n5\n6\n7\n8\nnine\n"
    );
    assert_eq!(mode(&repo.path().join("merge.txt")), 0o640);
    assert_eq!(
        fs::read_link(repo.path().join("new/readme")).unwrap(),
        Path::new("../README.md")
    );
    assert!(!repo.path().join(".git/agent/landing").exists());
    drop(repo);

    let mut points = 0;
    for at in 1.. {
        let (repo, id) = setup();
        assert_eq!(user_state(&repo), before);
        let server = crate::common::Server::start(vec![]);
        let mut cmd = repo.agent(&server, &["accept", &id]);
        cmd.env("GIT_AGENT_CRASH_AT", at.to_string());
        let out = run(&mut cmd);
        if out.status.signal().is_none() {
            out.assert_code(0);
            assert_eq!(user_state(&repo), after, "uninterrupted at {at}");
            break;
        }
        assert_eq!(out.status.signal(), Some(9), "{out}");
        points += 1;
        let recorded = repo.path().join(".git/agent/landing/record.json").exists();
        if !recorded {
            // Killed before the landing began, or after it ended.
            let now = user_state(&repo);
            assert!(now == before || now == after, "crash point {at}:\n{now}");
            continue;
        }
        let refused = agent(&repo, &["accept", &id]);
        refused.assert_code(1);
        assert!(
            refused.first_stderr_line().contains("was interrupted"),
            "{refused}"
        );
        if at % 2 == 1 {
            agent(&repo, &["accept", "--abort"]).assert_code(0);
            assert_eq!(user_state(&repo), before, "abort after crash point {at}");
        } else {
            agent(&repo, &["accept", "--continue"]).assert_code(0);
            assert_eq!(user_state(&repo), after, "continue after crash point {at}");
        }
        assert!(!repo.path().join(".git/agent/landing").exists());
        fsck(&repo);
    }
    assert!(points >= 8, "only {points} crash points in accept");
}

/// Defect 4: nothing is written through a link; links arrive as links; a type change keeps yours.
#[test]
fn accept_never_writes_through_a_symlink() {
    let repo = TestRepo::new();
    let outside = repo.root().join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("target.txt"), "outside\n").unwrap();
    fs::write(outside.join("mine.txt"), "outside too\n").unwrap();
    symlink(outside.join("target.txt"), repo.path().join("out-link")).unwrap();
    repo.write("docs/guide.md", "guide\n");
    repo.commit_all("a link out of the repository, docs");
    let id = empty_session(&repo);
    craft(&repo, &id, 1, "links and files", |dir| {
        // The agent replaced the committed link by a file, edited file.txt and docs/guide.md, added a link.
        fs::remove_file(dir.join("out-link")).unwrap();
        fs::write(dir.join("out-link"), "agent's file\n").unwrap();
        fs::write(dir.join("file.txt"), "one\ntwo\nthree\nfour\n").unwrap();
        fs::write(dir.join("docs/guide.md"), "guide, edited\n").unwrap();
        symlink("README.md", dir.join("readme-link")).unwrap();
    });
    // The user replaced file.txt by a link to a file outside, and docs/ by a link to the outside folder.
    fs::remove_file(repo.path().join("file.txt")).unwrap();
    symlink(outside.join("mine.txt"), repo.path().join("file.txt")).unwrap();
    fs::copy(repo.path().join("docs/guide.md"), outside.join("guide.md")).unwrap();
    fs::remove_dir_all(repo.path().join("docs")).unwrap();
    symlink(&outside, repo.path().join("docs")).unwrap();
    let before = user_state(&repo);

    let out = agent(&repo, &["accept", &id]);
    out.assert_code(1);
    for kept in [
        "kept      file.txt (yours; a file on one side, a symlink",
        "kept      out-link (yours; a file on one side, a symlink",
        "kept      docs/guide.md (yours; docs is a symbolic link",
    ] {
        assert!(out.stderr().contains(kept), "{kept}\n{out}");
    }
    assert_eq!(
        fs::read_to_string(outside.join("target.txt")).unwrap(),
        "outside\n"
    );
    assert_eq!(
        fs::read_to_string(outside.join("mine.txt")).unwrap(),
        "outside too\n"
    );
    assert_eq!(
        fs::read_to_string(outside.join("guide.md")).unwrap(),
        "guide\n"
    );
    assert_eq!(
        fs::read_link(repo.path().join("readme-link")).unwrap(),
        Path::new("README.md"),
        "a link on the branch arrives as a link"
    );
    assert_only(&repo, &before, &["readme-link"], &[]);
    fsck(&repo);
}

/// Defect 9: a branch whose commit replaced a submodule's gitlink by files: accept never writes into the
/// submodule's checkout and never moves it; the rest lands.
#[test]
fn accept_leaves_submodules_alone() {
    let repo = TestRepo::new();
    crate::common::add_submodule(&repo);
    let id = empty_session(&repo);
    craft(&repo, &id, 1, "write under the submodule path", |dir| {
        let d = dir.to_str().unwrap();
        repo.git(&["-C", d, "rm", "-q", "--cached", "sub"]);
        fs::create_dir_all(dir.join("sub")).unwrap();
        fs::write(dir.join("sub/x.txt"), "agent's file in the submodule\n").unwrap();
        fs::write(dir.join("README.md"), "# demo, edited\n").unwrap();
    });
    let sub_state = repo.git(&[
        "-C",
        "sub",
        "status",
        "--porcelain",
        "--untracked-files=all",
    ]);
    let sub_head = repo.git(&["-C", "sub", "rev-parse", "HEAD"]);
    let before = user_state(&repo);

    let out = agent(&repo, &["accept", &id]);
    out.assert_code(1);
    assert!(
        out.stderr()
            .contains("kept      sub/x.txt (yours; inside a submodule"),
        "{out}"
    );
    assert!(
        out.stderr().contains("kept      sub (yours; a submodule"),
        "{out}"
    );
    assert!(out.stderr().contains("updated   README.md"), "{out}");
    assert!(!repo.path().join("sub/x.txt").exists());
    assert_eq!(
        repo.git(&[
            "-C",
            "sub",
            "status",
            "--porcelain",
            "--untracked-files=all"
        ]),
        sub_state
    );
    assert_eq!(repo.git(&["-C", "sub", "rev-parse", "HEAD"]), sub_head);
    assert_eq!(
        fs::read_to_string(repo.path().join("README.md")).unwrap(),
        "# demo, edited\n"
    );
    assert_only(&repo, &before, &["README.md", "sub"], &[]);
    fsck(&repo);
}

/// Defect 11: a second accept neither nests conflict markers nor rewrites a merge it already made.
#[test]
fn accept_twice_never_nests_conflict_markers() {
    let repo = TestRepo::new();
    repo.write("file.txt", "1\n2\n3\n4\n5\n6\n7\n8\n9\n");
    repo.write("other.txt", "a\nb\nc\nd\ne\nf\ng\nh\n");
    repo.commit_all("nine lines");
    let edit = |path: &str, old: &str, new: &str| {
        call(
            "edit_file",
            json!({"path": path, "old_string": old, "new_string": new}),
        )
    };
    let id = session(
        &repo,
        "spell out two, shout a",
        vec![
            Reply::tool_calls(vec![edit("file.txt", "2\n", "two\n")]),
            Reply::tool_calls(vec![edit("other.txt", "a\n", "A\n")]),
            Reply::text("done"),
        ],
    );
    repo.write("file.txt", "1\nTWO\n3\n4\n5\n6\n7\n8\n9\n");
    repo.write("other.txt", "a\nb\nc\nd\ne\nf\ng\nH\n");
    let out = agent(&repo, &["accept", &id]);
    out.assert_code(1);
    let marked = fs::read(repo.path().join("file.txt")).unwrap();
    assert!(String::from_utf8_lossy(&marked).contains("<<<<<<< yours\nTWO\n"));
    assert_eq!(
        fs::read_to_string(repo.path().join("other.txt")).unwrap(),
        "A\nb\nc\nd\ne\nf\ng\nH\n"
    );
    let before = user_state(&repo);

    let again = agent(&repo, &["accept", &id]);
    again.assert_code(1);
    assert!(
        again
            .first_stderr_line()
            .starts_with("error: file.txt still has the conflict markers of an earlier accept"),
        "{again}"
    );
    assert_eq!(user_state(&repo), before, "nothing written");
    assert_eq!(fs::read(repo.path().join("file.txt")).unwrap(), marked);

    // Resolved: the clean merge of other.txt is found already there, not merged a second time.
    repo.write("file.txt", "1\ntwo\n3\n4\n5\n6\n7\n8\n9\n");
    let before = user_state(&repo);
    let third = agent(&repo, &["accept", &id]);
    third.assert_code(0);
    assert!(third.stderr().contains("unchanged file.txt"), "{third}");
    assert!(third.stderr().contains("unchanged other.txt"), "{third}");
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

/// Defect 14: a pre-commit hook refuses `accept --commit`: the index is exactly as it was (the user's staged
/// work staged, the unstaged edits unstaged), the files are in the working tree, and the message says so.
#[test]
fn a_refused_commit_leaves_the_index_as_it_was() {
    let repo = TestRepo::new();
    repo.write("file.txt", "1\n2\n3\n4\n5\n6\n7\n8\n9\n");
    repo.write("staged.txt", "old\n");
    repo.commit_all("files");
    let id = session(
        &repo,
        "spell out two",
        vec![
            Reply::tool_calls(vec![call(
                "edit_file",
                json!({"path": "file.txt", "old_string": "2\n", "new_string": "two\n"}),
            )]),
            Reply::text("done"),
        ],
    );
    repo.write("staged.txt", "staged by me\n");
    repo.git(&["add", "staged.txt"]);
    repo.write("file.txt", "1\n2\n3\n4\n5\n6\n7\n8\nmine, unstaged\n");
    hook(&repo, "pre-commit", "echo 'lint failed' >&2\nexit 1");
    let before = user_state(&repo);

    let out = agent(&repo, &["accept", "--commit", &id]);
    out.assert_code(1);
    assert!(
        out.stderr().contains("lint failed"),
        "the hook spoke: {out}"
    );
    let error = out
        .stderr()
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_default();
    assert!(
        error.contains("uncommitted; your index is as it was"),
        "{out}"
    );
    assert!(out.stderr().contains("  uncommitted  file.txt"), "{out}");
    assert_eq!(
        fs::read_to_string(repo.path().join("file.txt")).unwrap(),
        "1\ntwo\n3\n4\n5\n6\n7\n8\nmine, unstaged\n"
    );
    assert_only(&repo, &before, &["file.txt"], &[]);
    assert_eq!(
        repo.git(&["diff", "--cached", "--name-only"]),
        "staged.txt\n"
    );
    // Without the hook the same command commits the session's change alone: the user's unstaged line in
    // file.txt stays in the working tree, uncommitted, and the staged work stays staged.
    fs::remove_file(repo.path().join(".git/hooks/pre-commit")).unwrap();
    agent(&repo, &["accept", "--commit", &id]).assert_code(0);
    assert_eq!(
        repo.git(&["show", "--name-only", "--format=", "HEAD"]),
        "file.txt\n"
    );
    assert_eq!(
        repo.git(&["show", "HEAD:file.txt"]),
        "1\ntwo\n3\n4\n5\n6\n7\n8\n9\n",
        "the commit holds the agent's line, not the user's"
    );
    assert_eq!(trailer(&repo, "HEAD", "Agent-Session"), id);
    assert_eq!(
        fs::read_to_string(repo.path().join("file.txt")).unwrap(),
        "1\ntwo\n3\n4\n5\n6\n7\n8\nmine, unstaged\n"
    );
    assert_eq!(
        repo.git(&["diff", "--cached", "--name-only"]),
        "staged.txt\n"
    );
    assert_eq!(
        repo.git(&["status", "--porcelain"]),
        " M file.txt\nM  staged.txt\n"
    );
    assert!(repo
        .git(&["diff", "file.txt"])
        .contains("-9\n+mine, unstaged\n"));
    fsck(&repo);
}

/// The squash commit is the session's change applied to HEAD: work of the user's that step 0 captured stays
/// uncommitted, and a change that builds on such work is refused with nothing changed.
#[test]
fn a_squash_commit_never_takes_the_users_uncommitted_work() {
    let repo = TestRepo::new();
    let lines = "1\n2\n3\n4\n5\n6\n7\n8\n9\n".to_owned();
    repo.write("a.txt", &lines);
    repo.write("b.txt", &lines);
    repo.commit_all("two files");
    // Uncommitted when the session starts (its step 0): a line of each file.
    let a_wip = lines.replace("9\n", "nine (mine)\n");
    let b_wip = lines.replace("5\n", "five (mine)\n");
    repo.write("a.txt", &a_wip);
    repo.write("b.txt", &b_wip);
    let edit = |path: &str, old: &str, new: &str| {
        call(
            "edit_file",
            json!({"path": path, "old_string": old, "new_string": new}),
        )
    };
    let id = session(
        &repo,
        "shout",
        vec![
            Reply::tool_calls(vec![edit("a.txt", "1\n2\n", "ONE\n2\n")]),
            Reply::tool_calls(vec![edit("b.txt", "five (mine)", "FIVE (mine)")]),
            Reply::text("done"),
        ],
    );
    let before = user_state(&repo);

    // b.txt's change rewrites the user's uncommitted line: it cannot be committed without it.
    let out = agent(&repo, &["accept", "--commit", &id]);
    out.assert_code(1);
    assert!(
        out.first_stderr_line()
            .contains("only applies on top of your uncommitted changes")
            && out.first_stderr_line().contains("nothing was changed"),
        "{out}"
    );
    assert!(out.stderr().contains("  uncommitted  b.txt"), "{out}");
    assert!(!out.stderr().contains("uncommitted  a.txt"), "{out}");
    assert_eq!(user_state(&repo), before, "nothing was changed");

    // Once the user has committed that line, the session lands; a.txt's line stays the user's, uncommitted.
    repo.git(&["commit", "-q", "-m", "mine", "b.txt"]);
    let mine = repo.git(&["rev-parse", "HEAD"]);
    let before = user_state(&repo);
    let out = agent(&repo, &["accept", "--commit", &id]);
    out.assert_code(0);
    assert_eq!(repo.git(&["rev-parse", "HEAD~1"]), mine);
    assert_eq!(
        repo.git(&["show", "HEAD:a.txt"]),
        lines.replacen("1\n", "ONE\n", 1)
    );
    assert_eq!(
        repo.git(&["show", "HEAD:b.txt"]),
        lines.replace("5\n", "FIVE (mine)\n")
    );
    assert_eq!(
        fs::read_to_string(repo.path().join("a.txt")).unwrap(),
        a_wip.replacen("1\n", "ONE\n", 1)
    );
    assert_eq!(repo.git(&["status", "--porcelain"]), " M a.txt\n");
    let added: Vec<String> = repo
        .git(&["diff"])
        .lines()
        .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        added,
        ["+nine (mine)"],
        "the user's line is left uncommitted"
    );
    assert_only(
        &repo,
        &before,
        &["a.txt", "b.txt"],
        &["HEAD", "branches", "index"],
    );
    fsck(&repo);
}

/// `--index` stages exactly the accepted paths; HEAD and branches stay.
#[test]
fn accept_index_stages_the_accepted_files() {
    let repo = TestRepo::new();
    let id = session(
        &repo,
        "add alpha",
        vec![
            Reply::tool_calls(vec![call(
                "write_file",
                json!({"path": "a.txt", "content": "alpha\n"}),
            )]),
            Reply::text("done"),
        ],
    );
    repo.write("mine.txt", "mine\n");
    let before = user_state(&repo);
    agent(&repo, &["accept", "--index", &id]).assert_code(0);
    assert_eq!(repo.git(&["diff", "--cached", "--name-only"]), "a.txt\n");
    assert_only(&repo, &before, &["a.txt"], &["index"]);
    assert_eq!(
        repo.git(&["status", "--porcelain"]),
        "A  a.txt\n?? mine.txt\n"
    );
    fsck(&repo);
}

/// `accept --commit --series`: one commit per agent step with the step's reason, trailers and attribution,
/// the user's hook running for each, step 0 (the user's own work) never committed as the agent's.
#[test]
fn accept_series_makes_one_commit_per_step() {
    let repo = TestRepo::new();
    repo.write("wip.md", "my own work in progress\n");
    let id = session(
        &repo,
        "add alpha and shout two",
        vec![
            Reply::text_and_tool_calls(
                "Add a.txt with the greeting.",
                vec![call(
                    "write_file",
                    json!({"path": "a.txt", "content": "alpha\n"}),
                )],
            ),
            Reply::text_and_tool_calls(
                "Shout two, because the spec says so.",
                vec![call(
                    "edit_file",
                    json!({"path": "file.txt", "old_string": "two", "new_string": "TWO"}),
                )],
            ),
            Reply::text("Done."),
        ],
    );
    hook(
        &repo,
        "pre-commit",
        "echo ran >> \"$(git rev-parse --git-dir)/pre-commit-runs\"",
    );
    let head = repo.git(&["rev-parse", "HEAD"]);
    let before = user_state(&repo);

    // Refused while a file of the session has uncommitted changes of the user's.
    repo.write("file.txt", "one\ntwo\nthree\nmine\n");
    let dirty = user_state(&repo);
    let out = agent(&repo, &["accept", "--commit", "--series", &id]);
    out.assert_code(1);
    assert!(
        out.first_stderr_line().contains("1 file that session")
            && out.first_stderr_line().contains("nothing was changed"),
        "{out}"
    );
    assert!(out.stderr().contains("uncommitted  file.txt"), "{out}");
    assert_eq!(user_state(&repo), dirty);
    repo.write("file.txt", "one\ntwo\nthree\n");
    assert_eq!(user_state(&repo), before);

    let out = agent(&repo, &["accept", "--commit", "--series", &id]);
    out.assert_code(0);
    let commits = repo.git(&["rev-list", "--reverse", &format!("{}..HEAD", head.trim())]);
    let commits: Vec<&str> = commits.lines().collect();
    assert_eq!(commits.len(), 2, "one commit per agent step:\n{out}");
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", commits[0]]).trim(),
        "Add a.txt with the greeting."
    );
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", commits[1]]).trim(),
        "Shout two, because the spec says so."
    );
    for (n, c) in commits.iter().enumerate() {
        assert_eq!(trailer(&repo, c, "Agent-Session"), id);
        assert_eq!(trailer(&repo, c, "Agent-Step"), (n + 1).to_string());
        assert_eq!(
            trailer(&repo, c, "Co-authored-by"),
            "git-agent (openai/test-model) <git-agent@noreply.invalid>"
        );
    }
    assert_eq!(
        repo.git(&["show", "--name-only", "--format=", commits[0]]),
        "a.txt\n"
    );
    assert_eq!(
        repo.git(&["show", "--name-only", "--format=", commits[1]]),
        "file.txt\n"
    );
    assert_eq!(
        fs::read_to_string(repo.path().join(".git/pre-commit-runs")).unwrap(),
        "ran\nran\n",
        "the user's hook ran for each commit"
    );
    assert_eq!(
        repo.git(&["status", "--porcelain"]),
        "?? wip.md\n",
        "step 0 (the user's work) is neither committed nor lost"
    );
    assert_only(
        &repo,
        &before,
        &["a.txt", "file.txt"],
        &["HEAD", "branches", "index"],
    );
    // Run again: every step is already on the branch.
    let again = agent(&repo, &["accept", "--commit", "--series", &id]);
    again.assert_code(0);
    assert!(
        again.stderr().contains("step 2: already on your branch"),
        "{again}"
    );
    assert_eq!(
        repo.git(&["rev-list", "--count", &format!("{}..HEAD", head.trim())]),
        "2\n"
    );
    fsck(&repo);
}

/// A file one step changes and a later step puts back is not in the session's change as a whole, but the
/// first step's commit would take it as the working tree has it: uncommitted work of the user's there refuses
/// the series too, with nothing changed.
#[test]
fn series_refuses_over_uncommitted_work_in_a_file_a_step_changes_and_a_later_one_puts_back() {
    let repo = TestRepo::new();
    let lines = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
    repo.write("x.txt", lines);
    repo.commit_all("x");
    let edit = |old: &str, new: &str| {
        call(
            "edit_file",
            json!({"path": "x.txt", "old_string": old, "new_string": new}),
        )
    };
    let id = session(
        &repo,
        "try and undo",
        vec![
            Reply::text_and_tool_calls(
                "Shout one.",
                vec![
                    edit("1\n2\n", "ONE\n2\n"),
                    call("write_file", json!({"path": "y.txt", "content": "y\n"})),
                ],
            ),
            Reply::text_and_tool_calls("Put one back.", vec![edit("ONE\n2\n", "1\n2\n")]),
            Reply::text("Done."),
        ],
    );
    repo.write("x.txt", &lines.replace("9\n", "nine (mine)\n"));
    let before = user_state(&repo);
    let out = agent(&repo, &["accept", "--commit", "--series", &id]);
    out.assert_code(1);
    assert!(
        out.first_stderr_line().contains("nothing was changed"),
        "{out}"
    );
    assert!(out.stderr().contains("  uncommitted  x.txt"), "{out}");
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

/// `attribution = "none"` leaves the co-author out; a hook refusing the second step stops the series with
/// the first committed and the index as it was.
#[test]
fn series_attribution_none_and_a_hook_refusing_a_step() {
    let repo = TestRepo::new();
    let config = repo.root().join("home/config.toml");
    fs::write(&config, "attribution = \"none\"\n").unwrap();
    let id = session(
        &repo,
        "two files",
        vec![
            Reply::text_and_tool_calls(
                "First a.",
                vec![call(
                    "write_file",
                    json!({"path": "a.txt", "content": "a\n"}),
                )],
            ),
            Reply::text_and_tool_calls(
                "Then b.",
                vec![call(
                    "write_file",
                    json!({"path": "b.txt", "content": "b\n"}),
                )],
            ),
            Reply::text("Done."),
        ],
    );
    hook(
        &repo,
        "pre-commit",
        "if git diff --cached --name-only | grep -q b.txt; then echo 'no b' >&2; exit 1; fi",
    );
    let head = repo.git(&["rev-parse", "HEAD"]);
    let before = user_state(&repo);
    let server = crate::common::Server::start(vec![]);
    let out = run(repo
        .agent(&server, &["accept", "--commit", "--series", &id])
        .env("GIT_AGENT_CONFIG", &config));
    out.assert_code(1);
    assert!(
        out.stderr().contains("error: step 2: `git commit` failed"),
        "{out}"
    );
    assert!(out.stderr().contains("uncommitted  b.txt"), "{out}");
    let commits = repo.git(&["rev-list", &format!("{}..HEAD", head.trim())]);
    assert_eq!(commits.lines().count(), 1);
    assert_eq!(repo.git(&["log", "-1", "--format=%s"]).trim(), "First a.");
    assert_eq!(trailer(&repo, "HEAD", "Co-authored-by"), "");
    assert_eq!(trailer(&repo, "HEAD", "Agent-Session"), id);
    assert_eq!(repo.git(&["diff", "--cached", "--name-only"]), "");
    assert_eq!(
        fs::read_to_string(repo.path().join("b.txt")).unwrap(),
        "b\n"
    );
    assert_only(
        &repo,
        &before,
        &["a.txt", "b.txt"],
        &["HEAD", "branches", "index"],
    );
    assert_eq!(repo.git(&["ls-files", "b.txt"]), "", "b.txt is not staged");
    fsck(&repo);
}
