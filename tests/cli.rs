//! The command line as a user meets it: help, version, usage errors, and the man pages behind `git help agent`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{agent_commits, call, fsck, run, session_id, Gate, Reply, Server, TestRepo};

fn agent_bin() -> &'static str {
    env!("CARGO_BIN_EXE_git-agent")
}

fn man_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("man")
}

/// The subcommands listed under "Commands:" in `git-agent --help` (without clap's own `help`).
fn listed_commands() -> Vec<String> {
    commands_in(&help_of(&[]))
}

#[test]
fn every_subcommand_has_a_man_page_and_its_own_help() {
    let commands = listed_commands();
    assert!(commands.contains(&"ask".to_string()), "{commands:?}");
    let overview = std::fs::read_to_string(man_dir().join("git-agent.1")).expect("man/git-agent.1");
    for name in &commands {
        let page = man_dir().join(format!("git-agent-{name}.1"));
        assert!(page.exists(), "missing man page {}", page.display());
        assert!(
            overview.contains(&format!("\\fB{name}\\fR")),
            "git-agent.1 does not list {name}"
        );
        let out = Command::new(agent_bin())
            .args([name.as_str(), "--help"])
            .output()
            .expect("run help");
        assert!(out.status.success(), "{name} --help failed");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage: git agent"),
            "{name} --help"
        );
    }
}

