"""The RPCs owc calls, answered as the real Gateway 2026.9.6 answers them.

Dispatch checks the method's scope first (``FORBIDDEN`` / ``MISSING_SCOPE``), then the params
(``INVALID_REQUEST``). Replies and events share a connection's outbound channel, so a handler decides the
order: ``chat.send`` replies before its run's first event (the start is deferred until the reply is queued),
while ``chat.abort``'s aborted terminal reaches clients before its reply, as measured live.
"""

from __future__ import annotations

import collections
import copy
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import orjson

from owc.protocol import ProtocolError, Request, decode_frame
from owc.rules.thinking import normalize as normalize_level
from owc.sim import model as m
from owc.sim import questions as qs
from owc.sim.agents import Agents
from owc.sim.delivery import ADMIN, QUESTIONS, READ, WRITE, Fanout, SimConn
from owc.sim.media import ArtifactNotFound, MediaStore
from owc.sim.questions import QuestionError, Questions
from owc.sim.refusals import NO_DETAILS, InvalidParams, Refused
from owc.sim.runs import RunDriver
from owc.sim.script import End, Responder

log = logging.getLogger("owc.sim")

METHOD_SCOPES = {
    "sessions.subscribe": READ,
    "sessions.list": READ,
    "sessions.describe": READ,
    "usage.status": READ,
    "sessions.messages.subscribe": READ,
    "sessions.messages.unsubscribe": READ,
    "chat.history": READ,
    "chat.send": WRITE,
    "chat.abort": WRITE,
    "wake": WRITE,
    "models.list": READ,
    "agents.list": READ,  # measured: read alone answers it (docs/measured/agents-2026.9.6.md)
    "artifacts.download": READ,  # ``method-scopes-C7g7eSZh.mjs:1033-1048`` (measured: read alone suffices)
    "sessions.patch": WRITE,  # or admin, by its params: ``required_scope``
    # ``operator.questions`` or ``operator.admin`` (``Rpc.answer``; docs/measured/ask-user-2026.9.6.md section 4).
    "question.list": QUESTIONS,
    "question.get": QUESTIONS,
    "question.resolve": QUESTIONS,
    # ``method-scopes-C7g7eSZh.mjs`` (measured: read alone answers the tasks; read+write is refused the compaction).
    "tasks.list": READ,
    "tasks.get": READ,
    "tasks.history": READ,
    "sessions.compact": ADMIN,
}

#: The ``sessions.patch`` params ``operator.write`` may send; any other needs ``operator.admin`` (2026.9.6,
#: ``SESSIONS_PATCH_WRITE_SCOPE_ENVELOPE_FIELDS`` / ``_MUTATIONS``, ``dist/method-scopes-C7g7eSZh.mjs:59-95``).
PATCH_WRITE_FIELDS = frozenset(
    {
        "key", "agentId", "expectedSessionId", "expectedLifecycleRevision", "expectedPermissionMode",
        "expectedMarkedUnreadAt", "label", "autoLabel", "icon", "color", "category", "boardFace",
        "boardPresentation", "pinned", "archived", "unread", "model", "agentRuntime", "thinkingLevel", "fastMode",
        "permissionMode",
    }
)  # fmt: skip
#: Every property ``SessionsPatchParamsSchema`` (a closed object) has (``dist/src-BRUl7oDv.mjs:2069-2152``).
PATCH_FIELDS = PATCH_WRITE_FIELDS | frozenset(
    {
        "expectedSandboxMode", "expectedNativeRuntimeConsent", "expectedToolOverrides", "statusNote", "attention",
        "ttlMinutes", "contextWindow", "toolOverrides", "verboseLevel", "traceLevel", "reasoningLevel",
        "responseUsage", "elevatedLevel", "execHost", "execSecurity", "execAsk", "execNode", "sandboxMode",
        "nativeRuntimeConsent", "completionOwnerSessionKey", "inheritedToolPolicyVersion", "inheritedToolAllow",
        "inheritedToolDeny", "sendPolicy", "groupActivation",
    }
)  # fmt: skip
#: ``ModelsListParamsSchema``'s properties (a closed object, ``dist/src-BRUl7oDv.mjs:235-263``).
MODELS_LIST_FIELDS = frozenset(
    {
        "agentId", "sessionKey", "authProfileId", "provider", "includeDetails", "includeProviderCapabilities",
        "includeDefaultModels", "preparedOnly", "refresh", "view",
    }
)  # fmt: skip
MODELS_LIST_VIEWS = ("default", "configured", "provider-config", "all")
#: Measured (2026.9.6): what ``sessions.patch`` says of a ``model`` that is not a non-empty string or null.
_MODEL_NOT_STRING = "at /model: must be string; at /model: must be null; at /model: must match a schema in anyOf"
_MODEL_EMPTY = (
    "at /model: must not have fewer than 1 characters; at /model: must be null; at /model: must match a schema in anyOf"
)


