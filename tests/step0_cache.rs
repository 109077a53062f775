//! Step 0 across sessions (issue 29): the untracked files found by one session's walk are remembered for the
//! next (`.git/agent/untracked.json`), and a directory whose identity has not changed is not read again.
//! Whatever the user does between two sessions, step 0 must capture exactly what `git status` shows: files
//! added, removed or modified beside directories that did not change, a directory whose mtime was set back,
//! a new nested directory, a changed `.gitignore` or `info/exclude`.

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::common::{agent_branches, call, run, Reply, Server, TestRepo};

/// What `git status` shows as changed in the user's work tree (staged, modified, deleted, untracked; each
/// untracked file on its own), without refreshing the index (which would change what the cache keys on).
fn status_paths(repo: &TestRepo) -> BTreeSet<String> {
    repo.git(&[
        "--no-optional-locks",
        "status",
        "--porcelain",
        "--untracked-files=all",
        "--no-renames",
    ])
    .lines()
    .map(|line| line[3..].to_owned())
    .collect()
}

/// One session that only answers; returns the paths its step 0 captured (what its branch changes against
/// HEAD) and its `untracked` timing line (how many directories the walk read and kept).
fn step0(repo: &TestRepo) -> (BTreeSet<String>, Value) {
    let (captured, timings) = step0_timings(repo);
    (captured, phase(&timings, "untracked"))
}

/// One session that only answers; returns the paths its step 0 captured and all its timing lines.
fn step0_timings(repo: &TestRepo) -> (BTreeSet<String>, Vec<Value>) {
    let before: BTreeSet<String> = agent_branches(repo).into_iter().collect();
    let server = Server::start(vec![Reply::text("done")]);
    let timings = repo.root().join(format!("timings-{}.jsonl", before.len()));
    let out = run(repo
        .agent(&server, &["ask", "hello"])
        .env("GIT_AGENT_TIMINGS", &timings));
    out.assert_code(0);
    let id = agent_branches(repo)
        .into_iter()
        .find(|id| !before.contains(id))
        .expect("the session's branch");
    let captured = repo
        .git(&[
            "diff",
            "--name-only",
            "--no-renames",
            "HEAD",
            &format!("agent/{id}"),
        ])
        .lines()
        .map(str::to_owned)
        .collect();
    let text = std::fs::read_to_string(&timings).expect("timings written");
    let lines = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .collect();
    (captured, lines)
}

/// The timing line of `name`.
fn phase(timings: &[Value], name: &str) -> Value {
    timings
        .iter()
        .find(|line| line["phase"] == name)
        .unwrap_or_else(|| panic!("a {name} line in {timings:?}"))
        .clone()
}

/// Step 0 captured what `git status` shows, no more and no less.
fn assert_captures_status(repo: &TestRepo, when: &str) -> Value {
    let (captured, walk) = step0(repo);
    assert_eq!(
        captured,
        status_paths(repo),
        "{when}: step 0 against git status"
    );
    walk
}

/// Directories changed less than a second before a walk are read again next time (the racy rule): the tests
/// let the set-up age past it, so that what they check is the cache, not its refusal.
fn age() {
    std::thread::sleep(Duration::from_millis(1100));
}

/// `dir`'s mtime set back to `(secs, nanos)`, as `touch -d` can: its ctime still moves.
fn set_mtime(dir: &Path, (secs, nanos): (i64, i64)) {
    let status = std::process::Command::new("touch")
        .args(["-m", "-d", &format!("@{secs}.{nanos:09}")])
        .arg(dir)
        .status()
        .expect("touch runs");
    assert!(status.success());
}

fn mtime(path: &Path) -> (i64, i64) {
    let md = std::fs::metadata(path).expect("the directory exists");
    (md.mtime(), md.mtime_nsec())
}

/// Directories of [`repo_with_directories()`] the walk records: the root, `a/`, `a/sub/`, `b/`, `c/`,
/// `more/` and its twelve.
const WALKED: u64 = 18;

