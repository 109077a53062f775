//! Text from outside the user's hands (issue 22, findings 8-10, and the defects of the same sweep): printers
//! of pulled and model text show no raw escape or bidi byte; commit messages made from model text carry
//! git-agent's trailers and no other (judged by `git interpret-trailers --parse`); secrets are redacted in the
//! session log whatever JSON escaping does around them; edited hooks survive install and uninstall; long PR
//! bodies reach `glab`/`tea`; `review --send=-...` is a prompt; a multi-turn PR body lists every prompt.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::common::landing::{agent, session};
use crate::common::{call, fsck, run, user_state, Output, Reply, Server, TestRepo};

const OSC52: &str = "\u{1b}]52;c;cm0gLXJmIH4=\u{7}";
const CLEAR: &str = "\u{1b}[2J";
const LINE: &str = "\r\u{1b}[K";
const BIDI: &str = "\u{202e}";

/// Every hostile sequence at once.
fn hostile(word: &str) -> String {
    format!("{word}{OSC52}{CLEAR}{LINE}{BIDI}")
}

/// No raw ESC, BEL, CR or bidi override reached stdout or stderr of `out`.
fn assert_neutral(out: &Output, what: &str) {
    for (stream, text) in [("stdout", out.stdout()), ("stderr", out.stderr())] {
        for raw in ['\u{1b}', '\u{7}', '\r', '\u{202e}'] {
            assert!(
                !text.contains(raw),
                "{what}: {raw:?} reached {stream}:\n{text:?}"
            );
        }
    }
}

/// A `git` run in `repo` with extra environment, stdin from `input`; its stdout.
fn git_with(repo: &TestRepo, env: &[(&str, &str)], args: &[&str], input: Option<&str>) -> String {
    use std::io::Write;
    let mut cmd = Command::new("git");
    cmd.current_dir(repo.path())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.unwrap_or_default().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "git {args:?} failed");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn skill_warnings_and_distill_show_no_raw_escape() {
    let repo = TestRepo::new();
    // A cloned repository's skill folder whose name carries the sequences, and whose SKILL.md names
    // another skill: `skill list` warns about it, naming the folder.
    let folder = repo.path().join(".agents/skills").join(hostile("bad"));
    fs::create_dir_all(&folder).unwrap();
    fs::write(
        folder.join("SKILL.md"),
        "---\nname: other\ndescription: Mismatched name.\n---\nBody\n",
    )
    .unwrap();
    let list = agent(&repo, &["skill", "list"]);
    assert!(list.stderr().contains("warning: skill"), "{list}");
    assert_neutral(&list, "skill list");
    let json = agent(&repo, &["skill", "list", "--json"]);
    assert!(json.stdout().contains("\"problem\""), "{json}");
    assert_neutral(&json, "skill list --json");
    let import = agent(&repo, &["skill", "import"]);
    assert!(import.stderr().contains("warning: skill"), "{import}");
    assert_neutral(&import, "skill import");

    // `skill distill`: the model's description (and its name line) are shown neutralised.
    let id = session(
        &repo,
        "Add a file",
        vec![
            Reply::text_and_tool_calls(
                "Writing it.",
                vec![call(
                    "write_file",
                    json!({"path": "a.txt", "content": "a\n"}),
                )],
            ),
            Reply::text("Done."),
        ],
    );
    let server = Server::start(vec![Reply::text(&format!(
        "---\nname: add-file\ndescription: Adds a file{OSC52} {CLEAR}quietly{BIDI} now\n---\n\nWrite the file.\n"
    ))]);
    let distill = repo.run_agent(&server, &["skill", "distill", &id]);
    distill.assert_code(0);
    assert!(
        distill.stderr().contains("proposed skill add-file"),
        "{distill}"
    );
    assert_neutral(&distill, "skill distill");
}

