#!/usr/bin/env python3
"""What `git agent chat` costs on a terminal, each figure next to a reference measured in the same run.

- keypress-to-echo latency: one key written to the chat's pty until its redraw comes back (median and p95 of
  N keys), against bash's readline in the same kind of pty;
- idle CPU over 10 s at the prompt (all threads, from /proc/<pid>/task/*/schedstat), against an idle bash;
- Ctrl-C during a `run` of `sleep 30` until the prompt is back, against Ctrl-C of `sleep 30` in bash.

The chat runs in a throwaway repository against a tiny scripted OpenAI-compatible server (below) with a
cleared environment. Usage: scripts/bench-chat.py [--bin target/release/git-agent] [--keys 200] [--idle 10]
(build first: cargo build --release).
"""

import argparse
import fcntl
import http.server
import json
import os
import pty
import select
import shutil
import signal
import statistics
import struct
import subprocess
import tempfile
import termios
import threading
import time

ROWS, COLS = 30, 100


class Model(http.server.BaseHTTPRequestHandler):
    """Replies in order: a tool call running `sleep 30`, then text, forever."""

    count = 0
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        self.rfile.read(length)
        Model.count += 1
        if Model.count == 1:
            delta = {"role": "assistant", "content": None, "tool_calls": [{"index": 0, "id": "call_1",
                     "type": "function", "function": {"name": "run",
                                                      "arguments": json.dumps({"command": "sleep 30"})}}]}
            finish = "tool_calls"
        else:
            delta = {"role": "assistant", "content": "Ready."}
            finish = "stop"
        events = [
            {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}},
        ]
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Pty:
    """A program in a pseudo-terminal of ROWS x COLS, its output collected."""

    def __init__(self, argv, cwd, env):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.chdir(cwd)
            os.execvpe(argv[0], argv, env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.out = b""

    def read_until(self, needle, timeout=60.0, start=0):
        """Reads until `needle` appears after offset `start`; returns the time it was seen."""
        deadline = time.monotonic() + timeout
        while needle not in self.out[start:]:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {needle!r} in {self.out[-400:]!r}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    self.out += os.read(self.fd, 65536)
                except OSError:
                    break
        return time.monotonic()

    def drain(self, quiet=0.3):
        while select.select([self.fd], [], [], quiet)[0]:
            try:
                self.out += os.read(self.fd, 65536)
            except OSError:
                return

    def write(self, data):
        os.write(self.fd, data)

    def cpu_ns(self):
        """CPU time of all the process's threads, in ns."""
        total = 0
        for task in os.listdir(f"/proc/{self.pid}/task"):
            with open(f"/proc/{self.pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total

    def kill(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except OSError:
            pass


def echo_latency(p, keys):
    """Median and p95 (ms) from writing one key to seeing it echoed, then erased with Backspace."""
    times = []
    for _ in range(keys):
        p.drain(0.02)
        start = len(p.out)
        t0 = time.monotonic()
        p.write(b"q")
        t1 = p.read_until(b"q", start=start)
        times.append((t1 - t0) * 1000)
        p.write(b"\x7f")
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def idle_cpu(p, seconds):
    p.drain()
    before = p.cpu_ns()
    time.sleep(seconds)
    return (p.cpu_ns() - before) / 1e6


def sleeps_under(root):
    """`sleep` processes working in the benchmark's directory (the chat's, not bash's: that one was killed)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            comm = open(f"/proc/{pid}/comm").read().strip()
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if comm == "sleep" and cwd.startswith(os.path.join(root, "repo", ".git")):
            found.append(pid)
    return found


def ratio(a, b):
    return f"{a / b:.2f}" if b > 0 else "n/a (reference 0)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/git-agent")
    ap.add_argument("--keys", type=int, default=200)
    ap.add_argument("--idle", type=float, default=10.0)
    args = ap.parse_args()
    binary = os.path.abspath(args.bin)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    root = tempfile.mkdtemp(prefix="bench-chat-")
    repo = os.path.join(root, "repo")
    home = os.path.join(root, "home")
    os.makedirs(repo)
    os.makedirs(home)
    env = {
        "PATH": os.environ["PATH"], "HOME": home, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "B", "GIT_AUTHOR_EMAIL": "b@example.com", "GIT_COMMITTER_NAME": "B",
        "GIT_COMMITTER_EMAIL": "b@example.com", "TERM": "xterm-256color",
        "OPENAI_BASE_URL": f"http://127.0.0.1:{server.server_address[1]}/v1", "OPENAI_API_KEY": "bench-key",
        "GIT_AGENT_MODEL": "openai/bench", "GIT_AGENT_CONTEXT_WINDOW": "32768", "GIT_AGENT_PRUNE": "0",
    }
    run = lambda *a: subprocess.run(a, cwd=repo, env=env, check=True, capture_output=True)
    run("git", "init", "-q", "-b", "main")
    with open(os.path.join(repo, "README.md"), "w") as f:
        f.write("# bench\n")
    run("git", "add", "-A")
    run("git", "commit", "-q", "-m", "init")

    bash_env = dict(env, PS1="$ ")
    chat = Pty([binary, "chat", "--sandbox", "off"], repo, env)
    bash = Pty(["bash", "--norc", "--noprofile", "-i"], repo, bash_env)
    try:
        chat.read_until(b"ask anything")
        bash.read_until(b"$ ")

        c_med, c_p95 = echo_latency(chat, args.keys)
        b_med, b_p95 = echo_latency(bash, args.keys)
        print(f"keypress to echo, chat:      median {c_med:.2f} ms, p95 {c_p95:.2f} ms ({args.keys} keys)")
        print(f"keypress to echo, bash:      median {b_med:.2f} ms, p95 {b_p95:.2f} ms (reference)")
        print(f"  ratio chat/bash (median):  {ratio(c_med, b_med)}")

        c_cpu = idle_cpu(chat, args.idle)
        b_cpu = idle_cpu(bash, args.idle)
        print(f"idle CPU over {args.idle:.0f} s, chat:   {c_cpu:.3f} ms")
        print(f"idle CPU over {args.idle:.0f} s, bash:   {b_cpu:.3f} ms (reference)")
        print(f"  ratio chat/bash:           {ratio(c_cpu, b_cpu)}")

        # Ctrl-C during `sleep 30`: until the idle prompt is drawn again.
        chat.drain()
        start = len(chat.out)
        chat.write(b"wait\r")
        chat.read_until(b"run sleep 30", start=start)
        time.sleep(0.5)
        start = len(chat.out)
        t0 = time.monotonic()
        chat.write(b"\x03")
        c_cancel = (chat.read_until(b"ask anything", start=start) - t0) * 1000
        bash.drain()
        bash.write(b"sleep 30\r")
        time.sleep(0.5)
        bash.drain()
        start = len(bash.out)
        t0 = time.monotonic()
        bash.write(b"\x03")
        b_cancel = (bash.read_until(b"$ ", start=start) - t0) * 1000
        print(f"Ctrl-C to prompt, chat:      {c_cancel:.1f} ms (a run of sleep 30, its process group killed)")
        print(f"Ctrl-C to prompt, bash:      {b_cancel:.1f} ms (reference: sleep 30 in bash)")
        print(f"  ratio chat/bash:           {ratio(c_cancel, b_cancel)}")
        print(f"sleep processes of the chat left: {len(sleeps_under(root))}")
    finally:
        chat.kill()
        bash.kill()
        server.shutdown()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
