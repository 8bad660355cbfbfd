"""The Gateway simulator over real loopback WebSockets."""

from __future__ import annotations

import pytest
import trio

from owc.protocol import EventDecoder, parse_chat_history, parse_subscribe
from owc.protocol.results import parse_chat_abort, parse_chat_send, parse_sessions_list
from owc.render import output_from_transcript, output_text
from owc.sim import CANNED_ANSWER, Hold, Text, open_simulator

from conftest import TOKEN, load_log
from rawclient import Refused, raw_client

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


#: The refusals of the real Gateway's auth matrix (frames_auth.jsonl), by label, and how to provoke each.
REFUSALS = {
    "wrong token": {"token": "wrong"},
    "protocol 3 operator": {"token": TOKEN, "protocol": 3},
    "no auth": {"token": None},
    "unknown client id": {"token": TOKEN, "client_id": "my-python-client"},
    "openclaw-tui/ui + token, no device": {"token": TOKEN, "client_id": "openclaw-tui", "mode": "ui"},
}


@pytest.mark.parametrize("label", sorted(REFUSALS))
async def test_handshake_refusals_match_the_real_gateway(label: str) -> None:
    """Each refusal: the same error object (code, message, details) and the same close (code, reason) as the
    real Gateway 2026.9.6 gave in the captured auth matrix."""
    real = next(entry for entry in load_log("frames_auth.jsonl") if entry.get("label") == label)
    kwargs = dict(REFUSALS[label])
    async with open_simulator(token=TOKEN) as sim:
        token = kwargs.pop("token")
        with pytest.raises(Refused) as info:
            async with raw_client(sim.url, token, **kwargs):
                pass
        assert info.value.response.error.to_json() == real["error"]
        assert [info.value.close_code, info.value.close_reason] == real["close"]
        assert TOKEN not in info.value.response.error.message


async def test_first_request_must_be_connect() -> None:
    async with open_simulator(token=TOKEN) as sim:
        async with raw_client(
            sim.url, TOKEN, first={"type": "req", "id": "x1", "method": "sessions.list", "params": {}}
        ) as client:
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
        async with (
            raw_client(sim.url, TOKEN, instance_id="A") as a,
            raw_client(sim.url, TOKEN, caps=(), instance_id="B") as b,
        ):
            await a.request("sessions.subscribe", {})
            await b.request("sessions.subscribe", {"limit": 5})
            res = await a.request(
                "chat.send", {"sessionKey": KEY, "message": "USE_TOOL please", "idempotencyKey": "run-1"}
            )
            sent = parse_chat_send(res.payload)
            assert (sent.run_id, sent.status) == ("run-1", "started")
            final = lambda f: f.event == "chat" and f.payload["state"] == "final"  # noqa: E731
            events_a = await a.events_until(final)
            events_b = await b.events_until(final)
            # The sender with tool-events gets agent tool events; the other subscriber gets session.tool.
            assert [
                f.payload["data"]["phase"] for f in events_a if f.event == "agent" and f.payload["stream"] == "tool"
            ] == ["start", "result"]
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
        assert (settled.reason, settled.status, settled.last_run_id, settled.active_run_ids) == (
            "agent.input.settled",
            "done",
            "r1",
            (),
        )
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


async def test_tool_event_routing_follows_caps_and_subscriptions() -> None:
    """Reference 4.5: ``agent`` tool events go to the run's sender only if it declared ``tool-events``;
    ``session.tool`` goes to the ``sessions.subscribe`` connections that are not such a recipient, so a
    sender without the cap sees the tools as ``session.tool``, and a connection that never subscribed sees none."""
    async with open_simulator(token=TOKEN) as sim:
        async with (
            raw_client(sim.url, TOKEN, caps=(), instance_id="capless-sender") as sender,
            raw_client(sim.url, TOKEN, instance_id="unsubscribed") as bystander,
        ):
            await sender.request("sessions.subscribe", {})
            await sender.request(
                "chat.send", {"sessionKey": KEY, "message": "USE_TOOL please", "idempotencyKey": "run-r"}
            )
            final = lambda f: f.event == "chat" and f.payload["state"] == "final"  # noqa: E731
            seen = await sender.events_until(final)
            assert [f.payload["data"]["phase"] for f in seen if f.event == "session.tool"] == ["start", "result"]
            assert [f for f in seen if f.event == "agent" and f.payload["stream"] == "tool"] == []
            await bystander.request("sessions.list", {})  # a round trip: everything sent before it was read
            assert [f for f in bystander.backlog if f.event in ("session.tool", "sessions.changed")] == []


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
        assert [
            f.payload["data"]["delta"] for f in events if f.event == "agent" and f.payload["stream"] == "assistant"
        ] == ["a", " b", " c", " d", " e"]


