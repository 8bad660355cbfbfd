"""Fan-out: which connection gets which event, numbered per connection, and what a faulty connection loses.

A ``SimConn`` is one client's WebSocket connection (never an agent session: those are ``model.AgentSession``).
Every connection has an unbounded outbound channel drained by its own writer task (``write_frames``), so
emitting is synchronous: when ``Fanout.emit`` returns, the event is queued for every reader in the order the
Gateway decided, and a slow socket never blocks another connection (NOTES.md, "Simulator").

What the real Gateway does and this models:

* the envelope ``seq`` is per connection; a ``dropIfSlow`` event a connection loses still spends its number,
  so the client sees a gap;
* a slow consumer loses its drop-if-slow events and is closed with 1008 on the first one that may not drop;
* who gets what: ``chat`` / ``agent`` to every reader, ``agent`` tool events only to the run's sender if it
  declared ``tool-events``, ``session.tool`` to the other subscribers, ``sessions.changed`` to subscribers,
  ``session.message`` to subscribers and to whoever asked ``sessions.messages.subscribe`` for the key;
* a heartbeat run is not shown to control UIs: only those who asked ``sessions.messages.subscribe`` for its
  key get its lifecycle and item ``agent`` events (flagged ``isHeartbeat``) and its one ``chat`` terminal
  (not flagged); nobody gets its status, text or tool events (``sendLivePayload`` and the agent event handler
  in ``server-chat-*.mjs``; a heartbeat's ``isControlUiVisible`` is false, ``agent-runner.runtime-*.mjs:3324-3333``;
  measured on 2026.9.6).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import orjson
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection

from owc.sim import model as m

READ, WRITE = "operator.read", "operator.write"
ADMIN, QUESTIONS = "operator.admin", "operator.questions"

#: Who among the live connections receives an event.
Audience = Callable[["SimConn"], bool]
#: The ``agent`` streams of a run not shown to control UIs that its key's message subscribers still get
#: (2026.9.6: ``isItemEvent || shouldMirrorAgentEventToHiddenSessionMessages``, ``server-chat-*.mjs:160-162,
#: 994``; commentary-phase ``assistant`` text too, which the simulator never sends).
HIDDEN_RUN_STREAMS = frozenset({"lifecycle", "item", "thinking", "approval"})
#: Events their audience alone gives out, read scope or not: ``tick`` to every connection, and the question events,
#: which the Gateway guards by ``operator.questions`` (``EVENT_SCOPE_GUARDS``; ``question_recipients``).
OWN_GUARD_EVENTS = frozenset({"tick", "question.requested", "question.resolved"})


@attrs.frozen
class Close:
    """Close the WebSocket with a close frame, after everything queued before it."""

    code: int
    reason: str


@attrs.frozen
class Abort:
    """Drop the TCP connection without a close frame: the client sees 1006, as after a crash."""


@attrs.define(eq=False)
class SimConn:
    """One client's WebSocket connection to the simulated Gateway, with its delivery state and faults."""

    conn_id: str
    ws: WebSocketConnection
    client_id: str = ""
    mode: str = ""
    instance_id: str | None = None
    caps: frozenset[str] = frozenset()
    scopes: frozenset[str] = frozenset()
    #: ``scopes`` in the order the client asked them: ``hello-ok.auth.scopes`` keeps that order (measured).
    scope_order: tuple[str, ...] = ()
    #: The device this connection proved (``connect.device.id``), None for a token-only client.
    device_id: str | None = None
    subscribed: bool = False
    message_keys: set[str] = attrs.field(factory=set)  # agent session keys of sessions.messages.subscribe
    seq: int = 0
    drop_next: int = 0
    slow: bool = False
    closing: bool = False
    #: The process holding this connection was killed (``ScenarioPlayer.kill``): until the socket closes it is
    #: still sent frames, but nothing it reads shows anywhere, so they are no part of the "streamed" record.
    killed: bool = False
    stalled: bool = False  # requests are read and never answered (a hung server)
    failing: frozenset[str] = frozenset()  # methods answered with an UNAVAILABLE error (a failing backend)
    stalling: frozenset[str] = frozenset()  # methods whose requests are held, unanswered, until released
    held: list[Any] = attrs.field(factory=list)  # those requests (``protocol.Request``), oldest first
    muted: bool = False  # nothing is sent any more (a half-open socket)
    dropped: int = 0
    send: trio.MemorySendChannel[Any] | None = None

    @property
    def name(self) -> str:
        return self.instance_id or self.conn_id

    def can_read(self) -> bool:
        return READ in self.scopes


