//! The project's check: the one command that says whether the code is right (`check = "cargo test"` in
//! `.git-agent.toml`, or `git agent fix --check CMD`), run the same way wherever it runs.
//!
//! `fix` and the hooks run it in a checkout of the tree being judged (the user's work tree, a scratch
//! checkout of the index or of a commit, the session's checkout after the model's work). It runs as `sh -c`
//! (git's way with command strings from its config), with stdin empty, in a process group of its own (a
//! timeout or Ctrl-C ends everything it started), with the environment the model's commands get (no
//! secrets, nothing that would point its git at another repository, the [`crate::tools::process::IN_AGENT`]
//! marker so hooks that it triggers do nothing), and, once the model has written the code it runs, in the
//! session's sandbox: the check then runs code the model wrote, and must not do more than the model's own
//! commands may. Its output (stdout and stderr interleaved) is kept as head and tail.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::safety::sandbox::Sandbox;
use crate::tools::capture::Capture;
use crate::tools::process::{self, Exit};

use super::control::TurnControl;

/// How much of the output's start is kept.
const HEAD_BYTES: usize = 4 * 1024;
/// How much of the output's end is kept: where test runners print their failures and summary.
const TAIL_BYTES: usize = 12 * 1024;
/// How long to wait for the output pipe once the process group is gone (a process that left the group with
/// `setsid` may hold it open; it is not waited for).
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// The default time limit of one check run.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The command and its time limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    pub command: String,
    pub timeout: Duration,
}

/// How one run of the check ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckRun {
    /// Exit code 0.
    pub passed: bool,
    /// How it ended, in a few words: `exit 0`, `exit 101`, `killed by signal 9`, `timed out after 30m`,
    /// `interrupted`.
    pub end: String,
    /// The exit code, when it exited.
    pub code: Option<i32>,
    pub duration: Duration,
    /// Head and tail of stdout and stderr interleaved, with how much was cut in between.
    pub output: String,
    /// Ctrl-C (or the turn's cancel) ended it.
    pub interrupted: bool,
}

impl CheckRun {
    /// The last `n` lines of the output, for a person.
    #[cfg(test)]
    pub fn last_lines(&self, n: usize) -> Vec<&str> {
        let lines: Vec<&str> = self.output.trim_end().lines().collect();
        lines[lines.len().saturating_sub(n)..].to_vec()
    }
}

/// The error returned by [`Check::run()`]: the check could not be started at all.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("cannot run the check `{command}` in {dir}: {source}")]
    Spawn {
        command: String,
        dir: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot sandbox the check `{command}`: {message}")]
    Sandbox { command: String, message: String },
}

impl Check {
    /// Runs the check in `dir`, confined by `sandbox` when given, until it exits, its time limit passes or
    /// `control` is cancelled.
    pub async fn run(
        &self,
        dir: &Path,
        sandbox: Option<&Sandbox>,
        control: &TurnControl,
    ) -> Result<CheckRun, CheckError> {
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c")
            .arg(&self.command)
            .current_dir(dir)
            .stdin(Stdio::null())
            .process_group(0);
        process::child_env(&mut cmd, &[]);
        if let Some(sandbox) = sandbox {
            let prepared = sandbox.prepare().map_err(|err| CheckError::Sandbox {
                command: self.command.clone(),
                message: err.to_string(),
            })?;
            prepared.install(&mut cmd);
        }
        let spawn_error = |source| CheckError::Spawn {
            command: self.command.clone(),
            dir: dir.display().to_string(),
            source,
        };
        let (reader, writer) = std::io::pipe().map_err(spawn_error)?;
        let err_writer = writer.try_clone().map_err(spawn_error)?;
        cmd.stdout(writer).stderr(err_writer);
        let started = Instant::now();
        let mut cmd = tokio::process::Command::from(cmd);
        let mut child = cmd.spawn().map_err(spawn_error)?;
        // `cmd` holds our copies of the write end; until they close, the reader never sees end-of-file.
        drop(cmd);
        let pid = child.id();
        let (done, drained) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let _ = done.send(drain(reader));
        });
        let (end, code, interrupted) = tokio::select! {
            status = child.wait() => match status {
                Ok(status) => {
                    let exit = Exit::of(status);
                    let code = match exit { Exit::Code(code) => Some(code), _ => None };
                    (describe(exit), code, false)
                }
                Err(err) => (format!("could not be waited for: {err}"), None, false),
            },
            () = tokio::time::sleep(self.timeout) => {
                (format!("timed out after {}", duration_words(self.timeout)), None, false)
            }
            () = control.cancelled() => ("interrupted".to_owned(), None, true),
        };
        // Whatever it left running (a server started by a test, `sleep &`) goes with it; on a timeout or a
        // cancel the shell itself too.
        if let Some(pid) = pid {
            process::kill_group(pid);
        }
        let _ = child.wait().await;
        let duration = started.elapsed();
        let output = match tokio::time::timeout(DRAIN_GRACE, drained).await {
            Ok(Ok(capture)) => capture.render(),
            _ => "[the output could not be read: a process outside the check's group holds it]"
                .into(),
        };
        Ok(CheckRun {
            passed: code == Some(0),
            end,
            code,
            duration,
            output,
            interrupted,
        })
    }
}

