"""A bare protocol-4 client for tests of the simulator (and for the conformance tier).

It is deliberately simpler than ``owc.gateway``: one task, no reconnect, no liveness. It reads frames only
when asked, so a test sees exactly what arrived and in which order.
"""

from __future__ import annotations

import math
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url
from wsproto.utilities import LocalProtocolError

from owc.protocol import ConnectParams, EventFrame, Response, decode_frame, parse_hello_ok
from owc.protocol.handshake import HelloOk


class Refused(Exception):
    def __init__(self, response: Response, close: tuple[int | None, str | None]) -> None:
        super().__init__(f"{response.error.code}: {response.error.message} (close {close[0]})")
        self.response = response
        self.close_code, self.close_reason = close


class RawClient:
    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws
        self.hello: HelloOk | None = None
        self.challenge: EventFrame | None = None
        self.backlog: deque[EventFrame] = deque()
        self.frames: list[dict[str, Any]] = []  # every frame received, in order, as JSON

    async def _read(self) -> EventFrame | Response:
        message = await self.ws.get_message()
        self.frames.append(orjson.loads(message))
        frame = decode_frame(message)
        assert isinstance(frame, (EventFrame, Response)), frame
        return frame

    async def send(self, method: str, params: Any = None, req_id: str | None = None) -> str:
        req_id = req_id or str(uuid.uuid4())
        body: dict[str, Any] = {"type": "req", "id": req_id, "method": method}
        if params is not None:
            body["params"] = params
        await self.ws.send_message(orjson.dumps(body).decode())
        return req_id

    async def request(self, method: str, params: Any = None) -> Response:
        req_id = await self.send(method, params)
        return await self.response(req_id)

    async def response(self, req_id: str) -> Response:
        while True:
            frame = await self._read()
            if isinstance(frame, Response):
                if frame.id == req_id:
                    return frame
            else:
                self.backlog.append(frame)

    async def event(self, match: Callable[[EventFrame], bool] | str | None = None) -> EventFrame:
        """The next event (that matches), from the backlog first; non-matching events are discarded."""
        if isinstance(match, str):
            kind = match
            match = lambda f: f.event == kind  # noqa: E731
        while True:
            frame = self.backlog.popleft() if self.backlog else await self._read()
            if isinstance(frame, EventFrame) and (match is None or match(frame)):
                return frame

    async def events_until(self, stop: Callable[[EventFrame], bool]) -> list[EventFrame]:
        """Every event up to and including the first for which ``stop`` holds."""
        out = []
        while True:
            frame = await self.event()
            out.append(frame)
            if stop(frame):
                return out

    async def closed(self) -> tuple[int | None, str | None]:
        """Read until the server closes; return its close code and reason."""
        try:
            while True:
                frame = await self._read()
                if isinstance(frame, EventFrame):
                    self.backlog.append(frame)
        except ConnectionClosed as exc:
            return exc.reason.code, exc.reason.reason


@asynccontextmanager
async def _open_websocket(url: str) -> AsyncIterator[WebSocketConnection]:
    """trio-websocket's ``open_websocket_url``, without the stray ``Cancelled`` its close can let out.

    A Ping that reaches trio-websocket (0.12.2) after its own close frame was sent makes its reader answer with a
    Pong that wsproto refuses in that state (``LocalProtocolError``: trio-websocket issue 184). The reader's error
    cancels the library's nursery, the close under way is cancelled, and ``open_websocket`` keeps that
    ``Cancelled`` and raises it after its nursery is gone: a ``Cancelled`` no cancelled scope owns, which the
    first nursery above takes silently, ending its block as if finished (the twelfth session's CI: the real
    Gateway pings every connection every 25 s, and a test's ``open_runtime`` block ended with no error). The
    connection was closing at the block's own end, so that shape (the refused Pong as the ``Cancelled``'s context,
    nothing cancelled here) is a finished close; any other ``Cancelled`` goes on as it came."""
    try:
        async with open_websocket_url(url, max_message_size=32 * 1024 * 1024) as ws:
            yield ws
    except trio.Cancelled as exc:
        cause = exc.__context__
        if trio.current_effective_deadline() == -math.inf or not _pong_refused_while_closing(cause):
            # A real cancel of this task, or another shape (a block that failed too: its error is the context).
            raise


def _pong_refused_while_closing(exc: BaseException | None) -> bool:
    return isinstance(exc, LocalProtocolError) and str(exc).startswith("Event Pong(") and "CLOSING" in str(exc)


@asynccontextmanager
async def raw_client(
    url: str,
    token: str | None,
    *,
    client_id: str = "gateway-client",
    mode: str = "backend",
    caps: tuple[str, ...] = ("tool-events",),
    protocol: int = 4,
    instance_id: str | None = None,
    first: dict[str, Any] | None = None,
    scopes: tuple[str, ...] = ("operator.read", "operator.write", "operator.admin"),
) -> AsyncIterator[RawClient]:
    async with _open_websocket(url) as ws:
        client = RawClient(ws)
        challenge = decode_frame(await ws.get_message())
        assert isinstance(challenge, EventFrame) and challenge.event == "connect.challenge" and challenge.seq is None
        client.challenge = challenge
        if first is not None:
            await ws.send_message(orjson.dumps(first).decode())
            yield client
            return
        params = ConnectParams(
            token=token or "",
            client_version="test",
            caps=caps,
            min_protocol=protocol,
            max_protocol=protocol,
            instance_id=instance_id,
            # The clients this plays (cron, another UI, a system sender with provenance) may need admin, unlike owc.
            scopes=scopes,
        ).to_json()
        params["client"]["id"], params["client"]["mode"] = client_id, mode
        if token is None:
            del params["auth"]
        response = await client.request("connect", params)
        if not response.ok:
            raise Refused(response, await client.closed())
        client.hello = parse_hello_ok(response.payload)
        yield client
