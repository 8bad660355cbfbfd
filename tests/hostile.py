"""A hostile Gateway for tests: the simulator (real handshake, real runs and transcripts) with two hooks.

* ``Wire``: what the simulator serialises is rewritten on its way out, marker by marker, so a frame can carry
  JSON the simulator cannot write itself (a lone ``\\udXXX`` escape, arguments nested past orjson's 254
  levels), wherever the marker sits: a run's text, a tool's arguments, a transcript, a session row.
* ``Hostile``: raw messages injected into owc's connection, between the simulator's own frames, numbered
  with the connection's ``seq`` as the Gateway would number them (or with any ``seq`` a plan wants).

And the oracle of a plan: the good runs are finished messages with their whole text, and owc never closed
its connection (``owc_deaths``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import attrs
import orjson
import pytest

from owc.sim import delivery
from owc.sim.delivery import SimConn

#: A lone high surrogate as ``JSON.stringify`` writes it.
LONE = "\\ud83d"


class Wire:
    """Rewrites the simulator's outgoing JSON text: ``"<<NAME>>"`` (a whole JSON string) becomes raw JSON,
    and ``<<NAME>>`` inside a string becomes raw escape text."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.values: dict[str, str] = {}
        self.strings: dict[str, str] = {}
        real = delivery.dumps

        def dumps(obj: Any) -> str:
            text = real(obj)
            if "<<" not in text:
                return text
            for name, raw in self.values.items():
                text = text.replace(f'"<<{name}>>"', raw)
            for name, raw in self.strings.items():
                text = text.replace(f"<<{name}>>", raw)
            return text

        monkeypatch.setattr(delivery, "dumps", dumps)

    def value(self, name: str, raw_json: str) -> str:
        """A marker value that goes out as ``raw_json``."""
        self.values[name] = raw_json
        return f"<<{name}>>"

    def string(self, name: str, raw_escape: str) -> str:
        """A marker to put inside a string; it goes out as ``raw_escape`` (e.g. ``LONE``)."""
        self.strings[name] = raw_escape
        return f"<<{name}>>"


def nested(depth: int, leaf: str = "1") -> str:
    """JSON text of objects nested ``depth`` deep."""
    return '{"a":' * depth + leaf + "}" * depth


class Hostile:
    """Inject raw messages into the simulator's connection to owc (instance ``name``)."""

    def __init__(self, sim: Any, name: str = "A") -> None:
        self.sim = sim
        self.name = name
        self.sent = 0

    @property
    def conn(self) -> SimConn:
        return self.sim.connection(self.name)

    def raw(self, message: str | bytes) -> None:
        """One WebSocket message as is: ``bytes`` go as a binary message."""
        conn = self.conn
        assert conn.send is not None
        conn.send.send_nowait(message)
        self.sent += 1

    def next_seq(self) -> int:
        """Spend the connection's next envelope number, as the Gateway does for every event it sends."""
        conn = self.conn
        conn.seq += 1
        return conn.seq

    def send(self, spec: Spec) -> None:
        self.raw(spec.render(self.next_seq))

    def event(self, event: Any, payload: Any, *, seq: Any = "next", **envelope: Any) -> None:
        frame: dict[str, Any] = {"type": "event", "event": event, "payload": payload}
        if seq == "next":
            frame["seq"] = self.next_seq()
        elif seq is not None:
            frame["seq"] = seq
        frame.update(envelope)
        self.raw(orjson.dumps(frame).decode())


def owc_deaths(records: list[logging.LogRecord]) -> list[str]:
    """Log lines that say owc closed its connection, failed a writer, or crashed in a handler."""
    bad = (
        "gateway.closed",
        "gateway.connection_failed",
        "gateway.handler_failed",
        "gateway.subscribe_failed",
        "gateway.resync_failed",
        "gateway.dead_socket",
        "runs.writer_failed",
        "render.transcript_failed",
    )
    return [r.getMessage()[:300] for r in records if r.getMessage().startswith(bad)]


# ------------------------------------------------------------------------------------------------ plans

#: Every payload field owc reads, by event kind (``owc/protocol/events.py``), beyond those a template has.
READ_FIELDS: dict[str, tuple[str, ...]] = {
    "chat": (
        "runId", "sessionKey", "state", "seq", "deltaText", "replace", "message", "message.content",
        "message.content.0", "message.content.0.text", "message.content.0.type", "yielded", "stopReason",
        "errorMessage", "errorKind", "phase", "agentId", "spawnedBy",
    ),
    "agent": (
        "runId", "stream", "data", "sessionKey", "seq", "ts", "isHeartbeat", "agentId", "spawnedBy",
        "data.phase", "data.stopReason", "data.aborted", "data.error", "data.text", "data.delta", "data.itemId",
        "data.toolCallId", "data.name", "data.args", "data.result", "data.isError", "data.kind", "data.title",
        "data.status",
    ),
    "sessions.changed": (
        "sessionKey", "phase", "reason", "runId", "clientRunId", "ts", "hasActiveRun", "activeRunIds",
        "activeRunIds.0", "status", "abortedLastRun", "lastRunId", "lastRunError", "updatedAt", "agentId",
        "session",
    ),
    "tick": ("ts",),
    "shutdown": ("reason", "restartExpectedMs"),
    "connect.challenge": ("nonce", "ts"),
}  # fmt: skip
READ_FIELDS["session.tool"] = READ_FIELDS["agent"]

