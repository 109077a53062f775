//! A session's new git objects are written as packs, not as one loose file (and often a fan-out directory)
//! each: every new inode costs kernel time on a file system that just deleted many files (issue 29). Checked
//! with plain git: the objects are readable, `git fsck --strict` and `git verify-pack` are clean.

use std::fs;
use std::path::Path;

use serde_json::json;

use crate::common::{call, fsck, session_id, Reply, Server, TestRepo};

/// The loose object files under `.git/objects/??/`.
fn loose_objects(repo: &TestRepo) -> usize {
    let objects = repo.path().join(".git/objects");
    let Ok(dirs) = fs::read_dir(&objects) else {
        return 0;
    };
    dirs.filter_map(Result::ok)
        .filter(|d| d.file_name().len() == 2)
        .filter_map(|d| fs::read_dir(d.path()).ok())
        .map(|files| files.count())
        .sum()
}

/// The pack indexes under `.git/objects/pack/`.
fn pack_indexes(repo: &TestRepo) -> Vec<String> {
    let pack = repo.path().join(".git/objects/pack");
    let mut found: Vec<String> = fs::read_dir(pack)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path().to_string_lossy().into_owned())
                .filter(|p| p.ends_with(".idx"))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// A 3-step session on the user's work in progress (so step 0 captures it): a write, an edit, "done".
fn run_session(repo: &TestRepo, env: &[(&str, &str)], big: Option<&str>) -> String {
    repo.write("file.txt", "one\ntwo\nthree\nfour (the user's)\n");
    repo.write("notes.txt", "an untracked note\n");
    let mut replies = vec![
        Reply::tool_calls(vec![call(
            "write_file",
            json!({"path": "new.txt", "content": "written by the agent\n"}),
        )]),
        Reply::tool_calls(vec![call(
            "edit_file",
            json!({"path": "new.txt", "old_string": "written", "new_string": "edited"}),
        )]),
    ];
    if let Some(content) = big {
        replies.push(Reply::tool_calls(vec![call(
            "write_file",
            json!({"path": "big.txt", "content": content}),
        )]));
    }
    replies.push(Reply::text("done"));
    let server = Server::start(replies);
    let mut cmd = repo.agent(&server, &["ask", "write new.txt"]);
    for (name, value) in env {
        cmd.env(name, value);
    }
    let out = crate::common::run(&mut cmd);
    out.assert_code(0);
    session_id(repo)
}

fn assert_readable_by_git(repo: &TestRepo, id: &str) {
    fsck(repo);
    for idx in pack_indexes(repo) {
        repo.git(&["verify-pack", &idx]);
    }
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:new.txt")]),
        "edited by the agent\n"
    );
    // Step 0 captured the user's work in progress: its commit is the branch's first.
    let first = repo.git(&["rev-list", "--reverse", &format!("main..agent/{id}")]);
    let first = first.lines().next().unwrap_or_default();
    assert!(
        repo.git(&["show", "--stat", first]).contains("notes.txt"),
        "step 0 did not capture the untracked note"
    );
    // The session log and the notes are readable too.
    repo.git(&["log", "-1", &format!("refs/agent/sessions/{id}")]);
    repo.git(&["log", "-1", "refs/notes/agent"]);
}

#[test]
fn a_session_writes_no_loose_objects() {
    let repo = TestRepo::new();
    let loose_before = loose_objects(&repo);
    let id = run_session(&repo, &[], None);
    assert_eq!(
        loose_objects(&repo),
        loose_before,
        "the session wrote loose objects"
    );
    let packs = pack_indexes(&repo);
    assert!(!packs.is_empty(), "no pack written");
    // A handful of packs (one per ref update that added objects), not one per object.
    assert!(packs.len() <= 8, "{} packs: {packs:?}", packs.len());
    assert_readable_by_git(&repo, &id);
    // A second session reads the first one's packed objects (its log, its notes) and adds its own.
    let server = Server::start(vec![Reply::text("nothing to do")]);
    let out = repo.run_agent(&server, &["ask", "--resume", &id, "anything else?"]);
    out.assert_code(0);
    fsck(&repo);
    assert_eq!(loose_objects(&repo), loose_before);
}

