//! Isolating the processes of `run` commands: a PID namespace with a private `/proc`, a supervisor that
//! ends the command's processes with the agent, and (for `--here`) the repository's git dir bound read-only
//! over itself.
//!
//! Why: the agent's own environment holds no keys (see [`super::secrets`]), but its parent `git`, the user's
//! shell and any wrapper (`timeout`, `direnv exec`) still do, and `/proc/<pid>/environ` is readable by any
//! process of the same user. In a PID namespace of its own with a fresh `/proc`, a command sees only its own
//! tree. Unprivileged, this needs a user namespace (mapping the user to itself, so files, `id` and git's
//! ownership checks stay as they were); as root it does not.
//!
//! The shape, from the agent down (every process in the command's process group, so one `killpg` from the
//! agent reaches all of them):
//!
//! ```text
//! agent ─ supervisor S (the child std spawned; pid = process group id)
//!           └ init G (PID 1 of the new namespace: mounts /proc, reaps orphans, reports the command's status)
//!               └ bash B (PID 2: the command; the Landlock sandbox and seccomp apply from here)
//! ```
//!
//! - S is what the agent waits for and signals. It leaves the namespaces to G, watches the agent's
//!   *lifeline* (a pipe whose write end only the agent holds: when the agent dies, even by SIGKILL, the pipe
//!   hangs up and S kills the whole group) and exits the way B did (code or signal), which G tells it.
//!   A parent-death signal would not do: it fires when the *thread* that forked exits, and commands are
//!   started from tokio's short-lived blocking threads.
//! - G is PID 1, so it must exist: a command exec'd as PID 1 would ignore SIGTERM (the kernel protects a
//!   namespace's init from signals it has no handler for) and leave zombies. When G exits, the kernel kills
//!   every process left in the namespace, also those that left the process group (`setsid`).
//! - S and G ignore the termination signals the agent sends to the group (SIGTERM for a job's graceful stop),
//!   so the command decides how to end; SIGKILL ends everything.
//! - S and G are forks of the agent that never exec: they close every inherited descriptor, mark themselves
//!   non-dumpable (their memory is a copy of the agent's, keys included, so `/proc/1/mem` and
//!   `/proc/1/environ` stay closed to the command), make only async-signal-safe calls, and give their copy
//!   of the agent's heap back after their last fork (so the agent's writes while the command runs are not
//!   copied page by page).
//!
//! Where the kernel refuses (no user namespaces, a container without the right to mount `/proc`), commands
//! run without a namespace and [`probe()`] says why; S and G still run, so a command's process group still
//! dies with the agent. [`probe()`] tries the real thing once per process, and a yes is remembered for an
//! hour (`remembered`): three forks of the agent a session saved, 5% of a small session's CPU. The system
//! calls themselves are in `sys::isolate`; where there are no namespaces (not Linux) there is no supervisor
//! either, and [`probe()`] says what that leaves unisolated.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

pub use crate::sys::isolate::{Namespace, Plan};

/// How commands are isolated from the processes around them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// A PID and mount namespace with a private `/proc`; `user` when a user namespace was needed for it.
    Namespace { user: bool },
    /// Commands share the agent's view of processes; why not.
    Shared { why: String },
}

impl Isolation {
    pub fn is_namespace(&self) -> bool {
        matches!(self, Isolation::Namespace { .. })
    }
}

/// Whether commands can get a private `/proc` here: tried once per process by starting a command the way
/// [`Plan::install()`] starts every command (S, G, the namespaces, the private `/proc`), whose process B then
/// exits 0 where it would exec: exec'ing a real program (`true`) would cost the session a PATH search and a
/// program's start for nothing the namespaces depend on. As root without a user namespace first, then with
/// one. A yes found in the last hour in the same context is taken as it is (see `remembered`).
pub fn probe() -> &'static Isolation {
    static PROBED: OnceLock<Isolation> = OnceLock::new();
    PROBED.get_or_init(|| {
        use crate::sys::timings::Detail;
        let probing = crate::sys::timings::begin();
        let (isolation, known) = probe_once();
        let details = [
            ("namespace", Detail::Flag(isolation.is_namespace())),
            ("remembered", Detail::Flag(known)),
        ];
        crate::sys::timings::end("isolation", probing, &details);
        isolation
    })
}