#[test]
fn memory_list_and_show_neutralise_a_pulled_id() {
    let repo = TestRepo::new();
    agent(&repo, &["memory", "add", "Tests run with cargo test"]).assert_code(0);
    let list = agent(&repo, &["memory", "list"]);
    list.assert_code(0);
    let id = list.stdout().split_whitespace().next().unwrap().to_owned();
    // What a hostile remote could push: the same entry, its id carrying the sequences (JSON-escaped in
    // the blobs), written with plain git.
    let evil_json = serde_json::to_string(&hostile(&id)).unwrap();
    let evil_json = &evil_json[1..evil_json.len() - 1];
    let index = repo.root().join("memory.index");
    let index_s = index.to_str().unwrap();
    let env = [("GIT_INDEX_FILE", index_s)];
    git_with(&repo, &env, &["read-tree", "refs/agent/memory"], None);
    let files = git_with(&repo, &env, &["ls-files", "-s"], None);
    for line in files.lines() {
        let (meta, path) = line.split_once('\t').unwrap();
        let blob = meta.split_whitespace().nth(1).unwrap();
        let text = repo.git(&["cat-file", "blob", blob]);
        if !text.contains(&id) {
            continue;
        }
        let changed = text.replace(&id, evil_json);
        let new = git_with(
            &repo,
            &[],
            &["hash-object", "-w", "--stdin"],
            Some(&changed),
        );
        git_with(
            &repo,
            &env,
            &[
                "update-index",
                "--cacheinfo",
                &format!("100644,{},{path}", new.trim()),
            ],
            None,
        );
    }
    let tree = git_with(&repo, &env, &["write-tree"], None);
    let old = repo.git(&["rev-parse", "refs/agent/memory"]);
    let commit = repo.git(&[
        "commit-tree",
        tree.trim(),
        "-p",
        old.trim(),
        "-m",
        "hostile id",
    ]);
    repo.git(&["update-ref", "refs/agent/memory", commit.trim(), old.trim()]);

    let list = agent(&repo, &["memory", "list"]);
    list.assert_code(0);
    assert!(list.stdout().contains(&id), "{list}");
    assert_neutral(&list, "memory list");
    let show = agent(&repo, &["memory", "show", &id]);
    assert_neutral(&show, "memory show");
    for args in [
        &["memory", "list", "--json"][..],
        &["memory", "show", "--json", &id],
    ] {
        let out = agent(&repo, args);
        out.assert_code(0);
        assert!(out.stdout().contains(&id), "{out}");
        assert_neutral(&out, &args.join(" "));
    }
}

/// The hostile reason of a step, as a model could write it: escapes, the subject repeated as the first
/// body line, and a `---` divider followed by trailers of its own.
fn hostile_reason() -> String {
    format!(
        "Rename the greeting{BIDI}\nRename the greeting\n\nBecause it{CLEAR} reads better.\n---\nSigned-off-by: Mallory <m@evil.example>\nAgent-Session: forged"
    )
}

#[test]
fn accept_series_messages_carry_only_git_agents_trailers_and_no_escape() {
    let repo = TestRepo::new();
    let id = session(
        &repo,
        &format!("Rename it{OSC52}"),
        vec![
            Reply::text_and_tool_calls(
                &hostile_reason(),
                vec![call(
                    "edit_file",
                    json!({"path": "file.txt", "old_string": "two", "new_string": "TWO"}),
                )],
            ),
            Reply::text("Renamed."),
        ],
    );
    // `log` shows the session's prompt: neutralised.
    let log = agent(&repo, &["log"]);
    log.assert_code(0);
    assert!(log.stdout().contains(&id), "{log}");
    assert_neutral(&log, "log");

    let out = agent(&repo, &["accept", "--commit", "--series", &id]);
    out.assert_code(0);
    assert!(out.stderr().contains("step 1: committed"), "{out}");
    assert_neutral(&out, "accept --series");

    let message = repo.git(&["log", "-1", "--format=%B", "HEAD"]);
    assert!(
        !message.contains('\u{1b}') && !message.contains(BIDI),
        "{message:?}"
    );
    let mut lines = message.lines();
    let subject = lines.next().unwrap();
    assert_eq!(subject, "Rename the greeting");
    assert_eq!(lines.next(), Some(""));
    assert_eq!(
        lines.next(),
        Some("Because it[2J reads better."),
        "the subject is not repeated as the body's first line:\n{message}"
    );
    let parsed = git_with(
        &repo,
        &[],
        &["interpret-trailers", "--parse"],
        Some(&message),
    );
    let keys: Vec<&str> = parsed
        .lines()
        .map(|l| l.split_once(':').unwrap().0)
        .collect();
    assert_eq!(
        keys,
        ["Agent-Session", "Agent-Step", "Co-authored-by"],
        "only git-agent's trailers:\n{parsed}\nof:\n{message}"
    );
    assert!(parsed.contains(&format!("Agent-Session: {id}")), "{parsed}");
    fsck(&repo);
}