/// How a process ended, as the check's report says it.
fn describe(exit: Exit) -> String {
    match exit {
        Exit::Code(code) => format!("exit {code}"),
        Exit::Signal(signal) => format!("killed by signal {signal}"),
        Exit::Unknown => "ended without an exit code".into(),
    }
}

/// `90s`, `20m`, `2h`: how durations are written on the command line.
pub fn duration_words(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 3600 && secs.is_multiple_of(3600) {
        format!("{}h", secs / 3600)
    } else if secs >= 60 && secs.is_multiple_of(60) {
        format!("{}m", secs / 60)
    } else {
        format!("{secs}s")
    }
}

/// Reads the pipe to its end into a head-and-tail capture.
fn drain(mut reader: impl Read) -> Capture {
    let mut capture = Capture::new(HEAD_BYTES, TAIL_BYTES);
    let mut buf = [0u8; 16 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => capture.push(&buf[..n]),
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    capture
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(command: &str, timeout: Duration, dir: &Path) -> CheckRun {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let check = Check {
            command: command.into(),
            timeout,
        };
        runtime
            .block_on(check.run(dir, None, &TurnControl::new()))
            .unwrap()
    }

    #[test]
    fn exit_codes_output_and_the_marker() {
        let dir = std::env::temp_dir();
        let ok = run(
            "echo out; echo err >&2; echo \"marker=$GIT_AGENT_IN_RUN\"",
            Duration::from_secs(10),
            &dir,
        );
        assert!(ok.passed, "{ok:?}");
        assert_eq!((ok.end.as_str(), ok.code), ("exit 0", Some(0)));
        assert_eq!(ok.output, "out\nerr\nmarker=1\n");
        let failed = run("exit 3", Duration::from_secs(10), &dir);
        assert!(!failed.passed);
        assert_eq!(failed.end, "exit 3");
        assert_eq!(failed.last_lines(5), Vec::<&str>::new());
    }

    #[test]
    fn a_timeout_ends_the_whole_group() {
        let dir = std::env::temp_dir();
        let started = Instant::now();
        let run = run("sleep 1000 & sleep 1000", Duration::from_secs(1), &dir);
        assert!(!run.passed);
        assert_eq!(run.end, "timed out after 1s");
        // The background sleep held the pipe: it died with the group, so the drain did not wait for it.
        assert!(started.elapsed() < Duration::from_secs(1) + DRAIN_GRACE);
    }

    #[test]
    fn long_output_keeps_head_and_tail() {
        let mut capture = Capture::new(HEAD_BYTES, TAIL_BYTES);
        capture.push(&vec![b'a'; HEAD_BYTES]);
        capture.push(&vec![b'b'; 100_000]);
        capture.push(b"the end\n");
        let text = capture.render();
        assert!(text.starts_with(&"a".repeat(HEAD_BYTES)));
        assert!(text.ends_with("bthe end\n"));
        assert!(text.contains("cut: 104,104 bytes in total"), "{text}");
        assert_eq!(duration_words(Duration::from_secs(300)), "5m");
        assert_eq!(duration_words(Duration::from_secs(90)), "90s");
    }
}
