"""A ``ConnectionHandler`` that records everything, and lets a test wait (without a clock) for a state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from owc.gateway import CloseInfo, GatewaySession, HelloInfo, Resync
from owc.protocol import Event


class RecordingHandler:
    def __init__(self) -> None:
        self.events: list[tuple[str, Event]] = []  # (session id, event)
        self.hellos: list[HelloInfo] = []
        self.resyncs: list[Resync] = []
        self.closes: list[CloseInfo] = []
        self._changed = trio.Event()

    def _note(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def until(self, predicate: Callable[[], Any]) -> Any:
        while not (value := predicate()):
            await self._changed.wait()
        return value

    def on_event(self, session: GatewaySession, event: Event) -> None:
        self.events.append((session.id, event))
        self._note()

    async def on_hello(self, session: GatewaySession, info: HelloInfo) -> None:
        self.hellos.append(info)
        self._note()

    async def on_resync(self, session: GatewaySession, resync: Resync) -> None:
        self.resyncs.append(resync)
        self._note()

    async def on_closed(self, info: CloseInfo) -> None:
        self.closes.append(info)
        self._note()

    def of(self, kind: type) -> list[Any]:
        return [e for _, e in self.events if isinstance(e, kind)]
