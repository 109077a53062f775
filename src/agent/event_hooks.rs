//! Event hooks in a session: which hooks an event runs, running them, and what their answers mean for the
//! turn (the format and where hooks come from are [`crate::config::event_hooks`]).
//!
//! A hook runs like the model's commands: `sh -c` in the checkout, in a process group of its own, with the
//! environment the model's commands get (no keys) and the session's sandbox, its JSON event on stdin, killed
//! with its group when its time limit passes. The hooks of one event run at once, each on its own thread.
//!
//! What an answer means follows Claude Code: exit 0 goes on, and a JSON object on stdout may carry
//! `decision`/`reason`, `additionalContext`, `updatedInput` and `hookSpecificOutput.permissionDecision`
//! (`allow`, `deny`, `ask`); exit 2 blocks, its stderr being the reason the model gets; any other exit is
//! reported and the session goes on. Before a tool call (`PreToolUse`) a hook that timed out or crashed
//! blocks the call: a guard that could not answer must not wave the call through.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::config::event_hooks::{self, EventHook, HookEvent};
use crate::config::trust;
use crate::safety::sandbox::Sandbox;
use crate::tools::process::{self, Exit, ExitWatch};

/// The most of a hook's stdout or stderr that is kept.
const OUTPUT_LIMIT: usize = 64 * 1024;
/// An event's JSON up to this size is written to the hook's stdin directly: it fits in a pipe's buffer, so
/// the write never waits for a hook that does not read.
const PIPE_ROOM: usize = 32 * 1024;
/// How often a Stop hook may send the model back to work in one turn; the turn's budgets bound it too.
pub(super) const MAX_STOP_CONTINUES: u32 = 3;

/// The hooks a session runs, read once when it opens.
#[derive(Debug, Default, Clone)]
pub(crate) struct SessionHooks {
    hooks: Arc<Vec<EventHook>>,
}

impl SessionHooks {
    /// The hooks of the user's files and config and of the repository's trusted files; the notices for
    /// what was left out (untrusted files, unreadable ones).
    pub(crate) fn load(
        workdir: &Path,
        common_dir: &Path,
        own: Option<&Value>,
    ) -> (SessionHooks, Vec<String>) {
        let home = dirs::home_dir();
        let ledger = trust::Ledger::for_repo(common_dir);
        let trusted = |source: &str, text: &str| {
            ledger.standing(&trust::Item::event_hooks(source, text)) == trust::Standing::Trusted
        };
        let found = event_hooks::load(workdir, home.as_deref(), own, &trusted);
        let mut notices: Vec<String> = found
            .problems
            .iter()
            .map(|p| format!("event hooks skipped: {p}"))
            .collect();
        notices.extend(event_hooks::untrusted_notice(&found.untrusted));
        (
            SessionHooks {
                hooks: Arc::new(found.hooks),
            },
            notices,
        )
    }

    /// The hooks of `event` for `names` (a tool's names, or the event's source).
    pub(super) fn matching(&self, event: HookEvent, names: &[&str]) -> Vec<EventHook> {
        self.hooks
            .iter()
            .filter(|h| h.event == event && h.matches(names))
            .cloned()
            .collect()
    }

    pub(super) fn has(&self, event: HookEvent) -> bool {
        self.hooks.iter().any(|h| h.event == event)
    }
}

/// How one hook's run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum End {
    Exit(i32),
    TimedOut(Duration),
    /// Killed by a signal, or it could not be started at all.
    Crashed(String),
}

/// One hook's run.
#[derive(Clone, Debug)]
pub(super) struct HookRun {
    pub hook: EventHook,
    pub end: End,
    pub stdout: String,
    pub stderr: String,
    pub duration: Duration,
}

/// What the permission side of a `PreToolUse` answer says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Permission {
    Allow,
    Ask,
}

/// What the hooks of one event say, together.
#[derive(Debug, Default)]
pub(super) struct Verdict {
    /// Why the action must not go on (the first hook that blocked).
    pub block: Option<String>,
    /// Text for the model (`additionalContext`, or a prompt hook's plain stdout).
    pub context: Vec<String>,
    /// Arguments to run the tool with instead of the model's.
    pub updated_input: Option<Value>,
    pub permission: Option<Permission>,
    /// Each run, with its outcome in words, for the terminal and the log.
    pub runs: Vec<(HookRun, String)>,
}

