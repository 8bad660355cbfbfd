"""What a wait in the run path waits for: a change of one chat's runs, or of anything.

Trio code waits on an ``Event`` per condition. Here the conditions are per chat: a claim waits for its chat's
claim order (``owc.rules.claim``), a recovery for its cut run's message, a reconcile pass for a run's writer, the
Pipe for its session's run to end, and each of those is moved only by a change to that chat's runs or by one that
moves every chat (a hello, a close, a tick, a pass's end). So a change says which chat it moved (``wake(chat)``),
or that it moved every chat (``wake()``), and a waiter re-checks its condition only when its chat moved: before,
every waiter re-ran its predicate on every change of any run of any chat. A wait for the whole process (the
runtime's drain and quiet, a test) waits on ``ANY``, which every change sets.

No clock: every wait ends on a change.
"""

from __future__ import annotations

from collections.abc import Callable

import trio


class Wakes:
    """The wake-ups of one keeper's waits: one event per chat some waiter waits on, and one for any change."""

    def __init__(self) -> None:
        self._any = trio.Event()
        #: Chat id -> the event its next change sets (made by the first waiter; gone once set).
        self._chats: dict[str, trio.Event] = {}

    def wake(self, chat_id: str | None = None) -> None:
        """Runs of ``chat_id`` changed (None: of every chat, or what every chat's waits read)."""
        if chat_id is None:
            for event in self._chats.values():
                event.set()
            self._chats.clear()
        elif (event := self._chats.pop(chat_id, None)) is not None:
            event.set()
        self._any.set()
        self._any = trio.Event()

    def next(self, chat_id: str | None = None) -> trio.Event:
        """The event the next change of ``chat_id`` (None: of anything) sets, taken now: a waiter that checks its
        condition and then waits must take it before it yields, or a change in between is missed."""
        if chat_id is None:
            return self._any
        event = self._chats.get(chat_id)
        if event is None:
            event = self._chats[chat_id] = trio.Event()
        return event

    async def until(self, predicate: Callable[[], bool], chat_id: str | None = None) -> None:
        """Wait, without a clock, until ``predicate`` holds; re-checked at each change of ``chat_id``'s runs (None:
        at every change)."""
        while not predicate():
            await self.next(chat_id).wait()
