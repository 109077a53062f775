#!/usr/bin/env python3
"""Write a symbol-order file: the functions a git-agent session calls, in the order they are first called, which
scripts/dist.sh hands to the linker so that they are laid out together at the start of the code (issue 16: a
small session's peak memory is mostly code pages, mapped 64 KB around every page it touches). Most names carry a
hash of the exact rustc that built them, so the file is made for the build it is used with, never committed.

    scripts/dist.sh                      # the usual way: builds, runs this on that build, links again with it
    scripts/gen-text-order.py --binary B --map M --out F   # traces binary B (M: its linker map), writes F
    scripts/gen-text-order.py            # builds with `cargo rustc --release` and a map, writes the default F
    scripts/gen-text-order.py --check    # only reports how many names of F the build still has

How: a binary with the linker's map (`-Map`), then each scenario below runs that binary with a
breakpoint on every function (benchlib/hottext.py; threads and forked children included), against the scripted
fake server in a fresh repository (SCENARIOS: `--version`; `ask` with the shell task of scripts/bench-task.py, on
its fixture with the user's work in progress (twice: the first with its phase timings on, as the benchmark runs
it, and the model's side requests unanswered) and on a staged one;
`ask` with the named tools; `log`, `diff` and `undo` on that session; the shell task on a repository with a
commit, alone and four at once, as in scripts/bench-fleet.py). The file keeps the first-hit order across them.
Needs python3, git, cargo.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "benchlib"))
import common  # noqa: E402
import hottext  # noqa: E402

ORDER = os.path.join(ROOT, "target", "dist-link", "hot-text.order")
# Code every start runs before main that the tracer cannot see (each is one `.text` section of a C object, not a
# section per function): the C runtime's entry, crtbegin.o's frame registration, and the unwinder's
# registration of the frame tables when scripts/dist.sh links the unwinder in. Named, they move with their
# whole section to the front: left in place, they pull in two more 64 KB windows of code at every start (seen
# with /proc/self/pagemap after `--version`). Names the map lacks are left out.
STARTUP = ["_start", "frame_dummy", "register_tm_clones", "deregister_tm_clones", "__register_frame_info"]
TOOLS = [
    {"tool": "list_files", "args": {}, "shell": "ls"},
    {"tool": "read_file", "args": {"path": "greet.py"}, "shell": "cat greet.py"},
    {"tool": "search", "args": {"pattern": "hello"}, "shell": "grep -rn hello ."},
    {"tool": "edit_file", "args": {"path": "greet.py", "old_string": "hello world", "new_string": "hello agent"},
     "shell": "sed -i 's/hello world/hello agent/' greet.py"},
    {"tool": "write_file", "args": {"path": "notes.txt", "content": "greeting changed\n"},
     "shell": "echo 'greeting changed' > notes.txt"},
    {"tool": "run", "args": {"command": "sh test_greet.sh"}, "shell": "sh test_greet.sh"},
]


def build(work):
    mapfile = os.path.join(work, "git-agent.map")
    subprocess.run(["cargo", "rustc", "--quiet", "--release", "--bin", "git-agent", "--",
                    "-C", "link-arg=-Wl,-Map=" + mapfile], cwd=ROOT, check=True)
    return os.path.join(ROOT, "target", "release", "git-agent"), mapfile


def trace_parallel(n, argv, env, cwd, funcs, d):
    """n copies of argv at once, each traced by a forked worker of this script; their hits, merged in turn."""
    pids = []
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                got = hottext.trace(argv, env, cwd, funcs, stdout=os.path.join(d, "stdout.%d" % i),
                                    stderr=os.path.join(d, "stderr.%d" % i))
                with open(os.path.join(d, "hits.%d" % i), "w") as f:
                    json.dump(got, f)
                code = 0
            except BaseException:  # noqa: BLE001 - report and leave the worker
                traceback.print_exc()
            os._exit(code)
        pids.append(pid)
    runs = []
    for i, pid in enumerate(pids):
        _, status = os.waitpid(pid, 0)
        if status != 0:
            sys.exit("gen-text-order: tracing run %d of %s failed; see %s" % (i, argv[1], d))
        with open(os.path.join(d, "hits.%d" % i)) as f:
            runs.append(json.load(f))
    return [h for hits in runs for h in hits]


# (label, what, fixture, sessions at once, options); what: "version", "shell" (bench-task.py's shell task),
# "tools" (TOOLS by name) or a subcommand run in the previous ask's repository; fixture: "wip" (committed, then the
# user's work in progress, so step 0 runs: scripts/bench-task.py's fixture, first so that a small session's
# functions come first), "commit" or "staged" (nothing committed); options: "timings" (GIT_AGENT_TIMINGS set, as
# scripts/bench-task.py runs every session: the recorder's code is then part of each measured one), "late" (the
# fake server holds its answers to side requests, so the context-window probe is still unanswered when the
# session ends and is dropped: what a short session against a real endpoint does, and a traced run, slowed by
# its stops, never does). Without these two, every measured session of the ordered build faulted in five 64 KB
# windows of code outside the order (`perf record -e exceptions:page_fault_user`, against the linker's map).
SCENARIOS = [
    ("--version", "version", "staged", 1, ()),
    ("ask, work in progress", "shell", "wip", 1, ("timings", "late")),
    ("ask, work in progress", "shell", "wip", 1, ()),
    ("ask, shell task", "shell", "staged", 1, ()),
    ("ask, named tools", "tools", "staged", 1, ()),
    ("log", ["log"], "staged", 1, ()),
    ("diff", ["diff"], "staged", 1, ()),
    ("undo", ["undo"], "staged", 1, ()),
    ("ask on a commit", "shell", "commit", 1, ()),
    ("4 asks at once", "shell", "commit", 4, ()),
]
# How long the "late" server holds a side request: longer than a traced session takes.
LATE = 30


def trace_all(binary, funcs, work):
    agent = common.Agent("ga=ga:" + binary)
    hits, seen = [], set()
    repo = env = None
    for n, (label, what, fixture, sessions, options) in enumerate(SCENARIOS):
        d = os.path.join(work, "s%d" % n)
        os.makedirs(d)
        srv = None
        if what == "version":
            argv, cwd, env = [agent.path, "--version"], d, agent.env(9)
        elif what in ("shell", "tools"):
            repo = os.path.join(d, "repo")
            common.make_fixture(repo, commit=fixture == "commit", wip=fixture == "wip")
            srv = common.FakeServer(os.path.join(d, "requests.jsonl"), calls=TOOLS if what == "tools" else None,
                                    side_delay=LATE if "late" in options else 0)
            spec = agent.task_spec(repo, srv.port, common.PROMPT, d)
            argv, cwd, env = spec["argv"], repo, spec["env"]
            if "timings" in options:
                env["GIT_AGENT_TIMINGS"] = os.path.join(d, "timings.jsonl")
        else:
            argv, cwd = [agent.path, *what], repo
        try:
            got = trace_parallel(sessions, argv, env, cwd, funcs, d)
        finally:
            if srv:
                srv.stop()
        if srv and not common.task_succeeded(repo):
            sys.exit("gen-text-order: the %s did not succeed; see %s" % (label, d))
        new = [h for h in got if h not in seen]
        seen.update(new)
        hits += new
        print("%-18s %5d functions called, %4d new" % (label, len(set(got)), len(new)), file=sys.stderr)
    return hits


def listed(order):
    try:
        with open(order) as f:
            return [line.strip() for line in f if line.strip() and not line.startswith("#")]
    except FileNotFoundError:
        return []


def startup_symbols(mapfile):
    """The names of STARTUP that the map defines (a symbol line: address, address, size, alignment, name)."""
    found = set()
    with open(mapfile) as f:
        for line in f:
            fields = line.split()
            if len(fields) == 5 and fields[4] in STARTUP:
                found.add(fields[4])
    return [s for s in STARTUP if s in found]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="report how stale the order file is; write nothing")
    ap.add_argument("--binary", help="trace this release binary instead of building one (needs --map)")
    ap.add_argument("--map", help="the linker map (lld -Map) of --binary")
    ap.add_argument("--out", default=ORDER, help="the order file to write (default: %(default)s)")
    args = ap.parse_args()
    if bool(args.binary) != bool(args.map):
        ap.error("--binary and --map go together")
    order = os.path.abspath(args.out)
    work = tempfile.mkdtemp(prefix="gen-text-order.")
    try:
        binary, mapfile = (args.binary, args.map) if args.binary else build(work)
        funcs = hottext.parse_map(mapfile)
        startup = startup_symbols(mapfile)
        names = {n for _, _, n in funcs} | set(startup)
        old = listed(order)
        have = sum(1 for n in old if n in names)
        print("%s: %d names, %d of them in this build" % (order, len(old), have), file=sys.stderr)
        if args.check:
            return
        hits = trace_all(binary, funcs, work)
        size = {n: s for _, s, n in funcs}
        rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
        os.makedirs(os.path.dirname(order), exist_ok=True)
        with open(order, "w") as f:
            f.write("# The functions a git-agent session calls, first called first: the linker lays them out\n"
                    "# together (scripts/dist.sh). Written by scripts/gen-text-order.py with %s; do not edit.\n"
                    % rustc)
            f.writelines(s + "\n" for s in startup)
            f.writelines(h + "\n" for h in hits)
        print("wrote %s: %d functions, %d KB of the %d KB of code (dropped %d, added %d)"
              % (order, len(hits), sum(size[h] for h in hits) // 1024,
                 sum(size.values()) // 1024, len(set(old) - set(hits)), len(set(hits) - set(old))),
              file=sys.stderr)
        print(json.dumps({"functions": len(hits), "hot_bytes": sum(size[h] for h in hits)}))
    finally:
        common.rmtree(work)


if __name__ == "__main__":
    main()