/// Runs `hooks` at once in `dir` with `input` on stdin, each within its own time limit; returns when all
/// have ended.
pub(super) fn run_all(
    hooks: Vec<EventHook>,
    input: &Value,
    dir: &Path,
    sandbox: Option<&Sandbox>,
) -> Vec<HookRun> {
    let stdin = input.to_string();
    if hooks.len() == 1 {
        // The common case runs on this thread: a thread less to start on every tool call.
        return hooks
            .into_iter()
            .map(|hook| run_one(hook, &stdin, dir, sandbox))
            .collect();
    }
    std::thread::scope(|scope| {
        let runs: Vec<_> = hooks
            .into_iter()
            .map(|hook| {
                let stdin = stdin.as_str();
                scope.spawn(move || run_one(hook, stdin, dir, sandbox))
            })
            .collect();
        runs.into_iter().filter_map(|run| run.join().ok()).collect()
    })
}

/// [`run_all`] off the async runtime's threads.
pub(super) async fn run_async(
    hooks: Vec<EventHook>,
    input: Value,
    dir: PathBuf,
    sandbox: Arc<Sandbox>,
) -> Vec<HookRun> {
    tokio::task::spawn_blocking(move || run_all(hooks, &input, &dir, Some(&sandbox)))
        .await
        .unwrap_or_default()
}

fn run_one(hook: EventHook, stdin: &str, dir: &Path, sandbox: Option<&Sandbox>) -> HookRun {
    let started = Instant::now();
    let crashed = |hook: EventHook, why: String| HookRun {
        hook,
        end: End::Crashed(why),
        stdout: String::new(),
        stderr: String::new(),
        duration: started.elapsed(),
    };
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(&hook.command)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    process::child_env(&mut cmd, &[]);
    // Claude Code's hooks find the project through this variable (`"$CLAUDE_PROJECT_DIR"/.claude/hooks/x`).
    cmd.env("CLAUDE_PROJECT_DIR", dir);
    if let Some(sandbox) = sandbox {
        match sandbox.prepare() {
            Ok(prepared) => prepared.install(&mut cmd),
            Err(err) => return crashed(hook, format!("cannot sandbox it: {err}")),
        }
    }
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(err) => return crashed(hook, format!("cannot start it: {err}")),
    };
    let pid = child.id();
    // Written and read on threads of their own: a hook that never reads stdin, or fills a pipe, must not
    // stall the others.
    let writer = match child.stdin.take() {
        // Fits in the pipe's buffer (64 KiB on Linux): written at once, and closed.
        Some(mut pipe) if stdin.len() <= PIPE_ROOM => {
            let _ = pipe.write_all(stdin.as_bytes());
            None
        }
        Some(mut pipe) => {
            let text = stdin.to_owned();
            Some(std::thread::spawn(move || {
                let _ = pipe.write_all(text.as_bytes());
            }))
        }
        None => None,
    };
    let out = child
        .stdout
        .take()
        .map(|p| std::thread::spawn(move || drain(p)));
    let err = child
        .stderr
        .take()
        .map(|p| std::thread::spawn(move || drain(p)));
    let deadline = started + hook.timeout;
    let mut watch = ExitWatch::new(pid);
    let end = loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                break match Exit::of(status) {
                    Exit::Code(code) => End::Exit(code),
                    exit => End::Crashed(exit.to_string()),
                }
            }
            Ok(None) => {}
            Err(e) => break End::Crashed(format!("cannot be waited for: {e}")),
        }
        let now = Instant::now();
        if now >= deadline {
            break End::TimedOut(hook.timeout);
        }
        watch.wait((deadline - now).min(Duration::from_millis(100)));
    };
    // What it left running goes with it, and on a timeout the hook itself.
    process::kill_group(pid);
    let _ = child.wait();
    if let Some(writer) = writer {
        let _ = writer.join();
    }
    let take = |h: Option<std::thread::JoinHandle<String>>| {
        h.and_then(|h| h.join().ok()).unwrap_or_default()
    };
    HookRun {
        hook,
        end,
        stdout: take(out),
        stderr: take(err),
        duration: started.elapsed(),
    }
}

