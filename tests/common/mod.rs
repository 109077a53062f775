//! Hermetic helpers for the integration tests: throwaway repositories, the real `git-agent` binary run with a
//! cleared environment, snapshots of the user's state, and the scripted model server.
//!
//! Modelled on ripgrep's `tests/util.rs` and jj's `TestEnvironment`: no test may see the developer's git
//! config, HOME, keys or clock.

pub mod landing;
pub mod long_session;
pub mod partners;
pub mod server;
pub mod tmux;

use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

pub use server::{call, raw_call, Gate, Reply, Server, ToolCall};

/// The dummy key every agent run gets; tests assert it never leaks into output.
pub const API_KEY: &str = "test-key";

/// A run of the binary that takes longer than this is a hang, not a slow test.
const TIMEOUT: Duration = Duration::from_secs(60);

/// A git repository in a fresh temp dir (`<root>/repo`, with `<root>/home` as HOME), removed on drop unless
/// the test failed, so a failing test's repo can be inspected.
pub struct TestRepo {
    root: PathBuf,
    path: PathBuf,
    home: PathBuf,
}

impl TestRepo {
    /// `git init -b main` with one commit holding `README.md` and `file.txt` (`one\ntwo\nthree\n`).
    pub fn new() -> TestRepo {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "git-agent-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        let root = std::env::temp_dir().join(name);
        // A leftover of an earlier run that had the same pid.
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("repo")).expect("create the temp repo dir");
        fs::create_dir_all(root.join("home")).expect("create the temp home dir");
        let root = root.canonicalize().expect("the temp dir exists");
        let repo = TestRepo {
            path: root.join("repo"),
            home: root.join("home"),
            root,
        };
        repo.git(&["init", "-q", "-b", "main"]);
        repo.write("README.md", "# demo\n");
        repo.write("file.txt", "one\ntwo\nthree\n");
        repo.commit_all("initial commit");
        repo
    }

    /// The work tree.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temp dir holding the repo: a place outside the repo for confinement tests.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Cleared environment, temp HOME, no global or system git config, fixed identities and dates.
    fn hermetic<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Test User")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Test User")
            .env("GIT_COMMITTER_EMAIL", "test@example.com")
            .env("GIT_AUTHOR_DATE", "1700000000 +0000")
            .env("GIT_COMMITTER_DATE", "1700000000 +0000")
            .current_dir(&self.path)
    }

    /// Runs git in the repo and returns its stdout; panics with stderr if it fails.
    pub fn git(&self, args: &[&str]) -> String {
        let out = self
            .hermetic(&mut Command::new("git"))
            .args(args)
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn write(&self, path: &str, content: &str) {
        let path = self.path.join(path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("create parent dirs");
        }
        fs::write(path, content).expect("write a test file");
    }

    pub fn commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    /// The real binary, hermetic, pointed at `server` with the dummy key and `openai/test-model`.
    pub fn agent(&self, server: &Server, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_git-agent"));
        self.hermetic(&mut cmd)
            .env("OPENAI_BASE_URL", server.base_url())
            .env("OPENAI_API_KEY", API_KEY)
            .env("GIT_AGENT_MODEL", "openai/test-model")
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    /// `program args` (`git agent ask ...`, `timeout 60 git agent ask ...`, `git commit` with a hook that calls
    /// the agent) with the agent's hermetic environment and this build's `git-agent` first on PATH, so git
    /// finds it as the `agent` subcommand.
    pub fn via(&self, server: &Server, program: &str, args: &[&str]) -> Command {
        let bin = Path::new(env!("CARGO_BIN_EXE_git-agent"));
        let dir = bin.parent().expect("the binary lives in a directory");
        let mut path = std::ffi::OsString::from(dir);
        path.push(":");
        path.push(std::env::var_os("PATH").unwrap_or_default());
        let mut cmd = Command::new(program);
        self.hermetic(&mut cmd)
            .env("PATH", path)
            .env("OPENAI_BASE_URL", server.base_url())
            .env("OPENAI_API_KEY", API_KEY)
            .env("GIT_AGENT_MODEL", "openai/test-model")
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    /// `agent(server, args)`, run to completion.
    pub fn run_agent(&self, server: &Server, args: &[&str]) -> Output {
        run(&mut self.agent(server, args))
    }
}

impl Drop for TestRepo {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!("test repo kept for inspection: {}", self.path.display());
        } else {
            let _ = fs::remove_dir_all(&self.root);
        }
    }
}

