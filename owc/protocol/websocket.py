"""owc's client side of a WebSocket (RFC 6455), sans I/O: bytes in, messages and bytes to send out. No Trio.

Why not trio-websocket for owc's own connection (issue 16): it reads 4 KiB at a time, hands messages over through a
one-slot channel (a task switch per frame) and validates and decodes every text frame into a ``str`` that owc then
parses again; measured, its client path and wsproto's per-frame events cost owc's reader about half its time. This
machine does only what owc's connection needs, in as few Python steps per frame as it can:

* the opening handshake through h11 and wsproto's own helpers (nonce, accept token): ``Host``, ``Origin`` and any
  extra headers; a 101 is checked as wsproto checks it (``Connection: Upgrade``, ``Upgrade: websocket``, the accept
  token, no subprotocol or extension owc did not offer); any other status is a ``HandshakeRejected`` with its
  status, reason, headers and the start of its body (a 503 while the Gateway starts, a 4xx from a proxy, a web
  page where the Gateway URL points at something else); ``clean_reason`` makes the reason fit for a log line;
* frames parsed in bulk from whatever a read returned (many per read); a message is its payload as ``bytes``,
  text or binary alike: owc's frame decoder reads bytes (orjson), and **invalid UTF-8 in a text frame is not a
  protocol error here**: the decoder repairs it (decoded with replacement) and logs it, as it does every hostile
  frame, instead of the connection closing with 1007 as trio-websocket's does;
* a message over ``max_message_size`` closes with 1009, known from its frame header (never buffered first), and so
  does a control frame over 125 bytes or fragmented, or an unknown opcode, with 1002;
* pings answered, pongs ignored, a close answered and its code and reason kept; a protocol violation (a masked or
  reserved-bit frame, a bad opcode, an interleaved fragment) closes with 1002, as wsproto would.

Memory: ``receive_data`` keeps a partial frame as a list of chunks (views: the first may keep the whole read it
ended, up to the pump's largest read, until the frame is complete; joined once, so a large message costs linear
time) and complete messages in ``messages`` until taken, with ``buffered`` their size in bytes. The Trio pump
(``owc.gateway.websocket``) reads only when ``messages`` is empty, so what is buffered is bounded in bytes by one
read plus the one message that read completed, whatever the rate or count of frames.
"""

from __future__ import annotations

import enum
import os
import struct

import attrs
import h11
from wsproto.utilities import generate_accept_token, generate_nonce, split_comma_header

#: Close codes (RFC 6455 section 7.4.1).
NORMAL_CLOSURE = 1000
PROTOCOL_ERROR = 1002
NO_STATUS_RCVD = 1005
ABNORMAL_CLOSURE = 1006
MESSAGE_TOO_BIG = 1009

_OP_CONT, _OP_TEXT, _OP_BINARY, _OP_CLOSE, _OP_PING, _OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_KNOWN_OPCODES = frozenset({_OP_CONT, _OP_TEXT, _OP_BINARY, _OP_CLOSE, _OP_PING, _OP_PONG})
_U16 = struct.Struct("!H")
_U64 = struct.Struct("!Q")


class HandshakeFailed(Exception):
    """The server's answer to the opening handshake is not a valid WebSocket upgrade."""


#: What a rejection keeps of its body: its start only (a web page, a proxy's error page), so an endless or huge
#: body costs neither memory nor a wait; the handshake is rejected once this much has come.
MAX_REJECTION_BODY = 4096
#: The longest status reason a line quotes.
_MAX_REASON_CHARS = 40


@attrs.frozen
class Rejection:
    """The server answered the opening handshake with a status other than 101."""

    status_code: int
    headers: tuple[tuple[bytes, bytes], ...]
    #: At most ``MAX_REJECTION_BODY`` bytes of the body: for a program to look at, never for a line.
    body: bytes
    #: The status line's reason as sent (``b"Not Found"``); ``rejection_text`` cleans it before showing it.
    reason: bytes = b""


