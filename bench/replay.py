"""Capture a Gateway stream once, then replay it from a separate process that costs almost nothing.

Why a capture through owc: the frames a bench replays must be exactly what a subscribed owc connection receives
(the simulator picks audiences by scopes and caps), and the replies the replay server gives must be what owc asks
during a run (``chat.history`` pages at finalize, with whatever params owc uses today). So the capture runs owc
itself (``open_runtime``) against the simulator through a recording WebSocket proxy: every event frame after the
handshake is kept byte for byte, and every request owc made is kept with the simulator's reply. Nothing of owc's
internals is read: the proxy sees only the wire.

Why a raw-socket server: a replay server that re-encodes each message with trio-websocket costs about as much per
frame as the reader it feeds and squeezes every ratio toward 1 (issue 16). This one encodes the whole stream into
WebSocket frames once at start-up and writes it with ``socket.sendall`` in 64 KiB slices of whole frames, so a
reader gets bytes as fast as the kernel moves them. ``/sink/<name>`` streams the same bytes right after the HTTP
upgrade to a client that only counts them: the server's own ceiling, printed next to the readers.

Requests are answered from the capture: the exact (method, params) first, then the same method for the same
``sessionKey``, then the same method; the latest recorded reply wins (the transcript as complete as the capture
saw it). ``bench.continue`` releases the next pause point (a capture may mark where the replay waits, so a bench
can measure with runs open). Every request nothing recorded answers is counted as a miss (``bench.stats``).
"""

from __future__ import annotations

import collections
import logging
import multiprocessing
import os
import pickle
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import orjson
import trio
from trio_websocket import ConnectionClosed, WebSocketRequest, open_websocket_url, serve_websocket

#: Big enough for any frame or ``chat.history`` page the simulator sends (its ``maxBytes`` bound is 6 MiB).
PROXY_MAX_MESSAGE = 64 * 1024 * 1024
#: The replay server writes whole frames in slices of about this size (replies go out between slices).
SLICE = 64 * 1024


def request_key(method: str, params: Any) -> str:
    """The exact-match key of a request: its method and its params, canonically encoded."""
    return method + "\0" + orjson.dumps(params, option=orjson.OPT_SORT_KEYS).decode()


def _session_of(params: Any) -> str | None:
    if isinstance(params, dict):
        key = params.get("sessionKey") or params.get("key")
        return key if isinstance(key, str) else None
    return None


@dataclass
class Capture:
    """One captured stream: what the replay server sends and answers. Frames are UTF-8 JSON event frames."""

    name: str
    hello: dict[str, Any] = field(default_factory=dict)
    subscribe: dict[str, Any] = field(default_factory=dict)
    frames: list[bytes] = field(default_factory=list)
    #: request key -> recorded responses (``ok``, ``payload`` / ``error``), in capture order.
    replies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: (method, session key) -> the exact keys recorded for it (the fallback when the params differ).
    by_session: dict[tuple[str, str | None], list[str]] = field(default_factory=dict)
    #: Frame indices before which the replay waits for a ``bench.continue`` request.
    pauses: list[int] = field(default_factory=list)
    #: What the bench needs to know about the stream (chats, runs, tool frames...), never sent.
    meta: dict[str, Any] = field(default_factory=dict)

    def record(self, method: str, params: Any, response: dict[str, Any]) -> None:
        key = request_key(method, params)
        self.replies.setdefault(key, []).append(response)
        keys = self.by_session.setdefault((method, _session_of(params)), [])
        if key not in keys:
            keys.append(key)

    @property
    def bytes(self) -> int:
        return sum(len(f) for f in self.frames)

    def save(self, path: str) -> None:
        with open(path, "wb") as out:
            pickle.dump(self, out, protocol=pickle.HIGHEST_PROTOCOL)


# ---------------------------------------------------------------------------------------------- capture proxy


