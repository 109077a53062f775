#!/usr/bin/env python3
"""Measure a process exactly: the agent's own peak memory apart from its children's, plus what GNU time says.

Each command runs as `/usr/bin/time -v -o FILE CMD`, the time process started as a ptrace'd child of this script
(PTRACE_TRACEME; options TRACEFORK on time only, so the command it forks is attached before it runs, and then
TRACEEXEC|TRACEEXIT|EXITKILL on the command, with no fork tracing: the command's own children run untraced; no
syscall tracing at all, so the only cost is a stop per signal the command receives). At the command's
PTRACE_EVENT_EXIT stop its memory map still exists, so /proc/<pid>/status gives its exact VmHWM (the peak RSS of
that process alone) and RssAnon/RssFile at exit.

Why not ru_maxrss from wait4 here: Linux folds the hiwater of the pre-exec image (a fork of this Python process,
~12 MB) into ru_maxrss; GNU time's fork is ~1 MB, so its "Maximum resident set size" is the usual figure
(the largest single process of the tree: the agent or one of its children, e.g. git).

Fields per run:
  wall_s          fork of /usr/bin/time to its reap (monotonic clock around time -v CMD)
  tree_cpu_s      user+sys of the command and every child it waited for (wait4 on time, microseconds)
  own_hwm_kb      VmHWM of the command's process at its exit (of its last image, should it exec)
  own_cpu_s       utime+stime of the command process alone (/proc/<pid>/stat at exit; 10 ms ticks)
  time_maxrss_kb  GNU time's "Maximum resident set size" (largest single process of the tree)
  time_user_s/time_sys_s/time_wall  GNU time's own figures (10 ms resolution)
  own_user_s/own_sys_s, own_minflt/own_majflt  the command process alone, from /proc/<pid>/stat at its exit
  tree_user_s/tree_sys_s, tree_minflt/tree_majflt, tree_nvcsw/tree_nivcsw  the same of the whole tree (wait4)

Library: run(specs) starts every spec at once (a fleet) and returns one result dict per spec.
CLI:     ptmeasure.py [--cwd DIR] [--stdin FILE] [--stdout FILE] [--stderr FILE] [--json] -- CMD...
"""
import ctypes
import json
import os
import signal
import sys
import tempfile
import time

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long

PTRACE_TRACEME = 0
PTRACE_CONT = 7
PTRACE_SETOPTIONS = 0x4200
PTRACE_GETEVENTMSG = 0x4201
O_TRACEFORK = 0x02
O_TRACEEXEC = 0x10
O_TRACEEXIT = 0x40
O_EXITKILL = 0x100000
EVENT_FORK = 1
EVENT_EXEC = 4
EVENT_EXIT = 6
EVENT_STOP = 128
WALL = getattr(os, "WALL", 0x40000000)
TICK = os.sysconf("SC_CLK_TCK")
TIME = os.environ.get("GNU_TIME", "/usr/bin/time")


def _ptrace(req, pid, data=0):
    r = libc.ptrace(req, pid, None, ctypes.c_void_p(data))
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, "ptrace(%d, %d): %s" % (req, pid, os.strerror(e)))
    return r


def _eventmsg(pid):
    v = ctypes.c_ulong(0)
    libc.ptrace(PTRACE_GETEVENTMSG, pid, None, ctypes.byref(v))
    return v.value


def _proc_exit(pid):
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmHWM", "VmRSS", "VmPeak", "RssAnon", "RssFile", "RssShmem"):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        out["own_cpu_s"] = (int(fields[11]) + int(fields[12])) / TICK
        out["own_user_s"] = int(fields[11]) / TICK
        out["own_sys_s"] = int(fields[12]) / TICK
        out["own_minflt"] = int(fields[7])
        out["own_majflt"] = int(fields[9])
    except (OSError, IndexError, ValueError):
        pass
    return out


def _parse_time(path):
    keys = {"User time (seconds)": "time_user_s", "System time (seconds)": "time_sys_s",
            "Maximum resident set size (kbytes)": "time_maxrss_kb",
            "Elapsed (wall clock) time (h:mm:ss or m:ss)": "time_wall"}
    out = {}
    try:
        for line in open(path):
            k, _, v = line.strip().rpartition(": ")
            if k in keys:
                v = v.strip()
                out[keys[k]] = v if keys[k] == "time_wall" else (int(v) if "kbytes" in k else float(v))
    except OSError:
        pass
    return out


