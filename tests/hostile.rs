//! A hostile collaborator (issue 22, findings 1-5): refs crafted with plain git (`mktree`, `commit-tree`,
//! `update-ref`, `hash-object`) are pushed to a shared remote; the victim's pull keeps none of the objects
//! git's fsck refuses, merges every valid item, and accept, review, diff, skill export, skill list, memory
//! list and ask write nothing outside where they should, run nothing and stay small.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::json;

use crate::common::{call, fsck, run, session_id, Output, Reply, Server, TestRepo};

/// A hook body that leaves a marker: if it ever runs, the marker exists.
const HOOK: &str = "#!/bin/sh\ntouch \"$HOME/PWNED\"\n";

/// Runs git in `dir` hermetically, with `input` on stdin and extra `env`; returns stdout, panics on failure.
pub(crate) fn git_in(
    dir: &Path,
    args: &[&str],
    input: Option<&[u8]>,
    env: &[(&str, &str)],
) -> String {
    let mut cmd = Command::new("git");
    cmd.args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Mallory")
        .env("GIT_AUTHOR_EMAIL", "m@example.com")
        .env("GIT_COMMITTER_NAME", "Mallory")
        .env("GIT_COMMITTER_EMAIL", "m@example.com")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("git runs");
    let mut stdin = child.stdin.take().unwrap();
    if let Some(input) = input {
        stdin.write_all(input).unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn blob(dir: &Path, data: &[u8]) -> String {
    git_in(dir, &["hash-object", "-w", "--stdin"], Some(data), &[])
}

/// A tree of `entries` (mode, oid, name), built with `git mktree`, which takes names git would refuse.
pub(crate) fn tree(dir: &Path, entries: &[(&str, &str, &str)]) -> String {
    let mut input = String::new();
    for (mode, oid, name) in entries {
        let kind = if *mode == "040000" { "tree" } else { "blob" };
        input.push_str(&format!("{mode} {kind} {oid}\t{name}\n"));
    }
    git_in(dir, &["mktree"], Some(input.as_bytes()), &[])
}

/// A tree holding `path` (slash-separated, any names) with `leaf` (a blob) at its end, executable.
fn nested(dir: &Path, path: &str, leaf: &str) -> String {
    let parts: Vec<&str> = path.split('/').collect();
    let (last, dirs) = parts.split_last().unwrap();
    let mut oid = tree(dir, &[("100755", leaf, last)]);
    for name in dirs.iter().rev() {
        oid = tree(dir, &[("040000", &oid, name)]);
    }
    oid
}

/// The top-level entries of `rev`'s tree, as (mode, oid, name).
fn top(dir: &Path, rev: &str) -> Vec<(String, String, String)> {
    git_in(dir, &["ls-tree", rev], None, &[])
        .lines()
        .map(|l| {
            let (meta, name) = l.split_once('\t').unwrap();
            let mut m = meta.split(' ');
            let mode = m.next().unwrap().to_owned();
            let _kind = m.next();
            (mode, m.next().unwrap().to_owned(), name.to_owned())
        })
        .collect()
}

/// `rev`'s tree with `extra` top-level entries added.
fn tree_plus(dir: &Path, rev: &str, extra: &[(&str, &str, &str)]) -> String {
    let mut entries: Vec<(String, String, String)> = top(dir, rev);
    entries.extend(
        extra
            .iter()
            .map(|(m, o, n)| (m.to_string(), o.to_string(), n.to_string())),
    );
    let borrowed: Vec<(&str, &str, &str)> = entries
        .iter()
        .map(|(m, o, n)| (m.as_str(), o.as_str(), n.as_str()))
        .collect();
    tree(dir, &borrowed)
}

pub(crate) fn commit(dir: &Path, tree: &str, parent: Option<&str>, message: &str) -> String {
    let mut args = vec!["commit-tree", tree, "-m", message];
    if let Some(p) = parent {
        args.extend(["-p", p]);
    }
    git_in(dir, &args, None, &[])
}

/// `git-agent args` in `dir` under `/usr/bin/time -f %M`: the output, and the peak RSS in kB of the
/// process and every child it waited for (git, hooks).
pub(crate) fn measured(
    repo: &TestRepo,
    server: &Server,
    dir: &Path,
    args: &[&str],
) -> (Output, u64) {
    let mut full = vec!["-f", "%M", "git-agent"];
    full.extend_from_slice(args);
    let mut cmd = repo.via(server, "/usr/bin/time", &full);
    cmd.current_dir(dir);
    let mut out = run(&mut cmd);
    let last = out
        .stderr
        .trim_end()
        .rsplit('\n')
        .next()
        .unwrap_or("")
        .to_owned();
    let kb: u64 = last
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("no RSS line: {}", out.stderr));
    eprintln!("peak RSS of git-agent {args:?} and its children: {kb} kB");
    let cut = out.stderr.trim_end().len() - last.len();
    out.stderr.truncate(cut);
    (out, kb)
}

pub(crate) const LIMIT_KB: u64 = 60 * 1024;

/// The session ids `dir` holds logs of (`refs/agent/sessions/*`), one a line.
fn session_ids(dir: &Path) -> String {
    git_in(
        dir,
        &[
            "for-each-ref",
            "--format=%(refname:lstrip=3)",
            "refs/agent/sessions",
        ],
        None,
        &[],
    )
}

fn skill_md(name: &str) -> String {
    format!("---\nname: {name}\ndescription: A skill called {name}.\n---\nDo the {name} thing.\n")
}

/// The victim's repository, a bare remote it shares, and an attacker's clone of it.
struct Shared {
    victim: TestRepo,
    bare: std::path::PathBuf,
    attacker: std::path::PathBuf,
}

fn shared() -> Shared {
    let victim = TestRepo::new();
    let bare = victim.root().join("remote.git");
    victim.git(&["init", "-q", "--bare", bare.to_str().unwrap()]);
    victim.git(&["remote", "add", "origin", bare.to_str().unwrap()]);
    victim.git(&["push", "-q", "origin", "main"]);
    let attacker = victim.root().join("attacker");
    victim.git(&[
        "clone",
        "-q",
        bare.to_str().unwrap(),
        attacker.to_str().unwrap(),
    ]);
    Shared {
        victim,
        bare,
        attacker,
    }
}

#[test]
fn a_hostile_remote_is_quarantined_ref_by_ref_and_the_valid_items_merge() {
    let s = shared();
    let a = s.attacker.as_path();
    let idle = Server::start(vec![]);
    let in_attacker = |args: &[&str]| {
        let mut cmd = s.victim.agent(&idle, args);
        cmd.current_dir(a);
        run(&mut cmd)
    };

    // Session branches whose trees plant a hook in every spelling git refuses.
    let hook = blob(a, HOOK.as_bytes());
    let main = git_in(a, &["rev-parse", "refs/remotes/origin/main"], None, &[]);
    let plants = [
        ".git/hooks/pre-commit",
        ".GIT/hooks/pre-commit",
        ".g\u{200c}it/hooks/pre-commit",
        "git~1/hooks/pre-commit",
        ".git. /hooks/pre-commit",
        "../../.git/hooks/pre-commit",
    ];
    let mut hostile_trees = Vec::new();
    for (n, path) in plants.iter().enumerate() {
        let planted = nested(a, path, &hook);
        let (_, sub, name) = top(a, &planted).remove(0);
        let t = tree_plus(a, &main, &[("040000", &sub, &name)]);
        hostile_trees.push(t.clone());
        let c = commit(
            a,
            &t,
            Some(&main),
            &format!("step\n\nAgent-Session: evil{n}\nAgent-Step: 1\n"),
        );
        git_in(
            a,
            &["update-ref", &format!("refs/heads/agent/evil{n}"), &c],
            None,
            &[],
        );
    }
    // A skills ref with `..` entries, beside the real skills ref.
    let escape = nested(a, "../../.git/hooks/pre-commit", &hook);
    let (_, sub, name) = top(a, &escape).remove(0);
    let evil_skills = tree(a, &[("040000", &sub, &name)]);
    let c = commit(a, &evil_skills, None, "skills");
    git_in(a, &["update-ref", "refs/agent/skills-x", &c], None, &[]);

    // The skills: one valid, one with a 150 MB SKILL.md (one repeated byte: cheap to make and to send).
    let skills_src = s.victim.root().join("skills-src/good");
    std::fs::create_dir_all(&skills_src).unwrap();
    std::fs::write(skills_src.join("SKILL.md"), skill_md("good")).unwrap();
    in_attacker(&["skill", "add", skills_src.to_str().unwrap()]).assert_code(0);
    let big = {
        let mut child = Command::new("git")
            .args(["hash-object", "-w", "--stdin"])
            .current_dir(a)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(skill_md("big").as_bytes()).unwrap();
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..150 {
            stdin.write_all(&chunk).unwrap();
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let big_dir = tree(a, &[("100644", &big, "SKILL.md")]);
    let skills_tip = git_in(a, &["rev-parse", "refs/agent/skills"], None, &[]);
    let t = tree_plus(a, &skills_tip, &[("040000", &big_dir, "big")]);
    let c = commit(a, &t, Some(&skills_tip), "skill add big");
    git_in(a, &["update-ref", "refs/agent/skills", &c], None, &[]);

    // Memory: one valid entry, a malformed one beside it, and an index line that names no entry.
    in_attacker(&["memory", "add", "The tests run with cargo test."]).assert_code(0);
    let listing = git_in(a, &["ls-tree", "-r", "refs/agent/memory"], None, &[]);
    let index_line = listing.lines().find(|l| l.contains("\tindex/")).unwrap();
    let valid_index = git_in(
        a,
        &[
            "cat-file",
            "-p",
            index_line
                .split(' ')
                .nth(2)
                .unwrap()
                .split('\t')
                .next()
                .unwrap(),
        ],
        None,
        &[],
    );
    let mut ghost: serde_json::Value =
        serde_json::from_str(valid_index.lines().next().unwrap()).unwrap();
    ghost["id"] = json!("cdcdcdcd");
    let ghost_blob = blob(a, format!("{ghost}\n").as_bytes());
    let broken = blob(a, b"{\"text\": \"\\u001b]52;c;bad\\u0007 not an entry\"");
    let index_file = s.victim.root().join("attacker-index");
    let env = [("GIT_INDEX_FILE", index_file.to_str().unwrap())];
    git_in(a, &["read-tree", "refs/agent/memory"], None, &env);
    git_in(
        a,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("100644,{broken},entries/ab/abababab.json"),
        ],
        None,
        &env,
    );
    git_in(
        a,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("100644,{ghost_blob},index/cd.jsonl"),
        ],
        None,
        &env,
    );
    let t = git_in(a, &["write-tree"], None, &env);
    let memory_tip = git_in(a, &["rev-parse", "refs/agent/memory"], None, &[]);
    let c = commit(a, &t, Some(&memory_tip), "memory");
    git_in(a, &["update-ref", "refs/agent/memory", &c], None, &[]);

    git_in(
        a,
        &[
            "push",
            "-q",
            "origin",
            "refs/agent/*:refs/agent/*",
            "refs/heads/agent/*:refs/heads/agent/*",
        ],
        None,
        &[],
    );

    // The victim pulls.
    let v = &s.victim;
    let (pull, rss) = measured(v, &idle, v.path(), &["pull"]);
    pull.assert_code(0);
    assert!(rss < LIMIT_KB, "pull peaked at {rss} kB: {}", pull.stderr);
    for n in 0..plants.len() {
        assert!(
            pull.stderr.contains(&format!(
                "the branch of session evil{n} of origin (refs/heads/agent/evil{n}) was not taken"
            )),
            "evil{n}: {}",
            pull.stderr
        );
        assert!(v
            .git(&[
                "for-each-ref",
                &format!("refs/agent-remotes/origin/heads/evil{n}")
            ])
            .is_empty());
        assert!(v
            .git(&["for-each-ref", &format!("refs/heads/agent/evil{n}")])
            .is_empty());
    }
    assert!(
        pull.stderr
            .contains("the ref refs/agent/skills-x of origin"),
        "{}",
        pull.stderr
    );
    assert!(
        !pull.stderr.contains("error: object"),
        "git's raw text: {}",
        pull.stderr
    );
    // None of the refused objects was kept.
    for t in hostile_trees.iter().chain([&evil_skills]) {
        let present = Command::new("git")
            .args(["cat-file", "-e", t])
            .current_dir(v.path())
            .status()
            .unwrap()
            .success();
        assert!(!present, "tree {t} was kept");
    }
    // The valid skill merged, the big one skipped and named; memory: the valid entry, the bad ones named.
    assert!(
        pull.stderr.contains("skill big of origin"),
        "{}",
        pull.stderr
    );
    assert!(
        pull.stderr.contains("entries/ab/abababab.json left out"),
        "{}",
        pull.stderr
    );
    assert!(
        pull.stderr.contains("names no valid entry"),
        "{}",
        pull.stderr
    );
    assert!(
        pull.stderr
            .contains("git show refs/agent-remotes/origin/memory:"),
        "{}",
        pull.stderr
    );
    assert!(
        !pull.stderr.contains('\u{1b}'),
        "raw escape: {}",
        pull.stderr
    );
    fsck(v);

    let (list, rss) = measured(v, &idle, v.path(), &["skill", "list"]);
    list.assert_code(0);
    assert!(rss < LIMIT_KB, "skill list peaked at {rss} kB");
    assert!(list.stdout.contains("good"), "{}", list.stdout);
    assert!(!list.stdout.contains("big"), "{}", list.stdout);
    let out_dir = v.root().join("exported");
    let export = run(v
        .agent(
            &idle,
            &["skill", "export", "good", out_dir.to_str().unwrap()],
        )
        .current_dir(v.path()));
    export.assert_code(0);
    assert!(out_dir.join("good/SKILL.md").is_file());

    let memory = run(v.agent(&idle, &["memory", "list"]).current_dir(v.path()));
    memory.assert_code(0);
    assert!(memory.stdout.contains("cargo test"), "{}", memory.stdout);
    assert!(!memory.stdout.contains("cdcdcdcd"), "{}", memory.stdout);

    let answering = Server::start(vec![Reply::text("nothing to do")]);
    let (ask, rss) = measured(v, &answering, v.path(), &["ask", "say hi"]);
    ask.assert_code(0);
    assert!(rss < LIMIT_KB, "ask peaked at {rss} kB");

    // Nothing was planted or run: a commit of the victim runs no hook of Mallory's.
    v.write("mine.txt", "mine\n");
    v.commit_all("mine");
    assert!(!v.path().join(".git/hooks/pre-commit").exists());
    assert!(!v.root().join("home/PWNED").exists());
    fsck(v);
    let _ = &s.bare;
}

/// A session whose branch was crafted in the repository itself (as a plain `git fetch` could bring it,
/// past the pull's checks): accept, review and diff refuse the hostile paths by name and land the rest.
#[test]
fn landing_refuses_hostile_tree_paths_by_name_and_lands_the_rest() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::text_and_tool_calls(
            "adding",
            vec![call(
                "write_file",
                json!({"path": "p.txt", "content": "p\n"}),
            )],
        ),
        Reply::text("done"),
    ]);
    repo.run_agent(&server, &["ask", "add p"]).assert_code(0);
    let id = session_id(&repo);
    let dir = repo.path();
    let branch = format!("refs/heads/agent/{id}");
    let tip = git_in(dir, &["rev-parse", &branch], None, &[]);
    let hook = blob(dir, HOOK.as_bytes());
    let ok = blob(dir, b"fine\n");
    let mut extra: Vec<(String, String, String)> = Vec::new();
    for path in [
        ".git/hooks/pre-commit",
        ".GIT/hooks/pre-commit",
        ".g\u{200c}it/hooks/pre-commit",
        "git~1/hooks/pre-commit",
        "../escape/pre-commit",
        "a\\..\\..\\x",
    ] {
        let t = nested(dir, path, &hook);
        let (mode, oid, name) = top(dir, &t).remove(0);
        extra.push((mode, oid, name));
    }
    let mut entries: Vec<(&str, &str, &str)> = extra
        .iter()
        .map(|(m, o, n)| (m.as_str(), o.as_str(), n.as_str()))
        .collect();
    entries.push(("100644", ok.as_str(), "ok.txt"));
    let t = tree_plus(dir, &tip, &entries);
    let c = commit(
        dir,
        &t,
        Some(&tip),
        &format!("step\n\nAgent-Session: {id}\nAgent-Step: 2\n"),
    );
    git_in(dir, &["update-ref", &branch, &c, &tip], None, &[]);

    let idle = Server::start(vec![]);
    let diff = repo.run_agent(&idle, &["diff", &id]);
    diff.assert_code(0);
    assert!(
        diff.stdout.contains("+fine") && diff.stdout.contains("+p"),
        "{}",
        diff.stdout
    );
    assert!(
        !diff.stdout.contains("pre-commit"),
        "shown as a file: {}",
        diff.stdout
    );
    assert!(
        diff.stderr.contains("refused   .git/hooks/pre-commit"),
        "{}",
        diff.stderr
    );
    assert!(
        diff.stderr
            .contains("refused   .g\\u{200c}it/hooks/pre-commit"),
        "{}",
        diff.stderr
    );

    let list = repo.run_agent(&idle, &["review", &id, "--list"]);
    list.assert_code(0);
    let refused = list
        .stdout
        .lines()
        .filter(|l| l.contains("\"refused\""))
        .count();
    assert_eq!(refused, 6, "{}", list.stdout);
    assert!(!list.stdout.contains('\u{200c}'), "{}", list.stdout);

    // Taking the hostile path in review lands the file taken with it, and refuses the path by name.
    let review = repo.run_agent(
        &idle,
        &["review", &id, "--take", ".git/hooks/pre-commit", "ok.txt"],
    );
    assert!(
        review.stderr.contains("refused   .git/hooks/pre-commit"),
        "{}",
        review.stderr
    );
    assert!(!dir.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join("ok.txt")).unwrap(),
        "fine\n"
    );

    let accept = repo.run_agent(&idle, &["accept", &id]);
    assert_ne!(accept.code(), 0, "{}", accept.stderr);
    for shown in [
        ".git/hooks/pre-commit",
        ".GIT/hooks/pre-commit",
        "git~1/hooks/pre-commit",
        "../escape/pre-commit",
    ] {
        assert!(
            accept.stderr.contains(&format!("refused   {shown}")),
            "{shown}: {}",
            accept.stderr
        );
    }
    assert!(
        accept
            .stderr
            .contains("6 paths of the change refused and not landed"),
        "{}",
        accept.stderr
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("ok.txt")).unwrap(),
        "fine\n"
    );
    assert_eq!(std::fs::read_to_string(dir.join("p.txt")).unwrap(), "p\n");
    assert!(!dir.join(".git/hooks/pre-commit").exists());
    assert!(!repo.root().join("escape").exists());
    assert!(!dir.join("git~1").exists() && !dir.join(".GIT").exists());

    // --index after the refusal: the clean files are staged all the same, the others named.
    repo.git(&["checkout", "--", "."]);
    repo.git(&["clean", "-fdq"]);
    let index = repo.run_agent(&idle, &["accept", &id, "--index"]);
    assert_ne!(index.code(), 0);
    assert!(
        index
            .stderr
            .contains("staged the 2 files that landed cleanly; not staged:"),
        "{}",
        index.stderr
    );
    let staged = repo.git(&["diff", "--cached", "--name-only"]);
    assert_eq!(staged, "ok.txt\np.txt\n");

    repo.git(&["commit", "-q", "-m", "mine"]);
    assert!(!repo.root().join("home/PWNED").exists());
}