/// A 40-character AWS secret key, and a GitHub token, in several places of a session: after a newline in a
/// tool result and in a message, and right after a control character (JSON-escaped as `\u001b`, which hid it
/// from a redactor that read the serialised line).
#[test]
fn secrets_are_redacted_in_the_session_log_as_decoded_text() {
    const AWS: &str = "Zt9+k2ab/Qw8XyLmNoPqRsTuVwXyZaBcDeFgHiJk";
    const GH: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let repo = TestRepo::new();
    repo.write(
        "creds.txt",
        &format!("[default]\naws_secret_access_key = {AWS}\n"),
    );
    repo.commit_all("credentials, as some repositories have them");
    let id = session(
        &repo,
        "Look at the config",
        vec![
            Reply::tool_calls(vec![call(
                "run",
                json!({"command": format!("cat creds.txt; printf '\\033'; echo {GH}")}),
            )]),
            Reply::text(&format!(
                "Found it:\naws_secret_access_key = {AWS}\n\u{1b}{GH}\n"
            )),
        ],
    );
    let log_ref = format!("refs/agent/sessions/{id}");
    let files = repo.git(&["ls-tree", "-r", "--name-only", &log_ref]);
    let mut all = repo.git(&["log", "--format=%B", &log_ref]);
    for file in files.lines() {
        all.push_str(&repo.git(&["cat-file", "blob", &format!("{log_ref}:{file}")]));
    }
    assert!(
        all.contains("aws_secret_access_key"),
        "the log holds the text:\n{all}"
    );
    assert!(!all.contains(AWS), "the AWS key reached git:\n{all}");
    assert!(!all.contains(GH), "the GitHub token reached git:\n{all}");
    assert!(all.contains("[REDACTED:aws-secret-key]"), "{all}");
}

fn hook(repo: &TestRepo) -> PathBuf {
    repo.path().join(".git/hooks/pre-commit")
}

#[test]
fn hook_install_and_uninstall_keep_the_users_edits() {
    let repo = TestRepo::new();
    agent(&repo, &["hook", "install"]).assert_code(0);
    let pristine = fs::read_to_string(hook(&repo)).unwrap();
    let edited = format!("{pristine}echo my own line\n");
    fs::write(hook(&repo), &edited).unwrap();
    let kept = repo.path().join(".git/hooks/pre-commit.git-agent-edited");

    // Installing again (another mode) over the edited hook: the edits are kept aside, and said so.
    let out = agent(&repo, &["hook", "install", "--mode", "check"]);
    out.assert_code(0);
    assert!(out.stderr().contains("edits of yours"), "{out}");
    assert_eq!(fs::read_to_string(&kept).unwrap(), edited);
    assert!(!fs::read_to_string(hook(&repo))
        .unwrap()
        .contains("my own line"));

    // Edited again: uninstall keeps nothing new while the earlier copy is there, and changes nothing.
    let again = format!(
        "{}echo second edit\n",
        fs::read_to_string(hook(&repo)).unwrap()
    );
    fs::write(hook(&repo), &again).unwrap();
    let out = agent(&repo, &["hook", "uninstall"]);
    out.assert_code(1);
    assert!(out.first_stderr_line().contains("exists already"), "{out}");
    assert_eq!(fs::read_to_string(hook(&repo)).unwrap(), again);
    // With the copy moved away, uninstall keeps the edited hook and removes it.
    fs::remove_file(&kept).unwrap();
    let out = agent(&repo, &["hook", "uninstall"]);
    out.assert_code(0);
    assert!(out.stderr().contains("edits of yours"), "{out}");
    assert!(!hook(&repo).exists());
    assert_eq!(fs::read_to_string(&kept).unwrap(), again);
    assert!(fs::metadata(&kept).unwrap().permissions().mode() & 0o100 != 0);

    // A pristine hook is removed as before, nothing kept.
    fs::remove_file(&kept).unwrap();
    agent(&repo, &["hook", "install"]).assert_code(0);
    agent(&repo, &["hook", "uninstall"]).assert_code(0);
    assert!(!hook(&repo).exists() && !kept.exists());
}

