"""owc's client WebSocket (issue 16): the sans-I/O machine (``owc.protocol.websocket``) without a loop, checked
against wsproto's own server side, and the Trio pump (``owc.gateway.websocket``) over real loopback sockets."""

from __future__ import annotations

import contextlib
import logging
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import orjson
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st
from trio_websocket import ConnectionClosed, ConnectionRejected, HandshakeError
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, CloseConnection, Pong, Request, TextMessage
from wsproto.utilities import generate_accept_token

from owc.gateway import open_gateway_connection
from owc.gateway.websocket import (
    FRAMES_PER_READ,
    MAX_RECEIVE_SIZE,
    RECEIVE_SIZE,
    WebSocket,
    connect_websocket,
)
from owc.protocol import Tick
from owc.protocol import websocket as protocol_websocket
from owc.protocol.websocket import (
    ClientWebSocket,
    HandshakeFailed,
    HandshakeRejected,
    State,
    mask,
)
from owc.sim import open_simulator

from conftest import TOKEN
from recorder import RecordingHandler

# ------------------------------------------------------------------------------------------------ the machine


def server_frame(opcode: int, payload: bytes, *, fin: bool = True, rsv: int = 0, masked: bool = False) -> bytes:
    """A frame as a server writes it (unmasked unless asked), built by hand so a test can break any rule."""
    size = len(payload)
    head = bytes([(0x80 if fin else 0) | rsv | opcode])
    flag = 0x80 if masked else 0
    if size < 126:
        head += bytes([flag | size])
    elif size < 1 << 16:
        head += bytes([flag | 126]) + struct.pack("!H", size)
    else:
        head += bytes([flag | 127]) + struct.pack("!Q", size)
    if masked:
        key = b"\x01\x02\x03\x04"
        return head + key + mask(key, payload)
    return head + payload


def text(payload: bytes | str) -> bytes:
    return server_frame(0x1, payload.encode() if isinstance(payload, str) else payload)


def accepted(**kwargs) -> tuple[ClientWebSocket, WSConnection]:
    """A client machine whose handshake wsproto's server accepted; returns both ends."""
    client = ClientWebSocket("gw.example:18789", "/", **kwargs)
    server = WSConnection(ConnectionType.SERVER)
    server.receive_data(client.handshake_request())
    (request,) = list(server.events())
    assert isinstance(request, Request)
    client.receive_data(server.send(AcceptConnection()))
    assert client.state is State.OPEN
    return client, server


def server_reads(server: WSConnection, data: bytes) -> list:
    server.receive_data(data)
    return list(server.events())


def test_handshake_request_is_one_wsproto_accepts_with_the_extra_headers() -> None:
    client = ClientWebSocket("gw.example:18789", "/ws?x=1", extra_headers=((b"Origin", b"https://ui.example"),))
    server = WSConnection(ConnectionType.SERVER)
    server.receive_data(client.handshake_request())
    (request,) = list(server.events())
    assert isinstance(request, Request)
    assert request.host == "gw.example:18789" and request.target == "/ws?x=1"
    assert (b"origin", b"https://ui.example") in [(k.lower(), v) for k, v in request.extra_headers]


def test_frames_in_the_same_read_as_the_101_are_kept() -> None:
    client = ClientWebSocket("h", "/")
    server = WSConnection(ConnectionType.SERVER)
    server.receive_data(client.handshake_request())
    list(server.events())
    client.receive_data(server.send(AcceptConnection()) + server.send(TextMessage(data='{"a":1}')))
    assert client.take_messages() == [b'{"a":1}']


@pytest.mark.parametrize(
    ("headers", "error"),
    [
        ("Upgrade: websocket\r\nSec-WebSocket-Accept: {accept}\r\n", "Connection: Upgrade"),
        ("Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n", "Upgrade: websocket"),
        ("Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: bad\r\n", "Bad accept token"),
        (
            "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: {accept}\r\n"
            "Sec-WebSocket-Protocol: x\r\n",
            "unrecognized subprotocol x",
        ),
        (
            "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: {accept}\r\n"
            "Sec-WebSocket-Extensions: permessage-deflate\r\n",
            "unrecognized extension permessage-deflate",
        ),
    ],
)
def test_a_bad_upgrade_is_refused_as_wsproto_refuses_it(headers: str, error: str) -> None:
    client = ClientWebSocket("h", "/")
    request = client.handshake_request()
    key = next(line.split(b": ")[1] for line in request.split(b"\r\n") if line.startswith(b"Sec-WebSocket-Key"))
    answer = "HTTP/1.1 101 Switching Protocols\r\n" + headers.format(accept=generate_accept_token(key).decode())
    with pytest.raises(HandshakeFailed, match=error):
        client.receive_data((answer + "\r\n").encode())