def required_scope(method: str, params: Any) -> str | None:
    """The scope a request needs, None for a method the simulator does not know. ``sessions.patch`` needs
    ``operator.write`` for the write-scope fields only, else ``operator.admin`` (``permissionMode: "full"`` and
    ``sandboxMode`` always: ``resolveSessionsPatchRequiredScope``)."""
    if method == "sessions.patch" and isinstance(params, dict):
        if params.get("permissionMode") == "full" or "sandboxMode" in params:
            return ADMIN
        return WRITE if set(params) <= PATCH_WRITE_FIELDS else ADMIN
    return METHOD_SCOPES.get(method)


def may_abort(conn: SimConn, run: m.Run) -> bool:
    """``canRequesterAbortChatRun`` (2026.9.6, ``chat-abort-runtime-B6OgOyLI.mjs:39-52``; measured): an admin may
    abort any run; anyone else a run with no owner (cron, heartbeats, a boot's recovery), or one their own connection
    or device sent. So a client without ``operator.admin`` cannot stop what another client started, nor, without a
    device, a run it sent on an earlier connection."""
    if ADMIN in conn.scopes:
        return True
    if run.owner is None and run.owner_device is None:
        return True
    return (run.owner_device is not None and run.owner_device == conn.device_id) or run.owner == conn.conn_id


def model_key(provider: str, model_id: str) -> str:
    """The Gateway's ``provider/model`` key (``modelKey``; ``owc.owui.models.model_key`` is owc's copy)."""
    if model_id.lower().startswith(provider.lower() + "/"):
        return model_id
    return f"{provider}/{model_id}"


def resolve_model(raw: str, catalog: list[dict[str, Any]]) -> dict[str, Any] | str:
    """The catalog entry a ``sessions.patch`` ``model`` names, or the real refusal's message.

    As the real Gateway resolves it with an allowlist (``resolveAllowedModelRefFromAliasIndex``,
    ``dist/model-selection-shared-DG5Z5BnB.mjs:747-768``; measured): an alias; ``provider/model`` split at the
    first slash; a bare id under the one provider that has it, else the default provider; then
    ``model not allowed: <key>`` for anything outside the catalog. (Without an allowlist the real one accepts
    any id under a known provider and refuses an unknown provider with ``Unknown provider "x". Use /models to
    list providers.``: not modelled.)"""
    folded = raw.casefold()
    for entry in catalog:
        if isinstance(entry.get("alias"), str) and entry["alias"].casefold() == folded:
            return entry
    if "/" in raw:
        provider, _, model_id = raw.partition("/")
    else:
        providers = {e["provider"] for e in catalog if e.get("id") == raw}
        provider, model_id = (providers.pop() if len(providers) == 1 else m.PROVIDER), raw
    key = model_key(provider.strip().lower(), model_id.strip())
    for entry in catalog:
        if model_key(str(entry.get("provider", "")).lower(), str(entry.get("id", ""))) == key:
            return entry
    return f"model not allowed: {key}"


#: ``chat.history``'s budget on the real Gateway 2026.9.6: at most this many messages a page
#: (``CHAT_HISTORY_MAX_ENTRIES``), 200 when ``limit`` is absent ...
HISTORY_MAX_ENTRIES = 1000
HISTORY_DEFAULT_LIMIT = 200
#: ... the page's messages within ``min(maxBytes, 6 MiB)`` of JSON (``getMaxChatHistoryMessagesBytes``), the
#: oldest dropped first but never the newest one ...
HISTORY_MAX_BYTES = 6_291_456
#: ... and any one message over 128 KiB replaced by a placeholder (``CHAT_HISTORY_MAX_SINGLE_MESSAGE_BYTES``,
#: ``buildOversizedHistoryPlaceholder`` in ``chat-history-budget``).
HISTORY_MAX_SINGLE_MESSAGE_BYTES = 131_072
HISTORY_OVERSIZED_TEXT = "[chat.history omitted: message too large]"
#: The fields an oversized message's placeholder keeps (its tool identity and ``__openclaw`` identity).
_PLACEHOLDER_TOOL_KEYS = ("toolCallId", "tool_call_id", "toolUseId", "tool_use_id", "toolName", "tool_name", "name")
#: Messages ``chat.send`` takes as a stop command (a subset of the Gateway's ``abort-trigger-text`` list, read in
#: its dist: ``/stop`` and the plain words a person types).
STOP_COMMANDS = frozenset({"/stop", "stop", "abort", "please stop"})

_PLACEHOLDER_META_KEYS = ("toolOutput", "id", "seq", "idempotencyKey", "turnBoundary", "transcriptPosition")

Handler = Callable[[SimConn, dict[str, Any]], dict[str, Any]]
T = TypeVar("T")
D = TypeVar("D")


def param(params: dict[str, Any], key: str, kind: type[T], default: D) -> T | D:
    """``params[key]`` if it is a ``kind``, else ``default``: a wrong type counts as absent, as in the Gateway."""
    value = params.get(key)
    return value if isinstance(value, kind) else default