/// The ids of the objects in the pack whose index is `idx` (`git show-index`).
fn pack_objects(repo: &TestRepo, idx: &str) -> Vec<String> {
    let out = std::process::Command::new("git")
        .arg("show-index")
        .stdin(fs::File::open(idx).unwrap())
        .current_dir(repo.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "git show-index {idx} failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().nth(1).map(str::to_owned))
        .collect()
}

/// A step commit and the notes commit that adds its note reach the disk as one pack (two inodes fewer a
/// step, issue 29), and git reads both.
#[test]
fn a_step_and_its_note_are_one_pack() {
    let repo = TestRepo::new();
    let id = run_session(&repo, &[], None);
    let step = repo.git(&["rev-parse", &format!("agent/{id}")]);
    let notes = repo.git(&["rev-parse", "refs/notes/agent"]);
    let (step, notes) = (step.trim(), notes.trim());
    let packs: Vec<(String, Vec<String>)> = pack_indexes(&repo)
        .into_iter()
        .map(|idx| {
            let objects = pack_objects(&repo, &idx);
            (idx, objects)
        })
        .collect();
    let with_step: Vec<&String> = packs
        .iter()
        .filter(|(_, objects)| objects.iter().any(|o| o == step))
        .map(|(idx, _)| idx)
        .collect();
    assert_eq!(with_step.len(), 1, "the last step commit in {with_step:?}");
    let (_, objects) = packs.iter().find(|(idx, _)| idx == with_step[0]).unwrap();
    assert!(
        objects.iter().any(|o| o == notes),
        "the note of the last step is not in the step's pack"
    );
    assert!(repo
        .git(&["notes", "--ref=agent", "show", step])
        .contains("step 2: "));
    assert_readable_by_git(&repo, &id);
}

#[test]
fn the_loose_switch_writes_loose_objects_as_before() {
    let repo = TestRepo::new();
    let loose_before = loose_objects(&repo);
    let id = run_session(&repo, &[("GIT_AGENT_LOOSE_OBJECTS", "1")], None);
    assert!(loose_objects(&repo) > loose_before + 10);
    assert!(pack_indexes(&repo).is_empty());
    assert_readable_by_git(&repo, &id);
}

/// A file over a mebibyte is streamed to disk as it is read, not held in memory for a pack: the step's other
/// objects still go to a pack, and git reads both.
#[test]
fn a_large_file_is_written_loose_and_the_rest_packed() {
    let repo = TestRepo::new();
    let loose_before = loose_objects(&repo);
    let line = "a line of the large file, long enough to matter\n";
    let big = line.repeat((1 << 20) / line.len() + 10);
    let id = run_session(&repo, &[], Some(&big));
    assert_eq!(loose_objects(&repo), loose_before + 1);
    assert!(!pack_indexes(&repo).is_empty());
    assert_readable_by_git(&repo, &id);
    let shown = repo.git(&["show", &format!("agent/{id}:big.txt")]);
    assert!(shown == big, "big.txt differs ({} bytes)", shown.len());
    assert!(Path::new(&repo.path().join(".git/objects/pack")).is_dir());
}

/// A file past the small encoder's limit (16 KB) is deflated by zlib, in the same pack as the step's small
/// objects, which the small encoder wrote: git reads both kinds, and the pack is smaller than the file.
#[test]
fn a_pack_holds_objects_from_both_encoders() {
    let repo = TestRepo::new();
    let loose_before = loose_objects(&repo);
    let line = "a line of a middle-sized file, which zlib compresses\n";
    let middle = line.repeat((100 << 10) / line.len());
    let id = run_session(&repo, &[], Some(&middle));
    assert_eq!(loose_objects(&repo), loose_before, "written loose");
    assert_readable_by_git(&repo, &id);
    let shown = repo.git(&["show", &format!("agent/{id}:big.txt")]);
    assert!(shown == middle, "big.txt differs ({} bytes)", shown.len());
    let packed: u64 = pack_indexes(&repo)
        .iter()
        .map(|idx| std::fs::metadata(idx.replace(".idx", ".pack")).map_or(0, |m| m.len()))
        .sum();
    assert!(packed < 20_000, "the session's packs hold {packed} bytes");
}

/// In a repository shared with the group (`git init --shared=group`), the packs a session writes are
/// readable by the group as git's own would be (read-only for the owner, git's `calc_shared_perm`), even
/// under a umask that gives the group nothing.
#[test]
fn packs_in_a_shared_repository_are_readable_by_the_group() {
    use std::os::unix::fs::PermissionsExt;
    let repo = TestRepo::new();
    repo.git(&["init", "-q", "--shared=group"]);
    repo.write("file.txt", "one\ntwo\nthree\nfour (the user's)\n");
    let server = Server::start(vec![
        Reply::tool_calls(vec![call(
            "write_file",
            json!({"path": "new.txt", "content": "written by the agent\n"}),
        )]),
        Reply::text("done"),
    ]);
    let mut cmd = repo.via(
        &server,
        "sh",
        &["-c", "umask 077 && exec git agent ask 'write new.txt'"],
    );
    crate::common::run(&mut cmd).assert_code(0);
    let packs = pack_indexes(&repo);
    assert!(!packs.is_empty(), "no pack written");
    for idx in packs {
        for file in [idx.clone(), idx.replace(".idx", ".pack")] {
            let mode = fs::metadata(&file).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o440, "{file} has mode {mode:o}");
        }
    }
    fsck(&repo);
}

/// Past half of `gc.autoPackLimit` packs, sessions write loose objects: the packs they leave never bring the
/// whole-repository repack that the user's next `git commit` would start any closer (here the limit is 4, so
/// sessions stop adding packs at 2).
#[test]
fn sessions_stop_adding_packs_at_half_the_auto_pack_limit() {
    let repo = TestRepo::new();
    repo.git(&["config", "gc.autoPackLimit", "4"]);
    let first = run_session(&repo, &[], None);
    let after_first = pack_indexes(&repo).len();
    assert!(after_first >= 2, "{after_first} packs after one session");
    let loose_before = loose_objects(&repo);
    let server = Server::start(vec![
        Reply::tool_calls(vec![call(
            "write_file",
            json!({"path": "more.txt", "content": "a second step\n"}),
        )]),
        Reply::text("done"),
    ]);
    let out = repo.run_agent(&server, &["ask", "--resume", &first, "one more file"]);
    out.assert_code(0);
    assert_eq!(
        pack_indexes(&repo).len(),
        after_first,
        "the second session added packs past half the limit"
    );
    assert!(
        loose_objects(&repo) > loose_before,
        "no loose objects written"
    );
    fsck(&repo);
    assert_readable_by_git(&repo, &first);
    assert_eq!(
        repo.git(&["show", &format!("agent/{first}:more.txt")]),
        "a second step\n"
    );
}