/// A repository whose `main` is pushed, with upstream, to a bare `remote.git`.
fn with_remote(repo: &TestRepo) {
    let bare = repo.root().join("remote.git");
    repo.git(&["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()]);
    repo.git(&["remote", "add", "origin", bare.to_str().unwrap()]);
    repo.git(&["push", "-q", "-u", "origin", "main"]);
}

/// A forge CLI double named `name` in `<root>/bin-<name>`: `--help` prints `help`; otherwise it records each
/// argument's length and the argument itself when short, one a line, in `<root>/<name>.log`.
fn forge_double(root: &Path, name: &str, help: &str) -> (PathBuf, PathBuf) {
    let bin = root.join(format!("bin-{name}"));
    fs::create_dir_all(&bin).unwrap();
    let log = root.join(format!("{name}.log"));
    let script = bin.join(name);
    fs::write(
        &script,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = --help ] && {{ echo '{help}'; exit 0; }}; done\n\
             for a in \"$@\"; do if [ ${{#a}} -gt 200 ]; then echo \"long:${{#a}}\" >> '{log}'; \
             else printf '%s\\n' \"$a\" >> '{log}'; fi; done\n",
            log = log.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    (bin, log)
}

/// A session whose prompt (quoted in the body) is over 200 KB, given on stdin.
fn long_prompt_session(repo: &TestRepo) -> String {
    let prompt: String = (0..4000)
        .map(|n| format!("Line {n:05} of a long prompt, repeated to pass 200 KB of body.\n"))
        .collect();
    assert!(prompt.len() > 200 * 1024);
    let file = repo.root().join("prompt.txt");
    fs::write(&file, &prompt).unwrap();
    let server = Server::start(vec![
        Reply::text_and_tool_calls(
            "Writing it.",
            vec![call(
                "write_file",
                json!({"path": "a.txt", "content": "a\n"}),
            )],
        ),
        Reply::text("Done."),
    ]);
    let mut cmd = repo.agent(&server, &["ask", "-"]);
    cmd.stdin(fs::File::open(&file).unwrap());
    run(&mut cmd).assert_code(0);
    crate::common::session_id(repo)
}

#[test]
fn pr_through_glab_and_tea_survives_a_200_kb_body() {
    let repo = TestRepo::new();
    with_remote(&repo);
    let id = long_prompt_session(&repo);
    let body_file = repo.path().join(format!(".git/agent/pr/{id}.md"));

    // glab with --description-file: the body goes through the file.
    let (bin, log) = forge_double(
        repo.root(),
        "glab",
        "  --description-file string  Read the description from a file",
    );
    let server = Server::start(vec![]);
    let mut cmd = repo.agent(&server, &["pr", &id]);
    cmd.env(
        "PATH",
        format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
    );
    let out = run(&mut cmd);
    out.assert_code(0);
    let args = fs::read_to_string(&log).unwrap();
    let args: Vec<&str> = args.lines().collect();
    let at = args
        .iter()
        .position(|a| *a == "--description-file")
        .unwrap();
    assert_eq!(args[at + 1], body_file.to_str().unwrap(), "{args:?}");
    assert!(!args.iter().any(|a| a.starts_with("long:")), "{args:?}");
    assert!(fs::metadata(&body_file).unwrap().len() > 200 * 1024);

    // tea without a file flag: a description that fits in one argument, saying it was cut.
    let (bin, log) = forge_double(repo.root(), "tea", "  --description value");
    let server = Server::start(vec![]);
    let mut cmd = repo.agent(&server, &["pr", &id, "--branch", "feature/long"]);
    cmd.env(
        "PATH",
        format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
    );
    let out = run(&mut cmd);
    out.assert_code(0);
    let args = fs::read_to_string(&log).unwrap();
    let args: Vec<&str> = args.lines().collect();
    let at = args.iter().position(|a| *a == "--description").unwrap();
    let len: usize = args[at + 1].strip_prefix("long:").unwrap().parse().unwrap();
    assert!(len < 128 * 1024 && len > 90 * 1024, "{len}");
}

#[test]
fn review_list_escapes_a_hostile_path_in_its_json() {
    let repo = TestRepo::new();
    let evil = format!("evil{BIDI}{CLEAR}\u{9b}2J.txt");
    let id = session(
        &repo,
        "Add a file",
        vec![
            Reply::text_and_tool_calls(
                "Writing it.",
                vec![call("write_file", json!({"path": evil, "content": "x\n"}))],
            ),
            Reply::text("Done."),
        ],
    );
    let out = agent(&repo, &["review", &id, "--list"]);
    out.assert_code(0);
    assert_neutral(&out, "review --list");
    assert!(!out.stdout().contains('\u{9b}'), "{out}");
    let line: serde_json::Value =
        serde_json::from_str(out.stdout().lines().next().unwrap()).unwrap();
    assert_eq!(
        line["path"],
        evil.as_str(),
        "the JSON still decodes to the path"
    );
}

#[test]
fn review_send_takes_a_prompt_that_starts_with_a_dash_literally() {
    let repo = TestRepo::new();
    let id = session(
        &repo,
        "Add a file",
        vec![
            Reply::text_and_tool_calls(
                "Writing it.",
                vec![call(
                    "write_file",
                    json!({"path": "a.txt", "content": "a\n"}),
                )],
            ),
            Reply::text("Done."),
        ],
    );
    let before = user_state(&repo);
    let server = Server::start(vec![Reply::text("Revised.")]);
    let out = repo.run_agent(
        &server,
        &[
            "review",
            &id,
            "--leave",
            "a.txt",
            "--comment",
            "say b",
            "--send=--help is not an option here",
        ],
    );
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), "Revised.", "{out}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{out}");
    assert!(
        requests[0]
            .user_texts()
            .iter()
            .any(|t| t.contains("--help is not an option here")),
        "{:?}",
        requests[0].user_texts()
    );
    assert_eq!(user_state(&repo), before);
}

