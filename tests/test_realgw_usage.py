"""Real Gateway tier: the usage line after a finished reply (issue 28) says what the real 2026.9.6 Gateway reports.

An agent turn (another client's ``chat.send`` on a chat's key) finishes; owc's message for it ends with the context
line, whose numbers equal ``sessions.describe``'s for the session (``totalTokens`` of ``contextTokens``), read by
the test after the run. Offline, ``usage.status`` has no providers (measured), so no rate-limit line: nothing is
shown that the Gateway did not say."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio

from owc import ids
from owc.emit import RecordingEmitter
from owc.gateway import GatewayConfig
from owc.render import usage
from owc.runtime import RuntimeConfig, open_runtime
from owc.store import open_store

from rawclient import raw_client

pytestmark = pytest.mark.realgateway


async def test_a_finished_agent_turn_ends_with_the_context_the_gateway_reports(real_gateway, tmp_path: Path) -> None:
    user, chat_id, run_id = "u-usage", str(uuid.uuid4()), str(uuid.uuid4())
    key = ids.session_key("main", user, chat_id)
    config = RuntimeConfig(url=real_gateway.url, token=real_gateway.token, gateway=GatewayConfig(instance_id="owc"))
    async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
        await store.create_chat(chat_id, user)
        with trio.fail_after(180):
            async with open_runtime(config, store, RecordingEmitter()) as runtime:
                await runtime.connected()
                async with raw_client(real_gateway.url, real_gateway.token, caps=(), instance_id="cron-ish") as other:
                    sent = await other.request(
                        "chat.send", {"sessionKey": key, "message": "hello there", "idempotencyKey": run_id}
                    )
                    assert sent.ok, sent.error
                    await runtime.keeper.until(lambda: runtime.keeper.totals()[1] >= 1)
                    described = (await other.request("sessions.describe", {"key": key})).payload
        message = (await store.read_chat(chat_id))["history"]["messages"][ids.message_id(key, run_id)]
    session = described["session"]
    assert session["lastRunId"] == run_id and session["status"] == "done" and session["totalTokensFresh"] is True
    expected = usage.context_line(usage.Context(session["totalTokens"], session["contextTokens"]))
    lines = [e["description"] for e in message["statusHistory"]]
    assert lines[-1] == expected  # the only fact offline: no combined line after it
    assert not any("% left" in line for line in lines)  # usage.status offline has no providers (measured)