/// Starts [`probe()`] on a thread of its own, once per process; a later [`probe()`] takes its answer, waiting
/// for it if it is still under way. Why: the probe forks the agent into new namespaces (27 ms on a quiet
/// host, 172 ms on a loaded one) and only commands need its answer, so a session starts it once its first
/// model request is out instead of making that request wait (issue 29). Without a thread, the first
/// [`probe()`] runs it.
pub fn probe_in_background() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let _ = std::thread::Builder::new()
            .name("git-agent-probe".into())
            .spawn(|| {
                probe();
            });
    });
}

/// The probe proper (see [`probe()`]), and whether its answer was the remembered one.
fn probe_once() -> (Isolation, bool) {
    if std::env::var("GIT_AGENT_ISOLATION").as_deref() == Ok("off") {
        let why = "GIT_AGENT_ISOLATION=off".into();
        return (Isolation::Shared { why }, false);
    }
    if let Err(why) = crate::sys::isolate::namespace_support() {
        return (Isolation::Shared { why }, false);
    }
    if let Some(known) = remembered::answer() {
        return (known, true);
    }
    let isolation = try_namespaces();
    remembered::keep(&isolation);
    (isolation, false)
}

/// [`probe()`] afresh, neither reading nor writing what sessions remember: what this machine can isolate,
/// for the tests that expect a private `/proc` only where there can be one (they run in the developer's own
/// environment, whose cache they leave alone).
pub fn probe_afresh() -> &'static Isolation {
    static PROBED: OnceLock<Isolation> = OnceLock::new();
    PROBED.get_or_init(|| {
        if let Err(why) = crate::sys::isolate::namespace_support() {
            return Isolation::Shared { why };
        }
        try_namespaces()
    })
}

/// Starts the probe's command in new namespaces: as root without a user namespace first, then with one.
fn try_namespaces() -> Isolation {
    let root = crate::sys::process::is_root();
    let mut last = String::new();
    for user in [false, true] {
        if !user && !root {
            continue;
        }
        match try_namespace(user) {
            Ok(()) => return Isolation::Namespace { user },
            Err(e) => last = e,
        }
    }
    Isolation::Shared { why: last }
}

/// The probe's yes, remembered for the user for an hour (`$XDG_CACHE_HOME/git-agent/isolation.json`, else
/// `~/.cache/git-agent/isolation.json`) with what it depends on ([`namespace_context()`]: the boot, the user,
/// the namespaces, capabilities and seccomp filters the agent runs with, the kernel's user-namespace
/// settings), so the sessions after the first skip the probe's forks.
///
/// Only a yes is ever kept or read. Sandboxed commands may write the user's cache directory, so the file is
/// not trusted to weaken anything: a forged or stale yes can make commands fail to start (the namespaces
/// then refused), never run less isolated, and a failed start forgets it ([`forget_remembered()`]); a no is
/// probed again by every session, so nothing written there can turn isolation off.
///
/// [`namespace_context()`]: crate::sys::isolate::namespace_context
mod remembered {
    use super::Isolation;
    use std::path::PathBuf;
    use std::time::{SystemTime, UNIX_EPOCH};

    /// How long a yes is believed: an administrator may turn user namespaces off without a reboot.
    const TTL_SECS: u64 = 3600;
    /// The largest file read (what is written is about 150 bytes).
    const MAX_BYTES: u64 = 4096;

    pub(super) fn file() -> Option<PathBuf> {
        dirs::cache_dir().map(|dir| dir.join("git-agent").join("isolation.json"))
    }

    fn now() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    /// The yes remembered for this context, if under [`TTL_SECS`] old.
    pub(super) fn answer() -> Option<Isolation> {
        let context = crate::sys::isolate::namespace_context()?;
        // Commands may write the cache directory: a link or a FIFO left there is not read.
        let text = crate::sys::fs::read_regular(&file()?, MAX_BYTES).ok()?;
        read(&text, &context, now())
    }

