"""Malformed frames each raise one ProtocolError that names the problem; extra fields are tolerated."""

from __future__ import annotations

import logging

import orjson
import pytest

from owc.protocol import (
    ConnectParams,
    EventDecoder,
    EventFrame,
    OtherEvent,
    ProtocolError,
    Request,
    Response,
    decode_frame,
    encode_frame,
    parse_event,
    parse_hello_ok,
)
from owc.protocol.handshake import boot_started_at


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"{not json", "not valid JSON"),
        (b"", "not valid JSON"),
        (b"[1, 2]", "frame must be an object, got array"),
        (b'"hello"', "frame must be an object, got string"),
        (b'{"event": "tick", "payload": {}}', "lacks required field 'type'"),
        (b'{"type": "event", "payload": {}}', "event lacks required field 'event'"),
        (b'{"type": "event", "event": 7}', "event.event must be a string"),
        (b'{"type": "event", "event": "tick", "seq": "3"}', "event.seq must be a non-negative integer"),
        (b'{"type": "event", "event": "tick", "seq": -1}', "event.seq must be a non-negative integer"),
        (b'{"type": "event", "event": "tick", "payload": [1]}', "event.payload must be an object"),
        (b'{"type": "res", "ok": true, "payload": {}}', "res lacks required field 'id'"),
        (b'{"type": "res", "id": "1"}', "res lacks required boolean field 'ok'"),
        (
            b'{"type": "res", "id": "1", "ok": false, "error": {"message": "x"}}',
            "res.error lacks required field 'code'",
        ),
        (b'{"type": "req", "id": "1"}', "req lacks required field 'method'"),
        (b'{"type": "bogus"}', "frame type is not one of 'req', 'res', 'event'"),
    ],
)
def test_malformed_frame(data: bytes, needle: str) -> None:
    with pytest.raises(ProtocolError, match=needle.replace("(", r"\(").replace("[", r"\[")):
        decode_frame(data)


def test_oversized_frame_refused_before_parsing() -> None:
    big = orjson.dumps({"type": "event", "event": "tick", "payload": {"pad": "x" * 2000}})
    with pytest.raises(ProtocolError, match=rf"frame of {len(big)} bytes exceeds policy.maxPayload of 1000 bytes"):
        decode_frame(big, max_payload=1000)
    assert isinstance(decode_frame(big, max_payload=len(big)), EventFrame)
    assert isinstance(decode_frame(big.decode(), max_payload=len(big)), EventFrame)


@pytest.mark.parametrize(
    ("event", "payload", "needle"),
    [
        ("chat", {"sessionKey": "k", "state": "delta"}, "chat event: chat lacks required field 'runId'"),
        ("chat", {"runId": "r", "sessionKey": "k"}, "chat lacks required field 'state'"),
        (
            "chat",
            {"runId": "r", "sessionKey": "k", "state": "delta", "message": "hi"},
            "chat.message must be an object",
        ),
        ("agent", {"runId": "r"}, "agent lacks required field 'stream'"),
        ("agent", {"runId": "r", "stream": "tool", "data": {"phase": "start"}}, "lacks required field 'toolCallId'"),
        ("agent", {"runId": "r", "stream": "lifecycle", "data": {}}, "lacks required field 'phase'"),
        ("session.tool", {"stream": "tool"}, "session.tool event: session.tool lacks required field 'runId'"),
        ("sessions.changed", {"sessionKey": "k", "hasActiveRun": "yes"}, "hasActiveRun must be a boolean"),
        ("sessions.changed", {"sessionKey": "k", "activeRunIds": [1]}, "activeRunIds must be an array of strings"),
        ("connect.challenge", {"ts": 1}, "lacks required field 'nonce'"),
    ],
)
def test_consumed_event_missing_field(event: str, payload: dict, needle: str) -> None:
    with pytest.raises(ProtocolError, match=needle):
        parse_event(EventFrame(event=event, payload=payload))


def test_unknown_fields_and_events_are_kept() -> None:
    raw = {
        "type": "event",
        "event": "chat",
        "payload": {"runId": "r", "sessionKey": "k", "state": "delta", "deltaText": "a", "newField": {"x": 1}},
        "seq": 4,
        "recipientProfileId": "p1",
        "futureEnvelopeKey": True,
    }
    frame = decode_frame(orjson.dumps(raw))
    assert orjson.loads(encode_frame(frame)) == raw
    event = parse_event(frame)
    assert event.raw["newField"] == {"x": 1}
    # An unknown chat state is carried, not refused: the Gateway adds states between releases.
    assert parse_event(EventFrame("chat", {"runId": "r", "sessionKey": "k", "state": "thinking"})).state == "thinking"
    other = parse_event(EventFrame("presence.delta", {"a": 1}))
    assert isinstance(other, OtherEvent) and other.kind == "presence.delta" and other.raw == {"a": 1}


def test_unconsumed_kinds_logged_once_per_kind(caplog: pytest.LogCaptureFixture) -> None:
    decoder = EventDecoder()
    with caplog.at_level(logging.INFO, logger="owc.protocol"):
        for _ in range(3):
            decoder.decode(EventFrame("health", {}))
            decoder.decode(EventFrame("update.available", {}))
        decoder.decode(EventFrame("tick", {"ts": 1}))
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["protocol.event_not_consumed kind=health", "protocol.event_not_consumed kind=update.available"]
    # A new connection's decoder logs again.
    with caplog.at_level(logging.INFO, logger="owc.protocol"):
        EventDecoder().decode(EventFrame("health", {}))
    assert len(caplog.records) == 3


