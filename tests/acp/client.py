#!/usr/bin/env python3
"""Drives `git agent acp` with the Python SDK's client (PyPI `agent-client-protocol`), a second ACP client
besides acpx.

usage: client.py REPO FIRST_PROMPT SECOND_PROMPT

One agent process: initialize, session/new, a prompt, session/list. A second process: session/load of the
same session (the stored conversation comes back as updates before the answer), then a prompt that
continues it. Prints what it saw as one JSON object; the Rust test asserts on it. The SDK parses every
message into its pydantic models, so a malformed one fails here too.
"""

import asyncio
import json
import os
import sys

import acp
from acp.schema import ClientCapabilities, Implementation


class Recorder:
    """The client side: records updates, allows what it is asked about."""
    # The SDK passes the agent only a trimmed environment unless told otherwise; the test's is hermetic.

    def __init__(self):
        self.updates = []
        self.permissions = []

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def request_permission(self, options, session_id, tool_call, **kwargs):
        self.permissions.append(tool_call.tool_call_id)
        allow = next(o for o in options if o.kind == "allow_once")
        return acp.RequestPermissionResponse(
            outcome=acp.schema.AllowedOutcome(outcome="selected", option_id=allow.option_id)
        )

    def on_connect(self, conn):
        pass


def kinds(updates):
    return [u.get("sessionUpdate") for u in updates]



async def main():
    repo, first, second = sys.argv[1:4]
    out = {}
    one = Recorder()
    async with acp.spawn_agent_process(one, "git", "agent", "acp", cwd=repo, env=dict(os.environ)) as (conn, _process):
        init = await conn.initialize(
            protocol_version=1,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="python-acp-test", version="1"),
        )
        caps = init.agent_capabilities
        out["initialize"] = {
            "protocolVersion": init.protocol_version,
            "loadSession": caps.load_session,
            "embeddedContext": caps.prompt_capabilities.embedded_context,
            "agent": init.agent_info.name if init.agent_info else None,
        }
        session = await conn.new_session(cwd=repo, mcp_servers=[])
        sid = session.session_id
        answer = await conn.prompt(session_id=sid, prompt=[acp.text_block(first)])
        out["first"] = {"sessionId": sid, "stopReason": answer.stop_reason, "updates": one.updates}
        listed = await conn.list_sessions(cwd=repo)
        out["listed"] = [s.session_id for s in listed.sessions]
    two = Recorder()
    async with acp.spawn_agent_process(two, "git", "agent", "acp", cwd=repo, env=dict(os.environ)) as (conn, _process):
        await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
        await conn.load_session(cwd=repo, session_id=sid, mcp_servers=[])
        # Replayed before the answer; the SDK may still be handing the last ones to us.
        await asyncio.sleep(0.2)
        out["replayed"] = list(two.updates)
        two.updates.clear()
        answer = await conn.prompt(session_id=sid, prompt=[acp.text_block(second)])
        out["second"] = {"stopReason": answer.stop_reason, "updates": two.updates, "kinds": kinds(two.updates)}
    out["permissions"] = one.permissions + two.permissions
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