def opt_int(params: dict[str, Any], key: str, minimum: int, maximum: int | None = None) -> int | None:
    """An optional integer param checked as the Gateway's schema checks it (``Type.Integer({minimum,
    maximum})``): a wrong type or range is an invalid request, not an absent param."""
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise InvalidParams(f"at /{key}: must be integer")
    if value < minimum:
        raise InvalidParams(f"at /{key}: must be >= {minimum}")
    if maximum is not None and value > maximum:
        raise InvalidParams(f"at /{key}: must be <= {maximum}")
    return int(value)


def json_bytes(value: Any) -> int:
    """The JSON size of a value as the Gateway counts it (``jsonUtf8Bytes``)."""
    try:
        return len(orjson.dumps(value))
    except TypeError:  # deeper than orjson writes: the wire copy is made elsewhere; count it as oversized
        return HISTORY_MAX_SINGLE_MESSAGE_BYTES + 1


def oversized_placeholder(message: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """What the real Gateway sends in place of a message over ``HISTORY_MAX_SINGLE_MESSAGE_BYTES``: its role,
    timestamp, tool identity and ``__openclaw`` identity (not its ``runId``), and a placeholder text."""
    meta = message.get("__openclaw") if isinstance(message.get("__openclaw"), dict) else {}
    out: dict[str, Any] = {
        "role": message["role"] if isinstance(message.get("role"), str) else "assistant",
        "timestamp": message["timestamp"] if isinstance(message.get("timestamp"), (int, float)) else now_ms,
        "content": [{"type": "text", "text": HISTORY_OVERSIZED_TEXT}],
    }
    out.update({k: message[k] for k in _PLACEHOLDER_TOOL_KEYS if isinstance(message.get(k), str)})
    if isinstance(message.get("isError"), bool):
        out["isError"] = message["isError"]
    kept = {k: meta[k] for k in _PLACEHOLDER_META_KEYS if meta.get(k) not in (None, False, "")}
    out["__openclaw"] = {**kept, "truncated": True, "reason": "oversized"}
    return out


#: How far one ``chat.history`` page scans back for messages it shows, past hidden ones (2026.9.6,
#: ``readIncrementalChatHistoryTail`` in ``session-history-tail-*.mjs:86-239``): ``limit * 20 + 20`` stored
#: messages, then up to 8000 more; read first ``limit * 3`` (the newest page) or ``limit``, then in chunks of
#: 100 doubling up to 400.
HISTORY_SCAN_EXTRA = 8000
HISTORY_SCAN_CHUNK = 100
HISTORY_SCAN_MAX_CHUNK = 400


def _scan(transcript: list[dict[str, Any]], *, limit: int, offset: int) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """The stored messages one page reads, as ``readIncrementalChatHistoryTail`` reads them: back from
    ``offset`` (stored messages, hidden ones too, counted from the newest) until the projection shows ``limit``
    messages or the scan bound is reached. Returns the shown messages (at most ``limit``, the newest) with
    their index in ``transcript``, and how many stored messages were read.

    The projection starts from the one message read before the window (``overreadContextMessage``): a hidden
    heartbeat prompt there marks the window's first shown message (``turnBoundaryPending``,
    ``session-history-tail-*.mjs:124,137``), so a message is marked whichever page it comes in. Not modelled:
    the real scan also stops after ``maxBytes`` of JSON read past ``limit * 20 + 20`` messages."""
    end = max(len(transcript) - offset, 0)
    window = limit * 20 + 20
    start = max(end - min(window, max(1, limit * 3 if offset == 0 else limit)), 0)
    scan_limit, chunk = window, HISTORY_SCAN_CHUNK
    while True:
        pending = start > 0 and m.is_heartbeat_prompt(transcript[start - 1])
        shown = project_history(transcript[start:end], boundary=pending, first=start)
        read = end - start
        if len(shown) >= limit or start == 0:
            break
        if read >= window:
            scan_limit = window + HISTORY_SCAN_EXTRA
        if read >= scan_limit:
            break
        start = max(start - min(chunk, scan_limit - read), 0)
        chunk = min(chunk * 2, HISTORY_SCAN_MAX_CHUNK)
    return shown[-limit:], end - start


def history_page(
    transcript: list[dict[str, Any]], *, limit: int, offset: int, max_bytes: int, now_ms: int
) -> tuple[list[dict[str, Any]], int | None]:
    """One ``chat.history`` page of a stored transcript as the real Gateway 2026.9.6 cuts it: up to ``limit``
    shown messages before the newest ``offset`` stored ones (``_scan``), oversized ones replaced, the oldest
    dropped until the JSON array fits ``max_bytes`` (the newest always stays); and the next page's offset, None
    when nothing older is left.

    ``offset`` and the next one count stored messages, hidden ones too (measured: limit 1 over A, H1..H3, B
    gives offsets 1, 2, 3, 7, 9): the next offset is the count of stored messages from the oldest one shown
    (``resolveChatHistoryNextOffset``, ``chat-history-page-kernel-*.mjs:9-28``; ``hasMore`` while it is below
    ``totalMessages``, ``chat-history-handler-*.mjs:505-512``); a page that shows nothing moves past what it
    read."""
    total = len(transcript)
    found, read = _scan(transcript, limit=limit, offset=offset)
    page = [
        msg if json_bytes(msg) <= HISTORY_MAX_SINGLE_MESSAGE_BYTES else oversized_placeholder(msg, now_ms)
        for _, msg in found
    ]
    sizes = [json_bytes(msg) for msg in page]
    size = 2 + sum(sizes) + max(len(page) - 1, 0)
    start = 0
    while size > max_bytes and start < len(page) - 1:
        size -= sizes[start] + 1
        start += 1
    shown = page[start:]
    if shown:
        seq = (shown[0].get("__openclaw") or {}).get("seq")
        oldest = seq if isinstance(seq, int) and seq > 0 else found[start][0] + 1
        next_offset = max(offset + 1, total - oldest + 1)
    else:
        next_offset = offset + read
    return shown, next_offset if next_offset < total else None


def project_history(
    messages: list[dict[str, Any]], *, boundary: bool = False, first: int = 0
) -> list[tuple[int, dict[str, Any]]]:
    """What ``chat.history`` shows of stored messages, each with its index (``first`` + its place), as the real
    Gateway projects them (2026.9.6, measured, and ``filterVisibleProjectedHistoryMessages`` in
    ``chat-display-projection.history-*.mjs:301-340``): a heartbeat runner's placeholder prompt is hidden, and
    so is any assistant message that is only an acknowledgement (``HEARTBEAT_OK``, ``NO_REPLY``), and a
    sub-agent's announce (an inter-session user message); the first message shown after a hidden heartbeat
    prompt (or from the start, with ``boundary``) carries ``__openclaw.turnBoundary: true``. Nothing else marks a
    heartbeat's turn: its visible replies keep their own ``runId`` and no flag."""
    shown: list[tuple[int, dict[str, Any]]] = []
    for i, message in enumerate(messages, first):
        if m.is_heartbeat_prompt(message):
            boundary = True
            continue
        if m.hidden(message):
            continue  # hidden, and the mark (if pending) goes on to the next message shown
        if boundary and message.get("role") not in ("system", "custom"):
            message = {**message, "__openclaw": {**(message.get("__openclaw") or {}), "turnBoundary": True}}
            boundary = False
        shown.append((i, message))
    return shown


def require_str(params: dict[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidParams(f"must have required property '{key}'")
    return value


class Rpc:
    """Reads a connection's requests and queues their replies; counts requests by method in ``requests``."""

    def __init__(
        self,
        fanout: Fanout,
        driver: RunDriver,
        requests: collections.Counter[str],
        *,
        responder: Responder,
        max_payload: int,
        now_ms: Callable[[], int],
        poke: Callable[[], None],
        questions: Questions,
        media: MediaStore,
    ) -> None:
        self._fanout = fanout
        self._media = media
        self._driver = driver
        self._questions = questions
        #: What ``sessions.describe`` adds to a session's row (the usage fields a real run leaves: ``totalTokens``,
        #: ``totalTokensFresh``, ``contextTokens``, ``goal``...), by key; none unless a test sets them.
        self.session_usage: dict[str, dict[str, Any]] = {}
        #: ``usage.status``'s providers (offline, the real Gateway has none).
        self.usage_providers: list[dict[str, Any]] = []
        self.requests = requests
        self.responder = responder
        self._max_payload = max_payload
        self._now_ms = now_ms
        self._poke = poke
        self._deferred: list[Callable[[], object]] = []
        #: Set by the simulator: holds a stalled request until it is released (``Faults.stall_requests``).
        self.hold: Callable[[SimConn, Request], None] = self.answer
        #: What ``models.list`` lists and ``sessions.patch`` accepts, in the real ``ModelChoice`` shape; tests
        #: may replace it (``sim.rpc.models = [...]``).
        self.models: list[dict[str, Any]] = copy.deepcopy(list(m.MODEL_CATALOG))
        #: The attachments each ``chat.send`` carried, by run id (the fake model answers regardless; tests read
        #: what reached the Gateway here).
        self.attachments: dict[str, list[Any]] = {}
        #: The Gateway's configured agents (``agents.list``); one ``main`` unless a test configures more
        #: (``sim.rpc.agents.configured = list(TWO_AGENTS)``).
        self.agents = Agents()
        self._handlers: dict[str, Handler] = {
            "sessions.subscribe": self._sessions_subscribe,
            "sessions.list": self._sessions_list,
            "sessions.describe": self._sessions_describe,
            "usage.status": self._usage_status,
            "sessions.messages.subscribe": self._sessions_messages_subscribe,
            "sessions.messages.unsubscribe": self._sessions_messages_unsubscribe,
            "chat.history": self._chat_history,
            "chat.send": self._chat_send,
            "chat.abort": self._chat_abort,
            "wake": self._wake,
            "models.list": self._models_list,
            "agents.list": lambda conn, params: self.agents.agents_list(conn, params),
            "sessions.patch": self._sessions_patch,
            "question.list": self._question_list,
            "question.get": self._question_get,
            "question.resolve": self._question_resolve,
            "artifacts.download": self._artifacts_download,
        }

    def register(self, method: str, handler: Handler) -> None:
        """A collaborator's handler (``tasks.Tasks``, ``compaction.Compactor``); its scope is in ``METHOD_SCOPES``."""
        self._handlers[method] = handler

    def defer(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` once the current request's answer is queued (what the Gateway says after it answers)."""
        self._deferred.append(fn)

    def on_request(self, conn: SimConn, message: str | bytes) -> None:
        try:
            frame = decode_frame(message, max_payload=self._max_payload)
        except ProtocolError as exc:
            log.warning("sim.bad_frame conn=%s error=%s", conn.name, exc)
            return
        if not isinstance(frame, Request):
            return
        self.requests[frame.method] += 1
        self._poke()
        if conn.stalled:
            return
        if frame.method in conn.stalling:
            self.hold(conn, frame)
            return
        self.answer(conn, frame)

    def answer(self, conn: SimConn, frame: Request) -> None:
        """Answer a request (also one a stall held, when it is released: as if it had just arrived)."""
        if conn.closing:
            return
        if frame.method in conn.failing:
            self._reply_error(conn, frame.id, "UNAVAILABLE", f"{frame.method} failed: the agent's store did not answer")
            return
        scope = required_scope(frame.method, frame.params)
        if scope is None:
            self._reply_error(conn, frame.id, "INVALID_REQUEST", f"unknown method: {frame.method[:80]}")
            return
        if scope == QUESTIONS:
            if not conn.scopes & {QUESTIONS, ADMIN}:
                # Measured (section 4): read+write alone falls back to "own-run question access", which needs a
                # verified user profile a token client has not: FORBIDDEN with ``details: null``.
                self._reply_error(conn, frame.id, "FORBIDDEN", qs.ACCESS_REFUSED, None)
                return
        elif scope not in conn.scopes:
            details = {"code": "MISSING_SCOPE", "missingScope": scope, "requiredScopes": [scope]}
            self._reply_error(conn, frame.id, "FORBIDDEN", f"missing scope: {scope}", details)
            return
        params = frame.params if isinstance(frame.params, dict) else {}
        try:
            payload = self._handlers[frame.method](conn, params)
        except InvalidParams as exc:
            self._reply_error(conn, frame.id, "INVALID_REQUEST", f"invalid {frame.method} params: {exc}")
            return
        except Refused as exc:
            self._reply_error(conn, frame.id, exc.code, exc.message, exc.details)
            return
        except QuestionError as exc:
            self._reply_error(conn, frame.id, "INVALID_REQUEST", exc.message, {"reason": exc.reason})
            return
        if not conn.closing:
            self._fanout.enqueue(conn, {"type": "res", "id": frame.id, "ok": True, "payload": payload})
        self._after_reply()

    def _reply_error(self, conn: SimConn, req_id: str, code: str, message: str, details: Any = NO_DETAILS) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if details is not NO_DETAILS:
            error["details"] = details
        if not conn.closing:
            self._fanout.enqueue(conn, {"type": "res", "id": req_id, "ok": False, "error": error})

    def _after_reply(self) -> None:
        """Run what a handler deferred until its reply was queued (a ``chat.send`` run's start)."""
        deferred, self._deferred = self._deferred, []
        for fn in deferred:
            fn()

    def _list(self, params: dict[str, Any]) -> dict[str, Any]:
        limit = param(params, "limit", int, 50)
        rows = sorted(self._driver.sessions.values(), key=lambda s: s.updated_at, reverse=True)
        if params.get("activeOnly"):
            rows = [s for s in rows if s.active is not None]
        shown = rows[: max(0, limit)]
        return {
            "ts": self._now_ms(),
            "path": "(owc-sim)",
            "count": len(shown),
            "totalCount": len(rows),
            "limitApplied": limit,
            "nextOffset": len(shown) if len(rows) > len(shown) else None,
            "hasMore": len(rows) > len(shown),
            "owners": [],
            "defaults": {"modelProvider": m.PROVIDER, "model": m.MODEL},
            "sessions": [s.row() for s in shown],
        }

    def _sessions_subscribe(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        conn.subscribed = True  # registered before the list is built, as the real handler does
        self._poke()
        if not params:
            return {"subscribed": True}
        return {"subscribed": True, "list": self._list(params)}

    def _sessions_list(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        return self._list(params)

    def _sessions_describe(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        key = require_str(params, "key")
        session = self._driver.sessions.get(key)
        if session is None:
            return {"session": None}  # measured: an unknown key, or one before its first run, is no error
        return {"session": {**session.row(), **self._thinking_row(session), **self.session_usage.get(key, {})}}

    def _artifacts_download(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        """A managed file: its summary and a 5-minute ticket URL on the Gateway's own HTTP origin, never its bytes
        (docs/measured/media-2026.9.6.md section 4); another session's key or an unknown id is "artifact not
        found"."""
        key = require_str(params, "sessionKey")
        artifact = require_str(params, "artifactId")
        try:
            return self._media.download(key, artifact)
        except ArtifactNotFound:
            details = {"type": "artifact_not_found", "artifactId": artifact}
            raise Refused("INVALID_REQUEST", "artifact not found", details) from None

    def _model_entry(self, session: Any) -> dict[str, Any] | None:
        provider, model = (session.model_override if session is not None else None) or (m.PROVIDER, m.MODEL)
        return next((e for e in self.models if e.get("provider") == provider and e.get("id") == model), None)

    def _thinking_row(self, session: Any) -> dict[str, Any]:
        """The row's thinking fields for the session's model (measured: ``thinkingLevels`` ``[{id, label}]``,
        ``thinkingOptions`` the labels, ``thinkingDefault``), from the catalog entry."""
        entry = self._model_entry(session)
        levels = copy.deepcopy(entry.get("thinkingLevels", [])) if entry else [{"id": "off", "label": "off"}]
        return {
            "thinkingLevels": levels,
            "thinkingOptions": [level["label"] for level in levels],
            "thinkingDefault": (entry or {}).get("thinkingDefault", "off"),
        }

    def _thinking_refused(self, key: str, params: dict[str, Any]) -> str | None:
        """The injected reply's text when ``chat.send``'s ``thinking`` is a level the session's model does not
        support (an unknown word is ignored, measured), else None."""
        level = normalize_level(params.get("thinking"))
        if level is None:
            return None
        session = self._driver.sessions.get(key)
        entry = self._model_entry(session)
        levels = (entry or {}).get("thinkingLevels") or [{"id": "off", "label": "off"}]
        if level in [item["id"] for item in levels]:
            return None
        provider, model = (entry["provider"], entry["id"]) if entry else (m.PROVIDER, m.MODEL)
        labels = ", ".join(item["label"] for item in levels)
        return f'Thinking level "{level}" is not supported for {provider}/{model}. Use one of: {labels}.'

    def _usage_status(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        """Measured offline: ``{updatedAt, providers: []}``; a test puts providers in ``usage_providers`` (the
        schema read in the dist: ``{provider, displayName, windows: [{label, usedPercent, resetAt?}], summary?}``)."""
        return {"updatedAt": self._now_ms(), "providers": [dict(p) for p in self.usage_providers]}

    def _sessions_messages_subscribe(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        key = require_str(params, "key")
        conn.message_keys.add(key)
        return {"subscribed": True, "key": key}

    def _sessions_messages_unsubscribe(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        key = require_str(params, "key")
        conn.message_keys.discard(key)
        return {"subscribed": False, "key": key}

    def _chat_send(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        key = require_str(params, "sessionKey")
        message = require_str(params, "message")
        run_id = require_str(params, "idempotencyKey")
        system = params.get("systemInputProvenance") or params.get("systemProvenanceReceipt")
        if (system or params.get("suppressCommandInterpretation") is True) and ADMIN not in conn.scopes:
            # 2026.9.6 (``chat-send-handler-BlzZtMKP.mjs:5448-5451``; measured): only an admin may say where a
            # message came from. owc sends none of these: it asks read and write only.
            raise Refused("INVALID_REQUEST", "system provenance fields require admin scope")
        if message.strip().lower() in STOP_COMMANDS:
            # Measured on 2026.9.6 (tests/test_realgw_stop_command.py): a stop phrase is a command, handled before a
            # run is admitted: the session's runs are aborted (stopReason "stop"), the reply is chat.abort's shape,
            # and no run, event or transcript entry carries the send's key.
            session = self._driver.sessions.get(key)
            aborted: list[str] = []
            if session is not None:
                aborted += self._driver.cancel_queued(session, None)
                if session.active is not None:
                    aborted.append(session.active.run_id)
                    self._driver.end(session.active, End("aborted", stop_reason="stop"))
            return {"ok": True, "aborted": bool(aborted), "runIds": aborted}
        existing = self._driver.runs.get(run_id)
        if existing is not None:
            return {
                "runId": run_id,
                "status": "in_flight" if existing.state == "active" or run_id in self._driver.pending else "ok",
            }
        if run_id in self._questions.answered_sends:  # modelled: a send that answered a question is done
            return {"runId": run_id, "status": "ok"}
        asking = self._questions.pending_in_session(key)
        answers = None if asking is None else self._answers_in(asking.questions, message)
        if asking is not None and answers is not None:
            # Measured (section 9): the message answers the question the session's run waits on; the reply says
            # "started" and goes out first, as for any send.
            self._deferred.append(lambda: self._driver.answer_by_send(key, run_id, message, asking, answers))
            return {"runId": run_id, "status": "started"}
        attachments = param(params, "attachments", list, None)
        if attachments is not None:
            self.attachments[run_id] = attachments
        refused = self._thinking_refused(key, params)
        if refused is not None:
            self._deferred.append(lambda: self._driver.inject_reply(key, run_id, message, refused))
            return {"runId": run_id, "status": "started"}
        steps = list(self.responder(key, message))
        # Measured: the real Gateway stores ``systemInputProvenance`` as the user message's ``provenance``.
        provenance = param(params, "systemInputProvenance", dict, None)
        # The reply goes out before the run's first event, as on the real Gateway.
        self._deferred.append(
            lambda: self._driver.start_run(
                key,
                run_id,
                origin="chat.send",
                user_text=message,
                steps=steps,
                owner=conn.conn_id,
                owner_device=conn.device_id,
                provenance=provenance,
            )
        )
        return {"runId": run_id, "status": "started"}

    def _chat_abort(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        key = require_str(params, "sessionKey")
        run_id = param(params, "runId", str, None)
        session = self._driver.sessions.get(key)
        aborted: list[str] = []
        if session is not None:
            targets = [r for r in [*session.queued, session.active] if r is not None and run_id in (None, r.run_id)]
            if any(not may_abort(conn, r) for r in targets):
                raise Refused("INVALID_REQUEST", "unauthorized")
            aborted += self._driver.cancel_queued(session, run_id)
            active = session.active
            if active is not None and (run_id is None or active.run_id == run_id):
                aborted.append(active.run_id)
                # Live: the aborted terminal reaches clients before the chat.abort reply.
                self._driver.end(active, End("aborted", stop_reason="rpc"))
        return {"ok": True, "aborted": bool(aborted), "runIds": aborted}

    @staticmethod
    def _answers_in(questions: list[dict[str, Any]], message: str) -> dict[str, list[str]] | None:
        """The answers a chat message gives (``questions.answers_from_text``), None if it is no valid answer."""
        found = qs.answers_from_text(questions, message)
        if found is None:
            return None
        try:
            return qs.canonical_answers(questions, found)
        except QuestionError:
            return None

    def _question_list(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        """``question.list {}``: the pending records, oldest first (section 5; a late client's way to find them)."""
        why = qs.closed_params_error(params, ())
        if why is not None:
            raise InvalidParams(why)
        return {"questions": [q.record() for q in self._questions.pending()]}

    def _question_get(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        """``question.get {id}``: the record, terminal ones too for ``GRACE_S`` (with ``answers`` / ``resolvedBy``)."""
        why = qs.closed_params_error(params, ("id",))
        if why is not None:
            raise InvalidParams(why)
        return {"question": self._questions.get(params["id"]).record()}

    def _question_resolve(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        """``question.resolve``: ``{id, answers: {answers: {...}}, resolvedBy?}`` or ``{id, cancel: true,
        resolvedBy?}`` (section 5). Checked now (a refusal changes nothing); the question ends after the reply is
        queued, as measured (the reply comes before the run's tool result)."""
        why = qs.resolve_params_error(params)
        if why is not None:
            raise InvalidParams(why)
        question = self._questions.awaiting(params["id"])
        resolved_by = param(params, "resolvedBy", str, None)
        settle = self._questions.settle
        if params.get("cancel") is True:
            self._deferred.append(lambda: settle(question, qs.CANCELLED, resolved_by=resolved_by))
            return {"status": qs.CANCELLED}
        answers = qs.canonical_answers(question.questions, params["answers"]["answers"])
        self._deferred.append(lambda: settle(question, qs.ANSWERED, answers, resolved_by))
        return qs.answered_payload(answers)

    def _wake(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        """``wake`` as the real Gateway 2026.9.6 answers it (measured, and ``cronHandlers.wake``): ``{"ok": true}``
        at once, and with ``mode: "now"`` a heartbeat run on ``sessionKey`` (the main session without one) that no
        connection owns. The real runner hands ``text`` to the model as a system event in the turn's context, so
        here it is what the responder answers; ``next-heartbeat`` waits for a schedule the simulator does not
        have, so nothing runs."""
        mode = require_str(params, "mode")
        if mode not in ("now", "next-heartbeat"):
            raise InvalidParams("at /mode: must be equal to one of the allowed values")
        text = require_str(params, "text")
        key = param(params, "sessionKey", str, "").strip() or "agent:main:main"
        if mode == "now":
            steps = list(self.responder(key, text))
            # The reply goes out before the run's first event, as for chat.send.
            self._deferred.append(lambda: self._driver.start_run(key, origin="heartbeat", heartbeat=True, steps=steps))
        return {"ok": True}

    def _models_list(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        """``models.list`` as 2026.9.6 answers it (measured): ``{"models": [ModelChoice, ...]}``, plus
        ``defaultModels`` for ``view: "configured"`` (or ``includeDefaultModels``); unknown params refused.
        ``provider`` filters; the real one's per-agent, per-session and auth projections are not modelled."""
        unknown = sorted(set(params) - MODELS_LIST_FIELDS)
        if unknown:
            raise InvalidParams(f"at root: unexpected property '{unknown[0]}'")
        view = params.get("view")
        if view is not None and view not in MODELS_LIST_VIEWS:
            raise InvalidParams("at /view: must be equal to one of the allowed values")
        provider = param(params, "provider", str, None)
        models = [copy.deepcopy(e) for e in self.models if provider is None or e.get("provider") == provider]
        out: dict[str, Any] = {"models": models}
        default_models = params.get("includeDefaultModels")
        if default_models is None:
            default_models = view == "configured" and not params.get("sessionKey") and not params.get("authProfileId")
        if default_models:
            out["defaultModels"] = {"automaticUtilityModel": None}
        return out

    def _sessions_patch(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        """``sessions.patch`` as 2026.9.6 answers a model change (measured, ``projectSessionPatchResult``): the
        session is created if the key has none, ``model`` pins it (``null``: back to the agent's default), the
        reply is ``{ok, path, key, entry, resolved}``, and a ``sessions.changed {reason: "patch"}`` follows (the
        real one debounces it 100-500 ms). Other fields are accepted and not applied. Not modelled: the runs'
        own events still name the default model."""
        unknown = sorted(set(params) - PATCH_FIELDS)
        if unknown:
            raise InvalidParams(f"at root: unexpected property '{unknown[0]}'")
        key = require_str(params, "key")
        raw = params.get("model")
        chosen: dict[str, Any] | None = None
        if "model" in params and raw is not None:
            if not isinstance(raw, str):
                raise InvalidParams(_MODEL_NOT_STRING)
            if not raw:
                raise InvalidParams(_MODEL_EMPTY)
            if not raw.strip():
                raise Refused("INVALID_REQUEST", "invalid model: empty")
            found = resolve_model(raw.strip(), self.models)
            if isinstance(found, str):
                raise Refused("INVALID_REQUEST", found)
            chosen = found
        session = self._driver.session(key)
        now = self._now_ms()
        if "model" in params:
            session.model_override = None if chosen is None else (str(chosen["provider"]), str(chosen["id"]))
        session.updated_at = now
        entry: dict[str, Any] = {
            "sessionId": session.session_id,
            "updatedAt": now,
            "createdVia": "operator",
            "createdAt": session.created_at,
        }
        if session.model_override is not None:
            entry["providerOverride"], entry["modelOverride"] = session.model_override
            entry["modelOverrideSource"] = "user"
        elif "model" in params:
            entry["modelOverrideSource"] = "default"
        provider, model = session.model_override or (m.PROVIDER, m.MODEL)
        resolved: dict[str, Any] = {
            "modelProvider": provider,
            "model": model,
            "agentRuntime": {"id": "openclaw", "source": "implicit"},
            "runtimeSelectionLocked": False,
        }
        if chosen is not None:  # measured: only a model choice loads the catalog's thinking levels
            resolved["thinkingLevel"] = chosen.get("thinkingDefault", "off")
            resolved["thinkingLevels"] = copy.deepcopy(chosen.get("thinkingLevels", []))
        self._deferred.append(lambda: self._fanout.sessions_changed(session, reason="patch"))
        return {"ok": True, "path": "(owc-sim)", "key": key, "entry": entry, "resolved": resolved}

    def _chat_history(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        key = require_str(params, "sessionKey")
        session = self._driver.sessions.get(key)
        transcript = session.transcript if session is not None else []
        limit = opt_int(params, "limit", 1, HISTORY_MAX_ENTRIES) or HISTORY_DEFAULT_LIMIT
        max_bytes = min(opt_int(params, "maxBytes", 1024) or HISTORY_MAX_BYTES, HISTORY_MAX_BYTES)
        offset = opt_int(params, "offset", 0) or 0
        opt_int(params, "maxChars", 1, 500_000)
        # Measured on 2026.9.6: ``offset`` counts back from the newest stored message; a page is in transcript
        # order; ``nextOffset`` is the offset of the next older page while ``hasMore``.
        shown, next_offset = history_page(
            transcript, limit=limit, offset=offset, max_bytes=max_bytes, now_ms=self._now_ms()
        )
        has_more = next_offset is not None
        return {
            "sessionKey": key,
            "sessionId": session.session_id if session is not None else None,
            "messages": shown,
            "pendingInputs": [],
            "offset": offset or None,
            "nextOffset": next_offset,
            "hasMore": has_more,
            # Stored messages, hidden ones too (``pagination.totalMessages``; measured: 10 for 6 shown).
            "totalMessages": len(transcript),
            "defaults": {"modelProvider": m.PROVIDER, "model": m.MODEL},
            "sessionInfo": {},
        }