def test_an_offered_subprotocol_is_accepted() -> None:
    client, server = ClientWebSocket("h", "/", subprotocols=("gw",)), WSConnection(ConnectionType.SERVER)
    server.receive_data(client.handshake_request())
    list(server.events())
    client.receive_data(server.send(AcceptConnection(subprotocol="gw")))
    assert client.state is State.OPEN and client.subprotocol == "gw"


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 8\r\nRetry-After: 2\r\n\r\nstarting",
        b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\nConnection: close\r\n\r\nstarting",  # until EOF
    ],
)
def test_a_rejection_keeps_status_headers_and_body(answer: bytes) -> None:
    client = ClientWebSocket("h", "/")
    client.handshake_request()
    with pytest.raises(HandshakeRejected) as info:
        client.receive_data(answer)
        client.receive_data(b"")
    rejection = info.value.rejection
    assert rejection.status_code == 503 and rejection.body == b"starting"
    assert (b"retry-after", b"2") in rejection.headers
    assert client.state is State.CLOSED


def test_garbage_instead_of_http_and_an_early_close_fail_the_handshake() -> None:
    client = ClientWebSocket("h", "/")
    client.handshake_request()
    with pytest.raises(HandshakeFailed, match="not HTTP"):
        client.receive_data(b"\x15\x03\x01\x00\x02\x02\x46")  # a TLS alert: ws:// spoken to a TLS port
    client = ClientWebSocket("h", "/")
    client.handshake_request()
    with pytest.raises(HandshakeFailed, match="closed the connection"):
        client.receive_data(b"")


def test_frames_split_at_every_byte_give_the_same_messages() -> None:
    stream = b"".join(
        [
            text('{"seq":1}'),
            text("x" * 200),  # 16-bit length
            server_frame(0x2, b"\x00\xff" * 40_000),  # 64-bit length, binary
            server_frame(0x1, b"frag", fin=False) + server_frame(0x0, b"men", fin=False) + server_frame(0x0, b"ted"),
            text(b"bad \xff utf-8"),
        ]
    )
    whole, _ = accepted()
    whole.receive_data(stream)
    expected = [b'{"seq":1}', b"x" * 200, b"\x00\xff" * 40_000, b"fragmented", b"bad \xff utf-8"]
    assert whole.buffered == sum(map(len, expected))
    assert whole.take_messages() == expected and whole.buffered == 0
    for step in (1, 3, 7, 4096):
        split, _ = accepted()
        for i in range(0, len(stream), step):
            split.receive_data(stream[i : i + step])
        assert split.take_messages() == expected, step
        assert split.closed is None


#: One message as the server may send it: a whole text or binary frame (7/16/64-bit lengths), or fragmented
#: (continuations), with a ping between fragments; what the client must deliver for it, and the pongs it owes.
_payloads = st.one_of(st.binary(max_size=40), st.binary(min_size=126, max_size=300), st.just(b"z" * 70_000))


@st.composite
def _server_messages(draw) -> tuple[bytes, bytes, list[bytes]]:
    payload = draw(_payloads)
    opcode = draw(st.sampled_from([0x1, 0x2]))
    pings: list[bytes] = []
    if len(payload) < 2 or not draw(st.booleans()):
        return server_frame(opcode, payload), payload, pings
    cut = draw(st.integers(1, len(payload) - 1))
    ping = draw(st.binary(max_size=10))
    pings.append(ping)
    wire = server_frame(opcode, payload[:cut], fin=False) + server_frame(0x9, ping) + server_frame(0x0, payload[cut:])
    return wire, payload, pings