def dumps(obj: Any) -> str:
    return orjson.dumps(obj).decode()


async def write_frames(conn: SimConn, recv: trio.MemoryReceiveChannel[Any]) -> None:
    """The connection's writer task: sends what was queued, in order, until a close or an abort."""
    async for item in recv:
        try:
            if isinstance(item, Close):
                await conn.ws.aclose(item.code, item.reason)
                return
            if isinstance(item, Abort):
                await conn.ws._close_stream()  # no public abort in trio-websocket: drop the TCP stream
                return
            await conn.ws.send_message(item)
        except ConnectionClosed:
            return


def everyone(conn: SimConn) -> bool:
    return True


def subscribers(conn: SimConn) -> bool:
    return conn.subscribed


def message_subscribers(key: str) -> Audience:
    """The connections that asked ``sessions.messages.subscribe`` for ``key``."""
    return lambda c: key in c.message_keys


def question_recipients(conn: SimConn) -> bool:
    """Who gets ``question.requested`` / ``question.resolved``: every connection holding ``operator.questions`` or
    ``operator.admin`` (which counts as every scope), whatever its caps and subscriptions (measured on 2026.9.6,
    docs/measured/ask-user-2026.9.6.md section 4: read+write alone gets nothing)."""
    return QUESTIONS in conn.scopes or ADMIN in conn.scopes


def tool_recipient(run: m.Run) -> Audience:
    """The run's sender, if it declared ``tool-events``: it alone gets ``agent`` tool events."""
    return lambda c: c.conn_id == run.owner and "tool-events" in c.caps


def tool_observers(run: m.Run) -> Audience:
    """Every other subscriber: it gets the same tool events as ``session.tool``."""
    return lambda c: c.subscribed and not (c.conn_id == run.owner and "tool-events" in c.caps)


