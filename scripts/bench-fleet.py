#!/usr/bin/env python3
"""Issue 16, goal 5: a fleet of N sessions at once in one repository (default 250), each the 3-step task
(cat greet.py, sed edit, plain-sh test, "done"), one fake server for all.

usage: scripts/bench-fleet.py [--sessions N] [--rounds R] [--out DIR] --agent LABEL=ga:PATH [--agent LABEL=nc:PATH ...]

All N processes of one agent start at once under one benchlib/ptmeasure.py tracer (each one's own VmHWM at its exit,
children excluded; GNU time maxrss = largest process of its tree). git-agent sessions share one fixture repository
(committed, so every session has the same base); nano-coder, which edits the tree it runs in, gets one fixture
copy per process (otherwise N processes edit one file). Checked afterwards for git-agent: N exit codes 0, N
`agent/*` branches each with greet.py edited, N sessions listed `done` by `git-agent log`, every branch with
a note on one of its step commits, and `git fsck --strict --no-dangling` clean and silent; "intact" means all of these.
Prints: fleet wall (first start to last exit), per-session own peak RSS (median, max), sum of own peaks, and
for git-agent where its own memory goes: every session writes the marks of GIT_AGENT_FOOTPRINT (resident
memory, anonymous and file-backed, the allocator's bytes in use and held, after each part it sets up), whose medians
and differences attribute the peak; two extra sessions against an http:// and an https:// endpoint measure the
TLS roots. The start thread (step 0, branch, checkout) runs from "open" until the first tool call waits for
it, so the "first reply" difference includes whatever of it ran meanwhile.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchlib"))
import common  # noqa: E402
import ptmeasure  # noqa: E402


def check_ga(agent, repo, env, n, results):
    out = {"exit0": sum(1 for r in results if r["exit"] == 0)}
    refs = subprocess.run(["git", "for-each-ref", "--format=%(refname)", "refs/heads/agent/"], cwd=repo,
                          capture_output=True, text=True).stdout.split()
    out["branches"] = len(refs)
    out["branches_edited"] = sum(
        1 for ref in refs if "hello agent" in subprocess.run(
            ["git", "show", ref + ":greet.py"], cwd=repo, capture_output=True, text=True).stdout)
    log = subprocess.run([agent.path, "log"], cwd=repo, env=env, capture_output=True, text=True).stdout
    out["log_lines"] = len(log.splitlines())
    out["log_done"] = sum(1 for line in log.splitlines() if " done " in line)
    notes = subprocess.run(["git", "notes", "--ref=agent", "list"], cwd=repo, capture_output=True, text=True)
    annotated = {line.split()[1] for line in notes.stdout.splitlines() if len(line.split()) == 2}
    out["notes"] = len(annotated)
    # Every session's branch carries its notes: at least one commit between the base and its tip has one.
    out["branches_with_notes"] = sum(
        1 for ref in refs if annotated & set(subprocess.run(
            ["git", "rev-list", "main.." + ref], cwd=repo, capture_output=True, text=True).stdout.split()))
    fsck = subprocess.run(["git", "fsck", "--strict", "--no-dangling", "--no-progress"], cwd=repo, capture_output=True, text=True)
    out["fsck_rc"] = fsck.returncode
    out["fsck_output_lines"] = len((fsck.stdout + fsck.stderr).splitlines())
    out["worktrees"] = len(subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True,
                                          text=True).stdout.splitlines()) - 1
    out["all_ok"] = (out["exit0"] == n and out["branches"] == n and out["branches_edited"] == n
                     and out["log_done"] == n and out["branches_with_notes"] == n and out["fsck_rc"] == 0
                     and out["fsck_output_lines"] == 0)
    return out


MARKS = ["start", "runtime", "client", "repository", "open", "first reply", "checkout", "close"]


def memory_marks(paths):
    """The marks of each session's GIT_AGENT_FOOTPRINT file: {mark: [dict per session]}."""
    marks = {}
    for p in paths:
        try:
            lines = [json.loads(l) for l in open(p) if l.strip()]
        except OSError:
            continue
        for m in lines:
            marks.setdefault(m["at"], []).append(m)
    return marks