/// A repository with tracked files in `a/`, `a/sub/`, `b/`, `c/` and twelve directories under `more/` (so
/// that its walk is large enough to be remembered), an untracked file in `b/`, ignored files (`*.log`,
/// `build/`) and untracked work in progress.
fn repo_with_directories() -> TestRepo {
    let repo = TestRepo::new();
    for path in ["a/one.txt", "a/sub/two.txt", "b/three.txt", "c/four.txt"] {
        repo.write(path, &format!("{path}\n"));
    }
    for i in 0..12 {
        repo.write(&format!("more/d{i:02}/f.txt"), &format!("{i}\n"));
    }
    repo.write(".gitignore", "*.log\nbuild/\n");
    repo.commit_all("directories");
    repo.write("b/untracked.txt", "untracked\n");
    repo.write("a/noise.log", "ignored\n");
    repo.write("build/out.o", "ignored\n");
    repo
}

#[test]
fn changes_beside_unchanged_directories_are_captured_and_the_rest_is_not_read_again() {
    let repo = repo_with_directories();
    age();
    let first = assert_captures_status(&repo, "first session");
    assert!(
        repo.path().join(".git/agent/untracked.json").is_file(),
        "the walk is remembered"
    );
    assert_eq!(first["kept"], 0, "nothing to keep yet: {first}");
    let second = assert_captures_status(&repo, "nothing changed");
    // Nothing changed: no directory is read, the root included; every record is kept.
    assert_eq!(second["read"], 0, "{second}");
    assert_eq!(second["kept"], WALKED, "{second}");

    // Added beside unchanged directories, removed, modified in place, a new nested directory (deep in a
    // tracked one and at the top), and a file added to a directory whose mtime is then set back.
    repo.write("a/new.txt", "new\n");
    std::fs::remove_file(repo.path().join("b/untracked.txt")).unwrap();
    repo.write("c/four.txt", "changed in place\n");
    repo.write("a/sub/deeper/nested.txt", "nested\n");
    repo.write("d/e/f.txt", "new tree\n");
    let c = repo.path().join("c");
    let before = mtime(&c);
    repo.write("c/sneaky.txt", "mtime set back\n");
    set_mtime(&c, before);
    assert_eq!(mtime(&c), before);
    let third = assert_captures_status(&repo, "after the changes");
    assert!(third["read"].as_u64() > Some(1), "{third}");
    assert_captures_status(&repo, "again, the changed directories racy");
    age();
    assert_captures_status(&repo, "again, from the cache");
    // Removed again: an untracked directory that goes, a tracked file that goes.
    std::fs::remove_dir_all(repo.path().join("d")).unwrap();
    std::fs::remove_file(repo.path().join("a/one.txt")).unwrap();
    assert_captures_status(&repo, "after the removals");
}

/// Step 0 compares the tracked files on a second thread only from 1,000 index entries, and a checkout writes
/// its files on several only from 100 (every other test here is under both): past both, the capture is still
/// exactly `git status`, and the session's checkout holds every file of its tree.
#[test]
fn past_the_sizes_that_start_threads_the_capture_and_the_checkout_are_whole() {
    let repo = TestRepo::new();
    for i in 0..1_100 {
        repo.write(&format!("d{:02}/f{i:04}.txt", i % 20), &format!("{i}\n"));
    }
    repo.commit_all("1,100 files");
    repo.write("d03/f0003.txt", "modified\n");
    std::fs::remove_file(repo.path().join("d07/f0007.txt")).unwrap();
    repo.write("d11/new.txt", "untracked\n");
    repo.write("d19/staged.txt", "staged\n");
    repo.git(&["add", "d19/staged.txt"]);
    assert_eq!(status_paths(&repo).len(), 4);
    assert_captures_status(&repo, "1,100 tracked files");

    let status = call(
        "run",
        serde_json::json!({"command": "git status --porcelain --untracked-files=all; ls d*/ | grep -c txt"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![status.clone()]),
        Reply::text("done"),
    ]);
    run(&mut repo.agent(&server, &["ask", "check the checkout"])).assert_code(0);
    let told = server.requests()[1].tool_result(&status.id);
    // Nothing differs from the checkout's index, and all 1,101 files (one deleted, two added) are there.
    assert!(told.contains("1101"), "{told}");
    assert!(!told.contains(" M ") && !told.contains("?? "), "{told}");
}