class Fanout:
    """Delivers frames to the live connections in ``conns`` (shared with the Simulator, which registers them)."""

    def __init__(self, conns: dict[str, SimConn], now_ms: Callable[[], int]) -> None:
        self.conns = conns
        self._now_ms = now_ms

    def emit(self, event: str, payload: dict[str, Any], *, audience: Audience, drop_if_slow: bool) -> list[SimConn]:
        """Send one event to every connection in ``audience``, numbering it per connection; returns the
        connections it was queued for (not the ones it was dropped for)."""
        sent: list[SimConn] = []
        for conn in list(self.conns.values()):
            if conn.closing or not audience(conn):
                continue
            if event not in OWN_GUARD_EVENTS and not conn.can_read():
                continue
            conn.seq += 1
            if drop_if_slow and conn.drop_next > 0:
                conn.drop_next -= 1
                conn.dropped += 1
                continue
            if conn.slow:
                if drop_if_slow:
                    conn.dropped += 1
                    continue
                self.close(conn, 1008, "slow consumer")
                continue
            self.enqueue(conn, {"type": "event", "event": event, "payload": payload, "seq": conn.seq})
            if not conn.muted:
                sent.append(conn)
        return sent

    def enqueue(self, conn: SimConn, frame: dict[str, Any]) -> None:
        """Queue one frame (an event or a reply) unless the connection is muted."""
        assert conn.send is not None
        if not conn.muted:
            conn.send.send_nowait(dumps(frame))

    def close(self, conn: SimConn, code: int, reason: str) -> None:
        if conn.closing:
            return
        conn.closing = True
        assert conn.send is not None
        conn.send.send_nowait(Close(code, reason))

    def abort(self, conn: SimConn) -> None:
        if conn.closing:
            return
        conn.closing = True
        assert conn.send is not None
        conn.send.send_nowait(Abort())

    # ------------------------------------------------------------------ the Gateway's pushes

    def sessions_changed(
        self, session: m.AgentSession, *, phase: str | None = None, run_id: str | None = None, reason: str | None = None
    ) -> None:
        payload = m.sessions_changed_payload(session, self._now_ms(), phase=phase, run_id=run_id, reason=reason)
        self.emit("sessions.changed", payload, audience=subscribers, drop_if_slow=True)

    def session_message(self, session: m.AgentSession, message: dict[str, Any], run_id: str | None) -> None:
        """A stored message pushed as shown: to the session subscribers and to the key's message subscribers
        (2026.9.6, ``server-session-events-*.mjs:98-100``)."""
        payload: dict[str, Any] = {
            "sessionKey": session.key,
            "agentId": session.agent_id,
            "message": message,
            "messageId": message["__openclaw"]["id"],
        }
        if run_id is not None:
            payload["runId"] = run_id
        if session.spawn is not None:
            payload["session"] = session.row(event=True)  # a sub-agent's names its parent: ``session.spawnedBy``
        key = session.key
        audience: Audience = lambda c: c.subscribed or key in c.message_keys  # noqa: E731
        self.emit("session.message", payload, audience=audience, drop_if_slow=False)

    def hidden_message(self, session: m.AgentSession, message: dict[str, Any]) -> None:
        """A stored message the display projection hides (a heartbeat's prompt, a bare acknowledgement): no
        ``session.message``, but ``sessions.changed`` ``phase: "message"`` naming it, to the session subscribers,
        droppable (2026.9.6, ``server-session-events-*.mjs:204-218``; measured)."""
        payload = m.sessions_changed_payload(session, self._now_ms(), message=message)
        self.emit("sessions.changed", payload, audience=subscribers, drop_if_slow=True)

    def chat(self, run: m.Run, state: str, *, drop_if_slow: bool, **fields: Any) -> None:
        payload = m.chat_payload(run, state, **fields)  # numbered even when nobody gets it, as live
        if not run.heartbeat:
            sent = self.emit("chat", payload, audience=everyone, drop_if_slow=drop_if_slow)
            message = fields.get("message")
            if message is not None:  # what each client was shown of the run (the oracle's "streamed" record)
                text = m.plain_text(message) or ""
                now = trio.current_time()
                for conn in sent:
                    if conn.killed:
                        continue
                    if len(text) >= len(run.streamed.get(conn.name, "")):
                        run.streamed[conn.name], run.streamed_at[conn.name] = text, now
        elif state in ("final", "aborted", "error"):
            # A heartbeat's deltas are hidden (``shouldHideHeartbeatChatOutput``, ``server-chat-*.mjs:48-59``) and
            # its status comes only for a chat.send (:924); its terminal goes to the key's message subscribers
            # (``emitChatTerminal`` / ``sendLivePayload``, :632-694), without ``isHeartbeat``.
            self.emit("chat", payload, audience=message_subscribers(run.key), drop_if_slow=drop_if_slow)

    def agent(self, run: m.Run, stream: str, data: dict[str, Any], *, session_id: str | None = None) -> None:
        payload = m.agent_payload(run, stream, data, self._now_ms(), session_id)
        if not run.heartbeat:
            self.emit("agent", payload, audience=everyone, drop_if_slow=False)
        elif stream in HIDDEN_RUN_STREAMS:
            # Not shown to control UIs: mirrored to the key's message subscribers only, and droppable
            # (``server-chat-*.mjs:160-162, 994``; ``sendOrBufferAgentTextEvent`` :773-797). Measured: a heartbeat
            # that answers text sends them its lifecycle events alone, no ``run_status`` and no ``assistant``.
            self.emit("agent", payload, audience=message_subscribers(run.key), drop_if_slow=True)

    def tool_event(self, run: m.Run, data: dict[str, Any], session: m.AgentSession | None = None) -> None:
        """One tool event: ``agent`` to the run's sender, ``session.tool`` to the other subscribers; none at all
        for a heartbeat run (``suppressHeartbeatToolEvents``, ``server-chat-*.mjs:889``). A sub-agent's (``session``
        spawned) has no sender among the connections, so every subscriber gets it as ``session.tool``, with the
        child's row snapshot (``spawnedBy``, ``spawnDepth``, ``label`` ...; measured). Other runs' ``session.tool``
        frames leave the row out (owc reads none of it)."""
        payload = m.agent_payload(run, "tool", data, self._now_ms())
        if run.heartbeat:
            return
        self.emit("agent", payload, audience=tool_recipient(run), drop_if_slow=False)
        if session is not None and session.spawn is not None:
            payload = {**payload, "session": session.row(event=True)}
        self.emit("session.tool", payload, audience=tool_observers(run), drop_if_slow=True)

    def heartbeat(self, payload: dict[str, Any]) -> None:
        """The heartbeat runner's global ``heartbeat`` event: to every reader, droppable
        (``server-runtime-subscriptions-*.mjs:2298-2300``)."""
        self.emit("heartbeat", payload, audience=everyone, drop_if_slow=True)