async def test_slow_consumer_drops_then_closes_1008() -> None:
    """A slow consumer first loses its drop-if-slow events (their seq spent), and the first event that may
    not be dropped closes it with 1008."""
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        await client.request("sessions.subscribe", {})
        conn = sim.connection()
        sim.slow_consumer(client.hello.conn_id)
        seq_before, dropped_before = conn.seq, conn.dropped
        sim.start_run(KEY, "r1")  # a droppable chat status first, then non-droppable events
        assert await client.closed() == (1008, "slow consumer")
        dropped = conn.dropped - dropped_before
        assert dropped >= 1 and conn.seq == seq_before + dropped + 1  # each drop spent its seq; then the close
        assert not [f for f in client.backlog if f.event == "chat" and f.payload.get("runId") == "r1"]


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
            await client.event("tick")
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


async def test_a_heartbeat_run_is_told_only_to_its_keys_message_subscribers_as_the_real_gateway_does() -> None:
    """Measured on 2026.9.6 (``tests/test_realgw_heartbeat.py``; ``server-chat-*.mjs``): a heartbeat run is not
    shown to control UIs. A connection that asked ``sessions.messages.subscribe`` for the key gets its lifecycle
    and item ``agent`` events (flagged ``isHeartbeat``; no status, text or tool events) and one ``chat`` final
    without the flag, with no message for a bare ``HEARTBEAT_OK``. A connection that only asked
    ``sessions.subscribe`` (owc) gets ``sessions.changed`` start and end, the ``session.message`` of a reply that
    shows, ``phase: "message"`` for the hidden prompt and acknowledgement, and the global ``heartbeat`` event."""
    async with (
        open_simulator(token=TOKEN) as sim,
        raw_client(sim.url, TOKEN, instance_id="S") as subscriber,
        raw_client(sim.url, TOKEN, instance_id="O") as observer,
    ):
        await observer.request("sessions.subscribe", {})
        await subscriber.request("sessions.messages.subscribe", {"key": KEY})
        talk = sim.start_run(KEY, "talk", heartbeat=True, origin="heartbeat").tool("read", {}, "ok").text("Red.")
        talk.end()
        sim.start_run(KEY, "quiet", heartbeat=True, origin="heartbeat").text("HEARTBEAT_OK").end()
        ended = lambda f: f.event == "sessions.changed" and f.payload.get("phase") == "end"  # noqa: E731
        seen = [f for f in await observer.events_until(ended) if f.payload.get("runId") != "quiet"]
        seen += await observer.events_until(ended)
        got = await subscriber.events_until(lambda f: f.event == "chat" and f.payload["runId"] == "quiet")
    stored = sim.sessions[KEY].transcript
    for run in ("talk", "quiet"):
        agent = [f.payload for f in got if f.event == "agent" and f.payload["runId"] == run]
        assert agent and all(p["isHeartbeat"] is True for p in agent)
        assert {p["stream"] for p in agent} == ({"lifecycle", "item"} if run == "talk" else {"lifecycle"})
        (final,) = [f.payload for f in got if f.event == "chat" and f.payload["runId"] == run]
        assert final["state"] == "final" and "isHeartbeat" not in final
        assert ("message" in final) == (run == "talk")
    assert not [f for f in got if f.event in ("session.tool", "sessions.changed")]
    # The runner's global event goes to every reader (measured); quiet's comes after the final waited for.
    assert [f.payload["status"] for f in got if f.event == "heartbeat"] == ["skipped"]
    assert not [f for f in seen if f.event in ("agent", "chat", "session.tool")]
    lifecycle = [
        (f.payload["phase"], f.payload["runId"]) for f in seen if f.event == "sessions.changed" and "runId" in f.payload
    ]
    assert lifecycle == [("start", "talk"), ("end", "talk"), ("start", "quiet"), ("end", "quiet")]
    # Pushed: the tool call (seq 2) and the reply (4); not the prompts (1, 5), the tool's result (3, never
    # pushed) or the HEARTBEAT_OK (6).
    pushed = [f.payload["message"] for f in seen if f.event == "session.message"]
    assert [m["__openclaw"]["seq"] for m in pushed] == [2, 4]
    told = [
        f.payload["messageSeq"] for f in seen if f.event == "sessions.changed" and f.payload.get("phase") == "message"
    ]
    assert told == [1, 5, 6]  # the prompts and the HEARTBEAT_OK
    assert [f.payload["status"] for f in seen if f.event == "heartbeat"] == ["skipped", "ok-empty"]
    prompt = stored[0]
    assert prompt["content"] == "[OpenClaw heartbeat poll]" and prompt["__openclaw"]["senderIsOwner"] is False
    assert prompt["idempotencyKey"].endswith(":user") and prompt["idempotencyKey"] not in ("talk:user", "quiet:user")