@given(st.lists(_server_messages(), min_size=1, max_size=8), st.lists(st.integers(0, 80_000), max_size=12))
def test_any_stream_cut_anywhere_gives_its_messages_once_whole_and_as_bytes(messages, cuts) -> None:
    """Issue 32: only what completes a frame begun in an earlier read is joined, and the rest of the read is parsed
    where it lies (views, not copies). Whatever the reads' boundaries, each message comes out once, whole, in order,
    as ``bytes`` (a decoder searches and slices it), with the byte count, and every ping is answered."""
    stream = b"".join(wire for wire, _, _ in messages)
    expected = [payload for _, payload, _ in messages]
    client, server = accepted()
    bounds = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    got: list[bytes] = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        client.receive_data(stream[a:b])
        if cuts and cuts[0] % 2:  # sometimes taken read by read, sometimes all at the end
            got += client.take_messages()
    assert client.buffered == sum(map(len, expected)) - sum(map(len, got))
    got += client.take_messages()
    assert got == expected and all(type(m) is bytes for m in got)
    assert client.closed is None and client.wanted == 0
    answered = server_reads(server, client.data_to_send())
    assert [e.payload for e in answered] == [p for _, _, pings in messages for p in pings]
    assert all(isinstance(e, Pong) for e in answered)


def test_wsproto_reads_what_owc_sends_and_owc_reads_what_wsproto_sends() -> None:
    client, server = accepted()
    for payload in ("", "a", "é" * 70, "x" * 70_000):
        (event,) = server_reads(server, client.send_text(payload.encode()))
        assert isinstance(event, TextMessage) and event.data == payload
        client.receive_data(server.send(TextMessage(data=payload)) + server.send(BytesMessage(data=b"\x00" * 3)))
        assert client.take_messages() == [payload.encode(), b"\x00" * 3]


def test_a_ping_is_answered_with_its_payload() -> None:
    client, server = accepted()
    client.receive_data(server_frame(0x9, b"are you there") + server_frame(0xA, b"late pong") + text("after"))
    (pong,) = server_reads(server, client.data_to_send())
    assert isinstance(pong, Pong) and pong.payload == b"are you there"
    assert client.take_messages() == [b"after"] and client.data_to_send() == b""


def test_a_close_is_answered_and_its_code_and_reason_kept() -> None:
    client, server = accepted()
    client.receive_data(text("last") + server_frame(0x8, struct.pack("!H", 1012) + b"service restart") + text("x"))
    assert client.take_messages() == [b"last"]  # nothing after the close is read
    assert (client.closed.code, client.closed.reason) == (1012, "service restart")
    (answer,) = server_reads(server, client.data_to_send())
    assert isinstance(answer, CloseConnection) and answer.code == 1012
    empty, server = accepted()
    empty.receive_data(server_frame(0x8, b""))
    assert (empty.closed.code, empty.closed.reason) == (1005, "")


def test_owc_closing_first_takes_the_server_answer_as_the_end() -> None:
    client, server = accepted()
    (close,) = server_reads(server, client.close(1000, "bye"))
    assert isinstance(close, CloseConnection) and close.code == 1000 and client.state is State.CLOSING
    assert client.close() == b""
    client.receive_data(server.send(close.response()))
    assert client.closed.code == 1000 and client.data_to_send() == b""  # an answer is not answered again


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (server_frame(0x1, b"hi", masked=True), 1002),
        (server_frame(0x1, b"hi", rsv=0x40), 1002),
        (server_frame(0x3, b"hi"), 1002),
        (server_frame(0x0, b"hi"), 1002),
        (server_frame(0x9, b"p", fin=False), 1002),
        (server_frame(0x9, b"p" * 126), 1002),
        (server_frame(0x8, b"\x03"), 1002),
        (server_frame(0x1, b"a", fin=False) + server_frame(0x1, b"b"), 1002),
    ],
)
def test_a_protocol_violation_closes_with_a_close_frame(frame: bytes, code: int) -> None:
    client, server = accepted()
    client.receive_data(text("before") + frame + text("after"))
    assert client.take_messages() == [b"before"] and client.closed.code == code
    (answer,) = server_reads(server, client.data_to_send())
    assert isinstance(answer, CloseConnection) and answer.code == code


