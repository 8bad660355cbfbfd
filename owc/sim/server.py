"""The Gateway simulator: a Trio + trio-websocket server speaking protocol 4 like the real Gateway 2026.9.6.

It is owc's everyday Gateway (tests, the demo, benchmarks) and a product feature (users try owc and replay
incidents with it). What it models, each from ``shared/reference/openclaw`` unless noted:

* the handshake (challenge first; ``connect`` with protocol 4 and the token; the real refusals and close codes);
  the ``Origin`` check, and device identity, pairing and device tokens (``devices``: the proof is verified, the
  pairing store is ``sim.devices``, whose ``approve`` / ``revoke`` / ``remove`` are the Gateway owner's commands);
* per-connection envelope ``seq``; ``dropIfSlow`` events that a slow connection loses still spend a number;
  a slow consumer is closed with 1008 on the first event that may not be dropped;
* who gets what: ``chat`` / ``agent`` to every reader, ``agent`` tool events only to the run's sender that
  declared ``tool-events``, ``session.tool`` to the other subscribers, ``sessions.changed`` to subscribers;
* agent sessions, runs and transcripts with the real identities; ``chat.send`` idempotency and queueing;
* ``tick`` every ``tickIntervalMs`` on Trio's clock, ``shutdown`` then close 1012;
* the four restart modes of seed 000 section 2.7 F3, and restart recovery at boot with its provenance;
* files the agent makes (``media``): the transcript rewrite after a run's final, ``artifacts.download`` and the
  ticket URL's GET, served on the WebSocket's own port as the real Gateway serves it (one listener reads each
  connection's request head: a WebSocket upgrade goes to trio-websocket, anything else is plain HTTP).

Runs are driven either by a script the simulator plays (``chat.send`` and recovery runs) or step by step
through ``SimRun`` (runs "other clients" start: cron, sessions_send, sub-agent announces, heartbeats).

Structure: composition. ``Simulator`` is the facade and keeps what is about the server itself (the listener,
the handshake, each connection's life, the tick, waiting); it owns one collaborator per job, which share its
state objects (``conns``, ``sessions``, ``runs``, ``requests``, the ``Boot``) and the collaborators they need:

* ``delivery.Fanout``: per-connection numbering, drops, slow consumers, audiences, the Gateway's pushes;
* ``runs.RunDriver``: starting, queueing and playing runs, each step's events (``SimRun`` is its handle);
* ``rpc.Rpc``: request dispatch, scopes and the handlers;
* ``questions.Questions``: the ``ask_user`` questions (records, their events and RPCs, expiry on Trio's clock);
* ``tasks.Tasks``: sub-agents (``Spawn`` steps, ``SimRun.spawn``: the child session and run, the announce run on the
  parent's key), the task ledger with its ``task`` events, and ``tasks.list`` / ``tasks.get`` / ``tasks.history``;
  ``compaction.Compactor``: ``sessions.compact`` (admin scope, its refusals, ``session.operation`` and
  ``sessions.changed reason:"compact"``);
* ``faults.Faults``: the fault injectors; ``restarts.Restarts``: the restart modes and boot recovery.

Composition rather than mixins because every job depends on one or two others only (runs on delivery, RPC
on runs and delivery, restarts on both), and a constructor that names them says so, where mixins would share
one ``self`` in which any method may reach any attribute. The facade publishes the collaborators' public
methods as bound methods (``sim.start_run`` is ``sim.driver.start_run``), so each is declared once.
A WebSocket connection is a ``SimConn`` everywhere; "session" always means an agent session
(``model.AgentSession``).
"""

from __future__ import annotations

import collections
import logging
import math
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import h11
import trio
from trio_websocket import ConnectionClosed, WebSocketRequest, wrap_server_stream

from owc.protocol import DEFAULT_MAX_PAYLOAD, ProtocolError, Request, decode_frame
from owc.sim import devices as d
from owc.sim import model as m
from owc.sim.compaction import Compactor
from owc.sim.delivery import Fanout, SimConn, dumps, everyone, write_frames
from owc.sim.faults import Faults
from owc.sim.media import MediaStore
from owc.sim.questions import Questions
from owc.sim.restarts import RESTART_MODES, Boot, Restarts
from owc.sim.rpc import METHOD_SCOPES, Rpc, param
from owc.sim.runs import RunDriver, SimRun
from owc.sim.script import RecoveryScript, Responder, default_recovery, fake_model_responder
from owc.sim.tasks import Tasks

