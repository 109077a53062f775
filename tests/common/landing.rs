//! Helpers for the tests of bringing a session's work home (accept, review, pr): scripted sessions, commits
//! crafted on a session's branch with plain git (for contents the agent's tools would refuse to make, such
//! as links out of the repository or files under a submodule), and comparisons of the user's state that
//! allow exactly the changes a test expects.

use std::collections::BTreeMap;
use std::path::Path;

use super::{user_state, Output, Reply, Server, TestRepo};

/// Runs a session scripted by `replies` with `prompt` (exit 0 expected) and returns its id.
pub fn session(repo: &TestRepo, prompt: &str, replies: Vec<Reply>) -> String {
    let before: Vec<String> = super::agent_branches(repo);
    let server = Server::start(replies);
    repo.run_agent(&server, &["ask", prompt]).assert_code(0);
    let after = super::agent_branches(repo);
    let new: Vec<&String> = after.iter().filter(|b| !before.contains(b)).collect();
    assert_eq!(new.len(), 1, "one new session: {after:?}");
    new[0].clone()
}

/// Runs a command that needs no model in `repo`.
pub fn agent(repo: &TestRepo, args: &[&str]) -> Output {
    let server = Server::start(vec![]);
    repo.run_agent(&server, args)
}

/// Adds a commit to `agent/<id>` made with plain git in a scratch worktree: `edit` changes the files in the
/// directory it is given; the commit carries the session's trailers, as a step would.
pub fn craft(repo: &TestRepo, id: &str, step: u32, message: &str, edit: impl FnOnce(&Path)) {
    let dir = repo.root().join(format!("craft-{id}-{step}"));
    let dir_s = dir.to_str().unwrap();
    let branch = format!("refs/heads/agent/{id}");
    let old = repo.git(&["rev-parse", &branch]);
    repo.git(&["worktree", "add", "-q", "--detach", dir_s, old.trim()]);
    edit(&dir);
    repo.git(&["-C", dir_s, "add", "-A"]);
    let message = format!("{message}\n\nAgent-Session: {id}\nAgent-Step: {step}\n");
    repo.git(&["-C", dir_s, "commit", "-q", "--no-verify", "-m", &message]);
    let new = repo.git(&["-C", dir_s, "rev-parse", "HEAD"]);
    repo.git(&["update-ref", &branch, new.trim(), old.trim()]);
    repo.git(&["worktree", "remove", "--force", dir_s]);
}

/// The sections of [`user_state`]: HEAD, branches, index, status, stash, files.
pub fn sections(state: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for part in state.split("## ").filter(|p| !p.is_empty()) {
        let (name, body) = part.split_once('\n').unwrap_or((part, ""));
        out.insert(name.to_string(), body.to_string());
    }
    out
}

/// The file lines of a state, without those of `paths` (and what is under them).
fn files_except(state: &BTreeMap<String, String>, paths: &[&str]) -> String {
    state["files"]
        .lines()
        .filter(|line| {
            let rel = line.split(' ').nth(1).unwrap_or_default();
            !paths
                .iter()
                .any(|p| rel == *p || rel.starts_with(&format!("{p}/")))
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Asserts that the user's state is `before` except for the files `changed` (the test checks their bytes
/// itself) and the sections named in `sections_changed` (`index`, `HEAD`, ...; `status` always may change
/// when files do).
pub fn assert_only(repo: &TestRepo, before: &str, changed: &[&str], sections_changed: &[&str]) {
    let now = sections(&user_state(repo));
    let then = sections(before);
    for name in ["HEAD", "branches", "index", "status", "stash"] {
        if sections_changed.contains(&name) || (name == "status" && !changed.is_empty()) {
            continue;
        }
        assert_eq!(now[name], then[name], "## {name} changed");
    }
    assert_eq!(
        files_except(&now, changed),
        files_except(&then, changed),
        "files other than {changed:?} changed"
    );
}