def test_hello_ok_shapes() -> None:
    with pytest.raises(ProtocolError, match="lacks required field 'server'"):
        parse_hello_ok({"type": "hello-ok"})
    with pytest.raises(ProtocolError, match="expected 'hello-ok'"):
        parse_hello_ok({"type": "hello-nope", "server": {}})
    with pytest.raises(ProtocolError, match="must be positive"):
        parse_hello_ok({"server": {}, "policy": {"tickIntervalMs": -5}})
    hello = parse_hello_ok(
        {"type": "hello-ok", "server": {"bootId": "b"}, "policy": {"tickIntervalMs": 1000, "maxPayload": 99}}
    )
    assert hello.boot_id == "b" and hello.policy.tick_interval_ms == 1000 and hello.policy.max_payload == 99
    assert hello.uptime_ms is None and hello.booted_at_ms is None
    # ``snapshot.uptimeMs`` only sharpens one judgement: a wrong shape costs that figure, never the connection.
    for snapshot in ("x", {"uptimeMs": "46029"}, {"uptimeMs": True}, {"uptimeMs": -1}, {"uptimeMs": 1.5}):
        assert parse_hello_ok({"server": {}, "snapshot": snapshot}).uptime_ms is None
    assert parse_hello_ok({"server": {}, "snapshot": {"uptimeMs": 46029}}).uptime_ms == 46029
    # The snapshot's own time: the one presence entry of the Gateway itself (``reason: "self"``), a whole number.
    for presence in (None, "x", [1], [{"reason": "self", "ts": "5"}], [{"reason": "self", "ts": True}], [{"ts": 5}]):
        assert parse_hello_ok({"server": {}, "snapshot": {"presence": presence}}).snapshot_ts is None
    two = [{"reason": "self", "ts": 5}, {"reason": "self", "ts": 6}]
    assert parse_hello_ok({"server": {}, "snapshot": {"presence": two}}).snapshot_ts is None
    others = [{"reason": "connect", "ts": 9}, {"reason": "self", "ts": 7}]
    assert parse_hello_ok({"server": {}, "snapshot": {"presence": others}}).snapshot_ts == 7
    assert boot_started_at(1_000_000, 46_029) == 953_971
    assert boot_started_at(None, 46_029) is None and boot_started_at(1_000_000, None) is None


def test_connect_request_shape_and_token_hidden() -> None:
    params = ConnectParams(token="s3cret-token", client_version="0.1.0", user_agent="owc/0.1.0")
    body = params.to_json()
    assert body["minProtocol"] == body["maxProtocol"] == 4
    assert body["client"] == {"id": "gateway-client", "version": "0.1.0", "platform": "linux", "mode": "backend"}
    assert body["role"] == "operator" and body["caps"] == ["tool-events"]
    assert set(body["scopes"]) >= {"operator.read", "operator.write"}
    assert body["auth"] == {"token": "s3cret-token"}
    assert "s3cret" not in repr(params)
    req = Request(id="1", method="connect", params=body)
    assert orjson.loads(encode_frame(req))["params"]["auth"]["token"] == "s3cret-token"


def test_error_text_never_echoes_frame_contents() -> None:
    secret = "tok-abcdef-123456"
    for data in (
        orjson.dumps({"type": "req", "id": "1", "params": {"auth": {"token": secret}}}),
        b'{"auth": {"token": "' + secret.encode() + b'"',
        orjson.dumps({"type": secret}),
    ):
        with pytest.raises(ProtocolError) as info:
            decode_frame(data)
        assert secret not in str(info.value)


def test_response_error_shape() -> None:
    frame = decode_frame(
        orjson.dumps(
            {
                "type": "res",
                "id": "9",
                "ok": False,
                "error": {
                    "code": "INVALID_REQUEST",
                    "message": "protocol mismatch",
                    "details": {"code": "PROTOCOL_MISMATCH"},
                },
            }
        )
    )
    assert isinstance(frame, Response) and not frame.ok
    assert frame.error.detail_code == "PROTOCOL_MISMATCH" and not frame.error.retryable


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        ({"runId": "a\nforged log line", "sessionKey": "k", "state": "delta"}, "chat.runId holds a control character"),
        ({"runId": "r" * 20_000, "sessionKey": "k", "state": "delta"}, "chat.runId is 20000 characters long"),
        ({"runId": "r", "sessionKey": "k\x1b[31m", "state": "delta"}, "chat.sessionKey holds a control character"),
    ],
)
def test_an_id_that_would_forge_or_flood_a_log_line_is_refused(payload, needle) -> None:
    """Run ids and session keys go into every log line of their run: one with a newline (a forged log line) or
    20,000 characters long is refused as bad input (the event costs only itself) instead of being logged."""
    with pytest.raises(ProtocolError, match=needle):
        parse_event(EventFrame("chat", payload))


@pytest.mark.parametrize(
    ("kind", "payload", "needle"),
    [
        ("chat", {"runId": "", "sessionKey": "k", "state": "delta"}, "chat.runId is empty"),
        ("chat", {"runId": "r", "sessionKey": "", "state": "delta"}, "chat.sessionKey is empty"),
        ("agent", {"runId": "", "stream": "lifecycle", "data": {"phase": "start"}}, "agent.runId is empty"),
        ("sessions.changed", {"sessionKey": "k", "phase": "start", "runId": ""}, "runId is empty"),
    ],
)
def test_an_empty_id_never_opens_a_run(kind, payload, needle) -> None:
    """Issue 24 item 13: an event with ``runId: ""`` was decoded as a run's and opened one that names nothing.
    It is refused at decode: the reader logs it as a bad event and its seq is not fed, so the next good event
    reports a gap and the resync recovers whatever the Gateway really said."""
    with pytest.raises(ProtocolError, match=needle):
        parse_event(EventFrame(kind, payload))
