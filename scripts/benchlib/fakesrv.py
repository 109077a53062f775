#!/usr/bin/env python3
"""A scripted fake model for the scripts/bench-*.py benchmarks (Python 3 stdlib only): OpenAI Chat Completions
(`POST /v1/chat/completions`) and the Responses API (`POST /v1/responses`, what Codex speaks: its custom
providers no longer take `wire_api = "chat"`), streamed or not, plus harmless answers for side requests
(`GET /v1/models` lists one model, anything else gets `{}`), with or without the /v1 prefix.

It plays the same script to every agent, stepping by the number of tool results already in the conversation
(`tool` messages, or `function_call_output` and `custom_tool_call_output` items):
  default         shell `cat greet.py`, `sed -i 's/hello world/hello agent/' greet.py`, `sh test_greet.sh`,
                  then the text "done"
  --script JSON   the shell commands to play instead (a list of strings)
  --calls JSON    named tools instead: a list of {"tool": NAME, "args": {...}, "shell": CMD}; a step is played
                  as NAME when the request offers that tool, else as its "shell" command through the shell tool
The shell tool is the offered tool with a known shell name (`run`, `bash`, `shell`, ...) or, failing that, the
first one with a `command`/`cmd` parameter; without one, a shell step goes through Codex's code mode (its
JavaScript `exec` tool calling `tools.exec_command`).

Every request is logged as one JSON line: method, path, `flavour` ("chat", "models" or "other"; a Responses
request is a "chat" with `wire` "responses"), the step played and `t`, the absolute time.time() it arrived (for
"time to the first model request"); a chat request also its size: `bytes` (the body), `tools_bytes` (its tool
list as compact JSON, with Codex's `additional_tools`) and `system_bytes` (the system prompt's text: for the Responses API `instructions` and
the `system` and `developer` messages), and `tool_names`, the names of the tools it offered. `--bodies FILE`
keeps the bodies themselves. The listen
backlog is 1024: the stdlib's 5 drops SYNs when a fleet of 250 agents connects at once.

`--side-delay SECONDS` holds the answer to every side request that long (git-agent's context-window probe is then
still unanswered when a short session ends, as it often is against a real endpoint).

usage: fakesrv.py --log FILE --port-file FILE [--script JSON | --calls JSON] [--bodies FILE] [--side-delay S]
"""
import argparse
import itertools
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCRIPT = ["cat greet.py", "sed -i 's/hello world/hello agent/' greet.py", "sh test_greet.sh"]
SHELL_NAMES = ["run", "bash", "Bash", "shell", "exec_command", "shell_command", "run_shell_command",
               "execute_command", "run_command", "terminal", "execute", "exec"]
MODEL = "fake-model"
_ids = itertools.count(1)
_lock = threading.Lock()


def shell_tool(tools):
    named = {t["name"]: t for t in tools}
    for name in SHELL_NAMES:
        if name in named:
            return named[name]
    return next((t for t in tools if {"command", "cmd"} & set(t["params"])), None)


def shell_args(tool, cmd):
    """The shell tool's arguments: the command under its parameter name, required others filled in."""
    key = "cmd" if "cmd" in tool["params"] and "command" not in tool["params"] else "command"
    args = {key: ["sh", "-c", cmd] if tool["params"].get(key, {}).get("type") == "array" else cmd}
    for name in tool["required"]:
        if name not in args:
            kind = tool["params"].get(name, {}).get("type")
            args[name] = {"integer": 120000, "number": 120000, "boolean": False, "array": [],
                          "object": {}}.get(kind, "bench")
    return args


def offered_tools(body):
    """The request's tools as {name, kind, description, params, required}: Chat Completions nests each under
    `function`, the Responses API does not, has tools without parameters (`custom` ones, `web_search`, ...),
    groups some in namespaces and may offer more in an `additional_tools` input item."""
    found = []

    def walk(tools):
        for t in tools or []:
            if not isinstance(t, dict):
                continue
            if t.get("type") == "namespace":
                walk(t.get("tools"))
                continue
            f = t.get("function") or t
            schema = f.get("parameters") or {}
            found.append({"name": f.get("name") or t.get("type"), "kind": t.get("type"),
                          "description": f.get("description") or "", "params": schema.get("properties") or {},
                          "required": schema.get("required") or []})

    walk(body.get("tools"))
    for item in body.get("input") if isinstance(body.get("input"), list) else []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            walk(item.get("tools"))
    return found