#[test]
fn a_changed_gitignore_or_exclude_is_captured() {
    let repo = repo_with_directories();
    repo.write("a/keep.txt", "kept\n");
    repo.write("a/drop.tmp", "ignored first\n");
    repo.write("a/sub/.gitignore", "*.tmp\n");
    repo.write("a/sub/x.tmp", "ignored first\n");
    repo.write(".gitignore", "*.log\nbuild/\n*.tmp\n");
    age();
    assert_captures_status(&repo, "first session");
    let again = assert_captures_status(&repo, "from the cache");
    assert_eq!(again["read"], 0, "{again}");

    // The top .gitignore edited in place (its directory keeps its mtime): *.tmp is no longer ignored there,
    // and keep.txt now is.
    std::fs::write(repo.path().join(".gitignore"), "*.log\nbuild/\nkeep.txt\n").unwrap();
    let changed = assert_captures_status(&repo, "top .gitignore changed");
    assert!(status_paths(&repo).contains("a/drop.tmp"));
    assert!(changed["read"].as_u64() > Some(1), "{changed}");
    age();
    assert_captures_status(&repo, "from the cache again");

    // A nested .gitignore edited in place: x.tmp is no longer ignored below a/sub.
    std::fs::write(repo.path().join("a/sub/.gitignore"), "*.other\n").unwrap();
    assert_captures_status(&repo, "nested .gitignore changed");
    assert!(status_paths(&repo).contains("a/sub/x.tmp"));
    age();
    assert_captures_status(&repo, "from the cache again");

    // The repository's own excludes.
    let exclude = repo.path().join(".git/info/exclude");
    std::fs::create_dir_all(exclude.parent().unwrap()).unwrap();
    std::fs::write(&exclude, "drop.tmp\n").unwrap();
    assert_captures_status(&repo, "info/exclude changed");
    assert!(!status_paths(&repo).contains("a/drop.tmp"));

    // A .gitignore appearing in a directory that had none.
    repo.write("b/.gitignore", "three.txt\nuntracked.txt\n");
    assert_captures_status(&repo, "new .gitignore");
}

/// A walk of a few directories is not remembered: reading them again costs less than the file (issue 29),
/// and a file left from when the work tree was larger goes.
#[test]
fn a_small_walk_is_not_remembered() {
    let repo = TestRepo::new();
    repo.write("a/one.txt", "one\n");
    repo.commit_all("small");
    repo.write("b/new.txt", "untracked\n");
    age();
    let file = repo.path().join(".git/agent/untracked.json");
    let first = assert_captures_status(&repo, "first session");
    assert!(
        !file.exists(),
        "a walk of three directories is kept: {first}"
    );
    let second = assert_captures_status(&repo, "second session");
    assert_eq!(second["kept"], 0, "{second}");
    std::fs::write(&file, "{\"version\":1}").unwrap();
    assert_captures_status(&repo, "with a file left over");
    assert!(!file.exists(), "the left-over file stays");
}

#[test]
fn a_corrupt_or_foreign_cache_is_a_full_walk() {
    let repo = repo_with_directories();
    age();
    assert_captures_status(&repo, "first session");
    let file = repo.path().join(".git/agent/untracked.json");
    std::fs::write(&file, "{not json").unwrap();
    repo.write("b/more.txt", "more\n");
    let walk = assert_captures_status(&repo, "corrupt cache");
    assert_eq!(walk["kept"], 0, "{walk}");
    // Another version: ignored as well.
    let text = std::fs::read_to_string(&file).unwrap();
    let mut cache: Value = serde_json::from_str(&text).expect("rewritten as JSON");
    cache["version"] = Value::from(999);
    std::fs::write(&file, cache.to_string()).unwrap();
    repo.write("c/more.txt", "more\n");
    let walk = assert_captures_status(&repo, "another version");
    assert_eq!(walk["kept"], 0, "{walk}");
}

