"""Typed results of the RPCs owc calls: ``sessions.subscribe`` / ``sessions.list`` / ``sessions.describe``,
``chat.send``, ``chat.abort`` and ``chat.history``.

``chat.history`` is where a run's finished output comes from, so its message identities are modelled exactly
(reference section 3.6):

* user turn: ``idempotencyKey = "<runId>:user"`` (also under ``__openclaw.idempotencyKey``);
* assistant (embedded runtime): ``__openclaw.runId = <runId>``;
* assistant (CLI-backend runtimes): idempotency key ``cli-assistant:<runId>``;
* aborted partial: idempotency key ``<runId>:assistant`` with ``openclawAbort``;
* tool turns: assistant ``content`` parts ``{type:"toolCall", id, name, arguments}`` and
  ``{role:"toolResult", toolCallId, toolName, content, isError}`` messages;
* restart recovery: the recovery run's user turn carries provenance
  ``{kind:"internal_system", sourceTool:"main_session_restart_recovery"}``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import attrs

from owc.protocol import fields as f
from owc.protocol.errors import ProtocolError

log = logging.getLogger("owc.protocol")

RAW = attrs.field(default=attrs.Factory(dict), repr=False, eq=False)

RESTART_RECOVERY_TOOL = "main_session_restart_recovery"
USER_KEY_SUFFIX = ":user"
ABORTED_ASSISTANT_SUFFIX = ":assistant"
CLI_ASSISTANT_PREFIX = "cli-assistant:"


@attrs.frozen
class SessionRow:
    """A session row. ``active_run_ids is None`` means unknown (absent or ``null``): the list may say
    ``hasActiveRun: true`` without ids (embedded run state), and owc then opens the run on its first event."""

    key: str
    status: str | None = None
    has_active_run: bool | None = None
    active_run_ids: tuple[str, ...] | None = None
    aborted_last_run: bool | None = None
    last_run_id: str | None = None
    last_run_error: str | None = None
    updated_at: int | None = None
    session_id: str | None = None
    agent_id: str | None = None
    raw: Mapping[str, Any] = RAW


def parse_session_row(d: object, where: str = "session") -> SessionRow:
    d = f.obj(d, where)
    return SessionRow(
        key=f.req_str(d, "key", where),
        status=f.opt_str(d, "status", where),
        has_active_run=f.opt_bool(d, "hasActiveRun", where),
        active_run_ids=f.opt_str_list(d, "activeRunIds", where),
        aborted_last_run=f.opt_bool(d, "abortedLastRun", where),
        last_run_id=f.opt_str(d, "lastRunId", where),
        last_run_error=f.opt_str(d, "lastRunError", where),
        updated_at=f.opt_int(d, "updatedAt", where),
        session_id=f.opt_str(d, "sessionId", where),
        agent_id=f.opt_str(d, "agentId", where),
        raw=d,
    )


@attrs.frozen
class SessionsList:
    """``unreadable``: rows that could not be read (a field of an unexpected type), skipped one by one so the
    rest of the list still counts; ``unreadable_keys`` names those whose ``key`` was readable. A list with an
    unreadable row cannot say that a run on that row's session ended."""

    sessions: tuple[SessionRow, ...]
    ts: int | None = None
    count: int | None = None
    total_count: int | None = None
    has_more: bool = False
    next_offset: int | None = None
    unreadable: int = 0
    unreadable_keys: tuple[str, ...] = ()
    raw: Mapping[str, Any] = RAW

    @property
    def complete(self) -> bool:
        """The list covers every session: no more pages, and every unreadable row at least named its key."""
        return not self.has_more and self.unreadable == len(self.unreadable_keys)


def parse_sessions_list(payload: object) -> SessionsList:
    w = "sessions.list"
    d = f.obj(payload, w)
    rows = f.opt_list(d, "sessions", w)
    good: list[SessionRow] = []
    unreadable: list[str | None] = []
    for i, r in enumerate(rows):
        try:
            good.append(parse_session_row(r, f"{w}.sessions[{i}]"))
        except ProtocolError as exc:
            key = r.get("key") if isinstance(r, Mapping) and isinstance(r.get("key"), str) else None
            unreadable.append(key)
            log.error("protocol.bad_session_row index=%d error=%s (skipped; the rest of the list counts)", i, exc)
    return SessionsList(
        sessions=tuple(good),
        unreadable=len(unreadable),
        unreadable_keys=tuple(k for k in unreadable if k is not None),
        ts=f.opt_int(d, "ts", w),
        count=f.opt_int(d, "count", w),
        total_count=f.opt_int(d, "totalCount", w),
        has_more=bool(f.opt_bool(d, "hasMore", w)),
        next_offset=f.opt_int(d, "nextOffset", w),
        raw=d,
    )