/// A change of the executable bit alone lands three-way (it used to be reported "unchanged" and dropped),
/// with accept and with review.
#[test]
fn a_mode_only_change_lands_with_accept_and_review() {
    use std::os::unix::fs::PermissionsExt;
    let repo = TestRepo::new();
    repo.write("run.sh", "#!/bin/sh\necho hi\n");
    repo.commit_all("a script");
    let server = Server::start(vec![
        Reply::text_and_tool_calls(
            "touching",
            vec![call(
                "write_file",
                json!({"path": "other.txt", "content": "x\n"}),
            )],
        ),
        Reply::text("done"),
    ]);
    repo.run_agent(&server, &["ask", "make run.sh executable"])
        .assert_code(0);
    let id = session_id(&repo);
    // The step that flips the mode, as the agent's `chmod +x` would commit it.
    let dir = repo.path();
    let branch = format!("refs/heads/agent/{id}");
    let tip = git_in(dir, &["rev-parse", &branch], None, &[]);
    let entries: Vec<(String, String, String)> = top(dir, &tip)
        .into_iter()
        .map(|(m, o, n)| {
            if n == "run.sh" {
                ("100755".into(), o, n)
            } else {
                (m, o, n)
            }
        })
        .collect();
    let borrowed: Vec<(&str, &str, &str)> = entries
        .iter()
        .map(|(m, o, n)| (m.as_str(), o.as_str(), n.as_str()))
        .collect();
    let t = tree(dir, &borrowed);
    let c = commit(
        dir,
        &t,
        Some(&tip),
        &format!("chmod\n\nAgent-Session: {id}\nAgent-Step: 2\n"),
    );
    git_in(dir, &["update-ref", &branch, &c, &tip], None, &[]);

    let idle = Server::start(vec![]);
    let exec = |p: &str| std::fs::metadata(dir.join(p)).unwrap().permissions().mode() & 0o111 != 0;
    let review = repo.run_agent(
        &idle,
        &["review", &id, "--take", "run.sh", "--leave", "other.txt"],
    );
    assert!(exec("run.sh"), "review: {}", review.stderr);
    std::fs::set_permissions(dir.join("run.sh"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let _ = std::fs::remove_file(dir.join("other.txt"));

    let accept = repo.run_agent(&idle, &["accept", &id]);
    accept.assert_code(0);
    assert!(exec("run.sh"), "accept: {}", accept.stderr);
    assert!(
        accept.stderr.contains("updated   run.sh"),
        "{}",
        accept.stderr
    );
    fsck(&repo);
}

/// `skill add` and `skill import` never store what a symbolic link points at (it would be published by
/// `push`): a linked SKILL.md refuses the skill, other linked files and linked folders are left out and said so.
#[test]
fn skill_add_and_import_never_follow_a_link() {
    use std::os::unix::fs::symlink;
    let repo = TestRepo::new();
    let idle = Server::start(vec![]);
    let secret = repo.root().join("secret.md");
    std::fs::write(&secret, skill_md("linked") + "SECRET-CONTENT\n").unwrap();

    let linked = repo.root().join("skills/linked");
    std::fs::create_dir_all(&linked).unwrap();
    symlink(&secret, linked.join("SKILL.md")).unwrap();
    let add = repo.run_agent(&idle, &["skill", "add", linked.to_str().unwrap()]);
    assert_ne!(add.code(), 0, "{}", add.stderr);
    assert!(
        add.stderr.contains("SKILL.md is a symbolic link"),
        "{}",
        add.stderr
    );
    assert!(repo.git(&["for-each-ref", "refs/agent/skills"]).is_empty());

    let good = repo.root().join("skills/good");
    std::fs::create_dir_all(&good).unwrap();
    std::fs::write(good.join("SKILL.md"), skill_md("good")).unwrap();
    symlink(&secret, good.join("notes.md")).unwrap();
    let elsewhere = repo.root().join("elsewhere/other");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("SKILL.md"), skill_md("other")).unwrap();
    symlink(&elsewhere, repo.root().join("skills/other")).unwrap();
    let import = repo.run_agent(
        &idle,
        &[
            "skill",
            "import",
            repo.root().join("skills").to_str().unwrap(),
        ],
    );
    import.assert_code(0);
    assert!(
        import
            .stderr
            .contains("left out notes.md (a symbolic link)"),
        "{}",
        import.stderr
    );
    assert!(
        import.stderr.contains("skills/other (a symbolic link)"),
        "{}",
        import.stderr
    );
    let stored = repo.git(&["ls-tree", "-r", "--name-only", "refs/agent/skills"]);
    assert_eq!(stored.trim(), "good/SKILL.md", "{stored}");
    let grep = Command::new("git")
        .args(["grep", "-q", "SECRET-CONTENT", "refs/agent/skills"])
        .current_dir(repo.path())
        .status()
        .unwrap();
    assert!(!grep.success());
}

/// A cloned repository commits links with innocent names to the files the file tools refuse by name
/// (`notes.txt` -> `.env`, `docs/key.txt` -> `id_ed25519`, a folder link to the root): neither `read_file`
/// nor `search` given such a path opens the target, in the session's checkout and under `--here`, and
/// nothing of it reaches the provider (issue 23, finding 3: one rule for secret-looking files).
#[test]
fn a_link_with_an_innocent_name_opens_no_secret_file() {
    use std::os::unix::fs::symlink;
    const KEY_LINE: &str = "MARKER-KEY-b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ";
    const ENV_LINE: &str = "MARKER_ENV=plain-value-9f3a";
    for here in [false, true] {
        let repo = TestRepo::new();
        repo.write(".env", &format!("{ENV_LINE}\n"));
        repo.write(
            "id_ed25519",
            &format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_LINE}\n-----END OPENSSH PRIVATE KEY-----\n"),
        );
        repo.write("docs/readme.md", "docs\n");
        symlink(".env", repo.path().join("notes.txt")).unwrap();
        symlink("../id_ed25519", repo.path().join("docs/key.txt")).unwrap();
        symlink("..", repo.path().join("docs/up")).unwrap();
        repo.commit_all("a repository with links");
        let calls = vec![
            call("read_file", json!({"path": "notes.txt"})),
            call("read_file", json!({"path": "docs/key.txt"})),
            call("read_file", json!({"path": "docs/up/notes.txt"})),
            call("search", json!({"pattern": "MARKER", "path": "notes.txt"})),
            call(
                "search",
                json!({"pattern": "MARKER", "path": "docs/key.txt"}),
            ),
            call("read_file", json!({"path": "docs/readme.md"})),
        ];
        let server = Server::start(vec![Reply::tool_calls(calls.clone()), Reply::text("done")]);
        let mut args = vec!["ask", "--yes"];
        if here {
            args.push("--here");
        }
        args.push("read the notes");
        repo.run_agent(&server, &args).assert_code(0);
        let requests = server.requests();
        let last = requests.last().expect("the follow-up request");
        for c in &calls[..5] {
            let result = last.tool_result(&c.id);
            assert!(
                result.contains("sensitive-file") && result.contains("is a link to"),
                "here={here}: {} {}: {result}",
                c.name,
                c.arguments
            );
        }
        assert!(last.tool_result(&calls[5].id).contains("docs"));
        for request in &requests {
            let body = request.body.to_string();
            assert!(
                !body.contains("MARKER-KEY"),
                "here={here}: the key was sent"
            );
            assert!(
                !body.contains("plain-value"),
                "here={here}: the .env was sent"
            );
        }
    }
}