/// A file-system monitor hook that speaks git's protocol 2 (`core.fsmonitor`), scripted: it answers a new
/// token, then the lines of `.git/monitor-says` (`/` means it cannot tell), and leaves its environment in
/// `.git/monitor-env` and its arguments in `.git/monitor-args`.
const MONITOR: &str = r#"#!/bin/sh
env > .git/monitor-env
echo "$@" > .git/monitor-args
n=$(cat .git/monitor-count 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" > .git/monitor-count
printf 'token-%s\0' "$n"
while IFS= read -r path; do printf '%s\0' "$path"; done < .git/monitor-says
"#;

/// A repository whose index carries git's monitor extension (`FSMN`) with every entry vouched for (git
/// wrote it after a status in which the monitor could not tell, `/`, so it checked every file), and whose
/// monitor the user trusted.
fn monitored_repo(monitor: &str) -> TestRepo {
    let repo = untrusted_monitored_repo(monitor);
    crate::common::landing::agent(&repo, &["trust"]).assert_code(0);
    repo
}

/// The same, before the user trusted `.git/config`'s `core.fsmonitor`.
fn untrusted_monitored_repo(monitor: &str) -> TestRepo {
    use std::os::unix::fs::PermissionsExt;
    let repo = repo_with_directories();
    let hook = repo.path().join(".git/monitor");
    std::fs::write(&hook, monitor).unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    monitor_says(&repo, &["/"]);
    repo.git(&["config", "core.fsmonitor", ".git/monitor"]);
    repo.git(&["update-index", "--fsmonitor"]);
    repo.git(&["status", "--porcelain"]);
    monitor_says(&repo, &[]);
    age();
    repo
}

fn monitor_says(repo: &TestRepo, paths: &[&str]) {
    let mut text: String = paths.iter().map(|p| format!("{p}\n")).collect();
    if text.is_empty() {
        text.push('\n');
    }
    repo.write(".git/monitor-says", &text);
}

#[test]
fn with_a_file_system_monitor_step_0_stats_only_what_it_names_as_git_status_does() {
    let repo = monitored_repo(MONITOR);
    repo.write("a/one.txt", "changed, and named by the monitor\n");
    repo.write(
        "c/four.txt",
        "changed, and not named: the monitor vouches for it\n",
    );
    repo.write("b/new.txt", "untracked\n");
    monitor_says(&repo, &["a/one.txt", "b/new.txt"]);
    // The token of git's last call, the status that wrote the index.
    let recorded = std::fs::read_to_string(repo.path().join(".git/monitor-count")).unwrap();
    let (captured, timings) = step0_timings(&repo);
    // Asked as git asks: protocol 2 and the token git recorded (the session does not write the index).
    let args = std::fs::read_to_string(repo.path().join(".git/monitor-args")).unwrap();
    assert_eq!(args.trim_end(), format!("2 token-{}", recorded.trim()));
    let env = std::fs::read_to_string(repo.path().join(".git/monitor-env")).unwrap();
    assert!(
        !env.contains("OPENAI_API_KEY"),
        "the key reached the hook: {env}"
    );
    // git itself, with the same monitor, sees the same: the file the monitor vouches for is not looked at.
    assert_eq!(captured, status_paths(&repo), "step 0 against git status");
    assert!(captured.contains("a/one.txt"), "{captured:?}");
    assert!(!captured.contains("c/four.txt"), "{captured:?}");
    assert!(
        captured.contains("b/new.txt"),
        "untracked files are still walked: {captured:?}"
    );
    let monitor = phase(&timings, "fsmonitor");
    assert_eq!(monitor["named"], 2, "{monitor}");
    // Every tracked file but the one named is taken as unchanged.
    let tracked = repo.git(&["ls-files"]).lines().count();
    assert_eq!(monitor["unchanged"], tracked - 1, "{monitor}");
}

#[test]
fn a_monitor_named_by_the_repositorys_own_config_runs_only_once_trusted() {
    let repo = untrusted_monitored_repo(MONITOR);
    repo.write("c/four.txt", "changed, not named\n");
    let count = || std::fs::read_to_string(repo.path().join(".git/monitor-count")).unwrap();
    let before = count();
    let server = Server::start(vec![Reply::text("done")]);
    let out = repo.run_agent(&server, &["ask", "hello"]);
    out.assert_code(0);
    assert!(
        out.stderr()
            .contains("core.fsmonitor in .git/config is not trusted"),
        "{}",
        out.stderr()
    );
    assert_eq!(count(), before, "the untrusted hook ran");
    let (captured, timings) = step0_timings(&repo);
    assert!(
        captured.contains("c/four.txt"),
        "every file checked: {captured:?}"
    );
    assert_eq!(phase(&timings, "fsmonitor")["unused"], "untrusted");
    assert_eq!(count(), before, "the untrusted hook ran");

    let list = crate::common::landing::agent(&repo, &["trust", "--list"]);
    list.assert_code(0);
    assert!(
        list.stdout().contains("file-system monitor") && list.stdout().contains(".git/monitor"),
        "{}",
        list.stdout()
    );
    crate::common::landing::agent(&repo, &["trust"]).assert_code(0);
    let (captured, timings) = step0_timings(&repo);
    assert!(
        !captured.contains("c/four.txt"),
        "the monitor vouched for it: {captured:?}"
    );
    assert!(phase(&timings, "fsmonitor")["unchanged"].as_u64() > Some(0));

    // Another hook is another item: not trusted until trusted again.
    repo.git(&["config", "core.fsmonitor", "sh .git/monitor"]);
    let (_, timings) = step0_timings(&repo);
    assert_eq!(phase(&timings, "fsmonitor")["unused"], "untrusted");
}

#[test]
fn a_monitor_the_user_sets_runs_without_asking() {
    let repo = untrusted_monitored_repo(MONITOR);
    repo.git(&["config", "--unset", "core.fsmonitor"]);
    repo.write("c/four.txt", "changed, not named\n");
    let server = Server::start(vec![Reply::text("done")]);
    let timings = repo.root().join("timings-user.jsonl");
    // The user's own setting (git's GIT_CONFIG_COUNT, as `git -c` passes it on): no trust asked.
    run(repo
        .agent(&server, &["ask", "hello"])
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "core.fsmonitor")
        .env("GIT_CONFIG_VALUE_0", ".git/monitor")
        .env("GIT_AGENT_TIMINGS", &timings))
    .assert_code(0);
    let text = std::fs::read_to_string(&timings).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let monitor = phase(&lines, "fsmonitor");
    assert!(monitor["unchanged"].as_u64() > Some(0), "{monitor}");
}