def _spawn(spec, timefile):
    argv = [TIME, "-v", "-o", timefile, *spec["argv"]]
    stdin = os.open(spec.get("stdin") or "/dev/null", os.O_RDONLY)

    def sink(path, inherit):  # "-" = inherit this process's fd
        if path == "-":
            return os.dup(inherit)
        return os.open(path or "/dev/null", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    out = sink(spec.get("stdout"), 1)
    err = sink(spec.get("stderr"), 2)
    t0 = time.monotonic()
    t0_epoch = time.time()
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(stdin, 0)
            os.dup2(out, 1)
            os.dup2(err, 2)
            if spec.get("cwd"):
                os.chdir(spec["cwd"])
            os.setsid()  # no controlling terminal: every agent sees a non-interactive run
            libc.ptrace(PTRACE_TRACEME, 0, None, None)
            env = spec.get("env")
            os.execve(TIME, argv, env if env is not None else os.environ)
        except BaseException as e:  # noqa: BLE001 - report and die in the child
            os.write(2, ("ptmeasure: exec %s: %s\n" % (TIME, e)).encode())
        os._exit(127)
    for fd in (stdin, out, err):
        os.close(fd)
    return pid, t0, t0_epoch


def run(specs, timeout=600):
    """Start all specs at once; return a list of result dicts in the same order."""
    tmp = tempfile.mkdtemp(prefix="ptmeasure.")
    timers = {}   # pid of /usr/bin/time -> state
    cmds = {}     # pid of the timed command -> state of its timer
    early = set()  # command pids whose first stop came before time's fork event
    results = [None] * len(specs)
    for i, spec in enumerate(specs):
        tf = os.path.join(tmp, "time.%d" % i)
        pid, t0, te = _spawn(spec, tf)
        timers[pid] = {"i": i, "t0": t0, "start_epoch": te, "first": True, "timefile": tf, "exit": {},
                       "cmd": None}
    deadline = time.monotonic() + timeout
    killed = False
    while timers:
        if not killed and time.monotonic() > deadline:
            for pid in list(timers) + list(cmds):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            killed = True
        pid, status, ru = os.wait4(-1, WALL)
        if os.WIFSTOPPED(status):
            sig = os.WSTOPSIG(status)
            event = status >> 16
            if pid in timers:
                st = timers[pid]
                if st["first"] and sig == signal.SIGTRAP:  # time's exec after TRACEME
                    st["first"] = False
                    _ptrace(PTRACE_SETOPTIONS, pid, O_TRACEFORK | O_TRACEEXIT | O_EXITKILL)
                    _ptrace(PTRACE_CONT, pid, 0)
                elif event == EVENT_FORK:
                    child = _eventmsg(pid)
                    st["cmd"] = child
                    cmds[child] = st
                    _ptrace(PTRACE_SETOPTIONS, pid, O_EXITKILL)  # time forks once; trace no more
                    if child in early:  # its initial stop was already seen: set it up now
                        early.discard(child)
                        st["attached"] = True
                        _ptrace(PTRACE_SETOPTIONS, child, O_TRACEEXEC | O_TRACEEXIT | O_EXITKILL)
                        _ptrace(PTRACE_CONT, child, 0)
                    _ptrace(PTRACE_CONT, pid, 0)
                elif event:
                    _ptrace(PTRACE_CONT, pid, 0)
                else:
                    _ptrace(PTRACE_CONT, pid, sig)
                continue
            st = cmds.get(pid)
            if st is None:  # the new command's initial stop, before time's fork event
                early.add(pid)
                continue
            if not st.get("attached"):
                st["attached"] = True
                _ptrace(PTRACE_SETOPTIONS, pid, O_TRACEEXEC | O_TRACEEXIT | O_EXITKILL)
                _ptrace(PTRACE_CONT, pid, 0)
            elif event == EVENT_EXIT:
                st["exit"] = _proc_exit(pid)
                st["t_cmd_exit"] = time.monotonic()
                _ptrace(PTRACE_CONT, pid, 0)
            elif event or sig == signal.SIGTRAP:
                _ptrace(PTRACE_CONT, pid, 0)
            else:  # signal-delivery stop: pass the signal on
                _ptrace(PTRACE_CONT, pid, sig)
            continue
        if pid in cmds:  # the traced command is gone (its parent, time, reaps it too)
            if pid in early:
                early.discard(pid)
            cmds[pid]["cmd_status"] = status
            del cmds[pid]
            continue
        st = timers.pop(pid, None)
        if st is None:
            continue
        if pid in early:
            early.discard(pid)
        t1 = time.monotonic()
        e = st["exit"]
        spec = specs[st["i"]]
        tv = _parse_time(st["timefile"])
        cs = st.get("cmd_status")
        if cs is not None:
            code = os.WEXITSTATUS(cs) if os.WIFEXITED(cs) else -os.WTERMSIG(cs)
        else:
            code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
        r = {
            "argv0": os.path.basename(spec["argv"][0]),
            "exit": code,
            "wall_s": round(t1 - st["t0"], 6),
            "start_epoch": st["start_epoch"],
            "own_hwm_kb": e.get("VmHWM"),
            "own_rss_at_exit_kb": e.get("VmRSS"),
            "own_anon_kb": e.get("RssAnon"),
            "own_file_kb": e.get("RssFile"),
            "own_vmpeak_kb": e.get("VmPeak"),
            "own_cpu_s": e.get("own_cpu_s"),
            "tree_cpu_s": round(ru.ru_utime + ru.ru_stime, 6),
            "tree_user_s": round(ru.ru_utime, 6),
            "tree_sys_s": round(ru.ru_stime, 6),
            "own_user_s": e.get("own_user_s"),
            "own_sys_s": e.get("own_sys_s"),
            "own_minflt": e.get("own_minflt"),
            "own_majflt": e.get("own_majflt"),
            "tree_minflt": ru.ru_minflt,
            "tree_majflt": ru.ru_majflt,
            "tree_nvcsw": ru.ru_nvcsw,
            "tree_nivcsw": ru.ru_nivcsw,
        }
        r.update(tv)
        results[st["i"]] = r
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)
    return results


def main():
    a = sys.argv[1:]
    spec = {}
    as_json = False
    while a and a[0] != "--":
        k = a.pop(0)
        if k == "--json":
            as_json = True
        else:
            spec[k.lstrip("-")] = a.pop(0)
    if not a:
        sys.exit("usage: ptmeasure.py [--cwd D] [--stdin F] [--stdout F] [--stderr F] [--json] -- CMD...")
    spec["argv"] = a[1:]
    spec.setdefault("stdout", "-")
    spec.setdefault("stderr", "-")
    r = run([spec])[0]
    if as_json:
        print(json.dumps(r))
    else:
        for k, v in r.items():
            print("%s=%s" % (k, v), file=sys.stderr)
    sys.exit(0 if r["exit"] == 0 else 1)


if __name__ == "__main__":
    main()