async def test_history_pages_count_stored_messages_and_mark_alike_on_every_page() -> None:
    """Measured on 2026.9.6 over A, H1 (text), H2 (``HEARTBEAT_OK``), H3 (text), B: ``totalMessages``,
    ``offset`` and ``nextOffset`` count stored messages, hidden ones too, a page scans past hidden messages for
    ``limit`` shown ones, and a reply right after a hidden prompt is marked whichever page it comes in."""
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        sim.start_run(KEY, "A", origin="chat.send", user_text="a").text("A said.").end()
        sim.start_run(KEY, "H1", heartbeat=True, origin="heartbeat").text("H1 said.").end()
        sim.start_run(KEY, "H2", heartbeat=True, origin="heartbeat").text("HEARTBEAT_OK").end()
        sim.start_run(KEY, "H3", heartbeat=True, origin="heartbeat").text("H3 said.").end()
        sim.start_run(KEY, "B", origin="chat.send", user_text="b").text("B said.").end()
        walks = {}
        for limit in (1, 2, 3):
            offset: int | None = 0
            walks[limit] = []
            while offset is not None:
                params = {"sessionKey": KEY, "limit": limit, **({"offset": offset} if offset else {})}
                page = (await client.request("chat.history", params)).payload
                assert page["totalMessages"] == 10 and page["hasMore"] == (page["nextOffset"] is not None)
                marks = [(m["__openclaw"]["seq"], bool(m["__openclaw"].get("turnBoundary"))) for m in page["messages"]]
                walks[limit].append((page["nextOffset"], marks))
                offset = page["nextOffset"]
    # The real Gateway's walks (tests/test_realgw_heartbeat.py, and the helper's probe of it).
    assert walks[1] == [
        (1, [(10, False)]),
        (2, [(9, False)]),
        (3, [(8, True)]),
        (7, [(4, True)]),
        (9, [(2, False)]),
        (None, [(1, False)]),
    ]
    assert walks[2] == [(2, [(9, False), (10, False)]), (7, [(4, True), (8, True)]), (None, [(1, False), (2, False)])]
    assert walks[3] == [(3, [(8, True), (9, False), (10, False)]), (None, [(1, False), (2, False), (4, True)])]