def tools_bytes(body):
    """The tool list as compact JSON: `tools`, and the tools of `additional_tools` input items."""
    extra = [i.get("tools") for i in (body.get("input") if isinstance(body.get("input"), list) else [])
             if isinstance(i, dict) and i.get("type") == "additional_tools"]
    compact = (",", ":")
    return len(json.dumps(body.get("tools") or [], separators=compact)) + sum(
        len(json.dumps(t, separators=compact)) for t in extra)


def code_tool(tools):
    """Codex's code mode: one `custom` tool that runs JavaScript calling the other tools as `tools.<name>(...)`
    (what Codex offers its newest default models instead of the shell tool itself)."""
    return next((t for t in tools if t["kind"] == "custom" and t["description"].startswith("Run JavaScript")),
                None)


def code_mode_js(cmd):
    return "const r = await tools.exec_command({cmd: %s});\ntext(r);\n" % json.dumps(cmd)


def tool_results(body):
    """How many tool results the conversation holds already."""
    if "input" in body:
        items = body["input"] if isinstance(body["input"], list) else []
        return sum(1 for i in items if isinstance(i, dict)
                   and i.get("type") in ("function_call_output", "custom_tool_call_output"))
    return sum(1 for m in body.get("messages") or [] if m.get("role") == "tool")


def system_text_bytes(body):
    """The bytes of the system prompt: `system` messages, and for the Responses API `instructions` and
    `developer` messages too."""
    def text(content):
        if isinstance(content, str):
            return len(content)
        if isinstance(content, list):  # Responses content parts: [{"type": "input_text", "text": ...}]
            return sum(len(p.get("text") or "") if isinstance(p, dict) else 0 for p in content)
        return len(json.dumps(content))
    items = body.get("messages") or (body.get("input") if isinstance(body.get("input"), list) else [])
    n = len(body.get("instructions") or "")
    return n + sum(text(m.get("content")) for m in items
                   if isinstance(m, dict) and m.get("role") in ("system", "developer"))