def clean_reason(reason: bytes) -> str:
    """A status reason fit for one log line: printable ASCII only, at most 40 characters ("" for nothing)."""
    text = "".join(c for c in reason.decode("ascii", "replace") if " " <= c <= "~")
    text = " ".join(text.split())
    return text if len(text) <= _MAX_REASON_CHARS else text[: _MAX_REASON_CHARS - 1] + "~"


class HandshakeRejected(HandshakeFailed):
    def __init__(self, rejection: Rejection) -> None:
        super().__init__(f"the server answered the WebSocket handshake with HTTP {rejection.status_code}")
        self.rejection = rejection


class State(enum.Enum):
    CONNECTING = "connecting"  # the upgrade request is sent, its answer not complete
    OPEN = "open"
    CLOSING = "closing"  # owc sent its close frame, the server's not yet received
    CLOSED = "closed"


@attrs.frozen
class Closed:
    """How the connection ended: the close frame's code and reason (the server's, or owc's own for a protocol
    error or a message too big: what the other side was told), or 1006 when the stream ended without one."""

    code: int
    reason: str | None


def mask(key: bytes, payload: bytes) -> bytes:
    """XOR ``payload`` with the 4-byte ``key`` repeated (RFC 6455 section 5.3), as one big-integer operation."""
    size = len(payload)
    if not size:
        return b""
    keys = (key * (size // 4 + 1))[:size]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(keys, "big")).to_bytes(size, "big")


def client_frame(opcode: int, payload: bytes) -> bytes:
    """One final frame from the client: every client frame is masked (a fresh random key each)."""
    size = len(payload)
    if size < 126:
        header = bytes((0x80 | opcode, 0x80 | size))
    elif size < 1 << 16:
        header = bytes((0x80 | opcode, 0x80 | 126)) + _U16.pack(size)
    else:
        header = bytes((0x80 | opcode, 0x80 | 127)) + _U64.pack(size)
    key = os.urandom(4)
    return header + key + mask(key, payload)


def close_payload(code: int | None, reason: str = "") -> bytes:
    if code is None or code == NO_STATUS_RCVD:
        return b""
    return _U16.pack(code) + reason.encode("utf-8")[:123]


class ClientWebSocket:
    """One client WebSocket's state. Feed it what the stream reads (``receive_data``; ``b""`` at end of stream),
    take ``messages`` (``take_messages``) and send what ``data_to_send`` returns; ``closed`` says how it ended."""

    def __init__(
        self,
        host: str,
        resource: str,
        *,
        extra_headers: tuple[tuple[bytes, bytes], ...] = (),
        subprotocols: tuple[str, ...] = (),
        max_message_size: int = 1 << 20,
    ) -> None:
        self.host = host
        self.resource = resource
        self.extra_headers = extra_headers
        self.subprotocols = subprotocols
        self.max_message_size = max_message_size
        self.state = State.CONNECTING
        #: The subprotocol the server chose (one owc offered), once open.
        self.subprotocol: str | None = None
        #: The upgrade's response headers, once open.
        self.response_headers: tuple[tuple[bytes, bytes], ...] = ()
        self.closed: Closed | None = None
        #: Complete messages not yet taken (payload bytes), and their total size.
        self.messages: list[bytes] = []
        self.buffered = 0
        self._h11: h11.Connection | None = h11.Connection(h11.CLIENT)
        self._nonce = generate_nonce()
        self._rejection: tuple[int, tuple[tuple[bytes, bytes], ...], bytes] | None = None
        self._reject_body: list[bytes] = []
        self._reject_size = 0
        self._outbox: list[bytes] = []
        # A frame not complete yet: its chunks, their size, and how many bytes complete it (or its header).
        self._chunks: list[bytes | memoryview] = []  # the start of a frame begun, and what came after it
        self._chunked = 0
        self._need = 0
        self._header = 0  # the begun frame's header size when it is a whole message (``_frames``' common case)
        # A fragmented message: its parts and size so far (None: no fragmented message open).
        self._fragments: list[bytes] | None = None
        self._fragmented = 0

    # ------------------------------------------------------------------ handshake

    def handshake_request(self) -> bytes:
        """The HTTP upgrade request to send first."""
        assert self._h11 is not None
        headers = [
            (b"Host", self.host.encode("idna")),
            (b"Upgrade", b"websocket"),
            (b"Connection", b"Upgrade"),
            (b"Sec-WebSocket-Key", self._nonce),
            (b"Sec-WebSocket-Version", b"13"),
        ]
        if self.subprotocols:
            headers.append((b"Sec-WebSocket-Protocol", ", ".join(self.subprotocols).encode("ascii")))
        request = h11.Request(
            method=b"GET", target=self.resource.encode("ascii"), headers=[*headers, *self.extra_headers]
        )
        return self._h11.send(request) or b""

    def _receive_handshake(self, data: bytes) -> None:
        conn = self._h11
        assert conn is not None
        try:
            conn.receive_data(data)
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    if not data:
                        if self._rejection is not None:  # a body without a length, ended by the close
                            self._reject()
                        raise HandshakeFailed("the server closed the connection during the WebSocket handshake")
                    return
                if isinstance(event, h11.InformationalResponse):
                    if event.status_code == 101:
                        self._accept(event)
                        return
                    continue  # a 1xx other than 101: its final answer follows
                if isinstance(event, h11.Response):
                    self._rejection = (event.status_code, tuple((k, v) for k, v in event.headers), event.reason)
                elif isinstance(event, h11.Data):
                    room = MAX_REJECTION_BODY - self._reject_size
                    self._reject_body.append(bytes(event.data[:room]))
                    self._reject_size += min(room, len(event.data))
                    if self._reject_size >= MAX_REJECTION_BODY:
                        self._reject()  # enough of a page: the rest is neither read nor kept
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)) and self._rejection is not None:
                    self._reject()
                elif event is h11.PAUSED:
                    raise HandshakeFailed("the server's handshake answer could not be read")
        except h11.RemoteProtocolError as exc:
            if not data:
                raise HandshakeFailed("the server closed the connection during the WebSocket handshake") from None
            # h11's own words without what it quotes of the answer (a page's first line, any bytes at all).
            what = str(exc).split(":", 1)[0][:60]
            raise HandshakeFailed(f"the server's handshake answer is not HTTP ({what})") from None

    def _reject(self) -> None:
        assert self._rejection is not None
        status, headers, reason = self._rejection
        self.state = State.CLOSED
        self.closed = Closed(ABNORMAL_CLOSURE, "Rejected WebSocket handshake")
        raise HandshakeRejected(Rejection(status, headers, b"".join(self._reject_body), reason))

    def _accept(self, event: h11.InformationalResponse) -> None:
        assert self._h11 is not None
        connection: list[str] = []
        upgrade = b""
        accept = None
        subprotocol = None
        extensions: list[str] = []
        for name, value in event.headers:
            name = name.lower()
            if name == b"connection":
                connection = split_comma_header(value)
            elif name == b"upgrade":
                upgrade = value
            elif name == b"sec-websocket-accept":
                accept = value
            elif name == b"sec-websocket-protocol":
                subprotocol = value.decode("ascii", "replace")
            elif name == b"sec-websocket-extensions":
                extensions += [e for e in split_comma_header(value) if e]
        if not any(token.lower() == "upgrade" for token in connection):
            raise HandshakeFailed("Missing header, 'Connection: Upgrade'")
        if upgrade.lower() != b"websocket":
            raise HandshakeFailed("Missing header, 'Upgrade: websocket'")
        if accept != generate_accept_token(self._nonce):
            raise HandshakeFailed("Bad accept token")
        if subprotocol is not None and subprotocol not in self.subprotocols:
            raise HandshakeFailed(f"unrecognized subprotocol {subprotocol}")
        if extensions:
            raise HandshakeFailed(f"unrecognized extension {extensions[0]}")  # owc offers none
        self.subprotocol = subprotocol
        self.response_headers = tuple((k, v) for k, v in event.headers)
        trailing, _ = self._h11.trailing_data
        self._h11 = None
        self.state = State.OPEN
        if trailing:  # frames that came in the same read as the 101
            self._frames(bytes(trailing))

    # ------------------------------------------------------------------ receiving

    def receive_data(self, data: bytes) -> None:
        """Bytes the stream read (``b""``: the stream ended). Raises ``HandshakeFailed`` / ``HandshakeRejected``
        while connecting; afterwards never raises: a violation closes (``closed``, a close frame to send)."""
        if self.state is State.CONNECTING:
            self._receive_handshake(data)
            return
        if self.closed is not None:
            return
        if not data:
            self._chunks, self._chunked, self._header = [], 0, 0
            self.closed = Closed(ABNORMAL_CLOSURE, None)
            self.state = State.CLOSED
            return
        if type(data) is not bytes:
            data = bytes(data)  # the chunks keep views of it: it must not change under them
        pos = 0
        while self._chunks:
            # A frame begun in an earlier read: only what completes it is joined (one copy of it; a whole
            # message's header is left out of the join, so the join is the message). The rest of this read is
            # parsed where it lies: a read of many frames is not copied again for the one that straddled it.
            short = self._need - self._chunked
            if len(data) - pos < short:
                self._chunks.append(memoryview(data)[pos:] if pos else data)
                self._chunked += len(data) - pos
                return
            chunks, header = self._chunks, self._header
            chunks.append(memoryview(data)[pos : pos + short])
            pos += short
            self._chunks, self._chunked, self._header = [], 0, 0
            if header:
                chunks[0] = memoryview(chunks[0])[header:]
                message = b"".join(chunks)
                self.messages.append(message)
                self.buffered += len(message)
            else:
                self._frames(b"".join(chunks))  # a header completed (or a frame of another kind)
                if self.closed is not None:
                    return
        self._frames(data, pos)

    def _frames(self, buf: bytes, pos: int = 0) -> None:
        """Parse every complete frame in ``buf`` from ``pos``; keep the rest (a view, no copy) as the start of the
        next. The loop is the reader's innermost (issue 32): what it reads of ``self`` is read once, and a whole text
        or binary message (nearly every frame) costs a header test, a slice and an append."""
        self._header = 0  # only a whole message's header, found below, is left out of a later join
        end = len(buf)
        messages = self.messages
        limit = self.max_message_size
        buffered = self.buffered
        while True:
            if end - pos < 2:
                self._need = 2
                break
            b0 = buf[pos]
            b1 = buf[pos + 1]
            size = b1 & 0x7F
            start = pos + 2
            if size == 126:
                if end - pos < 4:
                    self._need = 4
                    break
                size = (buf[start] << 8) | buf[start + 1]
                start += 2
            elif size == 127:
                if end - pos < 10:
                    self._need = 10
                    break
                (size,) = _U64.unpack_from(buf, start)
                start += 8
            stop = start + size
            if (b0 == 0x81 or b0 == 0x82) and b1 < 0x80 and size <= limit and self._fragments is None:
                # The common case: a whole text or binary message in one unmasked frame, within the limit.
                if stop > end:
                    self._need = stop - pos
                    self._header = start - pos
                    break
                messages.append(buf[start:stop])
                buffered += size
                pos = stop
                continue
            if b1 & 0x80:
                self._fail(PROTOCOL_ERROR, "masked frame from the server")
                break
            if b0 & 0x70:
                self._fail(PROTOCOL_ERROR, "reserved bits set (no extension was negotiated)")
                break
            opcode = b0 & 0x0F
            # Refused from the header alone, like a message too big: an unknown opcode has no meaning, and a control
            # frame is at most 125 bytes and never fragmented. Waiting for their payload first would have the pump
            # ask for whatever length they announce (a ping claiming 2**62 bytes).
            if opcode not in _KNOWN_OPCODES:
                self._fail(PROTOCOL_ERROR, f"unknown opcode {opcode}")
                break
            if opcode >= _OP_CLOSE and (not b0 & 0x80 or size > 125):
                self._fail(PROTOCOL_ERROR, "a fragmented or oversized control frame")
                break
            if opcode < _OP_CLOSE and size + self._fragmented > limit:
                self._fail(MESSAGE_TOO_BIG, "Exceeded maximum message size")
                break
            if stop > end:
                self._need = stop - pos
                break
            if b0 == 0x81 or b0 == 0x82:  # a whole message inside a fragmented one
                self._fail(PROTOCOL_ERROR, "a new message inside a fragmented one")
                break
            self.buffered = buffered
            self._other_frame(b0 & 0x80, opcode, buf[start:stop])
            buffered = self.buffered
            pos = stop
            if self.closed is not None:
                break
        self.buffered = buffered
        if pos < end and self.closed is None:
            self._chunks = [memoryview(buf)[pos:] if pos else buf]
            self._chunked = end - pos

    def _other_frame(self, fin: int, opcode: int, payload: bytes) -> None:
        """A frame other than a whole message: its header was checked already (a known opcode; a control frame
        whole and at most 125 bytes; within the size limit)."""
        if opcode >= _OP_CLOSE:
            if opcode == _OP_PING:
                self._outbox.append(client_frame(_OP_PONG, payload))
            elif opcode == _OP_CLOSE:
                self._remote_close(payload)
            return  # a pong: nothing owed
        if opcode != _OP_CONT:  # text or binary, the first fragment of a message
            if self._fragments is not None:
                self._fail(PROTOCOL_ERROR, "a new message inside a fragmented one")
                return
            self._fragments = [payload]
            self._fragmented = len(payload)
            return
        if self._fragments is None:
            self._fail(PROTOCOL_ERROR, "a continuation frame outside a message")
            return
        self._fragments.append(payload)
        self._fragmented += len(payload)
        if fin:
            message = b"".join(self._fragments)
            self._fragments, self._fragmented = None, 0
            self.messages.append(message)
            self.buffered += len(message)

    def _remote_close(self, payload: bytes) -> None:
        if not payload:
            code, reason = NO_STATUS_RCVD, ""
        elif len(payload) == 1:
            self._fail(PROTOCOL_ERROR, "a close frame with a one-byte payload")
            return
        else:
            (code,) = _U16.unpack_from(payload)
            reason = payload[2:].decode("utf-8", "replace")
        if self.state is State.OPEN:  # answer it (after owc's own close, the server's is the answer)
            self._outbox.append(client_frame(_OP_CLOSE, close_payload(code, reason)))
        self.closed = Closed(code, reason)
        self.state = State.CLOSED

    def _fail(self, code: int, reason: str) -> None:
        """A violation by the server: tell it why and stop reading (what trio-websocket and wsproto do)."""
        if self.state is State.OPEN:
            self._outbox.append(client_frame(_OP_CLOSE, close_payload(code, reason)))
        self._chunks, self._chunked, self._header, self._fragments = [], 0, 0, None
        self.closed = Closed(code, reason)
        self.state = State.CLOSED

    @property
    def wanted(self) -> int:
        """How many more bytes complete the frame begun, or its header while that is not read whole (0: none
        begun): the pump asks for them in one read, so a large frame costs one or two reads, not one per 64 KiB.
        Only a frame its header allowed is waited for (a message within the size limit, a control frame of at
        most 125 bytes)."""
        return self._need - self._chunked if self._chunks else 0

    def take_messages(self) -> list[bytes]:
        """Every complete message received so far, oldest first; the buffer is empty afterwards."""
        messages = self.messages
        self.messages = []
        self.buffered = 0
        return messages

    # ------------------------------------------------------------------ sending

    def data_to_send(self) -> bytes:
        """What the protocol itself must send (pongs, a close's answer): send it before reading again."""
        if not self._outbox:
            return b""
        data = b"".join(self._outbox)
        self._outbox.clear()
        return data

    def send_text(self, payload: bytes) -> bytes:
        """One text message (``payload``: UTF-8) as a single frame."""
        return client_frame(_OP_TEXT, payload)

    def close(self, code: int = NORMAL_CLOSURE, reason: str = "") -> bytes:
        """owc's close frame (once; afterwards ``b""``); the server's close frame then completes ``closed``."""
        if self.state is not State.OPEN:
            return b""
        self.state = State.CLOSING
        return client_frame(_OP_CLOSE, close_payload(code, reason))
