"""Real Gateway tier: owc connected to the real OpenClaw Gateway 2026.9.6; another client sends a turn with a
tool call to an Open WebUI chat key (for owc an agent turn it did not start); owc writes exactly one message
whose text and tool-card count equal the real transcript's. A run that ends while owc's connection is down is
finalized after the reconnect, from the real transcript."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from owc import ids
from owc.emit import RecordingEmitter
from owc.gateway import GatewayConfig, open_gateway_connection
from owc.protocol import parse_chat_history
from owc.registry import WriterRegistry
from owc.render import count_cards, output_from_transcript, output_text
from owc.render.transcript import run_messages
from owc.rules.lifecycle import State
from owc.runs import RunKeeper
from owc.runtime import RuntimeConfig, open_runtime
from owc.store import open_store

from rawclient import raw_client
from realgw.fake_model import ANSWER
from realgw.gateway import RealGateway
from realgw.watched import WatchedEmitter

pytestmark = pytest.mark.realgateway


async def test_agent_turn_from_the_real_gateway(real_gateway, tmp_path: Path, caplog) -> None:
    user, chat_id = "u-real", str(uuid.uuid4())
    key = ids.session_key("main", user, chat_id)
    run_id = str(uuid.uuid4())
    async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
        await store.create_chat(chat_id, user)
        emitter = RecordingEmitter()
        keeper = RunKeeper(store, emitter, WriterRegistry())
        with trio.fail_after(180):
            async with open_gateway_connection(
                real_gateway.url, real_gateway.token, keeper, GatewayConfig(instance_id="owc-real")
            ) as client:
                await client.wait_connection()
                async with raw_client(real_gateway.url, real_gateway.token, caps=(), instance_id="other-ui") as other:
                    sent = await other.request(
                        "chat.send", {"sessionKey": key, "message": "USE_TOOL please check", "idempotencyKey": run_id}
                    )
                    assert sent.ok, sent.error
                    await keeper.until(lambda: keeper.totals()[1] >= 1)
                    history = parse_chat_history(
                        (await other.request("chat.history", {"sessionKey": key, "limit": 50})).payload
                    )
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


async def test_run_ended_while_disconnected_is_finalized_from_the_real_transcript(
    real_gateway: RealGateway, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A run that ends while owc is disconnected is finalized after owc reconnects, from the real transcript.

    Another client starts a slow turn (the fake model's ``SLOW`` reply: one word a second); owc claims the run's
    message and streams it; one word before the reply's end owc's TCP stream is dropped from owc's side (no close
    frame: a network drop, 1006). The run then ends at the Gateway while owc waits its reconnect backoff, so owc
    never sees the run's ``chat`` final or its ``sessions.changed`` end; the next connection's hello list no
    longer shows the run, which is the only end signal owc gets. The carried run must take its own message back
    and finalize it once, ``done``, with the real transcript's text (the stream it had lacked the last word), and
    leave nothing unsettled in the ledger and no illegal lifecycle input. This is the path the simulator tests
    cover with scripted lists; here the list, the transcript and their timing are the real Gateway's.
    """
    user, chat_id = "u-real", str(uuid.uuid4())
    key = ids.session_key("main", user, chat_id)
    run_id = str(uuid.uuid4())
    m = ids.message_id(key, run_id)
    chat = {
        "id": chat_id,
        "title": "ended while away",
        "models": ["openclaw.main"],
        "history": {
            "currentId": "u1",
            "messages": {"u1": {"id": "u1", "parentId": None, "childrenIds": [], "role": "user", "content": "hi"}},
        },
        "messages": [{"id": "u1", "role": "user", "content": "hi"}],
    }
    # Backoff 5 s, no jitter: the reconnect waits long enough that the run (about 1 s from the cut to its end,
    # measured: the model's last word, then the Gateway's end) surely ends before owc's next hello. The default
    # 1 s would race the run's end and mostly test adoption of a still-running run instead. Whether the run did
    # end first is checked below, from both sides, rather than assumed.
    gateway = GatewayConfig(instance_id="owc-real", backoff_initial=5.0, backoff_jitter=0)
    config = RuntimeConfig(
        url=real_gateway.url, token=real_gateway.token, gateway=gateway, registry=WriterRegistry(), strict=True
    )
    emitter = WatchedEmitter()
    async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
        await store.create_chat(chat_id, user, chat=chat)
        async with open_runtime(config, store, emitter) as runtime:
            with trio.fail_after(180):  # real seconds: a real external process (its first turn alone takes ~13 s)
                first = await runtime.client.wait_connection()
                async with raw_client(real_gateway.url, real_gateway.token, caps=(), instance_id="other-ui") as other:
                    params = {"sessionKey": key, "message": "SLOW reply please", "idempotencyKey": run_id}
                    sent = await other.request("chat.send", params)
                    assert sent.ok, sent.error
                    await runtime.keeper.until(lambda: runtime.keeper.totals()[0] == 1)  # owc claimed the message
                    run = runtime.ledger.get(key, run_id)
                    assert run is not None and run.life.state is State.STREAMING
                    # "canned" is the reply's last word but one: the run ends about a second after it.
                    await emitter.until_streamed(chat_id, m, "canned")
                    assert not run.life.ended
                    shown_at_cut = run.renderer.text
                    await trio.aclose_forcefully(first.ws.stream)  # the TCP stream under the WebSocket: a drop
                    waited = await other.request("agent.wait", {"runId": run_id, "timeoutMs": 60_000})
                    assert waited.ok and waited.payload["status"] == "ok", (waited.payload, waited.error)
                    # The run has ended at the Gateway and owc has not said hello again: it ended while owc was away.
                    assert first.closed and runtime.client.connections_opened == 1, "owc reconnected before the end"
                    second = await runtime.client.wait_connection(newer_than=first)
                    await runtime.settled()
                    reply = await other.request("chat.history", {"sessionKey": key, "limit": 50, "maxChars": 500_000})
                    assert reply.ok, reply.error
                    history = parse_chat_history(reply.payload)
        saved = await store.read_chat(chat_id)
    # owc learned the end only from the hello's list (no live terminal reached it), and settled the run.
    assert run.life.terminal is not None and run.life.terminal.state is None
    assert run.life.terminal.reason.startswith("absent from the list at hello"), run.life.terminal
    assert run.life.state is State.DONE
    assert len(runtime.ledger) == 0 and runtime.ledger.illegal == []
    assert runtime.keeper.totals()[1] == 1 and runtime.client.connections_opened == 2
    # Exactly one assistant message for the run, under the chat's user turn, finished by the second connection.
    messages = saved["history"]["messages"]
    assert [k for k, v in messages.items() if v.get("role") == "assistant"] == [m]
    message = messages[m]
    assert message["parentId"] == "u1" and messages["u1"]["childrenIds"] == [m]
    assert message["done"] is True
    assert message["meta"]["openclaw_run"] == run_id
    assert message["meta"]["openclaw_writer"] == config.registry.writer_id(second.id)
    # Its content is the real transcript's assistant text for the run: owc's stream had stopped a word short.
    assert ANSWER.startswith(shown_at_cut) and "canned" in shown_at_cut and shown_at_cut != ANSWER
    # The transcript holds the run's whole reply with its end (what owc never received live).
    assert [(h.text, h.stop_reason) for h in run_messages(history, run_id)] == [(ANSWER, "stop")]
    expected = output_from_transcript(history, run_id)
    assert expected is not None
    assert message["content"] == output_text(expected) == ANSWER
    assert count_cards(message["output"]) == count_cards(expected) == 0
    completions = [e.event["data"] for e in emitter.of(m, "chat:completion") if e.event["data"].get("done")]
    assert [c["content"] for c in completions] == [ANSWER]
    logged = [r.getMessage() for r in caplog.records]
    assert not any("runs.history_failed" in t for t in logged)
    assert any("runs.finalized" in t and f"run={run_id}" in t and "source=transcript" in t for t in logged)


