//! The tools through the real binary: what the model gets back, and what they leave alone.
//!
//! Contract (issue 5): confinement (`..`, absolute paths, links out, `.git`) with nothing outside read or
//! written; the stale-read guard; `run` without the provider's key or other secrets in its environment;
//! background servers that never outlive the session; terminal output free of escape sequences.

use std::fs;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{
    agent_commits, call, fsck, run, session_id, user_state, Reply, Server, TestRepo, API_KEY,
};

#[test]
fn confinement_refuses_escapes_and_touches_nothing_outside() {
    let repo = TestRepo::new();
    let outside = repo.root().join("outside.txt");
    fs::write(&outside, "OUTSIDE-SECRET\n").expect("write outside");
    std::os::unix::fs::symlink("/etc", repo.path().join("etc-link")).expect("symlink");
    std::os::unix::fs::symlink(&outside, repo.path().join("out-link")).expect("symlink");
    repo.commit_all("links");
    let before = user_state(&repo);
    let calls = vec![
        call("read_file", json!({"path": "../../../../outside.txt"})),
        call("read_file", json!({"path": "/etc/passwd"})),
        call("read_file", json!({"path": "etc-link/passwd"})),
        call("read_file", json!({"path": "out-link"})),
        call(
            "write_file",
            json!({"path": "out-link", "content": "pwned"}),
        ),
        call(
            "write_file",
            json!({"path": "etc-link/agent-was-here", "content": "x"}),
        ),
        call(
            "edit_file",
            json!({"path": ".git/config", "old_string": "[core]", "new_string": "[x]"}),
        ),
        call(
            "write_file",
            json!({"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"}),
        ),
        call("search", json!({"pattern": "root", "path": "/etc"})),
        call("list_files", json!({"path": "../.."})),
    ];
    let server = Server::start(vec![Reply::tool_calls(calls.clone()), Reply::text("done")]);

    let out = repo.run_agent(&server, &["ask", "escape"]);

    out.assert_code(0);
    let requests = server.requests();
    for c in &calls {
        let result = requests[1].tool_result(&c.id);
        assert!(result.starts_with("error"), "{}: {result}", c.arguments);
        assert!(
            !result.contains("OUTSIDE-SECRET") && !result.contains("root:x:0"),
            "{result}"
        );
    }
    assert_eq!(
        fs::read_to_string(&outside).expect("read"),
        "OUTSIDE-SECRET\n"
    );
    assert!(!std::path::Path::new("/etc/agent-was-here").exists());
    assert_eq!(user_state(&repo), before);
    let id = session_id(&repo);
    assert_eq!(
        repo.git(&["rev-parse", &format!("agent/{id}")]),
        repo.git(&["rev-parse", "HEAD"])
    );
}

#[test]
fn edit_after_a_command_changed_the_file_is_refused_until_read_again() {
    let repo = TestRepo::new();
    let read = call("read_file", json!({"path": "file.txt"}));
    let change = call("run", json!({"command": "echo four >> file.txt"}));
    let stale = call(
        "edit_file",
        json!({"path": "file.txt", "old_string": "two", "new_string": "2"}),
    );
    let reread = call("read_file", json!({"path": "file.txt"}));
    let edit = call(
        "edit_file",
        json!({"path": "file.txt", "old_string": "two", "new_string": "2"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![read, change]),
        Reply::tool_calls(vec![stale.clone()]),
        Reply::tool_calls(vec![reread, edit.clone()]),
        Reply::text("done"),
    ]);

    let out = repo.run_agent(&server, &["ask", "edit"]);

    out.assert_code(0);
    let requests = server.requests();
    let refused = requests[2].tool_result(&stale.id);
    assert!(
        refused.contains("changed since you last read it") && refused.contains("read_file"),
        "{refused}"
    );
    assert!(!requests[3].tool_result(&edit.id).starts_with("error"));
    let id = session_id(&repo);
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:file.txt")]),
        "one\n2\nthree\nfour\n"
    );
}