async def test_history_hides_heartbeat_prompts_and_marks_the_next_reply_as_the_real_gateway_does() -> None:
    """chat.history's projection (measured on 2026.9.6; NOTES.md "Heartbeat runs in the transcript"): a heartbeat
    runner's placeholder prompt and a bare ``HEARTBEAT_OK`` are hidden, a sub-agent's announce prompt too, and the
    first message shown after a hidden heartbeat prompt carries ``__openclaw.turnBoundary``; a speaking
    heartbeat's reply is shown (issue 24 item 6: owc gives it a message from it, as any run's)."""
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        sim.start_run(KEY, "send", origin="sessions_send").text("Forwarded.").end()
        sim.start_run(KEY, "talk", heartbeat=True, origin="heartbeat").text("The build is red.").end()
        sim.start_run(KEY, "quiet", heartbeat=True).text("HEARTBEAT_OK").end()  # a cron wake
        sim.start_run(KEY, "announce", origin="subagent_announce").text("The sub-agent finished.").end()
        sim.start_run(KEY, "later", heartbeat=True, origin="heartbeat").text("Still red.").end()
        reply = await client.request("chat.history", {"sessionKey": KEY})
        stored = sim.sessions[KEY].transcript
    prompts = ["[OpenClaw heartbeat poll]", "[OpenClaw cron wake]"]
    assert [m["content"] for m in stored if m["role"] == "user" and m["content"] in prompts] == [
        prompts[0],
        prompts[1],
        prompts[0],
    ]
    shown = reply.payload["messages"]
    assert not any(m["role"] == "user" and m["content"] in prompts for m in shown)
    assert not any("HEARTBEAT_OK" in str(m["content"]) for m in shown)
    marked = [(m["role"], (m["__openclaw"].get("runId"))) for m in shown if m["__openclaw"].get("turnBoundary")]
    # The talking heartbeat's reply; then the quiet wake's mark passes over the hidden announce prompt onto the
    # announce's reply; the later heartbeat's reply is marked by its own prompt.
    assert marked == [("assistant", "talk"), ("assistant", "announce"), ("assistant", "later")]
    history = parse_chat_history(reply.payload)
    # Every run that spoke shows its reply, the heartbeats' too; the quiet wake shows nothing.
    said = {
        r: output_text(output_from_transcript(history, r) or []) for r in ("send", "talk", "quiet", "announce", "later")
    }
    assert said == {
        "send": "Forwarded.",
        "talk": "The build is red.",
        "quiet": "",
        "announce": "The sub-agent finished.",
        "later": "Still red.",
    }


async def test_disconnect_keeps_boot_id() -> None:
    async with open_simulator(token=TOKEN) as sim:
        async with raw_client(sim.url, TOKEN) as client:
            boot = client.hello.boot_id
            sim.disconnect(client.hello.conn_id)
            code, _ = await client.closed()
            assert code == 1006
        async with raw_client(sim.url, TOKEN) as again:
            assert again.hello.boot_id == boot


def _row(client_payload, key=KEY):
    return next(r for r in parse_sessions_list(client_payload).sessions if r.key == key)


async def _restart_with_active_run(mode: str, **sim_kwargs):
    """Run a turn, cut it with ``mode``, reconnect; return what the first and second connection saw."""
    async with open_simulator(token=TOKEN, **sim_kwargs) as sim:
        async with raw_client(sim.url, TOKEN) as client:
            await client.request("sessions.subscribe", {})
            run = sim.start_run(KEY, "src-1", user_text="do the thing")
            run.tool("exec", {"cmd": "ls"}, "a\nb").text("Half")
            await client.event(lambda f: f.event == "chat" and f.payload["state"] == "delta")
            old_boot = client.hello.boot_id
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sim.restart, mode)
                code, reason = await client.closed()
            seen = [f for f in client.backlog]
        await sim.wait_for(sim.quiescent)
        async with raw_client(sim.url, TOKEN) as again:
            listed = parse_subscribe((await again.request("sessions.subscribe", {"limit": 10})).payload)
            history = parse_chat_history((await again.request("chat.history", {"sessionKey": KEY})).payload)
        return {
            "code": code,
            "reason": reason,
            "seen": seen,
            "old_boot": old_boot,
            "new_boot": again.hello.boot_id,
            "list": listed.list,
            "history": history,
        }


def _kinds(frames):
    out = []
    for f in frames:
        p = f.payload
        out.append((f.event, p.get("state") or p.get("phase") or p.get("reason") or p.get("stream")))
    return out


