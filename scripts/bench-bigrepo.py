#!/usr/bin/env python3
"""Issue 16, goal 3: git-agent on the 100,000-file repository (scripts/bench-commit.sh's generator, benchlib/gen100k.sh).

usage: scripts/bench-bigrepo.py [--files 100000|1000000] [--rounds N] [--short] [--pooled N] [--repo DIR] [--fsmonitor]
                                [--out DIR] --agent LABEL=ga:PATH [--agent LABEL=ga:PATH ...]

--files 1000000 (issue 29) builds and uses a 1,000,000-file repository instead (10,000 folders of 100 files,
default REPO /tmp/git-agent-bench-repo1m: about 4 GB of inodes and blocks and a long build, once); --short is
one round without waiting for a quiet host (--rounds 1 --quiet-wait 0).

Each round, in turn: `git worktree add -q -b B REPO/.git/bench-wt-N HEAD` alone (the reference, on the file
system git-agent's checkouts go to, REPO/.git/agent/worktrees/; removed again untimed), then for
every agent: session 1 (one edit_file call, then "done"), `git-agent discard <id>`, session 2 (the same, after
the discard), discard. A session is `PATH ask PROMPT` started directly under benchlib/ptmeasure.py against a fresh
fake server (benchlib/fakesrv.py --calls). Figures per session:
  first_req   start of the agent -> arrival of its first model request (POST /chat/completions) at the server
  first_any   start -> its first request of any kind (the context-window probe GET /v1/models comes first)
  wall, cpu (tree), own_hwm (the agent's own peak RSS), maxrss (largest single process, e.g. a git child)
Ratios: session wall / the same round's `git worktree add` wall; medians over rounds. Each session runs with
GIT_AGENT_TIMINGS, and the per-phase medians of session 1 and session 2 are printed side by side, with how many
directories step 0's walk for untracked files read and kept from the last session's walk. "pooled" counts the
sessions that took a checkout from git-agent's worktree pool (the pool held one fewer after the session than
before it): session 1 must not (the pool is emptied with `gc` first), session 2 must (session 1's discard pooled
its checkout); a session 2 that did not is reported.
"""
import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchlib"))
import common  # noqa: E402
import ptmeasure  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "bench_task", os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench-task.py"))
bench_task = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_task)

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(HERE, "benchlib")
PROMPT = "In d000/f000.txt change 'some content' to 'edited content'. Reply done when finished."
CALLS = [{"tool": "edit_file",
          "args": {"path": "d000/f000.txt", "old_string": "some content", "new_string": "edited content"},
          "shell": "sed -i 's/some content/edited content/' d000/f000.txt"}]


def wt_add(repo, env, tag, work):
    # Next to where git-agent puts its checkouts (<git dir>/agent/worktrees/<id>): the same file system.
    path = os.path.join(repo, ".git", "bench-wt-" + tag)
    branch = "bench-wt-" + tag
    r = ptmeasure.run([{"argv": ["git", "worktree", "add", "-q", "-b", branch, path, "HEAD"], "cwd": repo,
                        "env": env, "stdout": os.path.join(work, "wt.out"),
                        "stderr": os.path.join(work, "wt.err")}])[0]
    subprocess.run(["git", "worktree", "remove", "--force", path], cwd=repo, env=env, check=True)
    subprocess.run(["git", "branch", "-q", "-D", branch], cwd=repo, env=env, check=True)
    return r


def pooled(repo):
    """How many checkouts git-agent's worktree pool holds (<git dir>/agent/pool/<name>)."""
    try:
        return len(os.listdir(os.path.join(repo, ".git", "agent", "pool")))
    except OSError:
        return 0


def read_jsonl(path):
    try:
        return [json.loads(line) for line in open(path) if line.strip()]
    except (OSError, ValueError):
        return []


