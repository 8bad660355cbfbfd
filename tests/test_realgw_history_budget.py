"""Real Gateway tier: ``chat.history``'s byte budget, pinned on 2026.9.6 and checked against the simulator.

Read in the Gateway's source (``chat-history-handler``, ``chat-history-budget``, ``server-constants``): a page's
messages stay within ``min(maxBytes, 6 MiB)`` of JSON, the oldest dropped first but never the newest, and
``nextOffset`` points just before the oldest kept; a message over 128 KiB comes back as a placeholder
("[chat.history omitted: message too large]", ``__openclaw.truncated``) that keeps its identity but not its
``runId``. owc asks for ``maxBytes`` and finishes from the stream what a placeholder hides.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson
import pytest
import trio

from owc.sim import open_simulator
from owc.sim.rpc import HISTORY_OVERSIZED_TEXT

from rawclient import raw_client

pytestmark = pytest.mark.realgateway

BIG = 200_000


async def _budget(url: str, token: str) -> dict[str, Any]:
    """Two turns (the first user message over 128 KiB), then ``chat.history`` whole and in 1 KiB pages."""
    key = f"agent:main:openwebui-budget-{uuid.uuid4()}"
    runs = [str(uuid.uuid4()), str(uuid.uuid4())]
    with trio.fail_after(180):
        async with raw_client(url, token, instance_id="B") as client:
            await client.request("sessions.subscribe", {})
            for run_id, message in zip(runs, ["x" * BIG, "A short one."], strict=True):
                sent = await client.request(
                    "chat.send", {"sessionKey": key, "message": message, "idempotencyKey": run_id}
                )
                assert sent.ok, sent.error
                await client.events_until(
                    lambda f, run_id=run_id: (
                        f.event == "chat" and f.payload.get("runId") == run_id and f.payload.get("state") == "final"
                    )
                )
            whole = await client.request("chat.history", {"sessionKey": key, "maxChars": 500_000})
            assert whole.ok, whole.error
            pages, offset = [], 0
            while offset is not None and len(pages) < 10:
                params = {
                    "sessionKey": key,
                    "maxChars": 500_000,
                    "maxBytes": 1024,
                    **({"offset": offset} if offset else {}),
                }
                page = await client.request("chat.history", params)
                assert page.ok, page.error
                pages.append(page.payload)
                offset = page.payload.get("nextOffset")
    return {"runs": runs, "whole": whole.payload, "pages": pages}


def _sides(real_gateway) -> dict[str, dict[str, Any]]:
    async def sim_side() -> dict[str, Any]:
        async with open_simulator(token="budget") as sim:
            return await _budget(sim.url, "budget")

    return {"real": trio.run(_budget, real_gateway.url, real_gateway.token), "sim": trio.run(sim_side)}


def test_history_budget_on_the_real_gateway_and_the_simulator(real_gateway) -> None:
    for side, got in _sides(real_gateway).items():
        first_user = f"{got['runs'][0]}:user"
        users = [m for m in got["whole"]["messages"] if m.get("role") == "user"]
        big = [m for m in users if (m.get("__openclaw") or {}).get("idempotencyKey") == first_user]
        assert len(big) == 1, side
        (placeholder,) = big
        assert placeholder["content"] == [{"type": "text", "text": HISTORY_OVERSIZED_TEXT}], side
        assert placeholder["__openclaw"]["truncated"] is True and placeholder["__openclaw"]["reason"] == "oversized"
        total = len(got["whole"]["messages"])
        seen = 0
        for page in got["pages"]:
            messages = page["messages"]
            assert messages, side  # never an empty page while messages remain
            assert len(messages) == 1 or len(orjson.dumps(messages)) <= 1024, side
            seen += len(messages)
            assert page.get("nextOffset") in (None, seen), side
        assert seen == total, side  # the 1 KiB pages, joined, are the whole transcript
