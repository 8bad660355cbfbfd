"""The Gateway simulator over real loopback WebSockets."""

from __future__ import annotations

import pytest
import trio

from owc.protocol import ChatEvent, EventDecoder, SessionsChanged, parse_chat_history, parse_subscribe
from owc.protocol.results import parse_chat_abort, parse_chat_send, parse_sessions_list
from owc.sim import CANNED_ANSWER, Hold, Text, Tool, open_simulator
from rawclient import Refused, raw_client

TOKEN = "sim-token-0123456789"
KEY = "agent:main:openwebui-u1-3f0c9f2e-8a51-4b1e-9d7a-0c6f2b1e4a55"


def typed(frame):
    return EventDecoder().decode(frame)


async def test_handshake_ok() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        hello = client.hello
        assert hello.boot_id == sim.boot_id and hello.protocol == 4
        assert hello.policy.tick_interval_ms == 30_000 and hello.policy.max_payload == 26_214_400
        assert set(hello.auth_scopes) >= {"operator.read", "operator.write"}
        assert client.challenge.payload["nonce"]


@pytest.mark.parametrize(
    ("kwargs", "code", "detail", "close"),
    [
        ({"token": "wrong"}, "INVALID_REQUEST", "AUTH_TOKEN_MISMATCH", 1008),
        ({"token": TOKEN, "protocol": 3}, "INVALID_REQUEST", "PROTOCOL_MISMATCH", 1002),
        ({"token": None}, "NOT_PAIRED", "DEVICE_IDENTITY_REQUIRED", 1008),
        ({"token": TOKEN, "client_id": "my-python-client"}, "INVALID_REQUEST", None, 1008),
        ({"token": TOKEN, "client_id": "openclaw-tui", "mode": "ui"}, "INVALID_REQUEST", "CONTROL_UI_DEVICE_IDENTITY_REQUIRED", 1008),
    ],
)
async def test_handshake_refusals(kwargs, code, detail, close) -> None:
    async with open_simulator(token=TOKEN) as sim:
        token = kwargs.pop("token")
        with pytest.raises(Refused) as info:
            async with raw_client(sim.url, token, **kwargs):
                pass
        assert info.value.response.error.code == code
        assert info.value.response.error.detail_code == detail
        assert info.value.close_code == close
        assert TOKEN not in info.value.response.error.message


async def test_first_request_must_be_connect() -> None:
    async with open_simulator(token=TOKEN) as sim:
        async with raw_client(sim.url, TOKEN, first={"type": "req", "id": "x1", "method": "sessions.list", "params": {}}) as client:
            frame = await client._read()
            assert not frame.ok and frame.id == "x1"
            assert frame.error.message == "invalid handshake: first request must be connect"
            assert await client.closed() == (1008, "invalid handshake: first request must be connect")


async def test_scopeless_client_is_forbidden() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN, client_id="test", mode="test") as client:
        assert client.hello.auth_scopes == ()
        res = await client.request("sessions.list", {})
        assert res.error.code == "FORBIDDEN" and res.error.detail_code == "MISSING_SCOPE"