def tls_roots_kb(agent, work):
    """anon+file growth of creating the HTTP client for an https:// endpoint (TLS roots loaded) minus the same
    for http:// (none), each from one git-agent run whose model request then fails (nothing listens)."""
    out = {}
    for scheme in ("http", "https"):
        d = os.path.join(work, "tls-" + scheme)
        os.makedirs(d, exist_ok=True)
        repo = os.path.join(d, "repo")
        if not os.path.isdir(repo):
            common.make_fixture(repo, commit=True)
        mem = os.path.join(d, "mem.jsonl")
        if os.path.exists(mem):
            os.unlink(mem)
        env = agent.env(9)
        env["OPENAI_BASE_URL"] = "%s://127.0.0.1:9/v1" % scheme
        env["GIT_AGENT_FOOTPRINT"] = mem
        env["GIT_AGENT_CONNECT_TIMEOUT"] = "1"
        subprocess.run([agent.path, "ask", "hello"], cwd=repo, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        m = memory_marks([mem])
        if "client" in m and "runtime" in m:
            out[scheme] = m["client"][0]["rss_kb"] - m["runtime"][0]["rss_kb"]
    if "http" in out and "https" in out:
        return out["https"] - out["http"]
    return None


def print_memory(agent, marks, tls, hwm, out=sys.stdout):
    med = lambda at, k: common.median([m.get(k) for m in marks.get(at, [])])  # noqa: E731
    print("\n== where %s's own memory goes (median over %d sessions, KB) ==" % (
        agent.label, len(marks.get("start", []))), file=out)
    print("%-12s%10s%10s%10s%14s%14s%9s" % ("after", "rss", "anon", "file", "heap in use", "heap held",
                                           "threads"), file=out)
    for at in MARKS:
        if at in marks:
            print("%-12s%10s%10s%10s%14s%14s%9s" % (at, *[common.fmt(med(at, k)) for k in (
                "rss_kb", "anon_kb", "file_kb", "heap_in_use_kb", "heap_held_kb", "threads")]), file=out)

    def delta(a, b, k="rss_kb"):
        x, y = med(a, k), med(b, k)
        return None if x is None or y is None else y - x
    rows = [
        ("binary and libc pages touched by start-up (file-backed)", med("start", "file_kb")),
        ("process start, anonymous (stack, libc, std)", med("start", "anon_kb")),
        ("tokio runtime (current-thread, I/O and timer drivers)", delta("start", "runtime")),
        ("reqwest client for http:// (no TLS roots)", delta("runtime", "client")),
        ("TLS roots and config (extra for an https:// endpoint)", tls),
        ("gix: repository open (config, refs, object store)", delta("client", "repository")),
        ("session open: config, tools, log, start thread", delta("repository", "open")),
        ("first request and reply (+ start thread meanwhile)", delta("open", "first reply")),
        ("rest of step 0, branch, checkout (start thread)", delta("first reply", "checkout")),
        ("tool calls, step commit, notes, fold", delta("checkout", "close")),
        ("allocator: held but not in use, at close", None if med("close", "heap_held_kb") is None else
         med("close", "heap_held_kb") - med("close", "heap_in_use_kb")),
        ("peak (VmHWM at exit)", common.median(hwm)),
    ]
    for name, kb in rows:
        print("  %-58s %8s KB" % (name, common.fmt(kb)), file=out)


def fleet(agent, n, work, tag):
    d = os.path.join(work, "%s-%s" % (agent.label, tag))
    os.makedirs(d)
    srv = common.FakeServer(os.path.join(d, "requests.jsonl"))
    try:
        specs = []
        shared = os.path.join(d, "repo")
        if agent.kind == "ga":
            common.make_fixture(shared, commit=True)
        for k in range(n):
            sd = os.path.join(d, "s%03d" % k)
            os.makedirs(sd)
            repo = shared
            if agent.kind != "ga":
                repo = os.path.join(sd, "repo")
                common.make_fixture(repo, commit=True)
            spec = agent.task_spec(repo, srv.port, common.PROMPT, sd)
            if agent.kind == "ga":
                spec["env"]["GIT_AGENT_FOOTPRINT"] = os.path.join(sd, "mem.jsonl")
            specs.append(spec)
        common.wait_quiet(30)
        with common.Load() as load:
            res = ptmeasure.run(specs, timeout=1800)
        reqs = srv.requests()
    finally:
        srv.stop()
    starts = [r["start_epoch"] for r in res]
    ends = [r["start_epoch"] + r["wall_s"] for r in res]
    hwm = [r["own_hwm_kb"] for r in res if r["own_hwm_kb"]]
    summary = {
        "agent": agent.label, "sessions": n,
        "fleet_wall_s": round(max(ends) - min(starts), 3),
        "spawn_spread_s": round(max(starts) - min(starts), 3),
        "exit0": sum(1 for r in res if r["exit"] == 0),
        "own_hwm_median_kb": common.median(hwm), "own_hwm_max_kb": max(hwm) if hwm else None,
        "own_hwm_sum_mb": round(sum(hwm) / 1024, 1),
        "time_maxrss_median_kb": common.median([r["time_maxrss_kb"] for r in res]),
        "own_anon_median_kb": common.median([r["own_anon_kb"] for r in res]),
        "own_file_median_kb": common.median([r["own_file_kb"] for r in res]),
        "session_wall_median_s": common.median([r["wall_s"] for r in res]),
        "cpu_total_s": round(sum(r["tree_cpu_s"] for r in res), 2),
        "model_requests": sum(1 for q in reqs if q.get("flavour") == "chat"),
        "loadavg_before": load.load,
        "other_cores": load.other_cores(sum(r["tree_cpu_s"] for r in res)),
    }
    if agent.kind == "ga":
        env = {k: v for k, v in specs[0]["env"].items() if k != "GIT_AGENT_FOOTPRINT"}
        summary.update(check_ga(agent, shared, env, n, res))
        marks = memory_marks([s["env"]["GIT_AGENT_FOOTPRINT"] for s in specs])
        tls = tls_roots_kb(agent, d)
        with open(os.path.join(d, "memory.txt"), "w") as f:
            print_memory(agent, marks, tls, hwm, out=f)
        summary["memory_report"] = os.path.join(d, "memory.txt")
    else:
        summary["edited"] = sum(1 for s in specs if common.task_succeeded(s["cwd"]))
        summary["all_ok"] = summary["edited"] == n and summary["exit0"] == n
    with open(os.path.join(d, "per-session.jsonl"), "w") as f:
        for r in res:
            f.write(json.dumps(r) + "\n")
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agent", action="append", required=True)
    ap.add_argument("--sessions", type=int, default=250)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--out")
    a = ap.parse_args()
    agents = [common.Agent(s) for s in a.agent]
    work = a.out or tempfile.mkdtemp(prefix="bench-fleet.")
    os.makedirs(work, exist_ok=True)
    raw = open(os.path.join(work, "raw.jsonl"), "a")
    rows = []
    for i in range(a.rounds):
        for ag in (agents if i % 2 == 0 else agents[::-1]):
            s = fleet(ag, a.sessions, work, str(i))
            s["round"] = i
            rows.append(s)
            raw.write(json.dumps(s) + "\n")
            raw.flush()
            print(json.dumps(s))
            if s.get("memory_report"):
                print(open(s["memory_report"]).read())
    print("\n== fleet of %d sessions (median over rounds) ==" % a.sessions)
    cols = [("fleet_wall_s", "fleet wall s"), ("own_hwm_median_kb", "peak KB/sess"),
            ("own_hwm_max_kb", "max peak KB"), ("own_hwm_sum_mb", "sum MB"), ("cpu_total_s", "cpu s"),
            ("exit0", "exit 0")]
    print("%-10s" % "agent" + "".join("%14s" % h for _, h in cols) + "%8s" % "intact")
    for ag in agents:
        mine = [r for r in rows if r["agent"] == ag.label]
        vals = [common.median([r.get(k) for r in mine]) for k, _ in cols]
        intact = "%d/%d" % (sum(1 for r in mine if r.get("all_ok")), len(mine))
        print("%-10s" % ag.label + "".join("%14s" % common.fmt(v) for v in vals) + "%8s" % intact)
    for x in agents:
        for y in agents:
            if x is y or x.kind != "ga":
                continue
            pr = [rx["own_hwm_median_kb"] / ry["own_hwm_median_kb"] for rx in rows for ry in rows
                  if rx["agent"] == x.label and ry["agent"] == y.label and rx["round"] == ry["round"]]
            wr = [rx["fleet_wall_s"] / ry["fleet_wall_s"] for rx in rows for ry in rows
                  if rx["agent"] == x.label and ry["agent"] == y.label and rx["round"] == ry["round"]]
            print("ratio %s/%s: per-session peak %s, fleet wall %s" % (
                x.label, y.label, common.fmt(common.median(pr), "x"), common.fmt(common.median(wr), "x")))
    print("raw results: %s/raw.jsonl (per session: %s/<label>-<round>/per-session.jsonl)" % (work, work))


if __name__ == "__main__":
    main()
