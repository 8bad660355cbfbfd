"""The connection's sans-I/O state (``owc.protocol.machine``), without a loop or a socket: what the Trio pump in
``owc.gateway.connection`` acts on. The same rules are exercised over real sockets in ``test_gateway.py``."""

from __future__ import annotations

import logging

import orjson
import pytest

from owc.protocol import ChatEvent, ProtocolError, SessionRow, SessionsChanged, Shutdown, Tick
from owc.protocol.machine import Answered, ConnectionMachine, Deliver, Handshake, Lost, RequestTooLarge

KEY = "agent:main:openwebui-u1-3f0c9f2e-8a51-4b1e-9d7a-0c6f2b1e4a55"


def event(name: str, payload: dict, seq: int | None = None) -> bytes:
    frame: dict = {"type": "event", "event": name, "payload": payload}
    if seq is not None:
        frame["seq"] = seq
    return orjson.dumps(frame)


def chat(seq: int, run: str = "r1", state: str = "delta") -> bytes:
    return event("chat", {"runId": run, "sessionKey": KEY, "state": state}, seq)


def reply(request_id: str, payload: object = None, ok: bool = True) -> bytes:
    return orjson.dumps({"type": "res", "id": request_id, "ok": ok, "payload": payload})


def machine(max_payload: int = 1 << 20) -> ConnectionMachine:
    return ConnectionMachine(label="ws://gw", max_payload=max_payload)


def test_a_reply_answers_its_request_with_its_position() -> None:
    m = machine()
    request_id, data = m.request("sessions.list", {"limit": 5})
    assert orjson.loads(data) == {"type": "req", "id": request_id, "method": "sessions.list", "params": {"limit": 5}}
    delivered = m.receive(chat(1))
    assert isinstance(delivered, Deliver) and delivered.name == "chat" and delivered.event.run_id == "r1"
    assert m.receive(reply(request_id, {"sessions": []})) == Answered(request_id)
    pending = m.done(request_id)
    assert pending is not None and pending.response is not None and pending.response.payload == {"sessions": []}
    assert pending.position == 2 and m.pending == {}


def test_an_unknown_reply_is_logged_and_skipped(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="owc.gateway")
    m = machine()
    assert m.receive(reply("nobody")) is None
    assert "gateway.unexpected_response id=nobody" in caplog.text
    request_id, _ = m.request("chat.history", {})
    m.done(request_id)  # timed out or cancelled: a late reply is unexpected too
    assert m.receive(reply(request_id)) is None


def test_a_request_over_max_payload_is_refused_before_it_is_sent() -> None:
    m = machine(max_payload=100)
    with pytest.raises(RequestTooLarge) as info:
        m.request("chat.send", {"message": "x" * 200})
    assert info.value.limit == 100 and info.value.size > 200 and m.pending == {}


def test_a_reply_too_large_to_parse_fails_its_request_at_once() -> None:
    m = machine(max_payload=1000)
    request_id, _ = m.request("chat.history", {})
    big = reply(request_id, {"messages": ["x" * 2000]})
    assert m.receive(big) == Answered(request_id)
    pending = m.done(request_id)
    assert pending is not None and pending.response is None and pending.too_large is not None
    assert pending.too_large.limit == 1000 and pending.position == 1
    assert m.receive(orjson.dumps({"type": "event", "event": "chat", "pad": "x" * 2000})) is None  # not a reply


