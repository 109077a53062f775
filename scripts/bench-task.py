#!/usr/bin/env python3
"""Issues 16 and 29: the scripted 3-step task (cat, sed edit, plain-sh test, answer "done") and `--version`,
agents started directly (not through `git`), A/B in turn, one warm-up each, medians and medians of pair ratios,
in two host states: quiet, and right after a heavy file-system load.

usage: scripts/bench-task.py [--runs N] [--ref LABEL] [--quiet-wait S] [--out DIR] [--fs-load N]
                             [--fresh-after-load] [--staged]
                             --agent LABEL=ga:PATH --agent LABEL=nc:PATH ...

Per run: a fresh fixture repo (greet.py and test_greet.sh, plain sh, committed; then the user's work in
progress: greet.py modified and an untracked notes.txt, so git-agent's step 0 runs; --staged: the issue-16
fixture, both files staged and nothing committed), a fresh fake server (benchlib/fakesrv.py), the agent under
benchlib/ptmeasure.py:
  wall     fork of /usr/bin/time -v to its reap
  cpu      user+sys of the agent and every child it waited for (what /usr/bin/time -v reports)
  own_cpu  the agent process alone (/proc/<pid>/stat at exit, 10 ms ticks)
  own_hwm  the agent's own peak RSS (VmHWM at its exit), children excluded
  maxrss   GNU time -v "Maximum resident set size": the largest single process of the tree
and for `--version` also
  spawned  the median wall of 50 runs started back to back with posix_spawn and reaped with waitpid, no GNU time
           and no tracer: the runs above carry ~4 ms of their own (a fork of this script, GNU time's exec, the
           tracer's stops), about as long as the --version itself, which pulls every ratio towards 1
  sys      the kernel time of the agent process alone (own_sys, 10 ms ticks) and of its tree (tree_sys)
  minflt   the agent process's minor page faults
  req KB   bytes of the chat requests it sent (the fake server's log)
Ratios are LABEL / REF per round, then the median over rounds (and the same for every other pair of non-REF agents,
e.g. new/old).

Host states: the task rounds run first on a quiet host ("quiet"), then again, each run right after this script
wrote and deleted --fs-load files (default 100,000, 0 skips the state) in 100 folders beside the run folders,
on the same file system, and the clock passed into the next second ("after FS load"; why the second:
benchlib/common.py, past_the_deletion_second()). The fixture is made before the load, as a user's repository
exists before their test suite runs; --fresh-after-load makes it after the load (the worst case: on ext4
without a journal the repository's own directories are then in the block groups that just lost the files).
git-agent runs with GIT_AGENT_TIMINGS=<file> (one JSON line per phase of the session), and the per-phase
medians of both states are printed side by side: the phase's end in ms since the process started ("at") and
how long it took ("took", for phases with a beginning). The output ends with the command, the host (kernel,
cores, the run folder's file system and, for ext4, whether it keeps a journal) and where the raw results are.
"""
import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchlib"))
import common  # noqa: E402
import ptmeasure  # noqa: E402

FIELDS = [("wall_s", "wall s"), ("tree_cpu_s", "cpu s"),
          ("own_hwm_kb", "own peak KB"), ("time_maxrss_kb", "maxrss KB")]
TASK_FIELDS = FIELDS + [("own_sys_s", "own sys s"), ("tree_sys_s", "tree sys s"), ("own_minflt", "minflt"),
                        ("request_kb", "req KB")]
VERSION_FIELDS = FIELDS + [("spawned_wall_s", "spawned s")]
SPAWNS = 50


def one_task(agent, work, tag, wip=True, before=None):
    """One measured task run in a fresh fixture; `before`, if given, runs after the fixture is made and right
    before the agent starts (the file-system load)."""
    d = os.path.join(work, "%s-%s" % (agent.label, tag))
    os.makedirs(d)
    repo = os.path.join(d, "repo")
    common.make_fixture(repo, wip=wip)
    if before:
        before()
    srv = common.FakeServer(os.path.join(d, "requests.jsonl"))
    timings = os.path.join(d, "timings.jsonl")
    try:
        spec = agent.task_spec(repo, srv.port, common.PROMPT, d)
        if agent.kind == "ga":
            spec["env"]["GIT_AGENT_TIMINGS"] = timings
        with common.Load() as load:
            r = ptmeasure.run([spec])[0]
        reqs = srv.requests()
    finally:
        srv.stop()
    r["other_cores"] = load.other_cores(r["tree_cpu_s"])
    r["loadavg"] = load.load
    r["success"] = common.task_succeeded(repo)
    chats = [q for q in reqs if q.get("flavour") == "chat"]
    r["model_requests"] = len(chats)
    r["request_kb"] = sum(q.get("bytes", 0) for q in chats) / 1000
    r["requests"] = len(reqs)
    r["phases"] = phase_figures(timings) if agent.kind == "ga" else {}
    return r


