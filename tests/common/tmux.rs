//! A real terminal for the tests of `git agent chat`: the binary runs in a pane of a private tmux server
//! (its own socket and an empty config, so nothing of the developer's tmux is involved), driven with
//! `send-keys` and read with `capture-pane`, as a person would use it.
//!
//! The command keeps the hermetic environment [`TestRepo::agent`] gives it: the pane runs a small script
//! that `exec`s it under `env -i` with exactly those variables.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::TestRepo;

/// How long a wait for the screen may take before the test fails: generous, for a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);

/// True when tmux can be used. Without it the test is skipped, loudly, unless `CI` is set: CI installs
/// tmux, so there its absence is a failure.
pub fn available() -> bool {
    let found = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "tmux is not installed, and CI is set: .ci/run must install it"
    );
    eprintln!("SKIPPED: tmux is not installed (apt-get install tmux), so the chat terminal tests did not run");
    false
}

/// One tmux server with one pane running a command; killed on drop.
pub struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    /// Runs `cmd` (built by [`TestRepo::agent`]) in a `rows` x `cols` pane; the pane stays after the command
    /// exits, so its last screen can be read.
    pub fn start(repo: &TestRepo, cmd: &Command, rows: u16, cols: u16) -> Tmux {
        Tmux::launch(repo, cmd, rows, cols, false)
    }

    /// Runs `cmd` from an interactive bash with job control in the pane (typed at its prompt, as a user
    /// would), for what needs a shell: Ctrl-Z and `fg`. The pane's process group would be orphaned without
    /// one, and the kernel drops stop signals to orphans.
    pub fn start_in_shell(repo: &TestRepo, cmd: &Command, rows: u16, cols: u16) -> Tmux {
        Tmux::launch(repo, cmd, rows, cols, true)
    }

    fn launch(repo: &TestRepo, cmd: &Command, rows: u16, cols: u16, shell: bool) -> Tmux {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let dir = repo.root().join(format!("tmux-{n}"));
        fs::create_dir_all(&dir).expect("create the tmux dir");
        let script = dir.join("run.sh");
        fs::write(&script, script_for(cmd)).expect("write the pane's script");
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).expect("chmod the script");
        let conf = dir.join("tmux.conf");
        fs::write(
            &conf,
            "set -g remain-on-exit on\nset -g history-limit 10000\n",
        )
        .expect("write the tmux config");
        let tmux = Tmux {
            socket: dir.join("socket"),
        };
        let rows = rows.to_string();
        let cols = cols.to_string();
        let conf = conf.display().to_string();
        let script = script.display().to_string();
        let pane = if shell {
            let path = std::env::var("PATH").unwrap_or_default();
            format!(
                "exec env -i PATH={} HOME={} PS1='shell$ ' bash --norc --noprofile -i",
                quote(&path),
                quote(&dir.display().to_string())
            )
        } else {
            script.clone()
        };
        tmux.run(&[
            "-f",
            &conf,
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            &cols,
            "-y",
            &rows,
            &pane,
        ]);
        if shell {
            tmux.wait_for("the shell's prompt", |s| s.contains("shell$"));
            tmux.type_line(&script);
        }
        tmux
    }

    /// Types `text` literally.
    pub fn type_text(&self, text: &str) {
        self.run(&["send-keys", "-t", "t", "-l", text]);
    }

    /// Types `text` and presses Enter.
    pub fn type_line(&self, text: &str) {
        self.type_text(text);
        self.keys(&["Enter"]);
    }

    /// Pastes `text` as a terminal does (bracketed, when the program asked for it).
    pub fn paste(&self, text: &str) {
        self.run(&["set-buffer", "--", text]);
        self.run(&["paste-buffer", "-p", "-d", "-t", "t"]);
    }

    /// Presses keys by tmux's names: `C-c`, `Escape`, `Enter`, `M-Enter`.
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// What the pane shows now.
    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "t"])
    }

    /// The screen and its scrollback.
    pub fn history(&self) -> String {
        self.run(&["capture-pane", "-p", "-S", "-", "-t", "t"])
    }

    /// Polls the screen until `ready` holds and returns it; fails with the screen after [`PATIENCE`].
    pub fn wait_for(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "waited {PATIENCE:?} for {what}; the screen:\n{screen}"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// True once the pane's command has exited.
    pub fn exited(&self) -> bool {
        self.run(&["display-message", "-p", "-t", "t", "#{pane_dead}"])
            .trim()
            == "1"
    }

    /// The exit status of the pane's command, once it exited; 128 + the signal if a signal ended it.
    ///
    /// tmux 3.3a now and then marks the pane dead (its terminal closed) and never reaps the process, which
    /// stays a zombie without a status in tmux; the kernel still has its status then, in the zombie's
    /// `/proc/<pid>/stat`.
    pub fn exit_status(&self) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let out = self.run(&[
                "display-message",
                "-p",
                "-t",
                "t",
                "#{pane_dead_status}:#{pane_dead_signal}:#{pane_pid}",
            ]);
            let mut fields = out.trim().split(':');
            let (status, signal, pid) = (fields.next(), fields.next(), fields.next());
            if let Some(code) = status.and_then(|c| c.parse::<i32>().ok()) {
                return Some(code);
            }
            if let Some(signal) = signal.and_then(|s| s.parse::<i32>().ok()) {
                return Some(128 + signal);
            }
            if Instant::now() > deadline {
                return pid.and_then(zombie_status);
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// The pid of the pane's command (the script `exec`s it, so it is the command itself).
    pub fn pid(&self) -> Option<i32> {
        self.run(&["display-message", "-p", "-t", "t", "#{pane_pid}"])
            .trim()
            .parse()
            .ok()
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .arg("-u")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

/// The last line of the screen that is not blank (the chat's status line).
pub fn last_line(screen: &str) -> &str {
    screen
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
}

/// A shell script that runs `cmd` in its directory with exactly its environment.
fn script_for(cmd: &Command) -> String {
    let dir = cmd.get_current_dir().unwrap_or(Path::new("."));
    let mut line = format!(
        "#!/bin/sh\ncd {} || exit 1\nexec env -i",
        quote(&dir.to_string_lossy())
    );
    for (name, value) in cmd.get_envs() {
        if let Some(value) = value {
            line.push_str(&format!(
                " {}",
                quote(&format!(
                    "{}={}",
                    name.to_string_lossy(),
                    value.to_string_lossy()
                ))
            ));
        }
    }
    line.push_str(&format!(" {}", quote(&cmd.get_program().to_string_lossy())));
    for arg in cmd.get_args() {
        line.push_str(&format!(" {}", quote(&arg.to_string_lossy())));
    }
    line.push('\n');
    line
}

/// The exit status of zombie `pid` from `/proc/<pid>/stat` (field 52, as waitpid reports it).
fn zombie_status(pid: &str) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name in parentheses start at field 3.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    if fields.first() != Some(&"Z") {
        return None;
    }
    let raw: i32 = fields.get(52 - 3)?.parse().ok()?;
    Some(if raw & 0x7f == 0 {
        (raw >> 8) & 0xff
    } else {
        128 + (raw & 0x7f)
    })
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}
