"""The server side of a hand-made WebSocket for harness tests that must break the rules a library would keep
(never answer a close, ping across one): the upgrade accepted by hand, then the Gateway's challenge."""

from __future__ import annotations

import base64
import hashlib

import orjson
import trio

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455's
#: What the Gateway says first on a new connection (no seq), as a text frame.
CHALLENGE = orjson.dumps({"type": "event", "event": "connect.challenge", "payload": {"nonce": "n", "ts": 1}})


def text_frame(payload: bytes) -> bytes:
    assert len(payload) < 126
    return bytes([0x81, len(payload)]) + payload


async def accept_with_challenge(stream: trio.SocketStream) -> None:
    """Read the client's upgrade request, answer 101 with its accept token, and send the challenge."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive_some(4096)
    key = next(
        line.split(b":", 1)[1].strip() for line in data.split(b"\r\n") if line.lower().startswith(b"sec-websocket-key:")
    )
    accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
    head = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "
    await stream.send_all(head + accept + b"\r\n\r\n" + text_frame(CHALLENGE))
