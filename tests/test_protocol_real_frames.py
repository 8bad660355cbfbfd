"""Every frame a real Gateway 2026.9.6 sent or accepted decodes into the typed model (shared/reference)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from owc.protocol import (
    AgentEvent,
    ChatEvent,
    ConnectChallenge,
    EventDecoder,
    EventFrame,
    OtherEvent,
    Request,
    Response,
    SeqStatus,
    SeqTracker,
    SessionsChanged,
    Shutdown,
    Tick,
    decode_frame,
    encode_frame,
    parse_hello_ok,
)
from owc.protocol.handshake import boot_started_at, parse_challenge
from owc.protocol.results import RESULT_PARSERS, ChatHistory, SessionsList, SubscribeResult

from conftest import FRAME_LOGS, load_log

FIRST_CONNECT_A = "0417a0b7-036d-4c31-a7d4-a40ed3459759"


def wire_frames(name: str) -> list[tuple[str, str, dict[str, Any]]]:
    """``(conn, dir, frame)`` for every line that holds a wire frame (not close/signal records)."""
    out = []
    for line in load_log(name):
        frame = line.get("frame")
        if line.get("dir") in ("in", "out") and isinstance(frame, dict):
            out.append((line["conn"], line["dir"], frame))
    return out


@pytest.mark.parametrize("name", FRAME_LOGS)
def test_every_real_frame_decodes(name: str) -> None:
    decoder = EventDecoder()
    methods: dict[str, str] = {}
    for _conn, _direction, raw in wire_frames(name):
        frame = decode_frame(orjson.dumps(raw))
        if isinstance(frame, Request):
            methods[frame.id] = frame.method
        elif isinstance(frame, Response):
            method = methods.get(frame.id)
            if method == "connect" and frame.ok:
                hello = parse_hello_ok(frame.payload)
                assert hello.boot_id
            elif method in RESULT_PARSERS and frame.ok:
                RESULT_PARSERS[method](frame.payload)
            elif not frame.ok:
                assert frame.error is not None and frame.error.code
        else:
            assert isinstance(frame, EventFrame)
            decoder.decode(frame)


def test_logs_hold_frames() -> None:
    # Guard the parametrized test above against silently decoding nothing.
    total = sum(len(wire_frames(n)) for n in FRAME_LOGS)
    assert total > 450


@pytest.mark.parametrize("name", FRAME_LOGS)
def test_reencoding_an_event_keeps_every_field(name: str) -> None:
    for _conn, _dir, raw in wire_frames(name):
        if raw.get("type") != "event":
            continue
        frame = decode_frame(orjson.dumps(raw))
        assert orjson.loads(encode_frame(frame)) == raw


def test_typed_events_of_a_tool_turn() -> None:
    """frames_tool.jsonl: A owns the run (cap tool-events) and gets ``agent`` tool events; B, a subscriber
    that does not own it, gets the same payload as ``session.tool``."""
    decoder = EventDecoder()
    by_conn: dict[str, list[Any]] = {}
    for conn, direction, raw in wire_frames("frames_tool.jsonl"):
        if direction == "in" and raw["type"] == "event":
            by_conn.setdefault(conn, []).append(decoder.decode(decode_frame(orjson.dumps(raw))))
    a, b = by_conn["A"], by_conn["B"]
    assert isinstance(a[0], ConnectChallenge)
    tools_a = [e for e in a if isinstance(e, AgentEvent) and e.tool]
    tools_b = [e for e in b if isinstance(e, AgentEvent) and e.tool]
    assert [(e.via, e.tool.phase) for e in tools_a] == [("agent", "start"), ("agent", "result")]
    assert [(e.via, e.tool.phase) for e in tools_b] == [("session.tool", "start"), ("session.tool", "result")]
    assert tools_a[1].tool.is_error and tools_a[1].tool.tool_call_id == "call_fake1"
    assert tools_a[0].tool == tools_b[0].tool
    starts = [e for e in a if isinstance(e, SessionsChanged) and e.phase == "start"]
    assert len(starts) == 1 and starts[0].has_active_run is True and starts[0].active_run_ids is None
    ends = [e for e in a if isinstance(e, SessionsChanged) and e.phase == "end"]
    assert ends[0].run_id == starts[0].run_id and ends[0].active_run_ids == ()
    finals = [e for e in a if isinstance(e, ChatEvent) and e.is_terminal]
    assert [f.state for f in finals] == ["final"]
    assert finals[0].text == "Hello from the fake model. This is a canned answer."
    lifecycle = [e.lifecycle.phase for e in a if isinstance(e, AgentEvent) and e.lifecycle]
    assert lifecycle[0] == "start" and lifecycle[-1] == "end"
    assert all(e.is_heartbeat is False for e in a if isinstance(e, AgentEvent))
    assert {e.kind for e in a if isinstance(e, OtherEvent)} >= {"health", "session.message"}


def test_abort_turn_events() -> None:
    decoder = EventDecoder()
    events = [
        decoder.decode(decode_frame(orjson.dumps(raw)))
        for conn, d, raw in wire_frames("frames_abort.jsonl")
        if conn == "B" and d == "in" and raw["type"] == "event"
    ]
    aborted = [e for e in events if isinstance(e, ChatEvent) and e.state == "aborted"]
    assert len(aborted) == 1 and aborted[0].stop_reason == "rpc" and aborted[0].text == "Hello"
    phases = {e.phase for e in events if isinstance(e, SessionsChanged) and e.run_id == aborted[0].run_id}
    assert {"end", "error"} <= phases
    killed = [e for e in events if isinstance(e, SessionsChanged) and e.status == "killed"]
    assert killed and all(e.aborted_last_run for e in killed)


def test_shutdown_notices() -> None:
    (stop,) = [raw for _c, _d, raw in wire_frames("frames_stop.jsonl") if raw.get("event") == "shutdown"]
    (restart,) = [raw for _c, _d, raw in wire_frames("frames_lifecycle.jsonl") if raw.get("event") == "shutdown"]
    decoder = EventDecoder()
    s = decoder.decode(decode_frame(orjson.dumps(stop)))
    r = decoder.decode(decode_frame(orjson.dumps(restart)))
    assert isinstance(s, Shutdown) and not s.is_restart and s.reason == "gateway stopping"
    assert isinstance(r, Shutdown) and r.is_restart and r.restart_expected_ms == 1500
    (tick,) = [raw for _c, _d, raw in wire_frames("frames_lifecycle.jsonl") if raw.get("event") == "tick"]
    assert isinstance(decoder.decode(decode_frame(orjson.dumps(tick))), Tick)


def test_hello_ok_and_startup_refusal() -> None:
    frames = wire_frames("frames_lifecycle.jsonl")
    hellos = [raw for _c, _d, raw in frames if raw.get("type") == "res" and raw.get("ok")]
    hello = parse_hello_ok(decode_frame(orjson.dumps(hellos[0])).payload)
    assert hello.protocol == 4 and hello.policy.tick_interval_ms == 30_000
    assert hello.policy.max_payload == 26_214_400
    refusals = [
        decode_frame(orjson.dumps(raw)) for _c, _d, raw in frames if raw.get("type") == "res" and not raw.get("ok")
    ]
    assert refusals and refusals[0].error.code == "UNAVAILABLE" and refusals[0].error.retryable
    assert refusals[0].error.retry_after_ms == 500


def test_hello_ok_full() -> None:
    (raw,) = [
        r
        for c, _d, r in wire_frames("frames.jsonl")
        if c == "A" and r.get("type") == "res" and r["id"] == FIRST_CONNECT_A
    ]
    hello = parse_hello_ok(decode_frame(orjson.dumps(raw)).payload)
    assert "chat.send" in hello.methods and "sessions.subscribe" in hello.methods
    assert hello.auth_scopes == ("operator.read", "operator.write", "operator.admin")
    assert hello.boot_id == "fc7fd044-5437-4199-b7b6-e0be6aa191a1"


def test_the_boot_time_from_two_real_connections() -> None:
    """``boot_started_at``: the Gateway's clock less the hello's ``uptimeMs``. With the snapshot's own time (its
    ``reason: "self"`` presence entry, dated as the uptime is read) two clients of one boot (frames.jsonl, A and B,
    75 ms apart) get the same boot within a millisecond's rounding; with the challenge's ``ts`` (read before the
    uptime) each estimate is early by its handshake, never late."""
    challenges: dict[str, int] = {}
    exact: dict[str, int] = {}
    early: dict[str, int] = {}
    for client, _d, raw in wire_frames("frames.jsonl"):
        if raw.get("event") == "connect.challenge":
            challenges[client] = parse_challenge(raw["payload"]).ts
        elif raw.get("type") == "res" and raw.get("ok") and raw.get("payload", {}).get("type") == "hello-ok":
            hello = parse_hello_ok(decode_frame(orjson.dumps(raw)).payload)
            exact.setdefault(client, boot_started_at(hello.snapshot_ts, hello.uptime_ms))
            early.setdefault(client, boot_started_at(challenges[client], hello.uptime_ms))
    assert exact == {"A": 1_795_975_355_869 - 46_029, "B": 1_795_975_355_891 - 46_050}
    assert abs(exact["A"] - exact["B"]) <= 1
    assert all(early[c] <= exact[c] for c in exact) and early["A"] == 1_795_975_355_812 - 46_029


def test_global_sessions_changed_has_no_key() -> None:
    (raw,) = {
        orjson.dumps(r): r
        for _c, _d, r in wire_frames("frames_recipe_check.jsonl")
        if r.get("payload", {}).get("reason") == "cron-bindings-loaded"
    }.values()
    event = EventDecoder().decode(decode_frame(orjson.dumps(raw)))
    assert isinstance(event, SessionsChanged) and event.session_key is None and not event.is_lifecycle


def test_rpc_results() -> None:
    methods: dict[str, str] = {}
    results: dict[str, list[Any]] = {}
    for _conn, _d, raw in wire_frames("frames_tool.jsonl"):
        frame = decode_frame(orjson.dumps(raw))
        if isinstance(frame, Request):
            methods[frame.id] = frame.method
        elif isinstance(frame, Response) and frame.ok and methods.get(frame.id) in RESULT_PARSERS:
            m = methods[frame.id]
            results.setdefault(m, []).append(RESULT_PARSERS[m](frame.payload))
    sub = results["sessions.subscribe"]
    assert any(isinstance(s, SubscribeResult) and s.list is not None for s in sub)
    listed: SessionsList = results["sessions.list"][0]
    row = listed.sessions[0]
    assert row.key == "agent:main:main" and row.has_active_run is False and row.status == "done"
    assert row.active_run_ids == () and row.last_run_id
    sent = results["chat.send"][0]
    assert sent.status == "started"
    history: ChatHistory = results["chat.history"][0]
    users = [m for m in history.messages if m.role == "user"]
    assert users[-1].user_run_id == sent.run_id
    mine = [m for m in history.messages if m.assistant_run_id == sent.run_id]
    assert mine and mine[-1].text == "Hello from the fake model. This is a canned answer."
    calls = [c for m in mine for c in m.tool_calls]
    results_ = [m for m in history.messages if m.role == "toolResult"]
    assert [c.id for c in calls] == [r.tool_call_id for r in results_] == ["call_fake1"]
    assert results_[0].is_error and results_[0].tool_name == "read"


def test_aborted_partial_in_history() -> None:
    methods: dict[str, str] = {}
    for _c, _d, raw in wire_frames("frames_abort.jsonl"):
        frame = decode_frame(orjson.dumps(raw))
        if isinstance(frame, Request):
            methods[frame.id] = frame.method
        elif isinstance(frame, Response) and methods.get(frame.id) == "chat.history":
            history = RESULT_PARSERS["chat.history"](frame.payload)
    partials = [m for m in history.messages if m.aborted]
    assert partials and partials[0].assistant_run_id is not None
    assert partials[0].idempotency_key == f"{partials[0].assistant_run_id}:assistant"


def test_real_seq_has_no_gaps() -> None:
    for name in FRAME_LOGS:
        trackers: dict[str, SeqTracker] = {}
        for conn, direction, raw in wire_frames(name):
            if direction != "in" or raw.get("type") != "event":
                continue
            tracker = trackers.setdefault(conn, SeqTracker())
            if raw["event"] == "connect.challenge":
                tracker.reset()  # a new connection under the same name: its count starts again
            result = tracker.feed(raw.get("seq"))
            assert result.status in (SeqStatus.IN_ORDER, SeqStatus.UNNUMBERED), (name, conn, raw.get("seq"))