async def test_chat_send_turn_with_tool_and_history() -> None:
    async with open_simulator(token=TOKEN) as sim:
        async with raw_client(sim.url, TOKEN, instance_id="A") as a, raw_client(sim.url, TOKEN, caps=(), instance_id="B") as b:
            await a.request("sessions.subscribe", {})
            await b.request("sessions.subscribe", {"limit": 5})
            res = await a.request("chat.send", {"sessionKey": KEY, "message": "USE_TOOL please", "idempotencyKey": "run-1"})
            sent = parse_chat_send(res.payload)
            assert (sent.run_id, sent.status) == ("run-1", "started")
            final = lambda f: f.event == "chat" and f.payload["state"] == "final"  # noqa: E731
            events_a = await a.events_until(final)
            events_b = await b.events_until(final)
            # The sender with tool-events gets agent tool events; the other subscriber gets session.tool.
            assert [f.payload["data"]["phase"] for f in events_a if f.event == "agent" and f.payload["stream"] == "tool"] == ["start", "result"]
            assert [f.event for f in events_a if f.event == "session.tool"] == []
            assert [f.payload["data"]["phase"] for f in events_b if f.event == "session.tool"] == ["start", "result"]
            assert [f for f in events_b if f.event == "agent" and f.payload["stream"] == "tool"] == []
            assert typed(events_a[-1]).text == CANNED_ANSWER
            # Same broadcasts, different per-connection seq: each connection counts its own from 1.
            assert [f.seq for f in events_a] == list(range(1, len(events_a) + 1))
            assert [f.seq for f in events_b] == list(range(1, len(events_b) + 1))
            # Repeating the idempotency key: ok after completion.
            again = await a.request("chat.send", {"sessionKey": KEY, "message": "x", "idempotencyKey": "run-1"})
            assert parse_chat_send(again.payload).status == "ok"
            history = parse_chat_history((await b.request("chat.history", {"sessionKey": KEY})).payload)
            roles = [msg.role for msg in history.messages]
            assert roles == ["user", "assistant", "toolResult", "assistant"]
            assert history.messages[0].user_run_id == "run-1"
            assert {msg.assistant_run_id for msg in history.messages if msg.role == "assistant"} == {"run-1"}
            (call,) = history.messages[1].tool_calls
            assert call.id == history.messages[2].tool_call_id == "call_fake1" and history.messages[2].is_error
            assert history.messages[3].text == CANNED_ANSWER
            row = parse_sessions_list((await b.request("sessions.list", {})).payload).sessions[0]
            assert (row.key, row.status, row.has_active_run, row.last_run_id) == (KEY, "done", False, "run-1")


async def test_settled_then_end_pushes() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        await client.request("sessions.subscribe", {})
        run = sim.start_run(KEY, "r1").text("hi")
        run.end()
        events = await client.events_until(lambda f: f.event == "sessions.changed" and f.payload.get("phase") == "end")
        changes = [typed(f) for f in events if f.event == "sessions.changed"]
        start = next(c for c in changes if c.phase == "start")
        assert start.run_id == "r1" and start.has_active_run and start.active_run_ids is None
        settled = next(c for c in changes if c.is_settled)
        assert (settled.reason, settled.status, settled.last_run_id, settled.active_run_ids) == ("agent.input.settled", "done", "r1", ())
        assert changes[-1].phase == "end" and changes[-1].has_active_run is False


async def test_subscribe_lists_a_run_started_just_before() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        run = sim.start_run(KEY, "early")
        run.text("Working")
        listed = parse_subscribe((await client.request("sessions.subscribe", {"limit": 50})).payload)
        (row,) = listed.list.sessions
        assert row.has_active_run and row.active_run_ids == ("early",) and row.status == "running"
        # Events of a run started after the subscribe reach the subscriber.
        run.end()
        sim.start_run(KEY, "late")
        frame = await client.event(lambda f: f.event == "sessions.changed" and f.payload.get("phase") == "start")
        assert frame.payload["runId"] == "late"


async def test_list_without_run_ids() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        sim.start_run(KEY, "hidden", hide_ids=True)
        row = parse_sessions_list((await client.request("sessions.list", {})).payload).sessions[0]
        assert row.has_active_run is True and row.active_run_ids is None


