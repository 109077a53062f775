//! `run`: a shell command in the checkout, bounded in time and in output.
//!
//! The command runs as `bash -c` in its own process group ([`super::process`]), so a timeout or a Ctrl-C can
//! kill everything it started (test runners, servers, `sleep &`) with one `killpg`. Output is streamed through a fixed-size head
//! and tail, so `yes` or a runaway log costs 32 KiB of memory and context, not gigabytes, and the model still
//! sees how it began and how it ended; the full output goes to a file under `<git dir>/agent/output/`, whose
//! path the model gets when something was cut. Commands that do not end by themselves (dev servers) become
//! background jobs ([`super::jobs`]). Provider keys, other secrets and git's redirecting variables are removed
//! from the environment.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;

use super::capture::{thousands, Capture};
use super::jobs::{self, looks_like_server};
use super::process::{self, Exit};
use super::tool::{bool_arg, short, str_arg, u64_arg, Tool, ToolContext, ToolOutput};
use crate::protocol::ToolKind;

/// Per-call timeouts above this are capped: one call should not hold the session for longer.
const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// How often the wait loop looks at the clock and the cancel flag. The command's exit does not wait for it: it
/// wakes the loop at once ([`process::ExitWatch`]).
const POLL: Duration = Duration::from_millis(20);
const HEAD_BYTES: usize = 16 * 1024;
const TAIL_BYTES: usize = 16 * 1024;
/// How long to wait for the output pipe to close once the process group is gone. Only a process that left
/// the group (`setsid`) can keep it open; we stop waiting for it rather than hang.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// How long a background job runs before `run` reports its first output.
const BACKGROUND_SETTLE: Duration = Duration::from_secs(2);

pub struct Run;

impl Tool for Run {
    fn name(&self) -> &str {
        "run"
    }

    fn description(&self) -> &str {
        "Run a bash command in the repository root (build, tests, git). stdin is empty; stdout and stderr \
         come back together with the exit code. Long output keeps its first and last 16 KiB (the rest is saved \
         to a file named there). The command and all it started are killed at the timeout, and what it left \
         running when it exits. Servers and watchers (`npm run dev`, `flask run`, ...) or `background: true` \
         run as background jobs: you get the first output and a job id for `job`."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "timeout_secs": {"type": "integer", "minimum": 1, "maximum": 600},
                "background": {"type": "boolean", "description": "Default: detected from the command"}
            },
            "required": ["command"]
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Execute
    }

    fn command_arg(&self) -> Option<&str> {
        Some("command")
    }

    fn changes_by_scan(&self) -> bool {
        // A command may write anything, and says nothing of what it wrote.
        true
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
    let background = match args.get("background") {
        None | Some(serde_json::Value::Null) => None,
        Some(_) => Some(bool_arg(args, "background")?),
    };
    let server = looks_like_server(command);
    match (background, server) {
        (Some(true), _) => {
            return jobs::start_for_run(ctx, command, "as asked", BACKGROUND_SETTLE);
        }
        (None, Some(kind)) => {
            let why = format!("it looks like {kind}; pass background=false to wait for it instead");
            return jobs::start_for_run(ctx, command, &why, BACKGROUND_SETTLE);
        }
        _ => {}
    }
    let timeout = match u64_arg(args, "timeout_secs")? {
        Some(secs) => Duration::from_secs(secs.max(1)).min(MAX_TIMEOUT),
        None => ctx.run_timeout,
    };
    let started = Instant::now();
    let log = full_output_path(ctx);
    // Requested but impossible: the command fails rather than run unsandboxed.
    let cmd = process::bash(ctx, command).map_err(|e| e.to_string())?;
    let (mut child, capture, drained) = spawn(cmd, log.as_ref())
        .map_err(|e| format!("cannot start bash: {}", process::start_failed(e)))?;
    let outcome = wait(&mut child, timeout, &ctx.cancel)
        .map_err(|e| format!("cannot wait for the command: {e}"))?;
    let complete = drained.recv_timeout(DRAIN_GRACE).is_ok();
    let capture = capture
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // The drain writes the file only once something is cut (the model saw all of a shorter output).
    let saved = log.filter(|path| capture.is_cut() && path.is_file());
    let mut out = report(capture.render(), &outcome, started.elapsed(), complete);
    if ctx.sandbox.is_active() && crate::safety::sandbox::looks_denied(&out.content) {
        out.content.push_str(&ctx.sandbox.describe());
        out.content.push('\n');
    }
    if let Some(path) = saved {
        let note = format!(
            "[the full output ({} bytes) is in {}; look into it with run, e.g. grep or sed -n]\n",
            thousands(capture.total),
            path.display()
        );
        out.content.push_str(&note);
    }
    Ok(out)
}

/// `<output dir>/<n>.log` for this call's full output; `None` when the session keeps no output.
fn full_output_path(ctx: &ToolContext) -> Option<PathBuf> {
    let dir = ctx.session.output_dir.as_ref()?;
    Some(dir.join(format!("{}.log", ctx.session.next_run())))
}

