"""The Trio Gateway connection: the supervisor that reconnects, and the pump around each connection's machine.

``GatewayClient.run`` is the supervisor: it opens a connection, runs it until it closes, waits its backoff and
opens the next, forever (or until a refusal retrying cannot fix: raised, or held until new settings or a person's
new attempt with ``GatewayConfig.hold_refusals``). Each ``Connection`` is one WebSocket from its hello-ok to its
close, and owns one nursery: its reader, its liveness watchdog and its resync are children of it, and the handler's
view of the connection (``handler.attach``: owc's run table, whose nursery holds one writer per run this connection
writes, ``owc/runs/table.py``) is entered inside it, so a closing socket cancels them all and nothing outlives it
(the runs themselves outlive it in the handler's ledger).

What a connection knows and decides (the handshake's frames, requests and their positions in the frame stream,
seq gaps and when to resync, the runs believed active) is the sans-I/O ``owc.protocol.machine``; what owc presents
and checks to be let in (the TLS context and pin, the device identity and its pairing, a refusal's line, the
granted scopes) is ``owc.gateway.admission``; this module is the pump around them: the WebSocket
(``owc.gateway.websocket``), the handshake's steps, the request waiters, the handler, the tasks.

The only timers here are the transport's own, each in one place:

* the handshake bound (``connect_timeout``, 10 s) and the RPC response bound (``request_timeout``, 60 s):
  they bound a hung server and decide nothing when the server answers;
* liveness (``_watchdog``, one task per connection): no frame at all for three tick intervals (90 s) means a
  dead socket;
* the reconnect backoff (``Backoff``): 1 s doubling to 4 s while an outage is young, on to 30 s once its waits
  add up to 2 minutes; jittered, reset after a healthy hello.
"""

from __future__ import annotations

import logging
import math
import ssl
import uuid
from collections.abc import AsyncIterator, Awaitable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import attrs
import trio
from trio_websocket import ConnectionClosed, HandshakeError

from owc import __version__
from owc.device import DeviceIdentityError
from owc.gateway.admission import Admission, check_pin, connect_refused, parse_pin, present_device
from owc.gateway.backoff import Backoff
from owc.gateway.errors import (
    GatewayError,
    MissingScopes,
    NotAWebSocket,
    NotConnected,
    PayloadTooLarge,
    Refused,
    ReplyTooLarge,
    RequestError,
    RequestTimeout,
    SessionClosed,
)
from owc.gateway.url import check_gateway_url, redact_url
from owc.gateway.websocket import WebSocket, connect_websocket
from owc.protocol import (
    DEFAULT_MAX_PAYLOAD,
    ConnectParams,
    Event,
    HelloOk,
    ProtocolError,
    SeqTracker,
    Shutdown,
    parse_hello_ok,
    parse_subscribe,
    refusals,
)
from owc.protocol.active import ActiveRuns, Resync
from owc.protocol.handshake import boot_started_at, parse_challenge
from owc.protocol.machine import Answered, ConnectionMachine, Deliver, Handshake, Lost, RequestTooLarge
from owc.protocol.refusals import Refusal, SettingNames
from owc.protocol.results import parse_sessions_list

log = logging.getLogger("owc.gateway")


@attrs.frozen
class GatewayConfig:
    """Transport settings. Times are seconds on Trio's clock."""

    connect_timeout: float = 10.0
    request_timeout: float = 60.0
    #: After a refused ``connect``, how long to wait for the Gateway's close frame (its code names the cause).
    refusal_close_wait: float = 2.0
    missed_ticks: int = 3
    backoff_initial: float = 1.0
    backoff_cap: float = 30.0
    backoff_jitter: float = 0.2
    #: The backoff's cap while an outage is young, and how many seconds of waiting it lasts (``Backoff``).
    backoff_watch_cap: float = 4.0
    backoff_patience: float = 120.0
    #: ``sessions.subscribe`` list params: owc needs every session an Open WebUI chat may own.
    list_params: dict[str, Any] = attrs.field(factory=lambda: {"limit": 1000})
    instance_id: str | None = None
    ssl_context: ssl.SSLContext | None = None
    #: ``wss://``: a CA file to trust besides the system's (a Gateway with its own CA).
    ca_file: Path | None = None
    #: ``wss://``: the Gateway certificate's SHA-256 fingerprint (hex, colons allowed). The connection is accepted
    #: only with exactly that certificate, whoever signed it and whatever names it holds (the real Gateway's
    #: generated certificate has no subjectAltName: measured); OpenClaw's own clients pin it the same way.
    pin_sha256: str | None = attrs.field(default=None, converter=parse_pin)
    #: Where owc's device identity lives (``owc/device.py``): with it, ``connect`` carries the signed ``device``
    #: proof and the device token, which a Gateway on another host requires. None: token only (loopback).
    device_dir: Path | None = None
    #: An ``Origin`` header for the WebSocket handshake (a browser-like or remote client; the real Gateway then
    #: requires a paired device even on loopback: the remote path, for tests and proxies that add one).
    origin: str | None = None
    #: Where a person changes owc's settings, for the line a refusal gets (``owc.protocol.refusals``).
    names: SettingNames = refusals.CLI
    #: A refusal retrying cannot fix (a wrong token): False: ``run`` raises it (``owc run`` exits 4); True: the
    #: client keeps it in ``refusal``, says it once, and waits, without a clock, for ``reconfigure`` (new settings)
    #: or ``retry`` (a person's new attempt): owc inside Open WebUI, which must go on answering each message.
    hold_refusals: bool = False