/// A cloned repository's skill folder holds a 150 MB file (sparse: it costs no disk): `load_skill` of it is
/// refused from its size before anything is read, and the session stays small (issue 22, finding 4, for the
/// files of a skill on disk as for stored ones).
#[test]
fn a_huge_file_of_a_repositorys_skill_is_refused_before_it_is_read() {
    let repo = TestRepo::new();
    repo.write(".agents/skills/big-files/SKILL.md", &skill_md("big-files"));
    repo.commit_all("a skill");
    let data = repo.path().join(".agents/skills/big-files/data.txt");
    std::fs::File::create(&data)
        .unwrap()
        .set_len(150 << 20)
        .unwrap();
    // Not the user's work to capture: the file is only where the skill's folder is.
    std::fs::write(repo.path().join(".git/info/exclude"), "data.txt\n").unwrap();
    let load = call(
        "load_skill",
        json!({"name": "big-files", "path": "data.txt"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![load.clone()]),
        Reply::text("done"),
    ]);
    let (out, rss) = measured(&repo, &server, repo.path(), &["ask", "use the skill"]);
    out.assert_code(0);
    let last = server.requests().pop().expect("the follow-up request");
    let result = last.tool_result(&load.id);
    assert!(result.contains("has 157286400 bytes"), "{result}");
    assert!(rss < LIMIT_KB, "ask peaked at {rss} kB");
}

