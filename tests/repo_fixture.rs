//! Tests of `TestRepo` and `user_state`: the snapshot must notice every kind of change a session could make.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use crate::common::{fsck, user_state, TestRepo};

/// A description and a change of the user's state.
type Change = (&'static str, fn(&TestRepo));

#[test]
fn user_state_notices_every_kind_of_change() {
    let repo = TestRepo::new();
    let changes: [Change; 8] = [
        ("file bytes", |r| r.write("file.txt", "one\ntwo\nthree \n")),
        ("untracked file", |r| r.write("new/untracked.txt", "x")),
        ("file mode", |r| {
            fs::set_permissions(
                r.path().join("README.md"),
                fs::Permissions::from_mode(0o755),
            )
            .expect("chmod")
        }),
        ("index", |r| {
            r.write("file.txt", "staged\n");
            r.git(&["add", "file.txt"]);
            r.git(&["checkout", "--", "file.txt"]);
        }),
        ("HEAD", |r| {
            r.git(&["commit", "-q", "--allow-empty", "-m", "empty"]);
        }),
        ("branch", |r| {
            r.git(&["branch", "other"]);
        }),
        ("checked-out branch", |r| {
            r.git(&["checkout", "-q", "-b", "topic"]);
        }),
        ("stash", |r| {
            r.write("file.txt", "stashed\n");
            r.git(&["stash", "-q"]);
        }),
    ];
    for (what, change) in changes {
        let before = user_state(&repo);
        change(&repo);
        assert_ne!(
            user_state(&repo),
            before,
            "user_state missed a change of {what}"
        );
    }
    fsck(&repo);
}

#[test]
fn agent_branches_are_not_user_state() {
    let repo = TestRepo::new();
    let before = user_state(&repo);

    repo.git(&["branch", "agent/abc123"]);

    assert_eq!(user_state(&repo), before);
}

#[test]
fn repos_are_hermetic_and_deterministic() {
    let (a, b) = (TestRepo::new(), TestRepo::new());

    assert_ne!(a.path(), b.path());
    // Fixed identities and dates make the same content the same commit id in every repo.
    assert_eq!(a.git(&["rev-parse", "HEAD"]), b.git(&["rev-parse", "HEAD"]));
    assert_eq!(
        a.git(&["log", "-1", "--format=%an <%ae> %at"]),
        "Test User <test@example.com> 1700000000\n"
    );
    assert_eq!(
        a.git(&["config", "--global", "--list"]),
        "",
        "the global config is /dev/null"
    );
}