/// The file a command's whole output goes to, made (with its directory) only when the [`Capture`] is about to
/// cut the output: most commands print less than it keeps, and then no file is created and removed again.
/// If it cannot be made or written, the capped output still reaches the model.
struct FullLog {
    path: PathBuf,
    file: Option<File>,
    failed: bool,
}

impl FullLog {
    fn new(path: PathBuf) -> FullLog {
        FullLog {
            path,
            file: None,
            failed: false,
        }
    }

    /// Takes `data`, about to be pushed into `capture`.
    fn write(&mut self, capture: &Capture, data: &[u8]) {
        if self.file.is_none() {
            if self.failed || !capture.would_cut(data.len()) {
                return;
            }
            // The first cut: until now `capture` holds every byte.
            self.file = self.create(capture).ok();
        }
        // A full disk must not stop the drain (the command would block on a full pipe); the file is then
        // incomplete, the capped output is not.
        let written = self
            .file
            .as_mut()
            .is_some_and(|f| f.write_all(data).is_ok());
        if !written {
            self.file = None;
            self.failed = true;
        }
    }

    /// The file (and its directory), holding what `capture` has so far.
    fn create(&self, capture: &Capture) -> io::Result<File> {
        if let Some(dir) = self.path.parent() {
            fs::create_dir_all(dir)?;
        }
        let mut file = File::create(&self.path)?;
        file.write_all(&capture.kept())?;
        Ok(file)
    }
}

/// Starts `cmd` (from [`process::bash()`]) with stdout and stderr on one pipe (so they interleave as written),
/// and a thread draining that pipe into a [`Capture`] (and, once it cuts, all of it into `log`); the channel says when
/// the pipe closed.
fn spawn(
    mut cmd: Command,
    log: Option<&PathBuf>,
) -> io::Result<(Child, Arc<Mutex<Capture>>, mpsc::Receiver<()>)> {
    let (reader, writer) = io::pipe()?;
    cmd.stdout(writer.try_clone()?).stderr(writer);
    let log = log.cloned().map(FullLog::new);
    let child = cmd.spawn()?;
    // `cmd` holds our copies of the write end; until they close, the reader would never see end-of-file.
    drop(cmd);
    let capture = Arc::new(Mutex::new(Capture::new(HEAD_BYTES, TAIL_BYTES)));
    let (done, drained) = mpsc::channel();
    let sink = Arc::clone(&capture);
    thread::spawn(move || {
        drain(reader, &sink, log);
        // The receiver may have given up waiting; nothing to do then.
        let _ = done.send(());
    });
    Ok((child, capture, drained))
}

/// What [`drain()`] reads at a time: under the allocator's mmap threshold (`sys::alloc`), so each command's
/// buffer comes from the heap rather than a mapping of its own made, faulted in and unmapped per command.
const DRAIN_BYTES: usize = 32 * 1024;