@attrs.frozen
class SubscribeResult:
    """``sessions.subscribe``: with list params the Gateway registers the subscriber first, then lists, in the
    same reply; with ``{}`` it returns only ``{subscribed}``."""

    subscribed: bool
    list: SessionsList | None = None


def parse_subscribe(payload: object) -> SubscribeResult:
    d = f.obj(payload, "sessions.subscribe")
    listed = d.get("list")
    return SubscribeResult(
        subscribed=bool(f.opt_bool(d, "subscribed", "sessions.subscribe")),
        list=parse_sessions_list(listed) if listed is not None else None,
    )


def parse_describe(payload: object) -> SessionRow | None:
    d = f.obj(payload, "sessions.describe")
    row = d.get("session")
    return None if row is None else parse_session_row(row, "sessions.describe.session")


@attrs.frozen
class ChatSendResult:
    """``status``: ``started``; on a repeat of the same idempotency key ``in_flight`` while it runs, ``ok``
    (the cached terminal) after. ``run_id`` always equals the idempotency key sent."""

    run_id: str
    status: str
    raw: Mapping[str, Any] = RAW


def parse_chat_send(payload: object) -> ChatSendResult:
    d = f.obj(payload, "chat.send")
    return ChatSendResult(run_id=f.req_str(d, "runId", "chat.send"), status=f.req_str(d, "status", "chat.send"), raw=d)


@attrs.frozen
class ChatAbortResult:
    aborted: bool
    run_ids: tuple[str, ...] = ()
    ok: bool = True


def parse_chat_abort(payload: object) -> ChatAbortResult:
    d = f.obj(payload, "chat.abort")
    return ChatAbortResult(
        aborted=bool(f.opt_bool(d, "aborted", "chat.abort")),
        run_ids=f.opt_str_list(d, "runIds", "chat.abort") or (),
        ok=f.opt_bool(d, "ok", "chat.abort") is not False,
    )


@attrs.frozen
class TextPart:
    text: str


@attrs.frozen
class ToolCallPart:
    id: str
    name: str
    arguments: Any = None


@attrs.frozen
class OtherPart:
    """A content part owc does not render (thinking, images, canvas blocks ...), kept whole."""

    type: str | None
    raw: Mapping[str, Any] = RAW


Part = TextPart | ToolCallPart | OtherPart


@attrs.frozen
class Provenance:
    kind: str
    source_tool: str | None = None
    source_session_key: str | None = None
    run_id: str | None = None
    raw: Mapping[str, Any] = RAW

    @property
    def is_restart_recovery(self) -> bool:
        return self.kind == "internal_system" and self.source_tool == RESTART_RECOVERY_TOOL


def _parse_part(p: object, where: str) -> Part:
    d = f.obj(p, where)
    kind = d.get("type")
    if kind == "text" and isinstance(d.get("text"), str):
        return TextPart(d["text"])
    if kind == "toolCall":
        return ToolCallPart(
            id=f.req_str(d, "id", where), name=f.opt_str(d, "name", where) or "", arguments=d.get("arguments")
        )
    return OtherPart(type=kind if isinstance(kind, str) else None, raw=d)


def _parse_provenance(d: f.JSONObject | None, where: str) -> Provenance | None:
    if d is None:
        return None
    return Provenance(
        kind=f.opt_str(d, "kind", where) or "",
        source_tool=f.opt_str(d, "sourceTool", where),
        source_session_key=f.opt_str(d, "sourceSessionKey", where),
        run_id=f.opt_str(d, "runId", where),
        raw=d,
    )


