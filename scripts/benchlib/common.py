"""Shared pieces of the scripts/bench-{task,bigrepo,fleet}.py benchmarks: agents under test, the fake server,
fixtures, medians, host load. Needs only python3, git and GNU time (/usr/bin/time).

An agent is given on the command line as LABEL=KIND:PATH, KIND one of
  ga  git-agent, started directly: `PATH ask PROMPT` (OPENAI_BASE_URL + GIT_AGENT_MODEL=openai/fake-model)
  nc  nano-coder, started directly: `PATH --config CFG --model fake/fake-model`, the prompt piped on stdin
  cx  the Codex CLI: `PATH exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox PROMPT` with a
      custom model provider (CODEX_HOME/config.toml: `base_url` the fake server, `wire_api = "responses"`, the
      only one Codex still takes) and its default model, or MODEL with LABEL=cx:PATH:MODEL (a name Codex does not
      know gets its generic prompt and plain function tools); no sandbox, since bwrap cannot run in every
      container
e.g. --agent new=ga:target/release/git-agent --agent old=ga:/tmp/old/git-agent --agent nano=nc:NANO
where NANO is nano-coder 0.58 (`cargo install nano-coder --version 0.58.0 --locked --root DIR`: DIR/bin/nano-coder)
and CODEX the native binary of the Codex SDK's package (`npm i -E @openai/codex-sdk@0.163.0`, with its optional
dependency: node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex).
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ptmeasure  # noqa: E402

PROMPT = ('In this git repository: run `cat greet.py`, then change "hello world" to "hello agent" in greet.py, '
          'then run `sh test_greet.sh`. Reply "done" when finished.')

# The plain-sh test of issue 16: no interpreter child, so a child's RSS cannot hide the agent's.
TEST_SH = """#!/bin/sh
# Passes when greet.py prints "hello agent" (plain sh: no python child).
if grep -q 'print("hello agent")' greet.py; then
  echo "PASS: greet.py says hello agent"
  exit 0