async def test_restart_mode_cuts_with_no_terminal_keeps_the_row_running_and_recovers() -> None:
    """A restart (measured on 2026.9.6: a forced restart, or one past its 300 s wait for runs): the notice with
    ``restartExpectedMs``, then no chat terminal and no lifecycle end; the transcript gets an empty aborted
    assistant message of the run (the partial is lost); the row stays running and the boot recovers it."""
    r = await _restart_with_active_run("restart")
    assert (r["code"], r["reason"]) == (1012, "service restart") and r["new_boot"] != r["old_boot"]
    shutdown = next(f for f in r["seen"] if f.event == "shutdown")
    assert shutdown.payload == {"reason": "gateway restarting", "restartExpectedMs": 1500}
    assert not [f for f in r["seen"] if f.event == "chat" and f.payload["state"] in ("final", "aborted", "error")]
    assert not [
        f
        for f in r["seen"]
        if f.event == "agent" and f.payload.get("stream") == "lifecycle" and f.payload["data"].get("phase") == "end"
    ]
    mine = [m for m in r["history"].messages if m.assistant_run_id == "src-1"]
    assert mine and mine[-1].text == "" and "Half" not in "".join(m.text for m in mine)
    # At boot the Gateway recovered the session with a new run whose user turn carries the provenance.
    users = [m for m in r["history"].messages if m.role == "user"]
    recovery = users[-1]
    assert recovery.is_restart_recovery_turn and recovery.user_run_id not in (None, "src-1")
    assert users[0].user_run_id == "src-1" and not users[0].is_restart_recovery_turn
    assert any(m.assistant_run_id == recovery.user_run_id for m in r["history"].messages)
    row = r["list"].sessions[0]
    assert row.status == "done" and row.last_run_id == recovery.user_run_id


async def test_a_stop_past_its_drain_aborts_for_restart_and_the_boot_recovers() -> None:
    """A stop (SIGTERM) whose drain ran out (measured on 2026.9.6): the notice without ``restartExpectedMs``, then
    the run aborted with ``stopReason: "restart"`` and its partial; the row stays running and the next boot
    recovers it (the seeds' "killed after a stop notice" does not occur there)."""
    r = await _restart_with_active_run("stop")
    assert (r["code"], r["reason"]) == (1012, "service restart")
    shutdown = next(f for f in r["seen"] if f.event == "shutdown")
    assert shutdown.payload == {"reason": "gateway stopping"}
    aborted = next(f for f in r["seen"] if f.event == "chat" and f.payload["state"] == "aborted")
    assert aborted.payload["stopReason"] == "restart"
    assert r["seen"].index(shutdown) < r["seen"].index(aborted)
    end = next(typed(f) for f in r["seen"] if f.event == "sessions.changed" and f.payload.get("phase") == "end")
    assert end.status == "running" and end.aborted_last_run
    recovery = [m for m in r["history"].messages if m.is_restart_recovery_turn]
    assert len(recovery) == 1
    assert aborted.payload["message"] and "Half" in str(aborted.payload["message"])  # live, the partial ...
    assert "Half" not in "".join(m.text for m in r["history"].messages)  # ... the transcript keeps none of it


async def test_container_stop_fails_rows_before_the_close() -> None:
    r = await _restart_with_active_run("container")
    assert r["code"] == 1012
    kinds = _kinds(r["seen"])
    error = kinds.index(("chat", "error"))
    assert error < [k for k, _ in kinds].index("shutdown")
    frame = r["seen"][error]
    assert frame.payload["errorMessage"] == "Claude Code process exited with code 143"
    row = r["list"].sessions[0]
    assert (row.status, row.last_run_error, row.last_run_id) == (
        "failed",
        "Claude Code process exited with code 143",
        "src-1",
    )
    assert not any(m.is_restart_recovery_turn for m in r["history"].messages)


async def test_crash_has_no_terminal_and_recovers() -> None:
    r = await _restart_with_active_run("crash")
    assert r["code"] == 1006 and r["new_boot"] != r["old_boot"]
    assert not [f for f in r["seen"] if f.event == "shutdown" or (f.event == "chat" and f.payload["state"] != "delta")]
    recovery = [m for m in r["history"].messages if m.is_restart_recovery_turn]
    assert len(recovery) == 1
    assert recovery[0].provenance.raw == {"kind": "internal_system", "sourceTool": "main_session_restart_recovery"}


