//! `git agent trust` and the one trust model (issue 22, finding 6): a fresh clone's `check` and
//! `.mcp.json` run nothing until the user trusted their exact content; a change needs trust again; a check
//! of the user's own needs none. Each check here appends to a marker file outside the repository, so "runs
//! nothing" is proven by the file, not by the exit code.

use std::fs;
use std::path::{Path, PathBuf};

use crate::common::server::Server;
use crate::common::tmux::{self, Tmux};
use crate::common::{run, Output, TestRepo};

/// The upstream repository, whose `.git-agent.toml` check appends a line to `marker`.
fn upstream(marker: &Path, extra: &str) -> TestRepo {
    let repo = TestRepo::new();
    repo.write(
        ".git-agent.toml",
        &format!("check = \"echo ran >> {}{extra}\"\n", marker.display()),
    );
    repo.commit_all("a check");
    repo
}

/// A fresh clone of `upstream` next to it, as a user would make it.
fn clone(upstream: &TestRepo) -> PathBuf {
    let dir = upstream.root().join("clone");
    upstream.git(&[
        "clone",
        "-q",
        &upstream.path().display().to_string(),
        &dir.display().to_string(),
    ]);
    dir
}

/// `git agent args` in `dir`, with `repo`'s hermetic environment (its HOME holds the user's trust).
fn agent_in(repo: &TestRepo, dir: &Path, args: &[&str]) -> Output {
    let server = Server::start(vec![]);
    let mut cmd = repo.agent(&server, args);
    cmd.current_dir(dir);
    run(&mut cmd)
}

fn runs(marker: &Path) -> usize {
    fs::read_to_string(marker).map_or(0, |text| text.lines().count())
}

