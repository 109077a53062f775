//! `run`: a shell command in the checkout, bounded in time and in output.
//!
//! The command runs as `bash -c` in its own process group, so a timeout or a Ctrl-C can kill everything it
//! started (test runners, servers, `sleep &`) with one `killpg`. Output is streamed through a fixed-size head
//! and tail, so `yes` or a runaway log costs 32 KiB, not gigabytes, and the model still sees how it began and
//! how it ended.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{short, str_arg, u64_arg, Tool, ToolContext, ToolOutput};

/// Per-call timeouts above this are capped: one call should not hold the session for longer.
const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// How often the wait loop looks at the child, the clock and the cancel flag.
const POLL: Duration = Duration::from_millis(20);
const HEAD_BYTES: usize = 16 * 1024;
const TAIL_BYTES: usize = 16 * 1024;
/// How long to wait for the output pipe to close once the process group is gone. Only a process that left
/// the group (`setsid`) can keep it open; we stop waiting for it rather than hang.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

pub struct Run;

impl Tool for Run {
    fn name(&self) -> &'static str {
        "run"
    }

    fn description(&self) -> &'static str {
        "Run a shell command with bash in the repository root, e.g. to build, run tests, or use git. stdin is \
         empty; stdout and stderr come back together, with the exit code. Long output keeps its first and last \
         16 KiB. The command is killed (with everything it started) after the timeout; processes still running \
         in the background when it exits are killed too."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command line"},
                "timeout_secs": {"type": "integer", "minimum": 1, "maximum": 600, "description": "Timeout in seconds (default set by the session)"}
            },
            "required": ["command"]
        })
    }

    fn label(&self, args: &serde_json::Value) -> String {
        format!(
            "run {}",
            short(
                args.get("command").and_then(|v| v.as_str()).unwrap_or("?"),
                60
            )
        )
    }

    fn execute(&self, ctx: &ToolContext, args: &serde_json::Value) -> ToolOutput {
        match run(ctx, args) {
            Ok(out) => out,
            Err(message) => ToolOutput::error(message),
        }
    }
}

fn run(ctx: &ToolContext, args: &serde_json::Value) -> Result<ToolOutput, String> {
    let command = str_arg(args, "command")?;
    let timeout = match u64_arg(args, "timeout_secs")? {
        Some(secs) => Duration::from_secs(secs.max(1)).min(MAX_TIMEOUT),
        None => ctx.run_timeout,
    };
    let started = Instant::now();
    // Requested but impossible: the command fails rather than run unsandboxed.
    let sandbox = ctx.sandbox.prepare().map_err(|e| e.to_string())?;
    let (mut child, capture, drained) =
        spawn(ctx, command, sandbox).map_err(|e| format!("cannot start bash: {e}"))?;
    let outcome = wait(&mut child, timeout, &ctx.cancel)
        .map_err(|e| format!("cannot wait for the command: {e}"))?;
    let complete = drained.recv_timeout(DRAIN_GRACE).is_ok();
    let output = capture
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .render();
    let mut out = report(output, &outcome, started.elapsed(), complete);
    if ctx.sandbox.is_active() && crate::safety::sandbox::looks_denied(&out.content) {
        out.content.push_str(&ctx.sandbox.describe());
        out.content.push('\n');
    }
    Ok(out)
}

/// Starts `bash -c command` with stdout and stderr on one pipe (so they interleave as written), and a thread
/// draining that pipe into a [`Capture`]; the channel says when the pipe closed.
fn spawn(
    ctx: &ToolContext,
    command: &str,
    sandbox: Option<crate::safety::sandbox::Prepared>,
) -> io::Result<(Child, Arc<Mutex<Capture>>, mpsc::Receiver<()>)> {
    let (reader, writer) = io::pipe()?;
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(command)
        .current_dir(&ctx.root)
        .stdin(Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer)
        .process_group(0);
    // The model's commands have no business with our provider keys, and a test that prints its environment
    // would put them into the transcript.
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(is_secret_name) {
            cmd.env_remove(key);
        }
    }
    if let Some(sandbox) = sandbox {
        sandbox.install(&mut cmd);
    }
    let child = cmd.spawn()?;
    // `cmd` holds our copies of the write end; until they close, the reader would never see end-of-file.
    drop(cmd);
    let capture = Arc::new(Mutex::new(Capture::default()));
    let (done, drained) = mpsc::channel();
    let sink = Arc::clone(&capture);
    thread::spawn(move || {
        drain(reader, &sink);
        // The receiver may have given up waiting; nothing to do then.
        let _ = done.send(());
    });
    Ok((child, capture, drained))
}

