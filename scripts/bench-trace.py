#!/usr/bin/env python3
"""Issue 29: one run of the scripted 3-step task (the user's work in progress in the fixture, so step 0 runs)
under a tracer, on a quiet host or right after a heavy file-system load, to see where the kernel time goes.

usage: scripts/bench-trace.py --agent LABEL=ga:PATH [--state quiet|load] [--fs-load N] [--out DIR] -- WRAPPER...

WRAPPER is the tracer's command line, with OUT standing for DIR/LABEL-STATE, e.g.
  -- strace -f -c -o OUT.strace             syscall counts and times of the agent and its children
  -- perf record -q -F 4999 -g -o OUT.perf  CPU samples with call chains (then `perf report -i OUT.perf
                                            --children --sort sym`)
The load is benchlib's: --fs-load files (default 100,000) written and deleted in 100 folders beside the run
folder, right before the run. git-agent runs with GIT_AGENT_TIMINGS=DIR/LABEL-STATE.timings.jsonl.
"""
import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "benchlib"))
import common  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_task", os.path.join(HERE, "bench-task.py"))
bench_task = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_task)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agent", required=True)
    ap.add_argument("--state", choices=["quiet", "load"], default="quiet")
    ap.add_argument("--fs-load", type=int, default=100000)
    ap.add_argument("--out", help="where the traces go (default: a new temp dir, kept)")
    ap.add_argument("wrapper", nargs="+")
    a = ap.parse_args()
    agent = common.Agent(a.agent)
    out = a.out or tempfile.mkdtemp(prefix="bench-trace.")
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="run.", dir=out)
    if a.state == "load":
        t0 = time.monotonic()
        bench_task.fs_load(work, a.fs_load)
        print("wrote and deleted %d files in %.1f s" % (a.fs_load, time.monotonic() - t0), file=sys.stderr)
    repo = os.path.join(work, "repo")
    common.make_fixture(repo, wip=True)
    srv = common.FakeServer(os.path.join(work, "requests.jsonl"))
    stem = os.path.join(out, "%s-%s" % (agent.label, a.state))
    try:
        spec = agent.task_spec(repo, srv.port, common.PROMPT, work)
        if agent.kind == "ga":
            spec["env"]["GIT_AGENT_TIMINGS"] = stem + ".timings.jsonl"
        stdin = open(spec["stdin"]) if "stdin" in spec else subprocess.DEVNULL
        argv = [w.replace("OUT", stem) for w in a.wrapper] + spec["argv"]
        t0 = time.monotonic()
        code = subprocess.call(argv, cwd=repo, env=spec["env"], stdin=stdin, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        wall = time.monotonic() - t0
    finally:
        srv.stop()
    print("%s %s: exit %d, wall %.3f s (traced), success %s; traces: %s.*" % (
        agent.label, a.state, code, wall, common.task_succeeded(repo), stem))


if __name__ == "__main__":
    main()
