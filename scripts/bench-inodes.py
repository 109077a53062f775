#!/usr/bin/env python3
"""Issue 29: the kernel time of creating what a small session creates (20 directories, 60 files in them and 5
beside them: about the 85 inodes of a 3-step session's loose objects, fan-out directories, locks, journal and
checkout), on a quiet file system and then at intervals after writing and deleting N files beside it.

usage: scripts/bench-inodes.py [--files N] [--dir DIR] [--waits S,S,...]
                               (DIR: on the file system to test, default a temp dir; S: seconds after the load)
       scripts/bench-inodes.py --session --agent LABEL=ga:PATH [--agent ...] [--loose] [--rounds N] [--second]
                               [--show]

--session counts what a real session creates instead: the scripted 3-step task with the user's work in
progress (step 0 runs) in a fresh fixture, each round once untraced (wall and kernel time of the agent and its
children) and once under `strace -f` (the files and directories it creates: mkdir and openat with O_CREAT
that succeeded, the unlinks, the fsyncs and the packs renamed into place; one trace file a thread, so that no
call is split by another thread's and missed), plus the inodes still there afterwards in the fixture (its .git included);
`git fsck --strict` must stay silent. --loose adds LABEL-loose for each git-agent, the same binary with
GIT_AGENT_LOOSE_OBJECTS=1 (one loose file per object, the behaviour before packs), in the same rounds.
--fs-load N writes and deletes N files beside the fixture right before each untraced run (the host state after
a test suite), so the times are those of that state. --second measures the second session in the fixture instead
(the first one runs untraced just before, to the end: the common case of a repository that had sessions).
--show prints, for each agent, what its last traced session created, unlinked, renamed and synced, one call a
line, paths relative to the fixture.
These counts do not depend on the host's load; the times do.

On ext4 without a journal (`/sys/fs/ext4/<dev>/journal_task` says <none>), the inode allocator skips every free
inode that was deleted in the last 60 s, or 360 s while its inode-table block is not written back
(fs/ext4/ialloc.c, recently_deleted()), each skip a buffer-cache lookup: right after a mass deletion, every new
file or directory in the same block groups walks thousands of them. The check compares whole seconds and needs
the deletion to be *before* now, so the inodes freed in the current second are not skipped (each line says
whether it measured in the second the deletions ended in).
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "benchlib"))
import common  # noqa: E402

WAITS = "0,1.1,3,10,30,60,120,240,400"


def create(base, tag):
    d = os.path.join(base, "c-" + tag)
    os.makedirs(d)
    t0, w0 = os.times(), time.perf_counter()
    for i in range(20):
        sub = os.path.join(d, "%02x" % i)
        os.mkdir(sub)
        for j in range(3):
            fd = os.open(os.path.join(sub, "f%d" % j), os.O_CREAT | os.O_WRONLY, 0o644)
            os.write(fd, b"x" * 100)
            os.close(fd)
    for j in range(5):
        os.close(os.open(os.path.join(d, "g%d" % j), os.O_CREAT | os.O_WRONLY, 0o644))
    t1, w1 = os.times(), time.perf_counter()
    return (t1.system - t0.system) * 1000, (w1 - w0) * 1000


def load(base, n, settle=True):
    """Writes and deletes n files under base; with `settle`, returns in the clock's next second (see
    common.past_the_deletion_second()), else at once, with the time the deletions ended."""
    top = os.path.join(base, "load")
    dirs = [os.path.join(top, "d%02d" % i) for i in range(100)]
    for d in dirs:
        os.makedirs(d, exist_ok=True)
    for i in range(n):
        fd = os.open(os.path.join(dirs[i % 100], "f%06d" % i), os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"x" * 200)
        os.close(fd)
    shutil.rmtree(top)
    ended = time.time()
    if settle:
        common.past_the_deletion_second()
    return ended


def inodes(top):
    """The inode numbers of everything under top."""
    found = set()
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            try:
                found.add(os.lstat(os.path.join(root, name)).st_ino)
            except OSError:
                pass
    return found


CREATE = re.compile(r"^\d+ +(mkdir|mkdirat|openat|open|creat)\((.*)\) += (-?\d+)")
UNLINK = re.compile(r"^\d+ +(unlink|unlinkat|rmdir)\(.*\) += 0")
SHOWN = re.compile(r"^\d+ +(mkdir|mkdirat|openat|open|creat|unlink|unlinkat|rmdir|rename|renameat2?|fsync|fdatasync|"
                   r"linkat)\((.*)\) += (-?\d+)")
FSYNC = re.compile(r"^\d+ +(fsync|fdatasync)\(.*\) += 0")
PACK = re.compile(r"^\d+ +rename(at2?)?\(.*\.pack\"(, \d+)?\) += 0")


def trace_lines(prefix):
    """The calls of an `strace -ff -ttt -o PREFIX` run (one file a thread, so no call is split in two by
    another thread's), merged in time order as `TID call(...) = result` lines."""
    timed = []
    for name in glob.glob(prefix + ".*"):
        tid = name.rsplit(".", 1)[1]
        with open(name, errors="replace") as f:
            for line in f:
                stamp, _, call = line.partition(" ")
                try:
                    timed.append((float(stamp), "%s %s" % (tid, call)))
                except ValueError:
                    continue
    timed.sort(key=lambda t: t[0])
    return [line for _, line in timed]


def count_trace(path):
    """(created, of which directories, unlinked, synced, packs) from an `strace -ff -ttt -o` run."""
    created = dirs = unlinked = synced = packs = 0
    for line in trace_lines(path):
        m = CREATE.match(line)
        if m and int(m.group(3)) >= 0:
            if m.group(1).startswith("mkdir"):
                created += 1
                dirs += 1
            elif "O_CREAT" in m.group(2) or m.group(1) == "creat":
                created += 1
        elif UNLINK.match(line):
            unlinked += 1
        elif FSYNC.match(line):
            synced += 1
        elif PACK.match(line):
            packs += 1
    return created, dirs, unlinked, synced, packs


def shown_calls(path, repo):
    """The calls of an `strace -ff -ttt -o` run that create, remove, rename or sync, paths relative to `repo`."""
    out = []
    for line in trace_lines(path):
        m = SHOWN.match(line)
        if not m or int(m.group(3)) < 0:
            continue
        if m.group(1) in ("openat", "open") and "O_CREAT" not in m.group(2):
            continue
        out.append("%s(%s)" % (m.group(1), m.group(2).replace(repo + "/", "").replace(repo, ".")))
    return out


def run_task(agent, extra_env, repo, work):
    """One untraced session of the task in `repo`, to its end (the first of --second)."""
    srv = common.FakeServer(os.path.join(work, "requests-first.jsonl"))
    try:
        spec = agent.task_spec(repo, srv.port, common.PROMPT, work)
        spec["env"].update(extra_env)
        code = subprocess.call(spec["argv"], cwd=repo, env=spec["env"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        srv.stop()
    if code != 0:
        sys.exit("the first session of --second failed (exit %d)" % code)
    return srv.port


def same_server(repo, old_port, new_port):
    """Makes the window cache the first session left name the second one's server (a fake server gets a new
    port each run; a real one keeps its address, and a second session finds its window cached)."""
    path = os.path.join(repo, ".git", "agent", "windows.json")
    try:
        text = open(path).read()
    except OSError:
        return
    with open(path, "w") as f:
        f.write(text.replace("127.0.0.1:%d/" % old_port, "127.0.0.1:%d/" % new_port))


def one_session(agent, extra_env, work, traced, second=False):
    repo = os.path.join(work, "repo")
    common.make_fixture(repo, wip=True)
    first_port = run_task(agent, extra_env, repo, work) if second else None
    before = inodes(repo)
    srv = common.FakeServer(os.path.join(work, "requests.jsonl"))
    if first_port is not None:
        same_server(repo, first_port, srv.port)
    try:
        spec = agent.task_spec(repo, srv.port, common.PROMPT, work)
        spec["env"].update(extra_env)
        argv = spec["argv"]
        trace = os.path.join(work, "strace")
        if traced:
            argv = ["strace", "-ff", "-ttt", "-qq", "-e", "trace=open,openat,creat,mkdir,mkdirat,unlink,unlinkat,rmdir,"
                    "rename,renameat,renameat2,linkat,fsync,fdatasync", "-o", trace] + argv
        t0, w0 = os.times(), time.perf_counter()
        code = subprocess.call(argv, cwd=repo, env=spec["env"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t1, w1 = os.times(), time.perf_counter()
    finally:
        srv.stop()
    kept = len(inodes(repo) - before)
    fsck = subprocess.run(["git", "fsck", "--strict", "--no-progress"], cwd=repo, capture_output=True, text=True)
    ok = code == 0 and common.task_succeeded(repo) and fsck.returncode == 0 and not fsck.stdout.strip()
    result = {"ok": ok, "kept": kept, "wall": (w1 - w0) * 1000,
              "sys": (t1.children_system - t0.children_system) * 1000}
    if traced:
        result["created"], result["dirs"], result["unlinked"], result["synced"], result["packs"] = count_trace(
            trace)
        result["calls"] = shown_calls(trace, os.path.realpath(repo))
    common.rmtree(repo)
    return result


def sessions(a):
    variants = []
    for spec in a.agent:
        agent = common.Agent(spec)
        variants.append((agent.label, agent, {}))
        if a.loose and agent.kind == "ga":
            variants.append((agent.label + "-loose", agent, {"GIT_AGENT_LOOSE_OBJECTS": "1"}))
    rows = {label: [] for label, _, _ in variants}
    base = tempfile.mkdtemp(prefix="bench-inodes.", dir=a.dir)
    try:
        for r in range(a.rounds):
            for label, agent, env in variants:
                for traced in (False, True):
                    if a.fs_load and not traced:
                        load(base, a.fs_load)
                    work = tempfile.mkdtemp(prefix="run.", dir=base)
                    rows[label].append(one_session(agent, env, work, traced, a.second))
                    common.rmtree(work)
            print("round %d of %d done" % (r + 1, a.rounds), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    med = common.median
    print("%-16s %8s %8s %8s %8s %8s %8s %10s %10s %s" % (
        "agent", "created", "of dirs", "packs", "unlinked", "synced", "kept", "wall ms", "kernel ms", "intact"))
    for label, _, _ in variants:
        runs = rows[label]
        traced = [x for x in runs if "created" in x]
        plain = [x for x in runs if "created" not in x]
        print("%-16s %8.0f %8.0f %8.0f %8.0f %8.0f %8.0f %10.1f %10.0f %d of %d" % (
            label, med([x["created"] for x in traced]), med([x["dirs"] for x in traced]),
            med([x["packs"] for x in traced]),
            med([x["unlinked"] for x in traced]), med([x["synced"] for x in traced]), med([x["kept"] for x in runs]),
            med([x["wall"] for x in plain]), med([x["sys"] for x in plain]),
            sum(x["ok"] for x in runs), len(runs)))
    if a.show:
        for label, _, _ in variants:
            traced = [x for x in rows[label] if "calls" in x]
            print("\n%s, its last traced session:" % label)
            for call in traced[-1]["calls"]:
                print("  " + call)
    print("(medians of %d rounds, %s session in the fixture; created/packs/unlinked/synced from strace -ff, kept: new "
          "inodes left in the fixture; wall and kernel time untraced, kernel in 10 ms ticks; %s; load average %.1f)" % (
        a.rounds, "the second" if a.second else "the first", "each untraced run right after writing and deleting %d files" % a.fs_load if a.fs_load
        else "no file-system load", os.getloadavg()[0]))
    print("command: " + " ".join(sys.argv))
    print(common.host(a.dir or tempfile.gettempdir()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=100000)
    ap.add_argument("--dir")
    ap.add_argument("--waits", default=WAITS,
                    help="without --session: when to create, in seconds after the deletions ended")
    ap.add_argument("--session", action="store_true")
    ap.add_argument("--agent", action="append", default=[])
    ap.add_argument("--loose", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--second", action="store_true",
                    help="with --session: measure the second session in the fixture (the first runs untraced)")
    ap.add_argument("--show", action="store_true",
                    help="with --session: print what the last traced session created, renamed and synced")
    ap.add_argument("--fs-load", type=int, default=0,
                    help="with --session: write and delete this many files right before each untraced run")
    a = ap.parse_args()
    if a.session:
        if not a.agent:
            sys.exit("--session needs at least one --agent LABEL=ga:PATH (or nc:PATH)")
        sessions(a)
        return
    base = tempfile.mkdtemp(prefix="bench-inodes.", dir=a.dir)
    try:
        print("before the load: kernel %.0f ms, wall %.1f ms (85 inodes; kernel time in 10 ms ticks)" % create(
            base, "quiet"), flush=True)
        ended = load(base, a.files, settle=False)
        for k, wait in enumerate(float(w) for w in a.waits.split(",")):
            time.sleep(max(0.0, ended + wait - time.time()))
            second = "the same second" if int(time.time()) == int(ended) else "a later second"
            print("%5.1f s after writing and deleting %d files (%s): kernel %.0f ms, wall %.1f ms" % (
                (wait, a.files, second) + create(base, str(k))), flush=True)
        print(common.host(base))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print("command: " + " ".join(sys.argv))


if __name__ == "__main__":
    main()