/// What a run of the binary produced.
pub struct Output {
    pub status: ExitStatus,
    /// Standard output without the [`PORTABLE_NOTICES`]' `notice` events (portable configuration only).
    pub stdout: String,
    /// Standard output exactly as the binary wrote it.
    pub full_stdout: String,
    /// Standard error without the [`PORTABLE_NOTICES`] (in the portable configuration; see [`without_notices`]).
    pub stderr: String,
    /// Standard error exactly as the binary wrote it.
    pub full_stderr: String,
}

/// What every session prints in the portable configuration (`--cfg git_agent_portable`: src/sys's Linux layer
/// off, as macOS and the BSDs build it): one notice that commands are not sandboxed and see the other
/// processes (`--sandbox auto`), or only the latter (`--sandbox off`). True there and tested by the tests of
/// those features (through [`Output::full_stderr`]); noise to every other test's expected output.
pub const PORTABLE_NOTICES: &[&str] = &[
    "warning: commands run unsandboxed and without a private /proc",
    "warning: commands run without a private /proc",
];

/// `stderr` without the lines of [`PORTABLE_NOTICES`] when this is the portable configuration; as it is
/// otherwise, where a notice is news a test must see.
pub fn without_notices(stderr: &str) -> String {
    if !cfg!(git_agent_portable) {
        return stderr.to_string();
    }
    stderr
        .split_inclusive('\n')
        .filter(|line| !PORTABLE_NOTICES.iter().any(|n| line.starts_with(n)))
        .collect()
}

/// `stdout` without [`PORTABLE_NOTICES`] in the portable configuration: as JSON events (`--json`'s `notice`,
/// `exec`'s error item) and as the lines `show` prints when it replays a session's recorded notice.
pub fn without_notice_events(stdout: &str) -> String {
    if !cfg!(git_agent_portable) {
        return stdout.to_string();
    }
    stdout
        .split_inclusive('\n')
        .filter(|line| {
            // Only whole notice events: a line that carries a notice among other things (an ACP replay,
            // a listing) stays.
            let event = line.contains("\"type\":\"notice\"")
                || (line.contains("\"type\":\"item.completed\"")
                    && line.contains("\"type\":\"error\""));
            !PORTABLE_NOTICES.iter().any(|n| {
                line.starts_with(n) || (event && line.contains(n.trim_start_matches("warning: ")))
            })
        })
        .collect()
}

impl Output {
    pub fn stdout(&self) -> &str {
        &self.stdout
    }

    pub fn stderr(&self) -> &str {
        &self.stderr
    }

    /// Standard error with the portable configuration's notices (see [`PORTABLE_NOTICES`]).
    pub fn full_stderr(&self) -> &str {
        &self.full_stderr
    }

    /// The exit code; panics if a signal ended the process.
    pub fn code(&self) -> i32 {
        self.status
            .code()
            .unwrap_or_else(|| panic!("killed by a signal\n{self}"))
    }

    /// Asserts the exit code, showing both streams when it differs.
    pub fn assert_code(&self, expected: i32) -> &Self {
        assert_eq!(
            self.status.code(),
            Some(expected),
            "unexpected exit status\n{self}"
        );
        self
    }

    pub fn first_stderr_line(&self) -> &str {
        self.stderr.lines().next().unwrap_or_default()
    }
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "status: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Runs `cmd` with piped output; panics (after killing it) if it runs longer than [`TIMEOUT`].
pub fn run(cmd: &mut Command) -> Output {
    run_within(cmd, TIMEOUT)
}

/// [`run`] with its own hang guard, for a command that waits on a real model generating on the CPU.
pub fn run_within(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the command");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout is piped")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr is piped")));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {limit:?}");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let full_stderr = stderr.join().expect("drain stderr");
    let full_stdout = stdout.join().expect("drain stdout");
    Output {
        status,
        stdout: without_notice_events(&full_stdout),
        full_stdout,
        stderr: without_notices(&full_stderr),
        full_stderr,
    }
}

/// The user's branches and where they point, one per line (`agent/*` left out: those are the sessions').
pub fn user_branches(repo: &TestRepo) -> String {
    repo.git(&[
        "for-each-ref",
        "--format=%(refname) %(objectname)",
        "refs/heads/",
    ])
    .lines()
    .filter(|line| !line.starts_with("refs/heads/agent/"))
    .map(|line| format!("{line}\n"))
    .collect()
}

