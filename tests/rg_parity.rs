//! Acceptance: the `search` tool, called by a scripted model through the real binary, gives what
//! `rg -n --sort path` gives, over a tree with the cases that trip up a hand-made grep: nested `.gitignore`
//! and `.ignore` files, a negated rule, `.git/info/exclude`, hidden files and directories, binary files, and
//! queries that are literal, regex, case-folded, filtered by glob and type, with context and in files-only
//! mode.
//!
//! The session runs `--here`, in the repository's own work tree, so the ignored files are really there (a
//! session's checkout holds only what git tracks, and `-g '*.log'` or an explicit path must still find
//! ignored files as rg does). Ignored by a plain `cargo test`: `.ci/run` installs `rg` and runs it with
//! `--ignored`. Not compared: CRLF lines (the tool strips the `\r` that rg prints) and lines over 300
//! characters (the tool cuts them).

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::common::{call, Reply, Server, TestRepo};

/// The files of the tree; `.git/info/exclude` is the repository's own.
const FILES: &[(&str, &[u8])] = &[
    (".gitignore", b"*.log\nbuild/\n!keep.log\n/rootonly.txt\n"),
    (".git/info/exclude", b"excluded.txt\n"),
    ("a.txt", b"foo\nFoo bar\nfooBar(1)\nnothing\nfoo(2) again\n"),
    ("keep.log", b"foo kept despite *.log\n"),
    ("x.log", b"foo ignored\n"),
    ("rootonly.txt", b"foo ignored at the root only\n"),
    ("sub/rootonly.txt", b"foo not ignored here\n"),
    ("excluded.txt", b"foo excluded by info/exclude\n"),
    ("build/out.txt", b"foo in build\n"),
    ("sub/.gitignore", b"secret.txt\n"),
    ("sub/secret.txt", b"foo secret\n"),
    (
        "sub/open.txt",
        b"context 1\ncontext 2\nfoo here\ncontext 4\ncontext 5\ncontext 6\ncontext 7\nFOO there\n",
    ),
    ("sub/deep/.ignore", b"*.md\n"),
    ("sub/deep/readme.md", b"foo in markdown\n"),
    ("sub/deep/code.rs", b"fn foo() {}\nfn bar() { foo() }\n"),
    ("sub/deep/nested/more.md", b"foo nested markdown\n"),
    (
        "sub/deep/nested/script.py",
        b"def foo():\n    return 'Foo'\n",
    ),
    (".hidden/h.txt", b"foo hidden dir\n"),
    (".hiddenfile", b"foo hidden file\n"),
    ("bin.dat", b"foo\0binary\n"),
    ("late.bin", b"foo line before a NUL\nmore\n\0tail foo\n"),
    ("unicode.txt", "naïve foo — ünïcödé FOO\n".as_bytes()),
    ("dash-name.txt", b"x\nfoo-1\n"),
];

