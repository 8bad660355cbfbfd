"""A ``ConnectionHandler`` that records everything, and lets a test wait (without a clock) for a state."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from owc.gateway import CloseInfo, Connection, HelloInfo, Resync
from owc.protocol import Event


class _Recorded:
    """The handler's view of one connection: hands everything to the handler with the connection."""

    def __init__(self, handler: RecordingHandler, conn: Connection) -> None:
        self.handler = handler
        self.conn = conn

    def on_event(self, event: Event) -> None:
        self.handler.on_event(self.conn, event)

    def on_gap(self) -> None:
        self.handler.gaps += 1

    async def on_hello(self, info: HelloInfo, resync: Resync) -> None:
        await self.handler.on_hello(self.conn, info, resync)

    async def on_resync(self, resync: Resync) -> None:
        await self.handler.on_resync(self.conn, resync)


class RecordingHandler:
    def __init__(self) -> None:
        self.events: list[tuple[str, Event]] = []  # (connection id, event)
        self.hellos: list[HelloInfo] = []
        self.resyncs: list[Resync] = []
        self.closes: list[CloseInfo] = []
        self.gaps = 0
        self._changed = trio.Event()

    def _note(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def until(self, predicate: Callable[[], Any]) -> Any:
        while not (value := predicate()):
            await self._changed.wait()
        return value

    def on_event(self, conn: Connection, event: Event) -> None:
        self.events.append((conn.id, event))
        self._note()

    async def on_hello(self, conn: Connection, info: HelloInfo, resync: Resync) -> None:
        self.hellos.append(info)
        self.resyncs.append(resync)
        self._note()

    async def on_resync(self, conn: Connection, resync: Resync) -> None:
        self.resyncs.append(resync)
        self._note()

    @asynccontextmanager
    async def attach(self, conn: Connection) -> AsyncIterator[_Recorded]:
        try:
            yield _Recorded(self, conn)
        finally:
            self.closes.append(conn.close_info)
            self._note()

    def of(self, kind: type) -> list[Any]:
        return [e for _, e in self.events if isinstance(e, kind)]