#[test]
fn a_monitor_that_cannot_tell_or_fails_means_every_file_is_checked() {
    let repo = monitored_repo(MONITOR);
    repo.write("c/four.txt", "changed, not named\n");
    monitor_says(&repo, &["/"]);
    let (captured, timings) = step0_timings(&repo);
    assert!(captured.contains("c/four.txt"), "{captured:?}");
    assert_eq!(phase(&timings, "fsmonitor")["unused"], "hook");

    let failing = monitored_repo(&format!("{MONITOR}exit 3\n"));
    failing.write("c/four.txt", "changed, not named\n");
    let (captured, timings) = step0_timings(&failing);
    assert!(captured.contains("c/four.txt"), "{captured:?}");
    assert_eq!(phase(&timings, "fsmonitor")["unused"], "hook");
}

#[test]
fn a_monitor_is_used_only_with_its_extension_in_the_index() {
    let repo = repo_with_directories();
    age();
    std::fs::write(repo.path().join(".git/monitor"), MONITOR).unwrap();
    repo.git(&["config", "core.fsmonitor", "sh .git/monitor"]);
    crate::common::landing::agent(&repo, &["trust"]).assert_code(0);
    monitor_says(&repo, &[]);
    repo.write("c/four.txt", "changed\n");
    // No `FSMN` in the index (git never wrote one): the monitor's silence proves nothing.
    let (captured, timings) = step0_timings(&repo);
    assert!(captured.contains("c/four.txt"), "{captured:?}");
    assert_eq!(phase(&timings, "fsmonitor")["unused"], "no extension");
    // `true` is git's built-in daemon, not a hook.
    repo.git(&["config", "core.fsmonitor", "true"]);
    let (_, timings) = step0_timings(&repo);
    assert_eq!(phase(&timings, "fsmonitor")["unused"], "no hook");
}