/// A remote's session logs that are not one: a summary that is not JSON, a 150 MB summary, and a log that
/// names another session. The pull takes none of them and names each; `log` and `stats` go on listing the
/// sessions that are sound, within the memory limit (issue 22, findings 3 and 4).
#[test]
fn a_pulled_session_log_that_is_not_one_is_not_taken() {
    let s = shared();
    let a = s.attacker.as_path();
    let answering = Server::start(vec![Reply::text("fine")]);
    let mut cmd = s.victim.agent(&answering, &["ask", "a real session"]);
    cmd.current_dir(a);
    run(&mut cmd).assert_code(0);
    let real = session_ids(a);
    let real_log = git_in(
        a,
        &["rev-parse", &format!("refs/agent/sessions/{real}")],
        None,
        &[],
    );

    let log_with = |meta: &str| {
        let t = tree(a, &[("100644", meta, "meta.json")]);
        commit(a, &t, None, "log")
    };
    let garbage = blob(a, b"not a summary\n");
    let big = {
        let mut child = Command::new("git")
            .args(["hash-object", "-w", "--stdin"])
            .current_dir(a)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"{\"id\": \"b1b1b1\", \"prompt\": \"")
            .unwrap();
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..150 {
            stdin.write_all(&chunk).unwrap();
        }
        stdin.write_all(b"\"}").unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    for (id, log) in [
        ("c0c0c0", log_with(&garbage)),
        ("b1b1b1", log_with(&big)),
        ("d0d0d0", real_log.clone()),
    ] {
        git_in(
            a,
            &["update-ref", &format!("refs/agent/sessions/{id}"), &log],
            None,
            &[],
        );
    }
    git_in(
        a,
        &["push", "-q", "origin", "refs/agent/*:refs/agent/*"],
        None,
        &[],
    );

    let v = &s.victim;
    let idle = Server::start(vec![]);
    let (pull, rss) = measured(v, &idle, v.path(), &["pull"]);
    pull.assert_code(0);
    assert!(rss < LIMIT_KB, "pull peaked at {rss} kB");
    for id in ["c0c0c0", "b1b1b1", "d0d0d0"] {
        assert!(
            pull.stderr
                .contains(&format!("the session log {id} of origin was not taken")),
            "{id}: {}",
            pull.stderr
        );
        assert!(v
            .git(&["for-each-ref", &format!("refs/agent/sessions/{id}")])
            .is_empty());
    }
    assert!(
        pull.stderr.contains("names another session"),
        "{}",
        pull.stderr
    );
    for args in [&["log"][..], &["stats"]] {
        let (out, rss) = measured(v, &idle, v.path(), args);
        out.assert_code(0);
        assert!(rss < LIMIT_KB, "{args:?} peaked at {rss} kB");
        if args == ["log"] {
            assert!(out.stdout.contains(&real), "{}", out.stdout);
            assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
        }
    }
    fsck(v);
}