/// The agent ignores SIGPIPE (a reader that went away is an error to it, src/sys/entry.rs) and catches the
/// termination signals; a command starts with every signal at its default action and none blocked, as from a
/// shell, so `yes | head -1` ends.
#[test]
fn commands_start_with_no_signal_ignored_or_blocked() {
    let repo = TestRepo::new();
    let status = call(
        "run",
        json!({"command": "grep -E '^Sig(Ign|Blk)' /proc/self/status; yes | head -1"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![status.clone()]),
        Reply::text("ok"),
    ]);

    crate::common::run(&mut repo.agent(&server, &["ask", "show the signals"])).assert_code(0);
    let result = server.requests()[1].tool_result(&status.id);
    let mask = |name: &str| {
        let line = result
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("{name} in {result}"));
        u64::from_str_radix(line.trim(), 16).expect("a hexadecimal mask")
    };
    // Signals 1 to 31; glibc's posix_spawn leaves its own internal signal 32 ignored in what it starts.
    assert_eq!(mask("SigIgn:") & 0x7fff_ffff, 0, "{result}");
    assert_eq!(mask("SigBlk:"), 0, "{result}");
    assert!(result.contains("\ny\n"), "yes | head -1 ended: {result}");
}

#[test]
fn commands_see_no_keys_or_secrets() {
    let repo = TestRepo::new();
    let env = call("run", json!({"command": "env"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![env.clone()]),
        Reply::text("ok"),
    ]);

    let out = crate::common::run(
        repo.agent(&server, &["ask", "print the environment"])
            .env("ANTHROPIC_AUTH_TOKEN", "anthropic-token-value")
            .env("GITHUB_TOKEN", "github-token-value")
            .env("HARMLESS_SETTING", "visible-value"),
    );

    out.assert_code(0);
    let result = server.requests()[1].tool_result(&env.id);
    assert!(
        result.contains("HARMLESS_SETTING=visible-value"),
        "env ran: {result}"
    );
    for secret in [
        API_KEY,
        "OPENAI_API_KEY",
        "anthropic-token-value",
        "github-token-value",
    ] {
        assert!(
            !result.contains(secret),
            "{secret} leaked into the command's environment"
        );
    }
}

/// Issue 17, defect 3: started from a hook or through `git --git-dir=… agent`, the agent inherits variables
/// that point git at the user's repository and index; a command the model runs in its checkout must not
/// (`git add -A` there once staged into the user's index).
#[test]
fn commands_do_not_inherit_git_redirects() {
    let repo = TestRepo::new();
    repo.write("staged.txt", "the user's staged work\n");
    repo.git(&["add", "staged.txt"]);
    let before = user_state(&repo);
    let add = call(
        "run",
        json!({"command": "echo new > added.txt && git add -A && git status --porcelain"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![add.clone()]),
        Reply::text("ok"),
    ]);
    let git_dir = repo.path().join(".git");
    let out = run(repo
        // The sandbox makes the git dir read-only, which would hide the leak: this is about the environment.
        .agent(&server, &["ask", "--sandbox", "off", "stage everything"])
        .env("GIT_DIR", &git_dir)
        .env("GIT_WORK_TREE", repo.path())
        .env("GIT_INDEX_FILE", git_dir.join("index")));
    out.assert_code(0);
    let result = server.requests()[1].tool_result(&add.id);
    // Staged in the checkout's own index, where the user's staged file is no change at all.
    assert!(result.contains("A  added.txt"), "{result}");
    assert!(!result.contains("staged.txt"), "{result}");
    assert_eq!(
        user_state(&repo),
        before,
        "the user's index or files changed"
    );
    let id = session_id(&repo);
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:added.txt")]),
        "new\n"
    );
    fsck(&repo);
}