def test_events_are_delivered_typed_and_tracked() -> None:
    m = machine()
    assert m.receive(event("connect.challenge", {"nonce": "n", "ts": 1})) is None
    tick = m.receive(event("tick", {"ts": 1_000}))
    assert isinstance(tick, Deliver) and isinstance(tick.event, Tick) and tick.name == "tick"
    start = m.receive(event("sessions.changed", {"sessionKey": KEY, "phase": "start", "runId": "r1", "ts": 900}, 1))
    assert isinstance(start, Deliver) and isinstance(start.event, SessionsChanged)
    assert (KEY, "r1") in m.active.known and m.last_ts == 1_000  # the newest time, ticks included
    notice = m.receive(event("shutdown", {"reason": "restart", "restartExpectedMs": 5000}, 2))
    assert isinstance(notice, Deliver) and isinstance(m.notice, Shutdown) and m.notice.restart_expected_ms == 5000
    final = m.receive(chat(3, state="final"))
    assert isinstance(final, Deliver) and final.event.is_terminal
    assert (KEY, "r1") in m.active.finished and m.gaps == 0 and m.frames == 5


def test_bad_input_is_logged_and_never_fed_to_the_seq_tracker(caplog) -> None:
    caplog.set_level(logging.ERROR, logger="owc.gateway")
    m = machine()
    assert m.receive(chat(1)) is not None
    assert m.receive(b"not json") is None
    assert m.receive(orjson.dumps({"type": "req", "id": "x", "method": "m"})) is None
    assert m.receive(event("chat", {"sessionKey": KEY, "state": "delta"}, 999)) is None  # no runId: bad event
    assert "gateway.bad_frame" in caplog.text and "gateway.bad_event" in caplog.text
    assert m.seq.last == 1 and m.gaps == 0  # the junk seq 999 was not taken
    lost = m.receive(chat(3))  # 2 was the bad event: a gap, reported with the event that showed it
    assert isinstance(lost, Lost) and lost.resync and isinstance(lost.event, ChatEvent) and m.gaps == 1


def test_one_resync_per_burst_and_one_more_for_a_gap_after_its_list() -> None:
    m = machine()
    first = m.receive(chat(2))
    assert isinstance(first, Lost) and first.resync and m.resync_running
    m.resync_listing()
    request_id, _ = m.request("sessions.list", {})
    second = m.receive(chat(4))  # a gap while the list is on its way: no second task
    assert isinstance(second, Lost) and not second.resync
    m.receive(reply(request_id, {"sessions": []}))
    position = m.done(request_id).position
    assert m.resync_covers(position)  # both gaps came before the list's answer
    third = m.receive(chat(6))  # after it: the running resync must list once more
    assert isinstance(third, Lost) and not third.resync and not m.resync_covers(position)
    m.resync_ended()
    fourth = m.receive(chat(8))
    assert isinstance(fourth, Lost) and fourth.resync and m.gaps == 4


def test_a_gap_shown_by_an_event_not_delivered_is_still_reported() -> None:
    m = machine()
    lost = m.receive(event("connect.challenge", {"nonce": "n"}, 5))
    assert isinstance(lost, Lost) and lost.event is None and lost.resync


def test_the_list_diff_goes_through_the_active_runs() -> None:
    m = machine()
    m.receive(event("sessions.changed", {"sessionKey": KEY, "phase": "start", "runId": "r1"}, 1))
    resync = m.resync([SessionRow(key=KEY, has_active_run=False, active_run_ids=())], "gap", position=m.frames)
    assert resync.ended == ((KEY, "r1"),) and m.active.known == {}


def test_handshake_steps() -> None:
    steps = Handshake()
    with pytest.raises(ProtocolError, match=r"did not open with connect\.challenge"):
        steps.challenge(event("tick", {"ts": 1}))
    assert steps.challenge(event("connect.challenge", {"nonce": "n", "ts": 1})).payload["nonce"] == "n"
    sent = orjson.loads(steps.connect({"minProtocol": 4}))
    assert sent["id"] == steps.request_id and sent["method"] == "connect"
    assert steps.reply(event("tick", {"ts": 2})) is None  # tolerated before hello-ok
    assert steps.reply(reply("another")) is None
    hello = steps.reply(reply(steps.request_id, {"type": "hello-ok"}))
    assert hello is not None and hello.ok and hello.payload == {"type": "hello-ok"}
