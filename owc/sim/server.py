"""The Gateway simulator: a Trio + trio-websocket server speaking protocol 4 like the real Gateway 2026.9.6.

It is owc's everyday Gateway (tests, the demo, benchmarks) and a product feature (users try owc and replay
incidents with it). What it models, each from ``shared/reference/openclaw`` unless noted:

* the handshake (challenge first; ``connect`` with protocol 4 and the token; the real refusals and close codes);
* per-connection envelope ``seq``; ``dropIfSlow`` events that a slow connection loses still spend a number;
  a slow consumer is closed with 1008 on the first event that may not be dropped;
* who gets what: ``chat`` / ``agent`` to every reader, ``agent`` tool events only to the run's sender that
  declared ``tool-events``, ``session.tool`` to the other subscribers, ``sessions.changed`` to subscribers;
* sessions, runs and transcripts with the real identities; ``chat.send`` idempotency and queueing;
* ``tick`` every ``tickIntervalMs`` on Trio's clock, ``shutdown`` then close 1012;
* the four restart modes of seed 000 section 2.7 F3, and restart recovery at boot with its provenance.

Runs are driven either by a script the simulator plays (``chat.send`` and recovery runs) or step by step
through ``SimRun`` (runs "other clients" start: cron, sessions_send, sub-agent announces, heartbeats).
"""

from __future__ import annotations

import collections
import logging
import math
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import orjson
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, WebSocketRequest, serve_websocket

from owc.protocol import DEFAULT_MAX_PAYLOAD, ProtocolError, Request, decode_frame
from owc.sim import model as m
from owc.sim.script import (
    Delay,
    End,
    Hold,
    RecoveryScript,
    Responder,
    Step,
    Text,
    Tool,
    default_recovery,
    fake_model_responder,
)

log = logging.getLogger("owc.sim")

SERVER_VERSION = "2026.9.6"
TICK_INTERVAL_MS = 30_000
MAX_BUFFERED_BYTES = 52_428_800
CLIENT_IDS = frozenset(
    {
        "webchat-ui", "openclaw-control-ui", "openclaw-browser-copilot", "openclaw-tui", "webchat", "cli",
        "gateway-client", "openclaw-macos", "openclaw-linux", "openclaw-ios", "openclaw-watchos",
        "openclaw-android", "node-host", "openclaw-worker", "test", "fingerprint", "openclaw-probe",
    }
)  # fmt: skip
CLIENT_MODES = frozenset({"webchat", "cli", "ui", "backend", "node", "worker", "probe", "test"})
READ, WRITE = "operator.read", "operator.write"
METHOD_SCOPES = {
    "sessions.subscribe": READ,
    "sessions.list": READ,
    "sessions.describe": READ,
    "sessions.messages.subscribe": READ,
    "sessions.messages.unsubscribe": READ,
    "chat.history": READ,
    "chat.send": WRITE,
    "chat.abort": WRITE,
}
RESTART_MODES = ("restart", "stop", "container", "crash")
RECOVERY_PROMPT = "The gateway restarted while this turn was running. Continue the interrupted turn."


@attrs.frozen
class _Close:
    code: int
    reason: str


@attrs.frozen
class _Abort:
    """Drop the TCP connection without a close frame: the client sees 1006, as after a crash."""


@attrs.define(eq=False)
class SimConn:
    conn_id: str
    ws: WebSocketConnection
    client_id: str = ""
    mode: str = ""
    instance_id: str | None = None
    caps: frozenset[str] = frozenset()
    scopes: frozenset[str] = frozenset()
    subscribed: bool = False
    message_keys: set[str] = attrs.field(factory=set)
    seq: int = 0
    drop_next: int = 0
    slow: bool = False
    closing: bool = False
    stalled: bool = False  # requests are read and never answered (a hung server)
    muted: bool = False  # nothing is sent any more (a half-open socket)
    dropped: int = 0
    send: trio.MemorySendChannel[Any] | None = None

    @property
    def name(self) -> str:
        return self.instance_id or self.conn_id

    def can_read(self) -> bool:
        return READ in self.scopes


class SimRun:
    """A test's handle on one run: every method emits the run's events at once, in order."""

    def __init__(self, sim: Simulator, run: m.Run) -> None:
        self._sim = sim
        self.run = run

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def active(self) -> bool:
        return self.run.state == "active"

    def text(self, text: str, chunks: Sequence[str] | None = None) -> SimRun:
        self._sim._text(self.run, Text(text, tuple(chunks) if chunks is not None else None))
        return self

    def tool(self, name: str, args: Any = None, result: Any = "", *, is_error: bool = False, call_id: str | None = None) -> SimRun:
        call_id = self.tool_start(name, args, call_id=call_id)
        self.tool_result(call_id, result, is_error=is_error)
        return self

    def tool_start(self, name: str, args: Any = None, *, call_id: str | None = None) -> str:
        return self._sim._tool_start(self.run, name, {} if args is None else args, call_id)

    def tool_result(self, call_id: str, result: Any = "", *, is_error: bool = False) -> SimRun:
        self._sim._tool_result(self.run, call_id, result, is_error)
        return self

    def end(self, state: str = "final", *, yielded: bool = False, error: str | None = None, stop_reason: str | None = None) -> SimRun:
        self._sim._end(self.run, End(state, yielded, error, stop_reason))
        return self

    def release(self) -> None:
        """Let a run holding on a ``Hold`` step play its remaining steps."""
        self._sim._release(self.run)