def decide(body, steps):
    """('tool', name, args) or ('text', text) for this request, and the step played."""
    tools = offered_tools(body)
    n = tool_results(body)
    if n < len(steps):
        step = steps[n]
        if any(t["name"] == step.get("tool") for t in tools):
            return ("tool", step["tool"], step["args"]), n
        shell = shell_tool([t for t in tools if t["kind"] != "custom"])
        if shell is not None and step.get("shell"):
            return ("tool", shell["name"], shell_args(shell, step["shell"])), n
        code = code_tool(tools)
        if code is not None and step.get("shell"):
            return ("custom", code["name"], code_mode_js(step["shell"])), n
    return ("text", "done"), "final"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _log(self, rec):
        rec["t"] = round(time.time(), 4)
        with _lock, open(self.server.log_path, "a") as f:
            f.write(json.dumps(rec) + "\n")

    def _json(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        models = self.path.split("?")[0].rstrip("/").endswith("/models")
        self._log({"method": "GET", "path": self.path, "flavour": "models" if models else "other"})
        time.sleep(self.server.side_delay)
        if models:
            m = {"id": MODEL, "object": "model", "created": 1700000000, "owned_by": "bench"}
            return self._json({"object": "list", "data": [m]})
        return self._json({})

    def _body(self):
        """The request's body, sent with a length or in chunks."""
        if "chunked" not in (self.headers.get("Transfer-Encoding") or "").lower():
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        parts = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline().strip():  # trailers, up to the blank line
                    pass
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()

    def do_POST(self):
        raw = self._body()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        path = self.path.split("?")[0]
        wire = "chat" if path.endswith("/chat/completions") else "responses" if path.endswith("/responses") else None
        if not isinstance(body, dict) or wire is None:
            self._log({"method": "POST", "path": self.path, "flavour": "other", "bytes": len(raw),
                       "encoding": self.headers.get("Content-Encoding")})
            time.sleep(self.server.side_delay)
            return self._json({})
        action, step = decide(body, self.server.steps)
        self._log({"method": "POST", "path": self.path, "flavour": "chat", "wire": wire, "step": step,
                   "stream": bool(body.get("stream")), "bytes": len(raw),
                   "tools_bytes": tools_bytes(body),
                   "system_bytes": system_text_bytes(body),
                   "tool_names": [t["name"] for t in offered_tools(body)]})
        if self.server.bodies:
            with _lock, open(self.server.bodies, "ab") as f:
                f.write(raw + b"\n")
        if wire == "responses":
            return self._reply_responses(body, action)
        self._reply(body, action)

    def _reply_responses(self, body, action):
        """The Responses API's answer: one output item (a function call or an assistant message), streamed as
        `response.created`, the item's events and `response.completed` (Codex waits for that one)."""
        rid, model = "resp_%d" % next(_ids), body.get("model") or MODEL
        usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 20,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 120}
        if action[0] == "tool":
            item = {"type": "function_call", "id": "fc_%d" % next(_ids), "call_id": "call_%d" % next(_ids),
                    "name": action[1], "arguments": json.dumps(action[2]), "status": "completed"}
        elif action[0] == "custom":
            item = {"type": "custom_tool_call", "id": "ctc_%d" % next(_ids), "call_id": "call_%d" % next(_ids),
                    "name": action[1], "input": action[2], "status": "completed"}
        else:
            item = {"type": "message", "id": "msg_%d" % next(_ids), "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": action[1], "annotations": []}]}
        response = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model,
                    "status": "completed", "output": [item], "usage": usage}
        if not body.get("stream"):
            return self._json(response)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def send(kind, **fields):
            data = json.dumps(dict(type=kind, **fields))
            self.wfile.write(("event: %s\ndata: %s\n\n" % (kind, data)).encode())

        send("response.created", response=dict(response, status="in_progress", output=[], usage=None))
        if action[0] == "text":
            send("response.output_item.added", output_index=0,
                 item=dict(item, status="in_progress", content=[]))
            send("response.output_text.delta", item_id=item["id"], output_index=0, content_index=0,
                 delta=action[1])
        send("response.output_item.done", output_index=0, item=item)
        send("response.completed", response=response)
        self.wfile.flush()

    def _reply(self, body, action):
        cid, created, model = "chatcmpl_%d" % next(_ids), int(time.time()), body.get("model") or MODEL
        usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        if action[0] == "tool":
            call = {"id": "call_%d" % next(_ids), "type": "function",
                    "function": {"name": action[1], "arguments": json.dumps(action[2])}}
            msg, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        else:
            msg, finish = {"role": "assistant", "content": action[1]}, "stop"
        if not body.get("stream"):
            return self._json({"id": cid, "object": "chat.completion", "created": created, "model": model,
                               "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                               "usage": usage})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def send(choices, **extra):
            chunk = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                     "choices": choices, **extra}
            self.wfile.write(("data: %s\n\n" % json.dumps(chunk)).encode())

        if action[0] == "tool":
            call = msg["tool_calls"][0]
            args = call["function"]["arguments"]
            head = {"index": 0, "id": call["id"], "type": "function",
                    "function": {"name": action[1], "arguments": ""}}
            send([{"index": 0, "delta": {"role": "assistant", "content": None, "tool_calls": [head]},
                   "finish_reason": None}])
            half = len(args) // 2  # two pieces: the agent's stream parser must join them
            for piece in (args[:half], args[half:]):
                send([{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]},
                       "finish_reason": None}])
        else:
            send([{"index": 0, "delta": {"role": "assistant", "content": msg["content"]}, "finish_reason": None}])
        send([{"index": 0, "delta": {}, "finish_reason": finish}])
        if (body.get("stream_options") or {}).get("include_usage"):
            send([], usage=usage)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class Server(ThreadingHTTPServer):
    request_queue_size = 1024
    daemon_threads = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--script", help="JSON list of shell commands, one per step")
    ap.add_argument("--calls", help="JSON list of named tool calls, one per step")
    ap.add_argument("--bodies", help="append every chat request's raw body to this file, one a line")
    ap.add_argument("--side-delay", type=float, default=0.0,
                    help="seconds to wait before answering a side request (anything but a chat request)")
    a = ap.parse_args()
    srv = Server(("127.0.0.1", 0), Handler)
    srv.log_path = a.log
    srv.bodies = a.bodies
    srv.side_delay = a.side_delay
    if a.calls:
        srv.steps = json.loads(a.calls)
    else:
        srv.steps = [{"shell": cmd} for cmd in (json.loads(a.script) if a.script else SCRIPT)]
    open(a.log, "a").close()
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.replace(tmp, a.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