#[test]
fn background_server_is_started_read_stopped_and_never_outlives_the_session() {
    let repo = TestRepo::new();
    // The job's pid as the agent sees it (its process group): in a PID namespace the command's own `$$` is
    // a number of that namespace, meaningless out here.
    let serve = call(
        "run",
        json!({"command": "exec python3 -m http.server 0 --bind 127.0.0.1"}),
    );
    let look = call("job", json!({"id": 1, "action": "output"}));
    let stop = call("job", json!({"id": 1, "action": "stop"}));
    let left = call("run", json!({"command": "sleep 1000", "background": true}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![serve.clone()]),
        Reply::tool_calls(vec![look.clone(), stop.clone()]),
        Reply::tool_calls(vec![left.clone()]),
        Reply::text("done"),
    ]);

    let started = Instant::now();
    let out = repo.run_agent(&server, &["ask", "--sandbox", "off", "serve"]);

    out.assert_code(0);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "a server hung the turn"
    );
    let requests = server.requests();
    let first = requests[1].tool_result(&serve.id);
    assert!(
        first.contains("started in the background as job 1"),
        "{first}"
    );
    assert!(first.contains("looks like a Python server"), "{first}");
    let looked = requests[2].tool_result(&look.id);
    assert!(looked.starts_with("job 1: running"), "{looked}");
    let stopped = requests[2].tool_result(&stop.id);
    assert!(stopped.starts_with("job 1 stopped"), "{stopped}");
    let pid: i32 = looked
        .split("running (pid ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .and_then(|s| s.parse().ok())
        .expect("job 1 reports its pid");
    // SAFETY: signal 0 only asks whether the group still has members.
    assert_ne!(
        unsafe { libc::killpg(pid, 0) },
        0,
        "the stopped server still runs"
    );
    let second = requests[3].tool_result(&left.id);
    assert!(second.contains("job 2"), "{second}");
    // The job left running was killed when the session ended (the binary has exited by now).
    let job2_pid: i32 = second
        .split("running (pid ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .and_then(|s| s.parse().ok())
        .expect("job 2 reports its pid");
    let deadline = Instant::now() + Duration::from_secs(10);
    // SAFETY: signal 0 only asks whether the group still has members.
    while unsafe { libc::killpg(job2_pid, 0) } == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_ne!(
        unsafe { libc::killpg(job2_pid, 0) },
        0,
        "job 2 outlived the session"
    );
    let id = session_id(&repo);
    let log = repo
        .path()
        .join(format!(".git/agent/output/{id}/job-1.log"));
    assert!(
        log.exists(),
        "the job's log is kept under .git/agent/output"
    );
}

#[test]
fn escape_sequences_from_tools_never_reach_the_terminal() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::tool_calls(vec![
            call(
                "run",
                json!({"command": "printf 'x\\033]0;pwned\\007'; echo '\u{1b}[2J'"}),
            ),
            call("read_file", json!({"path": "\u{1b}[31mred.txt"})),
        ]),
        Reply::text("done \u{1b}[5m"),
    ]);

    let out = repo.run_agent(&server, &["ask", "escapes"]);

    out.assert_code(0);
    assert!(!out.stderr().contains('\u{1b}'), "{:?}", out.stderr());
    assert!(!out.stderr().contains('\u{7}'), "{:?}", out.stderr());
    assert!(out.stderr().contains('\u{fffd}'), "{:?}", out.stderr());
}

/// `git diff-tree --name-status` of one commit, one `X path` a line.
fn name_status(repo: &TestRepo, commit: &str) -> String {
    repo.git(&["diff-tree", "--no-commit-id", "--name-status", "-r", commit])
}