#[test]
fn a_status_that_rewrites_the_index_keeps_the_walk_while_the_tracked_paths_stay() {
    let repo = repo_with_directories();
    age();
    assert_captures_status(&repo, "first session");
    let index = repo.path().join(".git/index");
    let before = std::fs::read(&index).unwrap();
    // New stat data for a tracked file, same content: `git status` refreshes the entry and rewrites the index.
    set_mtime(&repo.path().join("a/one.txt"), (1_700_000_000, 0));
    repo.git(&["status", "--porcelain"]);
    assert_ne!(
        std::fs::read(&index).unwrap(),
        before,
        "git rewrote the index"
    );
    let walk = assert_captures_status(&repo, "after git status");
    assert_eq!(walk["kept"], WALKED, "{walk}");
    // A path added to the index is another set of tracked paths: everything is walked again.
    repo.git(&["add", "b/untracked.txt"]);
    let walk = assert_captures_status(&repo, "after git add");
    assert_eq!(walk["kept"], 0, "{walk}");
}

/// The real monitor (PARTNERS: Watchman, through the hook git ships as `fsmonitor-watchman.sample`): step 0
/// uses it and still captures exactly what `git status` shows.
#[test]
#[ignore = "needs watchman: run by .ci/run"]
fn with_watchman_step_0_captures_what_git_status_shows() {
    assert!(
        std::process::Command::new("watchman")
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success()),
        "watchman is not installed (apt-get install watchman)"
    );
    let repo = repo_with_directories();
    let sample = repo.path().join(".git/hooks/fsmonitor-watchman.sample");
    assert!(
        sample.is_file(),
        "git's template hook is missing: {}",
        sample.display()
    );
    std::fs::rename(&sample, repo.path().join(".git/hooks/fsmonitor-watchman")).unwrap();
    repo.git(&["config", "core.fsmonitor", ".git/hooks/fsmonitor-watchman"]);
    crate::common::landing::agent(&repo, &["trust"]).assert_code(0);
    // The first call starts the watch and cannot tell; git writes the monitor's token once it can.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        repo.git(&["status", "--porcelain"]);
        let index = std::fs::read(repo.path().join(".git/index")).unwrap();
        if index.windows(6).any(|w| w == b"FSMN\0\0") && index.windows(2).any(|w| w == b"c:") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "git never wrote a Watchman token"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    age();
    repo.write("a/one.txt", "modified\n");
    std::fs::remove_file(repo.path().join("c/four.txt")).unwrap();
    repo.write("a/sub/new.txt", "untracked\n");
    let (captured, timings) = step0_timings(&repo);
    let watched = repo.path().to_str().unwrap().to_owned();
    let _ = std::process::Command::new("watchman")
        .args(["watch-del", &watched])
        .output();
    assert_eq!(captured, status_paths(&repo), "step 0 against git status");
    assert!(
        captured.contains("a/one.txt") && captured.contains("c/four.txt"),
        "{captured:?}"
    );
    let monitor = phase(&timings, "fsmonitor");
    assert!(
        monitor["unchanged"].as_u64() > Some(0),
        "the monitor was not used: {monitor}"
    );
}
