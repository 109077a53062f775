#!/usr/bin/env python3
"""Issue 29, "tokens are cost": the bytes each agent sends to the model over the scripted 3-step task (cat, sed
edit, plain-sh test, answer "done"), beside each other, with ratios. Bytes do not depend on the host's load or
the build profile, so one run each is enough (a debug build measures the same as a release one).

usage: scripts/bench-bytes.py [--wip] [--ref LABEL] --agent LABEL=ga:PATH --agent LABEL=nc:PATH
                             [--agent LABEL=cx:CODEX] ...

CODEX is the Codex CLI (see benchlib/common.py), run against the same fake server through the Responses API:
its requests resend the whole conversation as `input` items, like the chat requests of the other two.

Per agent: a fresh fixture repo (greet.py and test_greet.sh staged; with --wip also committed first, then
greet.py modified and an untracked notes.txt, so git-agent's step 0 runs), a fresh fake server
(benchlib/fakesrv.py, which logs each chat request's size, its tool list's and its system prompt's), the task.
Printed: the chat requests, the bytes of each, their total, the tool list's and the system prompt's share of the
first request, LABEL/REF ratios of the total, and the first agent's total over each other agent's.
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchlib"))
import common  # noqa: E402


def one_task(agent, work, wip):
    d = os.path.join(work, agent.label)
    os.makedirs(d)
    repo = os.path.join(d, "repo")
    common.make_fixture(repo, wip=wip)
    srv = common.FakeServer(os.path.join(d, "requests.jsonl"))
    try:
        spec = agent.task_spec(repo, srv.port, common.PROMPT, d)
        stdin = open(spec["stdin"]) if "stdin" in spec else subprocess.DEVNULL
        with open(spec["stdout"], "w") as out, open(spec["stderr"], "w") as err:
            code = subprocess.call(spec["argv"], cwd=spec["cwd"], env=spec["env"], stdin=stdin, stdout=out,
                                   stderr=err, timeout=300)
        requests = srv.requests()
    finally:
        srv.stop()
    chats = [q for q in requests if q.get("flavour") == "chat"]
    # Side requests an agent makes besides the model's turns (a title, a summary, telemetry): named, so that
    # no bytes sent to the fake server go unreported.
    others = [q for q in requests if q.get("method") == "POST" and q.get("flavour") != "chat"]
    return {"exit": code, "success": common.task_succeeded(repo), "chats": chats, "others": others}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agent", action="append", required=True)
    ap.add_argument("--ref", help="label the ratios divide by (default: the last agent)")
    ap.add_argument("--wip", action="store_true", help="the fixture has work in progress (step 0 runs)")
    ap.add_argument("--out", help="run folders (default: a new temp dir, kept)")
    a = ap.parse_args()
    agents = [common.Agent(s) for s in a.agent]
    ref = a.ref or agents[-1].label
    work = a.out or tempfile.mkdtemp(prefix="bench-bytes.")
    try:
        results = {ag.label: one_task(ag, work, a.wip) for ag in agents}
    finally:
        for ag in agents:  # the agents' HOMEs (Codex keeps its databases and skills there)
            common.rmtree(ag.home)
    print("request bytes over the 3-step task%s (%s):" % (" with work in progress" if a.wip else "", work))
    width = max(10, *(len(ag.label) for ag in agents))
    print("%-*s %8s %10s %10s %10s  %s" % (width, "agent", "requests", "total B", "tools B", "system B",
                                            "bytes per request"))
    for ag in agents:
        r = results[ag.label]
        chats = r["chats"]
        first = chats[0] if chats else {}
        status = "" if r["exit"] == 0 and r["success"] else "  (FAILED: exit %s, success %s)" % (
            r["exit"], r["success"])
        others = r["others"]
        if others:
            status += "  (and %d other POSTs, %d B: %s)" % (
                len(others), sum(q.get("bytes", 0) for q in others), " ".join(sorted({q["path"] for q in others})))
        print("%-*s %8d %10d %10s %10s  %s%s" % (
            width, ag.label, len(chats), sum(q.get("bytes", 0) for q in chats), first.get("tools_bytes", "-"),
            first.get("system_bytes", "-"), " ".join(str(q.get("bytes")) for q in chats), status))
    totals = {ag.label: sum(q.get("bytes", 0) for q in results[ag.label]["chats"]) for ag in agents}
    for ag in agents:
        if ag.label != ref and totals[ref]:
            print("%s/%s total bytes: %.2fx" % (ag.label, ref, totals[ag.label] / totals[ref]))
    first = agents[0].label
    for ag in agents[1:]:  # the first agent (the one under test) beside each of the others
        if ag.label != ref and totals[ag.label]:
            print("%s/%s total bytes: %.2fx" % (first, ag.label, totals[first] / totals[ag.label]))


if __name__ == "__main__":
    main()