def phase_figures(path):
    """{phase key: (at ms, took ms or None)} from a GIT_AGENT_TIMINGS file; a phase that comes more than once
    is keyed by its order ("request #2"), a tool also by its name ("tool run #1")."""
    seen, out = {}, {}
    try:
        lines = [json.loads(line) for line in open(path) if line.strip()]
    except (OSError, ValueError):
        return out
    for line in lines:
        name = line["phase"] + (" " + line["name"] if line.get("name") else "")
        seen[name] = seen.get(name, 0) + 1
        out["%s #%d" % (name, seen[name])] = (line.get("ms"), line.get("took_ms"))
    return {(k[:-3] if seen[k[:-3]] == 1 else k): v for k, v in out.items()}


def fs_load(work, n):
    """Writes n small files in 100 folders under work, then deletes them all: the host state right after a big
    checkout or a test suite (dentries, inodes, the journal and page cache churned), from the next second of the
    clock on (see common.past_the_deletion_second())."""
    top = os.path.join(work, "fs-load")
    dirs = [os.path.join(top, "d%02d" % i) for i in range(100)]
    for d in dirs:
        os.makedirs(d, exist_ok=True)
    data = b"x" * 200
    for i in range(n):
        fd = os.open(os.path.join(dirs[i % 100], "f%06d" % i), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, data)
        os.close(fd)
    common.rmtree(top)
    common.past_the_deletion_second()


def one_version(agent, work, tag, key):
    d = os.path.join(work, "%s-v%s%s" % (agent.label, "k" if key else "n", tag))
    os.makedirs(d)
    with common.Load() as load:
        r = ptmeasure.run([agent.version_spec(d, key)])[0]
    r["other_cores"] = load.other_cores(r["tree_cpu_s"])
    r["version"] = open(os.path.join(d, "vstdout")).read().strip()
    r["spawned_wall_s"] = spawned_wall(agent.version_spec(d, key))
    return r


def spawned_wall(spec, n=SPAWNS):
    """Median wall of n runs of spec's argv, each posix_spawn'ed (vfork: no copy of this script) and reaped."""
    devnull = os.open(os.devnull, os.O_RDWR)
    actions = [(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1),
               (os.POSIX_SPAWN_DUP2, devnull, 2)]
    walls = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            pid = os.posix_spawn(spec["argv"][0], spec["argv"], spec["env"], file_actions=actions)
            _, status = os.waitpid(pid, 0)
            walls.append(time.perf_counter() - t0)
            if status != 0:
                sys.exit("%s exited with status %d" % (" ".join(spec["argv"]), status))
    finally:
        os.close(devnull)
    return common.median(walls)


def summarize_phases(states, agents, out):
    """Per-phase medians of git-agent's timings, the host states side by side."""
    for a in agents:
        if a.kind != "ga":
            continue
        names = [n for n, _ in states]
        keys = []
        for _, rows in states:
            for r in rows:
                for k in r[a.label]["phases"]:
                    if k not in keys:
                        keys.append(k)
        if not keys:
            continue
        print("\n== %s: phases (GIT_AGENT_TIMINGS), median ms: at = end since start, took = duration ==" % a.label,
              file=out)
        print("%-22s" % "phase" + "".join("%20s%10s" % (n[:17] + " at", "took") for n in names), file=out)
        order = {k: common.median([r[a.label]["phases"].get(k, (None, None))[0] for _, rows in states
                                   for r in rows]) or 0 for k in keys}
        for k in sorted(keys, key=lambda k: order[k]):
            cells = ""
            for _, rows in states:
                at = common.median([r[a.label]["phases"].get(k, (None, None))[0] for r in rows])
                took = common.median([r[a.label]["phases"].get(k, (None, None))[1] for r in rows])
                cells += "%20s%10s" % (common.fmt(at), common.fmt(took))
            print("%-22s" % k[:22] + cells, file=out)