fi
echo "FAIL: greet.py does not say hello agent"
exit 1
"""


class Agent:
    def __init__(self, spec):
        label, _, rest = spec.partition("=")
        kind, _, path = rest.partition(":")
        if kind not in ("ga", "nc", "cx") or not path:
            sys.exit("bad --agent %r: want LABEL=ga:PATH, LABEL=nc:PATH or LABEL=cx:PATH" % spec)
        self.model = None
        if kind == "cx" and ":" in path:  # LABEL=cx:PATH:MODEL
            path, _, self.model = path.rpartition(":")
        self.label, self.kind, self.path = label, kind, os.path.abspath(path)
        if not os.access(self.path, os.X_OK):
            hint = {"nc": "; install nano-coder 0.58 with `cargo install nano-coder --version 0.58.0 --locked --root"
                          " DIR` and pass DIR/bin/nano-coder",
                    "cx": "; install the Codex SDK with `npm i -E @openai/codex-sdk@0.163.0` and pass its native"
                          " codex (node_modules/@openai/codex-linux-x64/vendor/*/bin/codex)"}.get(
                kind, "; build it with `cargo build --release`")
            sys.exit("agent %s: %s is not executable%s" % (label, self.path, hint))
        self.home = tempfile.mkdtemp(prefix="bench-home-%s." % label)
        with open(os.path.join(self.home, ".gitconfig"), "w") as f:
            f.write("[user]\n\tname = bench\n\temail = bench@example.invalid\n[safe]\n\tdirectory = *\n")

    def env(self, port):
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": self.home,
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }
        base = "http://127.0.0.1:%d/v1" % port
        if self.kind == "ga":
            env.update(OPENAI_BASE_URL=base, OPENAI_API_KEY="dummy", GIT_AGENT_MODEL="openai/fake-model")
        elif self.kind == "cx":
            env.update(CODEX_HOME=self.codex_home(base), FAKE_API_KEY="dummy")
        else:
            cfgdir = os.path.join(self.home, ".config", "nano-coder")
            os.makedirs(cfgdir, exist_ok=True)
            with open(os.path.join(cfgdir, "config.toml"), "w") as f:
                f.write('model = "fake/fake-model"\ndefault_provider = "fake"\ncheck_updates = false\n'
                        'session_titles = false\ntimestamps = false\n[providers.fake]\nkind = "openai"\n'
                        'base_url = "%s"\napi_key_env = "FAKE_API_KEY"\n' % base)
            env["FAKE_API_KEY"] = "dummy"
        return env

    def codex_home(self, base):
        """CODEX_HOME with a config that sends every model request to `base` (Responses API)."""
        home = os.path.join(self.home, ".codex")
        os.makedirs(home, exist_ok=True)
        with open(os.path.join(home, "config.toml"), "w") as f:
            f.write('model_provider = "fake"\ncheck_for_update_on_startup = false\n'
                    '[model_providers.fake]\nname = "fake"\nbase_url = "%s"\nenv_key = "FAKE_API_KEY"\n'
                    'wire_api = "responses"\n' % base)
        return home

    def task_spec(self, repo, port, prompt, out_dir):
        """A ptmeasure spec running the task in `repo`."""
        env = self.env(port)
        spec = {"cwd": repo, "env": env,
                "stdout": os.path.join(out_dir, "stdout"), "stderr": os.path.join(out_dir, "stderr")}
        if self.kind == "ga":
            spec["argv"] = [self.path, "ask", prompt]
        elif self.kind == "cx":
            model = ["-m", self.model] if self.model else []
            spec["argv"] = [self.path, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
                            *model, "-C", repo, prompt]
        else:
            pf = os.path.join(out_dir, "prompt")
            with open(pf, "w") as f:
                f.write(prompt)
            spec["stdin"] = pf
            spec["argv"] = [self.path, "--config", os.path.join(self.home, ".config/nano-coder/config.toml"),
                            "--model", "fake/fake-model"]
        return spec

    def version_spec(self, out_dir, key=True):
        """`PATH --version`; with key=True a dummy API key is in the environment (as in a user's shell and in the
        task runs: git-agent then wipes it from its environment at start-up), with key=False none is."""
        env = self.env(9)  # no server: --version must not talk to it
        for k in ("OPENAI_API_KEY", "FAKE_API_KEY"):
            env.pop(k, None)
        if key:
            env["OPENAI_API_KEY" if self.kind == "ga" else "FAKE_API_KEY"] = "dummy"
        return {"argv": [self.path, "--version"], "env": env, "cwd": out_dir,
                "stdout": os.path.join(out_dir, "vstdout"), "stderr": os.path.join(out_dir, "vstderr")}


class FakeServer:
    """benchlib/fakesrv.py on a free port, one per use (its request log then holds one run)."""

    def __init__(self, log, script=None, calls=None, side_delay=0):
        self.log = log
        pf = log + ".port"
        if os.path.exists(pf):
            os.unlink(pf)
        argv = [sys.executable, os.path.join(HERE, "fakesrv.py"), "--log", log, "--port-file", pf]
        if script is not None:
            argv += ["--script", json.dumps(script)]
        if calls is not None:
            argv += ["--calls", json.dumps(calls)]
        if side_delay:
            argv += ["--side-delay", str(side_delay)]
        self.proc = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if os.path.exists(pf):
                break
            time.sleep(0.02)
        self.port = int(open(pf).read())

    def requests(self):
        with open(self.log) as f:
            return [json.loads(line) for line in f if line.strip()]

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def git(*args, cwd=None, check=True, capture=False):
    env = dict(os.environ, GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1",
               GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.invalid",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.invalid")
    r = subprocess.run(["git", *args], cwd=cwd, env=env, check=check, text=True,
                       stdout=subprocess.PIPE if capture else subprocess.DEVNULL, stderr=subprocess.PIPE)
    return r.stdout if capture else r.returncode


def make_fixture(path, commit=False, wip=False):
    """The task's fixture: greet.py and test_greet.sh (plain sh) staged, committed only with commit=True. With
    wip=True (issue 29: the user's work in progress, so git-agent's step 0 runs) they are committed, then
    greet.py is modified (a comment above its line) and an untracked notes.txt is written."""
    os.makedirs(path)
    with open(os.path.join(path, "greet.py"), "w") as f:
        f.write('print("hello world")\n')
    with open(os.path.join(path, "test_greet.sh"), "w") as f:
        f.write(TEST_SH)
    os.chmod(os.path.join(path, "test_greet.sh"), 0o755)
    git("init", "-q", "-b", "main", ".", cwd=path)
    git("add", "greet.py", "test_greet.sh", cwd=path)
    if commit or wip:
        git("commit", "-q", "-m", "fixture", cwd=path)
    if wip:
        with open(os.path.join(path, "greet.py"), "w") as f:
            f.write('# Greets the world.\nprint("hello world")\n')
        with open(os.path.join(path, "notes.txt"), "w") as f:
            f.write("greet.py: say hello to the agent\n")


def task_succeeded(repo):
    """greet.py says hello agent, in the tree or on an agent/* branch."""
    try:
        if "hello agent" in open(os.path.join(repo, "greet.py")).read():
            return True
    except OSError:
        pass
    refs = git("for-each-ref", "--format=%(refname)", "refs/heads/agent/", cwd=repo, capture=True, check=False)
    for ref in (refs or "").split():
        out = subprocess.run(["git", "show", ref + ":greet.py"], cwd=repo, capture_output=True, text=True)
        if "hello agent" in out.stdout:
            return True
    return False


def cpu_jiffies():
    with open("/proc/stat") as f:
        parts = [int(x) for x in f.readline().split()[1:]]
    idle = parts[3] + parts[4]
    return sum(parts[:8]) - idle


def wait_quiet(max_wait, cores=0.5, window=0.5):
    """Wait up to max_wait s until the host's busy cores (everyone's) drop below `cores`; return the last figure."""
    deadline = time.monotonic() + max_wait
    tick = os.sysconf("SC_CLK_TCK")
    while True:
        a = cpu_jiffies()
        time.sleep(window)
        busy = (cpu_jiffies() - a) / tick / window
        if busy < cores or time.monotonic() > deadline:
            return round(busy, 2)


class Load:
    """Host CPU used by others during a measured run: (host busy - the run's own tree CPU) / wall."""

    def __enter__(self):
        self.j0 = cpu_jiffies()
        self.t0 = time.monotonic()
        self.load = os.getloadavg()[0]
        return self

    def __exit__(self, *exc):
        self.host_cpu = (cpu_jiffies() - self.j0) / os.sysconf("SC_CLK_TCK")
        self.wall = time.monotonic() - self.t0

    def other_cores(self, own_cpu):
        return round(max(0.0, self.host_cpu - own_cpu) / max(self.wall, 1e-6), 2)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, unit=""):
    if x is None:
        return "-"
    if isinstance(x, float):
        return ("%.4g" % x) + unit
    return str(x) + unit


def rmtree(p):
    shutil.rmtree(p, ignore_errors=True)


def host(path):
    """One line saying what a figure was measured on: the kernel, the cores and memory, the file system the run
    folder `path` is on (for ext4, whether it keeps a journal: without one, inode creation right after a mass
    deletion costs about a millisecond each, docs/performance.md) and the load average. A figure from another
    machine is read against this line."""
    uname = os.uname()
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem = 0
    return "host: %s %s, %d cores, %.1f GiB; %s; load average %.2f" % (
        uname.sysname, uname.release, os.cpu_count() or 0, mem, file_system(path), os.getloadavg()[0])


def file_system(path):
    """The file system holding `path`, from /proc/self/mountinfo: type, source and, for ext4, its journal."""
    target = os.path.realpath(path)
    best = None
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                if "-" not in fields:
                    continue
                dash = fields.index("-")
                point = fields[4].encode().decode("unicode_escape")
                inside = target == point or target.startswith(point.rstrip("/") + "/")
                if inside and (best is None or len(point) >= len(best[0])):
                    best = (point, fields[dash + 1], fields[dash + 2])
    except OSError:
        return "%s on an unknown file system" % target
    if best is None:
        return "%s on an unknown file system" % target
    point, fstype, source = best
    what = "%s on %s (%s mounted at %s" % (target, fstype, source, point)
    if fstype == "ext4":
        dev = os.path.basename(os.path.realpath(source))
        try:
            task = open("/sys/fs/ext4/%s/journal_task" % dev).read().strip()
            what += ", no journal" if task == "<none>" else ", journal"
        except OSError:
            pass
    return what + ")"


def past_the_deletion_second():
    """Sleeps until the wall clock is in the second after the one the caller's deletions ended in.

    On ext4 without a journal a new inode skips every free one whose deletion time is *before* now and under
    60 s old (360 s while its inode-table block is dirty): fs/ext4/ialloc.c, recently_deleted(), which
    compares whole seconds, so the inodes freed in the current second are taken at once. A run that started
    right after a load was cheap when the block groups it allocated from had been emptied in the load's last
    second, and paid about 1 ms an inode when they had been emptied earlier: two of five such runs were
    as fast as on a quiet host, and the after-load medians moved with them. After this wait, every run
    measures the state a user is in from a second to minutes after a test suite."""
    now = time.time()
    time.sleep(int(now) + 1.05 - now)
