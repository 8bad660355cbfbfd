"""The protocol 4 frame envelope: request, response, event; decoded and encoded with orjson.

Shapes (Gateway 2026.9.6, ``RequestFrameSchema`` / ``ResponseFrameSchema`` / ``EventFrameSchema``)::

    {type:"req",   id, method, params?}
    {type:"res",   id, ok, payload?, error?: {code, message, details?, retryable?, retryAfterMs?}}
    {type:"event", event, payload?, seq?, stateVersion?, recipientProfileId?}

``decode_frame`` is total: it returns a frame or raises one ``ProtocolError`` that says what was wrong.
Envelope keys owc does not know are kept in ``extra`` so that re-encoding loses nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import orjson

from owc.protocol import fields as f
from owc.protocol.errors import ErrorShape, ProtocolError

#: ``MAX_PAYLOAD_BYTES`` of the real Gateway (``server-constants``), also sent as ``hello-ok.policy.maxPayload``.
DEFAULT_MAX_PAYLOAD = 26_214_400


@attrs.frozen
class Request:
    id: str
    method: str
    params: Any = None
    extra: Mapping[str, Any] = attrs.field(factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "req", "id": self.id, "method": self.method}
        if self.params is not None:
            out["params"] = self.params
        out.update(self.extra)
        return out


@attrs.frozen
class Response:
    id: str
    ok: bool
    payload: Any = None
    error: ErrorShape | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "res", "id": self.id, "ok": self.ok}
        if self.payload is not None:
            out["payload"] = self.payload
        if self.error is not None:
            out["error"] = self.error.to_json()
        out.update(self.extra)
        return out


@attrs.frozen
class EventFrame:
    """An event envelope. ``seq`` is the per-connection envelope sequence (absent on ``connect.challenge``);
    it is not ``payload.seq``, which is the agent run's own sequence."""

    event: str
    payload: Mapping[str, Any] = attrs.field(factory=dict, repr=False)
    seq: int | None = None
    state_version: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "event", "event": self.event, "payload": self.payload}
        if self.seq is not None:
            out["seq"] = self.seq
        if self.state_version is not None:
            out["stateVersion"] = self.state_version
        out.update(self.extra)
        return out


Frame = Request | Response | EventFrame

_REQ_KEYS = frozenset({"type", "id", "method", "params"})
_RES_KEYS = frozenset({"type", "id", "ok", "payload", "error"})
_EVENT_KEYS = frozenset({"type", "event", "payload", "seq", "stateVersion"})


def _extra(d: Mapping[str, Any], known: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in known}


def _error_shape(value: object) -> ErrorShape:
    d = f.obj(value, "res.error")
    return ErrorShape(
        code=f.req_str(d, "code", "res.error"),
        message=f.opt_str(d, "message", "res.error") or "",
        details=d.get("details"),
        retryable=bool(f.opt_bool(d, "retryable", "res.error")),
        retry_after_ms=f.opt_int(d, "retryAfterMs", "res.error"),
    )


def frame_from_json(d: object) -> Frame:
    """Build a typed envelope from an already-decoded JSON value."""
    d = f.obj(d, "frame")
    kind = d.get("type")
    if kind is None:
        raise ProtocolError("frame lacks required field 'type'")
    if kind == "event":
        seq = d.get("seq")
        if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int) or seq < 0):
            raise ProtocolError("event.seq must be a non-negative integer")
        payload = d.get("payload")
        return EventFrame(
            event=f.req_str(d, "event", "event"),
            payload={} if payload is None else f.obj(payload, "event.payload"),
            seq=seq,
            state_version=f.opt_obj(d, "stateVersion", "event"),
            extra=_extra(d, _EVENT_KEYS),
        )
    if kind == "res":
        ok = d.get("ok")
        if not isinstance(ok, bool):
            raise ProtocolError("res lacks required boolean field 'ok'")
        error = d.get("error")
        return Response(
            id=f.req_str(d, "id", "res"),
            ok=ok,
            payload=d.get("payload"),
            error=_error_shape(error) if error is not None else None,
            extra=_extra(d, _RES_KEYS),
        )
    if kind == "req":
        return Request(
            id=f.req_str(d, "id", "req"),
            method=f.req_str(d, "method", "req"),
            params=d.get("params"),
            extra=_extra(d, _REQ_KEYS),
        )
    raise ProtocolError("frame type is not one of 'req', 'res', 'event'")


def decode_frame(data: str | bytes, *, max_payload: int | None = DEFAULT_MAX_PAYLOAD) -> Frame:
    """Decode one WebSocket message into a frame.

    ``max_payload`` is the peer's ``policy.maxPayload``; a larger message is refused before parsing, so a
    hostile or broken server cannot make owc parse an unbounded document.
    """
    size = len(data.encode() if isinstance(data, str) else data)
    if max_payload is not None and size > max_payload:
        raise ProtocolError(f"frame of {size} bytes exceeds policy.maxPayload of {max_payload} bytes")
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"frame is not valid JSON ({exc.msg} at position {exc.pos})") from None
    return frame_from_json(value)


def encode_frame(frame: Frame) -> bytes:
    return orjson.dumps(frame.to_json())