async def test_recovery_active_when_clients_return_cli_runtime() -> None:
    """A recovery that is still running when owc reconnects shows in the list without run ids (CLI runtime),
    and its first event names it; its closing message is keyed cli-assistant:<R>."""
    async with open_simulator(
        token=TOKEN, cli_runtime=True, recovery=lambda key, src: [Text("Resumed"), Hold(), Text(" and done")]
    ) as sim:
        sim.start_run(KEY, "src-1").text("Working")
        await sim.restart("crash")
        async with raw_client(sim.url, TOKEN) as client:
            listed = parse_subscribe((await client.request("sessions.subscribe", {"limit": 10})).payload)
            (row,) = listed.list.sessions
            assert row.has_active_run and row.active_run_ids is None
            run = sim.active_run(KEY)
            run.release()
            first = await client.event(lambda f: f.event in ("chat", "agent"))
            assert first.payload["runId"] == run.run_id
            run.end()
            await client.event(lambda f: f.event == "chat" and f.payload["state"] == "final")
            history = parse_chat_history((await client.request("chat.history", {"sessionKey": KEY})).payload)
        closing = [m for m in history.messages if m.idempotency_key == f"cli-assistant:{run.run_id}"]
        assert closing and closing[0].assistant_run_id == run.run_id and closing[0].openclaw_run_id is None


async def test_connect_refused_while_starting(autojump_clock) -> None:
    async with open_simulator(token=TOKEN) as sim:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: sim.restart("stop", down_seconds=5))
            await sim.wait_for(lambda: sim.starting)
            with pytest.raises(Refused) as info:
                async with raw_client(sim.url, TOKEN):
                    pass
            err = info.value.response.error
            assert (err.code, err.retryable, err.retry_after_ms, info.value.close_code) == (
                "UNAVAILABLE",
                True,
                500,
                1013,
            )
        async with raw_client(sim.url, TOKEN) as client:
            assert client.hello.boot_id == sim.boot_id


async def test_text_after_tool_joins_with_blank_line() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        sim.start_run(KEY, "r1").text("Looking").tool("ls", {}, "x").text("Found it").end()
        events = await client.events_until(lambda f: f.event == "chat" and f.payload["state"] == "final")
        deltas = [f.payload["deltaText"] for f in events if f.event == "chat" and f.payload["state"] == "delta"]
        assert "".join(deltas) == "Looking\n\nFound it" == typed(events[-1]).text


async def test_describe_yield_and_error_terminals() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        missing = await client.request("sessions.describe", {"key": KEY})
        assert missing.payload == {"session": None}
        sim.start_run(KEY, "y1").text("Waiting for sub-agents").end(yielded=True)
        final = await client.event(lambda f: f.event == "chat" and f.payload["state"] == "final")
        assert typed(final).yielded is True
        sim.start_run(KEY, "e1").end("error", error="model overloaded")
        error = await client.event(lambda f: f.event == "chat" and f.payload["state"] == "error")
        assert error.payload["errorMessage"] == "model overloaded"
        described = await client.request("sessions.describe", {"key": KEY})
        row = described.payload["session"]
        assert (row["status"], row["lastRunId"], row["lastRunError"], row["hasActiveRun"]) == (
            "failed",
            "e1",
            "model overloaded",
            False,
        )
        bad = await client.request("chat.send", {"sessionKey": KEY, "message": "x"})
        assert bad.error.code == "INVALID_REQUEST" and "idempotencyKey" in bad.error.message
        unknown = await client.request("no.such.method", {})
        assert unknown.error.code == "INVALID_REQUEST"


