//! Starting the model's commands and ending them: `bash -c` in a process group of its own with a clean
//! environment and the session's sandbox, signals to the whole group, and how a process ended. `run` and
//! background jobs ([`super::jobs`]) both start their commands here, so they clean, sandbox and kill alike.

use std::fmt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use crate::safety::sandbox::SandboxError;
use crate::store::git;

use super::tool::ToolContext;

/// `bash -c command` in the checkout, stdin empty, leading a new process group (so one `killpg` ends
/// everything it starts: test runners, servers, `sleep &`), with [`child_env()`] and the session's sandbox.
/// Output streams are the caller's to set. Fails, running nothing, when a requested sandbox cannot be set up.
pub fn bash(ctx: &ToolContext, command: &str) -> Result<Command, SandboxError> {
    let prepared = ctx.sandbox.prepare()?;
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(command)
        .current_dir(&ctx.root)
        .stdin(Stdio::null())
        .process_group(0);
    child_env(&mut cmd, &ctx.session.secret_env);
    prepared.install(&mut cmd);
    Ok(cmd)
}

/// A command that could not be started: the isolation answer remembered across sessions is forgotten (the
/// namespaces it promised may be refused by now), so the next session probes again. Returns `err`.
pub fn start_failed(err: std::io::Error) -> std::io::Error {
    crate::safety::isolate::forget_remembered();
    err
}

/// Set (to `1`) in the environment of everything an agent run starts: a git-agent hook started from within
/// (the model's `git commit`, a check whose tests commit) does nothing, so hooks never recurse into the agent.
pub const IN_AGENT: &str = "GIT_AGENT_IN_RUN";

/// The environment of every command the model runs: no secrets (the patterns of
/// [`crate::safety::secrets::is_secret_name()`] and the names in `secret_env`), nothing that would point its git at another
/// repository or index ([`git::without_redirects()`]: started from a hook, the agent inherits the user's
/// `GIT_INDEX_FILE`), no optional locks, and the [`IN_AGENT`] marker.
pub fn child_env(cmd: &mut Command, secret_env: &[String]) {
    crate::safety::redact::scrub_child_env(cmd, secret_env);
    git::without_redirects(cmd);
    // `git status` would otherwise refresh and rewrite the index it reads: with `ask --here` that is the user's.
    cmd.env("GIT_OPTIONAL_LOCKS", "0");
    cmd.env(IN_AGENT, "1");
}

/// Sends `signal` to the process group led by `pid` (a child started from [`bash()`]); true if the group still
/// had members to receive it.
pub fn signal_group(pid: u32, signal: i32) -> bool {
    crate::sys::process::signal_group(pid, signal)
}

/// SIGKILLs the process group led by `pid`; true if there was anyone left to kill.
pub fn kill_group(pid: u32) -> bool {
    signal_group(pid, crate::sys::signal::SIGKILL)
}

/// Wakes a waiter as soon as a child exits, so a command that ends in a millisecond is reported in about one,
/// not at the next tick of a fixed poll. On Linux a pidfd (5.3+) is polled: it turns readable when the process
/// exits. Without one (an older kernel, another system) the waiter naps instead, starting at 1 ms and doubling
/// up to the caller's slice. Either way the caller still gets control back after each slice, to look at its
/// clock and its cancel flag.
pub struct ExitWatch {
    pidfd: Option<std::os::fd::OwnedFd>,
    nap: Duration,
}

impl ExitWatch {
    /// Watches the child `pid` (not reaped yet).
    pub fn new(pid: u32) -> ExitWatch {
        ExitWatch {
            pidfd: crate::sys::process::exit_fd(pid),
            nap: Duration::from_millis(1),
        }
    }

    /// Waits up to `slice` for the process to exit. True: it has exited (reap it now). False: the slice passed,
    /// or this watch cannot tell (napping); the caller looks at the child itself either way.
    pub fn wait(&mut self, slice: Duration) -> bool {
        if let Some(fd) = &self.pidfd {
            return crate::sys::process::wait_readable(fd, slice);
        }
        std::thread::sleep(self.nap.min(slice));
        self.nap = (self.nap * 2).min(slice.max(Duration::from_millis(1)));
        false
    }
}

/// How a process ended. `Display` says it in a few words ("exited with code 1", "killed by signal 9").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// Neither an exit code nor a signal (not seen on Linux, but the type allows it).
    Unknown,
}

impl Exit {
    pub fn of(status: ExitStatus) -> Exit {
        match (status.code(), status.signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(sig)) => Exit::Signal(sig),
            (None, None) => Exit::Unknown,
        }
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Code(code) => write!(f, "exited with code {code}"),
            Exit::Signal(sig) => write!(f, "killed by signal {sig}"),
            Exit::Unknown => f.write_str("ended"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::temp_ctx;

    #[test]
    fn commands_get_no_git_redirects() {
        let ctx = temp_ctx("process-env");
        let cmd = bash(&ctx, "true").unwrap();
        let envs: Vec<_> = cmd.get_envs().collect();
        for name in git::REDIRECTS {
            assert!(
                envs.contains(&(std::ffi::OsStr::new(name), None)),
                "{name} is not removed: {envs:?}"
            );
        }
        assert!(envs.contains(&(
            std::ffi::OsStr::new("GIT_OPTIONAL_LOCKS"),
            Some(std::ffi::OsStr::new("0"))
        )));
    }

    #[test]
    fn an_exit_wakes_the_watch_and_a_live_child_lets_the_slice_pass() {
        let mut child = Command::new("sh").args(["-c", "exit 3"]).spawn().unwrap();
        let mut watch = ExitWatch::new(child.id());
        // Woken by the exit, not by the end of the slice (a minute: a fixed poll would say false).
        let woke = watch.wait(Duration::from_secs(60));
        assert!(!crate::sys::LINUX_LAYER || woke, "the exit woke the watch");
        assert_eq!(child.wait().unwrap().code(), Some(3));

        let mut child = Command::new("sleep").arg("10").spawn().unwrap();
        let mut watch = ExitWatch::new(child.id());
        assert!(
            !watch.wait(Duration::from_millis(5)),
            "still running: the slice passes"
        );
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn exits_are_described() {
        let status = |script: &str| Command::new("bash").args(["-c", script]).status().unwrap();
        assert_eq!(Exit::of(status("exit 3")).to_string(), "exited with code 3");
        assert_eq!(
            Exit::of(status("kill -9 $$")).to_string(),
            "killed by signal 9"
        );
    }
}