#[test]
fn a_fresh_clones_check_runs_only_once_trusted_and_again_only_after_a_change_is_trusted() {
    let marker =
        std::env::temp_dir().join(format!("git-agent-trust-marker-{}", std::process::id()));
    let _ = fs::remove_file(&marker);
    let origin = upstream(&marker, "");
    let clone = clone(&origin);

    // No terminal: refused with the hint, nothing run.
    let out = agent_in(&origin, &clone, &["fix"]);
    out.assert_code(1);
    assert_eq!(
        out.first_stderr_line(),
        "error: the check in .git-agent.toml is not trusted yet: nothing was run",
        "{out}"
    );
    assert!(
        out.stderr()
            .contains("hint: read what the repository asks to run and trust it: git agent trust"),
        "{out}"
    );
    assert!(out.stderr().contains("git agent fix --check CMD"), "{out}");
    assert_eq!(runs(&marker), 0, "the check ran: {out}");

    // --list shows and trusts nothing.
    let out = agent_in(&origin, &clone, &["trust", "--list"]);
    out.assert_code(0);
    assert!(out.stdout().contains("check (a shell command run by fix and the git hooks) in .git-agent.toml [not trusted]:"), "{out}");
    assert!(
        out.stdout()
            .contains(&format!("  echo ran >> {}", marker.display())),
        "{out}"
    );
    agent_in(&origin, &clone, &["fix"]).assert_code(1);
    assert_eq!(runs(&marker), 0);

    // `git agent trust` is the consent; then the check runs.
    let out = agent_in(&origin, &clone, &["trust"]);
    out.assert_code(0);
    assert!(
        out.stdout().contains("[not trusted]:") && out.stdout().contains("trusted as shown"),
        "{out}"
    );
    let out = agent_in(&origin, &clone, &["fix"]);
    out.assert_code(0);
    assert_eq!(runs(&marker), 1, "{out}");
    agent_in(&origin, &clone, &["trust", "--list"])
        .stdout()
        .contains("[trusted]:")
        .then_some(())
        .expect("listed as trusted");

    // A pull changes the check: it needs trust again, and the hook path refuses too.
    origin.write(
        ".git-agent.toml",
        &format!(
            "check = \"echo ran >> {} && echo pwned\"\n",
            marker.display()
        ),
    );
    origin.commit_all("a changed check");
    let pull = run(std::process::Command::new("git")
        .args([
            "-C",
            &clone.display().to_string(),
            "pull",
            "-q",
            "--ff-only",
        ])
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1"));
    pull.assert_code(0);
    let out = agent_in(&origin, &clone, &["fix"]);
    out.assert_code(1);
    assert_eq!(
        out.first_stderr_line(),
        "error: the check in .git-agent.toml changed since you trusted it: nothing was run",
        "{out}"
    );
    let out = agent_in(&origin, &clone, &["hook", "run", "pre-commit"]);
    assert_ne!(out.code(), 0, "{out}");
    assert!(
        out.stderr().contains("changed since you trusted it"),
        "{out}"
    );
    assert_eq!(runs(&marker), 1, "a changed check ran: {out}");
    let out = agent_in(&origin, &clone, &["trust", "--list"]);
    assert!(
        out.stdout().contains("[changed since you trusted it]:"),
        "{out}"
    );
    assert!(out.stdout().contains("&& echo pwned"), "{out}");

    // A check on the command line is the user's own.
    let mine = format!("echo mine >> {}", marker.display());
    agent_in(&origin, &clone, &["fix", "--check", &mine]).assert_code(0);
    assert_eq!(runs(&marker), 2);

    agent_in(&origin, &clone, &["trust"]).assert_code(0);
    agent_in(&origin, &clone, &["fix"]).assert_code(0);
    assert_eq!(runs(&marker), 3);
    let _ = fs::remove_file(&marker);
}

#[test]
fn trust_shows_control_characters_and_covers_the_mcp_file() {
    let marker = std::env::temp_dir().join(format!("git-agent-trust-esc-{}", std::process::id()));
    // TOML's \u escapes put raw ESC and a right-to-left override into the command.
    let origin = upstream(&marker, "\\u001b[2K\\u202e #");
    origin.write(
        ".mcp.json",
        "{\"mcpServers\": {\"tools\": {\"command\": \"no-such-server\", \"args\": [\"\\u001b]52;c;aGk=\\u0007\"]}}}\n",
    );
    origin.commit_all("an mcp file");
    let out = agent_in(&origin, origin.path(), &["trust"]);
    out.assert_code(0);
    assert!(
        !out.stdout().contains('\x1b') && !out.stdout().contains('\u{202e}'),
        "{out}"
    );
    assert!(out.stdout().contains("\\x1b[2K\\u{202e} #"), "{out}");
    assert!(
        out.stdout().contains(
            "MCP servers (programs and endpoints sessions start) in .mcp.json [not trusted]:"
        ),
        "{out}"
    );
    // `git agent trust` trusted the .mcp.json too: `mcp list` no longer holds it back.
    let out = agent_in(&origin, origin.path(), &["mcp", "list"]);
    out.assert_code(0);
    assert!(!out.stdout().contains("untrusted"), "{out}");
    assert!(out.stdout().contains("tools"), "{out}");
    // The user's own `config set --repo check` is theirs: it runs without a separate trust.
    let mine = format!("echo set >> {}", marker.display());
    agent_in(
        &origin,
        origin.path(),
        &["config", "set", "--repo", "check", &mine],
    )
    .assert_code(0);
    agent_in(&origin, origin.path(), &["fix"]).assert_code(0);
    assert_eq!(fs::read_to_string(&marker).unwrap_or_default(), "set\n");
    let _ = fs::remove_file(&marker);
}

#[test]
fn on_a_terminal_an_untrusted_check_is_shown_with_escapes_visible_and_asked_y_n() {
    if !tmux::available() {
        return;
    }
    let marker = std::env::temp_dir().join(format!("git-agent-trust-tty-{}", std::process::id()));
    let _ = fs::remove_file(&marker);
    let origin = TestRepo::new();
    // The escape sequence would clear the screen if printed raw.
    origin.write(
        ".git-agent.toml",
        &format!("check = \"echo ran \\u001b[2J >> {}\"\n", marker.display()),
    );
    origin.commit_all("a check");
    let clone = clone(&origin);
    let server = Server::start(vec![]);
    let fix = || {
        let mut cmd = origin.agent(&server, &["fix"]);
        cmd.current_dir(&clone);
        cmd
    };

    let tmux = Tmux::start(&origin, &fix(), 30, 200);
    let screen = tmux.wait_for("the question", |s| s.contains("[y/N]"));
    assert!(
        screen.contains(".git-agent.toml asks to run its check")
            && screen.contains("is not trusted yet"),
        "{screen}"
    );
    assert!(screen.contains("echo ran \\x1b[2J >> "), "{screen}");
    tmux.type_line("n");
    let screen = tmux.wait_for("the refusal", |s| s.contains("nothing was run"));
    assert!(
        screen.contains("hint: read what the repository asks to run"),
        "{screen}"
    );
    assert_eq!(runs(&marker), 0, "{screen}");

    let tmux = Tmux::start(&origin, &fix(), 30, 200);
    tmux.wait_for("the question", |s| s.contains("[y/N]"));
    tmux.type_line("y");
    let screen = tmux.wait_for("the check's result", |s| s.contains("passes"));
    assert_eq!(runs(&marker), 1, "{screen}");
    // The yes was recorded: without a terminal it runs now.
    agent_in(&origin, &clone, &["fix"]).assert_code(0);
    assert_eq!(runs(&marker), 2);
    let _ = fs::remove_file(&marker);
}
