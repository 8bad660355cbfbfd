"""The protocol 4 frame envelope: request, response, event; decoded and encoded with orjson.

Shapes (Gateway 2026.9.6, ``RequestFrameSchema`` / ``ResponseFrameSchema`` / ``EventFrameSchema``)::

    {type:"req",   id, method, params?}
    {type:"res",   id, ok, payload?, error?: {code, message, details?, retryable?, retryAfterMs?}}
    {type:"event", event, payload?, seq?, stateVersion?, recipientProfileId?}

``decode_frame`` is total: it returns a frame or raises one ``ProtocolError`` that says what was wrong.
Envelope keys owc does not know are kept in ``extra`` so that re-encoding loses nothing.

Valid JSON that orjson refuses is repaired, not dropped (``repair_json``): a Gateway written in JavaScript
emits lone UTF-16 surrogates as ``\\udXXX`` escapes (``JSON.stringify`` of a string cut inside an emoji), and one
such character in a session row, a transcript or a run's cumulative text would otherwise cost the whole frame,
and with it every later frame that repeats the text. The fast path stays orjson alone; repairs run only after
it fails.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

import attrs
import orjson

from owc.protocol import fields as f
from owc.protocol.errors import ErrorShape, FrameTooLarge, ProtocolError

log = logging.getLogger("owc.protocol")

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


@attrs.define  # built per frame: not frozen, for the cost (owc.protocol.events, above ChatEvent)
class EventFrame:
    """An event envelope. ``seq`` is the per-connection envelope sequence (absent on ``connect.challenge``);
    it is not ``payload.seq``, which is the agent run's own sequence."""

    event: str
    payload: Mapping[str, Any] = attrs.field(factory=dict, repr=False)
    seq: int | None = None
    state_version: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "event", "event": self.event, "payload": materialized(self.payload)}
        if self.seq is not None:
            out["seq"] = self.seq
        if self.state_version is not None:
            out["stateVersion"] = self.state_version
        out.update(self.extra)
        return out


Frame = Request | Response | EventFrame


@attrs.frozen(eq=False)
class Deferred:
    """A JSON value kept as its text until someone reads it: a ``chat`` delta's cumulative ``message``
    (``decode_frame``'s fast path). The Gateway sends the whole reply so far in every delta; the renderer needs it
    only at a gap, a replace or the end, so parsing it on every frame made a long reply quadratic."""

    #: Compared by identity (``eq=False`` on the class): equal text is not looked at to say two frames agree.
    text: bytes | memoryview = attrs.field(repr=lambda text: f"<{len(text)} bytes>")

    def load(self) -> Any:
        """The value; None when the text is not JSON even after ``repair_json`` (said once in the log: the
        frame around it was good, so the delta it came with stands)."""
        try:
            return orjson.loads(self.text)
        except orjson.JSONDecodeError as exc:
            try:
                return _loads_repaired(self.text, exc)
            except ProtocolError as error:
                log.warning("protocol.snapshot_unreadable bytes=%d error=%s", len(self.text), error)
                return None