/// A small checkout is scanned after each command, never watched: closing an inotify instance that holds
/// watches costs the kernel's grace period (~15 ms), more than scanning a few files a command.
#[test]
#[cfg_attr(
    git_agent_portable,
    ignore = "needs inotify: the portable configuration never watches, so there is no choice to check"
)]
fn a_small_checkout_is_scanned_not_watched() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::tool_calls(vec![call("run", json!({"command": "echo a > a.txt"}))]),
        Reply::text("done"),
    ]);
    let out = run(repo
        .agent(&server, &["ask", "make a"])
        .env("GIT_AGENT_DEBUG", "1"));
    out.assert_code(0);
    let id = session_id(&repo);
    assert_eq!(
        name_status(&repo, &agent_commits(&repo, &id)[0]),
        "A\ta.txt\n"
    );
    let stderr = out.stderr();
    assert!(
        stderr.contains("not watching the checkout: ") && stderr.contains(" tracked files"),
        "{stderr}"
    );
    assert!(!stderr.contains("from inotify events"), "{stderr}");
}

#[test]
fn run_changes_become_steps_without_ignored_files() {
    let repo = TestRepo::new();
    repo.write(".gitignore", "*.log\n");
    // Enough tracked files for the checkout to be watched (a smaller one is scanned: cheaper than inotify).
    for n in 0..2_000 {
        repo.write(&format!("bulk/f{n:04}.txt"), "x\n");
    }
    repo.commit_all("ignore logs");
    // Excludes live in the common git dir; the agent's checkout is a linked worktree and must honour them.
    repo.write(".git/info/exclude", "secret.txt\n");
    let make =
        "mkdir -p gen/sub && echo a > gen/sub/a.txt && echo l > gen/b.log && echo s > secret.txt \
                && chmod +x file.txt";
    let server = Server::start(vec![
        Reply::tool_calls(vec![call("run", json!({ "command": make }))]),
        Reply::tool_calls(vec![call(
            "run",
            json!({"command": "mv gen moved && rm README.md"}),
        )]),
        Reply::tool_calls(vec![call(
            "run",
            json!({"command": "echo b >> moved/sub/a.txt"}),
        )]),
        Reply::text("done"),
    ]);

    let out = run(repo
        .agent(&server, &["ask", "make things"])
        .env("GIT_AGENT_DEBUG", "1"));

    out.assert_code(0);
    let id = session_id(&repo);
    let steps: Vec<String> = agent_commits(&repo, &id)
        .iter()
        .map(|c| name_status(&repo, c))
        .collect();
    assert_eq!(
        steps,
        [
            "M\tfile.txt\nA\tgen/sub/a.txt\n",
            "D\tREADME.md\nD\tgen/sub/a.txt\nA\tmoved/sub/a.txt\n",
            "M\tmoved/sub/a.txt\n",
        ]
    );
    // The portable configuration has no inotify: it finds the same changes by scanning.
    if cfg!(all(target_os = "linux", not(git_agent_portable))) {
        // Found from events each time, not by the fallback scan.
        let stderr = out.stderr();
        assert_eq!(stderr.matches("from inotify events").count(), 3, "{stderr}");
        assert!(!stderr.contains("falls back"), "{stderr}");
    }
}

