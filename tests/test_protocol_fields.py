"""The typed fields owc reads, one by one, from payloads shaped like the reference's (sections 4.1-4.3) and
from the real frames: each assertion would fail if the parser dropped or misread its field."""

from __future__ import annotations

import orjson

from owc.protocol import ChatEvent, EventFrame, SessionsChanged, decode_frame, parse_event
from owc.protocol.events import parse_agent, parse_chat, parse_sessions_changed

from conftest import load_log

KEY = "agent:main:openwebui-u1-3f0c9f2e-8a51-4b1e-9d7a-0c6f2b1e4a55"


def test_chat_delta_fields() -> None:
    e = parse_chat(
        {
            "runId": "r",
            "sessionKey": KEY,
            "seq": 7,
            "state": "delta",
            "deltaText": " world",
            "replace": True,
            "message": {"role": "assistant", "content": [{"type": "text", "text": "hello world"}]},
        }
    )
    assert (e.run_seq, e.delta_text, e.replace, e.text, e.is_terminal) == (7, " world", True, "hello world", False)
    plain = parse_chat({"runId": "r", "sessionKey": KEY, "state": "delta", "deltaText": "x"})
    assert plain.replace is False and plain.delta_text == "x"


def test_chat_error_and_terminal_fields() -> None:
    e = parse_chat(
        {
            "runId": "r",
            "sessionKey": KEY,
            "state": "error",
            "errorMessage": "model overloaded",
            "errorKind": "provider",
            "stopReason": "error",
        }
    )
    assert (e.is_terminal, e.error_message, e.error_kind, e.stop_reason) == (
        True,
        "model overloaded",
        "provider",
        "error",
    )
    y = parse_chat({"runId": "r", "sessionKey": KEY, "state": "final", "yielded": True, "spawnedBy": "agent:main:main"})
    assert (y.yielded, y.spawned_by) == (True, "agent:main:main")
    assert parse_chat({"runId": "r", "sessionKey": KEY, "state": "final"}).yielded is False


def test_agent_assistant_tool_and_heartbeat_fields() -> None:
    a = parse_agent(
        {
            "runId": "r",
            "stream": "assistant",
            "sessionKey": KEY,
            "seq": 3,
            "ts": 5,
            "isHeartbeat": True,
            "data": {"text": "hello", "delta": "lo", "itemId": "i1"},
        }
    )
    assert a.assistant is not None and (a.assistant.text, a.assistant.delta, a.assistant.item_id) == (
        "hello",
        "lo",
        "i1",
    )
    assert (a.run_seq, a.ts, a.is_heartbeat, a.via) == (3, 5, True, "agent")
    t = parse_agent(
        {
            "runId": "r",
            "stream": "tool",
            "data": {"phase": "result", "toolCallId": "c1", "name": "read", "result": "no", "isError": True},
        },
        via="session.tool",
    )
    assert t.tool is not None and (t.tool.phase, t.tool.tool_call_id, t.tool.name, t.tool.result, t.tool.is_error) == (
        "result",
        "c1",
        "read",
        "no",
        True,
    )
    assert t.via == "session.tool"


def test_sessions_changed_fields() -> None:
    e = parse_sessions_changed(
        {
            "sessionKey": KEY,
            "phase": "end",
            "runId": "internal",
            "clientRunId": "client",
            "ts": 9,
            "hasActiveRun": False,
            "activeRunIds": [],
            "status": "failed",
            "abortedLastRun": False,
            "lastRunId": "client",
            "lastRunError": "Claude Code process exited with code 143",
            "updatedAt": 11,
        }
    )
    assert e.effective_run_id == "client" and e.run_id == "internal"
    assert (e.status, e.last_run_error, e.active_run_ids, e.updated_at, e.is_lifecycle, e.is_settled) == (
        "failed",
        "Claude Code process exited with code 143",
        (),
        11,
        True,
        False,
    )
    start = parse_sessions_changed(
        {"sessionKey": KEY, "phase": "start", "runId": "r", "activeRunIds": None, "hasActiveRun": True}
    )
    assert start.active_run_ids is None and start.effective_run_id == "r"


def test_the_real_settled_push_is_settled() -> None:
    """frames_tool.jsonl: the real ``agent.input.settled`` push (connection A) and its phase end."""
    events = [
        parse_event(f)
        for f in (_frame(e) for e in load_log("frames_tool.jsonl") if e.get("conn") == "A" and e.get("dir") == "in")
        if f is not None
    ]
    changed = [e for e in events if isinstance(e, SessionsChanged)]
    settled = [e for e in changed if e.reason == "agent.input.settled"]
    assert settled and all(e.is_settled and not e.is_lifecycle for e in settled)
    run_id = next(e.run_id for e in changed if e.phase == "start")
    assert settled[0].last_run_id == run_id and settled[0].status == "done"
    end = next(e for e in changed if e.phase == "end")
    assert end.is_lifecycle and not end.is_settled and end.has_active_run is False
    # Reason pushes while the run is active are not settled.
    assert all(not e.is_settled for e in changed if e.reason in ("send", "participants", "agent.run.started"))
    final = [e for e in events if isinstance(e, ChatEvent) and e.state == "final"]
    assert final and final[0].run_id == run_id


def _frame(entry: dict) -> EventFrame | None:
    frame = entry.get("frame")
    if not isinstance(frame, dict) or frame.get("type") != "event":
        return None
    decoded = decode_frame(orjson.dumps(frame))
    return decoded if isinstance(decoded, EventFrame) else None


def test_ids_refuse_control_characters_only() -> None:
    """The id check's fast path (``str.isprintable``) changes nothing: an id with a character that is not
    printable but not a control character either (a no-break space, a zero-width space, a line separator) is
    taken as before; a control character anywhere is refused, including DEL."""
    import pytest

    from owc.protocol import ProtocolError
    from owc.protocol.fields import req_id

    for ok in ("run-1", "agent:main:openwebui-u1-x", "a\u00a0b", "a\u200bb", "a\u2028b", "é✓", " "):
        assert req_id({"id": ok}, "id", "x") == ok
    for bad in ("a\nb", "\x00", "a\x1fb", "a\x7fb", "\tlead", "\u00a0\x01"):
        with pytest.raises(ProtocolError, match="control character"):
            req_id({"id": bad}, "id", "x")


def test_an_empty_id_is_refused_required_or_optional() -> None:
    """Issue 24 item 13: ``runId: ""`` was taken as a run (one that names nothing). An id is never empty; an
    optional one that is absent is left out or ``null``, and stays ``None``."""
    import pytest

    from owc.protocol import ProtocolError
    from owc.protocol.fields import opt_id, req_id

    with pytest.raises(ProtocolError, match=r"x\.id is empty"):
        req_id({"id": ""}, "id", "x")
    with pytest.raises(ProtocolError, match=r"x\.id is empty"):
        opt_id({"id": ""}, "id", "x")
    assert opt_id({}, "id", "x") is None and opt_id({"id": None}, "id", "x") is None