@pytest.mark.parametrize(
    ("script", "partial"),
    [
        ("text", "Hello\n\nHello from"),  # "Hello", a tool, then "Hello from" being written
        ("during_tool_one_item", None),  # the committed message already holds the whole buffer
        ("during_tool_two_items", "A\n\nB"),  # the last committed message holds only "B"
    ],
)
async def test_an_aborted_partial_is_the_run_wide_buffer(script: str, partial: str | None) -> None:
    """As measured on the real Gateway (conformance tier): the partial is the chat buffer of the whole run, and
    is not written when the transcript's last assistant message of the run already says exactly that."""
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        await client.request("sessions.subscribe", {})
        run = sim.start_run(KEY, "r1")
        if script == "text":
            run.text("Hello").tool("read", {}, "ok").text("Hello from")
        elif script == "during_tool_one_item":
            run.text("A").tool_start("read")
        else:
            run.text("A").tool("read", {}, "ok").text("B").tool_start("read")
        run.end("aborted")
        history = parse_chat_history((await client.request("chat.history", {"sessionKey": KEY})).payload)
        assert [m.text for m in history.messages if m.aborted] == ([] if partial is None else [partial])
        assert all(m.assistant_run_id == "r1" for m in history.messages if m.role == "assistant")


async def test_a_failed_run_leaves_what_the_real_gateway_keeps() -> None:
    """Issue 24 item 2, as measured on 2026.9.6 (docs/reference/gateway-errors-heartbeats-internal.md): the row's
    ``lastRunError`` is the first error terminal's words; the transcript keeps a ``<R>:terminal-error`` record
    whose text is a copy of the failure in other words, then the partial text; a second error terminal follows."""
    from owc.render import TurnRenderer, finish

    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        await client.request("sessions.subscribe", {})
        sim.start_run(KEY, "e1").text("Hello from the").end("error", error="model overloaded")
        errors = await client.events_until(
            lambda f: f.event == "sessions.changed" and f.payload.get("phase") == "error"
        )
        said = [f.payload["errorMessage"] for f in errors if f.event == "chat" and f.payload["state"] == "error"]
        assert said[0] == "model overloaded" and said[1].startswith("⚠️ Agent failed before reply: model overloaded.")
        listed = await client.request("sessions.list", {})
        row = next(s for s in listed.payload["sessions"] if s["key"] == KEY)
        assert (row["status"], row["lastRunId"], row["lastRunError"]) == ("failed", "e1", "model overloaded")
        history = parse_chat_history((await client.request("chat.history", {"sessionKey": KEY})).payload)
        record = [m for m in history.messages if m.role == "assistant"]
        assert [(m.idempotency_key, m.stop_reason, m.assistant_run_id) for m in record] == [
            ("e1:terminal-error", "error", "e1")
        ]
        assert record[0].text == "⚠️ LLM request failed (model overloaded).\n\nHello from the"
        finished = finish(TurnRenderer("e1"), history)  # as owc finishes it when it saw nothing live
        assert (finished.content, finished.error) == (
            "Hello from the",
            {"content": "⚠️ LLM request failed (model overloaded)."},
        )


async def test_what_a_killed_process_is_sent_is_no_part_of_the_streamed_record() -> None:
    """The oracle's "streamed" record (``Run.streamed``) counts only what a client can show. A killed process's
    socket stays open for a moment after the kill (``ScenarioPlayer.kill``) and is still sent frames; before,
    text sent to it then was recorded as streamed after the death, and the oracle asked for a message of a run
    nobody living ever saw (fuzz seed 282, about 1 play in 10)."""
    from owc.sim import model as m
    from owc.sim.delivery import READ, Fanout, SimConn

    conns: dict[str, SimConn] = {}
    for name, killed in (("dead", True), ("live", False)):
        send, _recv = trio.open_memory_channel[str](10)
        conns[name] = SimConn(
            conn_id=name,
            ws=None,
            instance_id=name,
            subscribed=True,
            scopes=frozenset({READ}),
            send=send,  # type: ignore[arg-type]
        )
        conns[name].killed = killed
    fanout = Fanout(conns, lambda: 0)
    run = m.Run(run_id="r", key="agent:main:main")
    fanout.chat(run, "delta", drop_if_slow=True, message={"role": "assistant", "content": "Shown."})
    assert run.streamed == {"live": "Shown."}