@attrs.frozen
class HistoryMessage:
    role: str
    parts: tuple[Part, ...] = ()
    idempotency_key: str | None = None
    openclaw_id: str | None = None
    openclaw_run_id: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False
    aborted: bool = False
    stop_reason: str | None = None
    timestamp: int | None = None
    provenance: Provenance | None = None
    #: ``__openclaw.turnBoundary``: chat.history's mark on the first message shown after a hidden heartbeat
    #: runner prompt (measured on 2026.9.6; NOTES.md "Heartbeat runs in the transcript").
    turn_boundary: bool = False
    #: ``__openclaw.seq``: the message's place in the stored transcript (hidden messages leave gaps).
    seq: int | None = None
    raw: Mapping[str, Any] = RAW

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolCallPart))

    @property
    def user_run_id(self) -> str | None:
        """For a user turn, the run it started: ``<runId>:user``."""
        key = self.idempotency_key
        if self.role == "user" and key and key.endswith(USER_KEY_SUFFIX):
            return key[: -len(USER_KEY_SUFFIX)] or None
        return None

    @property
    def assistant_run_id(self) -> str | None:
        """For an assistant message, the run that wrote it: ``__openclaw.runId``, else ``cli-assistant:<R>``
        (CLI runtimes) or ``<R>:assistant`` (an aborted partial) in its id or idempotency key."""
        if self.role != "assistant":
            return None
        if self.openclaw_run_id:
            return self.openclaw_run_id
        for key in (self.idempotency_key, self.openclaw_id):
            if not key:
                continue
            if key.startswith(CLI_ASSISTANT_PREFIX) and len(key) > len(CLI_ASSISTANT_PREFIX):
                return key[len(CLI_ASSISTANT_PREFIX) :]
            if key.endswith(ABORTED_ASSISTANT_SUFFIX) and len(key) > len(ABORTED_ASSISTANT_SUFFIX):
                return key[: -len(ABORTED_ASSISTANT_SUFFIX)]
        return None

    @property
    def is_restart_recovery_turn(self) -> bool:
        return self.provenance is not None and self.provenance.is_restart_recovery

    @property
    def is_terminal_error(self) -> bool:
        """The Gateway's record that its run failed: an assistant message with ``stopReason: "error"`` (2026.9.6
        keys it ``<R>:terminal-error``). ``chat.history`` strips its ``errorMessage`` and puts its own copy of the
        failure as the first paragraph of the first text part, before any partial text the run had written
        (``chat-display-projection``: ``getAssistantErrorFallbackText`` joined with a blank line; measured, see
        docs/reference/gateway-errors-heartbeats-internal.md)."""
        return self.role == "assistant" and self.stop_reason == "error"

    @property
    def error_copy(self) -> str | None:
        """For a terminal error record, the Gateway's copy of the failure (the first paragraph of its first text
        part), else ``None``. The copy is one paragraph in every form 2026.9.6 writes."""
        if not self.is_terminal_error:
            return None
        first = next((p.text for p in self.parts if isinstance(p, TextPart)), "")
        copy = first.split("\n\n", 1)[0].strip()
        return copy or None


def parse_history_message(d: object, where: str = "message") -> HistoryMessage:
    d = f.obj(d, where)
    meta = f.opt_obj(d, "__openclaw", where) or {}
    content = d.get("content")
    if isinstance(content, str):
        parts: tuple[Part, ...] = (TextPart(content),) if content else ()
    else:
        parts = tuple(_parse_part(p, f"{where}.content[{i}]") for i, p in enumerate(f.opt_list(d, "content", where)))
    abort = f.opt_obj(d, "openclawAbort", where) or {}
    # The user turn's ``provenance`` (top level; measured on 2026.9.6, NOTES.md "provenance").
    raw_prov = d.get("provenance")
    prov = _parse_provenance(raw_prov, f"{where}.provenance") if isinstance(raw_prov, Mapping) else None
    return HistoryMessage(
        role=f.req_str(d, "role", where),
        parts=parts,
        idempotency_key=f.opt_str(d, "idempotencyKey", where)
        or f.opt_str(meta, "idempotencyKey", f"{where}.__openclaw"),
        openclaw_id=f.opt_str(meta, "id", f"{where}.__openclaw") or f.opt_str(d, "id", where),
        openclaw_run_id=f.opt_str(meta, "runId", f"{where}.__openclaw"),
        tool_call_id=f.opt_str(d, "toolCallId", where),
        tool_name=f.opt_str(d, "toolName", where),
        is_error=bool(f.opt_bool(d, "isError", where)),
        aborted=bool(f.opt_bool(abort, "aborted", f"{where}.openclawAbort")),
        stop_reason=f.opt_str(d, "stopReason", where),
        timestamp=f.opt_int(d, "timestamp", where),
        provenance=prov,
        turn_boundary=meta.get("turnBoundary") is True,
        seq=f.opt_int(meta, "seq", f"{where}.__openclaw"),
        raw=d,
    )