#[test]
fn pr_body_of_a_resumed_session_lists_every_prompt() {
    let repo = TestRepo::new();
    with_remote(&repo);
    let id = session(
        &repo,
        "First prompt: add a.txt",
        vec![
            Reply::text_and_tool_calls(
                "Writing it.",
                vec![call(
                    "write_file",
                    json!({"path": "a.txt", "content": "a\n"}),
                )],
            ),
            Reply::text("Added a.txt."),
        ],
    );
    let server = Server::start(vec![
        Reply::text_and_tool_calls(
            "Writing b.",
            vec![call(
                "write_file",
                json!({"path": "b.txt", "content": "b\n"}),
            )],
        ),
        Reply::text("Added b.txt too."),
    ]);
    repo.run_agent(
        &server,
        &["ask", "--resume", &id, "Second prompt: add b.txt"],
    )
    .assert_code(0);
    let out = agent(&repo, &["pr", "--stdout", &id]);
    out.assert_code(0);
    let text = out.stdout();
    let first = text.find("> First prompt: add a.txt").expect(text);
    let second = text.find("> Second prompt: add b.txt").expect(text);
    assert!(first < second, "{text}");
    assert!(text.contains("## Prompts"), "{text}");
    assert!(text.contains("Added b.txt too."), "{text}");
}

/// A remote's hooks print `remote:` lines through git's sideband, and `git agent push` repeats what git said:
/// an escape sequence in them reaches the terminal neutralised, on success and on refusal alike.
#[test]
fn a_remotes_hook_output_is_shown_neutralised_by_push() {
    let repo = TestRepo::new();
    let bare = repo.root().join("remote.git");
    repo.git(&["init", "-q", "--bare", bare.to_str().unwrap()]);
    repo.git(&["remote", "add", "origin", bare.to_str().unwrap()]);
    repo.git(&["push", "-q", "origin", "main"]);
    let hook = bare.join("hooks/post-receive");
    fs::write(
        &hook,
        "#!/bin/sh\nprintf 'evil \\033]0;pwned\\007 \\033[31mred\\n' >&2\n",
    )
    .unwrap();
    fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
    let server = Server::start(vec![Reply::text("nothing to change")]);
    repo.run_agent(&server, &["ask", "look"]).assert_code(0);
    let server = Server::start(vec![]);
    let out = run(&mut repo.agent(&server, &["push"]));
    out.assert_code(0);
    assert!(out.stderr.contains("evil"), "{out}");
    assert!(
        !out.stderr.contains('\u{1b}') && !out.stderr.contains('\u{7}'),
        "{out}"
    );
}

/// A session whose prompt, reason, answer and file name carry the sequences: `accept` lists the path with
/// its controls visible, and the pull request's title and body (on stdout with `--stdout`, in the body
/// file and in the forge CLI's arguments) hold none of them raw: they are published and shown again by
/// `gh pr view` (issue 22, finding 8).
#[test]
fn accept_and_pr_show_model_text_and_paths_neutralised() {
    let repo = TestRepo::new();
    with_remote(&repo);
    let evil = format!("n{OSC52}{BIDI}.txt");
    let id = session(
        &repo,
        &hostile("Add it"),
        vec![
            Reply::text_and_tool_calls(
                &hostile("Writing"),
                vec![call("write_file", json!({"path": evil, "content": "x\n"}))],
            ),
            Reply::text(&hostile("Done")),
        ],
    );

    let out = agent(&repo, &["pr", "--stdout", &id]);
    out.assert_code(0);
    assert!(out.stdout().contains("## Prompt"), "{out}");
    assert_neutral(&out, "pr --stdout");

    let (bin, log) = forge_double(repo.root(), "gh", "  --body-file file");
    let server = Server::start(vec![]);
    let mut cmd = repo.agent(&server, &["pr", &id]);
    cmd.env(
        "PATH",
        format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
    );
    let out = run(&mut cmd);
    out.assert_code(0);
    assert_neutral(&out, "pr");
    let args = fs::read_to_string(&log).unwrap();
    assert!(args.contains("--title"), "{args}");
    let body = fs::read_to_string(repo.path().join(format!(".git/agent/pr/{id}.md"))).unwrap();
    for (what, text) in [("gh's arguments", &args), ("the body file", &body)] {
        for raw in ['\u{1b}', '\u{7}', '\r', '\u{202e}'] {
            assert!(!text.contains(raw), "{raw:?} in {what}:\n{text:?}");
        }
    }

    let out = agent(&repo, &["accept", &id]);
    out.assert_code(0);
    assert_neutral(&out, "accept");
    assert!(
        out.stderr().contains("updated   n\\x1b]52;c;"),
        "the path is shown with its controls visible: {out}"
    );
    assert!(repo.path().join(&evil).is_file());
}

