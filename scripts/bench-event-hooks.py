#!/usr/bin/env python3
"""What a PreToolUse event hook adds to each tool call (issue 26): the same scripted session of N `read_file`
calls (benchlib/fakesrv.py), run by `git agent ask` in a repository without event hooks and in one whose
trusted .claude/settings.json has one PreToolUse hook for every tool that exits 0 (`true`), in turn, R rounds.

Prints the median wall time of each, the added time per call ((with - without) / N, median over rounds), and
the median of the hooks' own run time as the `hook` events of --json report it (spawn of `sh -c`, sandbox set-up,
the JSON on stdin, the wait for its exit).

usage: scripts/bench-event-hooks.py [--calls N] [--rounds R] [--short] [--bin PATH]
       (default N=20, R=5, --short N=10 and R=2; PATH target/release/git-agent if built, else
       target/debug/git-agent)
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKESRV = os.path.join(ROOT, "scripts", "benchlib", "fakesrv.py")
SETTINGS = {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "true"}]}]}}


def git(repo, *args, env):
    subprocess.run(["git", "-C", repo, *args], check=True, env=env, stdout=subprocess.DEVNULL)


def make_repo(path, hooked, env, agent, calls):
    os.makedirs(path)
    git(path, "init", "-q", "-b", "main", env=env)
    # One file per call: the loop guard stops a session that repeats the same call.
    for i in range(calls):
        with open(os.path.join(path, "f%d.txt" % i), "w") as f:
            f.write("# bench\n" + "line\n" * 200)
    if hooked:
        os.makedirs(os.path.join(path, ".claude"))
        with open(os.path.join(path, ".claude", "settings.json"), "w") as f:
            json.dump(SETTINGS, f)
    git(path, "add", "-A", env=env)
    git(path, "commit", "-q", "-m", "init", env=env)
    if hooked:
        subprocess.run([agent, "trust"], cwd=path, env=env, check=True, stdout=subprocess.DEVNULL)


def start_server(work, calls):
    port_file = os.path.join(work, "port")
    steps = [{"tool": "read_file", "args": {"path": "f%d.txt" % i}} for i in range(calls)]
    proc = subprocess.Popen([sys.executable, FAKESRV, "--log", os.path.join(work, "srv.log"),
                             "--port-file", port_file, "--calls", json.dumps(steps)])
    for _ in range(500):
        if os.path.exists(port_file):
            with open(port_file) as f:
                return proc, int(f.read())
        time.sleep(0.01)
    proc.kill()
    sys.exit("error: the fake model server did not start")


def one_run(agent, repo, env):
    started = time.monotonic()
    out = subprocess.run([agent, "ask", "--yes", "--json", "read the readme"], cwd=repo, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True, text=True)
    wall = time.monotonic() - started
    hooks = [json.loads(line)["duration_ms"] for line in out.stdout.splitlines()
             if line.startswith("{") and json.loads(line).get("type") == "hook"]
    return wall, hooks


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--short", action="store_true", help="10 calls, 2 rounds")
    ap.add_argument("--bin")
    a = ap.parse_args()
    if a.short:
        a.calls, a.rounds = 10, 2
    agent = a.bin or next((p for p in (os.path.join(ROOT, "target", b, "git-agent") for b in ("release", "debug"))
                           if os.path.exists(p)), None)
    if not agent:
        sys.exit("error: no git-agent binary: cargo build first, or pass --bin")
    work = tempfile.mkdtemp(prefix="git-agent-bench-hooks.")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.path.join(work, "home"),
           "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b", "OPENAI_API_KEY": "bench", "GIT_AGENT_MODEL": "openai/fake-model",
           "XDG_STATE_HOME": os.path.join(work, "state")}
    os.makedirs(env["HOME"])
    server, port = start_server(work, a.calls)
    env["OPENAI_BASE_URL"] = "http://127.0.0.1:%d/v1" % port
    load = os.getloadavg()[0]
    try:
        plain, hooked, added, durations = [], [], [], []
        for r in range(a.rounds + 1):
            repos = {}
            for kind in ("plain", "hooked"):
                repos[kind] = os.path.join(work, "%s-%d" % (kind, r))
                make_repo(repos[kind], kind == "hooked", env, agent, a.calls)
            w_plain, _ = one_run(agent, repos["plain"], env)
            w_hooked, hooks = one_run(agent, repos["hooked"], env)
            if len(hooks) != a.calls:
                sys.exit("error: expected %d hook runs, saw %d" % (a.calls, len(hooks)))
            if r == 0:
                continue  # warm-up
            plain.append(w_plain)
            hooked.append(w_hooked)
            added.append((w_hooked - w_plain) / a.calls * 1000)
            durations.extend(hooks)
        print("binary: %s; %d read_file calls per session, %d rounds after a warm-up; load average %.1f at the"
              " start, %.1f at the end" % (agent, a.calls, a.rounds, load, os.getloadavg()[0]))
        print("  session without hooks:    %.3f s (median)" % statistics.median(plain))
        print("  session with a PreToolUse hook: %.3f s (median), %.2fx" % (
            statistics.median(hooked), statistics.median(h / p for h, p in zip(hooked, plain))))
        print("  added per tool call:      %.1f ms (median over rounds)" % statistics.median(added))
        print("  the hook's own run:       %d ms (median of %d runs, from the hook events)"
              % (statistics.median(durations), len(durations)))
    finally:
        server.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
