"""The Trio Gateway connection: one nursery per WebSocket session, no timer deciding anything but transport.

``GatewayClient.run`` is the supervisor: it opens a session, runs it until it closes, waits its backoff and
opens the next, forever (or until a refusal that cannot succeed). Each ``GatewaySession`` is one WebSocket
from challenge to close, and owns one nursery: its reader, its resync task and (later) every run writer of
the runs it shows are children of that nursery, so a closing socket cancels them all and nothing outlives it.

The only timers here are the transport's own, each in one place:

* the handshake bound (``connect_timeout``, 10 s) and the RPC response bound (``request_timeout``, 60 s):
  they bound a hung server and decide nothing when the server answers;
* liveness in the reader: no frame at all for three tick intervals (90 s) means a dead socket;
* the reconnect backoff (``Backoff``): 1 s doubling to 30 s, jittered, reset after a healthy hello.
"""

from __future__ import annotations

import logging
import math
import ssl
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, Protocol

import attrs
import orjson
import trio
from trio_websocket import ConnectionClosed, HandshakeError, WebSocketConnection, wrap_client_stream

from owc import __version__
from owc.gateway.active import ActiveRuns, Resync
from owc.gateway.backoff import Backoff
from owc.gateway.errors import (
    GatewayError,
    MissingScopes,
    NotConnected,
    PayloadTooLarge,
    Refused,
    RequestError,
    RequestTimeout,
    SessionClosed,
)
from owc.protocol import (
    DEFAULT_MAX_PAYLOAD,
    ConnectParams,
    Event,
    EventDecoder,
    EventFrame,
    HelloOk,
    ProtocolError,
    Request,
    Response,
    SeqTracker,
    Shutdown,
    Tick,
    decode_frame,
    encode_frame,
    parse_hello_ok,
    parse_subscribe,
)
from owc.protocol.handshake import ConnectChallenge, scopes_missing
from owc.protocol.results import parse_sessions_list

log = logging.getLogger("owc.gateway")

#: Refusals that retrying cannot fix (reference section 6).
PERMANENT_DETAIL_CODES = frozenset(
    {"AUTH_TOKEN_MISMATCH", "PROTOCOL_MISMATCH", "DEVICE_IDENTITY_REQUIRED", "CONTROL_UI_DEVICE_IDENTITY_REQUIRED"}
)
PERMANENT_CODES = frozenset({"NOT_PAIRED", "FORBIDDEN"})


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
    #: ``sessions.subscribe`` list params: owc needs every session an Open WebUI chat may own.
    list_params: dict[str, Any] = attrs.field(factory=lambda: {"limit": 1000})
    instance_id: str | None = None
    ssl_context: ssl.SSLContext | None = None