class RecordingProxy:
    """A WebSocket proxy in front of the simulator that records one capture. Only the first connection's frames
    are recorded: a second one would mean owc reconnected, which a bench capture must not contain."""

    def __init__(self, upstream: str, capture: Capture) -> None:
        self.upstream = upstream
        self.capture = capture
        self.connections = 0
        self.port = 0

    async def serve(self, *, task_status: trio.TaskStatus[RecordingProxy] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            server = await nursery.start(
                partial(serve_websocket, self._handle, "127.0.0.1", 0, None, max_message_size=PROXY_MAX_MESSAGE)
            )
            self.port = server.port
            task_status.started(self)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/"

    async def _handle(self, request: WebSocketRequest) -> None:
        self.connections += 1
        first = self.connections == 1
        down = await request.accept()
        pending: dict[str, tuple[str, Any]] = {}
        try:
            async with open_websocket_url(self.upstream, max_message_size=PROXY_MAX_MESSAGE) as up:
                async with trio.open_nursery() as nursery:

                    async def to_gateway() -> None:
                        while True:
                            message = await down.get_message()
                            frame = orjson.loads(message)
                            if frame.get("type") == "req":
                                pending[frame["id"]] = (frame.get("method", ""), frame.get("params"))
                            await up.send_message(message)

                    async def to_client() -> None:
                        while True:
                            message = await up.get_message()
                            frame = orjson.loads(message)
                            kind = frame.get("type")
                            if first and kind == "event" and frame.get("event") != "connect.challenge":
                                self.capture.frames.append(
                                    message.encode() if isinstance(message, str) else bytes(message)
                                )
                            elif first and kind == "res" and frame.get("id") in pending:
                                method, params = pending.pop(frame["id"])
                                response = {k: v for k, v in frame.items() if k not in ("id", "type")}
                                if method == "connect":
                                    self.capture.hello = frame.get("payload") or {}
                                elif method == "sessions.subscribe" and not self.capture.subscribe:
                                    self.capture.subscribe = frame.get("payload") or {}
                                else:
                                    self.capture.record(method, params, response)
                            await down.send_message(message)

                    async def pump(fn: Callable[[], Any]) -> None:
                        try:
                            await fn()
                        except ConnectionClosed:
                            pass
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(pump, to_gateway)
                    nursery.start_soon(pump, to_client)
        except (ConnectionClosed, OSError, trio.BrokenResourceError):
            pass


@asynccontextmanager
async def recording_proxy(upstream: str, capture: Capture) -> AsyncIterator[RecordingProxy]:
    async with trio.open_nursery() as nursery:
        proxy = await nursery.start(RecordingProxy(upstream, capture).serve)
        try:
            yield proxy
        finally:
            nursery.cancel_scope.cancel()


# ---------------------------------------------------------------------------------------------- the server


def ws_frame(payload: bytes, opcode: int = 0x1) -> bytes:
    """One unmasked, unfragmented server-to-client WebSocket frame (RFC 6455 section 5.2)."""
    n = len(payload)
    if n < 126:
        header = bytes((0x80 | opcode, n))
    elif n < 65536:
        header = bytes((0x80 | opcode, 126)) + n.to_bytes(2, "big")
    else:
        header = bytes((0x80 | opcode, 127)) + n.to_bytes(8, "big")
    return header + payload


@dataclass
class _Stream:
    """A capture, encoded once: the frames as one buffer, sliced at frame boundaries (and at pause points)."""

    capture: Capture
    data: bytes
    #: (start, end, pause_before) byte ranges; ``pause_before``: wait for a ``bench.continue`` first.
    slices: list[tuple[int, int, bool]]


def _encode(capture: Capture) -> _Stream:
    pauses = set(capture.pauses)
    parts: list[bytes] = []
    slices: list[tuple[int, int, bool]] = []
    start = offset = 0
    pause_next = False
    for index, frame in enumerate(capture.frames):
        if index in pauses:
            if offset > start:
                slices.append((start, offset, pause_next))
                start = offset
            pause_next = True
        encoded = ws_frame(frame)
        parts.append(encoded)
        offset += len(encoded)
        if offset - start >= SLICE:
            slices.append((start, offset, pause_next))
            start, pause_next = offset, False
    if offset > start or pause_next:
        slices.append((start, offset, pause_next))
    capture.frames = []  # the server keeps only the encoded buffer
    return _Stream(capture, b"".join(parts), slices)


class _Conn:
    """One replayed connection: the calling thread writes (frames, then replies between slices); a reader thread
    owns the wsproto state, parses the client's requests and queues the replies."""

    def __init__(self, sock: socket.socket, streams: dict[str, _Stream], stats: collections.Counter[str]) -> None:
        from wsproto import ConnectionType, WSConnection

        self.sock = sock
        self.streams = streams
        self.stats = stats
        self.ws = WSConnection(ConnectionType.SERVER)
        self.out: collections.deque[bytes] = collections.deque()
        self.wake = threading.Event()
        self.subscribed = threading.Event()
        self.go = threading.Semaphore(0)
        self.closed = False
        self.stream: _Stream | None = None
        self.conn_id = str(uuid.uuid4())

    def serve(self) -> None:
        try:
            self._serve()
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        finally:
            self.closed = True
            try:
                self.sock.close()
            except OSError:
                pass

    def _serve(self) -> None:
        from wsproto.events import AcceptConnection, Request, TextMessage

        target = self._upgrade(Request, AcceptConnection)
        if target is None:
            return
        sink = target.startswith("/sink/")
        name = target.removeprefix("/sink/").strip("/")
        stream = self.stream = self.streams.get(name)
        if stream is None:
            self.sock.sendall(self.ws.send(_close_event(1008, f"no capture {name!r}")))
            return
        view = memoryview(stream.data)
        if sink:  # the server's ceiling: the frames right after the upgrade, to a client that only counts bytes
            for start, end, _ in stream.slices:
                self.sock.sendall(view[start:end])
            self.sock.shutdown(socket.SHUT_WR)
            while self.sock.recv(65536):
                pass
            return
        challenge = {"type": "event", "event": "connect.challenge", "payload": {"nonce": "bench", "ts": 0}}
        self.sock.sendall(self.ws.send(TextMessage(data=orjson.dumps(challenge).decode())))
        reader = threading.Thread(target=self._read, daemon=True)
        reader.start()
        while not self.subscribed.wait(0.05):
            self._flush()
            if self.closed:
                return
        self._flush()
        for start, end, pause in stream.slices:
            while pause and not self.go.acquire(timeout=0.01):
                self._flush()
                if self.closed:
                    return
            self._flush()
            self.sock.sendall(view[start:end])
        while not self.closed:
            self.wake.wait(0.05)
            self.wake.clear()
            self._flush()
        self._flush()

    def _upgrade(self, request_type: type, accept_type: type) -> str | None:
        while True:
            data = self.sock.recv(65536)
            if not data:
                return None
            self.ws.receive_data(data)
            for event in self.ws.events():
                if isinstance(event, request_type):
                    self.sock.sendall(self.ws.send(accept_type()))
                    return event.target  # type: ignore[attr-defined,no-any-return]

    def _flush(self) -> None:
        while self.out:
            self.sock.sendall(self.out.popleft())

    def _send(self, data: bytes) -> None:
        self.out.append(data)
        self.wake.set()

    def _read(self) -> None:
        from wsproto.events import CloseConnection, Ping, TextMessage

        parts: list[str] = []
        try:
            while not self.closed:
                data = self.sock.recv(65536)
                self.ws.receive_data(data or None)
                for event in self.ws.events():
                    if isinstance(event, TextMessage):
                        parts.append(event.data)
                        if event.message_finished:
                            self._answer("".join(parts))
                            parts.clear()
                    elif isinstance(event, CloseConnection):
                        self._send(self.ws.send(event.response()))
                        self.closed = True
                    elif isinstance(event, Ping):
                        self._send(self.ws.send(event.response()))
                if not data:
                    self.closed = True
        except Exception:
            self.closed = True
        finally:
            self.wake.set()

    def _answer(self, text: str) -> None:
        from wsproto.events import TextMessage

        request = orjson.loads(text)
        if request.get("type") != "req":
            return
        method, params = request.get("method", ""), request.get("params")
        assert self.stream is not None
        capture = self.stream.capture
        response: dict[str, Any]
        if method == "connect":
            hello = dict(capture.hello)
            server = dict(hello.get("server") or {})
            server["connId"] = self.conn_id  # a fresh connection id each time, like the Gateway
            hello["server"] = server
            response = {"ok": True, "payload": hello}
        elif method == "sessions.subscribe":
            response = {"ok": True, "payload": capture.subscribe}
        elif method == "bench.continue":
            response = {"ok": True, "payload": {}}
            self.go.release()
        elif method == "bench.stats":
            response = {"ok": True, "payload": dict(self.stats)}
        else:
            response = _lookup(capture, method, params, self.stats)
        frame = {"type": "res", "id": request.get("id"), **response}
        self._send(self.ws.send(TextMessage(data=orjson.dumps(frame).decode())))
        if method == "sessions.subscribe":
            self.subscribed.set()


def _lookup(capture: Capture, method: str, params: Any, stats: collections.Counter[str]) -> dict[str, Any]:
    exact = capture.replies.get(request_key(method, params))
    if exact:
        stats["exact"] += 1
        return exact[-1]
    keys = capture.by_session.get((method, _session_of(params)))
    if keys:
        stats["by_session"] += 1
        return capture.replies[keys[-1]][-1]
    for (m, _), keys in capture.by_session.items():
        if m == method and keys:
            stats["by_method"] += 1
            return capture.replies[keys[-1]][-1]
    stats["miss"] += 1
    stats[f"miss:{method}"] += 1
    return {"ok": True, "payload": {}}


def _close_event(code: int, reason: str) -> Any:
    from wsproto.events import CloseConnection

    return CloseConnection(code=code, reason=reason)


def serve_forever(paths: dict[str, str], port_out: Any) -> None:
    """The replay server process: load and encode the captures, then serve each connection in a thread."""
    logging.disable(logging.CRITICAL)
    streams: dict[str, _Stream] = {}
    for name, path in paths.items():
        with open(path, "rb") as f:
            streams[name] = _encode(pickle.load(f))
    stats: collections.Counter[str] = collections.Counter()
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    port_out.send(listener.getsockname()[1])
    while True:
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_Conn(sock, streams, stats).serve, daemon=True).start()


