"""The Trio pump around owc's client WebSocket machine (``owc.protocol.websocket``): owc's side of the Gateway link.

No background task: the connection's reader is the only receiver, and it reads the stream only when every message
already received has been taken (64 KiB a read, more when the frames are large: room for 16 of them, or what
completes a large frame begun), so one wake-up delivers a whole batch of messages (owc dispatches them all before it
reads again) and what is buffered stays bounded in bytes (one read, plus the one message it completed). Sends
(requests, and the pongs and close answers the protocol owes) go through one lock.

Errors are trio-websocket's own types, so everything above (the reconnect loop, ``owc doctor``) reads them as
before: ``ConnectionClosed`` (its ``CloseReason`` code and reason; 1006 when the stream ended without a close
frame), ``ConnectionRejected`` (an HTTP status other than 101, with headers and the start of the body: owc's
``NotAWebSocket``, whose text is one line) and ``HandshakeError``
(an answer that is not a WebSocket upgrade). trio-websocket stays what the simulator serves with.
"""

from __future__ import annotations

import logging

import trio
from trio_websocket import CloseReason, ConnectionClosed, HandshakeError

from owc.gateway.errors import NotAWebSocket
from owc.protocol.websocket import (
    ABNORMAL_CLOSURE,
    NORMAL_CLOSURE,
    ClientWebSocket,
    HandshakeFailed,
    HandshakeRejected,
    State,
)

log = logging.getLogger("owc.gateway")

#: How much one read asks for at least (trio-websocket's 4 KiB made a frame cost several reads and wake-ups).
RECEIVE_SIZE = 64 * 1024
#: A read asks for room for this many messages of the last batch's largest size (issue 32, goal 2), up to
#: ``MAX_RECEIVE_SIZE``: what is buffered stays one read plus the message it completed, at most 4 MiB + 1 message.
FRAMES_PER_READ = 16
MAX_RECEIVE_SIZE = 4 * 1024 * 1024

Stream = trio.SocketStream | trio.SSLStream[trio.SocketStream]


class WebSocket:
    """One open client WebSocket. ``stream`` is the TCP (or TLS) stream under it."""

    def __init__(self, stream: Stream, protocol: ClientWebSocket) -> None:
        self.stream = stream
        self.protocol = protocol
        self._send_lock = trio.StrictFIFOLock()
        #: Messages ``get_message`` took in a batch and has not returned yet (newest first).
        self._held: list[bytes] = []
        #: What the next read asks for (``get_messages``).
        self._room = RECEIVE_SIZE

    @property
    def closed(self) -> CloseReason | None:
        closed = self.protocol.closed
        return CloseReason(closed.code, closed.reason) if closed is not None else None

    @property
    def subprotocol(self) -> str | None:
        return self.protocol.subprotocol

    async def get_messages(self) -> list[bytes]:
        """Every message received and not yet taken, at least one (reading the stream only when there is none):
        payloads as bytes, text or binary. Raises ``ConnectionClosed`` once the buffer is empty and the
        connection has ended."""
        if self._held:
            held, self._held = self._held[::-1], []
            return held
        protocol = self.protocol
        while not protocol.messages:
            if protocol.closed is not None:
                await self._finish()
                raise ConnectionClosed(CloseReason(protocol.closed.code, protocol.closed.reason))
            try:
                # A large frame begun: what completes it, in one read if the socket holds it (bounded by the
                # message size limit the header was checked against). Each read is a scheduler turn, so a frame
                # read 64 KiB at a time let every writer run once per 64 KiB of one event.
                # And a read asks for room for ``FRAMES_PER_READ`` messages of the size the last batch had: as a
                # long reply's frames grow, a read still brings several, so what each read (and each writer
                # wake-up it causes) costs is shared by as many events at the end of a run as at its start.
                data = await self.stream.receive_some(max(self._room, protocol.wanted))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            protocol.receive_data(data)
            owed = protocol.data_to_send()
            if owed:
                await self._send(owed, final=protocol.closed is not None)
        batch = protocol.take_messages()
        self._room = min(max(RECEIVE_SIZE, FRAMES_PER_READ * max(map(len, batch))), MAX_RECEIVE_SIZE)
        return batch

    async def get_message(self) -> bytes:
        """One message (the handshake's way: it wants the next frame, not a batch)."""
        if not self._held:
            self._held = await self.get_messages()
            self._held.reverse()
        return self._held.pop()

    async def send_message(self, data: str | bytes) -> None:
        """Send one text message. Raises ``ConnectionClosed`` if the connection has ended."""
        protocol = self.protocol
        if protocol.state is not State.OPEN:
            raise ConnectionClosed(self.closed or CloseReason(ABNORMAL_CLOSURE, None))
        payload = data.encode("utf-8") if isinstance(data, str) else data
        await self._send(protocol.send_text(payload))

    async def _send(self, data: bytes, *, final: bool = False) -> None:
        async with self._send_lock:
            try:
                await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                if not final:
                    self.protocol.receive_data(b"")  # the stream is gone: 1006, as trio-websocket reports it
                    raise ConnectionClosed(self.closed or CloseReason(ABNORMAL_CLOSURE, None)) from None

    async def _finish(self) -> None:
        """The connection has ended: close the stream (a client may; the server has answered or gone)."""
        await trio.aclose_forcefully(self.stream)

    async def aclose(self, code: int = NORMAL_CLOSURE, reason: str = "") -> None:
        """The closing handshake: send owc's close frame, read until the server's answer (or the end of the
        stream), close the stream. Bound it from outside (a server that never answers)."""
        protocol = self.protocol
        try:
            if protocol.state is State.OPEN:
                await self._send(protocol.close(code, reason), final=True)
            while protocol.closed is None:
                try:
                    data = await self.stream.receive_some(RECEIVE_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                protocol.receive_data(data)
                protocol.take_messages()  # what came after owc's close is not read by anyone
        finally:
            await trio.aclose_forcefully(self.stream)


async def connect_websocket(
    stream: Stream,
    host: str,
    resource: str,
    *,
    max_message_size: int,
    extra_headers: tuple[tuple[bytes, bytes], ...] = (),
    subprotocols: tuple[str, ...] = (),
) -> WebSocket:
    """The opening handshake over an open stream (TLS already done by the caller). The caller bounds it and
    closes the stream if it raises."""
    protocol = ClientWebSocket(
        host, resource, extra_headers=extra_headers, subprotocols=subprotocols, max_message_size=max_message_size
    )
    try:
        await stream.send_all(protocol.handshake_request())
        while protocol.state is State.CONNECTING:
            try:
                data = await stream.receive_some(RECEIVE_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            try:
                protocol.receive_data(data)
            except HandshakeRejected:
                raise
            except HandshakeFailed:
                if not data:
                    # Closed before answering (a TLS port spoken to in clear, a proxy): as a dropped stream.
                    raise ConnectionClosed(CloseReason(ABNORMAL_CLOSURE, None)) from None
                raise
    except HandshakeRejected as exc:
        rejection = exc.rejection
        raise NotAWebSocket(rejection.status_code, rejection.headers, rejection.body, rejection.reason) from None
    except HandshakeFailed as exc:
        raise HandshakeError(str(exc)) from None
    log.debug("gateway.websocket_open host=%s subprotocol=%s", host, protocol.subprotocol)
    ws = WebSocket(stream, protocol)
    owed = protocol.data_to_send()
    if owed:  # frames that came with the 101 (a ping) may owe an answer before anyone reads again
        await ws._send(owed, final=protocol.closed is not None)
    return ws