@attrs.frozen
class HelloInfo:
    """What a new session tells the handler. ``boot_changed``: the Gateway restarted since the previous
    session (its boot id differs); ``notice``: the ``shutdown`` notice that preceded the previous close,
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


class ConnectionHandler(Protocol):
    """Where the connection delivers what it reads. ``on_event`` is called by the reader for every consumed
    event in arrival order and must not block (it may start tasks in ``session.nursery``)."""

    def on_event(self, session: GatewaySession, event: Event) -> None: ...

    async def on_hello(self, session: GatewaySession, info: HelloInfo) -> None: ...

    async def on_resync(self, session: GatewaySession, resync: Resync) -> None: ...

    async def on_closed(self, info: CloseInfo) -> None: ...


class NullHandler:
    """A handler that does nothing (for tools that only make requests)."""

    def on_event(self, session: GatewaySession, event: Event) -> None:
        pass

    async def on_hello(self, session: GatewaySession, info: HelloInfo) -> None:
        pass

    async def on_resync(self, session: GatewaySession, resync: Resync) -> None:
        pass

    async def on_closed(self, info: CloseInfo) -> None:
        pass


class _Pending:
    __slots__ = ("done", "response", "method", "position")

    def __init__(self, method: str) -> None:
        self.method = method
        self.done = trio.Event()
        self.response: Response | None = None
        self.position = 0  # how many frames the session had received when the response arrived


class GatewaySession:
    """One WebSocket session, from hello-ok to close. ``nursery`` is the connection's nursery: tasks that
    must not outlive this socket (run writers) are started there."""

    def __init__(self, ws: WebSocketConnection, hello: HelloOk, config: GatewayConfig, nursery: trio.Nursery) -> None:
        self.ws = ws
        self.hello = hello
        self.config = config
        self.nursery = nursery
        self.id = hello.conn_id or str(uuid.uuid4())
        self.seq = SeqTracker()
        self.decoder = EventDecoder()
        self.active = ActiveRuns()
        self.notice: Shutdown | None = None
        self.closed = False
        self.close_code: int | None = None
        self.close_reason = ""
        self.gaps = 0
        self.resyncs = 0
        self.frames = 0  # frames received so far: a position in the stream
        self.last_gap_at = 0  # the position of the latest gap
        self._pending: dict[str, _Pending] = {}
        self._resync_running = False

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
        req_id = str(uuid.uuid4())
        data = encode_frame(Request(id=req_id, method=method, params=params))
        limit = self.hello.policy.max_payload
        if len(data) > limit:
            raise PayloadTooLarge(method, len(data), limit)
        pending = self._pending[req_id] = _Pending(method)
        try:
            timeout = self.config.request_timeout if timeout is None else timeout
            with trio.move_on_after(timeout):  # the send too: a socket that stopped draining is a hung server
                try:
                    await self.ws.send_message(data.decode())
                except ConnectionClosed:
                    raise SessionClosed(method) from None
                await pending.done.wait()
            response = pending.response
            if response is None:
                if self.closed:
                    raise SessionClosed(method)
                raise RequestTimeout(method, timeout)
        finally:
            self._pending.pop(req_id, None)
        if not response.ok:
            assert response.error is not None
            raise RequestError(method, response.error)
        return response.payload, pending.position

    def close(self, code: int | None, reason: str) -> None:
        """End the session: pending requests fail with ``SessionClosed`` and every task in the session's
        nursery (reader, resync, run writers) is cancelled."""
        if not self.closed:
            self.close_code, self.close_reason = code, reason
        self._fail_pending()
        self.nursery.cancel_scope.cancel()

    def _fail_pending(self) -> None:
        self.closed = True
        for pending in self._pending.values():
            pending.done.set()

    def _resolve(self, response: Response) -> None:
        pending = self._pending.get(response.id)
        if pending is None:
            log.warning("gateway.unexpected_response id=%s", response.id[:64])
            return
        pending.response = response
        pending.position = self.frames
        pending.done.set()

    def want_resync(self) -> bool:
        """Note a gap; True when a resync task must be started. One runs at a time: it covers every gap
        whose frames came before its list's response, and lists once more only for a gap after that."""
        self.last_gap_at = self.frames
        if self._resync_running:
            return False
        self._resync_running = True
        return True


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
        self.url = url
        self._token = token
        self.handler = handler or NullHandler()
        self.config = config or GatewayConfig()
        self.backoff = backoff or Backoff(self.config.backoff_initial, self.config.backoff_cap, self.config.backoff_jitter)
        self.session: GatewaySession | None = None
        self.sessions_opened = 0
        self.attempts = 0
        self._boot_id: str | None = None
        self._last_notice: Shutdown | None = None
        self._changed = trio.Event()
        self._cancel = trio.CancelScope()

    def __repr__(self) -> str:  # never the token
        return f"GatewayClient(url={self.url!r}, instance={self.config.instance_id!r})"

    # ------------------------------------------------------------------ public

    async def request(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        session = self.session
        if session is None or session.closed:
            raise NotConnected(method)
        return await session.request(method, params, timeout=timeout)

    async def wait_session(self, newer_than: GatewaySession | None = None) -> GatewaySession:
        """The current session, waiting (without a clock) for the next hello-ok if there is none, or if
        the current one is ``newer_than`` (a caller that saw a session end waits for its successor)."""
        while self.session is None or self.session.closed or self.session is newer_than:
            await self._changed.wait()
        return self.session

    def stop(self) -> None:
        self._cancel.cancel()

    async def run(self, *, task_status: trio.TaskStatus[GatewayClient] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started(self)
        with self._cancel:
            while True:
                self.attempts += 1
                floor = 0.0
                try:
                    await self._session_once()
                except MissingScopes as exc:
                    log.error("gateway.refused url=%s error=%s", self.url, exc)
                    raise
                except Refused as exc:
                    if not exc.retryable:
                        log.error("gateway.refused url=%s error=%s", self.url, exc)
                        raise
                    log.warning("gateway.refused_retryable url=%s error=%s", self.url, exc)
                    floor = (exc.error.retry_after_ms or 0) / 1000
                except (OSError, HandshakeError, ConnectionClosed, trio.TooSlowError, trio.BrokenResourceError, ProtocolError, GatewayError) as exc:
                    log.warning("gateway.connect_failed url=%s error=%s", self.url, _describe(exc))
                except Exception:
                    # A bug anywhere in a session must cost that session, never owc's connection for good.
                    log.exception("gateway.session_failed url=%s (reconnecting)", self.url)
                delay = max(self.backoff.next_delay(), floor)
                log.info("gateway.reconnecting url=%s in=%.2f", self.url, delay)
                await trio.sleep(delay)

    # ------------------------------------------------------------------ one session

    def _ssl(self) -> ssl.SSLContext | None:
        if not self.url.startswith("wss://"):
            return None
        return self.config.ssl_context or ssl.create_default_context()  # verifies certificates and host names

    async def _session_once(self) -> None:
        cfg = self.config
        async with _open_websocket(self.url, self._ssl(), cfg.connect_timeout) as ws:
            try:
                with trio.fail_after(cfg.connect_timeout):
                    hello = await self._handshake(ws)
            except trio.TooSlowError:
                raise GatewayError(f"handshake not finished within {cfg.connect_timeout:g} s") from None
            await self._serve(ws, hello)

    async def _handshake(self, ws: WebSocketConnection) -> HelloOk:
        challenge = decode_frame(await ws.get_message())
        if not isinstance(challenge, EventFrame) or challenge.event != "connect.challenge":
            raise ProtocolError("the gateway did not open with connect.challenge")
        params = ConnectParams(token=self._token, client_version=__version__, user_agent=f"owc/{__version__}", instance_id=self.config.instance_id)
        req_id = str(uuid.uuid4())
        await ws.send_message(encode_frame(Request(id=req_id, method="connect", params=params.to_json())).decode())
        while True:  # events may not precede hello-ok, but tolerate them rather than fail the handshake
            frame = decode_frame(await ws.get_message())
            if isinstance(frame, Response) and frame.id == req_id:
                break
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
            raise _refusal(frame, code)
        hello = parse_hello_ok(frame.payload)
        if hello.auth_role is not None:
            missing = scopes_missing(hello)
            if missing:
                raise MissingScopes(missing)
        return hello

    async def _serve(self, ws: WebSocketConnection, hello: HelloOk) -> None:
        session: GatewaySession | None = None
        healthy = False
        try:
            async with trio.open_nursery() as nursery:
                session = GatewaySession(ws, hello, self.config, nursery)
                log.info("gateway.hello url=%s boot=%s conn=%s", self.url, hello.boot_id, session.id)
                nursery.start_soon(self._reader, session)
                try:
                    payload, position = await session.request_at("sessions.subscribe", dict(self.config.list_params))
                    listed = parse_subscribe(payload)
                except (GatewayError, ProtocolError) as exc:
                    log.warning("gateway.subscribe_failed url=%s error=%s", self.url, exc)
                    session.close(None, f"subscribe failed: {exc}")
                    return
                info = HelloInfo(
                    hello=hello,
                    first=self.sessions_opened == 0,
                    boot_changed=self._boot_id is not None and hello.boot_id != self._boot_id,
                    previous_boot_id=self._boot_id,
                    notice=self._last_notice,
                )
                self._boot_id, self._last_notice = hello.boot_id, None
                self.sessions_opened += 1
                self.session = session
                healthy = True
                self._wake()
                self.backoff.reset()  # a healthy hello: handshake done and the subscription answered
                await self._call(self.handler.on_hello(session, info), "on_hello")
                rows = listed.list.sessions if listed.list is not None else ()
                complete = listed.list is None or not listed.list.has_more
                resync = session.active.resync(rows, "hello", complete=complete, position=position)
                await self._call(self.handler.on_resync(session, resync), "on_resync")
                # The session lives until its reader ends it (a close, silence) or a cancel from outside.
        finally:
            if session is not None:
                if not session.closed:
                    session.close_reason = session.close_reason or "closed by owc"
                session._fail_pending()
                if self.session is session:
                    self.session = None
                    self._wake()
                if healthy:
                    self._last_notice = session.notice
                with trio.CancelScope(shield=True):
                    await self._closed(session)

    async def _closed(self, session: GatewaySession) -> None:
        notice = session.notice
        log.info(
            "gateway.closed url=%s code=%s reason=%s notice=%s",
            self.url, session.close_code, session.close_reason[:120], notice.reason if notice else None,
        )  # fmt: skip
        info = CloseInfo(session.close_code, session.close_reason, notice, session.boot_id)
        await self._call(self.handler.on_closed(info), "on_closed")

    async def _call(self, call: Awaitable[None], name: str) -> None:
        """Run a handler callback; its failure is logged and the connection goes on."""
        try:
            await call
        except Exception:
            log.exception("gateway.handler_failed url=%s callback=%s", self.url, name)

    async def _reader(self, session: GatewaySession) -> None:
        """Read frames until the socket closes or goes silent for ``missed_ticks`` tick intervals, then end
        the session (which cancels everything in its nursery)."""
        policy = session.hello.policy
        silence = self.config.missed_ticks * policy.tick_interval_ms / 1000
        ws = session.ws
        while True:
            with trio.move_on_after(silence) as liveness:
                try:
                    message = await ws.get_message()
                except ConnectionClosed as exc:
                    session.close(*_close_of(exc))
                    return
            if liveness.cancelled_caught:
                log.warning("gateway.dead_socket url=%s silent_for=%.0f", self.url, silence)
                session.close(None, f"no frame for {silence:g} s ({self.config.missed_ticks} missed ticks)")
                return
            self._on_message(session, message, policy.max_payload)

    def _on_message(self, session: GatewaySession, message: str | bytes, max_payload: int) -> None:
        session.frames += 1
        try:
            frame = decode_frame(message, max_payload=max_payload)
        except ProtocolError as exc:
            log.error("gateway.bad_frame url=%s error=%s", self.url, exc)
            return
        if isinstance(frame, Response):
            session._resolve(frame)
            return
        if not isinstance(frame, EventFrame):
            log.error("gateway.bad_frame url=%s error=a request frame from the gateway", self.url)
            return
        try:
            event = session.decoder.decode(frame)
        except ProtocolError as exc:
            # Not fed to the seq tracker: the event is lost to owc, so the next good one reports a gap and
            # the resync recovers what it said (and a bogus seq cannot blind gap detection).
            log.error("gateway.bad_event url=%s seq=%s error=%s", self.url, frame.seq, exc)
            return
        result = session.seq.feed(frame.seq)
        if result.is_gap:
            session.gaps += 1
            log.warning("gateway.seq_gap url=%s expected=%s received=%s missed=%s", self.url, result.expected, result.received, result.missed)
            if session.want_resync():
                session.nursery.start_soon(self._resync, session)
        if isinstance(event, (Tick, ConnectChallenge)):
            return
        if isinstance(event, Shutdown):
            session.notice = event
            log.info("gateway.shutdown_notice url=%s reason=%s restart_expected_ms=%s", self.url, event.reason, event.restart_expected_ms)
        session.active.observe(event, session.frames)
        try:
            self.handler.on_event(session, event)
        except Exception:  # a handler bug for one event must not kill the connection or other runs
            log.exception("gateway.handler_failed url=%s event=%s", self.url, frame.event)

    async def _resync(self, session: GatewaySession) -> None:
        """Re-read ``sessions.list`` after a gap, once per burst: gaps found meanwhile cause one more list."""
        try:
            while True:
                session.resyncs += 1
                try:
                    payload, position = await session.request_at("sessions.list", dict(self.config.list_params))
                    listed = parse_sessions_list(payload)
                except SessionClosed:
                    return  # the next session's subscribe-and-list resyncs
                except (GatewayError, ProtocolError) as exc:
                    # Events were lost and the list that would recover them failed: a new session's
                    # subscribe-and-list is the only way left to learn what happened.
                    log.warning("gateway.resync_failed url=%s error=%s", self.url, exc)
                    session.close(None, f"resync failed: {exc}")
                    return
                resync = session.active.resync(listed.sessions, "gap", complete=not listed.has_more, position=position)
                await self._call(self.handler.on_resync(session, resync), "on_resync")
                if session.last_gap_at <= position:
                    return
        finally:
            session._resync_running = False

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()


@asynccontextmanager
async def _open_websocket(url: str, ssl_context: ssl.SSLContext | None, timeout: float) -> AsyncIterator[WebSocketConnection]:
    """TCP (and TLS, verified, with the handshake done first so a bad certificate is reported as such
    rather than as a timeout), then the WebSocket handshake, all within ``timeout``."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise GatewayError(f"not a ws:// or wss:// url: {parts.scheme}://{parts.hostname}")
    port = parts.port or (443 if parts.scheme == "wss" else 80)
    resource = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    with trio.fail_after(timeout):
        stream: trio.SocketStream | trio.SSLStream[trio.SocketStream] = await _single(trio.open_tcp_stream(parts.hostname, port))
        try:
            if ssl_context is not None:
                stream = trio.SSLStream(stream, ssl_context, server_hostname=parts.hostname, https_compatible=True)
                await stream.do_handshake()
        except BaseException:
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            raise
    with _collapse_groups():
        async with trio.open_nursery() as nursery:  # trio-websocket's reader task lives here
            try:
                with trio.fail_after(timeout):
                    ws = await wrap_client_stream(nursery, stream, host, resource, max_message_size=DEFAULT_MAX_PAYLOAD)
            except BaseException:
                with trio.CancelScope(shield=True):
                    await trio.aclose_forcefully(stream)
                nursery.cancel_scope.cancel()
                raise
            try:
                yield ws
            finally:
                # Cancelled (owc is shutting down): trio-websocket's reader is cancelled with us and could
                # never read the close reply, so drop the TCP stream. Otherwise close politely, bounded.
                cancelled = trio.current_effective_deadline() == -math.inf
                with trio.CancelScope(shield=True):
                    if cancelled:
                        await trio.aclose_forcefully(stream)
                    else:
                        with trio.move_on_after(timeout):
                            await ws.aclose()
                nursery.cancel_scope.cancel()


class _collapse_groups:  # noqa: N801 - used like a function: ``with _collapse_groups(), ...``
    """Re-raise a nursery's exception group of exactly one as that exception, so callers can catch
    ``Refused``, ``OSError`` ... as themselves (the body of a nursery is one task: its error is alone)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, typ: Any, exc: BaseException | None, tb: Any) -> bool:
        if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            raise exc.exceptions[0]
        return False


async def _single(call: Awaitable[Any]) -> Any:
    """Await ``call``; an exception group of one (``open_tcp_stream`` tries each address) is unwrapped so
    the log says what failed."""
    try:
        return await call
    except BaseExceptionGroup as group:
        leaves = group.exceptions
        if len(leaves) == 1 and isinstance(leaves[0], Exception):
            raise leaves[0] from None
        raise OSError(str(group)) from group


def _refusal(frame: Response, close_code: int | None) -> Refused:
    if frame.error is None:
        raise ProtocolError("connect refused without an error")
    refused = Refused(frame.error, close_code)
    if frame.error.detail_code in PERMANENT_DETAIL_CODES or frame.error.code in PERMANENT_CODES:
        refused.retryable = False
    elif frame.error.code == "INVALID_REQUEST":
        refused.retryable = False  # invalid connect params / bad handshake: owc's own bug, not transient
    return refused


def _close_of(exc: ConnectionClosed) -> tuple[int | None, str]:
    """The close code and reason; trio-websocket gives no reason when owc itself dropped the stream."""
    reason = exc.reason
    return (reason.code, reason.reason or "") if reason is not None else (None, "closed locally")


def _describe(exc: BaseException) -> str:
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
    """Run a ``GatewayClient`` for the block's lifetime; leaving the block closes it and every task it owns."""
    with _collapse_groups():
        async with trio.open_nursery() as nursery:
            client = GatewayClient(url, token, handler, config, backoff=backoff)
            await nursery.start(client.run)
            try:
                yield client
            finally:
                nursery.cancel_scope.cancel()