class Simulator:
    """The simulated Gateway. Make one with ``open_simulator``."""

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        token: str,
        host: str,
        tick_interval_ms: int,
        max_payload: int,
        responder: Responder,
        recovery: RecoveryScript,
        cli_runtime: bool = False,
        protocol: int = 4,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._nursery = nursery
        self.protocol = protocol
        self.ssl_context = ssl_context
        self.requests: collections.Counter[str] = collections.Counter()  # RPCs received, by method
        #: Model the CLI-backend runtime (claude-cli): lists say ``hasActiveRun`` without run ids, and the
        #: transcript keys assistant messages ``cli-assistant:<runId>``, as the seeds' production Gateway did.
        self.cli_runtime = cli_runtime
        self.token = token
        self.host = host
        self.port = 0
        self.tick_interval_ms = tick_interval_ms
        self.max_payload = max_payload
        self.responder = responder
        self.recovery = recovery
        self.boot_id = str(uuid.uuid4())
        self.boots = 1
        self.starting = False
        self.sessions: dict[str, m.Session] = {}
        self.runs: dict[str, m.Run] = {}
        self.conns: dict[str, SimConn] = {}
        self.refusals: list[tuple[str, str]] = []  # (error code, detail code) of refused handshakes
        self._plays: dict[str, trio.CancelScope] = {}
        self._pending: dict[str, _Pending] = {}
        self._deferred: list[Callable[[], None]] = []
        self._holds: dict[str, trio.Event] = {}
        self._changed = trio.Condition()
        self._epoch_ms = int(time.time() * 1000) - int(trio.current_time() * 1000)

    # ------------------------------------------------------------------ serving

    @property
    def url(self) -> str:
        scheme = "wss" if self.ssl_context is not None else "ws"
        return f"{scheme}://{self.host}:{self.port}/"

    async def _serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            server = await nursery.start(
                lambda task_status: serve_websocket(
                    self._handle,
                    self.host,
                    self.port,
                    ssl_context=self.ssl_context,
                    handler_nursery=nursery,
                    max_message_size=self.max_payload,
                    task_status=task_status,
                )
            )
            self.port = server.port
            nursery.start_soon(self._ticker)
            task_status.started()

    def now_ms(self) -> int:
        return self._epoch_ms + int(trio.current_time() * 1000)

    async def _ticker(self) -> None:
        while True:
            await trio.sleep(self.tick_interval_ms / 1000)
            self._emit("tick", {"ts": self.now_ms()}, audience=lambda c: True, drop_if_slow=False)

    async def _handle(self, request: WebSocketRequest) -> None:
        ws = await request.accept()
        conn = SimConn(conn_id=str(uuid.uuid4()), ws=ws)
        try:
            await self._handshake(conn)
        except ConnectionClosed:
            return
        if conn.closing:
            return
        send, recv = trio.open_memory_channel[Any](math.inf)
        conn.send = send
        self.conns[conn.conn_id] = conn
        log.debug("sim.connected conn=%s client=%s", conn.name, conn.client_id)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._writer, conn, recv)
                try:
                    while True:
                        message = await ws.get_message()
                        self._on_request(conn, message)
                except ConnectionClosed:
                    pass
                nursery.cancel_scope.cancel()
        finally:
            self.conns.pop(conn.conn_id, None)
            conn.closing = True
            await self._notify()

    async def _writer(self, conn: SimConn, recv: trio.MemoryReceiveChannel[Any]) -> None:
        async for item in recv:
            try:
                if isinstance(item, _Close):
                    await conn.ws.aclose(item.code, item.reason)
                    return
                if isinstance(item, _Abort):
                    await conn.ws._close_stream()  # no public abort in trio-websocket: drop the TCP stream
                    return
                await conn.ws.send_message(item)
            except ConnectionClosed:
                return

    async def _handshake(self, conn: SimConn) -> None:
        ws = conn.ws
        nonce = str(uuid.uuid4())
        challenge = {"nonce": nonce, "ts": self.now_ms(), "capabilities": ["model-catalog-snapshot"]}
        await ws.send_message(_dumps({"type": "event", "event": "connect.challenge", "payload": challenge}))
        message = await ws.get_message()
        try:
            frame = decode_frame(message, max_payload=65_536)  # MAX_PREAUTH_PAYLOAD_BYTES
        except ProtocolError:
            await self._refuse(conn, None, "INVALID_REQUEST", "invalid handshake: first request must be connect", 1008)
            return
        if not isinstance(frame, Request) or frame.method != "connect":
            req_id = frame.id if isinstance(frame, Request) else None
            await self._refuse(conn, req_id, "INVALID_REQUEST", "invalid handshake: first request must be connect", 1008)
            return
        params = frame.params if isinstance(frame.params, dict) else {}
        client = params.get("client") if isinstance(params.get("client"), dict) else {}
        client_id, mode = client.get("id"), client.get("mode")
        if client_id not in CLIENT_IDS:
            msg = "invalid connect params: at /client/id: must be equal to one of the allowed values"
            await self._refuse(conn, frame.id, "INVALID_REQUEST", msg, 1008)
            return
        if mode not in CLIENT_MODES:
            msg = "invalid connect params: at /client/mode: must be equal to one of the allowed values"
            await self._refuse(conn, frame.id, "INVALID_REQUEST", msg, 1008)
            return
        lo, hi = params.get("minProtocol"), params.get("maxProtocol")
        if not (isinstance(lo, int) and isinstance(hi, int) and lo <= self.protocol <= hi):
            details = {"code": "PROTOCOL_MISMATCH", "clientMinProtocol": lo, "clientMaxProtocol": hi, "expectedProtocol": self.protocol, "minimumProbeProtocol": 3}
            await self._refuse(conn, frame.id, "INVALID_REQUEST", "protocol mismatch", 1002, details)
            return
        if self.starting:
            await self._refuse(
                conn, frame.id, "UNAVAILABLE", "gateway starting; retry shortly", 1013,
                {"reason": "startup-sidecars"}, retryable=True, retry_after_ms=500, close_reason="gateway starting",
            )  # fmt: skip
            return
        auth = params.get("auth") if isinstance(params.get("auth"), dict) else {}
        secret = auth.get("token") or auth.get("password")
        if not secret:
            await self._refuse(conn, frame.id, "NOT_PAIRED", "device identity required", 1008, {"code": "DEVICE_IDENTITY_REQUIRED"})
            return
        if secret != self.token:
            msg = "unauthorized: gateway token mismatch (provide gateway auth token)"
            details = {"code": "AUTH_TOKEN_MISMATCH", "authReason": "token_mismatch", "canRetryWithDeviceToken": False, "recommendedNextStep": "update_auth_credentials"}
            await self._refuse(conn, frame.id, "INVALID_REQUEST", msg, 1008, details)
            return
        if client_id == "openclaw-tui" or mode == "ui":
            msg = "control ui requires device identity (use HTTPS or localhost secure context)"
            await self._refuse(conn, frame.id, "INVALID_REQUEST", msg, 1008, {"code": "CONTROL_UI_DEVICE_IDENTITY_REQUIRED"})
            return
        # Without a device identity only the local backend client (and the CLI) keep their declared scopes.
        keeps_scopes = (client_id, mode) in {("gateway-client", "backend"), ("cli", "cli")}
        scopes = params.get("scopes") if isinstance(params.get("scopes"), list) else []
        conn.scopes = frozenset(s for s in scopes if isinstance(s, str)) if keeps_scopes else frozenset()
        conn.caps = frozenset(c for c in params.get("caps") or [] if isinstance(c, str))
        conn.client_id, conn.mode = client_id, mode
        conn.instance_id = client.get("instanceId") if isinstance(client.get("instanceId"), str) else None
        await ws.send_message(_dumps({"type": "res", "id": frame.id, "ok": True, "payload": self._hello(conn)}))

    def _hello(self, conn: SimConn) -> dict[str, Any]:
        return {
            "type": "hello-ok",
            "protocol": self.protocol,
            "server": {"version": SERVER_VERSION, "buildId": "owc-sim", "bootId": self.boot_id, "connId": conn.conn_id},
            "features": {
                "methods": sorted(METHOD_SCOPES),
                "events": ["connect.challenge", "tick", "shutdown", "sessions.changed", "session.message", "session.tool", "chat", "agent"],
                "capabilities": [],
            },
            "snapshot": {"sessionDefaults": {"defaultAgentId": m.AGENT_ID, "mainKey": "main", "mainSessionKey": "agent:main:main"}, "authMode": "token"},
            "auth": {"method": "token", "role": "operator", "scopes": sorted(conn.scopes)},
            "policy": {"maxPayload": self.max_payload, "maxBufferedBytes": MAX_BUFFERED_BYTES, "tickIntervalMs": self.tick_interval_ms},
        }

    async def _refuse(
        self,
        conn: SimConn,
        req_id: str | None,
        code: str,
        message: str,
        close_code: int,
        details: Any = None,
        *,
        retryable: bool = False,
        retry_after_ms: int | None = None,
        close_reason: str | None = None,
    ) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if retryable:
            error["retryable"] = True
        if retry_after_ms is not None:
            error["retryAfterMs"] = retry_after_ms
        if details is not None:
            error["details"] = details
        detail_code = details.get("code") if isinstance(details, dict) else None
        self.refusals.append((code, detail_code or ""))
        conn.closing = True
        try:
            await conn.ws.send_message(_dumps({"type": "res", "id": req_id or "", "ok": False, "error": error}))
            await conn.ws.aclose(close_code, close_reason or message)
        except ConnectionClosed:
            pass

    # ------------------------------------------------------------------ delivery

    def _emit(self, event: str, payload: dict[str, Any], *, audience: Callable[[SimConn], bool], drop_if_slow: bool) -> None:
        """Send one event to every connection in ``audience``, numbering it per connection."""
        for conn in list(self.conns.values()):
            if conn.closing or not audience(conn):
                continue
            if event != "tick" and not conn.can_read():
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
                self._close(conn, 1008, "slow consumer")
                continue
            self._enqueue(conn, {"type": "event", "event": event, "payload": payload, "seq": conn.seq})

    def _enqueue(self, conn: SimConn, frame: dict[str, Any]) -> None:
        assert conn.send is not None
        if not conn.muted:
            conn.send.send_nowait(_dumps(frame))

    def _close(self, conn: SimConn, code: int, reason: str) -> None:
        if conn.closing:
            return
        conn.closing = True
        assert conn.send is not None
        conn.send.send_nowait(_Close(code, reason))

    def _everyone(self, conn: SimConn) -> bool:
        return True

    def _subscribers(self, conn: SimConn) -> bool:
        return conn.subscribed

    def _tool_recipient(self, run: m.Run) -> Callable[[SimConn], bool]:
        return lambda c: c.conn_id == run.owner and "tool-events" in c.caps

    def _tool_observers(self, run: m.Run) -> Callable[[SimConn], bool]:
        return lambda c: c.subscribed and not (c.conn_id == run.owner and "tool-events" in c.caps)

    def _sessions_changed(self, session: m.Session, *, phase: str | None = None, run_id: str | None = None, reason: str | None = None) -> None:
        payload = m.sessions_changed_payload(session, self.now_ms(), phase=phase, run_id=run_id, reason=reason)
        self._emit("sessions.changed", payload, audience=self._subscribers, drop_if_slow=True)

    def _session_message(self, session: m.Session, message: dict[str, Any], run_id: str | None) -> None:
        payload: dict[str, Any] = {"sessionKey": session.key, "agentId": session.agent_id, "message": message, "messageId": message["__openclaw"]["id"]}
        if run_id is not None:
            payload["runId"] = run_id
        self._emit("session.message", payload, audience=self._subscribers, drop_if_slow=False)

    def _chat(self, run: m.Run, state: str, *, drop_if_slow: bool, **fields: Any) -> None:
        if run.heartbeat:
            return  # the Gateway hides heartbeat chat output (shouldHideHeartbeatChatOutput)
        self._emit("chat", m.chat_payload(run, state, **fields), audience=self._everyone, drop_if_slow=drop_if_slow)

    def _agent(self, run: m.Run, stream: str, data: dict[str, Any], *, session_id: str | None = None) -> None:
        self._emit("agent", m.agent_payload(run, stream, data, self.now_ms(), session_id), audience=self._everyone, drop_if_slow=False)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _poke(self) -> None:
        """Wake ``wait_*`` callers from synchronous code."""
        self._nursery.start_soon(self._notify)

    # ------------------------------------------------------------------ sessions and runs

    def session(self, key: str) -> m.Session:
        session = self.sessions.get(key)
        if session is None:
            now = self.now_ms()
            session = self.sessions[key] = m.Session(key=key, created_at=now, updated_at=now)
        return session

    def start_run(
        self,
        key: str,
        run_id: str | None = None,
        *,
        origin: str = "cron",
        heartbeat: bool = False,
        user_text: str | None = None,
        provenance: dict[str, Any] | None = None,
        hide_ids: bool = False,
        steps: Sequence[Step] | None = None,
        owner: str | None = None,
    ) -> SimRun:
        """Start a run on ``key`` as another client would (cron, sessions_send, a sub-agent announce, a
        heartbeat): no connection of ours owns it. With ``steps`` the simulator plays them; without, the
        caller drives the run through the returned handle. A run on a busy session waits in its queue."""
        run = m.Run(
            run_id=run_id or str(uuid.uuid4()),
            key=key,
            owner=owner,
            heartbeat=heartbeat,
            origin=origin,
            hide_ids=hide_ids or self.cli_runtime,
            cli_runtime=self.cli_runtime,
        )
        if run.run_id in self.runs:
            raise ValueError(f"run {run.run_id} already exists")
        self.runs[run.run_id] = run
        session = self.session(key)
        pending = _Pending(user_text, provenance, steps, from_send=origin == "chat.send")
        self._pending[run.run_id] = pending
        if session.active is not None:
            session.queued.append(run)
        else:
            self._begin(session, run)
        return SimRun(self, run)

    def _begin(self, session: m.Session, run: m.Run) -> None:
        pending = self._pending.pop(run.run_id)
        now = self.now_ms()
        session.active = run
        session.status = "running"
        session.started_at, session.ended_at, session.updated_at = now, None, now
        if pending.from_send:
            self._sessions_changed(session, reason="send")
            self._sessions_changed(session, reason="participants")
        if pending.user_text is not None:
            message = session.append(m.user_message(run.run_id, pending.user_text, now, pending.provenance), now)
            self._session_message(session, message, run.run_id)
        for phase in ("preparing_workspace", "preparing_context"):
            self._chat(run, "status", drop_if_slow=True, phase=phase)
            self._agent(run, "run_status", {"phase": phase})
        self._agent(run, "lifecycle", {"phase": "start", "startedAt": now}, session_id=session.session_id)
        self._sessions_changed(session, reason="agent.run.started")
        self._sessions_changed(session, phase="start", run_id=run.run_id)
        self._agent(run, "lifecycle", {"phase": "model", "provider": m.PROVIDER, "model": m.MODEL}, session_id=session.session_id)
        self._sessions_changed(session, phase="model", run_id=run.run_id)
        if pending.steps is not None:
            self._nursery.start_soon(self._play, run, list(pending.steps))
        self._poke()

    async def _play(self, run: m.Run, steps: list[Step]) -> None:
        with trio.CancelScope() as scope:
            self._plays[run.run_id] = scope
            try:
                for step in steps:
                    await trio.sleep(0)
                    if run.state != "active":
                        return
                    if isinstance(step, Text):
                        self._text(run, step)
                    elif isinstance(step, Tool):
                        call_id = self._tool_start(run, step.name, step.args, step.call_id)
                        await trio.sleep(0)
                        if run.state != "active":
                            return
                        self._tool_result(run, call_id, step.result, step.is_error)
                    elif isinstance(step, Delay):
                        await trio.sleep(step.seconds)
                    elif isinstance(step, Hold):
                        hold = self._holds.setdefault(run.run_id, trio.Event())
                        await hold.wait()
                    elif isinstance(step, End):
                        self._end(run, step)
                        return
            finally:
                self._plays.pop(run.run_id, None)

    def _release(self, run: m.Run) -> None:
        self._holds.setdefault(run.run_id, trio.Event()).set()

    def _active(self, run: m.Run) -> m.Session:
        if run.state != "active" or self.sessions[run.key].active is not run:
            raise RuntimeError(f"run {run.run_id} is not active")
        return self.sessions[run.key]

    def _text(self, run: m.Run, step: Text) -> None:
        self._active(run)
        for i, delta in enumerate(step.deltas()):
            if not (run.parts and run.parts[-1].get("type") == "text"):
                # A new assistant item. The Gateway's run-wide chat buffer joins items with a blank line
                # (mergeAssistantText's boundary newlines), and the first delta carries that separator.
                run.segment += 1
                run.parts.append({"type": "text", "text": ""})
                if run.text and not run.text.endswith("\n\n"):
                    sep = "\n" if run.text.endswith("\n") else "\n\n"
                    run.text += sep
                    chat_delta = sep + delta
                else:
                    chat_delta = delta
            else:
                chat_delta = delta
            run.text += delta
            run.parts[-1]["text"] += delta
            now = self.now_ms()
            self._agent(run, "assistant", {"text": run.parts[-1]["text"], "delta": delta, "itemId": f"{run.run_id}:{run.segment}"})
            self._chat(run, "delta", drop_if_slow=True, deltaText=chat_delta, message=m.text_message(run.text, now))

    def _tool_start(self, run: m.Run, name: str, args: Any, call_id: str | None) -> str:
        session = self._active(run)
        call_id = call_id or f"call_{uuid.uuid4().hex[:12]}"
        run.parts.append({"type": "toolCall", "id": call_id, "name": name, "arguments": args})
        run.open_tools[call_id] = name
        # The model turn that asked for the tool is persisted (and pushed as session.message) before the
        # tool runs; its result is persisted without a session.message (live probe, NOTES.md).
        self._flush(session, run, "toolUse")
        now = self.now_ms()
        item = {"itemId": f"tool:{call_id}", "toolCallId": call_id, "name": name, "kind": "tool", "phase": "start", "title": name.title(), "status": "running", "startedAt": now}
        self._agent(run, "item", item)
        self._tool_event(run, {"phase": "start", "name": name, "toolCallId": call_id, "args": args})
        return call_id

    def _tool_result(self, run: m.Run, call_id: str, result: Any, is_error: bool) -> None:
        session = self._active(run)
        name = run.open_tools.pop(call_id, None)
        if name is None:
            raise ValueError(f"tool call {call_id} was not started on run {run.run_id}")
        now = self.now_ms()
        session.append(m.tool_result_message(run, call_id, name, result, is_error, now), now)
        content = {"content": [{"type": "text", "text": result if isinstance(result, str) else str(result)}], "details": {}}
        self._tool_event(run, {"phase": "result", "name": name, "toolCallId": call_id, "isError": is_error, "result": content})
        item = {"itemId": f"tool:{call_id}", "toolCallId": call_id, "name": name, "kind": "tool", "phase": "end", "title": name.title(), "status": "blocked" if is_error else "done", "endedAt": now}
        self._agent(run, "item", item)

    def _tool_event(self, run: m.Run, data: dict[str, Any]) -> None:
        payload = m.agent_payload(run, "tool", data, self.now_ms())
        self._emit("agent", payload, audience=self._tool_recipient(run), drop_if_slow=False)
        if not run.heartbeat:  # suppressHeartbeatToolEvents
            self._emit("session.tool", payload, audience=self._tool_observers(run), drop_if_slow=True)

    def _flush(self, session: m.Session, run: m.Run, stop_reason: str) -> None:
        """Persist the assistant message being built, as the Gateway does when a model turn completes."""
        if not run.parts:
            return
        now = self.now_ms()
        message = session.append(m.assistant_message(run, run.parts, now, stop_reason), now)
        run.parts = []
        self._session_message(session, message, run.run_id)

    def _end(self, run: m.Run, step: End) -> None:
        session = self._active(run)
        now = self.now_ms()
        state = step.state
        sid = session.session_id
        if state == "final":
            self._flush(session, run, "stop")
            self._agent(run, "lifecycle", {"phase": "finishing", "stopReason": "stop", "aborted": False}, session_id=sid)
            self._agent(run, "lifecycle", {"phase": "end", "stopReason": "stop", "aborted": False, "endedAt": now}, session_id=sid)
            message = m.text_message(run.text, now) if run.text else None
            self._chat(run, "final", drop_if_slow=False, stopReason=step.stop_reason or "stop", yielded=True if step.yielded else None, message=message)
            session.status, session.last_run_error = "done", None
        elif state == "aborted":
            stop_reason = step.stop_reason or "rpc"
            if run.parts:
                partial = session.append(m.aborted_partial(run, run.parts, now, stop_reason), now)
                run.parts = []
                self._session_message(session, partial, run.run_id)
            self._agent(run, "lifecycle", {"phase": "end", "stopReason": stop_reason, "aborted": True, "endedAt": now}, session_id=sid)
            message = m.text_message(run.text, now) if run.text else None
            self._chat(run, "aborted", drop_if_slow=False, stopReason=stop_reason, message=message)
            self._agent(run, "lifecycle", {"phase": "error", "error": "aborted", "aborted": True}, session_id=sid)
            # A cancel for a restart keeps the row running so the Gateway recovers it at boot (F2).
            session.status = "running" if stop_reason == "restart" else "killed"
            session.aborted_last_run = True
        elif state == "error":
            error = step.error or "run failed"
            self._flush(session, run, "error")
            self._agent(run, "lifecycle", {"phase": "error", "error": error}, session_id=sid)
            self._chat(run, "error", drop_if_slow=False, errorMessage=error, stopReason=step.stop_reason)
            session.status, session.last_run_error = "failed", error
        else:
            raise ValueError(f"unknown end state {state!r}")
        if state != "aborted":
            session.aborted_last_run = False
        run.state = "ended"
        run.terminal = state
        run.open_tools.clear()
        session.active = None
        session.last_run_id = run.run_id
        session.ended_at = session.updated_at = now
        self._release(run)
        self._sessions_changed(session, reason="agent.input.settled")
        self._sessions_changed(session, phase="end", run_id=run.run_id)
        if state != "final":
            self._sessions_changed(session, phase="error", run_id=run.run_id)
        if session.queued:
            self._begin(session, session.queued.pop(0))
        self._poke()

    # ------------------------------------------------------------------ RPC

    def _on_request(self, conn: SimConn, message: str | bytes) -> None:
        try:
            frame = decode_frame(message, max_payload=self.max_payload)
        except ProtocolError as exc:
            log.warning("sim.bad_frame conn=%s error=%s", conn.name, exc)
            return
        if not isinstance(frame, Request):
            return
        self.requests[frame.method] += 1
        self._poke()
        if conn.stalled:
            return
        scope = METHOD_SCOPES.get(frame.method)
        if scope is None:
            self._reply_error(conn, frame.id, "INVALID_REQUEST", f"unknown method: {frame.method[:80]}")
            return
        if scope not in conn.scopes:
            details = {"code": "MISSING_SCOPE", "missingScope": scope, "requiredScopes": [scope]}
            self._reply_error(conn, frame.id, "FORBIDDEN", f"missing scope: {scope}", details)
            return
        params = frame.params if isinstance(frame.params, dict) else {}
        handler = getattr(self, "_rpc_" + frame.method.replace(".", "_"))
        try:
            payload = handler(conn, params)
        except _InvalidParams as exc:
            self._reply_error(conn, frame.id, "INVALID_REQUEST", f"invalid {frame.method} params: {exc}")
            return
        if not conn.closing:
            self._enqueue(conn, {"type": "res", "id": frame.id, "ok": True, "payload": payload})
        self._after_reply(conn)

    def _reply_error(self, conn: SimConn, req_id: str, code: str, message: str, details: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if details is not None:
            error["details"] = details
        if not conn.closing:
            self._enqueue(conn, {"type": "res", "id": req_id, "ok": False, "error": error})

    def _after_reply(self, conn: SimConn) -> None:
        """Run what a handler deferred until its reply was queued (a run's start, an abort's terminal)."""
        deferred, self._deferred = self._deferred, []
        for fn in deferred:
            fn()

    def _list(self, params: dict[str, Any]) -> dict[str, Any]:
        limit = params.get("limit") if isinstance(params.get("limit"), int) else 50
        rows = sorted(self.sessions.values(), key=lambda s: s.updated_at, reverse=True)
        if params.get("activeOnly"):
            rows = [s for s in rows if s.active is not None]
        shown = rows[: max(0, limit)]
        return {
            "ts": self.now_ms(),
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

    def _rpc_sessions_subscribe(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        conn.subscribed = True  # registered before the list is built, as the real handler does
        self._poke()
        if not params:
            return {"subscribed": True}
        return {"subscribed": True, "list": self._list(params)}

    def _rpc_sessions_list(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        return self._list(params)

    def _rpc_sessions_describe(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        key = _require_str(params, "key")
        session = self.sessions.get(key)
        return {"session": None if session is None else session.row()}

    def _rpc_sessions_messages_subscribe(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        key = _require_str(params, "key")
        conn.message_keys.add(key)
        return {"subscribed": True, "key": key}

    def _rpc_sessions_messages_unsubscribe(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        key = _require_str(params, "key")
        conn.message_keys.discard(key)
        return {"subscribed": False, "key": key}

    def _rpc_chat_send(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        key = _require_str(params, "sessionKey")
        message = _require_str(params, "message")
        run_id = _require_str(params, "idempotencyKey")
        existing = self.runs.get(run_id)
        if existing is not None:
            return {"runId": run_id, "status": "in_flight" if existing.state == "active" or run_id in self._pending else "ok"}
        steps = list(self.responder(key, message))
        # Measured: the real Gateway stores ``systemInputProvenance`` as the user message's ``provenance``.
        provenance = params.get("systemInputProvenance") if isinstance(params.get("systemInputProvenance"), dict) else None
        # The reply goes out before the run's first event, as on the real Gateway.
        self._deferred.append(
            lambda: self.start_run(
                key, run_id, origin="chat.send", user_text=message, steps=steps, owner=conn.conn_id, provenance=provenance
            )
        )
        return {"runId": run_id, "status": "started"}

    def _rpc_chat_abort(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        key = _require_str(params, "sessionKey")
        run_id = params.get("runId") if isinstance(params.get("runId"), str) else None
        session = self.sessions.get(key)
        aborted: list[str] = []
        if session is not None:
            for queued in list(session.queued):
                if run_id is None or queued.run_id == run_id:
                    session.queued.remove(queued)
                    self._pending.pop(queued.run_id, None)
                    queued.state = "ended"
                    aborted.append(queued.run_id)
            active = session.active
            if active is not None and (run_id is None or active.run_id == run_id):
                aborted.append(active.run_id)
                # Live: the aborted terminal reaches clients before the chat.abort reply.
                self._end(active, End("aborted", stop_reason="rpc"))
        return {"ok": True, "aborted": bool(aborted), "runIds": aborted}

    def _rpc_chat_history(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        key = _require_str(params, "sessionKey")
        session = self.sessions.get(key)
        messages = session.transcript if session is not None else []
        limit = params.get("limit") if isinstance(params.get("limit"), int) else 200
        offset = params.get("offset") if isinstance(params.get("offset"), int) and params["offset"] > 0 else 0
        # Measured on 2026.9.6: ``offset`` counts back from the newest message; a page is in transcript
        # order; ``nextOffset`` is the offset of the next older page while ``hasMore``.
        end = max(len(messages) - offset, 0)
        shown = messages[max(end - limit, 0) : end] if limit > 0 else []
        has_more = end - len(shown) > 0
        return {
            "sessionKey": key,
            "sessionId": session.session_id if session is not None else None,
            "messages": shown,
            "pendingInputs": [],
            "offset": offset or None,
            "nextOffset": offset + len(shown) if has_more else None,
            "hasMore": has_more,
            "totalMessages": len(messages),
            "defaults": {"modelProvider": m.PROVIDER, "model": m.MODEL},
            "sessionInfo": {},
        }

    # ------------------------------------------------------------------ faults

    def connection(self, name: str | None = None) -> SimConn:
        """A live connection by conn id or ``client.instanceId``; the only one if ``name`` is None."""
        live = [c for c in self.conns.values() if not c.closing]
        if name is None:
            if len(live) != 1:
                raise LookupError(f"{len(live)} live connections; name one")
            return live[0]
        for conn in live:
            if name in (conn.conn_id, conn.instance_id):
                return conn
        raise LookupError(f"no live connection {name!r}")

    def _targets(self, name: str | None) -> list[SimConn]:
        if name is None:
            return [c for c in self.conns.values() if not c.closing]
        return [self.connection(name)]

    def drop(self, count: int, conn: str | None = None) -> None:
        """Drop the next ``count`` drop-if-slow events to a connection (every live one if None); each still
        spends its seq number, so the client sees a gap."""
        for c in self._targets(conn):
            c.drop_next += count

    def slow_consumer(self, conn: str | None = None) -> None:
        """Make a connection a slow consumer: its drop-if-slow events are dropped (seq spent) and the first
        event that may not be dropped closes it with 1008 "slow consumer"."""
        for c in self._targets(conn):
            c.slow = True

    def stall_replies(self, conn: str | None = None) -> None:
        """The connection's requests are read and never answered: a hung server."""
        for c in self._targets(conn):
            c.stalled = True

    def mute(self, conn: str | None = None) -> None:
        """Nothing more reaches the connection, ticks included, and the socket stays open: a half-open
        TCP connection, which only the client's liveness check can detect."""
        for c in self._targets(conn):
            c.muted = True

    def inject(self, text: str | bytes, conn: str | None = None) -> None:
        """Send raw text to a connection as one message: a hostile or broken server."""
        for c in self._targets(conn):
            assert c.send is not None
            c.send.send_nowait(text.decode() if isinstance(text, bytes) else text)

    def disconnect(self, conn: str | None = None) -> None:
        """Cut a connection's TCP stream (the client sees 1006); the Gateway keeps running, same boot id."""
        for c in self._targets(conn):
            self._abort(c)

    def _abort(self, conn: SimConn) -> None:
        if conn.closing:
            return
        conn.closing = True
        assert conn.send is not None
        conn.send.send_nowait(_Abort())

    async def restart(self, mode: str, *, down_seconds: float = 0.0) -> None:
        """Stop and boot the Gateway again in one of the four modes of seed 000 section 2.7 F3.

        * ``restart``: ``shutdown`` with ``restartExpectedMs``; active runs are cancelled with stopReason
          ``restart`` and their rows stay ``running`` + ``abortedLastRun``; recovery runs at boot.
        * ``stop``: ``shutdown`` without ``restartExpectedMs``; active runs aborted (rows ``killed``); no recovery.
        * ``container``: the CLI child exits 143 first: rows ``failed`` with ``Claude Code process exited with
          code 143``; then the shutdown notice and the close; no recovery.
        * ``crash``: no terminal, no notice, connections cut (1006); rows stay ``running``; recovery at boot.

        Every mode closes every connection (1012 after a notice) and boots with a new boot id. While
        ``down_seconds`` run (Trio's clock) a ``connect`` is refused with UNAVAILABLE / 1013.
        """
        if mode not in RESTART_MODES:
            raise ValueError(f"unknown restart mode {mode!r}; one of {RESTART_MODES}")
        active = [s.active for s in self.sessions.values() if s.active is not None]
        if mode == "container":
            for run in active:
                self._end(run, End("error", error=m.CONTAINER_STOP_ERROR))
        if mode != "crash":
            notice: dict[str, Any] = {"reason": "gateway restarting" if mode == "restart" else "gateway stopping"}
            if mode == "restart":
                notice["restartExpectedMs"] = 1500
            self._emit("shutdown", notice, audience=self._everyone, drop_if_slow=False)
        for run in [s.active for s in self.sessions.values() if s.active is not None]:
            if mode == "restart":
                self._end(run, End("aborted", stop_reason="restart"))
            elif mode == "stop":
                self._end(run, End("aborted", stop_reason="rpc"))
            else:  # crash: the process dies; nothing is persisted for the run
                run.state = "ended"
                self.sessions[run.key].active = None
        for conn in list(self.conns.values()):
            if mode == "crash":
                self._abort(conn)
            else:
                self._close(conn, 1012, "service restart")
        for scope in list(self._plays.values()):
            scope.cancel()
        for session in self.sessions.values():
            for queued in session.queued:  # in-memory queues die with the process
                queued.state = "ended"
                self._pending.pop(queued.run_id, None)
            session.queued.clear()
        self.boot_id = str(uuid.uuid4())
        self.boots += 1
        if down_seconds > 0:
            self.starting = True
            await self._notify()
            await trio.sleep(down_seconds)
            self.starting = False
        self._boot_recovery()
        await self._notify()

    def _boot_recovery(self) -> None:
        """At boot the Gateway recovers rows still ``running`` (F1): a new run per session whose user turn
        carries the restart-recovery provenance."""
        for session in list(self.sessions.values()):
            if session.status != "running" or session.active is not None:
                continue
            session.aborted_last_run = True  # markStartupOrphanedMainSessionsForRecovery
            source = session.last_run_id if session.last_run_id else None
            steps = self.recovery(session.key, source)
            self.start_run(
                session.key,
                origin="recovery",
                user_text=RECOVERY_PROMPT,
                provenance=dict(m.RECOVERY_PROVENANCE),
                steps=steps,
            )

    # ------------------------------------------------------------------ waiting (tests, scenarios)

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Wait, with no clock, until ``predicate`` holds; re-checked whenever the simulator's state moves."""
        async with self._changed:
            while not predicate():
                await self._changed.wait()

    def quiescent(self) -> bool:
        return not any(s.active or s.queued for s in self.sessions.values()) and not self._plays

    def active_run(self, key: str) -> SimRun | None:
        session = self.sessions.get(key)
        return SimRun(self, session.active) if session is not None and session.active is not None else None

    def handle(self, run_id: str) -> SimRun:
        return SimRun(self, self.runs[run_id])


@attrs.frozen
class _Pending:
    user_text: str | None
    provenance: dict[str, Any] | None
    steps: Sequence[Step] | None
    from_send: bool = False


class _InvalidParams(Exception):
    pass


def _require_str(params: dict[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise _InvalidParams(f"must have required property '{key}'")
    return value


def _dumps(obj: Any) -> str:
    return orjson.dumps(obj).decode()


@asynccontextmanager
async def open_simulator(
    *,
    token: str,
    host: str = "127.0.0.1",
    port: int = 0,
    tick_interval_ms: int = TICK_INTERVAL_MS,
    max_payload: int = DEFAULT_MAX_PAYLOAD,
    responder: Responder = fake_model_responder,
    recovery: RecoveryScript = default_recovery,
    cli_runtime: bool = False,
    protocol: int = 4,
    ssl_context: ssl.SSLContext | None = None,
) -> AsyncIterator[Simulator]:
    """Run a simulated Gateway on ``host:port`` (port 0 picks a free one) for the block's lifetime."""
    async with trio.open_nursery() as nursery:
        sim = Simulator(
            nursery,
            token=token,
            host=host,
            tick_interval_ms=tick_interval_ms,
            max_payload=max_payload,
            responder=responder,
            recovery=recovery,
            cli_runtime=cli_runtime,
            protocol=protocol,
            ssl_context=ssl_context,
        )
        sim.port = port
        await nursery.start(sim._serve)
        try:
            yield sim
        finally:
            nursery.cancel_scope.cancel()