__all__ = ["RESTART_MODES", "SimConn", "SimRun", "Simulator", "open_simulator"]

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
#: The longest request head the listener reads before it decides (a WebSocket upgrade or an HTTP GET: both under
#: 1 KiB from any client owc has; a longer one is closed unanswered).
MAX_REQUEST_HEAD = 16 * 1024
#: trio-websocket's ``serve_websocket`` defaults, kept: how long a client has to send its request head, and to finish
#: the closing handshake once the handler is done.
CONNECT_TIMEOUT = 60.0
DISCONNECT_TIMEOUT = 60.0


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
        self.token = token
        self.host = host
        self.port = 0
        self.tick_interval_ms = tick_interval_ms
        self.max_payload = max_payload
        self.boot = Boot()
        # The state the collaborators share; tests and scenarios read it here.
        self.sessions: dict[str, m.AgentSession] = {}
        self.runs: dict[str, m.Run] = {}
        self.conns: dict[str, SimConn] = {}
        self.requests: collections.Counter[str] = collections.Counter()  # RPCs received, by method
        self.refusals: list[tuple[str, str]] = []  # (error code, detail code) of refused handshakes
        #: Clients that died (an owc deploy killed: its ``instanceId``) and when (Trio's clock): what a dead
        #: process streamed is shown nowhere any more (the oracle's "never less than was streamed").
        self.deaths: list[tuple[str, float]] = []
        #: The pairing store and the owner's commands: ``sim.devices.pending()``, ``.approve(request_id)``,
        #: ``.revoke(device_id)``, ``.remove(device_id)`` (the last two close the device's connections, 4001).
        self.devices = d.Devices(self.now_ms, self._device_removed)
        #: ``gateway.controlUi.allowedOrigins``: more ``Origin`` values that may connect (``"*"``: any).
        self.allowed_origins: set[str] = set()
        #: conn id -> (device id, role) of each live connection that proved a device (revoke and remove close them).
        self.device_conns: dict[str, tuple[str, str]] = {}
        #: A Gateway on another host: every client is judged as if it connected from this (non-loopback) address,
        #: so a device is paired by the owner (``devices.approve``) and a token-only client gets no scopes. None:
        #: the real peer address (loopback in tests).
        self.remote_address: str | None = None
        self._changed = trio.Condition()
        self._epoch_ms = int(time.time() * 1000) - int(trio.current_time() * 1000)
        self.boot.started_ms = self.now_ms()
        self.fanout = Fanout(self.conns, self.now_ms)
        #: The question manager: ``sim.questions.pending()``, ``.answer(id, {qid: [...]})``, ``.cancel(id)``, and
        #: ``.resolved_after_end = True`` to send each ``question.resolved`` after the asking run's terminal.
        self.questions = Questions(self.fanout, nursery=nursery, now_ms=self.now_ms, poke=self._poke)
        #: The managed media: ``sim.media.files`` (artifact id -> ``SimFile``), ``sim.media.served`` (the ticket
        #: GETs answered). Its ticket secret follows the boot: a restart kills every ticket, the files stay.
        self.media = MediaStore(self.now_ms, lambda: self.boot.boot_id)
        self.driver = RunDriver(
            nursery,
            self.fanout,
            self.sessions,
            self.runs,
            now_ms=self.now_ms,
            poke=self._poke,
            cli_runtime=cli_runtime,
            questions=self.questions,
            media=self.media,
        )
        self.rpc = Rpc(
            self.fanout,
            self.driver,
            self.requests,
            responder=responder,
            max_payload=max_payload,
            now_ms=self.now_ms,
            poke=self._poke,
            questions=self.questions,
            media=self.media,
        )
        #: The sub-agents and their task records: ``sim.tasks.records`` (task id -> ``SimTask``), ``.of(key)``,
        #: ``.child(task_id)`` (a handle on the child's run), ``.announce_delay`` (0.3 s on Trio's clock).
        self.tasks = Tasks(
            nursery, self.fanout, self.driver, now_ms=self.now_ms, poke=self._poke, responder=lambda: self.responder
        )
        #: ``sessions.compact``: ``sim.compactor.count`` (compactions done, by key).
        self.compactor = Compactor(
            self.fanout, self.driver, now_ms=self.now_ms, defer=self.rpc.defer, session_usage=self.rpc.session_usage
        )
        self.rpc.register("tasks.list", self.tasks.tasks_list)
        self.rpc.register("tasks.get", self.tasks.tasks_get)
        self.rpc.register("tasks.history", self.tasks.tasks_history)
        self.rpc.register("sessions.compact", self.compactor.compact)
        self.faults = Faults(self.fanout, nursery=nursery, answer=self.rpc.answer)
        self.rpc.hold = self.faults.hold
        self.restarts = Restarts(
            self.fanout, self.driver, self.boot, recovery=recovery, notify=self._notify, questions=self.questions
        )
        # The public API the collaborators implement, as bound methods: one signature and docstring each.
        self.session = self.driver.session
        self.start_run = self.driver.start_run
        self.active_run = self.driver.active_run
        self.handle = self.driver.handle
        self._emit = self.fanout.emit  # tests forge events with it
        self.connection = self.faults.connection
        self.drop = self.faults.drop
        self.slow_consumer = self.faults.slow_consumer
        self.stall_replies = self.faults.stall_replies
        self.fail_requests = self.faults.fail_requests
        self.stall_requests = self.faults.stall_requests
        self.mute = self.faults.mute
        self.inject = self.faults.inject
        self.disconnect = self.faults.disconnect
        self.restart = self.restarts.restart
        self.plan_recovery = self.restarts.plan_recovery
        self.give_up_recovery = self.restarts.give_up_recovery
        self.hold_recovery = self.restarts.hold_recovery

    # ------------------------------------------------------------------ the collaborators' settings and state

    @property
    def cli_runtime(self) -> bool:
        """Model the CLI-backend runtime (claude-cli): lists say ``hasActiveRun`` without run ids, and the
        transcript keys assistant messages ``cli-assistant:<runId>``, as the seeds' production Gateway did."""
        return self.driver.cli_runtime

    @cli_runtime.setter
    def cli_runtime(self, value: bool) -> None:
        self.driver.cli_runtime = value

    @property
    def media_delay(self) -> float:
        """Seconds (Trio's clock) from a run's final to the delivery of its files: 0.1 by default (0.1 to 2.4 s
        live); a test may set 0 (delivered at the next checkpoint, still after the final)."""
        return self.driver.media_delay

    @media_delay.setter
    def media_delay(self, value: float) -> None:
        self.driver.media_delay = value

    @property
    def responder(self) -> Responder:
        """The steps a ``chat.send`` run plays (scenarios call it for the runs they start as a send)."""
        return self.rpc.responder

    @responder.setter
    def responder(self, value: Responder) -> None:
        self.rpc.responder = value

    @property
    def recovery(self) -> RecoveryScript:
        return self.restarts.recovery

    @recovery.setter
    def recovery(self, value: RecoveryScript) -> None:
        self.restarts.recovery = value

    @property
    def boot_id(self) -> str:
        return self.boot.boot_id

    @property
    def boots(self) -> int:
        return self.boot.boots

    @property
    def starting(self) -> bool:
        return self.boot.starting

    # ------------------------------------------------------------------ serving

    @property
    def url(self) -> str:
        scheme = "wss" if self.ssl_context is not None else "ws"
        return f"{scheme}://{self.host}:{self.port}/"

    async def _serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """One listener on the Gateway's port for both of what the real Gateway serves there: the WebSocket and the
        managed media route (``_connection`` tells them apart by the request head)."""
        async with trio.open_nursery() as nursery:
            listeners: list[Any]
            if self.ssl_context is None:
                listeners = await trio.open_tcp_listeners(self.port, host=self.host)
                self.port = listeners[0].socket.getsockname()[1]
            else:
                listeners = await trio.open_ssl_over_tcp_listeners(
                    self.port, self.ssl_context, host=self.host, https_compatible=True
                )
                self.port = listeners[0].transport_listener.socket.getsockname()[1]
            await nursery.start(partial(trio.serve_listeners, self._connection, listeners, handler_nursery=nursery))
            nursery.start_soon(self._ticker)
            task_status.started()

    async def _connection(self, stream: trio.abc.Stream) -> None:
        """One accepted connection: read its request head (bounded, within ``CONNECT_TIMEOUT``), then either hand
        it, head replayed, to trio-websocket and ``_handle`` (an upgrade), or answer the media route once with h11
        and close (``MediaStore.http_answer``). The peer's address is read here, from the real socket."""
        address = _address(stream)
        head = b""
        try:
            with trio.move_on_after(CONNECT_TIMEOUT):
                head = await _read_head(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            head = b""  # a TLS handshake that failed, a client gone
        parsed = _parse_head(head) if head else None
        if parsed is None:
            await trio.aclose_forcefully(stream)
            return
        conn, request = parsed
        if _is_upgrade(request):
            await self._websocket(_Replay(stream, head), address)
            return
        try:
            await self._answer_http(stream, conn, request)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await trio.aclose_forcefully(stream)

    async def _answer_http(self, stream: trio.abc.Stream, conn: h11.Connection, request: h11.Request) -> None:
        """One answer (h11 frames it for the request's method: a HEAD's has no body), then the connection ends."""
        method = request.method.decode("ascii", "replace")
        status, headers, body = self.media.http_answer(method, request.target.decode("ascii", "replace"))
        out = conn.send(h11.Response(status_code=status, headers=[*headers, ("connection", "close")])) or b""
        if body:
            out += conn.send(h11.Data(data=body)) or b""
        out += conn.send(h11.EndOfMessage()) or b""
        await stream.send_all(out)

    async def _websocket(self, stream: trio.abc.Stream, address: str | None) -> None:
        """As ``serve_websocket`` did: the handshake within ``CONNECT_TIMEOUT``, ``_handle``, then the connection
        closed (the closing handshake within ``DISCONNECT_TIMEOUT``) however the handler ended."""
        async with trio.open_nursery() as nursery:
            request: WebSocketRequest | None = None
            with trio.move_on_after(CONNECT_TIMEOUT):
                request = await wrap_server_stream(nursery, stream, max_message_size=self.max_payload)
            if request is None:
                nursery.cancel_scope.cancel()
                await trio.aclose_forcefully(stream)
                return
            try:
                await self._handle(request, address)
            finally:
                with trio.move_on_after(DISCONNECT_TIMEOUT):
                    # trio-websocket keeps the connection only on the request; its ``aclose`` ends the reader task.
                    await request._connection.aclose()

    def now_ms(self) -> int:
        return self._epoch_ms + int(trio.current_time() * 1000)

    def skew(self, ms: int) -> None:
        """Move the Gateway's clock by ``ms`` (negative: behind this host's): two hosts never agree exactly."""
        self._epoch_ms += ms
        self.boot.started_ms += ms  # the same clock: the boot's uptime does not move

    async def _ticker(self) -> None:
        while True:
            await trio.sleep(self.tick_interval_ms / 1000)
            self.tick_now()

    def tick_now(self) -> None:
        """The Gateway's next ``tick``, now, to every connection (it carries a ``seq``, as every broadcast does).
        A run whose every event a slow connection lost (a heartbeat's ``sessions.changed`` start and end are all a
        ``sessions.subscribe`` connection gets of it, both ``dropIfSlow``) leaves a gap no later frame shows until
        the next tick; a scenario's final settle asks for that tick instead of waiting out the interval."""
        self.fanout.emit("tick", {"ts": self.now_ms()}, audience=everyone, drop_if_slow=False)

    async def _handle(self, request: WebSocketRequest, address: str | None = None) -> None:
        """One connection's life: handshake, then read requests until it closes; a writer task sends. ``address``:
        the peer's, read from the socket by the listener (the stream trio-websocket sees is a wrapper)."""
        peer = _peer(request, address)
        if self.remote_address is not None:
            peer = attrs.evolve(peer, address=self.remote_address)
        ws = await request.accept()
        conn = SimConn(conn_id=str(uuid.uuid4()), ws=ws)
        try:
            await self._handshake(conn, peer)
        except ConnectionClosed:
            return
        if conn.closing:
            await self._notify()  # a refusal (``refusals``) or a pairing request (``devices``) is state to wait on
            return
        send, recv = trio.open_memory_channel[Any](math.inf)
        conn.send = send
        self.conns[conn.conn_id] = conn
        log.debug("sim.connected conn=%s client=%s", conn.name, conn.client_id)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(write_frames, conn, recv)
                try:
                    while True:
                        message = await ws.get_message()
                        self.rpc.on_request(conn, message)
                except ConnectionClosed:
                    pass
                nursery.cancel_scope.cancel()
        finally:
            self.conns.pop(conn.conn_id, None)
            self.device_conns.pop(conn.conn_id, None)
            conn.closing = True
            await self._notify()

    async def _handshake(self, conn: SimConn, peer: d.Peer | None = None) -> None:
        """The ``connect`` handshake, in the real Gateway's order: the params' schema, the protocol, startup, the
        role and the ``Origin``; then token-only clients as before, or the device path (``devices.admit``)."""
        peer = peer or d.Peer()
        ws = conn.ws
        nonce = str(uuid.uuid4())
        challenge = {"nonce": nonce, "ts": self.now_ms(), "capabilities": ["model-catalog-snapshot"]}
        await ws.send_message(dumps({"type": "event", "event": "connect.challenge", "payload": challenge}))
        message = await ws.get_message()
        try:
            frame = decode_frame(message, max_payload=65_536)  # MAX_PREAUTH_PAYLOAD_BYTES
        except ProtocolError:
            await self._refuse(conn, None, "INVALID_REQUEST", "invalid handshake: first request must be connect", 1008)
            return
        if not isinstance(frame, Request) or frame.method != "connect":
            req_id = frame.id if isinstance(frame, Request) else None
            await self._refuse(
                conn, req_id, "INVALID_REQUEST", "invalid handshake: first request must be connect", 1008
            )
            return
        params = frame.params if isinstance(frame.params, dict) else {}
        client = param(params, "client", dict, {})
        client_id, mode = client.get("id"), client.get("mode")
        if client_id not in CLIENT_IDS:
            msg = "invalid connect params: at /client/id: must be equal to one of the allowed values"
            await self._refuse(conn, frame.id, "INVALID_REQUEST", msg, 1008)
            return
        if mode not in CLIENT_MODES:
            msg = "invalid connect params: at /client/mode: must be equal to one of the allowed values"
            await self._refuse(conn, frame.id, "INVALID_REQUEST", msg, 1008)
            return
        device = params.get("device")
        schema = d.device_schema_error(device) if device is not None else None
        if schema is not None:
            await self._refuse(conn, frame.id, "INVALID_REQUEST", f"invalid connect params: {schema}", 1008)
            return
        lo, hi = params.get("minProtocol"), params.get("maxProtocol")
        if not (isinstance(lo, int) and isinstance(hi, int) and lo <= self.protocol <= hi):
            details = {
                "code": "PROTOCOL_MISMATCH", "clientMinProtocol": lo, "clientMaxProtocol": hi,
                "expectedProtocol": self.protocol, "minimumProbeProtocol": 3,
            }  # fmt: skip
            await self._refuse(conn, frame.id, "INVALID_REQUEST", "protocol mismatch", 1002, details)
            return
        if self.boot.starting:
            await self._refuse(
                conn, frame.id, "UNAVAILABLE", "gateway starting; retry shortly", 1013,
                {"reason": "startup-sidecars"}, retryable=True, retry_after_ms=500, close_reason="gateway starting",
            )  # fmt: skip
            return
        role = "operator" if params.get("role") is None else params["role"]
        if role not in ("operator", "node"):  # ``parseGatewayRole`` (``message-handler-D5c0StBB.mjs:600-607``)
            await self._refuse(conn, frame.id, "INVALID_REQUEST", "invalid role", 1008)
            return
        if peer.has_origin:  # every client, before any credential (``message-handler-D5c0StBB.mjs:640-651``)
            assert peer.origin is not None
            why = d.origin_refusal(peer.origin, request_host=peer.host, local=peer.local, allowed=self.allowed_origins)
            if why is not None:
                details = {"code": "CONTROL_UI_ORIGIN_NOT_ALLOWED", "reason": why}
                await self._refuse(conn, frame.id, "INVALID_REQUEST", d.ORIGIN_REFUSED, 1008, details)
                return
        auth = param(params, "auth", dict, {})
        if device is not None:
            await self._device_handshake(conn, frame.id, params, peer, challenge)
            return
        secret = auth.get("token") or auth.get("password")
        if not secret:
            await self._refuse(
                conn, frame.id, "NOT_PAIRED", "device identity required", 1008, {"code": "DEVICE_IDENTITY_REQUIRED"}
            )
            return
        if secret != self.token:
            msg = "unauthorized: gateway token mismatch (provide gateway auth token)"
            details = {
                "code": "AUTH_TOKEN_MISMATCH", "authReason": "token_mismatch", "canRetryWithDeviceToken": False,
                "recommendedNextStep": "update_auth_credentials",
            }  # fmt: skip
            await self._refuse(conn, frame.id, "INVALID_REQUEST", msg, 1008, details)
            return
        if client_id == "openclaw-tui" or mode == "ui":
            msg = "control ui requires device identity (use HTTPS or localhost secure context)"
            await self._refuse(
                conn, frame.id, "INVALID_REQUEST", msg, 1008, {"code": "CONTROL_UI_DEVICE_IDENTITY_REQUIRED"}
            )
            return
        # Without a device identity only the local backend client (and the CLI) keep their declared scopes, and
        # only without an ``Origin`` (measured: with one, ``scopes: []``; ``node-connect-reconcile:74-82``).
        where = d.locality(peer, client_id=client_id, mode=mode, shared_ok=True, auth_method="token")
        keeps_scopes = not peer.has_origin and (
            (
                (client_id, mode) == ("gateway-client", "backend")
                and where in ("direct_local", "shared_secret_loopback_local")
            )
            or ((client_id, mode) == ("cli", "cli") and where in ("direct_local", "cli_container_local"))
        )
        scopes = param(params, "scopes", list, [])
        conn.scopes = frozenset(s for s in scopes if isinstance(s, str)) if keeps_scopes else frozenset()
        conn.scope_order = tuple(dict.fromkeys(s for s in scopes if isinstance(s, str) and s in conn.scopes))
        self._admit(conn, params)
        await ws.send_message(dumps({"type": "res", "id": frame.id, "ok": True, "payload": self._hello(conn)}))

    async def _device_handshake(
        self, conn: SimConn, req_id: str, params: dict[str, Any], peer: d.Peer, challenge: dict[str, Any]
    ) -> None:
        """A ``connect`` with a ``device`` block: judged by ``devices.admit`` against ``sim.devices``."""
        auth = param(params, "auth", dict, {})
        secret = auth.get("token") or auth.get("password")
        shared_ok = isinstance(secret, str) and d.js_trim(secret) == self.token
        verdict = d.admit(
            self.devices, params, peer=peer, nonce=challenge["nonce"], shared_ok=shared_ok, now_ms=self.now_ms()
        )
        if isinstance(verdict, d.Refusal):
            await self._refuse(
                conn, req_id, verdict.code, verdict.message, verdict.close_code, verdict.details,
                close_reason=verdict.close_reason,
            )  # fmt: skip
            return
        conn.scopes = frozenset(verdict.scopes)
        self._admit(conn, params)
        self.device_conns[conn.conn_id] = (verdict.device_id, verdict.role)
        conn.device_id = verdict.device_id
        hello = self._hello(conn, auth=verdict.hello_auth())
        await conn.ws.send_message(dumps({"type": "res", "id": req_id, "ok": True, "payload": hello}))

    def _admit(self, conn: SimConn, params: dict[str, Any]) -> None:
        client = param(params, "client", dict, {})
        conn.caps = frozenset(c for c in params.get("caps") or [] if isinstance(c, str))
        conn.client_id, conn.mode = client.get("id", ""), client.get("mode", "")
        conn.instance_id = param(client, "instanceId", str, None)

    def _device_removed(self, device_id: str, role: str | None) -> None:
        """``disconnectClientsForDevice``: a removed device's (or revoked role's) live connections are closed with
        4001 "device removed", after what is already queued to them."""
        for conn_id, (dev, conn_role) in list(self.device_conns.items()):
            conn = self.conns.get(conn_id)
            if dev == device_id and (role is None or conn_role == role) and conn is not None:
                self.fanout.close(conn, *d.DEVICE_REMOVED)

    def _hello(self, conn: SimConn, auth: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "type": "hello-ok",
            "protocol": self.protocol,
            "server": {
                "version": SERVER_VERSION,
                "buildId": "owc-sim",
                "bootId": self.boot.boot_id,
                "connId": conn.conn_id,
            },
            "features": {
                "methods": sorted(METHOD_SCOPES),
                "events": [
                    "connect.challenge",
                    "tick",
                    "shutdown",
                    "sessions.changed",
                    "session.message",
                    "session.tool",
                    "chat",
                    "agent",
                    "heartbeat",
                    "question.requested",
                    "question.resolved",
                    "task",
                    "session.operation",
                ],
                "capabilities": [],
            },
            "snapshot": {
                # Its own presence entry, dated as the snapshot is built, and the uptime read with it (2026.9.6's
                # ``buildGatewaySnapshot``): together they say when the boot began.
                "presence": [{"mode": "gateway", "reason": "self", "version": SERVER_VERSION, "ts": self.now_ms()}],
                "uptimeMs": self.now_ms() - self.boot.started_ms,
                "sessionDefaults": {
                    "defaultAgentId": m.AGENT_ID,
                    "mainKey": "main",
                    "mainSessionKey": "agent:main:main",
                },
                "authMode": "token",
            },
            "auth": auth or {"method": "token", "role": "operator", "scopes": list(conn.scope_order)},
            "policy": {
                "maxPayload": self.max_payload,
                "maxBufferedBytes": MAX_BUFFERED_BYTES,
                "tickIntervalMs": self.tick_interval_ms,
            },
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
            await conn.ws.send_message(dumps({"type": "res", "id": req_id or "", "ok": False, "error": error}))
            await conn.ws.aclose(close_code, close_reason or message)
        except ConnectionClosed:
            pass

    # ------------------------------------------------------------------ waiting (tests, scenarios)

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Wait, with no clock, until ``predicate`` holds; re-checked whenever the simulator's state moves."""
        async with self._changed:
            while not predicate():
                await self._changed.wait()

    def quiescent(self) -> bool:
        return (
            not any(s.active or s.queued for s in self.sessions.values())
            and not self.driver.plays
            and not self.restarts.pending
            and not self.tasks.pending_announces
        )

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _poke(self) -> None:
        """Wake ``wait_*`` callers from synchronous code."""
        self._nursery.start_soon(self._notify)


class _Replay(trio.abc.Stream):
    """A connection whose first reads give back the request head the listener already read from it, so that
    trio-websocket reads the whole handshake; everything else goes to the connection itself."""

    def __init__(self, stream: trio.abc.Stream, head: bytes) -> None:
        self._stream = stream
        self._head = head

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._head:
            await trio.lowlevel.checkpoint()
            n = len(self._head) if max_bytes is None else max_bytes
            out, self._head = self._head[:n], self._head[n:]
            return out
        return await self._stream.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._stream.aclose()


def _address(stream: trio.abc.Stream) -> str | None:
    """The peer's address of an accepted TCP (or TLS over TCP) connection."""
    inner = stream.transport_stream if isinstance(stream, trio.SSLStream) else stream
    if not isinstance(inner, trio.SocketStream):
        return None
    try:
        return str(inner.socket.getpeername()[0])
    except OSError:
        return None


async def _read_head(stream: trio.abc.Stream) -> bytes:
    """The bytes up to and with the end of the request head (maybe a little more: a client may pipeline); b""
    when the connection ends first or the head runs past ``MAX_REQUEST_HEAD``."""
    head = b""
    while b"\r\n\r\n" not in head:
        if len(head) > MAX_REQUEST_HEAD:
            return b""
        data = await stream.receive_some(4096)
        if not data:
            return b""
        head += data
    return head


def _parse_head(head: bytes) -> tuple[h11.Connection, h11.Request] | None:
    """The request head, and the h11 server connection that read it (it answers it); None if not HTTP/1.1."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_HEAD)
    conn.receive_data(head)
    try:
        event = conn.next_event()
    except h11.RemoteProtocolError:
        return None
    return (conn, event) if isinstance(event, h11.Request) else None


def _is_upgrade(request: h11.Request) -> bool:
    return any(name == b"upgrade" and value.lower() == b"websocket" for name, value in request.headers)


def _peer(request: WebSocketRequest, address: str | None = None) -> d.Peer:
    """Where a connection comes from, as the handshake judges it: the peer address, ``Origin``, ``Host`` and
    whether forwarding headers are present. trio-websocket 0.12 gives no public access to ``Host`` (wsproto keeps it
    out of the header list), so it is read from the parsed request where present."""
    origin: str | None = None
    forwarded = False
    for name, value in request.headers:
        key = name.lower()
        if key == b"origin" and origin is None:
            origin = value.decode("latin-1")
        forwarded = forwarded or key in (b"forwarded", b"x-real-ip") or key.startswith(b"x-forwarded-")
    host = getattr(getattr(request, "_event", None), "host", None)
    return d.Peer(address=address, origin=origin, host=host if isinstance(host, str) else None, forwarded=forwarded)


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
