#!/usr/bin/env python3
"""Issue 16, goals 1 and 2: the scripted 3-step task (cat, sed edit, plain-sh test, answer "done") and `--version`,
agents started directly (not through `git`), A/B in turn, one warm-up each, medians and medians of pair ratios.

usage: scripts/bench-task.py [--runs N] [--ref LABEL] [--quiet-wait S] [--out DIR] --agent LABEL=ga:PATH --agent LABEL=nc:PATH ...

Per run: a fresh fixture repo (greet.py staged; test_greet.sh is plain sh), a fresh fake server
(benchlib/fakesrv.py), the agent under benchlib/ptmeasure.py:
  wall     fork of /usr/bin/time -v to its reap
  cpu      user+sys of the agent and every child it waited for (what /usr/bin/time -v reports)
  own_cpu  the agent process alone (/proc/<pid>/stat at exit, 10 ms ticks)
  own_hwm  the agent's own peak RSS (VmHWM at its exit), children excluded
  maxrss   GNU time -v "Maximum resident set size": the largest single process of the tree
and for `--version` also
  spawned  the median wall of 50 runs started back to back with posix_spawn and reaped with waitpid, no GNU time
           and no tracer: the runs above carry ~4 ms of their own (a fork of this script, GNU time's exec, the
           tracer's stops), about as long as the --version itself, which pulls every ratio towards 1
Ratios are LABEL / REF per round, then the median over rounds (and the same for every other pair of non-REF agents,
e.g. new/old).
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
VERSION_FIELDS = FIELDS + [("spawned_wall_s", "spawned s")]
SPAWNS = 50


def one_task(agent, work, tag):
    d = os.path.join(work, "%s-%s" % (agent.label, tag))
    os.makedirs(d)
    repo = os.path.join(d, "repo")
    common.make_fixture(repo)
    srv = common.FakeServer(os.path.join(d, "requests.jsonl"))
    try:
        with common.Load() as load:
            r = ptmeasure.run([agent.task_spec(repo, srv.port, common.PROMPT, d)])[0]
        reqs = srv.requests()
    finally:
        srv.stop()
    r["other_cores"] = load.other_cores(r["tree_cpu_s"])
    r["loadavg"] = load.load
    r["success"] = common.task_succeeded(repo)
    r["model_requests"] = sum(1 for q in reqs if q.get("flavour") == "chat")
    r["requests"] = len(reqs)
    return r


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
    ap.add_argument("--no-task", action="store_true")
    ap.add_argument("--no-version", action="store_true")
    a = ap.parse_args()
    agents = [common.Agent(s) for s in a.agent]
    ref = a.ref or agents[-1].label
    work = a.out or tempfile.mkdtemp(prefix="bench-task3.")
    os.makedirs(work, exist_ok=True)
    raw = open(os.path.join(work, "raw.jsonl"), "a")
    for ag in agents:  # warm-up (page cache, first-run files): not counted
        if not a.no_version:
            one_version(ag, work, "warmup", True)
            one_version(ag, work, "warmup", False)
        if not a.no_task:
            w = one_task(ag, work, "warmup")
            print("warm-up %s: success=%s exit=%s wall=%.3fs requests=%d" % (
                ag.label, w["success"], w["exit"], w["wall_s"], w["model_requests"]), file=sys.stderr)
    tasks, versions, versions_nokey = [], [], []
    for i in range(a.runs):
        order = agents if i % 2 == 0 else agents[::-1]
        trow, vrow, nrow = {}, {}, {}
        for ag in order:
            if not a.no_version:
                common.wait_quiet(a.quiet_wait, a.quiet_cores)
                vrow[ag.label] = one_version(ag, work, str(i), True)
                nrow[ag.label] = one_version(ag, work, str(i), False)
            if not a.no_task:
                common.wait_quiet(a.quiet_wait, a.quiet_cores)
                t = one_task(ag, work, str(i))
                trow[ag.label] = t
                if not t["success"] or t["exit"] != 0:
                    print("round %d %s: FAILED (exit %s, success %s), see %s" % (
                        i, ag.label, t["exit"], t["success"], work), file=sys.stderr)
        raw.write(json.dumps({"round": i, "task": trow, "version": vrow, "version_nokey": nrow}) + "\n")
        raw.flush()
        if trow:
            tasks.append(trow)
        if vrow:
            versions.append(vrow)
            versions_nokey.append(nrow)
        print("round %d/%d: " % (i + 1, a.runs) + "  ".join(
            "%s %.3fs %dKB" % (k, v["wall_s"], v["own_hwm_kb"] or 0) for k, v in trow.items()), file=sys.stderr)
    for ag in agents:
        if tasks:
            ok = sum(1 for r in tasks if r[ag.label]["success"] and r[ag.label]["exit"] == 0)
            print("%s: %d/%d task runs succeeded, %s model requests a run, binary %d bytes" % (
                ag.label, ok, len(tasks), common.median([r[ag.label]["model_requests"] for r in tasks]),
                os.path.getsize(ag.path)))
    if tasks:
        summarize("3-step task", tasks, agents, ref, sys.stdout)
    if versions:
        print("versions: " + "; ".join("%s: %s" % (k, v["version"]) for k, v in versions[0].items()))
        summarize("--version, a dummy API key in the environment", versions, agents, ref,
                  sys.stdout, VERSION_FIELDS)
        summarize("--version, no key in the environment", versions_nokey, agents, ref, sys.stdout,
                  VERSION_FIELDS)
    print("\nbinary size ratios: " + ", ".join(
        "%s/%s %.2fx" % (ag.label, ref, os.path.getsize(ag.path) / os.path.getsize(
            [x for x in agents if x.label == ref][0].path)) for ag in agents if ag.label != ref))
    print("raw results: %s/raw.jsonl" % work)


if __name__ == "__main__":
    main()