@attrs.frozen
class ChatHistory:
    session_key: str
    messages: tuple[HistoryMessage, ...]
    session_id: str | None = None
    #: Older messages exist; ``next_offset`` asks for the page before this one (offsets count back from
    #: the newest message, measured on 2026.9.6).
    has_more: bool = False
    next_offset: int | None = None
    #: Where messages that could not be read were skipped: each is the index in ``messages`` of the message
    #: that followed it. A run whose span holds one cannot be finished from this transcript alone.
    unreadable: tuple[int, ...] = ()
    raw: Mapping[str, Any] = RAW


def parse_chat_history(payload: object) -> ChatHistory:
    """The page, read message by message: one message of an unexpected type is skipped and logged (and its
    place kept in ``unreadable``); before, it failed the whole reply, and every finalize in the session fell
    back to the stream."""
    w = "chat.history"
    d = f.obj(payload, w)
    msgs = f.opt_list(d, "messages", w)
    good: list[HistoryMessage] = []
    unreadable: list[int] = []
    for i, m in enumerate(msgs):
        try:
            good.append(parse_history_message(m, f"{w}.messages[{i}]"))
        except ProtocolError as exc:
            unreadable.append(len(good))
            log.error("protocol.bad_history_message index=%d error=%s (skipped)", i, exc)
    return ChatHistory(
        session_key=f.req_str(d, "sessionKey", w),
        messages=tuple(good),
        session_id=f.opt_str(d, "sessionId", w),
        has_more=bool(f.opt_bool(d, "hasMore", w)),
        next_offset=f.opt_int(d, "nextOffset", w),
        unreadable=tuple(unreadable),
        raw=d,
    )


def older_page(older: ChatHistory, newer: ChatHistory) -> ChatHistory:
    """Join an older page in front of a newer one (the joined window's paging state is the older page's).

    Offsets count back from the newest stored message, so a message stored between the two requests (another run
    began) shifts the older page onto messages the newer one already holds: those are dropped, by ``seq`` (the
    stored position) where the Gateway numbers messages, else by id. Before, they were joined twice, and a run
    finished from the window showed their text and cards twice (fuzzer, with the simulator paging as the real
    Gateway does)."""
    first_seq = next((m.seq for m in newer.messages if m.seq is not None), None)
    ids = {m.openclaw_id for m in newer.messages if m.openclaw_id}
    kept = tuple(
        m
        for m in older.messages
        if not (first_seq is not None and m.seq is not None and m.seq >= first_seq)
        and not (m.openclaw_id and m.openclaw_id in ids)
    )
    if len(kept) != len(older.messages):
        log.info(
            "protocol.history_overlap dropped=%d (the transcript grew between pages)", len(older.messages) - len(kept)
        )
    kept_at = {id(m): i for i, m in enumerate(kept)}
    unreadable_older = tuple(
        len(kept) if i >= len(older.messages) else kept_at[id(older.messages[i])]
        for i in older.unreadable
        if i >= len(older.messages) or id(older.messages[i]) in kept_at
    )
    shift = len(kept)
    return attrs.evolve(
        newer,
        messages=kept + newer.messages,
        has_more=older.has_more,
        next_offset=older.next_offset,
        unreadable=unreadable_older + tuple(i + shift for i in newer.unreadable),
    )


#: Result parsers by method, for callers that correlate a response with the method they sent.
RESULT_PARSERS = {
    "sessions.subscribe": parse_subscribe,
    "sessions.list": parse_sessions_list,
    "sessions.describe": parse_describe,
    "chat.send": parse_chat_send,
    "chat.abort": parse_chat_abort,
    "chat.history": parse_chat_history,
}