@pytest.mark.parametrize("stopper", ["owc", "another client"])
async def test_stop_after_a_tool_keeps_an_item_that_starts_with_the_earlier_text(
    real_gateway: RealGateway, tmp_path: Path, caplog: pytest.LogCaptureFixture, stopper: str
) -> None:
    """Issue 11, end to end on the real Gateway: the fake model says "Hello", calls ``read``, then starts its
    answer ("Hello from ...", one word a second); owc streams it and the user presses Stop. The real aborted
    partial is the run-wide buffer ("Hello\\n\\nHello from..."), and owc's finalizer keeps of it what the earlier
    message does not hold: "Hello", the card, "Hello from..." (no word dropped, no newline inside a word)."""
    user, chat_id = "u-real", str(uuid.uuid4())
    key = ids.session_key("main", user, chat_id)
    run_id = str(uuid.uuid4())
    m = ids.message_id(key, run_id)
    config = RuntimeConfig(url=real_gateway.url, token=real_gateway.token, registry=WriterRegistry(), strict=True)
    emitter = WatchedEmitter()
    async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
        await store.create_chat(chat_id, user)
        async with open_runtime(config, store, emitter) as runtime:
            with trio.fail_after(180):  # real seconds: a real external process
                await runtime.client.wait_connection()
                async with raw_client(real_gateway.url, real_gateway.token, caps=(), instance_id="other-ui") as other:
                    params = {"sessionKey": key, "message": "ECHO_TOOL SLOW answer please", "idempotencyKey": run_id}
                    sent = await other.request("chat.send", params)
                    assert sent.ok, sent.error
                    await emitter.until_streamed(chat_id, m, "Hello from")  # the answer's second word, after the card
                    if stopper == "owc":
                        assert runtime.stop_chat(chat_id) == 1
                    else:
                        stopped = await other.request("chat.abort", {"sessionKey": key, "runId": run_id})
                        assert stopped.ok, stopped.error
                    await runtime.settled()
                    reply = await other.request("chat.history", {"sessionKey": key, "limit": 50, "maxChars": 500_000})
                    assert reply.ok, reply.error
                    history = parse_chat_history(reply.payload)
        saved = await store.read_chat(chat_id)
    (partial,) = [h for h in run_messages(history, run_id) if h.aborted]
    assert partial.text.startswith("Hello\n\nHello from")  # the Gateway's run-wide buffer, earlier item included
    expected = output_from_transcript(history, run_id)
    assert expected is not None
    message = saved["history"]["messages"][m]
    assert message["done"] is True
    assert message["content"] == output_text(expected)
    assert message["content"].startswith("Hello\nHello from") and ANSWER.startswith(
        message["content"][len("Hello\n") :]
    )
    assert count_cards(message["output"]) == count_cards(expected) == 1
    logged = [r.getMessage() for r in caplog.records]
    assert any("runs.finalized" in t and f"run={run_id}" in t and "source=transcript" in t for t in logged)