#: Raw JSON values (text) no simulator can write: a lone surrogate, nesting past orjson's limits.
RAW_VALUES = {
    "lone": '"cut \\ud83d here"',
    "lone_low": '"\\ude00"',
    "deep_1000": nested(1000, '"x"'),
    "deep_2000": nested(2000, '"x"'),
}


def wrong_values() -> list[Any]:
    """A value of every JSON type and some odd sizes; strings stand for a wrong type where a field is not
    a string, and for odd content where it is."""
    return [
        None, True, False, 0, -1, 1.5, 2**53 + 1, 2**63 - 1, -(2**63), 1e300,
        "", "x", "\ufffd", "\x00", "y" * 20_000,
        [], [None], [1, "a"], {}, {"x": {"y": [1]}},
    ]  # fmt: skip


def paths_of(payload: Any, prefix: str = "", depth: int = 3) -> list[str]:
    """Every field path of a template payload (list items by their first index), ``depth`` levels down."""
    out: list[str] = []
    if depth == 0:
        return out
    if isinstance(payload, dict):
        for key, value in payload.items():
            path = f"{prefix}{key}"
            out.append(path)
            out += paths_of(value, path + ".", depth - 1)
    elif isinstance(payload, list) and payload:
        out.append(f"{prefix}0")
        out += paths_of(payload[0], f"{prefix}0.", depth - 1)
    return out


def set_path(obj: Any, path: str, value: Any) -> Any:
    """A deep copy of ``obj`` with ``path`` set to ``value`` (missing containers made on the way)."""
    obj = orjson.loads(orjson.dumps(obj))
    keys = path.split(".")
    node = obj
    for key in keys[:-1]:
        nxt = node[int(key)] if isinstance(node, list) and key.isdigit() and int(key) < len(node) else None
        if isinstance(node, dict):
            nxt = node.get(key)
            if not isinstance(nxt, (dict, list)):
                nxt = node[key] = {}
        elif not isinstance(nxt, (dict, list)):
            return obj  # cannot descend here: leave the template as it is
        node = nxt
    last = keys[-1]
    if isinstance(node, list):
        if last.isdigit() and int(last) < len(node):
            node[int(last)] = value
        else:
            node.append(value)
    else:
        node[last] = value
    return obj


#: A frame's ``seq`` to be numbered when it is sent (the connection's next number, as the Gateway does).
NEXT = "<<next>>"


@attrs.frozen
class Spec:
    """One frame of a plan: JSON whose ``"<<name>>"`` strings become raw text (``RAW_VALUES``) and whose
    ``seq`` may be ``NEXT``; or a raw message sent as is."""

    frame: dict[str, Any] | None = None
    message: str | bytes | None = None

    def render(self, next_seq: Callable[[], int]) -> str | bytes:
        if self.message is not None:
            return self.message
        assert self.frame is not None
        frame = self.frame
        if frame.get("seq") == NEXT:
            frame = {**frame, "seq": next_seq()}
        text = orjson.dumps(frame).decode()
        if "<<" in text:
            for name, value in RAW_VALUES.items():
                text = text.replace(f'"<<{name}>>"', value)
        return text


def event(kind: Any, payload: Any, seq: Any = NEXT) -> Spec:
    return Spec({"type": "event", "event": kind, "payload": payload, "seq": seq})


def envelope_frames() -> list[Spec]:
    """Frames wrong as a whole: not JSON, not an object, a wrong envelope, requests and replies nobody asked
    for, odd encodings, unknown events and the seq games."""
    raw: list[str | bytes] = [
        "", " ", "{", "}", "null", "true", "1", '"event"', "[]", '[{"type":"event"}]', "{not json",
        '{"type":"event","event":"tick","payload":{}', '{"type":"event","event":"tick","payload":{}}garbage',
        "NaN", '{"type":"event","event":"tick","payload":{"ts":NaN}}',
        '{"type":"event","event":"tick","payload":{"ts":1e999}}',
        b'{"type":"event","event":"tick","payload":{}}', b'\xff\xfe{"type":"event"}', b"\x00\x01\x02",
        '\ufeff{"type":"event","event":"tick","payload":{}}',
        '{"type":"event","event":"tick","payload":{"t":"\\ud83d"}}',
        '{"type":"res","id":"nobody-asked","ok":true,"payload":{}}',
        '{"type":"res","id":"nobody-asked","ok":false,"error":{"code":"X","message":"y"}}',
        '{"type":"res","id":"nobody-asked","ok":false,"error":"oops"}',
        '{"type":"res","id":7,"ok":true}', '{"type":"res","ok":true}', '{"type":"res","id":"x","ok":"yes"}',
        '{"type":"req","id":"1","method":"chat.send","params":{}}', '{"type":"req"}',
        '{"type":"hello-ok"}', '{"type":7}', '{"type":null}', '{"type":"event"}', '{"type":"event","event":null}',
        '{"type":"event","event":"tick","payload":[]}', '{"type":"event","event":"tick","payload":"x"}',
        '{"type":"event","event":"tick","payload":null}', '{"type":"event","event":"tick","stateVersion":5}',
        '{"type":"event","event":"tick","stateVersion":{"presence":"x"}}',
        '{"type":"event","event":"' + "e" * 10_000 + '","payload":{}}',
        '{"type":"event","event":"tick","payload":' + nested(1500, "{}") + "}",
        '{"type":"event","event":"tick","payload":{"a":' + "[" * 5000 + "]" * 5000 + "}}",
        '{"type":"event","event":"tick","payload":{"a":' + "[" * 5000 + "}}",  # unclosed: not JSON even cut
    ]  # fmt: skip
    out = [Spec(message=m) for m in raw]
    for kind in ("tick", "presence.delta", "health", "x.unknown", "session.message", "chat.side_result"):
        out.append(event(kind, {"a": 1}))
    for seq in ("3", 1.5, -1, None, True, [], {}, 2**63 - 1, 0, 1, 2**53 + 7, "<<big>>"):
        out.append(event("tick", {"ts": 1}, seq))
    return out


