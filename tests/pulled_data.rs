//! What a collaborator pushes, and what a clone or a pipe hands git-agent, read as data (issue 22, the
//! gaps its first audit left): a prompt piped on stdin that is not UTF-8 is taken with its bad bytes replaced.

use std::fs;

use crate::common::{run, Reply, Server, TestRepo};

/// Audit finding 4: `ask -` refused a prompt on stdin that was not UTF-8; now its bad bytes are replaced
/// (as piped chat does) and a warning says so once.
#[test]
fn a_prompt_on_stdin_that_is_not_utf8_is_taken_with_its_bad_bytes_replaced() {
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::text("done")]);
    let file = repo.root().join("prompt.bin");
    fs::write(&file, b"fix the \xff\xfe parser\nand \xc3 the tests\n").unwrap();
    let mut cmd = repo.agent(&server, &["ask", "-"]);
    cmd.stdin(fs::File::open(&file).unwrap());
    let out = run(&mut cmd);
    out.assert_code(0);
    assert_eq!(out.stdout(), "done\n", "{out}");
    assert_eq!(
        out.stderr().matches("not UTF-8").count(),
        1,
        "said once: {out}"
    );
    assert!(
        out.stderr()
            .contains("the prompt on stdin is not UTF-8: its invalid bytes were replaced with U+FFFD"),
        "{out}"
    );
    let texts = server.requests()[0].user_texts();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("fix the \u{fffd}\u{fffd} parser\nand \u{fffd} the tests")),
        "{texts:?}"
    );
}