fn is_secret_name(name: &str) -> bool {
    crate::safety::redact::is_secret_name(name)
}

fn drain(mut reader: impl Read, capture: &Mutex<Capture>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => capture
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// How the command ended.
#[derive(Debug)]
enum Outcome {
    /// It exited (or died of a signal) by itself; `leftovers` is true if background processes had to be killed.
    Exited {
        status: ExitStatus,
        leftovers: bool,
    },
    TimedOut(Duration),
    Interrupted,
}

fn wait(child: &mut Child, timeout: Duration, cancel: &AtomicBool) -> io::Result<Outcome> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            // The shell is gone; anything it left running in the background would hold the pipe open and
            // outlive the call. Its group id stays reserved while any member lives, so this kill cannot hit
            // an unrelated process.
            let leftovers = kill_group(child.id());
            return Ok(Outcome::Exited { status, leftovers });
        }
        if cancel.load(Ordering::Relaxed) {
            kill_group(child.id());
            child.wait()?;
            return Ok(Outcome::Interrupted);
        }
        if Instant::now() >= deadline {
            kill_group(child.id());
            child.wait()?;
            return Ok(Outcome::TimedOut(timeout));
        }
        thread::sleep(POLL);
    }
}

/// SIGKILLs the process group led by `pid`; true if there was anyone left to kill.
fn kill_group(pid: u32) -> bool {
    let Ok(pgid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: killpg only sends a signal; the group is the one we created with process_group(0).
    unsafe { libc::killpg(pgid, libc::SIGKILL) == 0 }
}

fn report(output: String, outcome: &Outcome, elapsed: Duration, complete: bool) -> ToolOutput {
    let (status_line, summary, ok) = match outcome {
        Outcome::Exited { status, .. } => match (status.code(), status.signal()) {
            (Some(code), _) => (
                format!("exit {code} after {:.1} s", elapsed.as_secs_f64()),
                format!("exit {code}"),
                code == 0,
            ),
            (None, Some(sig)) => (
                format!("killed by signal {sig}"),
                format!("signal {sig}"),
                false,
            ),
            (None, None) => (
                "ended without an exit code".to_string(),
                "no exit code".to_string(),
                false,
            ),
        },
        Outcome::TimedOut(t) => (
            format!("timed out after {} s, process group killed", t.as_secs()),
            "timed out".to_string(),
            false,
        ),
        Outcome::Interrupted => (
            "interrupted by the user, process group killed".to_string(),
            "interrupted".to_string(),
            false,
        ),
    };
    let mut content = if output.is_empty() {
        "(no output)\n".to_string()
    } else {
        output
    };
    if !content.ends_with('\n') {
        content.push('\n');
    }
    if matches!(
        outcome,
        Outcome::Exited {
            leftovers: true,
            ..
        }
    ) {
        content
            .push_str("[background processes still running when the command exited were killed]\n");
    }
    if !complete {
        content.push_str(
            "[output may be incomplete: a process that left the group still holds it open]\n",
        );
    }
    content.push_str(&format!("[{status_line}]\n"));
    ToolOutput {
        content,
        summary,
        is_error: !ok,
        changed: Vec::new(),
    }
}

/// The first [`HEAD_BYTES`] and last [`TAIL_BYTES`] of a stream, and its total length.
#[derive(Debug, Default)]
struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl Capture {
    fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        let into_head = (HEAD_BYTES - self.head.len()).min(data.len());
        self.head.extend_from_slice(&data[..into_head]);
        let rest = &data[into_head..];
        let keep = &rest[rest.len().saturating_sub(TAIL_BYTES)..];
        let overflow = (self.tail.len() + keep.len()).saturating_sub(TAIL_BYTES);
        self.tail.drain(..overflow);
        self.tail.extend(keep);
    }

    fn render(&self) -> String {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        if kept == self.total {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        format!(
            "{}\n[... {} cut: {} bytes in total ...]\n{}",
            String::from_utf8_lossy(&self.head),
            human_size(self.total - kept),
            thousands(self.total),
            String::from_utf8_lossy(&tail)
        )
    }
}

fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::temp_ctx;

    fn run_cmd(ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        Run.execute(ctx, &args)
    }

    #[test]
    fn exit_code_and_interleaved_output() {
        let ctx = temp_ctx("run-exit");
        let out = run_cmd(
            &ctx,
            json!({"command": "echo out; echo err >&2; echo again; exit 3"}),
        );
        assert!(out.is_error);
        assert_eq!(out.summary, "exit 3");
        assert!(
            out.content.starts_with("out\nerr\nagain\n[exit 3 after "),
            "{}",
            out.content
        );
        let out = run_cmd(&ctx, json!({"command": "pwd"}));
        assert!(!out.is_error);
        assert_eq!(out.summary, "exit 0");
        assert!(
            out.content
                .starts_with(&format!("{}\n", ctx.root.display())),
            "{}",
            out.content
        );
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let ctx = temp_ctx("run-timeout");
        let started = Instant::now();
        let out = run_cmd(
            &ctx,
            json!({"command": "sleep 1000 & sleep 1000; wait", "timeout_secs": 1}),
        );
        // Well under 1 s + DRAIN_GRACE: the background sleep, which holds the pipe, died with the group.
        assert!(
            started.elapsed() < Duration::from_millis(2500),
            "took {:?}",
            started.elapsed()
        );
        assert_eq!(out.summary, "timed out");
        assert!(
            out.content
                .contains("[timed out after 1 s, process group killed]"),
            "{}",
            out.content
        );
        assert!(out.content.contains("(no output)"));
    }

    #[test]
    fn leftover_background_processes_killed() {
        let ctx = temp_ctx("run-leftover");
        let started = Instant::now();
        let out = run_cmd(&ctx, json!({"command": "sleep 1000 & echo started"}));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "took {:?}",
            started.elapsed()
        );
        assert_eq!(out.summary, "exit 0");
        assert!(
            out.content.contains("background processes"),
            "{}",
            out.content
        );
    }

    #[test]
    fn cancel_interrupts() {
        let ctx = temp_ctx("run-cancel");
        let cancel = Arc::clone(&ctx.cancel);
        let setter = thread::spawn(move || {
            thread::sleep(Duration::from_millis(200));
            cancel.store(true, Ordering::Relaxed);
        });
        let started = Instant::now();
        let out = run_cmd(&ctx, json!({"command": "sleep 1000"}));
        setter.join().unwrap();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(out.summary, "interrupted");
    }

    #[test]
    fn output_is_bounded() {
        let ctx = temp_ctx("run-cap");
        let out = run_cmd(&ctx, json!({"command": "yes | head -c 50000000"}));
        assert_eq!(out.summary, "exit 0");
        assert!(
            out.content.len() < HEAD_BYTES + TAIL_BYTES + 200,
            "{} bytes",
            out.content.len()
        );
        assert!(
            out.content.contains("cut: 50,000,000 bytes in total ...]"),
            "{}",
            &out.content[16000..16500]
        );
        assert!(out.content.starts_with("y\ny\n"));
    }

    #[test]
    fn api_keys_not_passed_on() {
        assert!(is_secret_name("OPENAI_API_KEY"));
        assert!(is_secret_name("anthropic_api_key"));
        assert!(!is_secret_name("PATH"));
    }

    #[test]
    fn capture_keeps_head_and_tail() {
        let mut capture = Capture::default();
        for i in 0..10_000u32 {
            capture.push(format!("{i:05}\n").as_bytes());
        }
        let text = capture.render();
        assert!(text.starts_with("00000\n00001\n"));
        assert!(text.ends_with("09998\n09999\n"));
        assert!(
            text.contains("[... 26.6 KiB cut: 60,000 bytes in total ...]"),
            "{text}"
        );
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
    }
}
