//! Tests against real repositories made with the git CLI in temp dirs; git is the oracle (`git fsck`,
//! `git add` + `git write-tree` on a copy of the same files).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::objects::snapshot::StepCommit;
use super::test_repo::{git_in, write, TestRepo};
use super::*;

/// The tree `git add -A` would produce for the work tree at `dir`, computed with a throwaway copy of its index so
/// nothing the user (or the checkout) sees changes.
fn git_add_tree(dir: &Path) -> String {
    let index = PathBuf::from(
        git_in(
            dir,
            &["rev-parse", "--path-format=absolute", "--git-path", "index"],
        )
        .trim(),
    );
    let scratch = std::env::temp_dir().join(format!(
        "git-agent-store-index-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::copy(&index, &scratch).unwrap();
    let with_index = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_INDEX_FILE", &scratch)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    with_index(&["add", "-A"]);
    let tree = with_index(&["write-tree"]).trim().to_owned();
    std::fs::remove_file(&scratch).unwrap();
    tree
}

/// [`Store::commit_step()`] with a fixed message, returning the commit.
fn commit(
    store: &Store,
    s: &mut Session,
    paths: &[PathBuf],
    message: &str,
) -> Result<Option<ObjectId>, StoreError> {
    store.commit_step(s, paths, message).map(|step| step.commit)
}

fn tree_of(repo: &TestRepo, commit: ObjectId) -> String {
    repo.git(&["rev-parse", &format!("{commit}^{{tree}}")])
        .trim()
        .to_owned()
}

fn fsck(repo: &TestRepo) {
    let out = Command::new("git")
        .args(["fsck", "--strict", "--no-progress"])
        .current_dir(&repo.dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fsck: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "",
        "fsck is not clean"
    );
}

#[test]
fn step_commit_leaves_the_user_alone() {
    let repo = TestRepo::with_commit("step");
    repo.write("a.txt", "alpha, edited by the user\n"); // uncommitted, must survive untouched
    let before = repo.user_state();
    let store = repo.store();
    let id = store.new_session_id().unwrap();
    assert_eq!(id.len(), 6);
    assert!(id
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));

    let mut s = store.start_session(&id, false).unwrap();
    assert_eq!(s.tip, s.base);
    assert_eq!(s.root(), repo.path(&format!(".git/agent/worktrees/{id}")));
    assert_eq!(
        std::fs::read_to_string(s.root().join("a.txt")).unwrap(),
        "alpha\n"
    );

    let scan0 = store.scan(&s).unwrap();
    write(s.root(), "a.txt", "alpha 2\n");
    write(s.root(), "new/c.txt", "gamma\n");
    write(s.root(), "build.log", "ignored\n");
    std::fs::remove_file(s.root().join("dir/b.txt")).unwrap();
    let scan1 = store.scan(&s).unwrap();
    let changed = Scan::diff(&scan0, &scan1);
    assert_eq!(
        changed,
        ["a.txt", "dir/b.txt", "new/c.txt"].map(PathBuf::from)
    );

    let c1 = commit(&store, &mut s, &changed, "Edit a, add c, drop b")
        .unwrap()
        .unwrap();
    assert_eq!((s.tip, s.steps), (c1, 1));
    assert_eq!(store.step_of(c1).unwrap(), 1);
    assert_eq!(
        repo.git(&["rev-parse", &format!("agent/{id}")]).trim(),
        c1.to_string()
    );
    assert_eq!(
        repo.git(&["log", "-1", "--format=%B", &format!("agent/{id}")]),
        format!("Edit a, add c, drop b\n\nAgent-Session: {id}\nAgent-Step: 1\n\n")
    );
    assert_eq!(
        repo.git(&[
            "log",
            "-1",
            "--format=%(trailers:key=Agent-Step,valueonly)",
            &format!("agent/{id}")
        ])
        .trim(),
        "1"
    );
    assert_eq!(
        repo.git(&["log", "--format=%s", &format!("agent/{id}")]),
        "Edit a, add c, drop b\ninitial\n"
    );
    assert_eq!(tree_of(&repo, c1), git_add_tree(s.root()));
    assert_eq!(
        repo.git(&["cat-file", "-p", &format!("{c1}:new/c.txt")]),
        "gamma\n"
    );
    assert!(repo
        .git(&["ls-tree", "-r", "--name-only", &c1.to_string()])
        .lines()
        .all(|l| l != "dir/b.txt"));
    let ls = repo.git(&["ls-tree", &c1.to_string(), "run.sh"]);
    assert!(ls.starts_with("100755 blob"), "{ls}");
    assert!(repo
        .git(&["cat-file", "-p", &c1.to_string()])
        .contains("author Test User <test@example.com>"));

    // Same paths again: nothing changed, no empty commit.
    assert_eq!(commit(&store, &mut s, &changed, "again").unwrap(), None);
    // Touching without changing content is not a change either.
    write(s.root(), "a.txt", "alpha 2\n");
    assert_eq!(
        commit(&store, &mut s, &[PathBuf::from("a.txt")], "touch").unwrap(),
        None
    );
    assert_eq!(s.steps, 1);

    // The checkout's HEAD stays at the start, so `git diff` there shows the whole session.
    assert_eq!(
        git_in(s.root(), &["rev-parse", "HEAD"]).trim(),
        s.base.to_string()
    );
    let diff = git_in(s.root(), &["diff", "--stat"]);
    assert!(
        diff.contains("a.txt"),
        "{diff:?} {}",
        git_in(s.root(), &["status"])
    );

    fsck(&repo);
    assert_eq!(
        repo.user_state(),
        before,
        "the user's work tree, index or status changed"
    );
    let reflog = repo.git(&["reflog", "show", "--format=%gs", &format!("agent/{id}")]);
    assert_eq!(
        reflog,
        format!("git-agent: step 1\ngit-agent: start session {id}\n")
    );
}

#[test]
fn capture_matches_git_add() {
    let repo = TestRepo::with_commit("capture");
    repo.write("a.txt", "alpha modified\n");
    repo.write("untracked/new.txt", "new\n");
    repo.write("debug.log", "ignored\n");
    std::fs::remove_file(repo.path("dir/b.txt")).unwrap();
    repo.chmod("run.sh", 0o644);
    repo.write("staged.txt", "staged\n");
    repo.git(&["add", "staged.txt"]);
    std::os::unix::fs::symlink("a.txt", repo.path("link")).unwrap();
    let expected = git_add_tree(&repo.dir);
    let before = repo.user_state();

    let store = repo.store();
    let s = store.start_session("cap001", true).unwrap();
    let step0 = s.step0.expect("there are changes to capture");
    assert_eq!(s.tip, step0);
    assert_eq!(tree_of(&repo, step0), expected);
    assert_eq!(
        repo.git(&["rev-parse", &format!("{step0}^")]).trim(),
        s.base.to_string()
    );
    assert_eq!(
        repo.git(&["log", "-1", "--format=%B", &step0.to_string()]),
        "Capture uncommitted changes\n\nAgent-Session: cap001\nAgent-Step: 0\n\n"
    );
    assert_eq!(
        repo.git(&["ls-tree", &step0.to_string(), "link"])
            .split_whitespace()
            .next(),
        Some("120000")
    );
    assert!(repo
        .git(&["ls-tree", &step0.to_string(), "run.sh"])
        .starts_with("100644"));
    // The checkout shows the user's changes.
    assert_eq!(
        std::fs::read_to_string(s.root().join("a.txt")).unwrap(),
        "alpha modified\n"
    );
    assert!(!s.root().join("debug.log").exists());
    fsck(&repo);
    assert_eq!(repo.user_state(), before);
}

#[test]
fn clean_work_tree_captures_nothing() {
    let repo = TestRepo::with_commit("clean");
    let store = repo.store();
    assert_eq!(
        store
            .capture_user_changes("abc", u64::MAX, false)
            .unwrap()
            .commit,
        None
    );
    let s = store.start_session("abc", true).unwrap();
    assert_eq!((s.step0, s.tip), (None, s.base));
}

#[test]
fn crlf_is_normalised_like_git_add() {
    let repo = TestRepo::new("crlf");
    repo.write(".gitattributes", "* text=auto\n*.bin binary\n");
    repo.write("a.txt", "one\n");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "attrs"]);
    let store = repo.store();
    let mut s = store.start_session("crlf01", false).unwrap();
    write(s.root(), "a.txt", "one\r\ntwo\r\n");
    write(s.root(), "data.bin", "raw\r\n");
    let paths = [PathBuf::from("a.txt"), PathBuf::from("data.bin")];
    let c = commit(&store, &mut s, &paths, "crlf").unwrap().unwrap();
    assert_eq!(
        repo.git(&["cat-file", "-p", &format!("{c}:a.txt")]),
        "one\ntwo\n"
    );
    assert_eq!(
        repo.git(&["cat-file", "-p", &format!("{c}:data.bin")]),
        "raw\r\n"
    );
    assert_eq!(tree_of(&repo, c), git_add_tree(s.root()));
}

