//! The stdio transport: the server is a child process; we write one JSON-RPC message a line to its stdin and
//! read one a line from its stdout. Its stderr is kept (the last lines) because that is where a server says
//! why it failed.
//!
//! The child runs in its own process group, so shutdown reaches what it started too (`npx` starts `node`,
//! `uvx` starts `python`), and under the same supervisor as `run` commands, so the group dies with the agent
//! even when the agent is killed. Shutdown follows the MCP lifecycle: close stdin, wait; then SIGTERM to the group,
//! wait; then SIGKILL.

use std::path::Path;
use std::process::Stdio as Piped;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use tokio::process::{Child, ChildStdin, Command};

use super::jsonrpc;
use super::transport::{Inbound, InboundTx, McpError, SharedTail, MAX_MESSAGE_BYTES};
use crate::safety::isolate;
use crate::sys::signal::{SIGKILL, SIGTERM};

/// How long a server gets to exit after its stdin closed. Short: a server that keeps timers (server-everything
/// sends notifications on an interval) never exits on EOF, and a session's end waited the whole grace for it
/// (2 s a session); SIGTERM is the polite request that follows, and the spec's "reasonable time" is after it.
const STDIN_GRACE: Duration = Duration::from_millis(250);
/// How long a server gets to exit after SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(2);

/// A running stdio server.
#[derive(Debug)]
pub struct Stdio {
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    child: Mutex<Option<Child>>,
    pid: Option<u32>,
}

/// What to start.
pub struct Launch<'a> {
    pub command: &'a str,
    pub args: &'a [String],
    pub env: &'a [(String, String)],
    pub cwd: &'a Path,
    /// The session's sandbox, for a server whose files the model may have written (a repository's).
    pub sandbox: Option<&'a crate::safety::sandbox::Sandbox>,
}

impl Stdio {
    /// Starts the server; its messages go to `inbound` from now on.
    /// Its stderr lines go to `stderr`.
    pub(crate) fn spawn(
        launch: &Launch<'_>,
        inbound: InboundTx,
        stderr: SharedTail,
    ) -> Result<Stdio, McpError> {
        let mut cmd = Command::new(launch.command);
        cmd.args(launch.args)
            .current_dir(launch.cwd)
            .stdin(Piped::piped())
            .stdout(Piped::piped())
            .stderr(Piped::piped())
            .process_group(0)
            // A panic or an early return must not leave a server running.
            .kill_on_drop(true);
        // The environment every child of the agent gets: no secrets, no git redirects (a server must see the
        // checkout it runs in, not the index of a hook that started us). Then exactly the env it was given.
        crate::tools::process::child_env(cmd.as_std_mut(), &[]);
        cmd.envs(launch.env.iter().map(|(k, v)| (k, v)));
        // Under the supervisor `run` commands have (safety::isolate): the server's whole process group dies
        // with the agent, even by SIGKILL, which `kill_on_drop` cannot do; and where the kernel allows it the
        // server sees only its own processes, not the environments of git or the user's shell.
        match launch.sandbox {
            // The sandbox of `run` (supervisor, Landlock, seccomp): what the server runs may be the model's
            // code, which must not write outside the checkout (issue 23, finding 1).
            Some(sandbox) => sandbox
                .prepare()
                .map_err(|err| McpError::Spawn {
                    command: launch.command.to_string(),
                    message: err.to_string(),
                })?
                .install(cmd.as_std_mut()),
            None => {
                let namespace = match isolate::probe() {
                    isolate::Isolation::Namespace { user } => {
                        Some(isolate::Namespace::new(*user, &[]))
                    }
                    isolate::Isolation::Shared { .. } => None,
                };
                isolate::Plan::new(namespace).install(cmd.as_std_mut());
            }
        }
        let mut child = cmd.spawn().map_err(|err| McpError::Spawn {
            command: launch.command.to_string(),
            message: spawn_message(launch.command, &err),
        })?;
        if let Some(out) = child.stdout.take() {
            tokio::spawn(read_messages(out, inbound));
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(read_stderr(err, stderr));
        }
        Ok(Stdio {
            stdin: tokio::sync::Mutex::new(child.stdin.take()),
            pid: child.id(),
            child: Mutex::new(Some(child)),
        })
    }

    /// Writes one message.
    pub(crate) async fn send(&self, message: &Value) -> Result<(), McpError> {
        let mut stdin = self.stdin.lock().await;
        let Some(pipe) = stdin.as_mut() else {
            return Err(McpError::Closed("its input is closed".into()));
        };
        let line = jsonrpc::encode_line(message);
        let written = async {
            pipe.write_all(&line).await?;
            pipe.flush().await
        };
        written
            .await
            .map_err(|err| McpError::Closed(err.to_string()))
    }

    /// How the process ended, if it has: `exited with status 1`.
    pub(crate) fn exit_status(&self) -> Option<String> {
        let mut child = self.child.lock().ok()?;
        let status = child.as_mut()?.try_wait().ok()??;
        Some(match status.code() {
            Some(code) => format!("exited with status {code}"),
            None => format!("ended by a signal ({status})"),
        })
    }