def summarize(title, rows, agents, ref, out, fields=FIELDS):
    print("\n== %s (median of %d runs; ratios = median of per-round LABEL/%s) ==" % (
        title, len(rows), ref), file=out)
    head = "%-10s" % "agent" + "".join("%14s" % h for _, h in fields) + "%12s" % "bg cores"
    print(head, file=out)
    for a in agents:
        vals = [common.median([r[a.label][k] for r in rows]) for k, _ in fields]
        bg = common.median([r[a.label]["other_cores"] for r in rows])
        print("%-10s" % a.label + "".join("%14s" % common.fmt(v) for v in vals) + "%12s" % common.fmt(bg),
              file=out)
    pairs = [(a.label, ref) for a in agents if a.label != ref]
    others = [a.label for a in agents if a.label != ref]
    pairs += [(x, y) for i, x in enumerate(others) for y in others[i + 1:]]  # e.g. new/old
    for num, den in pairs:
        ratios = []
        for k, _ in fields:
            pr = [r[num][k] / r[den][k] for r in rows if r[num][k] and r[den][k]]
            ratios.append(common.median(pr))
        print("%-10s" % ("%s/%s" % (num, den))[:10] +
              "".join("%14s" % common.fmt(v, "x") for v in ratios), file=out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agent", action="append", required=True)
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--ref", help="label the ratios divide by (default: the last agent)")
    ap.add_argument("--quiet-wait", type=float, default=20, help="wait up to S s for a quiet host before a run")
    ap.add_argument("--quiet-cores", type=float, default=0.5)
    ap.add_argument("--out", help="raw results and run folders (default: a new temp dir, kept)")
    ap.add_argument("--fresh-after-load", action="store_true",
                    help="make each after-load run's fixture after the load instead of before it")
    ap.add_argument("--fs-load", type=int, default=100000,
                    help="files written and deleted before each run of the second host state (0: no such state)")
    ap.add_argument("--staged", action="store_true", help="issue 16's fixture: no work in progress, no step 0")
    ap.add_argument("--no-task", action="store_true")
    ap.add_argument("--no-version", action="store_true")
    a = ap.parse_args()
    agents = [common.Agent(s) for s in a.agent]
    ref = a.ref or agents[-1].label
    work = a.out or tempfile.mkdtemp(prefix="bench-task3.")
    os.makedirs(work, exist_ok=True)
    wip = not a.staged
    raw = open(os.path.join(work, "raw.jsonl"), "a")
    for ag in agents:  # warm-up (page cache, first-run files): not counted
        if not a.no_version:
            one_version(ag, work, "warmup", True)
            one_version(ag, work, "warmup", False)
        if not a.no_task:
            w = one_task(ag, work, "warmup", wip)
            print("warm-up %s: success=%s exit=%s wall=%.3fs requests=%d" % (
                ag.label, w["success"], w["exit"], w["wall_s"], w["model_requests"]), file=sys.stderr)
    states = [("quiet", 0)] + ([("after FS load", a.fs_load)] if a.fs_load and not a.no_task else [])
    tasks = {name: [] for name, _ in states}
    versions, versions_nokey = [], []
    for state, load_files in states:
        for i in range(a.runs):
            order = agents if i % 2 == 0 else agents[::-1]
            trow, vrow, nrow = {}, {}, {}
            for ag in order:
                if not a.no_version and not load_files:
                    common.wait_quiet(a.quiet_wait, a.quiet_cores)
                    vrow[ag.label] = one_version(ag, work, str(i), True)
                    nrow[ag.label] = one_version(ag, work, str(i), False)
                if not a.no_task:
                    common.wait_quiet(a.quiet_wait, a.quiet_cores)
                    if load_files and a.fresh_after_load:
                        fs_load(work, load_files)
                    load = load_files and not a.fresh_after_load
                    tag = "%s%d" % ("L" if load_files else "", i)
                    t = one_task(ag, work, tag, wip, before=(lambda: fs_load(work, load_files)) if load else None)
                    trow[ag.label] = t
                    if not t["success"] or t["exit"] != 0:
                        print("%s round %d %s: FAILED (exit %s, success %s), see %s" % (
                            state, i, ag.label, t["exit"], t["success"], work), file=sys.stderr)
            raw.write(json.dumps({"state": state, "round": i, "task": trow, "version": vrow,
                                  "version_nokey": nrow}) + "\n")
            raw.flush()
            if trow:
                tasks[state].append(trow)
            if vrow:
                versions.append(vrow)
                versions_nokey.append(nrow)
            print("%s round %d/%d: " % (state, i + 1, a.runs) + "  ".join(
                "%s %.3fs %dKB" % (k, v["wall_s"], v["own_hwm_kb"] or 0) for k, v in trow.items()),
                file=sys.stderr)
    for ag in agents:
        for state, rows in tasks.items():
            if rows:
                ok = sum(1 for r in rows if r[ag.label]["success"] and r[ag.label]["exit"] == 0)
                print("%s, %s: %d/%d task runs succeeded, %s model requests a run, binary %d bytes" % (
                    ag.label, state, ok, len(rows), common.median([r[ag.label]["model_requests"] for r in rows]),
                    os.path.getsize(ag.path)))
    fixture = "issue 16's fixture (staged)" if a.staged else "work in progress in the fixture (step 0 runs)"
    for state, rows in tasks.items():
        if rows:
            summarize("3-step task, %s, %s" % (fixture, state), rows, agents, ref, sys.stdout, TASK_FIELDS)
    summarize_phases([(state, rows) for state, rows in tasks.items() if rows], agents, sys.stdout)
    if versions:
        print("versions: " + "; ".join("%s: %s" % (k, v["version"]) for k, v in versions[0].items()))
        summarize("--version, a dummy API key in the environment", versions, agents, ref,
                  sys.stdout, VERSION_FIELDS)
        summarize("--version, no key in the environment", versions_nokey, agents, ref, sys.stdout,
                  VERSION_FIELDS)
    print("\nbinary size ratios: " + ", ".join(
        "%s/%s %.2fx" % (ag.label, ref, os.path.getsize(ag.path) / os.path.getsize(
            [x for x in agents if x.label == ref][0].path)) for ag in agents if ag.label != ref))
    print("command: " + " ".join(sys.argv))
    print(common.host(work))
    print("raw results: %s/raw.jsonl" % work)

if __name__ == "__main__":
    main()