def test_a_message_too_big_closes_1009_from_its_header_alone() -> None:
    client, server = accepted(max_message_size=1000)
    client.receive_data(text("x" * 1000))
    assert client.take_messages() == [b"x" * 1000]
    client.receive_data(server_frame(0x1, b"y" * 5000)[:12])  # the header says 5,000: no need to buffer it
    assert client.closed.code == 1009 and client.closed.reason == "Exceeded maximum message size"
    (answer,) = server_reads(server, client.data_to_send())
    assert isinstance(answer, CloseConnection) and answer.code == 1009
    fragments, _ = accepted(max_message_size=1000)
    fragments.receive_data(server_frame(0x1, b"a" * 600, fin=False) + server_frame(0x0, b"b" * 600))
    assert fragments.closed.code == 1009 and fragments.take_messages() == []


@pytest.mark.parametrize(
    "header",
    [
        b"\x89\x7f" + (2**62).to_bytes(8, "big"),  # a ping announcing 2**62 bytes
        b"\x8a\x7e\x01\x00",  # a pong announcing 256
        b"\x09\x05",  # a ping that is not the last fragment
        b"\x8b\x7f" + (2**40).to_bytes(8, "big"),  # an unknown control opcode
        b"\x83\x7f" + (2**40).to_bytes(8, "big"),  # an unknown data opcode
    ],
)
def test_a_control_frame_too_long_or_an_unknown_opcode_closes_1002_from_its_header_alone(header: bytes) -> None:
    """Its payload is never waited for: the pump asks for what ``wanted`` says, and a header announcing 2**62
    bytes had it ask the socket for them (a ``MemoryError`` out of the reader instead of a 1002 close)."""
    client, server = accepted()
    client.receive_data(text("before") + header)
    assert client.take_messages() == [b"before"] and client.wanted == 0
    assert client.closed is not None and client.closed.code == 1002
    (answer,) = server_reads(server, client.data_to_send())
    assert isinstance(answer, CloseConnection) and answer.code == 1002


def test_the_end_of_the_stream_is_1006() -> None:
    client, _ = accepted()
    client.receive_data(text("a") + text("partial")[:4])
    client.receive_data(b"")
    assert client.take_messages() == [b"a"] and client.closed.code == 1006 and client.closed.reason is None


# ------------------------------------------------------------------------------------------------ the pump


