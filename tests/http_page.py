"""A plain HTTP server on 127.0.0.1 that answers every request with one fixed answer: what a Gateway URL that
points at a web page, another server or a wrong path answers owc's WebSocket upgrade with (issue 24 item 13)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import trio

#: A page long enough that echoing it would show, with a line that must never reach a log.
PAGE = (
    b"<!doctype html><html><head><title>Control UI</title></head><body>\n"
    + b"<p>SECRET-LOOKING PAGE LINE</p>\n" * 400
    + b"</body></html>\n"
)


def answer(status: int, reason: bytes, body: bytes = PAGE, content_type: bytes = b"text/html") -> bytes:
    head = b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n" % (
        status,
        reason,
        content_type,
        len(body),
    )
    return head + body


async def _serve_one(data: bytes, requests: list[bytes], stream: trio.SocketStream) -> None:
    async with stream:
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            got += chunk
        requests.append(got)
        try:
            await stream.send_all(data)
        except trio.BrokenResourceError:
            pass  # the client had enough of the page


@asynccontextmanager
async def http_page_server(data: bytes) -> AsyncIterator[tuple[int, list[bytes]]]:
    """Serve ``data`` (a whole HTTP answer) to every connection; yields the port and the requests' heads."""
    requests: list[bytes] = []
    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(
            partial(trio.serve_tcp, partial(_serve_one, data, requests), 0, host="127.0.0.1")
        )
        yield listener.socket.getsockname()[1], requests
        nursery.cancel_scope.cancel()
