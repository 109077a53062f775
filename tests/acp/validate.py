#!/usr/bin/env python3
"""Checks every line an ACP agent wrote to stdout against ACP's v1 JSON Schema (draft 2020-12).

usage: validate.py SCHEMA CLIENT_LOG AGENT_LOG

AGENT_LOG holds the agent's stdout byte for byte; CLIENT_LOG what the client sent it (to know which request
a response answers). Every agent line must be a JSON-RPC 2.0 message: a request checked against
`AgentRequest` and its method's params, a notification against `AgentNotification` and its method's params,
a response against `AgentResponse` and the result (or `Error`) of the client request it answers. The
generic envelopes accept any result (`ExtResponse` is `{}`), which is why each message is also checked
against its own method's definition. Prints a JSON summary; exits 1 when anything fails.
"""

import json
import sys

from jsonschema import Draft202012Validator

REQUEST_PARAMS = {
    "session/request_permission": "RequestPermissionRequest",
    "fs/read_text_file": "ReadTextFileRequest",
    "fs/write_text_file": "WriteTextFileRequest",
    "terminal/create": "CreateTerminalRequest",
}
NOTIFICATION_PARAMS = {"session/update": "SessionNotification"}
RESULTS = {
    "initialize": "InitializeResponse",
    "authenticate": "AuthenticateResponse",
    "session/new": "NewSessionResponse",
    "session/load": "LoadSessionResponse",
    "session/list": "ListSessionsResponse",
    "session/resume": "ResumeSessionResponse",
    "session/close": "CloseSessionResponse",
    "session/prompt": "PromptResponse",
}


def main():
    schema_path, client_log, agent_log = sys.argv[1:4]
    with open(schema_path, encoding="utf-8") as f:
        defs = json.load(f)["$defs"]
    validators = {}

    def check(name, value, where, problems):
        if name not in validators:
            validators[name] = Draft202012Validator(
                {"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": defs, "$ref": f"#/$defs/{name}"}
            )
        for error in validators[name].iter_errors(value):
            path = "/".join(str(p) for p in error.absolute_path)
            problems.append(f"{where}: not a valid {name} at /{path}: {error.message[:300]}")

    methods = {}
    with open(client_log, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and "method" in message and "id" in message:
                methods[json.dumps(message["id"])] = message["method"]

    problems = []
    counts = {}
    lines = 0
    with open(agent_log, "rb") as f:
        data = f.read()
    if data and not data.endswith(b"\n"):
        problems.append("the last line does not end with a newline")
    for n, raw in enumerate(data.splitlines(), 1):
        lines += 1
        where = f"line {n}"
        try:
            message = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            problems.append(f"{where}: not a JSON message ({e}): {raw[:200]!r}")
            continue
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            problems.append(f"{where}: not JSON-RPC 2.0: {raw[:200]!r}")
            continue
        method = message.get("method")
        if method is not None and "id" in message:
            kind = f"request {method}"
            check("AgentRequest", message, where, problems)
            if method not in REQUEST_PARAMS:
                problems.append(f"{where}: {method} is not a request an agent sends")
            else:
                check(REQUEST_PARAMS[method], message.get("params"), where, problems)
        elif method is not None:
            kind = f"notification {method}"
            check("AgentNotification", message, where, problems)
            if method in NOTIFICATION_PARAMS:
                check(NOTIFICATION_PARAMS[method], message.get("params"), where, problems)
                update = (message.get("params") or {}).get("update") or {}
                kind = f"{kind} {update.get('sessionUpdate')}"
            elif not method.startswith("_"):
                problems.append(f"{where}: {method} is not a notification an agent sends")
        elif "id" in message:
            check("AgentResponse", message, where, problems)
            answered = methods.get(json.dumps(message["id"]))
            if message["id"] is None and "error" in message:
                # The answer to a line that could not be read as a request (JSON-RPC gives it id null).
                kind = "error (unreadable request)"
                check("Error", message["error"], where, problems)
            elif answered is None:
                problems.append(f"{where}: a response to id {message['id']!r}, which the client never sent")
                kind = "response ?"
            elif "error" in message:
                kind = f"error {answered}"
                check("Error", message["error"], where, problems)
            elif answered in RESULTS:
                kind = f"response {answered}"
                check(RESULTS[answered], message.get("result"), where, problems)
            else:
                kind = f"response {answered}"
        else:
            problems.append(f"{where}: neither request, notification nor response")
            continue
        counts[kind] = counts.get(kind, 0) + 1
    print(json.dumps({"lines": lines, "counts": counts, "problems": problems[:30]}, indent=1, sort_keys=True))
    sys.exit(1 if problems or lines == 0 else 0)


if __name__ == "__main__":
    main()