@asynccontextmanager
async def raw_server(serve: Callable[[trio.SocketStream], Awaitable[None]]) -> AsyncIterator[int]:
    """A TCP server on 127.0.0.1 whose one connection is handed to ``serve`` as is; yields its port."""
    async with trio.open_nursery() as nursery:
        (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listener.socket.getsockname()[1]

        async def accept_one() -> None:
            async with listener:
                stream = await listener.accept()
            async with stream:
                await serve(stream)

        nursery.start_soon(accept_one)
        try:
            yield port
        finally:
            nursery.cancel_scope.cancel()


async def accept_upgrade(stream: trio.SocketStream, server: WSConnection) -> Request:
    while True:
        server.receive_data(await stream.receive_some(65536))
        for event in server.events():
            if isinstance(event, Request):
                await stream.send_all(server.send(AcceptConnection()))
                return event


async def read_events(stream: trio.SocketStream, server: WSConnection, until: type) -> list:
    seen: list = []
    while not any(isinstance(e, until) for e in seen):
        data = await stream.receive_some(65536)
        if not data:
            break
        server.receive_data(data)
        seen += list(server.events())
    return seen


async def client_to(port: int, **kwargs) -> WebSocket:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    return await connect_websocket(stream, f"127.0.0.1:{port}", "/", max_message_size=1 << 20, **kwargs)


async def test_pump_batches_a_burst_and_bounds_it_in_bytes() -> None:
    """A burst written at once comes back in few batches (one wake-up each), never more than one read plus the
    message it completed: the buffer is bounded in bytes, not in messages."""
    frames = [text(orjson.dumps({"seq": i, "pad": "p" * (i % 300)})) for i in range(5_000)]
    big = text(b"B" * 300_000)

    async def serve(stream: trio.SocketStream) -> None:
        server = WSConnection(ConnectionType.SERVER)
        await accept_upgrade(stream, server)
        await stream.send_all(b"".join(frames[:2500]) + big + b"".join(frames[2500:]))
        await read_events(stream, server, CloseConnection)

    async with raw_server(serve) as port:
        ws = await client_to(port)
        got: list[bytes] = []
        batches = []
        room = RECEIVE_SIZE  # what a read asks for: room for 16 messages of the last batch's largest size
        while len(got) < len(frames) + 1:
            batch = await ws.get_messages()
            batches.append(len(batch))
            assert sum(map(len, batch)) <= room + len(big), "more than one read plus one message buffered"
            room = min(max(RECEIVE_SIZE, FRAMES_PER_READ * max(map(len, batch))), MAX_RECEIVE_SIZE)
            got += batch
        assert got[2500] == b"B" * 300_000 and [orjson.loads(m)["seq"] for m in got[:3]] == [0, 1, 2]
        assert len(batches) < len(got) / 20  # tens of messages per wake-up, not one
        await ws.aclose()


def test_wanted_is_what_completes_the_frame_begun() -> None:
    client, _ = accepted(max_message_size=1 << 20)
    big = text(b"B" * 300_000)
    assert client.wanted == 0
    client.receive_data(big[:1])  # not even a header yet: nothing known to want
    assert client.wanted == 1  # the rest of the two-byte header
    client.receive_data(big[1:65536])
    assert client.wanted == len(big) - 65536
    client.receive_data(big[65536:200_000])
    assert client.wanted == len(big) - 200_000 and not client.messages
    client.receive_data(big[200_000:] + text(b"x")[:1])
    assert client.take_messages() == [b"B" * 300_000] and client.wanted == 1


class _Reads:
    """A client stream that records how much each read asked for."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream, self.asked = stream, []

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        self.asked.append(max_bytes)
        return await self.stream.receive_some(max_bytes)

    async def send_all(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def aclose(self) -> None:
        await self.stream.aclose()


async def test_pump_reads_a_large_frame_begun_in_one_read_not_64_kib_at_a_time() -> None:
    """Each read is a scheduler turn: a 600 KB frame read 64 KiB at a time let every writer run ten times for one
    event. Once its header is in, the pump asks for the rest at once."""
    client_end, server_end = trio.testing.memory_stream_pair()
    reads = _Reads(client_end)
    big = text(b"B" * 600_000)

    async def serve() -> None:
        server = WSConnection(ConnectionType.SERVER)
        while True:
            server.receive_data(await server_end.receive_some(65536))
            if any(isinstance(e, Request) for e in server.events()):
                break
        await server_end.send_all(server.send(AcceptConnection()))
        await server_end.send_all(big)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        ws = await connect_websocket(reads, "h", "/", max_message_size=1 << 20)  # type: ignore[arg-type]
        asked_before = len(reads.asked)
        assert await ws.get_messages() == [b"B" * 600_000]
        during = reads.asked[asked_before:]
        assert during[0] == RECEIVE_SIZE and during[1] == len(big) - RECEIVE_SIZE, during
        assert len(during) == 2  # the memory stream hands over all it holds: two reads, not ten


async def test_pump_reads_room_for_several_messages_of_the_size_it_last_saw() -> None:
    """A long reply's frames grow: a read asks for room for 16 of the last batch's largest (within 4 MiB), so a run's
    last events come as many to a read as its first, and a small one brings it back to 64 KiB."""
    client_end, server_end = trio.testing.memory_stream_pair()
    reads = _Reads(client_end)
    small, large = text(b"s" * 100), text(b"L" * 100_000)
    read_all, read_again = trio.Event(), trio.Event()

    async def serve() -> None:
        server = WSConnection(ConnectionType.SERVER)
        while True:
            server.receive_data(await server_end.receive_some(65536))
            if any(isinstance(e, Request) for e in server.events()):
                break
        await server_end.send_all(server.send(AcceptConnection()))
        await server_end.send_all(small + large)
        await server_end.send_all(large * 12)
        await server_end.send_all(small)
        await read_all.wait()
        await server_end.send_all(small)  # a batch of one small message...
        await read_again.wait()
        await server_end.send_all(small)  # ...so this one is asked for with 64 KiB again

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        ws = await connect_websocket(reads, "h", "/", max_message_size=1 << 20)  # type: ignore[arg-type]
        asked = len(reads.asked)
        got: list[bytes] = []
        while len(got) < 15:
            got += await ws.get_messages()
        read_all.set()
        got += await ws.get_messages()
        read_again.set()
        got += await ws.get_messages()
        after = reads.asked[asked:]
        assert RECEIVE_SIZE in after and FRAMES_PER_READ * 100_000 in after, after  # grew with the frames
        assert len([n for n in after if n == FRAMES_PER_READ * 100_000]) <= 2  # 12 large frames: a read or two, not 20
        assert reads.asked[-1] == RECEIVE_SIZE  # a small frame's batch: back to 64 KiB
        assert got[0] == b"s" * 100 and got[-1] == b"s" * 100


async def test_pump_answers_pings_and_surfaces_the_close_after_the_messages() -> None:
    seen: list = []

    async def serve(stream: trio.SocketStream) -> None:
        server = WSConnection(ConnectionType.SERVER)
        request = await accept_upgrade(stream, server)
        seen.append(request)
        await stream.send_all(server_frame(0x9, b"ping!") + text("one") + text(b"two \xff"))
        seen.extend(await read_events(stream, server, Pong))
        await stream.send_all(server.send(CloseConnection(code=4001, reason="device removed")))
        seen.extend(await read_events(stream, server, CloseConnection))

    async with raw_server(serve) as port:
        ws = await client_to(port, extra_headers=((b"Origin", b"https://ui.example"),))
        got = await ws.get_messages()
        while len(got) < 2:  # one write, but TCP may still hand it over in two reads
            got += await ws.get_messages()
        assert got == [b"one", b"two \xff"]  # invalid UTF-8 is the decoder's to repair
        with pytest.raises(ConnectionClosed) as info:
            await ws.get_messages()
        assert (info.value.reason.code, info.value.reason.reason) == (4001, "device removed")
        with pytest.raises(ConnectionClosed):
            await ws.send_message("too late")
    request, pong, close = seen
    assert (b"origin", b"https://ui.example") in [(k.lower(), v) for k, v in request.extra_headers]
    assert isinstance(pong, Pong) and pong.payload == b"ping!"
    assert isinstance(close, CloseConnection) and close.code == 4001  # owc answered the close


async def test_pump_answers_a_ping_that_came_with_the_101() -> None:
    """A ping in the same read as the handshake's answer is answered before owc reads again (found by the test
    above: with the 101, ping and messages in one segment, owc had its messages, never sent the pong, and both
    sides waited)."""

    async def serve(stream: trio.SocketStream) -> None:
        server = WSConnection(ConnectionType.SERVER)
        while True:
            server.receive_data(await stream.receive_some(65536))
            if any(isinstance(e, Request) for e in server.events()):
                break
        await stream.send_all(server.send(AcceptConnection()) + server_frame(0x9, b"first") + text("hello"))
        (pong,) = await read_events(stream, server, Pong)
        await stream.send_all(text(pong.payload))

    async with raw_server(serve) as port:
        ws = await client_to(port)
        got = await ws.get_messages()
        while len(got) < 2:
            got += await ws.get_messages()
        assert got == [b"hello", b"first"]


async def test_pump_maps_a_rejection_an_early_close_and_a_dropped_stream_to_trio_websocket_errors() -> None:
    async def reject(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        await stream.send_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy")

    async with raw_server(reject) as port:
        with pytest.raises(ConnectionRejected) as info:
            await client_to(port)
        assert info.value.status_code == 503 and info.value.body == b"busy"

    async def hang_up(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)

    async with raw_server(hang_up) as port:
        with pytest.raises(ConnectionClosed) as closed:
            await client_to(port)
        assert closed.value.reason.code == 1006

    async def garbage(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        await stream.send_all(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")

    async with raw_server(garbage) as port:
        with pytest.raises(HandshakeError):
            await client_to(port)

    async def drop(stream: trio.SocketStream) -> None:
        await accept_upgrade(stream, WSConnection(ConnectionType.SERVER))
        await stream.send_all(text("only"))

    async with raw_server(drop) as port:
        ws = await client_to(port)
        assert await ws.get_message() == b"only"
        with pytest.raises(ConnectionClosed) as dropped:
            await ws.get_message()
        assert dropped.value.reason.code == 1006 and dropped.value.reason.reason is None


async def test_invalid_utf8_in_a_text_frame_is_repaired_not_a_close(autojump_clock, caplog) -> None:
    """trio-websocket closed the connection with 1007 on a text frame that is not UTF-8; owc's policy for a
    hostile frame is to repair it (replacement characters), log it and go on."""
    caplog.set_level(logging.WARNING)
    handler = RecordingHandler()
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN, handler) as client:
            conn = await client.wait_connection()
            await handler.until(lambda: handler.resyncs)
            payload = b'{"type":"event","event":"tick","payload":{"ts":7,"note":"bad \xff byte"}}'
            await sim.connection().ws._stream.send_all(text(payload))  # the raw frame: trio-websocket sends str
            tick = await handler.until(lambda: [e for _, e in handler.events if isinstance(e, Tick) and e.ts == 7])
            assert tick[0].raw["note"] == "bad \ufffd byte"
            assert any("protocol.frame_repaired" in r.getMessage() for r in caplog.records)
            assert not conn.closed and client.connections_opened == 1


# ------------------------------------------------------------------------------------- a web page, not a WebSocket


@pytest.mark.parametrize(
    ("status", "reason", "line"),
    [
        (
            200,
            b"OK",
            "the Gateway URL answered HTTP 200 OK (not a WebSocket endpoint): check --gateway / OWC_GATEWAY_URL",
        ),
        (
            404,
            b"Not Found",
            "the Gateway URL answered HTTP 404 Not Found (not a WebSocket endpoint): check --gateway / OWC_GATEWAY_URL",
        ),
        (
            502,
            b"Bad Gateway",
            "the Gateway URL answered HTTP 502 Bad Gateway (the Gateway, or a proxy in front of it, is not ready yet)",
        ),
        (  # a hostile reason: control characters dropped, cut short
            404,
            b"Nope\x1b[31m <script>" + b"x" * 200,
            "the Gateway URL answered HTTP 404 Nope[31m <script>xxxxxxxxxxxxxxxxxxxxxx~ (not a WebSocket endpoint):"
            " check --gateway / OWC_GATEWAY_URL",
        ),
    ],
)
async def test_a_web_page_is_one_line_never_the_page(status: int, reason: bytes, line: str) -> None:
    """Issue 24 item 13: a Gateway URL that answers with an HTTP page printed the page or a raw tuple of it
    (trio-websocket's ``ConnectionRejected`` text). Now one line: the status and its cleaned reason. What is kept
    of the body is its start (4 KiB), for code that wants it; the rest is not even read."""
    from http_page import PAGE, answer, http_page_server

    from owc.gateway import NotAWebSocket

    async with http_page_server(answer(status, reason)) as (port, requests):
        with pytest.raises(ConnectionRejected) as info:
            await client_to(port)
    assert isinstance(info.value, NotAWebSocket) and info.value.status_code == status
    assert str(info.value) == line
    assert requests and requests[0].startswith(b"GET / HTTP/1.1") and b"upgrade: websocket" in requests[0].lower()
    assert info.value.body == PAGE[: protocol_websocket.MAX_REJECTION_BODY]


async def test_an_endless_page_is_not_read_to_its_end() -> None:
    """A body that never ends (or is 1 GB) costs 4 KiB and no wait: the handshake is rejected once that much came."""
    from owc.gateway import NotAWebSocket

    async def endless(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000000000\r\n\r\n")
        with contextlib.suppress(trio.BrokenResourceError):
            while True:
                await stream.send_all(b"<p>more</p>" * 1000)

    async with raw_server(endless) as port:
        with pytest.raises(NotAWebSocket) as info:
            await client_to(port)
    assert len(info.value.body) == protocol_websocket.MAX_REJECTION_BODY


def test_an_answer_that_is_not_http_is_named_not_quoted() -> None:
    """h11 quotes the line it could not read (a page's first line, any bytes): owc keeps its words, not the quote."""
    client = ClientWebSocket("h", "/")
    client.handshake_request()
    with pytest.raises(HandshakeFailed) as info:
        client.receive_data(b"<html><body>SECRET-LOOKING PAGE LINE\r\n\r\n")
    assert str(info.value) == "the server's handshake answer is not HTTP (illegal status line)"