#[test]
fn symlinks_exec_bits_and_type_changes() {
    let repo = TestRepo::with_commit("links");
    let store = repo.store();
    let mut s = store.start_session("link01", false).unwrap();
    let before = store.scan(&s).unwrap();
    std::os::unix::fs::symlink("../a.txt", s.root().join("dir/to-a")).unwrap();
    std::fs::set_permissions(
        s.root().join("a.txt"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    // A file turned into a directory.
    std::fs::remove_file(s.root().join("dir/b.txt")).unwrap();
    write(s.root(), "dir/b.txt/inner.txt", "inner\n");
    let changed = Scan::diff(&before, &store.scan(&s).unwrap());
    assert_eq!(
        changed,
        ["a.txt", "dir/b.txt", "dir/b.txt/inner.txt", "dir/to-a"].map(PathBuf::from)
    );
    let c = commit(&store, &mut s, &changed, "links").unwrap().unwrap();
    let ls = repo.git(&["ls-tree", "-r", &c.to_string()]);
    assert!(
        ls.contains("120000 blob") && ls.contains("\tdir/to-a\n"),
        "{ls}"
    );
    assert_eq!(
        repo.git(&["cat-file", "-p", &format!("{c}:dir/to-a")]),
        "../a.txt"
    );
    assert!(
        ls.lines()
            .any(|l| l.starts_with("100755") && l.ends_with("\ta.txt")),
        "{ls}"
    );
    assert_eq!(tree_of(&repo, c), git_add_tree(s.root()));
    fsck(&repo);
}

#[test]
fn moved_branch_is_a_cas_failure() {
    let repo = TestRepo::with_commit("cas");
    let store = repo.store();
    let mut s = store.start_session("cas001", false).unwrap();
    write(s.root(), "a.txt", "mine\n");
    commit(&store, &mut s, &[PathBuf::from("a.txt")], "one")
        .unwrap()
        .unwrap();
    // Someone else moves the branch back.
    repo.git(&["update-ref", "refs/heads/agent/cas001", &s.base.to_string()]);
    write(s.root(), "a.txt", "mine again\n");
    let tip = s.tip;
    let err = commit(&store, &mut s, &[PathBuf::from("a.txt")], "two").unwrap_err();
    assert!(matches!(err, StoreError::BranchMoved { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("refs/heads/agent/cas001 was moved by someone else"),
        "{err}"
    );
    assert_eq!(
        (s.tip, s.steps),
        (tip, 1),
        "a failed step must not advance the session"
    );
    // An existing branch is never overwritten.
    let err = store.start_session("cas001", false).unwrap_err();
    assert!(matches!(err, StoreError::BranchExists(_)), "{err}");
}

#[test]
fn rollback_leaves_nothing_behind() {
    let repo = TestRepo::with_commit("rollback");
    let store = repo.store();
    let s = store.start_session("rb0001", false).unwrap();
    write(s.root(), "scratch.txt", "untracked in the checkout\n");
    store.rollback_session(&s).unwrap();
    assert!(!s.root().exists());
    assert_eq!(repo.git(&["for-each-ref", "refs/heads/agent"]), "");
    assert_eq!(
        repo.git(&["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
    fsck(&repo);
}

#[test]
fn unborn_head_starts_from_a_root_capture_of_the_users_files() {
    let repo = TestRepo::new("unborn");
    repo.write("staged.txt", "staged\n");
    repo.git(&["add", "staged.txt"]);
    repo.write("untracked.txt", "untracked\n");
    let index_before = repo.git(&["ls-files", "-s"]);
    let s = repo.store().start_session("abc123", false).unwrap();
    assert_eq!(s.step0, Some(s.base), "the capture is the base");
    let tip = s.tip.to_string();
    assert_eq!(
        repo.git(&["rev-list", "--count", &tip]).trim(),
        "1",
        "a root commit"
    );
    assert_eq!(
        repo.git(&["show", &format!("{tip}:staged.txt")]),
        "staged\n"
    );
    assert_eq!(
        repo.git(&["show", &format!("{tip}:untracked.txt")]),
        "untracked\n"
    );
    assert_eq!(
        repo.git(&["ls-files", "-s"]),
        index_before,
        "the user's index is untouched"
    );
    assert!(
        s.root().join("untracked.txt").exists(),
        "the checkout holds the captured files"
    );
    // `fsck` notices the unborn HEAD on stderr; what matters is that it passes.
    repo.git(&["fsck", "--strict", "--no-progress"]);

    let empty = TestRepo::new("unborn-empty");
    let s = empty.store().start_session("abc124", false).unwrap();
    let tree = empty.git(&["rev-parse", &format!("{}^{{tree}}", s.tip)]);
    assert_eq!(
        tree.trim(),
        "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
        "an empty root commit"
    );
}

#[test]
fn refusals() {
    let repo = TestRepo::new("refusals");
    let err = repo.store().start_session("../x", false).unwrap_err();
    assert!(matches!(err, StoreError::InvalidSessionId(_)));

    let repo = TestRepo::with_commit("paths");
    let store = repo.store();
    let mut s = store.start_session("pth001", false).unwrap();
    for bad in ["../a.txt", "/etc/passwd", ".git/config", "dir/../../x"] {
        let err = commit(&store, &mut s, &[PathBuf::from(bad)], "bad").unwrap_err();
        assert!(matches!(err, StoreError::InvalidPath(_)), "{bad}: {err}");
    }

    let plain = std::env::temp_dir().join(format!("git-agent-store-norepo-{}", std::process::id()));
    std::fs::create_dir_all(&plain).unwrap();
    if Command::new("git")
        .arg("rev-parse")
        .current_dir(&plain)
        .output()
        .is_ok_and(|o| !o.status.success())
    {
        let err = Store::open(&plain).err().expect("not a repository");
        assert_eq!(
            err.to_string(),
            "not a git repository (or any parent): run git agent inside a repo"
        );
    }
    std::fs::remove_dir_all(&plain).unwrap();
}

/// What the store refuses comes back as a variant carrying its data (issue 24, item 5), so a caller matches
/// on it; the words are the ones users saw before.
#[test]
fn refusals_are_typed_and_carry_their_data() {
    let repo = TestRepo::with_commit("typed");
    let store = repo.store();
    let mut s = store.start_session("typ001", false).unwrap();
    let err = store.undo(&mut s, 2).unwrap_err();
    assert!(
        matches!(&err, StoreError::UndoOutOfRange { id, asked: 2, steps: 0 } if id == "typ001"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "cannot undo 2 steps of session typ001: it has no steps to undo (step 0, your own captured changes, \
         stays)"
    );

    let err = store.resolve_commit("no-such-branch").unwrap_err();
    assert!(
        matches!(&err, StoreError::NotACommit(rev) if rev == "no-such-branch"),
        "{err:?}"
    );

    let file = |path: &str, bytes: &[u8]| skills::SkillFile {
        path: path.into(),
        bytes: bytes.to_vec(),
        executable: false,
    };
    let err = store
        .put_skills(&[("lint".into(), vec![file("run.sh", b"x")])], "add lint")
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::SkillWithoutFile { name, file: "SKILL.md" } if name == "lint"),
        "{err:?}"
    );
    let big = vec![b'x'; usize::try_from(skills::MAX_BYTES).unwrap() + 1];
    let err = store
        .put_skills(&[("lint".into(), vec![file("SKILL.md", &big)])], "add lint")
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::SkillTooLarge { unit: "bytes", size, limit, .. }
            if *size == skills::MAX_BYTES + 1 && *limit == skills::MAX_BYTES),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "skill lint has {} bytes; a stored skill may have at most {}",
            skills::MAX_BYTES + 1,
            skills::MAX_BYTES
        )
    );
    let err = store
        .put_skills(&[("Lint".into(), vec![file("SKILL.md", b"x")])], "add lint")
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidSkillName(_)), "{err:?}");
    assert!(err.is_refusal());
    assert!(
        repo.git(&["for-each-ref", "refs/agent/skills"]).is_empty(),
        "a refused skill writes nothing"
    );
}

#[test]
fn dates_come_from_the_environment_format() {
    // `GIT_*_DATE` uses git's formats; make sure the ones tests use parse.
    for date in [
        "1700000000 +0000",
        "2023-11-14T22:13:20Z",
        "Tue, 14 Nov 2023 22:13:20 +0000",
    ] {
        assert_eq!(
            gix::date::parse(date, None).unwrap().seconds,
            1_700_000_000,
            "{date}"
        );
    }
}

/// A key value registered with the process-wide redactor, unlike anything else the tests write.
const KNOWN_SECRET: &str = "store-test-known-4711abcdef";
/// A secret format (an OpenAI key) that no redactor needs to know.
const FORMAT_SECRET: &str = "sk-proj-STORETESTABCDEFGHIJKLMNOP";

#[test]
fn one_policy_withholds_from_step_0_and_later_steps() {
    crate::safety::redact::register(KNOWN_SECRET, "STORE_TEST_KEY");
    let repo = TestRepo::with_commit("withhold");
    repo.write("fixture.txt", &format!("old fixture {FORMAT_SECRET}\n"));
    repo.git(&["add", "fixture.txt"]);
    repo.git(&["commit", "-q", "-m", "fixture"]);
    // The user's uncommitted files: an environment file, a known value, a fixture already in history.
    repo.write(".env", "DB=1\n");
    repo.write("db.txt", &format!("pw {KNOWN_SECRET}\n"));
    repo.write(
        "fixture.txt",
        &format!("old fixture {FORMAT_SECRET}\nmore\n"),
    );
    repo.write("plain.txt", "plain\n");
    let store = repo.store();
    let mut s = store.start_session("wh0001", true).unwrap();
    let step0 = s.step0.expect("there are changes to capture").to_string();
    let files = repo.git(&["ls-tree", "-r", "--name-only", &step0]);
    assert!(
        files.contains("plain.txt\n") && files.contains("fixture.txt\n"),
        "{files}"
    );
    assert!(
        !files.contains(".env") && !files.contains("db.txt"),
        "{files}"
    );
    assert!(!s.root().join(".env").exists());

    // Later steps, the same rules: a new format match is withheld, the message gets the list.
    write(s.root(), "new.txt", &format!("key {FORMAT_SECRET}\n"));
    write(s.root(), "keys/deploy.pem", "-----BEGIN-----\n");
    write(s.root(), "ok.txt", "fine\n");
    let paths = ["new.txt", "keys/deploy.pem", "ok.txt"].map(PathBuf::from);
    let step = store
        .commit_step(
            &mut s,
            &paths,
            &format!("write three files, one has {KNOWN_SECRET}"),
        )
        .unwrap();
    let reasons: Vec<(String, String)> = step
        .withheld
        .iter()
        .map(|w| (w.path.display().to_string(), w.reason.to_string()))
        .collect();
    assert_eq!(
        reasons,
        [
            ("new.txt", "it contains a new secret (openai-key)"),
            ("keys/deploy.pem", "it is key material"),
        ]
        .map(|(p, r)| (p.to_owned(), r.to_owned()))
    );
    assert_eq!(step.committed, [PathBuf::from("ok.txt")]);
    let commit = step.commit.expect("ok.txt was committed").to_string();
    let files = repo.git(&["ls-tree", "-r", "--name-only", &commit]);
    assert!(
        files.contains("ok.txt\n") && !files.contains("new.txt"),
        "{files}"
    );
    let message = repo.git(&["log", "-1", "--format=%B", &commit]);
    assert!(
        message.starts_with("write three files, one has [REDACTED:STORE_TEST_KEY]"),
        "the store redacts the message: {message}"
    );
    // The store itself says what it left out (the agent no longer writes that part of the message).
    assert!(
        message.contains(
            "Withheld from this commit (they stay in the checkout):\n\
             - new.txt: it contains a new secret (openai-key)\n\
             - keys/deploy.pem: it is key material\n"
        ),
        "{message}"
    );

    // Only withheld files: no commit, and the caller still learns why.
    let step = commit_only(&store, &mut s, "new.txt");
    assert_eq!((step.commit, step.committed.len()), (None, 0));
    assert_eq!(step.withheld.len(), 1);
    fsck(&repo);
}

fn commit_only(store: &Store, s: &mut Session, rel: &str) -> StepCommit {
    store
        .commit_step(s, &[PathBuf::from(rel)], "again")
        .unwrap()
}

#[test]
fn push_check_finds_known_values_in_agent_history_only() {
    let repo = TestRepo::with_commit("push-check");
    repo.write("a.txt", "user's own file mentions hunter2hunter2\n");
    repo.git(&["commit", "-qam", "base"]);
    repo.git(&["checkout", "-qb", "agent/abc"]);
    repo.write("b.txt", "clean\n");
    repo.git(&["add", "b.txt"]);
    repo.git(&["commit", "-qm", "clean step"]);
    let mut r = crate::safety::redact::Redactor::default();
    r.add_known("hunter2hunter2", "DB_PASSWORD");
    let store = repo.store();
    let agent = ["refs/heads/agent/abc"];
    // Already on main: not a leak of this push.
    assert_eq!(store.secrets_in_refs(&agent, &r).unwrap(), vec![]);
    repo.write("c.txt", "key hunter2hunter2\n");
    repo.git(&["add", "c.txt"]);
    repo.git(&["commit", "-qm", "leaky step"]);
    let leaks = store.secrets_in_refs(&agent, &r).unwrap();
    assert_eq!(leaks.len(), 1, "{leaks:?}");
    assert_eq!(
        (leaks[0].path.as_str(), leaks[0].kind.as_str()),
        ("c.txt", "DB_PASSWORD")
    );
    // A commit message counts too.
    repo.git(&[
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "the pw is hunter2hunter2",
    ]);
    let leaks = store.secrets_in_refs(&agent, &r).unwrap();
    assert_eq!(leaks.len(), 2, "{leaks:?}");
}

/// Issue 17 defect 12: a storage error says what failed in words and names the lock in the way, not gix's
/// internal structures.
#[test]
fn a_stale_lock_is_named_in_words() {
    let repo = TestRepo::with_commit("stale-lock");
    let store = Store::open(&repo.dir).unwrap();
    std::fs::create_dir_all(repo.path(".git/refs/heads/agent")).unwrap();
    let lock = repo.path(".git/refs/heads/agent/zz.lock");
    std::fs::write(&lock, "").unwrap();
    let head = store.repo.head_id().unwrap().detach();
    let err = store
        .create_branch("refs/heads/agent/zz", head, "test")
        .unwrap_err();
    let text = err.to_string();
    let mut lines = text.lines();
    let first = lines.next().unwrap();
    assert!(
        first.starts_with("git storage error: could not prepare reference edit"),
        "{text}"
    );
    assert!(
        first.contains(&format!("{} exists", lock.display())),
        "{text}"
    );
    for debug in ["Message {", "values:", "Bytes(", "Caused by"] {
        assert!(!text.contains(debug), "{text}");
    }
    assert_eq!(
        lines.next(),
        Some(
            format!(
                "hint: if no git or git-agent process is running in this repository, remove {} and try again",
                lock.display()
            )
            .as_str()
        ),
        "{text}"
    );
    // Nothing was written: the lock is the stale one, the branch does not exist.
    assert!(store
        .repo
        .try_find_reference("refs/heads/agent/zz")
        .unwrap()
        .is_none());
    assert_eq!(std::fs::read(&lock).unwrap(), b"");
}

// ---- The transaction primitive (store/transaction.rs) ----

/// A commit of the empty tree on `parent`, saying `message`.
fn empty_commit_on(store: &Store, parent: Option<ObjectId>, message: &str) -> ObjectId {
    let tree = store.tip_tree(None).unwrap();
    super::objects::snapshot::write_commit(&store.repo, tree, parent, message).unwrap()
}

/// A writer that moves the ref between another's read and swap makes that one start over on the new
/// tip: nothing it wrote is lost, and the second attempt builds on it.
#[test]
fn a_lost_swap_starts_over_on_the_new_tip() {
    let repo = TestRepo::with_commit("transact-lost");
    let store = repo.store();
    let name = "refs/agent/test";
    let mut seen = Vec::new();
    let moved = store
        .transact(
            name,
            || StoreError::Busy(name.into()),
            |tip| {
                seen.push(tip);
                if seen.len() == 1 {
                    // Another writer gets there first.
                    let theirs = empty_commit_on(&store, None, "theirs");
                    // The store keeps new objects in memory until a ref or git needs them.
                    store.persist_objects().unwrap();
                    repo.git(&["update-ref", name, &theirs.to_string()]);
                }
                let commit = empty_commit_on(&store, tip, "ours");
                Ok(super::objects::transaction::Proposal::Move {
                    commit,
                    reflog: "ours".into(),
                    then: commit,
                })
            },
        )
        .unwrap();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0], None);
    let theirs = seen[1].expect("the second attempt sees the other writer's commit");
    assert_eq!(store.ref_target(name).unwrap(), Some(moved));
    let parent = repo.git(&["rev-parse", &format!("{moved}^")]);
    assert_eq!(parent.trim(), theirs.to_string());
}

/// A lock file nobody removes is reported as stale within seconds, for every ref the store moves
/// (memory's ref waited out 200 rounds of gix's lock timeout before it went through this primitive).
#[test]
fn a_stale_lock_is_reported_soon() {
    let repo = TestRepo::with_commit("transact-stale");
    let store = repo.store();
    std::fs::create_dir_all(repo.path(".git/refs/agent")).unwrap();
    std::fs::write(repo.path(".git/refs/agent/memory.lock"), "").unwrap();
    let started = std::time::Instant::now();
    let err = store
        .update_memory(|_| {
            Ok(Some(crate::store::memory::MemoryEdit {
                message: "remember: x".into(),
                put: Vec::new(),
                remove: vec!["00000000".into()],
            }))
        })
        .expect_err("the lock stays");
    assert!(matches!(err, StoreError::Locked { .. }), "{err}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{err}"
    );
}