/// The `--help` text of `git-agent ARGS... --help`.
fn help_of(args: &[&str]) -> String {
    let out = Command::new(agent_bin())
        .args(args)
        .arg("--help")
        .output()
        .expect("run --help");
    assert!(out.status.success(), "git-agent {args:?} --help failed");
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

/// The subcommands a help text lists under "Commands:", without clap's own `help`.
fn commands_in(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// The long flags a help text lists (under any heading), without clap's own `--help` and `--version`. A flag
/// line is indented 2 (`  -m, --model <M>`) or 6 (`      --json`) columns; descriptions are indented deeper.
fn long_flags_in(help: &str) -> Vec<String> {
    let mut flags = Vec::new();
    for line in help.lines() {
        let text = line.trim_start();
        if !text.starts_with('-') || line.len() - text.len() > 6 {
            continue;
        }
        for word in text.split([' ', ',', '=', '<', '[']) {
            let is_own = word == "--help" || word == "--version";
            if word.len() > 2
                && word.starts_with("--")
                && !is_own
                && !flags.contains(&word.to_string())
            {
                flags.push(word.to_string());
            }
        }
    }
    flags
}

/// The long flags of a subcommand and of every subcommand under it (`memory add`, `mcp check`, ...), each
/// with the command line that takes it.
fn long_flags_of(path: &[&str]) -> Vec<(String, String)> {
    let help = help_of(path);
    let mut flags: Vec<(String, String)> = long_flags_in(&help)
        .into_iter()
        .map(|flag| (path.join(" "), flag))
        .collect();
    for sub in commands_in(&help) {
        let mut deeper = path.to_vec();
        deeper.push(&sub);
        flags.extend(long_flags_of(&deeper));
    }
    flags
}

/// A man page's text with roff's escaped hyphens (`\-`) made plain, so that `--no-memory` is found as typed.
fn man_page_text(name: &str) -> String {
    let page = man_dir().join(name);
    let roff = std::fs::read_to_string(&page).unwrap_or_else(|e| {
        panic!(
            "cannot read the man page {} ({e}): every subcommand needs one in man/",
            page.display()
        )
    });
    roff.replace("\\-", "-")
}

/// True when `text` has `flag` as a whole word (`--max` is not found in `--max-steps`).
fn names_flag(text: &str, flag: &str) -> bool {
    text.match_indices(flag).any(|(at, _)| {
        let next = text[at + flag.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

/// Every long flag of every subcommand (and of the subcommands under it) is described in the subcommand's man
/// page `man/git-agent-<cmd>.1`, and the top-level flags in `git-agent.1`: walked from the binary's `--help`
/// output, so a new flag or subcommand without documentation fails here by name.
#[test]
fn every_long_flag_is_in_its_man_page() {
    let mut missing = Vec::new();
    let overview = man_page_text("git-agent.1");
    for flag in long_flags_in(&help_of(&[])) {
        if !names_flag(&overview, &flag) {
            missing.push(format!("git-agent.1 lacks {flag} (of git agent)"));
        }
    }
    let commands = listed_commands();
    assert!(commands.contains(&"ask".to_string()), "{commands:?}");
    for name in &commands {
        let page_name = format!("git-agent-{name}.1");
        let page = man_page_text(&page_name);
        for (command, flag) in long_flags_of(&[name]) {
            if !names_flag(&page, &flag) {
                missing.push(format!("{page_name} lacks {flag} (of git agent {command})"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "flags missing from their man pages (add each to the page's OPTIONS):\n{}",
        missing.join("\n")
    );
}

#[test]
fn version_and_usage_errors() {
    let out = Command::new(agent_bin())
        .arg("--version")
        .output()
        .expect("run --version");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        concat!("git-agent ", env!("CARGO_PKG_VERSION"))
    );

    // -V says the same; a version that cannot be written is an error.
    let short = Command::new(agent_bin())
        .arg("-V")
        .output()
        .expect("run -V");
    assert_eq!(short.stdout, out.stdout);
    let full = Command::new(agent_bin())
        .arg("--version")
        .stdout(std::fs::File::create("/dev/full").expect("open /dev/full"))
        .output()
        .expect("run --version > /dev/full");
    assert_eq!(full.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&full.stderr),
        "git-agent: error: cannot write the version to standard output\n"
    );

    let out = Command::new(agent_bin())
        .args(["ask", "--no-such-flag", "x"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "usage errors exit 2");
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "));

    let out = Command::new(agent_bin()).arg("ask").output().expect("run");
    assert_eq!(
        out.status.code(),
        Some(2),
        "a missing prompt is a usage error"
    );
}

/// What std's runtime did before `main`, which the binary now does itself on glibc (src/sys/entry.rs): a
/// write to a pipe nobody reads is an error, not a SIGPIPE that kills the agent; a standard stream the agent
/// starts without is `/dev/null` for the whole session, so no file or socket it opens takes that number
/// (what it prints would go there, and commands that inherit the stream would write into it).
#[test]
fn broken_pipes_are_errors_and_closed_standard_streams_are_filled() {
    use std::os::unix::process::ExitStatusExt;
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let status = Command::new(agent_bin())
        .arg("--help")
        .stdout(writer)
        .status()
        .expect("run --help");
    assert_eq!(status.signal(), None, "killed by a signal: {status:?}");

    let repo = TestRepo::new();
    let gate = Gate::new();
    let server = Server::start(vec![
        Reply::tool_calls(vec![call("run", json!({"command": "echo hi > new.txt"}))]).held(&gate),
        Reply::text("Created new.txt."),
    ]);
    // `exec` keeps the shell's pid: the child is the agent, started with stdin and stdout closed.
    let mut agent = repo
        .via(
            &server,
            "sh",
            &["-c", "exec git-agent ask 'create new.txt' <&- >&-"],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the agent");
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.requests().is_empty() {
        assert!(Instant::now() < deadline, "no request arrived");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The session is under way (its journal, its runtime, its connection are open): 0 and 1 are /dev/null.
    let fds = format!("/proc/{}/fd", agent.id());
    let standard: Vec<PathBuf> = (0..2)
        .map(|n| std::fs::read_link(format!("{fds}/{n}")).expect("the descriptor is open"))
        .collect();
    gate.open();
    let status = agent.wait().expect("the agent ends");
    assert_eq!(standard, [Path::new("/dev/null"), Path::new("/dev/null")]);
    assert!(status.success(), "{status:?}");
    let id = session_id(&repo);
    assert_eq!(agent_commits(&repo, &id).len(), 1);
    fsck(&repo);
}

#[test]
fn empty_prompt_is_refused_before_anything_happens() {
    let repo = TestRepo::new();
    let server = crate::common::Server::start(vec![]);
    let mut cmd = repo.agent(&server, &["ask", "  "]);
    let out = run(&mut cmd);
    out.assert_code(1);
    assert!(out.first_stderr_line().contains("prompt is empty"), "{out}");
    assert!(server.requests().is_empty());
}

/// `git agent --help` is turned by git into `git help agent`, which opens `git-agent(1)` with man.
#[test]
#[ignore = "needs man (man-db): run by .ci/run"]
fn git_help_agent_opens_the_man_page() {
    assert!(
        Command::new("man").arg("--version").output().is_ok(),
        "man is not installed: this test opens the pages with it; apt-get install man-db (.ci/run does)"
    );
    let repo = TestRepo::new();
    let manpath = repo.root().join("share/man");
    let man1 = manpath.join("man1");
    std::fs::create_dir_all(&man1).expect("create man1");
    for entry in std::fs::read_dir(man_dir()).expect("read man/") {
        let path = entry.expect("dir entry").path();
        std::fs::copy(&path, man1.join(path.file_name().expect("file name"))).expect("copy page");
    }
    let bin_dir = Path::new(agent_bin()).parent().expect("bin dir");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for args in [&["help", "agent"][..], &["agent", "--help"][..]] {
        let out = Command::new("git")
            .args(args)
            .current_dir(repo.path())
            .env("PATH", &path)
            .env("MANPATH", &manpath)
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .env("MANWIDTH", "100")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("run git help");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("git-agent - a git-native coding agent"),
            "git {args:?} showed:\n{text}"
        );
    }
}

/// The command edge: one `error:` line first, hints on `hint:` lines after it, the exit code by kind; with
/// `--json` the same error is also an `error` event on stdout, and nothing else is there.
#[test]
fn errors_have_one_first_line_hints_after_and_a_json_event() {
    let repo = TestRepo::new();
    let server = crate::common::Server::start(vec![]);
    let out = repo.run_agent(&server, &["ask", "--json", "--deny", "Frob(x)", "look"]);
    out.assert_code(1);
    assert!(
        out.first_stderr_line()
            .starts_with("error: invalid permission rule 'Frob(x)'"),
        "{out}"
    );
    let events: Vec<serde_json::Value> = out
        .stdout()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert_eq!(events.len(), 1, "{out}");
    assert_eq!(events[0]["type"], "error");
    assert!(events[0]["message"]
        .as_str()
        .unwrap_or_default()
        .starts_with("invalid permission rule 'Frob(x)'"));

    // Outside a repository: the one line says what is wrong and what to do; no session yet: the same.
    let outside = repo.root().join("not-a-repo");
    std::fs::create_dir_all(&outside).expect("create a directory");
    let mut cmd = repo.agent(&server, &["accept"]);
    cmd.current_dir(&outside);
    let out = run(&mut cmd);
    out.assert_code(1);
    assert_eq!(out.stderr().lines().count(), 1, "{out}");
    assert!(
        out.first_stderr_line()
            .starts_with("error: not a git repository"),
        "{out}"
    );
    let out = repo.run_agent(&server, &["show"]);
    out.assert_code(1);
    assert_eq!(
        out.stderr(),
        "error: there are no sessions yet: start one with `git agent ask`\n"
    );
    assert!(out.stdout().is_empty(), "{out}");
    assert!(server.requests().is_empty());
}