@attrs.frozen
class HelloInfo:
    """What a new connection tells the handler. ``boot_changed``: the Gateway restarted since the previous
    connection (its boot id differs); ``notice``: the ``shutdown`` notice that preceded the previous close,
    if one did (with ``restart_expected_ms`` in restart mode, without it on a plain stop)."""

    hello: HelloOk
    first: bool
    boot_changed: bool
    previous_boot_id: str | None
    notice: Shutdown | None


@attrs.frozen
class CloseInfo:
    code: int | None
    reason: str
    notice: Shutdown | None
    boot_id: str | None


class ConnectionRuns(Protocol):
    """What a handler attaches to one connection for exactly its lifetime. ``on_event`` is called by the reader
    for every consumed event in arrival order and must not block (it may start tasks of its own)."""

    def on_event(self, event: Event) -> None: ...

    def on_gap(self) -> None:
        """Events were lost (a seq gap), just noticed, before the event that showed it is delivered."""

    async def on_hello(self, info: HelloInfo, resync: Resync) -> None: ...

    async def on_resync(self, resync: Resync) -> None: ...


class ConnectionHandler(Protocol):
    """Where the connection delivers what it reads: ``attach(conn)`` is entered before the connection reads its
    first frame and left when it closes (its exit sees ``conn.close_code`` / ``conn.notice``)."""

    def attach(self, conn: Connection) -> AbstractAsyncContextManager[ConnectionRuns]: ...


class _NullRuns:
    def on_event(self, event: Event) -> None:
        pass

    def on_gap(self) -> None:
        pass

    async def on_hello(self, info: HelloInfo, resync: Resync) -> None:
        pass

    async def on_resync(self, resync: Resync) -> None:
        pass


class NullHandler:
    """A handler that does nothing (for tools that only make requests)."""

    @asynccontextmanager
    async def attach(self, conn: Connection) -> AsyncIterator[ConnectionRuns]:
        yield _NullRuns()


#: What owc's WebSocket reads at most in one message: the Gateway's own ``MAX_BUFFERED_BYTES``, twice
#: ``policy.maxPayload``. A message between the two is read and refused unparsed (a reply among them fails
#: its request at once); only a larger one makes the WebSocket close with 1009.
MAX_MESSAGE_READ = 2 * DEFAULT_MAX_PAYLOAD


