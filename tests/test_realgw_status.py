"""Real Gateway tier: the status view of a chat (issue 29) as owc reads it from the real 2026.9.6 Gateway.

The fake model spawns a real sub-agent (``SPAWN_CHILD``: ``sessions_spawn``), whose own turn runs ``exec`` for a few
seconds. On owc's one connection, without having started anything: the chat's status view lists the sub-agent while
it runs, with the tool it runs now; the view's watcher is poked by the Gateway's own events (``task``, the child's
``session.tool`` / ``sessions.changed``), never by a clock; the drawer shows the child's tool with its result and its
answer; Compact is refused while a reply runs (the Gateway's refusal, in a person's words) and done after it."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio

from owc import ids
from owc.emit import RecordingEmitter
from owc.gateway import GatewayConfig
from owc.runs.status import BUSY_LINE
from owc.runtime import RuntimeConfig, open_runtime
from owc.store import open_store

from rawclient import raw_client
from realgw.fake_model import CHILD_DONE, CHILD_LABEL

pytestmark = pytest.mark.realgateway


async def test_a_subagent_live_in_the_status_view_its_drawer_and_compact(real_gateway, tmp_path: Path) -> None:
    user, chat_id = "u-status", str(uuid.uuid4())
    key = ids.session_key("main", user, chat_id)
    config = RuntimeConfig(url=real_gateway.url, token=real_gateway.token, gateway=GatewayConfig(instance_id="owc"))
    async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
        await store.create_chat(chat_id, user)
        with trio.fail_after(240):
            async with open_runtime(config, store, RecordingEmitter()) as runtime:
                await runtime.connected()
                desk = runtime.keeper.status
                async with raw_client(real_gateway.url, real_gateway.token, caps=(), instance_id="cron-ish") as other:
                    seen_running: dict = {}
                    pokes = 0
                    async with desk.watching(key) as watcher:
                        sent = await other.request(
                            "chat.send",
                            {"sessionKey": key, "message": "please SPAWN_CHILD", "idempotencyKey": str(uuid.uuid4())},
                        )
                        assert sent.ok, sent.error
                        # Until the sub-agent has been seen running its tool and has then left the live list.
                        while True:
                            view = await desk.snapshot(key)
                            live = view["subagents"] or []
                            if live and live[0]["doing"] == "Running exec":
                                seen_running = live[0]
                            if seen_running and not live:
                                break
                            await watcher.changed()
                            pokes += 1
                    assert seen_running["title"] == CHILD_LABEL and seen_running["status"] == "running"
                    assert isinstance(seen_running["startedAtMs"], int)
                    assert pokes >= 2  # the Gateway's events moved the view, each poke one read
                    view = await desk.snapshot(key)
                    assert view["context"]["provider"] == "fake" and view["context"]["window"]
                    drawer = await desk.drawer(key, seen_running["id"])
                    assert drawer is not None and drawer["status"] == "completed"
                    assert [t["name"] for t in drawer["tools"]] == ["exec"]
                    assert "child-ok" in (drawer["tools"][0]["result"] or "")
                    assert any(CHILD_DONE in m["text"] for m in drawer["messages"] if m["role"] == "assistant")
                    assert (
                        await desk.drawer(ids.session_key("main", user, str(uuid.uuid4())), seen_running["id"]) is None
                    )
                    # The sub-agent's result comes back as a run on the chat's key (``announce:v1:...``, measured): the
                    # spawn's turn and that one are two finished messages.
                    await runtime.keeper.until(lambda: runtime.keeper.totals()[1] >= 2)
                    # The chat's current message said what the sub-agent did, each line once.
                    chat = await store.read_chat(chat_id)
                    said = [
                        e["description"]
                        for m in chat["history"]["messages"].values()
                        for e in m.get("statusHistory") or []
                        if e.get("action") == "openclaw_subagent"
                    ]
                    assert said == [
                        f"Sub-agent {CHILD_LABEL} is working",
                        f"Sub-agent {CHILD_LABEL}: running exec",
                        f"Sub-agent {CHILD_LABEL} finished",
                    ], said
                    # Compact during a reply: the Gateway refuses, owc says why; after it: done.
                    slow = await other.request(
                        "chat.send", {"sessionKey": key, "message": "SLOW please", "idempotencyKey": str(uuid.uuid4())}
                    )
                    assert slow.ok, slow.error
                    await runtime.keeper.until(lambda: runtime.keeper.ledger.running_on(key))
                    busy = await desk.compact(key)
                    assert (busy.ok, busy.line, busy.code) == (False, BUSY_LINE, 409)
                    await runtime.keeper.until(lambda: runtime.keeper.totals()[1] >= 3)
                    done = await desk.compact(key)
                    assert done.ok, done.line
                    # The Gateway's own counts (the fake model reports tiny ones: the summary can be the larger).
                    assert isinstance(done.before, int) and isinstance(done.after, int)
                    again = await desk.compact(key)
                    assert (
                        not again.ok and again.code == 409
                    )  # "Already compacted" (measured), said in a person's words
                    assert again.line == "This chat was just compacted: there is nothing more to compact."