/// A session log a pull refused stays in `refs/agent-remotes/<remote>/sessions/` to inspect, and nothing
/// removed it. `git agent gc` now removes every refused one, naming it and why; a log the pull only kept
/// beside ours stays; and once the remote holds a log that reads, the next pull takes it.
#[test]
fn gc_removes_the_session_logs_a_pull_refused_and_a_fixed_log_is_taken_later() {
    let s = shared();
    let a = s.attacker.as_path();
    let answering = Server::start(vec![Reply::text("fine"), Reply::text("mine")]);
    let mut cmd = s.victim.agent(&answering, &["ask", "a real session"]);
    cmd.current_dir(a);
    run(&mut cmd).assert_code(0);
    let id = session_ids(a);
    // The remote first holds a summary that is not one under that session's name.
    let garbage = blob(a, b"not a summary\n");
    let t = tree(a, &[("100644", &garbage, "meta.json")]);
    let broken = commit(a, &t, None, "log");
    let log = format!("refs/agent/sessions/{id}");
    git_in(
        a,
        &["push", "-q", "-f", "origin", &format!("{broken}:{log}")],
        None,
        &[],
    );
    // And a session started in the victim's repository, which the remote moved on: a valid log, left
    // beside ours (a pull never moves a session started here), not refused.
    let v = &s.victim;
    let idle = Server::start(vec![]);
    v.run_agent(&answering, &["ask", "a session here"])
        .assert_code(0);
    let own = session_id(v);
    v.run_agent(&idle, &["push"]).assert_code(0);
    let own_log = format!("refs/agent/sessions/{own}");
    git_in(
        a,
        &["fetch", "-q", "origin", &format!("+{own_log}:{own_log}")],
        None,
        &[],
    );
    let own_tree = format!("{own_log}^{{tree}}");
    let theirs = git_in(
        a,
        &["commit-tree", "-p", &own_log, "-m", "theirs", &own_tree],
        None,
        &[],
    );
    git_in(
        a,
        &["push", "-q", "-f", "origin", &format!("{theirs}:{own_log}")],
        None,
        &[],
    );

    let pull = v.run_agent(&idle, &["pull"]);
    pull.assert_code(0);
    assert!(
        pull.stderr
            .contains(&format!("the session log {id} of origin was not taken")),
        "{pull}"
    );
    assert!(
        pull.stderr.contains(&format!("{own_log} left as it was")),
        "{pull}"
    );
    let staged = format!("refs/agent-remotes/origin/sessions/{id}");
    let own_staged = format!("refs/agent-remotes/origin/sessions/{own}");
    assert!(!v.git(&["for-each-ref", &staged]).is_empty());
    assert!(!v.git(&["for-each-ref", &own_staged]).is_empty());

    let gc = v.run_agent(&idle, &["gc"]);
    gc.assert_code(0);
    assert_eq!(
        gc.stderr
            .matches("a pulled session log that was not taken")
            .count(),
        1,
        "{gc}"
    );
    assert!(
        gc.stderr.contains(&format!(
            "removed {staged}: a pulled session log that was not taken ("
        )),
        "{gc}"
    );
    assert!(v.git(&["for-each-ref", &staged]).is_empty(), "{gc}");
    assert!(!v.git(&["for-each-ref", &own_staged]).is_empty(), "{gc}");
    // A second gc has nothing left to remove.
    let again = v.run_agent(&idle, &["gc"]);
    assert!(!again.stderr.contains("session log"), "{again}");

    // The remote gets the real log back: the next pull takes it.
    git_in(a, &["push", "-q", "-f", "origin", &log], None, &[]);
    let pull = v.run_agent(&idle, &["pull"]);
    pull.assert_code(0);
    assert!(!pull.stderr.contains("was not taken"), "{pull}");
    assert_eq!(
        v.git(&["rev-parse", &log]).trim(),
        git_in(a, &["rev-parse", &log], None, &[])
    );
    let listed = v.run_agent(&idle, &["log"]);
    assert!(listed.stdout.contains(&id), "{listed}");
    fsck(v);
}