RAW_VALUES["big"] = "1" + "0" * 30


def payload_frames(
    templates: list[dict[str, Any]], *, decoy_key: str, run_id: str | None = None, depth: int = 3
) -> list[Spec]:
    """Every field owc reads, and every field of every template event ``depth`` levels down, with every wrong
    value, on a decoy session (a key no chat owns, or a victim chat's, whose run ``run_id`` they name)."""
    out: list[Spec] = []
    values = [*wrong_values(), *(f"<<{n}>>" for n in RAW_VALUES)]
    for template in templates:
        kind = template["event"]
        if run_id is not None and kind == "sessions.changed":
            continue  # a readable row of the victim's session may say, truly, that it has no run: not bad input
        payload = dict(template.get("payload") or {})
        for key in ("sessionKey", "key"):
            if isinstance(payload.get(key), str):
                payload[key] = decoy_key
        if run_id is not None and isinstance(payload.get("runId"), str):
            payload["runId"] = run_id
            # Not the run's end: a readable terminal would end the victim run truly, before the bad frames
            # could reach its writer.
            if kind == "chat":
                payload["state"] = "delta"
            if isinstance(payload.get("data"), dict) and payload["data"].get("phase") in ("end", "error"):
                payload["data"] = {**payload["data"], "phase": "model"}
        for path in sorted(set(paths_of(payload, depth=depth)) | set(READ_FIELDS.get(kind, ()))):
            for value in values:
                if path == "sessionKey" and isinstance(value, str) and not value.startswith("<<"):
                    continue  # a readable key names another session: not a wrong type
                if run_id is not None and path in ("runId", "clientRunId") and isinstance(value, str):
                    continue  # a readable id in a chat's session names another run (one owc would show)
                mutated = set_path(payload, path, value)
                if run_id is not None and path in _CARD_FIELDS and isinstance(mutated.get("data"), dict):
                    # A card of its own for each value: the renderer keeps a call's first arguments.
                    mutated["data"]["toolCallId"] = f"call-{len(out)}"
                out.append(event(kind, mutated))
    return out


#: Tool fields whose every value must reach a card of its own.
_CARD_FIELDS = frozenset({"data.args", "data.result", "data.name", "data.isError"})


def refused_frames(templates: list[dict[str, Any]], *, key: str, run_id: str) -> list[Spec]:
    """Events naming a good run whose run id or session key cannot be read: each must be refused whole."""
    out: list[Spec] = []
    for template in templates:
        payload = template.get("payload") or {}
        if "runId" not in payload:
            continue
        good = {**payload, "sessionKey": key, "runId": run_id}
        for value in wrong_values():
            if isinstance(value, str):
                continue
            out.append(event(template["event"], {**good, "runId": value}))
            if value is not None:
                out.append(event(template["event"], {**good, "sessionKey": value}))
    return out


class Recorder:
    """Records every frame the simulator sends (after any ``Wire`` rewriting installed before it)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.frames: list[dict[str, Any]] = []
        self.on = True
        real = delivery.dumps

        def dumps(obj: Any) -> str:
            text = real(obj)
            if self.on:
                self.frames.append(orjson.loads(text))
            return text

        monkeypatch.setattr(delivery, "dumps", dumps)

    def templates(self, *, fine: bool = True) -> list[dict[str, Any]]:
        """One event frame per shape seen (event kind, stream, chat state, phases; only kind and stream unless
        ``fine``): the shapes the mutations start from."""
        seen: dict[tuple[Any, ...], dict[str, Any]] = {}
        for frame in self.frames:
            if frame.get("type") != "event":
                continue
            payload = frame.get("payload") or {}
            data = payload.get("data") if isinstance(payload.get("data"), dict) else {}
            shape: tuple[Any, ...] = (frame["event"], payload.get("stream"))
            if fine:
                shape += (payload.get("state"), data.get("phase"), payload.get("phase"))
            seen.setdefault(shape, frame)
        return list(seen.values())
