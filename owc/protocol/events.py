"""Typed payloads of the events owc consumes, and a per-connection ``EventDecoder``.

Every typed event keeps its ``raw`` payload: the Gateway sends many more fields than owc reads (a
``sessions.changed`` carries a nested ``session`` row plus ~80 flattened row fields), and they are kept, not
rejected. Event kinds owc does not consume (``health``, ``session.message``, ``update.available`` ...) decode
to ``OtherEvent``; the decoder logs each such kind once per connection.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import attrs

from owc.protocol import fields as f
from owc.protocol.errors import ProtocolError
from owc.protocol.frames import Deferred, EventFrame, materialized
from owc.protocol.handshake import ConnectChallenge, parse_challenge
from owc.protocol.questions import QuestionRequested, QuestionResolved, parse_requested, parse_resolved

log = logging.getLogger("owc.protocol")

RAW = attrs.field(default=attrs.Factory(dict), repr=False, eq=False)


@attrs.frozen
class Tick:
    ts: int | None
    raw: Mapping[str, Any] = RAW


@attrs.frozen
class Shutdown:
    """``restart_expected_ms`` is present only when the Gateway restarts (restart mode); a plain stop has none.
    The owner rule reads exactly that difference (seed 000 section 2.7, F4)."""

    reason: str
    restart_expected_ms: int | None = None
    raw: Mapping[str, Any] = RAW

    @property
    def is_restart(self) -> bool:
        return self.restart_expected_ms is not None


LIFECYCLE_PHASES = frozenset({"start", "model", "end", "error"})


@attrs.frozen
class SessionsChanged:
    """``sessions.changed`` in its two variants.

    * lifecycle: ``phase`` is start/model/end/error and ``run_id`` names the run. The end/error push is built
      with the active-run overlay, so it may still say ``status: running, hasActiveRun: true`` (F5).
    * reason: ``reason`` is set (``send``, ``participants``, ``agent.run.started``, ``agent.input.settled`` ...)
      and the payload is the session row. A reason push with ``hasActiveRun: false`` is the *settled* row.

    ``active_run_ids is None`` means the Gateway did not say which runs are active (``null`` on live
    ``phase:"start"``, or absent); an empty tuple means none. ``session_key`` is ``None`` on global pushes
    (live: ``{reason:"cron-bindings-loaded", ts}`` with no key, ``frames_recipe_check.jsonl``).
    """

    session_key: str | None
    phase: str | None = None
    reason: str | None = None
    run_id: str | None = None
    client_run_id: str | None = None
    ts: int | None = None
    has_active_run: bool | None = None
    active_run_ids: tuple[str, ...] | None = None
    status: str | None = None
    aborted_last_run: bool | None = None
    last_run_id: str | None = None
    last_run_error: str | None = None
    updated_at: int | None = None
    agent_id: str | None = None
    raw: Mapping[str, Any] = RAW

    @property
    def is_lifecycle(self) -> bool:
        return self.phase in LIFECYCLE_PHASES

    @property
    def is_settled(self) -> bool:
        """The settled-row push: not a lifecycle phase, and the session has no active run."""
        return not self.is_lifecycle and self.has_active_run is False

    @property
    def effective_run_id(self) -> str | None:
        """The id the run is known by to clients: ``clientRunId`` when it differs, else ``runId``."""
        return self.client_run_id or self.run_id


CHAT_STATES = frozenset({"delta", "final", "aborted", "error", "status"})
CHAT_TERMINAL_STATES = frozenset({"final", "aborted", "error"})


def message_text(message: Mapping[str, Any] | None) -> str:
    """The text of a chat message: its ``text`` content parts joined, or the content itself if a string."""
    if not message:
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        part["text"]
        for part in content
        if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)
    )


#: Why the per-frame records (``ChatEvent``, ``AgentEvent``, ``AssistantData``; ``EventFrame`` and ``Deliver`` on the
#: way) are slotted ``attrs.define`` classes and not ``attrs.frozen``: a frozen class sets each field through
#: ``object.__setattr__`` (a call per field), a mutable one by a plain store. Measured on the bench's mix (issue 32):
#: an ``AgentEvent`` built in 1.75 us frozen, 0.65 us not; the reader's CPU per event 6.7 -> 5.1 us, and owc's
#: reader over asyncio ``websockets`` 0.93 -> 1.11. They are immutable by contract all the same: nothing in owc
#: assigns to an event after ``parse_event`` built it (the only writes are the two read-once caches of a
#: ``Deferred`` below), and events are compared by value, never hashed.


@attrs.define
class ChatEvent:
    """``chat``: ``message`` is the cumulative assistant snapshot, ``delta_text`` the increment.
    ``run_seq`` is ``payload.seq``, the agent run's own sequence, not the envelope's.

    The snapshot may arrive unread (``Deferred``, ``decode_frame``'s fast path for deltas): ``message`` reads it on
    first use and keeps what it read; ``has_message`` says whether there is one without reading it. ``epoch`` is
    the connection's stretch without a seq gap this event arrived in (``EventDecoder.epoch``): two events of one
    run in the same epoch have nothing of that run between them that owc did not see."""

    run_id: str
    session_key: str
    state: str
    run_seq: int | None = None
    delta_text: str | None = None
    replace: bool = False
    _message: Mapping[str, Any] | Deferred | None = attrs.field(default=None, alias="message")
    yielded: bool = False
    stop_reason: str | None = None
    error_message: str | None = None
    error_kind: str | None = None
    phase: str | None = None
    agent_id: str | None = None
    spawned_by: str | None = None
    epoch: object | None = attrs.field(default=None, eq=False, repr=False)
    raw: Mapping[str, Any] = RAW

    @property
    def message(self) -> Mapping[str, Any] | None:
        value = self._message
        if type(value) is Deferred:
            loaded = value.load()
            # Read once: a cache of an immutable frame's own value, so the event stays what it was.
            value = loaded if isinstance(loaded, Mapping) else None
            object.__setattr__(self, "_message", value)
        return value

    @property
    def has_message(self) -> bool:
        """Whether the event carries a snapshot, without reading it."""
        return self._message is not None

    @property
    def is_terminal(self) -> bool:
        return self.state in CHAT_TERMINAL_STATES

    @property
    def text(self) -> str:
        return message_text(self.message)


@attrs.frozen
class LifecycleData:
    phase: str
    stop_reason: str | None = None
    aborted: bool | None = None
    error: str | None = None


@attrs.define
class AssistantData:
    """``stream:"assistant"``: ``text`` is the whole reply so far (read on first use: ``decode_frame``'s fast path
    may leave it unread, a ``Deferred``, since owc takes the reply's text from ``chat``), ``delta`` the increment."""

    _text: str | Deferred | None = attrs.field(alias="text")
    delta: str | None
    item_id: str | None = None

    @property
    def text(self) -> str | None:
        value = self._text
        if type(value) is Deferred:
            loaded = value.load()
            value = loaded if type(loaded) is str else None
            object.__setattr__(self, "_text", value)
        return value


@attrs.frozen
class ToolData:
    """``stream:"tool"``: ``phase`` start (with ``args``) or result (with ``result`` and ``is_error``)."""

    phase: str
    tool_call_id: str
    name: str | None = None
    args: Any = None
    result: Any = None
    is_error: bool = False
    #: Set on a call made inside another (Tool Search's ``tool_call`` running ``ask_user``): the parent's call id.
    parent_tool_call_id: str | None = None


@attrs.frozen
class ItemData:
    item_id: str | None
    phase: str | None
    kind: str | None = None
    tool_call_id: str | None = None
    name: str | None = None
    title: str | None = None
    status: str | None = None


@attrs.define
class AgentEvent:
    """``agent`` (and ``session.tool``, which carries the identical payload to subscribers that do not own
    the run: ``via`` says which arrived). ``data`` is typed per stream in ``lifecycle`` / ``assistant`` /
    ``tool`` / ``item``; other streams (``run_status``, ``usage``, ``error`` ...) keep ``data`` only. In an
    ``assistant`` event ``data["text"]`` may be a ``Deferred`` (the whole reply so far, left unread by
    ``decode_frame``'s fast path): read it as ``assistant.text``."""

    run_id: str
    stream: str
    data: Mapping[str, Any]
    via: str = "agent"
    session_key: str | None = None
    run_seq: int | None = None
    ts: int | None = None
    is_heartbeat: bool | None = None
    agent_id: str | None = None
    spawned_by: str | None = None
    #: The Gateway's routing flags (``AGENT_EVENT_ROUTING_FIELDS`` in 2026.9.6's ``agent-events``): ``False``
    #: marks an internal run (``projectSessionLifecycle`` / ``controlUiVisible``). Measured: such a run's events
    #: never reach an operator client, so this is a second line of defence (``is_internal``).
    project_session_lifecycle: bool | None = None
    control_ui_visible: bool | None = None
    lifecycle: LifecycleData | None = None
    assistant: AssistantData | None = None
    tool: ToolData | None = None
    item: ItemData | None = None
    raw: Mapping[str, Any] = RAW

    @property
    def is_internal(self) -> bool:
        """An internal run's event: flagged so, or its run id is of an internal form (``is_internal_run_id``)."""
        return (
            self.project_session_lifecycle is False
            or self.control_ui_visible is False
            or is_internal_run_id(self.run_id)
        )


#: Run id prefixes of the Gateway's internal runs (2026.9.6): a progress card refresh (``progress-card-refresh-*.mjs``:
#: ``progress-card-refresh:<sha256>``, run on the chat's own key) and a skill workshop review
#: (``experience-review-*.mjs``: ``skill-workshop-review:<uuid>``, on an internal key). Both run with
#: ``projectSessionLifecycle: false``. A memory flush is internal too, but its id is a bare UUID on an
#: ``agent:<id>:internal-session-effects:...`` key, which is no Open WebUI chat's key.
INTERNAL_RUN_PREFIXES = ("progress-card-refresh:", "skill-workshop-review:")


def is_internal_run_id(run_id: str | None) -> bool:
    """Whether ``run_id`` names one of the Gateway's internal runs, which never get a message: the Gateway shows
    them on none of its own chat surfaces (``isControlUiVisible: false``, ``display: false`` in the transcript)."""
    return isinstance(run_id, str) and run_id.startswith(INTERNAL_RUN_PREFIXES)


@attrs.frozen
class OtherEvent:
    """An event kind owc does not consume, kept whole."""

    kind: str
    raw: Mapping[str, Any] = RAW


Event = (
    ConnectChallenge
    | Tick
    | Shutdown
    | SessionsChanged
    | ChatEvent
    | AgentEvent
    | QuestionRequested
    | QuestionResolved
    | OtherEvent
)


def parse_tick(p: f.JSONObject) -> Tick:
    return Tick(ts=f.opt_int(p, "ts", "tick"), raw=p)


def parse_shutdown(p: f.JSONObject) -> Shutdown:
    return Shutdown(
        reason=f.opt_str(p, "reason", "shutdown") or "gateway stopping",
        restart_expected_ms=f.opt_int(p, "restartExpectedMs", "shutdown"),
        raw=p,
    )


def parse_sessions_changed(p: f.JSONObject) -> SessionsChanged:
    w = "sessions.changed"
    return SessionsChanged(
        session_key=f.opt_id(p, "sessionKey", w),
        phase=f.opt_str(p, "phase", w),
        reason=f.opt_str(p, "reason", w),
        run_id=f.opt_id(p, "runId", w),
        client_run_id=f.opt_id(p, "clientRunId", w),
        ts=f.opt_int(p, "ts", w),
        has_active_run=f.opt_bool(p, "hasActiveRun", w),
        active_run_ids=f.opt_str_list(p, "activeRunIds", w),
        status=f.opt_str(p, "status", w),
        aborted_last_run=f.opt_bool(p, "abortedLastRun", w),
        last_run_id=f.opt_str(p, "lastRunId", w),
        last_run_error=f.opt_str(p, "lastRunError", w),
        updated_at=f.opt_int(p, "updatedAt", w),
        agent_id=f.opt_str(p, "agentId", w),
        raw=p,
    )


_MAX_ID = f.MAX_ID_CHARS


def _good_id(value: object) -> bool:
    """What ``fields.req_id`` accepts, the common way only (a ``str``, not empty, not too long, printable): the fast
    parsers' test (written out inline for the run id and the session key, the ids of every frame); anything else
    goes to the checked parse, which accepts or names what is wrong."""
    return type(value) is str and 0 < len(value) <= _MAX_ID and value.isprintable()


def parse_chat(p: f.JSONObject, epoch: object | None = None) -> ChatEvent:
    """A ``chat`` payload. The fast way (issue 32: a typed event per frame was most of the reader's cost) reads
    each field once and tests its exact type; a payload it does not vouch for (a field of another type, a number
    where a float is allowed, an id with a character ``isprintable`` refuses) takes ``_parse_chat_checked``, which
    gives the same event or names the field. ``tests/test_protocol_fast_parse.py`` holds the two to each other."""
    run_id = p.get("runId")
    session_key = p.get("sessionKey")
    state = p.get("state")
    seq = p.get("seq")
    delta_text = p.get("deltaText")
    replace = p.get("replace")
    message = p.get("message")
    yielded = p.get("yielded")
    stop_reason = p.get("stopReason")
    error_message = p.get("errorMessage")
    error_kind = p.get("errorKind")
    phase = p.get("phase")
    agent_id = p.get("agentId")
    spawned_by = p.get("spawnedBy")
    if (
        type(run_id) is str
        and 0 < len(run_id) <= _MAX_ID
        and run_id.isprintable()
        and type(session_key) is str
        and 0 < len(session_key) <= _MAX_ID
        and session_key.isprintable()
        and type(state) is str
        and (seq is None or type(seq) is int)
        and (delta_text is None or type(delta_text) is str)
        and (replace is None or type(replace) is bool)
        and (message is None or type(message) is dict or type(message) is Deferred)
        and (yielded is None or type(yielded) is bool)
        and (stop_reason is None or type(stop_reason) is str)
        and (error_message is None or type(error_message) is str)
        and (error_kind is None or type(error_kind) is str)
        and (phase is None or type(phase) is str)
        and (agent_id is None or type(agent_id) is str)
        and (spawned_by is None or type(spawned_by) is str)
    ):
        return ChatEvent(
            run_id,
            session_key,
            state,
            seq,
            delta_text,
            replace is True,
            message,
            yielded is True,
            stop_reason,
            error_message,
            error_kind,
            phase,
            agent_id,
            spawned_by,
            epoch,
            p,
        )
    return _parse_chat_checked(p, epoch)


def _parse_chat_checked(p: f.JSONObject, epoch: object | None = None) -> ChatEvent:
    w = "chat"
    state = f.req_str(p, "state", w)
    message = p.get("message")
    return ChatEvent(
        run_id=f.req_id(p, "runId", w),
        session_key=f.req_id(p, "sessionKey", w),
        state=state,
        run_seq=f.opt_int(p, "seq", w),
        delta_text=f.opt_str(p, "deltaText", w),
        replace=bool(f.opt_bool(p, "replace", w)),
        message=message if type(message) is Deferred else f.opt_obj(p, "message", w),
        yielded=bool(f.opt_bool(p, "yielded", w)),
        stop_reason=f.opt_str(p, "stopReason", w),
        error_message=f.opt_str(p, "errorMessage", w),
        error_kind=f.opt_str(p, "errorKind", w),
        phase=f.opt_str(p, "phase", w),
        agent_id=f.opt_str(p, "agentId", w),
        spawned_by=f.opt_str(p, "spawnedBy", w),
        epoch=epoch,
        raw=p,
    )


def _lifecycle(d: f.JSONObject) -> LifecycleData:
    w = "agent.data"
    return LifecycleData(
        phase=f.req_str(d, "phase", w),
        stop_reason=f.opt_str(d, "stopReason", w),
        aborted=f.opt_bool(d, "aborted", w),
        error=d.get("error") if isinstance(d.get("error"), str) else None,
    )


def _assistant(d: f.JSONObject) -> AssistantData:
    w = "agent.data"
    text = d.get("text")
    return AssistantData(
        text=text if type(text) is Deferred else f.opt_str(d, "text", w),
        delta=f.opt_str(d, "delta", w),
        item_id=f.opt_str(d, "itemId", w),
    )


def _tool(d: f.JSONObject) -> ToolData:
    w = "agent.data"
    return ToolData(
        phase=f.req_str(d, "phase", w),
        tool_call_id=f.req_str(d, "toolCallId", w),
        name=f.opt_str(d, "name", w),
        args=d.get("args"),
        result=d.get("result"),
        is_error=bool(f.opt_bool(d, "isError", w)),
        parent_tool_call_id=f.opt_str(d, "parentToolCallId", w),
    )


def _item(d: f.JSONObject) -> ItemData:
    w = "agent.data"
    return ItemData(
        item_id=f.opt_str(d, "itemId", w),
        phase=f.opt_str(d, "phase", w),
        kind=f.opt_str(d, "kind", w),
        tool_call_id=f.opt_str(d, "toolCallId", w),
        name=f.opt_str(d, "name", w),
        title=f.opt_str(d, "title", w),
        status=f.opt_str(d, "status", w),
    )


def parse_agent(p: f.JSONObject, via: str = "agent") -> AgentEvent:
    """An ``agent`` (or ``session.tool``) payload, the fast way as ``parse_chat``: exact types, else
    ``_parse_agent_checked``. An ``assistant`` stream's data (every other frame of a streaming run) is typed here
    too; the other streams' data through their checked readers."""
    run_id = p.get("runId")
    stream = p.get("stream")
    data = p.get("data")
    session_key = p.get("sessionKey")
    seq = p.get("seq")
    ts = p.get("ts")
    is_heartbeat = p.get("isHeartbeat")
    agent_id = p.get("agentId")
    spawned_by = p.get("spawnedBy")
    lifecycle_flag = p.get("projectSessionLifecycle")
    visible = p.get("controlUiVisible")
    if not (
        type(run_id) is str
        and 0 < len(run_id) <= _MAX_ID
        and run_id.isprintable()
        and type(stream) is str
        and type(data) is dict
        and (session_key is None or _good_id(session_key))
        and (seq is None or type(seq) is int)
        and (ts is None or type(ts) is int)
        and (is_heartbeat is None or type(is_heartbeat) is bool)
        and (agent_id is None or type(agent_id) is str)
        and (spawned_by is None or type(spawned_by) is str)
        and (lifecycle_flag is None or type(lifecycle_flag) is bool)
        and (visible is None or type(visible) is bool)
    ):
        return _parse_agent_checked(p, via)
    lifecycle = assistant = tool = item = None
    if stream == "assistant":
        text = data.get("text")
        delta = data.get("delta")
        item_id = data.get("itemId")
        if not (
            (text is None or type(text) is str or type(text) is Deferred)
            and (delta is None or type(delta) is str)
            and (item_id is None or type(item_id) is str)
        ):
            return _parse_agent_checked(p, via)
        assistant = AssistantData(text, delta, item_id)
    elif stream == "lifecycle":
        lifecycle = _lifecycle(data)
    elif stream == "tool":
        tool = _tool(data)
    elif stream == "item":
        item = _item(data)
    return AgentEvent(
        run_id,
        stream,
        data,
        via,
        session_key,
        seq,
        ts,
        is_heartbeat,
        agent_id,
        spawned_by,
        lifecycle_flag,
        visible,
        lifecycle,
        assistant,
        tool,
        item,
        p,
    )


def _parse_agent_checked(p: f.JSONObject, via: str = "agent") -> AgentEvent:
    w = via
    stream = f.req_str(p, "stream", w)
    data = f.opt_obj(p, "data", w) or {}
    return AgentEvent(
        run_id=f.req_id(p, "runId", w),
        stream=stream,
        data=data,
        via=via,
        session_key=f.opt_id(p, "sessionKey", w),
        run_seq=f.opt_int(p, "seq", w),
        ts=f.opt_int(p, "ts", w),
        is_heartbeat=f.opt_bool(p, "isHeartbeat", w),
        agent_id=f.opt_str(p, "agentId", w),
        spawned_by=f.opt_str(p, "spawnedBy", w),
        project_session_lifecycle=f.opt_bool(p, "projectSessionLifecycle", w),
        control_ui_visible=f.opt_bool(p, "controlUiVisible", w),
        lifecycle=_lifecycle(data) if stream == "lifecycle" else None,
        assistant=_assistant(data) if stream == "assistant" else None,
        tool=_tool(data) if stream == "tool" else None,
        item=_item(data) if stream == "item" else None,
        raw=p,
    )


_PARSERS = {
    "connect.challenge": parse_challenge,
    "tick": parse_tick,
    "shutdown": parse_shutdown,
    "sessions.changed": parse_sessions_changed,
    "chat": parse_chat,
    "agent": parse_agent,
    "session.tool": lambda p: parse_agent(p, via="session.tool"),
    "question.requested": parse_requested,
    "question.resolved": parse_resolved,
}

CONSUMED_EVENTS = frozenset(_PARSERS)


def parse_event(frame: EventFrame, epoch: object | None = None) -> Event:
    """The typed payload of an event frame; ``OtherEvent`` for kinds owc does not consume. ``epoch``: stamped on
    a ``chat`` event (``ChatEvent.epoch``).

    Raises ``ProtocolError`` when a consumed kind lacks a field owc needs (a ``chat`` without ``runId``).
    """
    if frame.event == "chat":
        try:
            return parse_chat(frame.payload, epoch)
        except ProtocolError as exc:
            raise ProtocolError(f"chat event: {exc}") from None
    parser = _PARSERS.get(frame.event)
    if parser is None:
        return OtherEvent(kind=frame.event, raw=materialized(frame.payload))
    try:
        return parser(frame.payload)
    except ProtocolError as exc:
        # Name the event kind: field paths alone ("agent.data lacks 'phase'") do not say which frame it was.
        raise ProtocolError(f"{frame.event} event: {exc}") from None


@attrs.define
class EventDecoder:
    """Per-connection wrapper of ``parse_event`` that logs each unconsumed kind once.

    Its memory is per connection on purpose: a new connection (maybe to an upgraded Gateway) logs again.
    """

    seen_other: set[str] = attrs.field(factory=set)
    #: The current stretch of this connection without a seq gap (``ChatEvent.epoch``): a new object at each gap
    #: (``new_epoch``), and a new decoder, so a new epoch, for each connection. Compared by identity only.
    epoch: object = attrs.field(factory=object)

    def new_epoch(self) -> object:
        self.epoch = object()
        return self.epoch

    def decode(self, frame: EventFrame) -> Event:
        name = frame.event
        if name == "agent" or name == "chat":  # nearly every frame: one call less than ``parse_event``'s way
            try:
                return parse_agent(frame.payload) if name == "agent" else parse_chat(frame.payload, self.epoch)
            except ProtocolError as exc:
                raise ProtocolError(f"{name} event: {exc}") from None
        event = parse_event(frame, self.epoch)
        if isinstance(event, OtherEvent) and event.kind not in self.seen_other:
            self.seen_other.add(event.kind)
            log.info("protocol.event_not_consumed kind=%s", event.kind[:80])
        return event