def session(agent, repo, work, tag):
    d = os.path.join(work, "%s-%s" % (agent.label, tag))
    os.makedirs(d)
    pool_before = pooled(repo)
    srv = common.FakeServer(os.path.join(d, "requests.jsonl"), calls=CALLS)
    try:
        spec = agent.task_spec(repo, srv.port, PROMPT, d)
        timings = os.path.join(d, "timings.jsonl")
        spec["env"]["GIT_AGENT_TIMINGS"] = timings
        with common.Load() as load:
            r = ptmeasure.run([spec], timeout=1800)[0]
        reqs = srv.requests()
    finally:
        srv.stop()
    r["other_cores"] = load.other_cores(r["tree_cpu_s"])
    chat = [q["t"] for q in reqs if q.get("flavour") == "chat"]
    r["first_req_s"] = round(min(chat) - r["start_epoch"], 4) if chat else None
    r["first_any_s"] = round(min(q["t"] for q in reqs) - r["start_epoch"], 4) if reqs else None
    r["model_requests"] = len(chat)
    r["phases"] = bench_task.phase_figures(timings)
    # Step 0's walk for untracked files: directories read, and kept unread from the last session's walk.
    walk = [line for line in read_jsonl(timings) if line.get("phase") == "untracked"]
    r["walk_read"] = walk[0].get("read") if walk else None
    r["walk_kept"] = walk[0].get("kept") if walk else None
    # The session took a pooled checkout if the pool lost one while it ran (its discard puts one back).
    r["pool_before"] = pool_before
    r["reused"] = pool_before > 0 and pooled(repo) == pool_before - 1
    err = open(os.path.join(d, "stderr"), errors="replace").read()
    m = re.search(r"session (\w+) on agent/", err)
    r["id"] = m.group(1) if m else None
    r["edited"] = False
    if r["id"]:
        show = subprocess.run(["git", "show", "agent/%s:d000/f000.txt" % r["id"]], cwd=repo,
                              capture_output=True, text=True)
        r["edited"] = "edited content" in show.stdout
        with common.Load():
            dr = ptmeasure.run([{"argv": [agent.path, "discard", r["id"]], "cwd": repo, "env": spec["env"],
                                 "stdout": os.path.join(d, "discard.out"),
                                 "stderr": os.path.join(d, "discard.err")}])[0]
        r["discard_wall_s"] = dr["wall_s"]
        r["discard_exit"] = dr["exit"]
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agent", action="append", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", type=int, choices=[100000, 1000000], default=100000)
    ap.add_argument("--short", action="store_true", help="one round, no wait for a quiet host")
    ap.add_argument("--repo", help="where the repository is (built there when missing; default "
                    "$BENCH_REPO100K or /tmp/git-agent-bench-repo100k, /tmp/git-agent-bench-repo1m with --files "
                    "1000000)")
    ap.add_argument("--fsmonitor", action="store_true",
                    help="configure git's file-system monitor in the repository first (Watchman through git's "
                    "fsmonitor-watchman hook, with feature.manyFiles: index version 4, untracked cache, "
                    "index.skipHash), as git advises for a repository this size; without it, any such "
                    "configuration is taken out again")
    ap.add_argument("--out")
    ap.add_argument("--quiet-wait", type=float, default=30)
    ap.add_argument("--pooled", type=int, default=0, metavar="N",
                    help="after the rounds, N more pooled sessions per agent, the agents in turn (pairs taken "
                    "under the same load: the pooled session's figures on a busy host)")
    a = ap.parse_args()
    if a.short:
        a.rounds, a.quiet_wait = 1, 0
    if a.repo is None:
        a.repo = ("/tmp/git-agent-bench-repo1m" if a.files == 1000000
                  else os.environ.get("BENCH_REPO100K", "/tmp/git-agent-bench-repo100k"))
    agents = [common.Agent(s) for s in a.agent]
    gen_env = dict(os.environ, DIRS=str(a.files // 100), FILES="100")
    subprocess.run([os.path.join(LIB, "gen100k.sh"), a.repo], check=True, env=gen_env)
    work = a.out or tempfile.mkdtemp(prefix="bench-bigrepo.")
    os.makedirs(work, exist_ok=True)
    raw = open(os.path.join(work, "raw.jsonl"), "a")
    env = agents[0].env(9)
    files = int(subprocess.run("git ls-files | wc -l", shell=True, cwd=a.repo, capture_output=True,
                               text=True).stdout)
    print("repo %s: %d tracked files" % (a.repo, files))
    print(common.host(a.repo))
    print("git's file-system monitor: %s" % monitor(a.repo, env, a.fsmonitor))
    if a.fsmonitor:
        # Set in the repository's own .git/config, the monitor's hook runs once the user trusted it.
        for ag in agents:
            subprocess.run([ag.path, "trust"], cwd=a.repo, env=ag.env(9), check=True,
                           stdout=subprocess.DEVNULL)
    # Warm the page cache the same way for everyone: one untimed `git status`.
    subprocess.run(["git", "status", "--porcelain"], cwd=a.repo, env=env, stdout=subprocess.DEVNULL)
    rounds = []
    for i in range(a.rounds):
        row = {}
        common.wait_quiet(a.quiet_wait)
        row["wt_add"] = wt_add(a.repo, env, str(i), work)
        print("round %d: git worktree add %.2fs" % (i, row["wt_add"]["wall_s"]), file=sys.stderr)
        for ag in (agents if i % 2 == 0 else agents[::-1]):
            # Session 1 starts cold: no pooled checkout left by an earlier round (`gc` empties the pool; a
            # binary without one has none) ...
            subprocess.run([ag.path, "gc"], cwd=a.repo, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            # ... and no remembered walk for step 0 (session 2 has session 1's).
            try:
                os.remove(os.path.join(a.repo, ".git", "agent", "untracked.json"))
            except OSError:
                pass
            for s in ("s1", "s2"):
                common.wait_quiet(a.quiet_wait)
                r = session(ag, a.repo, work, "%d%s" % (i, s))
                row["%s.%s" % (ag.label, s)] = r
                print("round %d %s %s: exit %s edited %s pooled checkout %s first_req %.3fs wall %.2fs "
                      "own peak %d KB, step 0 read %s directories, kept %s" % (
                          i, ag.label, s, r["exit"], r["edited"], r["reused"], r["first_req_s"] or -1,
                          r["wall_s"], r["own_hwm_kb"] or 0, r["walk_read"], r["walk_kept"]),
                      file=sys.stderr)
                if s == "s2" and not r["reused"]:
                    print("round %d %s s2: did NOT take a pooled checkout (pool held %d before it): its "
                          "figures are not a warm-pool session" % (i, ag.label, r["pool_before"]),
                          file=sys.stderr)
        raw.write(json.dumps(row) + "\n")
        raw.flush()
        rounds.append(row)
    if rounds:
        summarize_rounds(rounds, agents)
    if a.pooled:
        pooled_pairs(a, agents, work, raw)
    print("raw results: %s/raw.jsonl" % work)


def summarize_rounds(rounds, agents):
    wt = common.median([r["wt_add"]["wall_s"] for r in rounds])
    print("\n== 100,000-file repo, median of %d rounds ==" % len(rounds))
    print("git worktree add alone: wall %.3f s, cpu %.3f s, maxrss %d KB" % (
        wt, common.median([r["wt_add"]["tree_cpu_s"] for r in rounds]),
        common.median([r["wt_add"]["time_maxrss_kb"] for r in rounds])))
    cols = [("first_req_s", "first req s"), ("first_any_s", "first any s"), ("wall_s", "wall s"),
            ("tree_cpu_s", "cpu s"), ("own_hwm_kb", "own peak KB"), ("time_maxrss_kb", "maxrss KB"),
            ("discard_wall_s", "discard s")]
    print("%-14s" % "session" + "".join("%13s" % h for _, h in cols) + "%14s%8s%8s" % (
        "wall/wt-add", "ok", "pooled"))
    for ag in agents:
        for s in ("s1", "s2"):
            key = "%s.%s" % (ag.label, s)
            vals = [common.median([r[key].get(k) for r in rounds]) for k, _ in cols]
            ratio = common.median([r[key]["wall_s"] / r["wt_add"]["wall_s"] for r in rounds])
            ok = sum(1 for r in rounds if r[key]["exit"] == 0 and r[key]["edited"])
            reused = sum(1 for r in rounds if r[key]["reused"])
            print("%-14s" % key + "".join("%13s" % common.fmt(v) for v in vals) +
                  "%14s%8s%8s" % (common.fmt(ratio, "x"), "%d/%d" % (ok, len(rounds)),
                                  "%d/%d" % (reused, len(rounds))))
    for ag in agents:
        # The sessions' phases (GIT_AGENT_TIMINGS): where a pooled second session's time goes.
        states = [(s, [{ag.label: r["%s.%s" % (ag.label, s)]} for r in rounds]) for s in ("s1", "s2")]
        bench_task.summarize_phases(states, [ag], sys.stdout)
    if len(agents) > 1:
        ref = agents[-1].label
        for ag in agents[:-1]:
            for s in ("s1", "s2"):
                for k in ("first_req_s", "wall_s", "own_hwm_kb"):
                    pr = [r["%s.%s" % (ag.label, s)][k] / r["%s.%s" % (ref, s)][k] for r in rounds
                          if r["%s.%s" % (ag.label, s)][k] and r["%s.%s" % (ref, s)][k]]
                    print("ratio %s/%s %s %s: %s" % (ag.label, ref, s, k, common.fmt(common.median(pr), "x")))


def monitor(repo, env, on):
    """Configures git's file-system monitor in `repo` (Watchman, through the hook git ships as
    fsmonitor-watchman.sample, and feature.manyFiles) or takes it out; primes it with `git status` until git has
    written the monitor's token into the index. Returns what is configured, in words."""
    git = lambda *args: subprocess.run(["git"] + list(args), cwd=repo, env=env, check=True,
                                       stdout=subprocess.DEVNULL)
    hooks = subprocess.run(["git", "rev-parse", "--git-path", "hooks"], cwd=repo, env=env, check=True,
                           capture_output=True, text=True).stdout.strip()
    hook = os.path.join(repo, hooks, "fsmonitor-watchman")
    if not on:
        configured = subprocess.run(["git", "config", "core.fsmonitor"], cwd=repo, env=env,
                                    capture_output=True).returncode == 0
        if configured:
            subprocess.run(["git", "config", "--unset", "core.fsmonitor"], cwd=repo, env=env)
            subprocess.run(["git", "config", "--unset", "feature.manyFiles"], cwd=repo, env=env)
            git("update-index", "--no-fsmonitor", "--index-version", "2")
        return "none"
    if subprocess.run(["watchman", "version"], capture_output=True).returncode != 0:
        sys.exit("--fsmonitor needs watchman (apt-get install watchman)")
    if not os.path.exists(hook):
        template = os.path.join(subprocess.run(["git", "--exec-path"], capture_output=True, text=True)
                                .stdout.strip(), "..", "..", "share", "git-core", "templates", "hooks",
                                "fsmonitor-watchman.sample")
        for candidate in (hook + ".sample", template, "/usr/share/git-core/templates/hooks/"
                          "fsmonitor-watchman.sample"):
            if os.path.exists(candidate):
                with open(candidate) as src, open(hook, "w") as dst:
                    dst.write(src.read())
                os.chmod(hook, 0o755)
                break
        else:
            sys.exit("--fsmonitor: git's fsmonitor-watchman.sample hook was not found")
    git("config", "core.fsmonitor", os.path.join(hooks, "fsmonitor-watchman"))
    git("config", "feature.manyFiles", "true")
    git("update-index", "--fsmonitor", "--index-version", "4")
    for _ in range(100):
        git("status", "--porcelain")
        with open(os.path.join(repo, ".git", "index"), "rb") as f:
            f.seek(-4096, os.SEEK_END)
            if b"FSMN" in f.read():
                break
        time.sleep(1)
    else:
        sys.exit("--fsmonitor: git never wrote Watchman's token into the index")
    return "Watchman (core.fsmonitor=%s, feature.manyFiles=true)" % os.path.join(hooks, "fsmonitor-watchman")


def pooled_pairs(a, agents, work, raw):
    """--pooled N: N pooled sessions per agent, in turn, each after the other's discard put a checkout back (the
    first may make one afresh if the pool is empty); medians and medians of pair ratios to the last agent, with
    step 0's and the checkout's durations and the host's load average during the run."""
    pairs = []
    for i in range(a.pooled):
        pair = {}
        for ag in (agents if i % 2 == 0 else agents[::-1]):
            r = session(ag, a.repo, work, "p%d" % i)
            r["load"] = os.getloadavg()[0]
            pair[ag.label] = r
            print("pooled %d %s: pooled checkout %s first_req %.3fs wall %.2fs step 0 %s ms checkout %s ms "
                  "(read %s, kept %s), load %.1f" % (
                      i, ag.label, r["reused"], r["first_req_s"] or -1, r["wall_s"],
                      r["phases"].get("step 0", (None, None))[1], r["phases"].get("checkout", (None, None))[1],
                      r["walk_read"], r["walk_kept"], r["load"]), file=sys.stderr)
        raw.write(json.dumps({"pooled": pair}) + "\n")
        raw.flush()
        pairs.append(pair)
    ok = [p for p in pairs if all(p[ag.label]["reused"] for ag in agents)]
    print("\n== %d pooled sessions per agent in turn (%d pairs both pooled), load average %s to %s ==" % (
        len(pairs), len(ok), common.fmt(min(p[ag.label]["load"] for p in pairs for ag in agents)),
        common.fmt(max(p[ag.label]["load"] for p in pairs for ag in agents))))
    figures = [("first_req_s", "first req s", lambda r: r["first_req_s"]),
               ("wall_s", "wall s", lambda r: r["wall_s"]),
               ("tree_cpu_s", "cpu s", lambda r: r["tree_cpu_s"]),
               ("step0", "step 0 ms", lambda r: r["phases"].get("step 0", (None, None))[1]),
               ("checkout", "checkout ms", lambda r: r["phases"].get("checkout", (None, None))[1])]
    print("%-10s" % "agent" + "".join("%14s" % h for _, h, _ in figures))
    for ag in agents:
        print("%-10s" % ag.label + "".join("%14s" % common.fmt(common.median([get(p[ag.label]) for p in ok]))
                                           for _, _, get in figures))
    ref = agents[-1].label
    for ag in agents[:-1]:
        for _, h, get in figures:
            ratios = [get(p[ag.label]) / get(p[ref]) for p in ok if get(p[ag.label]) and get(p[ref])]
            print("ratio %s/%s pooled %s: %s" % (ag.label, ref, h, common.fmt(common.median(ratios), "x")))


if __name__ == "__main__":
    main()