fn drain(mut reader: impl Read, capture: &Mutex<Capture>, mut log: Option<FullLog>) {
    let mut buf = vec![0u8; DRAIN_BYTES];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                let mut capture = capture
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                if let Some(log) = log.as_mut() {
                    log.write(&capture, &buf[..n]);
                }
                capture.push(&buf[..n])
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// How the command ended.
#[derive(Debug)]
enum CommandEnd {
    /// It exited (or died of a signal) by itself; `leftovers` is true if background processes had to be killed.
    Exited {
        status: ExitStatus,
        leftovers: bool,
    },
    TimedOut(Duration),
    Interrupted,
}

fn wait(child: &mut Child, timeout: Duration, cancel: &AtomicBool) -> io::Result<CommandEnd> {
    let deadline = Instant::now() + timeout;
    let mut exit = process::ExitWatch::new(child.id());
    loop {
        if let Some(status) = child.try_wait()? {
            // The shell is gone; anything it left running in the background would hold the pipe open and
            // outlive the call. Its group id stays reserved while any member lives, so this kill cannot hit
            // an unrelated process.
            let leftovers = process::kill_group(child.id());
            return Ok(CommandEnd::Exited { status, leftovers });
        }
        if cancel.load(Ordering::Relaxed) {
            process::kill_group(child.id());
            child.wait()?;
            return Ok(CommandEnd::Interrupted);
        }
        let now = Instant::now();
        if now >= deadline {
            process::kill_group(child.id());
            child.wait()?;
            return Ok(CommandEnd::TimedOut(timeout));
        }
        exit.wait(POLL.min(deadline - now));
    }
}

fn report(output: String, outcome: &CommandEnd, elapsed: Duration, complete: bool) -> ToolOutput {
    let (status_line, summary, ok) = match outcome {
        CommandEnd::Exited { status, .. } => match Exit::of(*status) {
            Exit::Code(code) => (
                format!("exit {code} after {:.1} s", elapsed.as_secs_f64()),
                format!("exit {code}"),
                code == 0,
            ),
            signal @ Exit::Signal(sig) => (signal.to_string(), format!("signal {sig}"), false),
            Exit::Unknown => (
                "ended without an exit code".to_string(),
                "no exit code".to_string(),
                false,
            ),
        },
        CommandEnd::TimedOut(t) => (
            format!("timed out after {} s, process group killed", t.as_secs()),
            "timed out".to_string(),
            false,
        ),
        CommandEnd::Interrupted => (
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
        CommandEnd::Exited {
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
        ..Default::default()
    }
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
            out.content.len() < HEAD_BYTES + TAIL_BYTES + 400,
            "{} bytes",
            out.content.len()
        );
        // The whole output is saved, and the model is told where.
        let saved = ctx.root.join(".git/agent/output/test");
        let logs: Vec<_> = fs::read_dir(&saved)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(logs.len(), 1, "{logs:?}");
        assert_eq!(fs::metadata(&logs[0]).unwrap().len(), 50_000_000);
        assert!(
            out.content
                .contains(&format!("is in {}", logs[0].display())),
            "{}",
            &out.content[out.content.len() - 300..]
        );
        // Short output is not kept.
        run_cmd(&ctx, json!({"command": "echo short"}));
        assert_eq!(fs::read_dir(&saved).unwrap().count(), 1);
        assert!(
            out.content.contains("cut: 50,000,000 bytes in total ...]"),
            "{}",
            &out.content[16000..16500]
        );
        assert!(out.content.starts_with("y\ny\n"));
    }

    #[test]
    fn the_full_output_file_is_made_only_when_the_output_is_cut() {
        let ctx = temp_ctx("run-lazy-log");
        let saved = ctx.root.join(".git/agent/output/test");
        let whole = HEAD_BYTES + TAIL_BYTES;
        let out = run_cmd(
            &ctx,
            json!({"command": format!("head -c {whole} /dev/zero | tr '\\0' a")}),
        );
        assert_eq!(out.summary, "exit 0");
        assert!(
            !out.content.contains("cut:"),
            "nothing cut at exactly {whole} bytes"
        );
        assert!(
            !saved.exists(),
            "no file, not even its directory, for output shown whole"
        );
        let out = run_cmd(
            &ctx,
            json!({"command": format!("head -c {} /dev/zero | tr '\\0' a; printf END", whole + 1)}),
        );
        assert!(out.content.contains("cut:"), "{}", out.content.len());
        let logs: Vec<_> = fs::read_dir(&saved)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(logs.len(), 1, "{logs:?}");
        let text = fs::read(&logs[0]).unwrap();
        assert_eq!(text.len(), whole + 1 + 3);
        assert!(text.starts_with(b"aaaa") && text.ends_with(b"aEND"));
    }

    #[test]
    fn servers_are_detected() {
        for cmd in [
            "npm run dev",
            "cd web && npm start",
            "PORT=3000 yarn dev",
            "flask run --port 5000",
            "uvicorn app:app --reload",
            "python3 -m http.server 8000",
            "python manage.py runserver",
            "bundle exec rails s",
            "npx vite",
            "php -S localhost:8000",
        ] {
            assert!(looks_like_server(cmd).is_some(), "{cmd}");
        }
        for cmd in [
            "npm test",
            "npm run build",
            "cargo test",
            "python -m pytest",
            "vite build",
            "docker compose up -d",
            "echo flask run",
        ] {
            assert!(looks_like_server(cmd).is_none(), "{cmd}");
        }
    }

    #[test]
    fn background_job_started_read_and_stopped() {
        let ctx = temp_ctx("run-background");
        let out = run_cmd(
            &ctx,
            json!({"command": "echo listening; while true; do sleep 0.1; done", "background": true}),
        );
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(out.summary, "job 1 started in the background");
        assert!(out.content.contains("listening\n"), "{}", out.content);
        let pid: i32 = out
            .content
            .split("running (pid ")
            .nth(1)
            .unwrap()
            .split(')')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let job = |args| crate::tools::jobs::Job.execute(&ctx, &args);
        let listed = job(json!({"action": "list"}));
        assert!(
            listed.content.starts_with("job 1: running"),
            "{}",
            listed.content
        );
        let more = job(json!({"id": 1}));
        assert_eq!(more.content.lines().nth(1), Some("(no output yet)"));
        let stopped = job(json!({"id": 1, "action": "stop"}));
        assert_eq!(stopped.summary, "job 1 stopped");
        assert!(
            !crate::sys::process::process_exists(pid as u32),
            "the job's shell is still alive"
        );
        assert!(job(json!({"id": 7})).content.contains("there is no job 7"));
    }

    #[test]
    fn session_end_kills_background_jobs() {
        let ctx = temp_ctx("run-bg-end");
        let out = run_cmd(
            &ctx,
            json!({"command": "sleep 1000 & sleep 1000", "background": true}),
        );
        let pid: i32 = out
            .content
            .split("running (pid ")
            .nth(1)
            .unwrap()
            .split(')')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        ctx.session.shutdown();
        // Killed children are reaped by init asynchronously; give that a moment.
        let alive = || crate::sys::process::group_exists(pid as u32);
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(), "the job's group is still alive");
    }
}