/// Each case: rg's arguments and the same query as the tool's arguments.
fn cases() -> Vec<(Vec<&'static str>, Value)> {
    vec![
        (
            vec!["-F", "foo"],
            json!({"pattern": "foo", "literal": true}),
        ),
        (
            vec!["-F", "foo("],
            json!({"pattern": "foo(", "literal": true}),
        ),
        (vec![r"fo+\(\d\)"], json!({"pattern": r"fo+\(\d\)"})),
        (vec![r"\bfoo\b"], json!({"pattern": r"\bfoo\b"})),
        (vec!["^fn"], json!({"pattern": "^fn"})),
        (
            vec!["-i", "FOO"],
            json!({"pattern": "FOO", "case": "insensitive"}),
        ),
        (
            vec!["-i", "FOO"],
            json!({"pattern": "FOO", "case_insensitive": true}),
        ),
        (
            vec!["-S", "foo"],
            json!({"pattern": "foo", "case": "smart"}),
        ),
        (
            vec!["-S", "Foo"],
            json!({"pattern": "Foo", "case": "smart"}),
        ),
        (
            vec!["--hidden", "foo"],
            json!({"pattern": "foo", "hidden": true}),
        ),
        (
            vec!["-g", "*.rs", "foo"],
            json!({"pattern": "foo", "glob": "*.rs"}),
        ),
        (
            vec!["-g", "!sub/**", "foo"],
            json!({"pattern": "foo", "glob": "!sub/**"}),
        ),
        (
            vec!["-g", "*.log", "foo"],
            json!({"pattern": "foo", "glob": "*.log"}),
        ),
        (
            vec!["-t", "py", "-t", "rust", "foo"],
            json!({"pattern": "foo", "type": ["py", "rust"]}),
        ),
        (
            vec!["-C", "1", "-i", "foo"],
            json!({"pattern": "foo", "case": "insensitive", "context": 1}),
        ),
        (
            vec!["-l", "foo"],
            json!({"pattern": "foo", "files_with_matches": true}),
        ),
        (vec!["foo", "sub"], json!({"pattern": "foo", "path": "sub"})),
        (
            vec!["foo", "x.log"],
            json!({"pattern": "foo", "path": "x.log"}),
        ),
        (vec!["ünïcödé"], json!({"pattern": "ünïcödé"})),
        (vec!["-e", "-1"], json!({"pattern": "-1"})),
        (
            vec!["zzz-no-such-text"],
            json!({"pattern": "zzz-no-such-text"}),
        ),
        // Everything the default rules let through, for the checks below.
        (vec!["foo"], json!({"pattern": "foo"})),
    ]
}

fn rg(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("rg")
        .args([
            "-n",
            "-H",
            "--sort",
            "path",
            "--no-config",
            "--color",
            "never",
        ])
        .args(args)
        .current_dir(root)
        .env_remove("RIPGREP_CONFIG_PATH")
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
#[ignore = "needs rg (ripgrep): run by .ci/run"]
fn search_equals_ripgrep() {
    let repo = TestRepo::new();
    assert!(
        rg(repo.path(), &["--version"]).is_some(),
        "rg (ripgrep) is not installed: this test compares with it; apt-get install ripgrep (.ci/run does)"
    );
    for (path, content) in FILES {
        let path = repo.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a file has a parent")).expect("mkdir");
        std::fs::write(&path, content).expect("write a tree file");
    }
    // What git tracks is what rg would see in a fresh clone too; the rest stays untracked.
    repo.commit_all("the tree");
    let cases = cases();
    let calls: Vec<_> = cases
        .iter()
        .map(|(_, args)| {
            let mut args = args.clone();
            // The tool's most (2000 lines shown); every match is still found and counted.
            args["max_results"] = json!(2000);
            call("search", args)
        })
        .collect();
    let server = Server::start(vec![Reply::tool_calls(calls.clone()), Reply::text("done")]);
    repo.run_agent(&server, &["ask", "--here", "search the tree"])
        .assert_code(0);
    let sent = server.requests();
    assert_eq!(sent.len(), 2, "one round of calls, then the answer");
    let ours = |i: usize| {
        let content = sent[1].tool_result(&calls[i].id);
        if content == "no matches" {
            String::new()
        } else {
            content
        }
    };
    for (i, (rg_args, args)) in cases.iter().enumerate() {
        let expected = rg(repo.path(), rg_args).expect("rg runs");
        assert_eq!(ours(i), expected, "rg {rg_args:?} vs {args}");
    }
    // The tree really exercises the rules: something was ignored, hidden, binary.
    let all = ours(cases.len() - 1);
    for absent in [
        "x.log",
        "build/",
        "secret",
        "readme.md",
        "excluded",
        ".hidden",
        "bin.dat",
        "late.bin",
    ] {
        assert!(!all.contains(absent), "{absent} should be skipped:\n{all}");
    }
    assert!(
        all.contains("keep.log") && all.contains("sub/rootonly.txt"),
        "{all}"
    );
}
