"""Issue 32: ``parse_chat`` and ``parse_agent`` read a payload the fast way (each field once, exact types) and leave
anything they do not vouch for to the checked parse. The oracle is the checked parse itself, field by field: for
any payload (every field absent, null, or of any JSON type; ids empty, too long, with control characters or
characters ``isprintable`` refuses; numbers as floats; booleans where numbers go), the fast way gives exactly the
checked parse's event, or raises exactly its error. And the fast way is taken on every real frame, so the test is
not vacuous (the checked parse is then never called)."""

from __future__ import annotations

from typing import Any

import attrs
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from owc.protocol import events as events_module
from owc.protocol.errors import ProtocolError
from owc.protocol.events import AgentEvent, ChatEvent, parse_agent, parse_chat

from conftest import FRAME_LOGS, load_log

ID = st.one_of(
    st.sampled_from(["r1", "agent:main:openwebui-u-c", "", "a\nb", "x" * 600, "\u2028", "é", "a\x7fb"]),
    st.text(min_size=1, max_size=12),
)
ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 2**40),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=6),
    st.just({"a": 1}),
    st.just([1, "x"]),
)
CHAT_KEYS = {
    "runId": ID,
    "sessionKey": ID,
    "state": st.one_of(st.sampled_from(["delta", "final", "error", "aborted", "status"]), ANY),
    "seq": ANY,
    "deltaText": ANY,
    "replace": ANY,
    "message": st.one_of(ANY, st.just({"role": "assistant", "content": [{"type": "text", "text": "hi"}]})),
    "yielded": ANY,
    "stopReason": ANY,
    "errorMessage": ANY,
    "errorKind": ANY,
    "phase": ANY,
    "agentId": ANY,
    "spawnedBy": ANY,
}
DATA = st.one_of(
    ANY,
    st.fixed_dictionaries(
        {},
        optional={
            "text": ANY,
            "delta": ANY,
            "itemId": ANY,
            "phase": st.one_of(st.sampled_from(["start", "end", "result", "update"]), ANY),
            "toolCallId": st.one_of(ID, ANY),
            "name": ANY,
            "kind": ANY,
            "isError": ANY,
            "stopReason": ANY,
            "aborted": ANY,
            "error": ANY,
        },
    ),
)
AGENT_KEYS = {
    "runId": ID,
    "stream": st.one_of(st.sampled_from(["assistant", "lifecycle", "tool", "item", "usage"]), ANY),
    "data": DATA,
    "sessionKey": st.one_of(ID, ANY),
    "seq": ANY,
    "ts": ANY,
    "isHeartbeat": ANY,
    "agentId": ANY,
    "spawnedBy": ANY,
    "projectSessionLifecycle": ANY,
    "controlUiVisible": ANY,
}


def _fields(event: Any) -> dict[str, Any]:
    out = {a.alias: getattr(event, a.alias) for a in attrs.fields(type(event)) if a.alias != "epoch"}
    out["raw"] = event.raw  # the same payload object: compared by identity below
    if isinstance(event, ChatEvent):
        out["message"] = event.message
    if isinstance(event, AgentEvent) and event.assistant is not None:
        out["assistant"] = (event.assistant.text, event.assistant.delta, event.assistant.item_id)
    return out


def _outcome(parse: Any, payload: dict[str, Any], *args: Any) -> Any:
    try:
        event = parse(payload, *args)
    except ProtocolError as exc:
        return ("refused", str(exc))
    fields = _fields(event)
    assert fields.pop("raw") is payload
    return ("event", type(event), fields)