/// Issue 17 defect 8: names git refuses (macOS folds `.g\u{200c}it` to `.git`, Windows reads `.git.`, `git~1`
/// and `.git::$INDEX_ALLOCATION` as `.git`) are refused by the file tools before anything is written, and
/// when a command creates them they stay out of the step commit; the branch stays `git fsck --strict` clean.
#[test]
fn names_git_refuses_are_never_committed() {
    let repo = TestRepo::new();
    let before = user_state(&repo);
    let names = [
        ".g\u{200c}it/config",
        "\u{feff}.git/hooks/pre-commit",
        ".git./config",
        ".git /x",
        "git~1/HEAD",
        ".git::$INDEX_ALLOCATION/config",
        "src/GIT~1",
    ];
    let writes: Vec<_> = names
        .iter()
        .map(|n| call("write_file", json!({"path": n, "content": "[core]\n"})))
        .collect();
    let ok = call(
        "write_file",
        json!({"path": "fine.txt", "content": "fine\n"}),
    );
    let make = call(
        "run",
        json!({"command": "mkdir -p 'git~1' $'.gi\\xe2\\x80\\x8dt' && echo x > 'git~1/HEAD' && echo y > $'.gi\\xe2\\x80\\x8dt/config' && echo z > '.git.' && echo kept > kept.txt && echo made"}),
    );
    let mut first = writes.clone();
    first.push(ok);
    let server = Server::start(vec![
        Reply::tool_calls(first),
        Reply::tool_calls(vec![make.clone()]),
        Reply::text("done"),
    ]);
    let out = repo.run_agent(&server, &["ask", "make look-alikes"]);
    out.assert_code(0);
    let requests = server.requests();
    for (call, name) in writes.iter().zip(names) {
        let result = requests[1].tool_result(&call.id);
        assert!(
            result.contains("has a name git refuses") || result.contains("inside .git"),
            "{name}: {result}"
        );
    }
    assert!(requests[2].tool_result(&make.id).contains("made"));
    let id = session_id(&repo);
    let tree = repo.git(&["ls-tree", "-r", "--name-only", &format!("agent/{id}")]);
    assert_eq!(
        tree,
        "README.md\nfile.txt\nfine.txt\nkept.txt\n",
        "{}",
        out.stderr()
    );
    assert!(
        out.stderr().contains("git refuses the name"),
        "the withheld files are named: {}",
        out.stderr()
    );
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

/// Issue 17 defect 9: the file tools refuse paths inside a submodule as a tool error, and a command's files
/// there are withheld from the step, so the branch keeps the gitlink (plain git never turns it into a tree)
/// and the rest of the work lands.
#[test]
fn writes_inside_a_submodule_are_refused_and_the_gitlink_stays() {
    let repo = TestRepo::new();
    crate::common::add_submodule(&repo);
    let before = user_state(&repo);
    let write = call(
        "write_file",
        json!({"path": "sub/x.txt", "content": "agent's file in the submodule\n"}),
    );
    let nested = call(
        "write_file",
        json!({"path": "./sub/deep/y.txt", "content": "deeper\n"}),
    );
    let ok = call(
        "write_file",
        json!({"path": "fine.txt", "content": "fine\n"}),
    );
    let make = call(
        "run",
        json!({"command": "mkdir -p sub && echo z > sub/z.txt && echo kept > kept.txt && echo made"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![write.clone(), nested.clone(), ok.clone()]),
        Reply::tool_calls(vec![make.clone()]),
        Reply::text("done"),
    ]);
    let out = repo.run_agent(&server, &["ask", "write into the submodule"]);
    out.assert_code(0);
    let requests = server.requests();
    for refused in [&write, &nested] {
        let result = requests[1].tool_result(&refused.id);
        assert!(
            result.contains("inside the submodule 'sub'"),
            "{}: {result}",
            refused.arguments
        );
    }
    assert!(!requests[1].tool_result(&ok.id).contains("submodule"));
    assert!(requests[2].tool_result(&make.id).contains("made"));
    assert!(
        out.stderr()
            .contains("sub/z.txt was not committed: it is inside the submodule 'sub'"),
        "the withheld file is named: {}",
        out.stderr()
    );
    let id = session_id(&repo);
    let branch = format!("agent/{id}");
    let gitlink = repo.git(&["ls-tree", &branch, "sub"]);
    assert!(gitlink.starts_with("160000 commit "), "{gitlink}");
    assert_eq!(
        repo.git(&["ls-tree", "-r", "--name-only", &branch]),
        ".gitmodules\nREADME.md\nfile.txt\nfine.txt\nkept.txt\nsub\n"
    );
    // Plain git agrees with the branch: a fresh clone of it checks out and has the gitlink.
    let clone = repo.root().join("judge");
    let clone_dir = clone.to_str().unwrap();
    repo.git(&[
        "clone",
        "-q",
        "-b",
        &branch,
        repo.path().to_str().unwrap(),
        clone_dir,
    ]);
    assert!(repo
        .git(&["-C", clone_dir, "ls-files", "-s", "sub"])
        .starts_with("160000 "));
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

/// Issue 17 defect 9 under `--here`: the user's own submodule checkout is never written by the file tools.
#[test]
fn here_never_writes_into_the_users_submodule() {
    let repo = TestRepo::new();
    crate::common::add_submodule(&repo);
    let before = user_state(&repo);
    let write = call(
        "write_file",
        json!({"path": "sub/lib.txt", "content": "overwritten\n"}),
    );
    let edit = call(
        "edit_file",
        json!({"path": "sub/lib.txt", "old_string": "lib", "new_string": "bil"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![write.clone(), edit.clone()]),
        Reply::text("done"),
    ]);
    let out = repo.run_agent(&server, &["ask", "--here", "edit the submodule"]);
    out.assert_code(0);
    let requests = server.requests();
    for refused in [&write, &edit] {
        let result = requests[1].tool_result(&refused.id);
        assert!(result.contains("inside the submodule 'sub'"), "{result}");
    }
    assert_eq!(
        fs::read_to_string(repo.path().join("sub/lib.txt")).unwrap(),
        "lib\n"
    );
    let gitlink = repo.git(&["ls-tree", &format!("agent/{}", session_id(&repo)), "sub"]);
    assert!(gitlink.starts_with("160000 commit "), "{gitlink}");
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

/// Issue 17 defect 3: `git --git-dir=R/.git --work-tree=R agent ask` from outside the repository opens R (as
/// git would), and its commands still see neither the user's index nor `GIT_DIR`.
#[test]
fn git_dir_and_work_tree_from_git_are_honoured() {
    let repo = TestRepo::new();
    repo.write("staged.txt", "the user's staged work\n");
    repo.git(&["add", "staged.txt"]);
    let before = user_state(&repo);
    let add = call(
        "run",
        json!({"command": "echo new > added.txt && git add -A && git status --porcelain && echo \"dir=${GIT_DIR-unset}\""}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![add.clone()]),
        Reply::text("ok"),
    ]);
    let git_dir = format!("--git-dir={}", repo.path().join(".git").display());
    let work_tree = format!("--work-tree={}", repo.path().display());
    let out = run(repo
        .via(
            &server,
            "git",
            &[
                &git_dir,
                &work_tree,
                "agent",
                "ask",
                "--sandbox",
                "off",
                "stage everything",
            ],
        )
        .current_dir(repo.root()));
    out.assert_code(0);
    let result = server.requests()[1].tool_result(&add.id);
    assert!(result.contains("A  added.txt"), "{result}");
    assert!(!result.contains("staged.txt"), "{result}");
    assert!(result.contains("dir=unset"), "{result}");
    let id = session_id(&repo);
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:added.txt")]),
        "new\n"
    );
    // The user's staged file is theirs: captured as step 0, still staged in their index.
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

/// Issue 17 defect 3: started from a pre-commit hook (git exports `GIT_INDEX_FILE` and `GIT_DIR` to it), the
/// agent's commands stage into their own checkout's index; the user's commit holds exactly what they staged.
#[test]
fn an_agent_started_from_a_pre_commit_hook_leaves_the_commit_alone() {
    let repo = TestRepo::new();
    let hook = repo.path().join(".git/hooks/pre-commit");
    fs::write(
        &hook,
        "#!/bin/sh\nenv | grep -E '^GIT_(INDEX_FILE|DIR)=' > \"$(git rev-parse --git-dir)/hook-env\"\nexec git agent ask --sandbox off 'review the commit' </dev/null >/dev/null\n",
    )
    .unwrap();
    fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    repo.write("staged.txt", "to commit\n");
    repo.write("unstaged.txt", "not staged\n");
    repo.git(&["add", "staged.txt"]);
    let add = call(
        "run",
        json!({"command": "echo agent > agent.txt && git add -A && git status --porcelain"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![add.clone()]),
        Reply::text("ok"),
    ]);
    let out = run(&mut repo.via(&server, "git", &["commit", "-q", "-m", "user commit"]));
    out.assert_code(0);
    let env = fs::read_to_string(repo.path().join(".git/hook-env")).unwrap();
    assert!(
        env.contains("GIT_INDEX_FILE="),
        "git exports the index to the hook: {env}"
    );
    let result = server.requests()[1].tool_result(&add.id);
    assert!(result.contains("A  agent.txt"), "{result}");
    assert_eq!(
        repo.git(&["show", "--name-only", "--format=", "HEAD"]),
        "staged.txt\n",
        "the user's commit holds what they staged"
    );
    assert_eq!(repo.git(&["status", "--porcelain"]), "?? unstaged.txt\n");
    assert!(!repo.path().join("agent.txt").exists());
    let id = session_id(&repo);
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:agent.txt")]),
        "agent\n"
    );
    // Everything of the user's is as the same commit made without any hook leaves it (fixed dates and
    // identities: the twin's commit has the same id).
    let twin = TestRepo::new();
    twin.write("staged.txt", "to commit\n");
    twin.write("unstaged.txt", "not staged\n");
    twin.git(&["add", "staged.txt"]);
    twin.git(&["commit", "-q", "-m", "user commit"]);
    assert_eq!(user_state(&repo), user_state(&twin));
    fsck(&repo);
}

/// Issue 23, finding 3: `search` and `list_files` show nothing of the files `read_file` refuses by name
/// (keys, `.env`, SSH keys), in the session's checkout and under `--here` (where an untracked `server.key`
/// also stays out of step 0); a key body found in another file is redacted in the session log without its
/// BEGIN/END lines.
#[test]
fn search_and_list_skip_the_files_read_file_refuses() {
    const BODY: &str = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKB";
    for here in [false, true] {
        let repo = TestRepo::new();
        repo.write("certs/site.pem", &format!("MARKER-LINE {BODY}\n"));
        repo.write("id_ed25519", "MARKER-LINE ssh key\n");
        repo.write(".env", "MARKER-LINE=1\n");
        repo.write("notes.txt", "MARKER-LINE visible\n");
        repo.write("pasted.txt", &format!("{BODY}\n"));
        repo.commit_all("fixtures");
        repo.write("server.key", "MARKER-LINE untracked key\n");
        let search = call("search", json!({"pattern": "MARKER-LINE", "hidden": true}));
        let list = call("list_files", json!({"hidden": true}));
        let pasted = call("search", json!({"pattern": "MIIE"}));
        let server = Server::start(vec![
            Reply::tool_calls(vec![search.clone(), list.clone(), pasted.clone()]),
            Reply::text("done"),
        ]);
        let mut args = vec!["ask"];
        if here {
            args.push("--here");
        }
        args.push("look for the marker");
        let out = repo.run_agent(&server, &args);
        out.assert_code(0);
        let last = server.requests().pop().expect("the follow-up request");
        let found = last.tool_result(&search.id);
        assert!(found.contains("notes.txt"), "here={here}: {found}");
        let listed = last.tool_result(&list.id);
        assert!(listed.contains("notes.txt"), "here={here}: {listed}");
        for secret in ["site.pem", "id_ed25519", ".env", "server.key"] {
            assert!(!found.contains(secret), "here={here}: {secret} in {found}");
            assert!(
                !listed.contains(secret),
                "here={here}: {secret} in {listed}"
            );
        }
        let pasted = last.tool_result(&pasted.id);
        assert!(pasted.contains("pasted.txt"), "here={here}: {pasted}");
        // The session log (which `push` shares) holds the result with the key body redacted.
        let id = session_id(&repo);
        let log = repo.git(&[
            "show",
            &format!("refs/agent/sessions/{id}:events/0000000000.jsonl"),
        ]);
        assert!(log.contains("pasted.txt"), "here={here}: {log}");
        assert!(!log.contains(BODY), "here={here}: {log}");
        if here {
            let tree = repo.git(&["ls-tree", "-r", "--name-only", &format!("agent/{id}")]);
            assert!(!tree.contains("server.key"), "step 0 took the key: {tree}");
        }
    }
}