/// A remote's session whose transcript is 150 MB: `accept` and `review` need only its summary and branch,
/// so they land its change within the memory limit (issue 22, finding 4: they read the whole transcript,
/// 333 MB at their peak).
#[test]
fn accept_and_review_of_a_session_with_a_huge_transcript_stay_small() {
    let s = shared();
    let a = s.attacker.as_path();
    let writing = Server::start(vec![
        Reply::tool_calls(vec![call(
            "write_file",
            json!({"path": "landed.txt", "content": "landed\n"}),
        )]),
        Reply::text("done"),
    ]);
    let mut cmd = s.victim.agent(&writing, &["ask", "write a file"]);
    cmd.current_dir(a);
    run(&mut cmd).assert_code(0);
    let id = session_ids(a);
    let log_ref = format!("refs/agent/sessions/{id}");
    // The same log, its transcript one 150 MB line.
    let huge = {
        let mut child = Command::new("git")
            .args(["hash-object", "-w", "--stdin"])
            .current_dir(a)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"{\"type\": \"text\", \"text\": \"")
            .unwrap();
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..150 {
            stdin.write_all(&chunk).unwrap();
        }
        stdin.write_all(b"\"}\n").unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let events = tree(a, &[("100644", &huge, "0000000000.jsonl")]);
    let meta = git_in(
        a,
        &["rev-parse", &format!("{log_ref}:meta.json")],
        None,
        &[],
    );
    let t = tree(
        a,
        &[
            ("100644", &meta, "meta.json"),
            ("040000", &events, "events"),
        ],
    );
    let old = git_in(a, &["rev-parse", &log_ref], None, &[]);
    let c = commit(a, &t, Some(&old), "log");
    git_in(a, &["update-ref", &log_ref, &c], None, &[]);
    git_in(
        a,
        &[
            "push",
            "-q",
            "origin",
            "refs/agent/*:refs/agent/*",
            "refs/heads/agent/*:refs/heads/agent/*",
        ],
        None,
        &[],
    );

    let v = &s.victim;
    let idle = Server::start(vec![]);
    run(v.agent(&idle, &["pull"]).current_dir(v.path())).assert_code(0);
    let (list, rss) = measured(v, &idle, v.path(), &["review", &id, "--list"]);
    list.assert_code(0);
    assert!(list.stdout.contains("landed.txt"), "{}", list.stdout);
    assert!(rss < LIMIT_KB, "review --list peaked at {rss} kB");
    let (accept, rss) = measured(v, &idle, v.path(), &["accept", &id]);
    accept.assert_code(0);
    assert!(rss < LIMIT_KB, "accept peaked at {rss} kB");
    assert_eq!(
        std::fs::read_to_string(v.path().join("landed.txt")).unwrap(),
        "landed\n"
    );
}
