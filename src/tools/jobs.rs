//! Background jobs: commands that do not end by themselves (dev servers, watchers), run so they cannot hang
//! a turn.
//!
//! `run` starts one when the model asks (`background: true`) or when the command looks like a server
//! ([`looks_like_server()`]). The job runs detached from the turn in its own process group (started, like a
//! `run` command, by [`super::process`]), its output going to a log file; the `job` tool reads what it
//! printed since the last look and stops it. Every job is killed (its whole group) when the session ends.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;

use super::process::{self, Exit};
use super::state::{Entry, Jobs};
use super::tool::{opt_str_arg, u64_arg, Tool, ToolContext, ToolOutput};
use crate::protocol::ToolKind;

/// Output shown per look, head and tail; the log keeps everything.
const SHOWN_BYTES: u64 = 8 * 1024;
/// How long a stopped job gets to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);

impl Entry {
    /// The exit status, if the job has ended (reaping it).
    fn poll(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    fn state(&mut self) -> String {
        match self.poll() {
            None => format!("running (pid {})", self.child.id()),
            Some(status) => Exit::of(status).to_string(),
        }
    }

    /// What the job printed since the last look, head and tail kept.
    fn new_output(&mut self) -> io::Result<String> {
        let (text, end) = read_log(&self.log, self.seen)?;
        self.seen = end;
        Ok(text)
    }

    /// SIGTERM to the group, SIGKILL after the grace period; reaps the shell.
    fn stop(&mut self, grace: Duration) {
        let pid = self.child.id();
        if self.poll().is_none() {
            process::signal_group(pid, crate::sys::signal::SIGTERM);
            let deadline = Instant::now() + grace;
            while self.poll().is_none() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(20));
            }
        }
        // The shell may be gone while children it started still run in its group.
        process::kill_group(pid);
        if self.status.is_none() {
            self.status = self.child.wait().ok();
        }
    }
}

impl Jobs {
    /// Starts `command` in the background; returns the job id.
    pub fn start(&mut self, ctx: &ToolContext, command: &str) -> io::Result<u32> {
        self.next += 1;
        let id = self.next;
        // A server gets the same sandbox as any command; if it cannot be applied, the job does not start.
        let mut cmd = process::bash(ctx, command).map_err(io::Error::other)?;
        let log = log_path(ctx, id)?;
        let out = File::create(&log)?;
        cmd.stdout(out.try_clone()?)
            .stderr(out)
            // Servers written in Python would otherwise keep their log lines in a buffer until exit.
            .env("PYTHONUNBUFFERED", "1");
        let child = cmd.spawn().map_err(process::start_failed)?;
        self.list.push(Entry {
            id,
            command: command.to_string(),
            child,
            log,
            seen: 0,
            status: None,
        });
        Ok(id)
    }

    /// Stops every job that is still running.
    pub fn stop_all(&mut self) {
        let running: Vec<&mut Entry> = self
            .list
            .iter_mut()
            .filter(|e| e.status.is_none())
            .collect();
        if running.is_empty() {
            return;
        }
        // One grace period for all of them, not one each.
        for entry in &running {
            process::signal_group(entry.child.id(), crate::sys::signal::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_millis(500);
        for entry in running {
            let left = deadline.saturating_duration_since(Instant::now());
            entry.stop(left);
        }
    }

    fn get(&mut self, id: u32) -> Result<&mut Entry, String> {
        let ids: Vec<String> = self.list.iter().map(|e| e.id.to_string()).collect();
        self.list.iter_mut().find(|e| e.id == id).ok_or_else(|| {
            if ids.is_empty() {
                format!("there is no job {id}; no background job was started in this session")
            } else {
                format!("there is no job {id}; jobs: {}", ids.join(", "))
            }
        })
    }
}

/// `job-<id>.log` in the session's output directory (or the temp dir when there is none).
fn log_path(ctx: &ToolContext, id: u32) -> io::Result<PathBuf> {
    let dir = match &ctx.session.output_dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("git-agent-jobs-{}", std::process::id())),
    };
    fs::create_dir_all(&dir)?;
    Ok(dir.join(format!("job-{id}.log")))
}