    /// Stops the server: stdin closed, SIGTERM after [`STDIN_GRACE`], SIGKILL after [`TERM_GRACE`].
    pub(crate) async fn shutdown(&self) {
        drop(self.stdin.lock().await.take());
        let Some(mut child) = self.child.lock().ok().and_then(|mut c| c.take()) else {
            return;
        };
        for (grace, signal) in [
            (STDIN_GRACE, Some(SIGTERM)),
            (TERM_GRACE, Some(SIGKILL)),
            (TERM_GRACE, None),
        ] {
            if tokio::time::timeout(grace, child.wait()).await.is_ok() {
                break;
            }
            match (signal, self.pid) {
                (Some(signal), Some(pid)) => kill_group(pid, signal),
                _ => break,
            }
        }
        // Whatever of the group outlived its leader (a daemonised helper) goes too.
        if let Some(pid) = self.pid {
            kill_group(pid, SIGKILL);
        }
    }
}

impl Stdio {
    /// [`Stdio::shutdown`] on this thread, for code that cannot await: stdin closed, then SIGTERM and SIGKILL
    /// to the group after the same graces (polled, so a server that exits at once costs nothing).
    pub(crate) fn stop_blocking(&self) {
        if let Ok(mut stdin) = self.stdin.try_lock() {
            drop(stdin.take());
        }
        let Some(mut child) = self.child.lock().ok().and_then(|mut c| c.take()) else {
            return;
        };
        let exited = |child: &mut Child, grace: Duration| {
            let deadline = std::time::Instant::now() + grace;
            while std::time::Instant::now() < deadline {
                if !matches!(child.try_wait(), Ok(None)) {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            false
        };
        for (grace, signal) in [(STDIN_GRACE, SIGTERM), (TERM_GRACE, SIGKILL)] {
            if exited(&mut child, grace) {
                break;
            }
            if let Some(pid) = self.pid {
                kill_group(pid, signal);
            }
        }
        if let Some(pid) = self.pid {
            kill_group(pid, SIGKILL);
        }
    }
}

impl Drop for Stdio {
    /// A server dropped without a shutdown (still starting when the session ended, a start that was given
    /// up): `kill_on_drop` ends only its leader, so the rest of its group (`sh -c '...; exec server'`, the
    /// `python` that `uvx` started) goes here.
    fn drop(&mut self) {
        let running = self.child.get_mut().ok().and_then(|c| c.as_mut()).is_some();
        if let (true, Some(pid)) = (running, self.pid) {
            kill_group(pid, SIGKILL);
        }
    }
}

fn spawn_message(command: &str, err: &std::io::Error) -> String {
    if err.kind() == std::io::ErrorKind::NotFound {
        format!("{command} is not installed or not on PATH")
    } else {
        err.to_string()
    }
}

fn kill_group(pid: u32, signal: i32) {
    crate::sys::process::signal_group(pid, signal);
}

/// Reads stdout line by line until it closes; a line longer than [`MAX_MESSAGE_BYTES`] is skipped.
async fn read_messages(out: tokio::process::ChildStdout, inbound: InboundTx) {
    let mut reader = BufReader::new(out);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line(&mut reader, &mut line, MAX_MESSAGE_BYTES).await {
            Ok(Line::End) => break,
            Ok(Line::TooLong) => {
                let id = jsonrpc::leading_id(&line);
                if inbound.send(Inbound::TooLarge { id }).is_err() {
                    return;
                }
            }
            Ok(Line::Whole) => match jsonrpc::parse(&line) {
                Ok(messages) => {
                    for message in messages {
                        if inbound.send(Inbound::Message(message)).is_err() {
                            return;
                        }
                    }
                }
                Err(what) => {
                    let _ = inbound.send(Inbound::Garbage(what));
                }
            },
            Err(err) => {
                let _ = inbound.send(Inbound::Closed(format!("reading its output failed: {err}")));
                return;
            }
        }
    }
    let _ = inbound.send(Inbound::Closed(String::new()));
}

/// What [`read_line`] read.
#[derive(Debug, PartialEq)]
enum Line {
    /// A line (or the last, unterminated one).
    Whole,
    /// A line longer than the limit: its first `limit` bytes were kept, the rest read and dropped.
    TooLong,
    /// The stream ended.
    End,
}

/// Reads one line into `line`, keeping at most `limit` bytes of it: what is past the limit is consumed as it
/// arrives and dropped, so a huge line never sits in memory.
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Line> {
    let mut too_long = false;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::End,
                (false, false) => Line::Whole,
            });
        }
        let (used, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buf.len(), false),
        };
        if !too_long {
            let room = limit.saturating_sub(line.len());
            line.extend_from_slice(&buf[..used.min(room)]);
            too_long = used > room;
        }
        reader.consume(used);
        if done {
            return Ok(if too_long { Line::TooLong } else { Line::Whole });
        }
    }
}

async fn read_stderr(err: tokio::process::ChildStderr, tail: SharedTail) {
    let mut reader = BufReader::new(err);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if let Ok(mut tail) = tail.lock() {
                    tail.push(&String::from_utf8_lossy(&line));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn long_lines_are_cut_while_they_stream() {
        let text = b"short\n0123456789abcdef\nlast".to_vec();
        let mut reader = BufReader::with_capacity(4, &text[..]);
        let mut line = Vec::new();
        let mut read = Vec::new();
        loop {
            line.clear();
            let what = read_line(&mut reader, &mut line, 8).await.expect("reads");
            if what == Line::End {
                break;
            }
            read.push((what, String::from_utf8_lossy(&line).into_owned()));
        }
        assert_eq!(
            read,
            [
                (Line::Whole, "short\n".to_string()),
                (Line::TooLong, "01234567".to_string()),
                (Line::Whole, "last".to_string()),
            ]
        );
    }
}