def materialized(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    """``payload`` with each ``Deferred`` value read (a ``chat`` delta's ``message``, an ``assistant`` event's
    ``data.text``, one level down): the payload exactly as the frame carried it."""
    if not any(type(value) is Deferred or type(value) is dict for value in payload.values()):
        return payload
    out: dict[str, Any] = {}
    for key, value in payload.items():
        if type(value) is Deferred:
            value = value.load()
        elif type(value) is dict and any(type(inner) is Deferred for inner in value.values()):
            value = {k: v.load() if type(v) is Deferred else v for k, v in value.items()}
        out[key] = value
    return out


_REQ_KEYS = frozenset({"type", "id", "method", "params"})
_RES_KEYS = frozenset({"type", "id", "ok", "payload", "error"})
_EVENT_KEYS = frozenset({"type", "event", "payload", "seq", "stateVersion"})


def _extra(d: Mapping[str, Any], known: frozenset[str]) -> dict[str, Any]:
    if d.keys() <= known:  # the usual frame: nothing extra (a subset test in C, not a loop per key)
        return {}
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
    if max_payload is not None and len(data) * (4 if isinstance(data, str) else 1) > max_payload:
        # A str is measured in UTF-8 only when it might be too large (a code point is at most 4 bytes).
        size = len(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
        if size > max_payload:
            raise FrameTooLarge(size, max_payload)
    if type(data) is bytes and len(data) >= FAST_PATH_FROM_BYTES:
        if data.startswith(_CHAT_DELTA_HEAD):
            fast = _chat_delta(data)
            if fast is not None:
                return fast
        elif data.startswith(_AGENT_HEAD):
            fast = _assistant_text(data)
            if fast is not None:
                return fast
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        value = _loads_repaired(data, exc)
    if type(value) is dict and value.get("type") == "event":
        # The common frame, checked as ``frame_from_json`` checks it, with nothing to look at twice: a name, an
        # object payload, a seq that is a non-negative int, no ``stateVersion``, no key owc does not know.
        event, payload, seq = value.get("event"), value.get("payload"), value.get("seq")
        if (
            type(event) is str
            and type(payload) is dict
            and (seq is None or (type(seq) is int and seq >= 0))
            and "stateVersion" not in value
            and value.keys() <= _EVENT_KEYS
        ):
            return EventFrame(event, payload, seq, None, {})
    return frame_from_json(value)


#: Below this size a frame is parsed whole: its two small parses and the guards cost more than one parse of a
#: short snapshot (measured: even at ~6 KB, 12.6 us either way; 12 us against 198 us at 500 KB).
FAST_PATH_FROM_BYTES = 6 * 1024
#: The start of every ``chat`` event the real Gateway 2026.9.6 sends (and the simulator), compact JSON.
_CHAT_DELTA_HEAD = b'{"type":"event","event":"chat","payload":{'
_MESSAGE_KEY = b',"message":{"role":"assistant",'
#: A delta's payload keys before its ``message`` that the fast path knows (the real order: ``runId``,
#: ``sessionKey``, ``agentId``, ``seq``, ``state``, ``deltaText``); any other key takes the full parse.
_DELTA_KEYS = frozenset({"runId", "sessionKey", "agentId", "seq", "state", "deltaText", "phase", "spawnedBy"})
#: How the real ``message`` object ends (``{"role":"assistant","content":[...],"timestamp":<ms>}``), the payload
#: closing right after it: the guard that ``message`` is the payload's last key (``_ends_as_a_message``).
_TIMESTAMP = b',"timestamp":'


def _chat_delta(data: bytes) -> EventFrame | None:
    """The fast path for a ``chat`` delta (issue 32): the envelope and the payload are parsed, the cumulative
    ``message`` is kept as its text (``Deferred``). Measured on 2026.9.6's frames: ``seq``, ``state`` and
    ``deltaText`` come before ``message``, which is the payload's last key, and the envelope's ``seq`` follows it.

    None (take the full parse) unless every guard holds: the payload before ``message`` parses and has only the
    known keys, with ``state`` "delta" and a non-empty ``deltaText`` (a terminal or a replace needs the snapshot
    anyway); the message starts as the real one does and ends with its ``timestamp`` right before the payload
    closes; what follows is the envelope's ``seq`` and nothing owc does not know. A JSON string cannot hold an
    unescaped quote, so neither key pattern can come from inside a text."""
    cut = data.find(_MESSAGE_KEY, len(_CHAT_DELTA_HEAD))
    end = data.rfind(b'},"seq":')
    if cut < 0 or end <= cut:
        return None
    try:
        head = orjson.loads(data[:cut] + b"}}")
        tail = orjson.loads(b"{" + data[end + 2 :])
    except orjson.JSONDecodeError:
        return None
    payload = head.get("payload") if type(head) is dict else None
    if (
        len(head) != 3
        or type(payload) is not dict
        or payload.get("state") != "delta"
        or not payload.keys() <= _DELTA_KEYS
        or type(payload.get("deltaText")) is not str
        or not payload["deltaText"]
        or type(tail) is not dict
        or tail.keys() != {"seq"}
        or not _ends_as_a_message(data, cut, end)
    ):
        return None
    seq = tail["seq"]
    if type(seq) is not int or seq < 0:
        return None
    # A view, not a copy: the snapshot's bytes stay where the frame's are, read only if someone asks.
    payload["message"] = Deferred(memoryview(data)[cut + len(b',"message":') : end])
    return EventFrame(event="chat", payload=payload, seq=seq)


#: The start of every ``agent`` event of 2026.9.6 (and the simulator's): ``runId`` is the payload's first key.
_AGENT_HEAD = b'{"type":"event","event":"agent","payload":{"runId":"'
#: What follows the run id in an ``assistant`` stream event, up to the opening quote's end of the cumulative text.
_ASSISTANT_TEXT = b'","stream":"assistant","data":{"text":"'
#: How far after the head the stream's key is looked for: a run id's JSON (at most ``MAX_ID_CHARS`` characters,
#: each at most a 6-byte escape) and then some; past it the frame takes the full parse.
_RUN_ID_WINDOW = 4096
#: Where the text ends: the ``delta`` key follows it in every real ``assistant`` event.
_DELTA_AFTER_TEXT = b'","delta":"'
#: The keys of an ``agent`` payload and of an ``assistant`` stream's data the fast path knows; any other key takes
#: the full parse (a key it does not know could sit anywhere, even between ``text`` and ``delta``).
_AGENT_KEYS = frozenset(
    {
        "runId", "stream", "data", "sessionKey", "agentId", "seq", "ts", "isHeartbeat", "spawnedBy",
        "projectSessionLifecycle", "controlUiVisible",
    }
)  # fmt: skip
_ASSISTANT_DATA_KEYS = frozenset({"text", "delta", "itemId", "mediaUrls"})
#: An event envelope with nothing but what a real ``agent`` event carries (no ``stateVersion``, nothing unknown).
_ENVELOPE_KEYS = _EVENT_KEYS - {"stateVersion"}


def _assistant_text(data: bytes) -> EventFrame | None:
    """The fast path for an ``agent`` event of the ``assistant`` stream (issue 32, goal 2): its ``data.text`` is the
    whole reply so far, as a ``chat`` delta's snapshot is, and owc never reads it (the renderer takes the text from
    ``chat``; of ``assistant`` events it reads the run's seq and whether ``mediaUrls`` announce files). Measured on
    2026.9.6's frames: ``{"runId":..,"stream":"assistant","data":{"text":..,"delta":..,"itemId":..}, ..}``.

    The text is cut out and kept as its JSON (a ``Deferred`` string: no copy); everything else (the run id, the
    delta, the item, the media URLs, the session key, both seqs) is parsed. Found in constant time, whatever the
    text's length: ``"text":"`` right after the run id (the head before it parses, so that quote opens a string),
    and the last ``","delta":"`` found from the end (what follows it, the delta and a few short keys, parses). A
    JSON string holds no unescaped quote, so in the Gateway's JSON (``JSON.stringify``: valid, one key once) the
    region between is the text whole, as long as ``delta`` follows ``text`` (measured, and the simulator's media
    event ``{text, delta, mediaUrls, itemId}`` too); a key some later Gateway put between them is caught by the
    text ending with its non-empty delta (as every real text so far does) and by the known keys; what is left is a
    string key between them whose value ends with the delta, which no Gateway sends. Scanning the region for
    quotes instead would cost what orjson's parse costs (measured: a byte count over 500 KB is ~0.6 ms, the
    parse 0.5 ms). What the cut skips is never looked at: a text that is not JSON (never from a real Gateway)
    still delivers its event, and reads as the repaired string or None if ever read. None (the full parse) unless
    every guard holds: the head, no backslash right before the cut's quote, the parse of the rest, only known
    keys in the envelope, the payload and the data, the text cut empty and ending with the delta."""
    at = data.find(_ASSISTANT_TEXT, len(_AGENT_HEAD), len(_AGENT_HEAD) + _RUN_ID_WINDOW)
    if at < 0:
        return None
    start = at + len(_ASSISTANT_TEXT)
    stop = data.rfind(_DELTA_AFTER_TEXT, start)
    if stop < 0:
        return None
    if stop > start and data[stop - 1] == 0x5C:  # a backslash: that quote may be escaped; not looked at closer
        return None
    try:
        value = orjson.loads(data[:start] + data[stop:])
    except orjson.JSONDecodeError:
        return None
    if type(value) is not dict or value.keys() != _ENVELOPE_KEYS or value["event"] != "agent":
        return None
    payload = value["payload"]
    seq = value["seq"]
    if type(payload) is not dict or type(seq) is not int or seq < 0 or not payload.keys() <= _AGENT_KEYS:
        return None
    found = payload.get("data")
    if (
        payload.get("stream") != "assistant"
        or type(found) is not dict
        or found.get("text") != ""
        or not found.keys() <= _ASSISTANT_DATA_KEYS
    ):
        return None
    delta = found.get("delta")
    if type(delta) is not str or not delta:
        return None  # an empty delta (files announced) is rare, and would leave the guard below nothing to check
    # The text so far ends with its increment (every real event): the region is the text, not the text and a
    # string-valued key some later Gateway put before ``delta`` (a list, ``mediaUrls`` say, cannot end a region:
    # the cut needs a quote before ``,"delta"``), unless that key's value ended with the delta too.
    raw = orjson.dumps(delta)[1:-1]
    if data[stop - len(raw) : stop] != raw:
        return None
    found["text"] = Deferred(memoryview(data)[start - 1 : stop + 1])  # the string with its quotes
    return EventFrame(event="agent", payload=payload, seq=seq)


def _ends_as_a_message(data: bytes, cut: int, end: int) -> bool:
    """``data[cut:end]`` ends with ``,"timestamp":<digits>}``: found from the end (``rfind``, a few bytes back),
    so the guard costs the same for a short reply and a long one."""
    at = data.rfind(_TIMESTAMP, cut, end)
    digits = data[at + len(_TIMESTAMP) : end - 1]
    return at > cut and 0 < len(digits) <= 16 and digits.isdigit() and data[end - 1] == 0x7D  # "}"


def _loads_repaired(data: str | bytes, exc: orjson.JSONDecodeError) -> Any:
    repaired, repairs = repair_json(data)
    if repairs:
        try:
            value = orjson.loads(repaired)
        except orjson.JSONDecodeError:
            pass
        else:
            log.warning("protocol.frame_repaired repairs=%s bytes=%d", ",".join(repairs), len(repaired))
            return value
    raise ProtocolError(f"frame is not valid JSON ({exc.msg} at position {exc.pos})") from None


#: orjson parses at most this many levels of arrays and objects.
ORJSON_MAX_DEPTH = 1024
#: Values nested deeper than this are replaced by ``TOO_DEEP``, in frames that orjson refused as too deep.
MAX_DEPTH = 512
#: The depth repair is a Python-speed scan (about 1 s a MiB of brackets, measured): a larger frame nested
#: past orjson's limit is refused rather than repaired, so a hostile frame stalls the reader 0.25 s at most.
MAX_DEPTH_REPAIR_BYTES = 256 * 1024
TOO_DEEP = "[nested too deep]"
_BOM = b"\xef\xbb\xbf"
#: An escaped backslash (skipped whole, so ``\\\\ud83d`` is not an escape), a surrogate pair (kept) or a
#: lone surrogate escape (replaced by U+FFFD, as a decoder replaces any ill-formed UTF-16).
_SURROGATE_ESCAPE = re.compile(
    rb"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)
_LONE_SURROGATE_START = re.compile(rb"\\u[dD][89a-fA-F]")
#: A JSON string (skipped whole) or a bracket: the tokens the depth scan needs.
_DEPTH_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def _surrogate(match: re.Match[bytes]) -> bytes:
    token = match.group()
    return token if len(token) != 6 else b"\\ufffd"


def repair_json(data: str | bytes) -> tuple[bytes, list[str]]:
    """Make JSON that orjson refuses readable, naming each repair made:

    * ``invalid_utf8``: bytes that are not UTF-8 (or a str holding surrogates) decode with U+FFFD;
    * ``bom``: a leading UTF-8 byte order mark is dropped;
    * ``lone_surrogate``: a ``\\udXXX`` escape without its pair becomes ``\\ufffd``;
    * ``too_deep``: a value nested deeper than ``MAX_DEPTH`` becomes the string ``TOO_DEEP`` (in a frame of
      at most ``MAX_DEPTH_REPAIR_BYTES``).

    Pure text work on the bytes; it never raises (what is still not JSON stays so).
    """
    repairs: list[str] = []
    if isinstance(data, str):
        raw = data.encode("utf-8", "surrogatepass")
    else:
        raw = bytes(data)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        raw = raw.decode("utf-8", "replace").encode()
        repairs.append("invalid_utf8")
    if raw.startswith(_BOM):
        raw = raw[len(_BOM) :]
        repairs.append("bom")
    if _LONE_SURROGATE_START.search(raw):
        fixed = _SURROGATE_ESCAPE.sub(_surrogate, raw)
        if fixed != raw:
            raw = fixed
            repairs.append("lone_surrogate")
    flattened = _flatten_deep(raw, MAX_DEPTH) if len(raw) <= MAX_DEPTH_REPAIR_BYTES else None
    if flattened is not None:
        raw = flattened
        repairs.append("too_deep")
    return raw, repairs


def _flatten_deep(raw: bytes, limit: int) -> bytes | None:
    """``raw`` with every container opened deeper than ``limit`` replaced by ``"[nested too deep]"``, or None
    when nothing is that deep. Iterative (a regex over strings and brackets): no recursion, whatever the depth."""
    if raw.count(b"[") + raw.count(b"{") <= ORJSON_MAX_DEPTH:
        return None  # orjson reads this deep: the failure was something else
    out: list[bytes] = []
    depth = 0
    kept = 0  # raw[:kept] is already in out
    skip_from: int | None = None  # where the container being cut opened
    placeholder = b'"' + TOO_DEEP.encode() + b'"'
    for token in _DEPTH_TOKEN.finditer(raw):
        char = raw[token.start()]
        if char == 0x22:  # a string
            continue
        if char in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth == limit + 1 and skip_from is None:
                skip_from = token.start()
        else:
            if depth == limit + 1 and skip_from is not None:
                out.append(raw[kept:skip_from])
                out.append(placeholder)
                kept = token.end()
                skip_from = None
            depth -= 1
    if skip_from is not None:  # unclosed at the end: not JSON anyway, cut what there is
        out.append(raw[kept:skip_from])
        out.append(placeholder)
    elif not out:
        return None
    else:
        out.append(raw[kept:])
    return b"".join(out)


_RES_HEAD = re.compile(r'"type"\s*:\s*"res"')
_HEAD_ID = re.compile(r'"id"\s*:\s*"([^"\\]{1,200})"')


def response_id(data: str | bytes) -> str | None:
    """The request id of a response frame, read from its first bytes without parsing the rest: a reply too
    large to parse can still fail its request at once (the Gateway writes ``type`` and ``id`` first)."""
    head = data[:512]
    text = head.decode("utf-8", "replace") if isinstance(head, bytes) else head
    if not _RES_HEAD.search(text):
        return None
    match = _HEAD_ID.search(text)
    return match.group(1) if match else None


def encode_frame(frame: Frame) -> bytes:
    return orjson.dumps(frame.to_json())