/// The log from byte `from` to its current end, with the middle cut when it is long; and the end offset.
pub fn read_log(path: &Path, from: u64) -> io::Result<(String, u64)> {
    let mut file = File::open(path)?;
    let end = file.metadata()?.len();
    let len = end.saturating_sub(from);
    let read_at = |file: &mut File, at: u64, n: u64| -> io::Result<String> {
        file.seek(SeekFrom::Start(at))?;
        let mut buf = Vec::new();
        file.take(n).read_to_end(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    };
    if len <= 2 * SHOWN_BYTES {
        return Ok((read_at(&mut file, from, len)?, end));
    }
    let head = read_at(&mut file, from, SHOWN_BYTES)?;
    let tail = read_at(&mut file, end - SHOWN_BYTES, SHOWN_BYTES)?;
    let cut = len - 2 * SHOWN_BYTES;
    Ok((
        format!(
            "{head}\n[... {cut} bytes cut; the whole log is {} ...]\n{tail}",
            path.display()
        ),
        end,
    ))
}

/// Starts a background job for `run` and reports what it printed in its first `settle` time.
pub fn start_for_run(
    ctx: &ToolContext,
    command: &str,
    why: &str,
    settle: Duration,
) -> Result<ToolOutput, String> {
    let mut jobs = ctx.session.jobs();
    let id = jobs
        .start(ctx, command)
        .map_err(|e| format!("cannot start the background job: {e}"))?;
    let entry = jobs.get(id)?;
    let deadline = Instant::now() + settle;
    while Instant::now() < deadline && entry.poll().is_none() && !ctx.is_cancelled() {
        thread::sleep(Duration::from_millis(50));
    }
    let output = entry.new_output().unwrap_or_default();
    let state = entry.state();
    let log = entry.log.display().to_string();
    let ended = entry.status;
    let mut content = format!(
        "started in the background as job {id} ({why}); output goes to {log}\nstatus: {state}\n"
    );
    content.push_str(&format_output(&output));
    match ended {
        Some(status) => content.push_str(&format!(
            "[the job already ended: {}]\n",
            Exit::of(status)
        )),
        None => content.push_str(&format!(
            "[read more output with job {{\"id\": {id}, \"action\": \"output\"}}, stop it with job {{\"id\": {id}, \
             \"action\": \"stop\"}}; it is stopped when the session ends]\n"
        )),
    }
    let summary = match ended {
        Some(status) => format!("job {id}: {}", Exit::of(status)),
        None => format!("job {id} started in the background"),
    };
    Ok(ToolOutput {
        is_error: ended.is_some_and(|s| !s.success()),
        ..ToolOutput::ok(content, summary)
    })
}

fn format_output(output: &str) -> String {
    if output.is_empty() {
        "(no output yet)\n".to_string()
    } else if output.ends_with('\n') {
        output.to_string()
    } else {
        format!("{output}\n")
    }
}

/// Why a command looks like a long-running server, or `None`. Matches the first word(s) of each part of a
/// `&&`/`;` chain, so `cd web && npm run dev` is caught and `npm run build` is not.
pub fn looks_like_server(command: &str) -> Option<&'static str> {
    let command = command.trim().trim_end_matches('&').trim();
    command
        .split(['\n', ';'])
        .flat_map(|part| part.split("&&"))
        .find_map(|part| server_kind(&part.split_whitespace().collect::<Vec<_>>()))
}

fn server_kind(words: &[&str]) -> Option<&'static str> {
    // Skip environment assignments (`PORT=3000 npm start`) and wrappers.
    let mut words = words;
    while let Some((first, rest)) = words.split_first() {
        if first.contains('=') || matches!(*first, "exec" | "nohup" | "npx" | "bunx" | "time") {
            words = rest;
        } else {
            break;
        }
    }
    let w = |i: usize| words.get(i).copied().unwrap_or("");
    let script = |i: usize| {
        matches!(
            w(i),
            "dev" | "start" | "serve" | "server" | "watch" | "preview"
        )
    };
    let tool = w(0).rsplit('/').next().unwrap_or("");
    let found = match tool {
        "npm" | "yarn" | "pnpm" | "bun" => {
            (script(1) || (w(1) == "run" && script(2))).then_some("a dev server")
        }
        "next" | "nuxt" | "astro" | "remix" | "gatsby" | "vite" => {
            (w(1).is_empty() || script(1) || w(1) == "develop").then_some("a dev server")
        }
        "ng" | "webpack" => (w(1) == "serve").then_some("a dev server"),
        "webpack-dev-server" | "nodemon" | "http-server" | "live-server" | "serve" => {
            Some("a server")
        }
        "flask" => (w(1) == "run").then_some("a Flask server"),
        "uvicorn" | "gunicorn" | "hypercorn" | "daphne" => Some("a Python server"),
        "python" | "python3" => (w(1) == "-m" && matches!(w(2), "http.server" | "flask")
            || (w(1).ends_with("manage.py") && w(2) == "runserver"))
            .then_some("a Python server"),
        "streamlit" => (w(1) == "run").then_some("a Streamlit app"),
        "jupyter" => matches!(w(1), "notebook" | "lab").then_some("Jupyter"),
        "rails" => matches!(w(1), "s" | "server").then_some("a Rails server"),
        "bundle" => (w(1) == "exec" && server_kind(&words[2..]).is_some()).then_some("a server"),
        "php" => (w(1) == "-S" || (w(1) == "artisan" && w(2) == "serve")).then_some("a PHP server"),
        "hugo" => matches!(w(1), "server" | "serve").then_some("a Hugo server"),
        "jekyll" | "mkdocs" => (w(1) == "serve").then_some("a docs server"),
        "docker" => (w(1) == "compose" && w(2) == "up" && !words.contains(&"-d"))
            .then_some("docker compose up"),
        "docker-compose" => (w(1) == "up" && !words.contains(&"-d")).then_some("docker compose up"),
        "cargo" => (w(1) == "watch").then_some("a watcher"),
        "tail" => words.contains(&"-f").then_some("tail -f"),
        _ => None,
    };
    found.or_else(|| {
        words
            .iter()
            .any(|w| w.ends_with("manage.py"))
            .then(|| (words.contains(&"runserver")).then_some("a Django server"))
            .flatten()
    })
}