@contextmanager
def replay_server(paths: dict[str, str]) -> Any:
    """Start the replay server in its own process (spawned: a fork inside a running Trio loop would inherit its
    state) and yield its base URL; the process is ended by its pid on the way out."""
    spawn = multiprocessing.get_context("spawn")
    receive, send = spawn.Pipe(duplex=False)
    process = spawn.Process(target=serve_forever, args=(paths, send), daemon=True, name="bench-replay")
    process.start()
    try:
        deadline = time.monotonic() + 600  # a large capture takes a while to load and encode
        while not receive.poll(0.2):
            if not process.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the replay server did not start (exit code {process.exitcode})")
        yield f"ws://127.0.0.1:{receive.recv()}"
    finally:
        process.terminate()
        process.join(10)


def sink(base_url: str, name: str, total_bytes: int) -> float:
    """Read a capture's encoded stream from ``/sink/<name>`` and return the seconds from its first byte to its
    last: the replay server's own ceiling (the client here does nothing but count bytes)."""
    host, port = base_url.removeprefix("ws://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            f"GET /sink/{name} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: YmVuY2hiZW5jaGJlbmNoMQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        header = b""
        while b"\r\n\r\n" not in header:
            chunk = sock.recv(4096)
            if not chunk:
                raise RuntimeError("the replay server closed during the upgrade")
            header += chunk
        got = len(header.split(b"\r\n\r\n", 1)[1])
        buffer = bytearray(1 << 20)
        start = time.perf_counter()
        while got < total_bytes:
            n = sock.recv_into(buffer)
            if not n:
                break
            got += n
        elapsed = time.perf_counter() - start
    if got < total_bytes:
        raise RuntimeError(f"the sink got {got} of {total_bytes} bytes")
    return elapsed


def encoded_size(capture: Capture) -> int:
    """The bytes the server sends for a capture's frames (payloads plus frame headers)."""
    return sum(len(f) + (2 if len(f) < 126 else 4 if len(f) < 65536 else 10) for f in capture.frames)


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