#: Each field as a real frame has it (absent, null, or its type).
VALID_STR = st.one_of(st.none(), st.text(max_size=6))
VALID_BOOL = st.one_of(st.none(), st.booleans())
VALID_INT = st.one_of(st.none(), st.integers(0, 2**40))
VALID_ID = st.sampled_from(["r1", "agent:main:openwebui-u-c", "é"])
VALID_CHAT = {
    "runId": VALID_ID,
    "sessionKey": VALID_ID,
    "state": st.sampled_from(["delta", "final", "error", "aborted", "status"]),
    "seq": VALID_INT,
    "deltaText": VALID_STR,
    "replace": VALID_BOOL,
    "message": st.one_of(st.none(), st.just({"role": "assistant", "content": [{"type": "text", "text": "hi"}]})),
    "yielded": VALID_BOOL,
    "stopReason": VALID_STR,
    "errorMessage": VALID_STR,
    "errorKind": VALID_STR,
    "phase": VALID_STR,
    "agentId": VALID_STR,
    "spawnedBy": VALID_STR,
}
VALID_AGENT = {
    "runId": VALID_ID,
    "stream": st.sampled_from(["assistant", "lifecycle", "tool", "item", "usage"]),
    "data": st.fixed_dictionaries(
        {},
        optional={
            "text": VALID_STR,
            "delta": VALID_STR,
            "itemId": VALID_STR,
            "phase": st.sampled_from(["start", "end", "result", "update"]),
            "toolCallId": VALID_ID,
            "name": VALID_STR,
            "kind": VALID_STR,
            "isError": VALID_BOOL,
        },
    ),
    "sessionKey": st.one_of(st.none(), VALID_ID),
    "seq": VALID_INT,
    "ts": VALID_INT,
    "isHeartbeat": VALID_BOOL,
    "agentId": VALID_STR,
    "spawnedBy": VALID_STR,
    "projectSessionLifecycle": VALID_BOOL,
    "controlUiVisible": VALID_BOOL,
}


def _payloads(valid: dict[str, Any], anything: dict[str, Any], required: tuple[str, ...]) -> Any:
    """A real-looking payload (its required fields, each other one absent or of its type) with up to two fields
    made anything at all: the fast way must be exact both where it vouches and where it must not."""
    base = st.fixed_dictionaries(
        {k: v for k, v in valid.items() if k in required},
        optional={k: v for k, v in valid.items() if k not in required},
    )
    broken = st.dictionaries(st.sampled_from(sorted(anything)), st.one_of(*anything.values()), max_size=2)
    return st.tuples(base, broken).map(lambda pair: {**pair[0], **pair[1]})


CHAT_REQUIRED = ("runId", "sessionKey", "state")
AGENT_REQUIRED = ("runId", "stream", "data")


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(
    payload=st.one_of(_payloads(VALID_CHAT, CHAT_KEYS, CHAT_REQUIRED), st.fixed_dictionaries({}, optional=CHAT_KEYS))
)
def test_parse_chat_is_the_checked_parse(payload: dict[str, Any]) -> None:
    assert _outcome(parse_chat, payload) == _outcome(events_module._parse_chat_checked, payload)


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(
    payload=st.one_of(
        _payloads(VALID_AGENT, AGENT_KEYS, AGENT_REQUIRED), st.fixed_dictionaries({}, optional=AGENT_KEYS)
    ),
    via=st.sampled_from(["agent", "session.tool"]),
)
def test_parse_agent_is_the_checked_parse(payload: dict[str, Any], via: str) -> None:
    assert _outcome(parse_agent, payload, via) == _outcome(events_module._parse_agent_checked, payload, via)


def test_every_real_chat_and_agent_frame_takes_the_fast_way(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any) -> Any:
        raise AssertionError(f"the checked parse was called on a real frame: {args[0]}")

    monkeypatch.setattr(events_module, "_parse_chat_checked", refuse)
    monkeypatch.setattr(events_module, "_parse_agent_checked", refuse)
    seen = {"chat": 0, "agent": 0, "session.tool": 0}
    for name in FRAME_LOGS:
        for record in load_log(name):
            frame = record.get("frame")
            if not isinstance(frame, dict) or frame.get("event") not in seen:
                continue
            payload = orjson.loads(orjson.dumps(frame["payload"]))
            if frame["event"] == "chat":
                parse_chat(payload)
            else:
                parse_agent(payload, frame["event"])
            seen[frame["event"]] += 1
    assert seen["chat"] > 20 and seen["agent"] > 20