/// `job`: read a background job's output, stop it, or list the jobs.
pub struct Job;

impl Tool for Job {
    fn name(&self) -> &str {
        "job"
    }

    fn description(&self) -> &str {
        "Background jobs of `run`. `output` (the default action): what job `id` printed since you last looked, \
         and whether it still runs; `stop`: SIGTERM, then SIGKILL, to its whole process group; `list`: all jobs."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["output", "stop", "list"]},
                "id": {"type": "integer", "minimum": 1}
            }
        })
    }

    fn is_mutating(&self) -> bool {
        // Stopping a job can make it flush files; the defensive answer.
        true
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Execute
    }

    fn label(&self, args: &serde_json::Value) -> String {
        let action = args
            .get("action")
            .and_then(|v| v.as_str())
            .unwrap_or("output");
        match args.get("id").and_then(|v| v.as_u64()) {
            Some(id) => format!("job {id} {action}"),
            None => format!("job {action}"),
        }
    }

    fn execute(&self, ctx: &ToolContext, args: &serde_json::Value) -> ToolOutput {
        match job(ctx, args) {
            Ok(out) => out,
            Err(message) => ToolOutput::error(message),
        }
    }
}

fn job(ctx: &ToolContext, args: &serde_json::Value) -> Result<ToolOutput, String> {
    let action = opt_str_arg(args, "action")?.unwrap_or("output");
    let mut jobs = ctx.session.jobs();
    if action == "list" {
        return Ok(list(&mut jobs));
    }
    let id = u64_arg(args, "id")?
        .ok_or("missing required integer argument `id` (the job number run gave)")?;
    let id = u32::try_from(id).map_err(|_| format!("there is no job {id}"))?;
    let entry = jobs.get(id)?;
    match action {
        "output" => {
            let output = entry
                .new_output()
                .map_err(|e| format!("cannot read the log of job {id}: {e}"))?;
            let state = entry.state();
            let content = format!("job {id}: {state}\n{}", format_output(&output));
            let summary = format!("job {id}: {state}");
            Ok(ToolOutput::ok(content, summary))
        }
        "stop" => {
            let was_running = entry.poll().is_none();
            entry.stop(STOP_GRACE);
            let output = entry.new_output().unwrap_or_default();
            let state = entry.state();
            let verb = if was_running {
                "stopped"
            } else {
                "had already ended"
            };
            let content = format!("job {id} {verb}: {state}\n{}", format_output(&output));
            Ok(ToolOutput::ok(content, format!("job {id} {verb}")))
        }
        other => Err(format!(
            "unknown action '{other}'; use output, stop or list"
        )),
    }
}

fn list(jobs: &mut Jobs) -> ToolOutput {
    if jobs.list.is_empty() {
        return ToolOutput::ok("no background jobs", "no jobs");
    }
    let mut text = String::new();
    for entry in &mut jobs.list {
        let state = entry.state();
        text.push_str(&format!(
            "job {}: {state}: {}\n  log: {}\n",
            entry.id,
            super::tool::short(&entry.command, 80),
            entry.log.display()
        ));
    }
    let n = jobs.list.len();
    ToolOutput::ok(text, format!("{n} job{}", if n == 1 { "" } else { "s" }))
}
