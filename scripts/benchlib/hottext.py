#!/usr/bin/env python3
"""Which functions of a binary a run calls, exactly: a breakpoint (int3) on the entry of every function, taken out
at its first hit. Used by scripts/gen-text-order.py to write the link order of src/hot-text.order.

The function list comes from the linker's map of that very binary (lld's `-Map`, one input section per function:
`.text.<mangled name>`), so a stripped build can be traced. The command runs under ptrace from its exec on; every
thread (TRACECLONE) and every forked child (TRACEFORK/VFORK, until it execs another program) is traced, since a
child inherits the parent's patched text. A hit stops the thread with SIGTRAP at entry+1: the original byte is
written back through /proc/<tid>/mem (for that address space only), the instruction pointer is moved back by one,
and the thread goes on. Each function therefore costs one stop, the first time it is called; a run that calls
8,000 functions is about a second slower, nothing else changes.

Library: parse_map(path) -> [(addr, size, name)];  trace(argv, env, cwd, funcs, ...) -> [name] in first-hit order.
"""
import ctypes
import os
import re
import signal

from ptmeasure import (EVENT_EXEC, O_EXITKILL, O_TRACEEXEC, O_TRACEFORK, PTRACE_CONT, PTRACE_SETOPTIONS,
                       PTRACE_TRACEME, WALL, libc)

PTRACE_DETACH = 17
PTRACE_GETREGS = 12
PTRACE_SETREGS = 13
O_TRACEVFORK = 0x04
O_TRACECLONE = 0x08
OPTIONS = O_TRACEFORK | O_TRACEVFORK | O_TRACECLONE | O_TRACEEXEC | O_EXITKILL
RIP = 16  # index of rip in struct user_regs_struct (x86-64)


class Regs(ctypes.Structure):
    _fields_ = [("r", ctypes.c_ulonglong * 27)]


def _ptrace(req, pid, data=None):
    r = libc.ptrace(req, pid, None, data)
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, "ptrace(%d, %d): %s" % (req, pid, os.strerror(e)))
    return r


SECTION = re.compile(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+\s+\S.*:\(\.text\.(?:unlikely\.|hot\.|startup\.|exit\.|split\.)?(\S+)\)$")


def parse_map(path):
    """Function sections of an lld map file: (start address, size, mangled name), sized ones only."""
    out = []
    with open(path) as f:
        for line in f:
            if ":(.text." not in line:
                continue
            m = SECTION.match(line)
            if m and int(m.group(2), 16) > 0:
                out.append((int(m.group(1), 16), int(m.group(2), 16), m.group(3)))
    return out


def trace(argv, env, cwd, funcs, stdin="/dev/null", stdout="/dev/null", stderr="/dev/null"):
    """Run argv to its end with a breakpoint on every function of `funcs`; the names hit, first hit first."""
    by_addr = {a: n for a, _, n in funcs}
    fds = [os.open(stdin, os.O_RDONLY),
           os.open(stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
           os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)]
    pid = os.fork()
    if pid == 0:
        try:
            for i, fd in enumerate(fds):
                os.dup2(fd, i)
            os.chdir(cwd)
            libc.ptrace(PTRACE_TRACEME, 0, None, None)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    for fd in fds:
        os.close(fd)
    _, status = os.waitpid(pid, 0)  # the exec stop
    if not os.WIFSTOPPED(status):
        raise RuntimeError("%s did not start under ptrace" % argv[0])
    _ptrace(PTRACE_SETOPTIONS, pid, ctypes.c_void_p(OPTIONS))
    original = _plant(pid, by_addr)
    _ptrace(PTRACE_CONT, pid)
    hits, seen = [], set()
    live = {pid}
    regs = Regs()
    while live:
        try:
            tid, status = os.waitpid(-1, WALL)
        except ChildProcessError:
            break
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            live.discard(tid)
            continue
        live.add(tid)
        sig, event = os.WSTOPSIG(status), status >> 16
        if event == EVENT_EXEC and tid != pid:
            live.discard(tid)  # another program now: nothing of ours to trace
            libc.ptrace(PTRACE_DETACH, tid, None, None)
            continue
        if event or sig == signal.SIGSTOP:
            libc.ptrace(PTRACE_CONT, tid, None, None)
            continue
        if sig == signal.SIGTRAP:
            _ptrace(PTRACE_GETREGS, tid, ctypes.byref(regs))
            addr = regs.r[RIP] - 1
            if addr in original:
                with open("/proc/%d/mem" % tid, "r+b", buffering=0) as mem:
                    mem.seek(addr)
                    mem.write(original[addr])
                regs.r[RIP] = addr
                _ptrace(PTRACE_SETREGS, tid, ctypes.byref(regs))
                if addr not in seen:
                    seen.add(addr)
                    hits.append(by_addr[addr])
                libc.ptrace(PTRACE_CONT, tid, None, None)
                continue
        libc.ptrace(PTRACE_CONT, tid, None, ctypes.c_void_p(sig))
    return hits


def _plant(pid, by_addr):
    """An int3 on every function entry, written in one go over the text; returns the bytes it replaced."""
    lo, hi = min(by_addr), max(by_addr) + 1
    with open("/proc/%d/mem" % pid, "r+b", buffering=0) as mem:
        mem.seek(lo)
        text = bytearray(mem.read(hi - lo))
        original = {}
        for a in by_addr:
            original[a] = bytes(text[a - lo:a - lo + 1])
            text[a - lo] = 0xCC
        mem.seek(lo)
        mem.write(text)
    return original