async def test_drop_spends_seq_numbers() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        await client.request("sessions.subscribe", {})
        run = sim.start_run(KEY, "r1")
        first = await client.event("sessions.changed")
        sim.drop(3, conn=client.hello.conn_id)
        run.text("a b c d e")  # ten events: agent assistant (kept) + chat delta (droppable), per word
        run.end()
        events = [first, *await client.events_until(lambda f: f.event == "chat" and f.payload["state"] == "final")]
        seqs = [f.seq for f in events]
        gaps = [y - x - 1 for x, y in zip(seqs, seqs[1:]) if y != x + 1]
        assert gaps == [1, 1, 1]  # each dropped delta sat between two kept agent events
        deltas = [f.payload["deltaText"] for f in events if f.event == "chat" and f.payload["state"] == "delta"]
        assert deltas == [" d", " e"]
        assert [f.payload["data"]["delta"] for f in events if f.event == "agent" and f.payload["stream"] == "assistant"] == ["a", " b", " c", " d", " e"]


async def test_slow_consumer_closed_1008() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        await client.request("sessions.subscribe", {})
        run = sim.start_run(KEY, "r1")
        await client.event("sessions.changed")
        sim.slow_consumer(client.hello.conn_id)
        run.text("hello")  # the chat delta is droppable; the agent assistant event is not: it closes
        assert await client.closed() == (1008, "slow consumer")
        assert sim.conns == {} or all(c.closing for c in sim.conns.values())


async def test_ticks_on_the_mock_clock(autojump_clock) -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        start = trio.current_time()
        ticks = []
        for _ in range(3):
            frame = await client.event("tick")
            ticks.append(trio.current_time() - start)
        assert ticks == pytest.approx([30, 60, 90], abs=1e-6)


async def test_chat_abort_and_queue() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        await client.request("sessions.subscribe", {})
        await client.request("chat.send", {"sessionKey": KEY, "message": "SLOW please", "idempotencyKey": "slow-1"})
        await client.event(lambda f: f.event == "chat" and f.payload["state"] == "delta")
        queued = await client.request("chat.send", {"sessionKey": KEY, "message": "next", "idempotencyKey": "next-1"})
        assert parse_chat_send(queued.payload).status == "started"
        repeat = await client.request("chat.send", {"sessionKey": KEY, "message": "next", "idempotencyKey": "next-1"})
        assert parse_chat_send(repeat.payload).status == "in_flight"
        aborted = parse_chat_abort((await client.request("chat.abort", {"sessionKey": KEY, "runId": "slow-1"})).payload)
        assert aborted.aborted and aborted.run_ids == ("slow-1",)
        terminal = await client.event(lambda f: f.event == "chat" and f.payload["state"] == "aborted")
        assert terminal.payload["stopReason"] == "rpc" and typed(terminal).text == "Hello"
        # The queued run starts once the aborted one has ended, and completes.
        final = await client.event(lambda f: f.event == "chat" and f.payload["state"] == "final")
        assert final.payload["runId"] == "next-1"
        history = parse_chat_history((await client.request("chat.history", {"sessionKey": KEY})).payload)
        partial = [msg for msg in history.messages if msg.aborted]
        assert partial and partial[0].assistant_run_id == "slow-1" and partial[0].text == "Hello"
        row = parse_sessions_list((await client.request("sessions.list", {})).payload).sessions[0]
        assert row.status == "done" and row.last_run_id == "next-1"


async def test_heartbeat_run_flags_and_hides_chat() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        await client.request("sessions.subscribe", {})
        run = sim.start_run(KEY, "hb", heartbeat=True).text("HEARTBEAT_OK")
        run.end()
        events = await client.events_until(lambda f: f.event == "sessions.changed" and f.payload.get("phase") == "end")
        agent = [f for f in events if f.event == "agent"]
        assert agent and all(f.payload["isHeartbeat"] is True for f in agent)
        assert [f for f in events if f.event == "chat"] == []


async def test_disconnect_keeps_boot_id() -> None:
    async with open_simulator(token=TOKEN) as sim:
        async with raw_client(sim.url, TOKEN) as client:
            boot = client.hello.boot_id
            sim.disconnect(client.hello.conn_id)
            code, _ = await client.closed()
            assert code == 1006
        async with raw_client(sim.url, TOKEN) as again:
            assert again.hello.boot_id == boot
