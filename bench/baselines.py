"""The baselines issue 32 measures owc's reader against, on the replay server's identical bytes.

(n) **A naive raw-socket loop.** What a user who wants speed and nothing else writes: open a TCP socket, send the
HTTP upgrade, then cut the byte stream into WebSocket frames by hand (RFC 6455 section 5.2: unmasked server frames,
7/16/64-bit lengths, continuation frames joined, ping answered, close ends the read) and ``orjson.loads`` every
message. No library, no queue, no per-message object beyond the parse. It is the floor every WebSocket client in
Python pays (a recv, a header cut, a parse), so a reader at 1.0x of it has no overhead left but its own decisions.
Two ways to drive the socket are measured and the faster is kept: Trio's socket (``await sock.recv``, what a Trio
program would do) and a plain blocking socket in a worker thread (no event loop at all).

(w) **asyncio** ``websockets``. The most used Python WebSocket client, its modern API
(``websockets.asyncio.client.connect``): compression off, ``max_size`` unlimited, ``recv(decode=False)`` (bytes: orjson
checks the UTF-8 itself, so decoding to ``str`` first would be paid twice), ``orjson.loads`` on every message. Run on
its own event loop in a worker thread (the bench's Trio loop only waits), on asyncio's default loop or uvloop, the
faster of a sweep.

Both speak the replay server's Gateway handshake (challenge, ``connect``, hello-ok, ``sessions.subscribe`` and its
reply) exactly as the trio-websocket loops of ``throughput.py`` do, and time from before the TCP connect to the n-th
event message, so every reader pays the same handshake. Nothing here is owc's: a baseline must not share its code.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import orjson
import trio

#: WebSocket opcodes (RFC 6455 section 5.2).
CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
#: The Gateway requests every reader sends after the challenge, in order (the replay server answers both).
CONNECT = orjson.dumps({"type": "req", "id": "c", "method": "connect", "params": {}})
SUBSCRIBE = orjson.dumps({"type": "req", "id": "s", "method": "sessions.subscribe", "params": {"limit": 1000}})


class ProtocolError(Exception):
    """The server sent something a client must refuse (a masked frame, a bad upgrade)."""


def _host_port_path(url: str) -> tuple[str, int, str]:
    rest = url.removeprefix("ws://")
    hostport, _, path = rest.partition("/")
    host, _, port = hostport.partition(":")
    return host, int(port or 80), "/" + path


def upgrade_request(url: str) -> bytes:
    """The client's opening handshake (RFC 6455 section 4.1). The accept key is not checked: the server is ours."""
    host, port, path = _host_port_path(url)
    key = base64.b64encode(os.urandom(16)).decode()
    return (
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    ).encode()