/// Everything of the user's that a session must leave alone, as text so a failing comparison shows a diff:
/// HEAD, branches (except `agent/*`), index, status, stashes, and every work-tree file's mode and bytes.
pub fn user_state(repo: &TestRepo) -> String {
    let branches = user_branches(repo);
    let mut files = String::new();
    dump_tree(repo.path(), repo.path(), &mut files);
    format!(
        "## HEAD\n{}{}## branches\n{branches}## index\n{}## status\n{}## stash\n{}## files\n{files}",
        repo.git(&["rev-parse", "--symbolic-full-name", "HEAD"]),
        repo.git(&["rev-parse", "HEAD"]),
        repo.git(&["ls-files", "-s"]),
        repo.git(&["status", "--porcelain", "--untracked-files=all", "--ignored"]),
        repo.git(&["stash", "list"]),
    )
}

fn dump_tree(root: &Path, dir: &Path, out: &mut String) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .expect("read a work-tree dir")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let rel = path
            .strip_prefix(root)
            .expect("walk stays under the root")
            .display()
            .to_string();
        if rel == ".git" {
            continue;
        }
        let meta = fs::symlink_metadata(&path).expect("stat a work-tree entry");
        let mode = meta.permissions().mode();
        if meta.is_symlink() {
            out.push_str(&format!(
                "link {rel} -> {}\n",
                fs::read_link(&path).expect("read link").display()
            ));
        } else if meta.is_dir() {
            out.push_str(&format!("dir {rel} {mode:o}\n"));
            dump_tree(root, &path, out);
        } else {
            let bytes = fs::read(&path).expect("read a work-tree file");
            out.push_str(&format!(
                "file {rel} {mode:o} {:?}\n",
                String::from_utf8_lossy(&bytes)
            ));
        }
    }
}

/// Adds a submodule at `sub` (a one-file repository under the test's root holding `lib.txt`) and commits it.
pub fn add_submodule(repo: &TestRepo) {
    let upstream = repo.root().join("upstream");
    fs::create_dir_all(&upstream).expect("make the submodule's upstream");
    let up = upstream.to_str().expect("temp paths are UTF-8");
    repo.git(&["-C", up, "init", "-q", "-b", "main"]);
    fs::write(upstream.join("lib.txt"), "lib\n").expect("write lib.txt");
    repo.git(&["-C", up, "add", "-A"]);
    repo.git(&["-C", up, "commit", "-q", "-m", "lib"]);
    repo.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        up,
        "sub",
    ]);
    repo.git(&["commit", "-q", "-m", "add a submodule"]);
}

/// Asserts `git fsck --strict` is clean.
pub fn fsck(repo: &TestRepo) {
    repo.git(&["fsck", "--strict", "--no-progress"]);
}

/// The ids of all `refs/heads/agent/*` branches.
pub fn agent_branches(repo: &TestRepo) -> Vec<String> {
    repo.git(&["for-each-ref", "--format=%(refname)", "refs/heads/agent/"])
        .lines()
        .map(|r| r.trim_start_matches("refs/heads/agent/").to_string())
        .collect()
}

/// The id of the one session in the repo; asserts there is exactly one and it is 6 hex chars.
pub fn session_id(repo: &TestRepo) -> String {
    let ids = agent_branches(repo);
    assert_eq!(ids.len(), 1, "expected one agent branch, found {ids:?}");
    let id = ids[0].clone();
    assert!(
        id.len() == 6
            && id
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
        "bad session id {id:?}"
    );
    id
}

/// Entries under `.git/agent/worktrees` (none if the dir does not exist).
pub fn agent_worktrees(repo: &TestRepo) -> Vec<String> {
    match fs::read_dir(repo.path().join(".git/agent/worktrees")) {
        Ok(entries) => entries
            .map(|e| {
                e.expect("dir entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The commits on `agent/<id>` that are not on the user's HEAD, oldest first.
pub fn agent_commits(repo: &TestRepo, id: &str) -> Vec<String> {
    repo.git(&["rev-list", "--reverse", &format!("HEAD..agent/{id}")])
        .lines()
        .map(str::to_string)
        .collect()
}

/// The value of trailer `key` in commit `rev`'s message (empty if absent).
pub fn trailer(repo: &TestRepo, rev: &str, key: &str) -> String {
    repo.git(&[
        "log",
        "-1",
        &format!("--format=%(trailers:key={key},valueonly)"),
        rev,
    ])
    .trim()
    .to_string()
}

/// A loopback URL on which nothing listens: the port was bound and released.
pub fn closed_port_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let addr = listener
        .local_addr()
        .expect("a bound listener has an address");
    drop(listener);
    format!("http://{addr}/v1")
}
