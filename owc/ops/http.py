"""``owc run``'s status endpoint: a tiny HTTP/1.1 server on Trio and h11 serving the operator's view (issue 31).

Paths: ``GET /status`` (``owc.render.operator.as_json``), ``GET /metrics`` (the Prometheus text exposition format,
``owc.render.operator.prometheus``); any other path 404, any other method 405 (``HEAD`` is answered as ``GET``
without the body). One request per connection (``Connection: close``): a scraper and ``owc status`` ask once in a
while, nothing to pool. No authentication: it listens on loopback by default, and what it says holds no token or
key (the device id, chat and run ids, the Gateway's redacted URL).

The shape is the Trio one: ``serve_status`` is started with ``nursery.start`` (it reports the address it bound, so
port 0 works in tests) and each connection is a task of the listener's nursery. Imports point inward: the renderers
are pure (``owc.render.operator``); the snapshot is whatever callable the caller passes (``Runtime.snapshot``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import attrs
import h11
import orjson
import trio

from owc import __version__
from owc.render import operator

log = logging.getLogger("owc.ops")

#: The default address of ``owc run --status-listen``: loopback, the port after the Gateway's 18789.
DEFAULT_LISTEN = "127.0.0.1:18790"
#: ``--status-listen off``: no endpoint.
OFF = "off"
#: The longest request head read (a GET has no body worth reading).
MAX_HEAD = 16 * 1024
#: A client that sends nothing whole in this many seconds is dropped: a bound on a hung peer, never a decision
#: about owc's runs.
CLIENT_TIMEOUT = 10.0

Snapshotter = Callable[[], Awaitable[operator.Snapshot]]


class ListenError(ValueError):
    """``--status-listen`` is not ``HOST:PORT`` (or ``off``): the message names the fix."""


@attrs.frozen
class Listen:
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def parse_listen(text: str) -> Listen | None:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6), or ``off`` (None). Raises ``ListenError``."""
    value = text.strip()
    if value.lower() == OFF:
        return None
    host, sep, port = value.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ListenError(
            f"--status-listen {text!r}: HOST:PORT with a port from 0 to 65535 (e.g. {DEFAULT_LISTEN}), or off"
        )
    return Listen(host, int(port))


async def serve_status(
    listen: Listen, snapshot: Snapshotter, *, task_status: trio.TaskStatus[Listen] = trio.TASK_STATUS_IGNORED
) -> None:
    """Listen on ``listen`` and answer until cancelled; reports the address bound (the real port for port 0).
    ``OSError`` when it cannot bind (the caller says so in one line)."""
    listeners = await trio.open_tcp_listeners(listen.port, host=listen.host)
    sock = listeners[0].socket
    bound = Listen(listen.host, sock.getsockname()[1])
    log.info("ops.status_listening url=%s paths=/status,/metrics", bound.url)
    task_status.started(bound)
    await trio.serve_listeners(lambda stream: _serve_one(stream, snapshot), listeners)


async def _serve_one(stream: trio.abc.Stream, snapshot: Snapshotter) -> None:
    async with stream:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        with trio.move_on_after(CLIENT_TIMEOUT):  # timer-ok: a bound on a hung client, not a decision about a run
            request = await _read_request(stream, conn)
            if request is None:
                return
            status, content_type, body = await _answer(request, snapshot)
            headers = [
                ("Content-Type", content_type),
                ("Content-Length", str(len(body))),
                ("Cache-Control", "no-store"),
                ("Connection", "close"),
                ("Server", f"owc/{__version__}"),
            ]
            data = conn.send(h11.Response(status_code=status, headers=headers))
            if request.method != b"HEAD":
                data += conn.send(h11.Data(data=body))
            data += conn.send(h11.EndOfMessage())
            try:
                await stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return


async def _read_request(stream: trio.abc.Stream, conn: h11.Connection) -> h11.Request | None:
    """The request's head, or None (the client left, or sent what is not HTTP: answered 400 where possible)."""
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError:
            try:
                await stream.send_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            return None
        if event is h11.NEED_DATA:
            try:
                data = await stream.receive_some(4096)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return None
            conn.receive_data(data)
            if not data:
                continue  # h11 then says ConnectionClosed (or a protocol error for a half request)
            continue
        if isinstance(event, h11.Request):
            return event
        return None  # ConnectionClosed, or anything else before a request


async def _answer(request: h11.Request, snapshot: Snapshotter) -> tuple[int, str, bytes]:
    path = request.target.split(b"?", 1)[0]
    if path not in (b"/status", b"/metrics"):
        return 404, "text/plain; charset=utf-8", b"Not found: owc serves /status (JSON) and /metrics (Prometheus).\n"
    if request.method not in (b"GET", b"HEAD"):
        return 405, "text/plain; charset=utf-8", b"Only GET.\n"
    snap = await snapshot()
    if path == b"/status":
        return 200, "application/json", orjson.dumps(operator.as_json(snap))
    return 200, operator.PROMETHEUS_CONTENT_TYPE, operator.prometheus(snap).encode()