class Connection:
    """One WebSocket connection to the Gateway, from hello-ok to close (a *connection*, never a "session": that
    word is the Gateway's agent session, named by a session key). ``nursery`` is the connection's nursery:
    everything that must not outlive this socket (its reader, its resync, its run table and writers) is in it.
    Its state (requests and their positions, seq, gaps, resyncs, active runs) is the sans-I/O ``machine``
    (``owc.protocol.machine``); this class is the pump around it: waiters, the handler, the socket."""

    def __init__(
        self, ws: WebSocket, hello: HelloOk, config: GatewayConfig, nursery: trio.Nursery, *, label: str = ""
    ) -> None:
        self.ws = ws
        self.hello = hello
        self.config = config
        self.nursery = nursery
        self.id = hello.conn_id or str(uuid.uuid4())
        self.machine = ConnectionMachine(label=label, max_payload=hello.policy.max_payload)
        self.closed = False
        self.close_code: int | None = None
        self.close_reason = ""
        self.runs: ConnectionRuns = _NullRuns()  # the handler's view of this connection, once attached
        #: When the last frame arrived (Trio's clock), stamped by the reader for the liveness watchdog; the
        #: connection's start counts as one (the silence bound runs from the hello).
        self.last_frame_at = trio.current_time()
        self._waiters: dict[str, trio.Event] = {}
        self._closed = trio.Event()

    # The machine's state, as the handler and the tests read it.
    @property
    def active(self) -> ActiveRuns:
        return self.machine.active

    @property
    def seq(self) -> SeqTracker:
        return self.machine.seq

    @property
    def notice(self) -> Shutdown | None:
        return self.machine.notice

    @property
    def last_ts(self) -> int:
        return self.machine.last_ts

    @property
    def gaps(self) -> int:
        return self.machine.gaps

    @property
    def resyncs(self) -> int:
        return self.machine.resyncs

    @property
    def frames(self) -> int:
        return self.machine.frames

    @property
    def boot_id(self) -> str | None:
        return self.hello.boot_id

    async def request(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """Send one RPC and return its payload. Raises ``RequestError`` (the Gateway said no),
        ``RequestTimeout`` (no answer in time), ``SessionClosed`` (the socket closed first)."""
        payload, _ = await self.request_at(method, params, timeout=timeout)
        return payload

    async def request_at(self, method: str, params: Any = None, *, timeout: float | None = None) -> tuple[Any, int]:
        """``request``, also returning the response's position in the frame stream: every event before
        that position was sent (or dropped) before the Gateway built the response."""
        if self.closed:
            raise SessionClosed(method)
        try:
            req_id, data = self.machine.request(method, params)
        except RequestTooLarge as exc:
            raise PayloadTooLarge(method, exc.size, exc.limit) from None
        done = self._waiters[req_id] = trio.Event()
        try:
            timeout = self.config.request_timeout if timeout is None else timeout
            with trio.move_on_after(timeout):  # the send too: a socket that stopped draining is a hung server
                try:
                    await self.ws.send_message(data)
                except ConnectionClosed:
                    raise SessionClosed(method) from None
                await done.wait()
        finally:
            self._waiters.pop(req_id, None)
            pending = self.machine.done(req_id)
        assert pending is not None
        response = pending.response
        if response is None:
            if pending.too_large is not None:
                raise ReplyTooLarge(method, pending.too_large.size, pending.too_large.limit)
            if self.closed:
                raise SessionClosed(method)
            raise RequestTimeout(method, timeout)
        if not response.ok:
            assert response.error is not None
            raise RequestError(method, response.error)
        return response.payload, pending.position

    def close(self, code: int | None, reason: str) -> None:
        """End the connection: pending requests fail with ``SessionClosed`` and every task in the connection's
        nursery (reader, resync, run writers) is cancelled."""
        if not self.closed:
            self.close_code, self.close_reason = code, reason
        self._fail_pending()
        self.nursery.cancel_scope.cancel()

    def _fail_pending(self) -> None:
        self.closed = True
        self._closed.set()
        for done in self._waiters.values():
            done.set()

    def _answered(self, request_id: str) -> None:
        done = self._waiters.get(request_id)
        if done is not None:
            done.set()

    async def wait_closed(self) -> None:
        """Until the connection ends (an event, not a clock)."""
        await self._closed.wait()

    @property
    def close_info(self) -> CloseInfo:
        return CloseInfo(self.close_code, self.close_reason, self.notice, self.boot_id)


class GatewayClient:
    """owc's connection to one Gateway, reconnecting for as long as it runs.

    Start it with ``await nursery.start(client.run)``; cancel that nursery (or ``client.stop()``) to close
    it. ``run`` raises ``Refused`` / ``MissingScopes`` for refusals that cannot succeed by retrying.
    """

    def __init__(
        self,
        url: str,
        token: str,
        handler: ConnectionHandler | None = None,
        config: GatewayConfig | None = None,
        *,
        backoff: Backoff | None = None,
    ) -> None:
        #: The URL as it may be shown: credentials redacted (``owc.gateway.url``). Every log line uses this one;
        #: only the connect itself reads ``_url``.
        self.url = redact_url(url)
        self._url = url
        self._token = token
        self.handler: ConnectionHandler = handler or NullHandler()
        self.config = config or GatewayConfig()
        self.backoff = backoff or Backoff(
            self.config.backoff_initial,
            self.config.backoff_cap,
            self.config.backoff_jitter,
            watch_cap=self.config.backoff_watch_cap,
            patience=self.config.backoff_patience,
        )
        self.connection: Connection | None = None
        self.connections_opened = 0
        self.attempts = 0
        #: While waiting to reconnect: when the next attempt starts (Trio's clock).
        self.backoff_until: float | None = None
        #: While this device waits for a person to approve it on the Gateway host: what to tell them (the exact
        #: command, with the request id); None once connected.
        self.pairing: str | None = None
        #: The last attempt's refusal, explained (``owc.protocol.refusals``): what a person is told while owc waits
        #: (its backoff, or held); None once connected, and while an attempt is under way.
        self.refusal: Refusal | None = None
        #: Held on a refusal retrying cannot fix (``GatewayConfig.hold_refusals``): no attempt until ``retry`` or
        #: ``reconfigure``.
        self.held = False
        self._resume = trio.Event()
        #: ``reconfigure`` asked for an attempt now: the next one starts without a backoff wait.
        self._at_once = False
        self._attempt: trio.CancelScope | None = None
        self._sleep: trio.CancelScope | None = None
        #: The connection being served (from its hello-ok, before its subscribe is answered): what a
        #: ``reconfigure`` closes.
        self._serving: Connection | None = None
        #: While connected with fewer scopes than owc asks (no ``operator.write``): what that disables, for the
        #: person whose turn is refused; None with every scope.
        self.limited: str | None = None
        self._boot_id: str | None = None
        self._last_notice: Shutdown | None = None
        self._changed = trio.Event()
        self._cancel = trio.CancelScope()

    def __repr__(self) -> str:  # never the token
        return f"GatewayClient(url={self.url!r}, instance={self.config.instance_id!r})"

    # ------------------------------------------------------------------ public

    async def request(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        conn = self.connection
        if conn is None or conn.closed:
            raise NotConnected(method)
        return await conn.request(method, params, timeout=timeout)

    async def wait_connection(self, newer_than: Connection | None = None) -> Connection:
        """The current connection, waiting (without a clock) for the next hello-ok if there is none, or if
        the current one is ``newer_than`` (a caller that saw a connection end waits for its successor)."""
        while self.connection is None or self.connection.closed or self.connection is newer_than:
            await self._changed.wait()
        return self.connection

    async def wait_backing_off(self) -> float:
        """Until the client waits its backoff; returns when the next attempt starts (for tests and tools that
        move a ``MockClock``)."""
        while self.backoff_until is None:
            await self._changed.wait()
        return self.backoff_until

    async def wait_settled(self) -> None:
        """Until the client has something to tell a person: connected (a hello-ok), its device waiting for the
        Gateway's approval, or refused. Woken by the client's own changes (an event, not a clock); an unreachable
        Gateway never settles it, so a caller bounds the wait (``owc owui install``'s, through the health route)."""
        while (self.connection is None or self.connection.closed) and self.pairing is None and self.refusal is None:
            await self._changed.wait()

    async def wait_held(self) -> None:
        """Until the client is held on a refusal (an event, not a clock)."""
        while not self.held:
            await self._changed.wait()

    def stop(self) -> None:
        self._cancel.cancel()

    def retry(self) -> bool:
        """A person's new attempt while held (a message sent meanwhile: the Gateway's token may have been fixed on
        its side): one attempt now, which holds again if refused again. False when not held (nothing to do)."""
        if not self.held:
            return False
        self.held = False
        self._at_once = True
        self._resume.set()
        self._wake()
        return True

    def reconfigure(self, url: str, token: str, config: GatewayConfig | None = None) -> None:
        """New settings (a Pipe valve saved): close the connection (or the attempt, or the wait) and connect with
        them at once, the backoff started afresh. Runs carried across the close are the ledger's, as after any
        drop. Raises ``InvalidGatewayUrl`` (before changing anything) for a URL that is not ``ws://`` / ``wss://``."""
        check_gateway_url(url)
        self.url, self._url, self._token = redact_url(url), url, token
        if config is not None:
            self.config = config
            jitter_rng = self.backoff.rng
            self.backoff = Backoff(
                config.backoff_initial,
                config.backoff_cap,
                config.backoff_jitter,
                jitter_rng,
                watch_cap=config.backoff_watch_cap,
                patience=config.backoff_patience,
            )
        self.backoff.reset()
        self.refusal = self.pairing = self.limited = None
        self._at_once = True
        log.info("gateway.reconfigured url=%s (connecting with the new settings now)", self.url)
        serving = self._serving
        if serving is not None and not serving.closed:
            serving.close(None, "owc's settings changed")
        elif self._attempt is not None:
            self._attempt.cancel()
        if self._sleep is not None:
            self._sleep.cancel()
        if self.held:
            self.held = False
            self._resume.set()
        self._wake()

    async def run(self, *, task_status: trio.TaskStatus[GatewayClient] = trio.TASK_STATUS_IGNORED) -> None:
        """Connect, serve, back off, reconnect, forever. Raises (from ``nursery.start`` when it cannot even
        begin) ``InvalidGatewayUrl`` for a URL that is not ``ws://`` / ``wss://``: no backoff fixes that."""
        check_gateway_url(self._url)
        task_status.started(self)
        with self._cancel:
            while True:
                self.attempts += 1
                self._at_once = False
                floor = 0.0
                try:
                    with trio.CancelScope() as self._attempt:  # ``reconfigure`` cancels a handshake under way
                        floor = await self._connect_once()
                except (Refused, MissingScopes):
                    if not self.config.hold_refusals:
                        raise
                    await self._hold()
                    continue
                finally:
                    self._attempt = None
                if self._at_once:
                    continue  # new settings: the next attempt now, not after a wait meant for the old ones
                delay = max(self.backoff.next_delay(), floor)
                log.info("gateway.reconnecting url=%s in=%.2f", self.url, delay)
                self.backoff_until = trio.current_time() + delay
                self._wake()
                try:
                    with trio.CancelScope() as self._sleep:  # ``reconfigure`` ends the wait
                        await trio.sleep(delay)
                finally:
                    self._sleep = None
                    self.backoff_until = None

    async def _hold(self) -> None:
        """Held on a refusal retrying cannot fix: said once (``_connect_once`` logged it), then no attempt until
        ``retry`` or ``reconfigure`` (an event, not a clock)."""
        self.held = True
        self._resume = trio.Event()
        self._wake()
        log.info("gateway.held url=%s (until new settings or a new message)", self.url)
        await self._resume.wait()

    async def _connect_once(self) -> float:
        """One connection, from TCP to close. Returns the least wait before the next attempt; raises what
        retrying cannot fix. The nurseries below may raise exception groups: they are taken apart here, at the
        boundary, leaf by leaf (a cancel passes through untouched)."""
        fatal: BaseException | None = None
        floor = 0.0
        self.refusal = None
        try:
            await self._connection_once()
        except* MissingScopes as group:
            fatal = group.exceptions[0]
            assert isinstance(fatal, MissingScopes)
            self.refusal = fatal.refusal
            log.error("gateway.refused url=%s code=%s: %s", self.url, fatal.refusal.code, fatal.refusal.line)
        except* Refused as group:
            for exc in _leaves(group):
                assert isinstance(exc, Refused)
                self.refusal = exc.refusal
                if not exc.retryable:
                    fatal = fatal or exc
                    log.error("gateway.refused url=%s code=%s: %s", self.url, exc.refusal.code, exc.refusal.line)
                else:
                    if exc.refusal.kind is not refusals.Kind.PAIRING:  # pairing: its own line (``Admission.refused``)
                        log.warning(
                            "gateway.refused_retryable url=%s code=%s: %s",
                            self.url,
                            exc.refusal.code,
                            exc.refusal.line,
                        )
                    floor = max(floor, (exc.error.retry_after_ms or 0) / 1000)
        except* (
            OSError,
            HandshakeError,
            ConnectionClosed,
            trio.TooSlowError,
            trio.BrokenResourceError,
            ProtocolError,
            GatewayError,
        ) as group:
            for exc in _leaves(group):
                log.warning("gateway.connect_failed url=%s error=%s", self.url, _describe(exc))
        except* DeviceIdentityError as group:
            # A device folder owc cannot use (unwritable, not a folder, a corrupt file): a person's fix, said in one
            # line an attempt (its message names the file), never a traceback per reconnect.
            for exc in _leaves(group):
                log.error(
                    "gateway.device_unusable url=%s: %s (fix the folder's permissions or choose another)", self.url, exc
                )
        except* Exception as group:
            # A bug anywhere in a connection must cost that connection, never owc's link to the Gateway for good.
            for exc in _leaves(group):
                log.error("gateway.connection_failed url=%s (reconnecting)", self.url, exc_info=exc)
        if fatal is not None:
            raise fatal
        return floor

    # ------------------------------------------------------------------ one connection

    async def _connection_once(self) -> None:
        async with self._opened() as (ws, hello):
            await self._serve(ws, hello)

    async def probe(self) -> HelloOk:
        """One handshake, then close: what ``owc doctor`` reports (``owc.gateway.doctor``). Raises what a connect
        raises (``Refused``, ``MissingScopes``, ``OSError``, ...); a device token or pairing request it is given is
        kept exactly as ``run`` would keep it."""
        check_gateway_url(self._url)
        self.attempts += 1
        async with self._opened() as (_, hello):
            return hello

    @property
    def admission(self) -> Admission:
        """What this client presents and checks to be let in (``owc.gateway.admission``), for its settings now."""
        return Admission(self.url, self.config)

    @asynccontextmanager
    async def _opened(self) -> AsyncIterator[tuple[WebSocket, HelloOk]]:
        cfg = self.config
        admission = self.admission
        async with _open_websocket(
            self._url, admission.tls_context(self._url), cfg.connect_timeout, cfg.origin, admission.pin
        ) as ws:
            try:
                with trio.fail_after(cfg.connect_timeout):
                    hello = await self._handshake(ws)
            except trio.TooSlowError:
                raise GatewayError(f"handshake not finished within {cfg.connect_timeout:g} s") from None
            yield ws, hello

    async def _handshake(self, ws: WebSocket) -> HelloOk:
        steps = Handshake()
        challenge = steps.challenge(await ws.get_message())
        params = ConnectParams(
            token=self._token,
            client_version=__version__,
            user_agent=f"owc/{__version__}",
            instance_id=self.config.instance_id,
        )
        body = params.to_json()
        identity = await self.admission.identity()
        if identity is not None:
            present_device(body, identity, challenge.payload)
        await ws.send_message(steps.connect(body))
        frame = None
        while frame is None:  # events may not precede hello-ok, but tolerate them rather than fail the handshake
            frame = steps.reply(await ws.get_message())
        if not frame.ok:
            # The Gateway closes right after a refusal: read its close code, on a bound of its own (shielded
            # from the handshake's), so a server that refuses without closing is still reported as a refusal
            # and not as a handshake timeout, which would be retried.
            code = None
            with trio.move_on_after(self.config.refusal_close_wait) as wait:
                wait.shield = True
                try:
                    while True:
                        await ws.get_message()
                except ConnectionClosed as exc:
                    code = _close_of(exc)[0]
            refused = await self.admission.refused(connect_refused(frame, code), identity)
            if refused.refusal.kind is refusals.Kind.PAIRING and identity is not None:
                self.pairing = refused.refusal.line
            raise refused
        hello = parse_hello_ok(frame.payload)
        # When this boot began, on the Gateway's clock (the owner rule's "since the boot", fuzz seed 141731).
        now_ts = hello.snapshot_ts if hello.snapshot_ts is not None else _challenge_ts(challenge.payload)
        hello = attrs.evolve(hello, booted_at_ms=boot_started_at(now_ts, hello.uptime_ms))
        self.pairing = None
        if identity is not None:
            await self.admission.paired(identity, frame.payload)
        self.limited = self.admission.check_scopes(hello, identity)
        return hello

    async def _serve(self, ws: WebSocket, hello: HelloOk) -> None:
        conn: Connection | None = None
        healthy = False
        url = self.url  # this connection's: ``reconfigure`` may name the next one's before this one has closed
        try:
            async with trio.open_nursery() as nursery:
                conn = self._serving = Connection(ws, hello, self.config, nursery, label=url)
                log.info("gateway.hello url=%s boot=%s conn=%s", url, hello.boot_id, conn.id)
                # The handler's view of this connection lives exactly as long as it: entered before the first
                # frame is read (events may precede the subscribe's reply), left when the connection closes.
                async with self.handler.attach(conn) as runs:
                    conn.runs = runs
                    conn.last_frame_at = trio.current_time()  # the silence bound runs from the first read
                    nursery.start_soon(self._reader, conn)
                    nursery.start_soon(self._watchdog, conn)
                    try:
                        payload, position = await conn.request_at("sessions.subscribe", dict(self.config.list_params))
                        listed = parse_subscribe(payload)
                    except (GatewayError, ProtocolError) as exc:
                        log.warning("gateway.subscribe_failed url=%s error=%s", self.url, exc)
                        conn.close(None, f"subscribe failed: {exc}")
                        return
                    info = HelloInfo(
                        hello=hello,
                        first=self.connections_opened == 0,
                        boot_changed=self._boot_id is not None and hello.boot_id != self._boot_id,
                        previous_boot_id=self._boot_id,
                        notice=self._last_notice,
                    )
                    self._boot_id, self._last_notice = hello.boot_id, None
                    self.connections_opened += 1
                    self.connection = conn
                    healthy = True
                    self._wake()
                    self.backoff.reset()  # a healthy hello: handshake done and the subscription answered
                    rows = listed.list.sessions if listed.list is not None else ()
                    complete = listed.list is None or listed.list.complete
                    unreadable = listed.list.unreadable_keys if listed.list is not None else ()
                    resync = conn.machine.resync(
                        rows, "hello", complete=complete, position=position, unreadable_keys=unreadable
                    )
                    await self._call(runs.on_hello(info, resync), "on_hello")
                    await conn.wait_closed()  # until the reader ends it (a close, silence) or a cancel from outside
                if not conn.closed:
                    # The handler's view ended the block above with no error while the connection is open: only a
                    # nursery of the handler's does that, when one of its tasks let out a Cancelled no cancelled scope
                    # owned (the nursery then takes every Cancelled in it, the block's too). The view is gone (its
                    # runs carried, their writers ended): serving on would read events for nobody, so the connection
                    # closes and the next one's hello takes the runs up (``owc.runtime.RuntimeEnded``: the same shape).
                    log.error(
                        "gateway.handler_ended url=%s conn=%s (the connection closes; the next takes its runs)",
                        url,
                        conn.id,
                    )
                    conn.close(None, "owc's view of the connection ended under it")
        finally:
            if self._serving is conn:
                self._serving = None
            if conn is not None:
                if not conn.closed:
                    conn.close_reason = conn.close_reason or "closed by owc"
                conn._fail_pending()
                if self.connection is conn:
                    self.connection = None
                    self._wake()
                if healthy:
                    self._last_notice = conn.notice
                notice = conn.notice
                log.info(
                    "gateway.closed url=%s code=%s reason=%s notice=%s",
                    url, conn.close_code, conn.close_reason[:120], notice.reason if notice else None,
                )  # fmt: skip

    async def _call(self, call: Awaitable[None], name: str) -> None:
        """Run a handler callback; its failure is logged and the connection goes on."""
        try:
            await call
        except Exception:
            log.exception("gateway.handler_failed url=%s callback=%s", self.url, name)

    async def _reader(self, conn: Connection) -> None:
        """Read frames until the socket closes, then end the connection (which cancels everything in its
        nursery). Batch dispatch: every message already received is decoded and dispatched before the reader
        reads (and yields) again: one wake-up per read, not per frame. Each batch stamps ``conn.last_frame_at``
        for the watchdog: one clock read, no scope."""
        ws = conn.ws
        receive = conn.machine.receive
        while True:
            try:
                messages = await ws.get_messages()
            except ConnectionClosed as exc:
                conn.close(*_close_of(exc))
                return
            conn.last_frame_at = trio.current_time()
            for message in messages:
                step = receive(message)
                if step is None:
                    continue
                if type(step) is Deliver:
                    self._deliver(conn, step.event, step.name)
                elif type(step) is Answered:
                    conn._answered(step.request_id)
                else:
                    assert isinstance(step, Lost)
                    self._lost(conn, step)
                if conn.closed:
                    return  # a handler closed it: what follows is not this connection's to deliver

    def _deliver(self, conn: Connection, event: Event, name: str) -> None:
        try:
            conn.runs.on_event(event)
        except Exception:  # a handler bug for one event must not kill the connection or other runs
            log.exception("gateway.handler_failed url=%s event=%s", self.url, name)

    def _lost(self, conn: Connection, lost: Lost) -> None:
        """A seq gap: the handler hears of it before the event that showed it; a resync starts if none runs."""
        try:
            conn.runs.on_gap()
        except Exception:
            log.exception("gateway.handler_failed url=%s callback=on_gap", self.url)
        if lost.resync:
            conn.nursery.start_soon(self._resync, conn)
        if lost.event is not None:
            self._deliver(conn, lost.event, lost.name)

    async def _watchdog(self, conn: Connection) -> None:
        """Liveness: no frame at all for ``missed_ticks`` tick intervals means a dead socket (a half-open TCP
        connection never says so itself). One task per connection sleeping to "last frame + silence" and
        re-arming from the reader's stamp, rather than a cancel scope around every receive: the per-frame scope
        cost more than owc's whole decode (issue 16's profile: 10.6 % of the reader). It decides nothing about a
        run: it only ends a connection that stopped talking, exactly as the receive bound did."""
        silence = self.config.missed_ticks * conn.hello.policy.tick_interval_ms / 1000
        while True:
            deadline = conn.last_frame_at + silence
            if trio.current_time() >= deadline:
                break
            await trio.sleep_until(deadline)
        log.warning("gateway.dead_socket url=%s silent_for=%.0f", self.url, silence)
        conn.close(None, f"no frame for {silence:g} s ({self.config.missed_ticks} missed ticks)")

    async def _resync(self, conn: Connection) -> None:
        """Re-read ``sessions.list`` after a gap, once per burst: gaps found meanwhile cause one more list."""
        machine = conn.machine
        try:
            while True:
                machine.resync_listing()
                try:
                    payload, position = await conn.request_at("sessions.list", dict(self.config.list_params))
                    listed = parse_sessions_list(payload)
                except SessionClosed:
                    return  # the next connection's subscribe-and-list resyncs
                except (GatewayError, ProtocolError) as exc:
                    # Events were lost and the list that would recover them failed: a new connection's
                    # subscribe-and-list is the only way left to learn what happened.
                    log.warning("gateway.resync_failed url=%s error=%s", self.url, exc)
                    conn.close(None, f"resync failed: {exc}")
                    return
                resync = machine.resync(
                    listed.sessions,
                    "gap",
                    complete=listed.complete,
                    position=position,
                    unreadable_keys=listed.unreadable_keys,
                )
                await self._call(conn.runs.on_resync(resync), "on_resync")
                if machine.resync_covers(position):
                    return
        finally:
            machine.resync_ended()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()


@asynccontextmanager
async def _open_websocket(
    url: str,
    ssl_context: ssl.SSLContext | None,
    timeout: float,
    origin: str | None = None,
    pin_sha256: str | None = None,
) -> AsyncIterator[WebSocket]:
    """TCP (and TLS, verified, with the handshake done first so a bad certificate is reported as such
    rather than as a timeout), then the WebSocket handshake, all within ``timeout``. The WebSocket is owc's own
    client (``owc.gateway.websocket``, issue 16): no task of its own, so it needs no nursery here."""
    parts = check_gateway_url(url)
    port = parts.port or (443 if parts.scheme == "wss" else 80)
    resource = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    with trio.fail_after(timeout):
        stream: trio.SocketStream | trio.SSLStream[trio.SocketStream] = await trio.open_tcp_stream(parts.hostname, port)
        try:
            if ssl_context is not None:
                stream = trio.SSLStream(stream, ssl_context, server_hostname=parts.hostname, https_compatible=True)
                await stream.do_handshake()
                if pin_sha256 is not None:
                    check_pin(stream, pin_sha256)
        except BaseException:
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            raise
    try:
        with trio.fail_after(timeout):
            ws = await connect_websocket(
                stream,
                host,
                resource,
                max_message_size=MAX_MESSAGE_READ,
                extra_headers=((b"Origin", origin.encode()),) if origin else (),
            )
    except BaseException:
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(stream)
        raise
    try:
        yield ws
    finally:
        # Cancelled (owc is shutting down): nobody may wait for the close reply, so drop the TCP stream.
        # Otherwise close politely, bounded.
        cancelled = trio.current_effective_deadline() == -math.inf
        with trio.CancelScope(shield=True):
            if cancelled:
                await trio.aclose_forcefully(stream)
            else:
                with trio.move_on_after(timeout):
                    await ws.aclose()
                await trio.aclose_forcefully(stream)


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    """The exceptions of a (nested) group, in order."""
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out


def _challenge_ts(payload: object) -> int | None:
    """The challenge's ``ts`` (the Gateway's clock as the socket opened), or None: a challenge without a usable one
    is still good for a client that signs nothing."""
    try:
        return parse_challenge(payload).ts  # type: ignore[arg-type]
    except ProtocolError:
        return None


def _close_of(exc: ConnectionClosed) -> tuple[int | None, str]:
    """The close code and reason; trio-websocket gives no reason when owc itself dropped the stream."""
    reason = exc.reason
    return (reason.code, reason.reason or "") if reason is not None else (None, "closed locally")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, NotAWebSocket):
        return str(exc)  # one line already: the status and its reason, never the page
    if isinstance(exc, ConnectionClosed):
        code, reason = _close_of(exc)
        return f"closed {code} {reason}".strip()
    text = f"{type(exc).__name__}: {exc}"
    cause = exc.__cause__ or exc.__context__
    if cause is not None and not str(exc):
        text += f" ({type(cause).__name__}: {cause})"
    return text[:300]


@asynccontextmanager
async def open_gateway_connection(
    url: str,
    token: str,
    handler: ConnectionHandler | None = None,
    config: GatewayConfig | None = None,
    *,
    backoff: Backoff | None = None,
) -> AsyncIterator[GatewayClient]:
    """Run a ``GatewayClient`` for the block's lifetime; leaving the block closes it and every task it owns.
    A refusal that retrying cannot fix ends the block with it, inside an exception group (``except*``)."""
    async with trio.open_nursery() as nursery:
        client = GatewayClient(url, token, handler, config, backoff=backoff)
        await nursery.start(client.run)
        try:
            yield client
        finally:
            nursery.cancel_scope.cancel()