/// Reads a pipe to its end, keeping the first [`OUTPUT_LIMIT`] bytes.
fn drain(mut pipe: impl Read) -> String {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = OUTPUT_LIMIT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// Reads what the runs of `event`'s hooks say. `fail_closed`: a hook that timed out or crashed blocks.
pub(super) fn judge(event: HookEvent, runs: Vec<HookRun>, fail_closed: bool) -> Verdict {
    let mut verdict = Verdict::default();
    for run in runs {
        let outcome = judge_one(event, &run, fail_closed, &mut verdict);
        verdict.runs.push((run, outcome));
    }
    verdict
}

/// Adds what one run says to `verdict`; returns its outcome in words.
fn judge_one(event: HookEvent, run: &HookRun, fail_closed: bool, verdict: &mut Verdict) -> String {
    let hook = &run.hook;
    let block = |reason: String, verdict: &mut Verdict| {
        let outcome = format!("blocked: {}", first_line(&reason));
        verdict.block.get_or_insert(reason);
        outcome
    };
    match &run.end {
        End::Exit(0) => {}
        End::Exit(2) => {
            let reason = match run.stderr.trim() {
                "" => format!("the {} hook `{}` blocked it", event.as_str(), hook.command),
                text => text.to_owned(),
            };
            return block(reason, verdict);
        }
        End::Exit(code) => {
            return format!("exit {code}: {}", first_line(&run.stderr));
        }
        End::TimedOut(_) | End::Crashed(_) if fail_closed => {
            let how = match &run.end {
                End::TimedOut(limit) => format!("timed out after {}s", limit.as_secs_f64()),
                End::Crashed(why) => format!("failed ({why})"),
                End::Exit(_) => String::new(),
            };
            let reason = format!(
                "the {} hook `{}` from {} {how}: the call was not run (hooks before tool calls fail closed)",
                event.as_str(),
                hook.command,
                hook.source
            );
            return block(reason, verdict);
        }
        End::TimedOut(limit) => return format!("timed out after {}s", limit.as_secs_f64()),
        End::Crashed(why) => return format!("failed: {why}"),
    }
    let stdout = run.stdout.trim();
    let Some(answer) = stdout
        .starts_with('{')
        .then(|| serde_json::from_str::<Value>(stdout).ok())
        .flatten()
    else {
        // Plain stdout is context for the model where Claude Code makes it so: a prompt and a session start.
        if !stdout.is_empty()
            && matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart)
        {
            verdict.context.push(stdout.to_owned());
        }
        return "ok".to_owned();
    };
    let specific = answer.get("hookSpecificOutput");
    let text = |key: &str| {
        answer
            .get(key)
            .or_else(|| specific.and_then(|s| s.get(key)))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if let Some(context) = text("additionalContext").filter(|c| !c.trim().is_empty()) {
        verdict.context.push(context);
    }
    if let Some(input) = answer
        .get("updatedInput")
        .or_else(|| specific.and_then(|s| s.get("updatedInput")))
        .filter(|v| v.is_object())
    {
        verdict.updated_input = Some(input.clone());
    }
    let reason = text("permissionDecisionReason")
        .or_else(|| text("reason"))
        .or_else(|| text("stopReason"))
        .unwrap_or_else(|| format!("the {} hook `{}` said no", event.as_str(), hook.command));
    let decision = text("permissionDecision").or_else(|| text("decision"));
    let stop = answer.get("continue").and_then(Value::as_bool) == Some(false);
    match decision.as_deref() {
        Some("deny" | "block") => return block(reason, verdict),
        _ if stop => return block(reason, verdict),
        Some("allow" | "approve") => {
            verdict.permission.get_or_insert(Permission::Allow);
        }
        Some("ask") => verdict.permission = Some(Permission::Ask),
        _ => {}
    }
    "ok".to_owned()
}

fn first_line(text: &str) -> String {
    crate::tools::short(text.trim().lines().next().unwrap_or_default(), 120)
}

/// The fields every event's JSON carries, as Claude Code names them, with git-agent's own added.
pub(super) struct Base<'a> {
    pub session_id: &'a str,
    pub cwd: &'a Path,
    pub agent_branch: &'a str,
    pub step_commit: String,
}

impl Base<'_> {
    /// The event's JSON: these fields, `hook_event_name`, and `fields`.
    pub(super) fn input(&self, event: HookEvent, fields: Value) -> Value {
        let mut input = json!({
            "session_id": self.session_id,
            // There is no transcript file: the session log is a ref, read by `git agent show`.
            "transcript_path": format!("refs/agent/sessions/{}", self.session_id),
            "cwd": self.cwd,
            "hook_event_name": event.as_str(),
            "permission_mode": "default",
            "agent_branch": self.agent_branch,
            "step_commit": self.step_commit,
        });
        if let (Some(input), Value::Object(fields)) = (input.as_object_mut(), fields) {
            input.extend(fields);
        }
        input
    }
}

/// A tool call's fields in a `PreToolUse` or `PostToolUse` event, as Claude Code names them.
pub(super) fn tool_fields(tool: &str, call_id: &str, args: &Value) -> Value {
    json!({
        "tool_name": shown_tool_name(tool),
        "tool_input": claude_input(tool, args),
        "tool_use_id": call_id,
    })
}

/// Where a session's hooks run and what their events carry, owned, for the explorers (which run beside
/// the turn and cannot borrow it).
#[derive(Clone, Debug)]
pub(super) struct HookPlace {
    pub hooks: SessionHooks,
    pub session_id: String,
    pub dir: PathBuf,
    pub agent_branch: String,
    pub step_commit: String,
    pub sandbox: Arc<Sandbox>,
}