def client_frame(payload: bytes, opcode: int = TEXT) -> bytes:
    """One masked client-to-server frame (a client must mask, section 5.3; the server refuses unmasked ones)."""
    n = len(payload)
    if n < 126:
        header = bytes((0x80 | opcode, 0x80 | n))
    elif n < 65536:
        header = bytes((0x80 | opcode, 0x80 | 126)) + n.to_bytes(2, "big")
    else:
        header = bytes((0x80 | opcode, 0x80 | 127)) + n.to_bytes(8, "big")
    mask = os.urandom(4)
    stream = (mask * (n // 4 + 1))[:n]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(stream, "big")).to_bytes(n, "big")
    return header + mask + masked


def split_upgrade(data: bytes) -> tuple[bytes, bytes] | None:
    """(response head, bytes after it) once the whole HTTP response head is in ``data``; None before."""
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        return None
    if not head.startswith(b"HTTP/1.1 101"):
        raise ProtocolError(f"upgrade refused: {head[:80]!r}")
    return head, rest


class FrameReader:
    """Cuts a server's byte stream into whole messages. Sans-IO: ``feed`` the bytes of each recv and iterate what
    it yields, (opcode, payload) per complete message (continuation frames joined). A payload is a memoryview into
    an immutable ``bytes`` (no copy for an unfragmented frame; orjson reads it as is), valid until the next ``feed``.

    Bytes that do not yet make a whole frame wait in a list and are joined once, when enough have come, so a large
    frame arriving over many recvs is copied once, not once per recv."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._have = 0
        self._need = 2  # bytes (from the start of the pending frame) before parsing can move
        self._fragments: list[bytes] = []
        self._fragment_opcode = 0

    def feed(self, data: bytes) -> Iterator[tuple[int, memoryview | bytes]]:
        self._chunks.append(data)
        self._have += len(data)
        if self._have < self._need:
            return
        buf = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        view = memoryview(buf)
        end, pos, need = len(buf), 0, 2
        while True:
            if end - pos < 2:
                need = 2
                break
            first, second = buf[pos], buf[pos + 1]
            if second & 0x80:
                raise ProtocolError("a masked frame from the server")
            length, head = second & 0x7F, 2
            if length == 126:
                if end - pos < 4:
                    need = 4
                    break
                length, head = int.from_bytes(buf[pos + 2 : pos + 4], "big"), 4
            elif length == 127:
                if end - pos < 10:
                    need = 10
                    break
                length, head = int.from_bytes(buf[pos + 2 : pos + 10], "big"), 10
            stop = pos + head + length
            if stop > end:
                need = stop - pos
                break
            opcode = first & 0x0F
            payload = view[pos + head : stop]
            pos = stop
            if first & 0x80:  # FIN
                if opcode == CONTINUATION:
                    self._fragments.append(bytes(payload))
                    yield self._fragment_opcode, b"".join(self._fragments)
                    self._fragments = []
                else:
                    yield opcode, payload  # a whole message, or a control frame between fragments
            elif opcode == CONTINUATION:
                self._fragments.append(bytes(payload))
            else:
                self._fragment_opcode, self._fragments = opcode, [bytes(payload)]
        rest = buf[pos:]
        self._chunks = [rest] if rest else []
        self._have, self._need = len(rest), need


class _Handshake:
    """The Gateway handshake as a tiny state machine over decoded messages: what to send after each of the first
    three messages (challenge -> connect, hello-ok -> subscribe, the subscribe's reply -> start counting)."""

    def __init__(self) -> None:
        self.seen = 0

    def on_message(self, message: Any) -> bytes | None:
        self.seen += 1
        if self.seen == 1:
            return client_frame(CONNECT)
        if self.seen == 2:
            return client_frame(SUBSCRIBE)
        return None

    @property
    def done(self) -> bool:
        return self.seen >= 3


def naive_blocking(url: str, n: int, recv_size: int = 262144, stall: float = 60.0) -> dict[str, Any]:
    """(n) on a plain blocking socket (run it in a worker thread): connect, upgrade, handshake, then ``n`` event
    messages, each ``orjson.loads``-ed. Returns events/s from before the connect to the n-th message."""
    host, port, _ = _host_port_path(url)
    start = time.perf_counter()
    count = 0
    try:
        with socket.create_connection((host, port), timeout=stall) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(upgrade_request(url))
            data = b""
            while (split := split_upgrade(data)) is None:
                chunk = sock.recv(4096)
                if not chunk:
                    raise ProtocolError("closed during the upgrade")
                data += chunk
            reader, shake = FrameReader(), _Handshake()
            data = split[1]
            while True:
                for opcode, payload in reader.feed(data):
                    if opcode == TEXT or opcode == BINARY:
                        message = orjson.loads(payload)
                        if shake.done:
                            count += 1
                            if count == n:
                                elapsed = time.perf_counter() - start
                                return {"rate": n / elapsed, "seconds": elapsed}
                        elif (reply := shake.on_message(message)) is not None:
                            sock.sendall(reply)
                    elif opcode == PING:
                        sock.sendall(client_frame(bytes(payload), PONG))
                    elif opcode == CLOSE:
                        raise ProtocolError("the server closed")
                data = sock.recv(recv_size)
                if not data:
                    raise ProtocolError("the server closed")
    except (OSError, ProtocolError) as exc:
        return {"rate": float("nan"), "error": f"(n) thread: {type(exc).__name__} at {count}/{n}: {exc}"}


async def _send_all(sock: trio.socket.SocketType, data: bytes) -> None:
    view = memoryview(data)
    while view:
        sent = await sock.send(view)
        view = view[sent:]


async def _upgrade_trio(sock: trio.socket.SocketType, url: str) -> bytes:
    """Connect ``sock`` to ``url``'s host and port and upgrade it to a WebSocket: the bytes after the 101 (the first
    frames, if the server sent them with it)."""
    host, port, _ = _host_port_path(url)
    await sock.connect((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    await _send_all(sock, upgrade_request(url))
    data = b""
    while (split := split_upgrade(data)) is None:
        chunk = await sock.recv(4096)
        if not chunk:
            raise ProtocolError("closed during the upgrade")
        data += chunk
    return split[1]


async def naive_trio(url: str, n: int, recv_size: int = 262144, stall: float = 60.0) -> dict[str, Any]:
    """(n) on a Trio socket: the same loop as ``naive_blocking``, each recv an ``await`` on the running loop."""
    start = time.perf_counter()
    count = 0
    try:
        with trio.fail_after(stall):
            sock = trio.socket.socket()
            with sock:
                data = await _upgrade_trio(sock, url)
                reader, shake = FrameReader(), _Handshake()
                while True:
                    for opcode, payload in reader.feed(data):
                        if opcode == TEXT or opcode == BINARY:
                            message = orjson.loads(payload)
                            if shake.done:
                                count += 1
                                if count == n:
                                    elapsed = time.perf_counter() - start
                                    return {"rate": n / elapsed, "seconds": elapsed}
                            elif (reply := shake.on_message(message)) is not None:
                                await _send_all(sock, reply)
                        elif opcode == PING:
                            await _send_all(sock, client_frame(bytes(payload), PONG))
                        elif opcode == CLOSE:
                            raise ProtocolError("the server closed")
                    data = await sock.recv(recv_size)
                    if not data:
                        raise ProtocolError("the server closed")
    except (OSError, ProtocolError, trio.TooSlowError) as exc:
        return {"rate": float("nan"), "error": f"(n) trio: {type(exc).__name__} at {count}/{n}: {exc}"}


async def naive(url: str, n: int, how: str, recv_size: int) -> dict[str, Any]:
    """(n) as ``how`` says: ``"trio"`` on this loop, ``"thread"`` on a blocking socket in a worker thread."""
    if how == "trio":
        return await naive_trio(url, n, recv_size)
    return await trio.to_thread.run_sync(naive_blocking, url, n, recv_size)


def websockets_available() -> str | None:
    """None when ``websockets`` (13+, the ``bench`` extra) can be imported, else why not."""
    try:
        import websockets.asyncio.client  # noqa: F401
    except ImportError as exc:
        return f"websockets not installed (pip install -e '.[bench]'): {exc}"
    return None


def loops_available() -> list[str]:
    """The asyncio loops (w) can run on here: asyncio's own, and uvloop where it is installed."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return ["asyncio"]
    return ["asyncio", "uvloop"]


def websockets_blocking(url: str, n: int, loop: str = "asyncio", max_queue: int = 16, stall: float = 60.0) -> dict:
    """(w): ``websockets.asyncio.client.connect`` + ``orjson.loads`` per message, on a fresh event loop of its own
    (call it from a worker thread). ``max_queue``: the frames websockets buffers ahead of ``recv``."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import WebSocketException

    count = 0

    async def main() -> dict[str, Any]:
        nonlocal count
        start = time.perf_counter()
        async with asyncio.timeout(stall):
            async with connect(url, compression=None, max_size=None, max_queue=max_queue, proxy=None) as ws:
                orjson.loads(await ws.recv(decode=False))  # connect.challenge
                await ws.send(CONNECT.decode())
                orjson.loads(await ws.recv(decode=False))  # hello-ok
                await ws.send(SUBSCRIBE.decode())
                orjson.loads(await ws.recv(decode=False))  # the subscribe's reply
                while count < n:
                    orjson.loads(await ws.recv(decode=False))
                    count += 1
                elapsed = time.perf_counter() - start
        return {"rate": n / elapsed, "seconds": elapsed}

    try:
        if loop == "uvloop":
            import uvloop

            return uvloop.run(main())
        return asyncio.run(main())
    except (OSError, TimeoutError, WebSocketException) as exc:
        return {"rate": float("nan"), "error": f"(w) {loop}: {type(exc).__name__} at {count}/{n}: {exc}"}


async def websockets_reader(url: str, n: int, loop: str, max_queue: int) -> dict[str, Any]:
    """(w) from the bench's Trio loop: the asyncio client runs in a worker thread; this loop only waits for it."""
    return await trio.to_thread.run_sync(websockets_blocking, url, n, loop, max_queue)


#: How a reply frame starts (the replay server's compact JSON): what the floor tells from an event without parsing.
_REPLY_HEAD = b'{"type":"res"'


async def receive_floor_paused(
    url: str, n: int, pauses: list[int], clocks: Any, recv_size: int = 262144, stall: float = 120.0
) -> dict[str, Any]:
    """The receive floor of issue 32's goal 2: the bytes of a paused capture arriving and cut into frames, nothing
    parsed (a reply is told from an event by its first bytes). What any reader pays before it looks at a message:
    the kernel's copy into a fresh ``bytes`` per recv, the frame cut, one view per message; its growth over a long
    run is the input's own (each ``chat`` delta carries the whole message so far). At each pause point (a count of
    event frames) it notes ``clocks()`` and asks the replay server to go on (``bench.continue``), as the bench's
    paused readers do; ``clocks()`` once more after the n-th event."""
    marks: list[Any] = []
    pending = list(pauses)
    count = 0
    try:
        with trio.fail_after(stall):
            sock = trio.socket.socket()
            with sock:
                data = await _upgrade_trio(sock, url)
                reader, shake = FrameReader(), _Handshake()
                while count < n:
                    for opcode, payload in reader.feed(data):
                        if opcode == TEXT or opcode == BINARY:
                            if not shake.done:
                                if (reply := shake.on_message(orjson.loads(payload))) is not None:
                                    await _send_all(sock, reply)
                            elif payload[: len(_REPLY_HEAD)] != _REPLY_HEAD:
                                count += 1
                        elif opcode == PING:
                            await _send_all(sock, client_frame(bytes(payload), PONG))
                        elif opcode == CLOSE:
                            raise ProtocolError("the server closed")
                    if pending and count >= pending[0]:
                        # A pause point: the server sent nothing past it, so the batch ended exactly there.
                        marks.append(clocks())
                        pending.pop(0)
                        resume = {"type": "req", "id": f"p{count}", "method": "bench.continue", "params": {}}
                        await _send_all(sock, client_frame(orjson.dumps(resume)))
                    if count >= n:
                        break
                    data = await sock.recv(recv_size)
                    if not data:
                        raise ProtocolError("the server closed")
                marks.append(clocks())
    except (OSError, ProtocolError, trio.TooSlowError) as exc:
        return {"error": f"floor: {type(exc).__name__} at {count}/{n}: {exc}"}
    return {"marks": marks}