/// Text a remote or a cloned repository supplies, through the printers the other tests do not reach: the
/// reason a pulled skill was not merged (it quotes the folder's name), `skill show` of a stored skill into
/// a pipe, `agents --json`, and an error about a key of the repository's `.git-agent.toml` (issue 22,
/// finding 8).
#[test]
fn pulled_skills_subagent_files_and_settings_errors_print_no_raw_escape() {
    let repo = TestRepo::new();
    with_remote(&repo);
    // A stored skill whose text carries the sequences, and beside it (pushed with plain git) a folder whose
    // name does.
    let folder = repo.root().join("src-skills/shown");
    fs::create_dir_all(&folder).unwrap();
    fs::write(
        folder.join("SKILL.md"),
        format!(
            "---\nname: shown\ndescription: Shows{BIDI} things\n---\nBody {}\n",
            hostile("text")
        ),
    )
    .unwrap();
    agent(&repo, &["skill", "add", folder.to_str().unwrap()]).assert_code(0);
    let show = agent(&repo, &["skill", "show", "shown"]);
    show.assert_code(0);
    assert!(show.stdout().contains("Body text"), "{show}");
    assert_neutral(&show, "skill show");

    let skill_md = git_with(
        &repo,
        &[],
        &["hash-object", "-w", "--stdin"],
        Some("---\nname: x\ndescription: X\n---\nB\n"),
    );
    let dir = git_with(
        &repo,
        &[],
        &["mktree"],
        Some(&format!("100644 blob {}\tSKILL.md\n", skill_md.trim())),
    );
    let mut entries = repo.git(&["ls-tree", "refs/agent/skills"]);
    entries.push_str(&format!("040000 tree {}\t{}\n", dir.trim(), hostile("x")));
    let tree = git_with(&repo, &[], &["mktree"], Some(&entries));
    let old = repo.git(&["rev-parse", "refs/agent/skills"]);
    let commit = repo.git(&["commit-tree", tree.trim(), "-p", old.trim(), "-m", "skills"]);
    repo.git(&[
        "push",
        "-q",
        "origin",
        &format!("{}:refs/agent/skills", commit.trim()),
    ]);
    let pull = agent(&repo, &["pull"]);
    pull.assert_code(0);
    assert!(pull.stderr().contains("was not merged"), "{pull}");
    assert_neutral(&pull, "pull");

    fs::create_dir_all(repo.path().join(".claude/agents")).unwrap();
    fs::write(
        repo.path().join(".claude/agents/rev.md"),
        format!(
            "---\nname: rev\ndescription: {}\n---\nYou review.\n",
            hostile("Reviews")
        ),
    )
    .unwrap();
    for args in [&["agents"][..], &["agents", "--json"]] {
        let out = agent(&repo, args);
        out.assert_code(0);
        assert!(out.stdout().contains("rev"), "{out}");
        assert_neutral(&out, &args.join(" "));
    }

    let escaped = "x\\u001b]52;c;aGk=\\u0007\\u001b[2J\\r\\u202e";
    fs::write(
        repo.path().join(".git-agent.toml"),
        format!("\"{escaped}\" = 1\n"),
    )
    .unwrap();
    let out = agent(&repo, &["ask", "hi"]);
    assert_ne!(out.code(), 0, "{out}");
    assert!(out.stderr().contains("unknown key"), "{out}");
    assert_neutral(&out, "a settings error");
    fsck(&repo);
}