impl HookPlace {
    /// The `PreToolUse` hooks of a call, run and judged; `None` when no hook matches.
    pub(super) async fn pre_tool_use(
        &self,
        tool: &str,
        call_id: &str,
        args: &Value,
    ) -> Option<Verdict> {
        let names = tool_names(tool);
        let hooks = self.hooks.matching(HookEvent::PreToolUse, &names);
        if hooks.is_empty() {
            return None;
        }
        let base = Base {
            session_id: &self.session_id,
            cwd: &self.dir,
            agent_branch: &self.agent_branch,
            step_commit: self.step_commit.clone(),
        };
        let input = base.input(HookEvent::PreToolUse, tool_fields(tool, call_id, args));
        let runs = run_async(hooks, input, self.dir.clone(), Arc::clone(&self.sandbox)).await;
        Some(judge(HookEvent::PreToolUse, runs, true))
    }
}

/// The names a tool's hooks are matched against: its Claude Code name (if it has one) and its own.
pub(super) fn tool_names(tool: &str) -> Vec<&str> {
    let mut names: Vec<&str> = event_hooks::claude_name(tool).into_iter().collect();
    names.push(tool);
    names
}

/// The name `tool_name` carries: Claude Code's, so hooks written for it work unchanged.
pub(super) fn shown_tool_name(tool: &str) -> &str {
    event_hooks::claude_name(tool).unwrap_or(tool)
}

/// The tool input as Claude Code's hooks expect it: our `run` has `command` like Bash; paths are under
/// `file_path` for the file tools, as well as under our own names.
pub(super) fn claude_input(tool: &str, args: &Value) -> Value {
    let mut input = args.clone();
    if let (Some(map), "read_file" | "edit_file" | "write_file") = (input.as_object_mut(), tool) {
        if let Some(path) = map.get("path").cloned() {
            map.entry("file_path").or_insert(path);
        }
    }
    input
}

/// `updatedInput` back in our argument names: a `file_path` the hook changed moves to `path`.
pub(super) fn from_claude_input(tool: &str, mut input: Value) -> Value {
    if let (Some(map), "read_file" | "edit_file" | "write_file") = (input.as_object_mut(), tool) {
        if let Some(path) = map.remove("file_path") {
            map.insert("path".into(), path);
        }
    }
    input
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(command: &str, timeout_ms: u64) -> EventHook {
        EventHook {
            event: HookEvent::PreToolUse,
            matcher: String::new(),
            command: command.into(),
            timeout: Duration::from_millis(timeout_ms),
            source: "test".into(),
        }
    }

    fn verdict(commands: &[(&str, u64)], fail_closed: bool) -> Verdict {
        let hooks = commands.iter().map(|(c, t)| hook(c, *t)).collect();
        let runs = run_all(
            hooks,
            &json!({"tool_name": "Bash"}),
            &std::env::temp_dir(),
            None,
        );
        judge(HookEvent::PreToolUse, runs, fail_closed)
    }

    #[test]
    fn exit_two_blocks_with_stderr_and_json_answers_are_read() {
        let v = verdict(&[("echo no rm >&2; exit 2", 5000)], true);
        assert_eq!(v.block.as_deref(), Some("no rm"));
        let v = verdict(
            &[(
                r#"echo '{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"nope"}}'"#,
                5000,
            )],
            true,
        );
        assert_eq!(v.block.as_deref(), Some("nope"));
        let v = verdict(
            &[(
                r#"echo '{"additionalContext":"extra","updatedInput":{"command":"ls"}}'"#,
                5000,
            )],
            true,
        );
        assert_eq!((v.block, v.context), (None, vec!["extra".to_owned()]));
        assert_eq!(v.updated_input, Some(json!({"command": "ls"})));
        let v = verdict(&[("exit 1", 5000)], true);
        assert!(v.block.is_none(), "other codes go on");
    }

    #[test]
    fn the_hooks_see_their_input_and_a_hang_fails_closed_in_time() {
        let v = verdict(
            &[("grep -q '\"tool_name\":\"Bash\"' || exit 2", 5000)],
            true,
        );
        assert!(v.block.is_none(), "{:?}", v.runs);
        let started = Instant::now();
        let v = verdict(&[("sleep 30", 300), ("true", 5000)], true);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "ran in parallel and was killed"
        );
        assert!(v.block.unwrap_or_default().contains("timed out"));
        let v = verdict(&[("sleep 30", 300)], false);
        assert!(v.block.is_none(), "only PreToolUse fails closed");
    }
}
