"""Real Gateway tier: owc connected to the real OpenClaw Gateway 2026.9.6; another client sends a turn with a
tool call to an Open WebUI chat key (for owc an agent turn it did not start); owc writes exactly one message
whose text and tool-card count equal the real transcript's."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio

from owc import ids
from owc.emit import RecordingEmitter
from owc.gateway import GatewayConfig, open_gateway_connection
from owc.protocol import parse_chat_history
from owc.registry import WriterRegistry
from owc.render import count_cards, output_from_transcript, output_text
from owc.runs import Bridge
from owc.store import open_store
from rawclient import raw_client

pytestmark = pytest.mark.realgateway


async def test_agent_turn_from_the_real_gateway(real_gateway, tmp_path: Path, caplog) -> None:
    user, chat_id = "u-real", str(uuid.uuid4())
    key = ids.session_key("main", user, chat_id)
    run_id = str(uuid.uuid4())
    async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
        await store.create_chat(chat_id, user)
        emitter = RecordingEmitter()
        bridge = Bridge(store, emitter, WriterRegistry())
        with trio.fail_after(180):
            async with open_gateway_connection(real_gateway.url, real_gateway.token, bridge, GatewayConfig(instance_id="owc-real")) as client:
                await client.wait_connection()
                async with raw_client(real_gateway.url, real_gateway.token, caps=(), instance_id="other-ui") as other:
                    sent = await other.request("chat.send", {"sessionKey": key, "message": "USE_TOOL please check", "idempotencyKey": run_id})
                    assert sent.ok, sent.error
                    await bridge.until(lambda: bridge.totals()[1] >= 1)
                    history = parse_chat_history((await other.request("chat.history", {"sessionKey": key, "limit": 50})).payload)
        chat = await store.read_chat(chat_id)
    messages = chat["history"]["messages"]
    m = ids.message_id(key, run_id)
    assert list(messages) == [m]  # exactly one message, the run's
    expected = output_from_transcript(history, run_id)
    assert expected is not None
    message = messages[m]
    assert message["done"] is True
    assert message["content"] == output_text(expected) == "Hello from the fake model. This is a canned answer."
    assert count_cards(message["output"]) == count_cards(expected) == 1
    assert emitter.of(m, "chat:messages") and emitter.of(m, "chat:completion")
    # The finalize read the transcript (the real Gateway accepted chat.history's maxChars) and used it.
    messages_logged = [r.getMessage() for r in caplog.records]
    assert not any("runs.history_failed" in t for t in messages_logged)
    assert any("runs.finalized" in t and "source=transcript" in t for t in messages_logged)