    pub(super) fn read(text: &[u8], context: &str, now: u64) -> Option<Isolation> {
        let value: serde_json::Value = serde_json::from_slice(text).ok()?;
        let at = value.get("at")?.as_u64()?;
        if value.get("context")?.as_str()? != context || now.checked_sub(at)? >= TTL_SECS {
            return None;
        }
        let user = value.get("user")?.as_bool()?;
        Some(Isolation::Namespace { user })
    }

    /// Remembers `isolation` if it is a yes. Best effort, written beside and renamed.
    pub(super) fn keep(isolation: &Isolation) {
        let (Isolation::Namespace { user }, Some(context), Some(path)) =
            (isolation, crate::sys::isolate::namespace_context(), file())
        else {
            return;
        };
        let text = serde_json::json!({ "context": context, "user": user, "at": now() }).to_string();
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        // Commands may write the cache directory: never through a link planted there.
        let _ = crate::sys::fs::replace_file(&path, text.as_bytes());
    }
}

/// Forgets the remembered yes (see `remembered`): a command that could not be started may have met
/// namespaces the kernel no longer allows, and the next session probes again.
pub fn forget_remembered() {
    if let Some(path) = remembered::file() {
        let _ = std::fs::remove_file(path);
    }
}

fn try_namespace(user: bool) -> Result<(), String> {
    let plan = Plan::new(Some(Namespace::new(user, &[]))).probe_only();
    // Never exec'd: B exits where it would exec (an absolute path, so not even looked up).
    let mut cmd = Command::new("/bin/sh");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    plan.install(&mut cmd);
    let status = cmd
        .status()
        .map_err(|e| format!("the kernel refused a PID namespace with a private /proc ({e})"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "a command in a PID namespace did not run ({status})"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    /// What a remembered yes is keyed on, read from this process: the same twice, and naming each part.
    #[cfg(all(target_os = "linux", not(git_agent_portable)))]
    #[test]
    fn the_context_names_the_boot_the_user_the_namespaces_and_the_filters() {
        let context = crate::sys::isolate::namespace_context().expect("readable on Linux");
        assert_eq!(
            crate::sys::isolate::namespace_context().as_ref(),
            Some(&context)
        );
        let uid = format!(" uid {} ", crate::sys::process::effective_uid());
        for part in [
            uid.as_str(),
            "user:[",
            "mnt:[",
            "pid:[",
            "CapEff:",
            "Seccomp:",
        ] {
            assert!(context.contains(part), "no {part:?} in {context}");
        }
    }

    #[test]
    fn a_remembered_yes_holds_only_in_its_context_and_for_an_hour() {
        let text = |context: &str, user: bool, at: u64| {
            serde_json::json!({ "context": context, "user": user, "at": at }).to_string()
        };
        let read = |text: &str, now| remembered::read(text.as_bytes(), "boot uid 7 ns", now);
        let yes = Isolation::Namespace { user: true };
        assert_eq!(
            read(&text("boot uid 7 ns", true, 1_000), 1_000),
            Some(yes.clone())
        );
        assert_eq!(read(&text("boot uid 7 ns", true, 1_000), 4_599), Some(yes));
        assert_eq!(
            read(&text("boot uid 7 ns", false, 1_000), 1_000),
            Some(Isolation::Namespace { user: false })
        );
        // An hour old, from the future, another context, or not the expected shape: probed again.
        assert_eq!(read(&text("boot uid 7 ns", true, 1_000), 4_600), None);
        assert_eq!(read(&text("boot uid 7 ns", true, 2_000), 1_000), None);
        assert_eq!(read(&text("boot uid 8 ns", true, 1_000), 1_000), None);
        assert_eq!(
            read("{\"context\":\"boot uid 7 ns\",\"at\":1000}", 1_000),
            None
        );
        assert_eq!(read("not json", 1_000), None);
        // There is no way to say no: a file cannot turn isolation off.
        let no = "{\"context\":\"boot uid 7 ns\",\"at\":1000,\"user\":null,\"shared\":true}";
        assert_eq!(read(no, 1_000), None);
    }

    fn run(plan: Plan, script: &str) -> (std::process::ExitStatus, String) {
        let mut cmd = Command::new("bash");
        cmd.args(["-c", script])
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .process_group(0);
        plan.install(&mut cmd);
        let out = cmd.output().unwrap();
        (
            out.status,
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    fn namespace() -> Option<Namespace> {
        match probe() {
            Isolation::Namespace { user } => Some(Namespace::new(*user, &[])),
            Isolation::Shared { why } => {
                eprintln!("SKIPPED the namespace half: {why}");
                None
            }
        }
    }

    #[test]
    fn exit_codes_and_signals_come_through_the_supervisor() {
        for ns in [None, namespace()] {
            let with = ns.is_some();
            let (status, out) = run(Plan::new(ns.clone()), "echo out; exit 7");
            assert_eq!(
                (status.code(), out.as_str()),
                (Some(7), "out\n"),
                "ns {with}"
            );
            let (status, _) = run(Plan::new(ns.clone()), "kill -TERM $$");
            assert_eq!(
                status.signal(),
                Some(crate::sys::signal::SIGTERM),
                "ns {with}"
            );
            let (status, _) = run(Plan::new(ns), "exec sleep 0");
            assert_eq!(status.code(), Some(0), "ns {with}");
        }
    }

    #[test]
    fn a_namespace_shows_only_the_command_tree() {
        let Some(ns) = namespace() else { return };
        let me = std::process::id();
        let (status, out) = run(
            Plan::new(Some(ns)),
            &format!(
                "ls /proc | grep -c '^[0-9]*$'; test -e /proc/{me} && echo agent-visible; cat /proc/1/environ >/dev/null 2>&1 || echo init-closed; id -u"
            ),
        );
        assert!(status.success(), "{out}");
        let lines: Vec<&str> = out.lines().collect();
        // G, bash and ls (grep runs after ls ended, or alongside it): a handful, not the machine's.
        let count: usize = lines[0].parse().unwrap();
        assert!(count <= 4, "{out}");
        assert!(!out.contains("agent-visible"), "{out}");
        // The init's memory is a copy of the agent's: closed to the command unless it is root (who may read
        // any process's; the sandbox's Landlock domain closes it to root as well).
        if !crate::sys::process::is_root() {
            assert!(out.contains("init-closed"), "{out}");
        }
        let uid = std::process::Command::new("id").arg("-u").output().unwrap();
        assert_eq!(
            lines.last().copied(),
            Some(String::from_utf8_lossy(&uid.stdout).trim())
        );
    }

    #[test]
    fn leftovers_die_with_the_namespace() {
        let Some(ns) = namespace() else { return };
        // A background process that left the process group outlives bash only until G exits.
        let marker = std::env::temp_dir().join(format!("git-agent-isolate-{}", std::process::id()));
        let script = format!(
            "setsid sh -c 'sleep 2; touch {}' & echo started",
            marker.display()
        );
        let (status, out) = run(Plan::new(Some(ns)), &script);
        assert!(status.success(), "{out}");
        std::thread::sleep(std::time::Duration::from_millis(2500));
        assert!(
            !marker.exists(),
            "the setsid'd process survived the namespace"
        );
    }

    #[test]
    fn readonly_binds_protect_a_dir_inside_a_writable_one() {
        if namespace().is_none() {
            return;
        }
        let dir = std::env::temp_dir().join(format!("git-agent-isolate-ro-{}", std::process::id()));
        let git = dir.join(".git");
        std::fs::create_dir_all(&git).unwrap();
        let ns = Namespace::new(
            matches!(probe(), Isolation::Namespace { user: true }),
            std::slice::from_ref(&git),
        );
        let script = format!(
            "cd {d} && echo top > top.txt && echo ok-top; echo x > .git/config 2>/dev/null || echo ro-git",
            d = dir.display()
        );
        let (status, out) = run(Plan::new(Some(ns)), &script);
        assert!(status.success(), "{out}");
        assert!(out.contains("ok-top") && out.contains("ro-git"), "{out}");
        assert!(dir.join("top.txt").exists());
        assert!(!git.join("config").exists());
        // Only inside the command's namespace: the agent still writes there.
        std::fs::write(git.join("config"), "[core]\n").unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