async def test_a_short_answer_that_starts_like_a_sentinel_is_shown(
    real_gateway: RealGateway, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 11, on the real Gateway: the model answers only "NO" (a prefix of ``NO_REPLY``). The real Gateway
    holds it back from the live deltas (a lead fragment of a control token) and shows it in the run's ``chat``
    final (``suppressLeadFragments: false`` at the terminal); owc makes the run's message and writes "NO"."""
    user, chat_id = "u-real", str(uuid.uuid4())
    key = ids.session_key("main", user, chat_id)
    run_id = str(uuid.uuid4())
    m = ids.message_id(key, run_id)
    config = RuntimeConfig(url=real_gateway.url, token=real_gateway.token, registry=WriterRegistry(), strict=True)
    async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
        await store.create_chat(chat_id, user)
        async with open_runtime(config, store, RecordingEmitter()) as runtime:
            with trio.fail_after(180):  # real seconds: a real external process
                await runtime.client.wait_connection()
                async with raw_client(real_gateway.url, real_gateway.token, caps=(), instance_id="other-ui") as other:
                    params = {"sessionKey": key, "message": "SAY_NO please", "idempotencyKey": run_id}
                    sent = await other.request("chat.send", params)
                    assert sent.ok, sent.error
                    final = await other.event(
                        lambda f: (
                            f.event == "chat" and f.payload.get("runId") == run_id and f.payload["state"] == "final"
                        )
                    )
                    await runtime.settled()
                    await runtime.keeper.until(lambda: runtime.keeper.totals()[1] == 1)
                    reply = await other.request("chat.history", {"sessionKey": key, "limit": 50, "maxChars": 500_000})
                    history = parse_chat_history(reply.payload)
        saved = await store.read_chat(chat_id)
    assert final.payload["message"]["content"] == [{"type": "text", "text": "NO"}]  # shown at the terminal
    assert [h.text for h in run_messages(history, run_id)] == ["NO"]
    message = saved["history"]["messages"][m]
    assert message["done"] is True and message["content"] == "NO"


async def test_a_user_turn_through_the_pipes_path_matches_the_real_transcript(real_gateway, tmp_path: Path) -> None:
    """Issue 13: a user turn sent the Pipe's way (``Runtime.user_turn``: the run id carries Open WebUI's reply stub,
    the reply streams inline) with a tool call, against the real Gateway; what the request streamed and the
    message the handover's writer finalized both equal the real transcript's."""
    user, chat_id, m = "u-real", str(uuid.uuid4()), str(uuid.uuid4())
    key = ids.session_key("main", user, chat_id)
    run_id = ids.input_run_id(chat_id, m, "t1")
    stub = {"id": m, "parentId": "u1", "childrenIds": [], "role": "assistant", "content": "", "done": False}
    asked = {"id": "u1", "parentId": None, "childrenIds": [m], "role": "user", "content": "USE_TOOL please check"}
    body = {"id": chat_id, "title": "t", "history": {"currentId": m, "messages": {"u1": asked, m: stub}}}
    config = RuntimeConfig(url=real_gateway.url, token=real_gateway.token, gateway=GatewayConfig(instance_id="owc"))
    async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
        await store.create_chat(chat_id, user, chat=body)
        with trio.fail_after(180):
            async with open_runtime(config, store, RecordingEmitter()) as runtime:
                await runtime.connected()
                turn = await runtime.user_turn(key, run_id, "USE_TOOL please check")
                shown: list[dict[str, Any]] = []
                while not (step := await turn.next_output(shown)).over:
                    shown = step.output
                shown = step.output
                # Open WebUI's end-of-stream save, then its task's end: the handover.
                await store.write(chat_id, m, content=output_text(shown), output=shown, done=True)
                turn.request_ended()
                await runtime.keeper.until(lambda: turn.run.life.state is State.DONE)
                history = parse_chat_history(await runtime.client.request("chat.history", {"sessionKey": key}))
        message = (await store.read_chat(chat_id))["history"]["messages"][m]
    expected = output_from_transcript(history, run_id)
    assert expected is not None and output_text(expected) == ANSWER
    assert message["done"] is True and message["content"] == output_text(expected)
    assert count_cards(message["output"]) == count_cards(expected) == 1
    assert output_text(shown) == ANSWER and count_cards(shown) == 1  # the inline stream had it all too
