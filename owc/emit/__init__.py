"""Events to Open WebUI tabs: the interface a run writer talks to, and a recording implementation.

The events are Open WebUI 0.12's own (reference section 4): ``chat:messages`` (a new message and its
parent's children; tabs add it and move their view to it), ``response:completion`` (raw Responses events
for the owner's tabs), ``chat:completion`` (output snapshots for the shared chat room, and the final one with
``done``), ``chat:active``, ``chat:message:error``. The live copy of a message in flight is kept in a
response stream, so a tab that loads the chat mid-turn sees it (Open WebUI's ``save_response_stream``). While
a writer holds a message it is an Open WebUI task of the chat (``open_task``): the tabs show the generating state,
and a cancel of that task (Stop) reaches the writer. The Open WebUI implementation is ``owc.owui.emitter``; the
recording emitter serves tests and benches.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import attrs
import trio

from owc.render.frozen import own


class Emitter(Protocol):
    async def emit(self, chat_id: str, message_id: str, user_id: str, event: dict[str, Any]) -> None:
        """Send one event about message ``message_id`` of chat ``chat_id`` (owned by ``user_id``)."""

    async def save_stream(self, chat_id: str, message_id: str, output: list[dict[str, Any]]) -> None:
        """Keep the in-flight output where a tab that opens the chat mid-turn finds it."""

    async def clear_stream(self, chat_id: str, message_id: str) -> None:
        """The message is final in the database: drop its live copy."""

    async def open_task(
        self,
        chat_id: str,
        message_id: str,
        user_id: str,
        on_cancel: Callable[[], object],
        on_task_id: Callable[[str], Awaitable[object]] | None = None,
    ) -> str | None:
        """The writer of ``message_id`` (owned by ``user_id``) is at work: register it as a task of its chat (the
        tabs' generating state and Stop button); ``on_cancel`` is called if the tabs stop it (a Stop, not "Send
        now": ``owc.rules.intent``). Returns the task id (the message's ``meta.task_id``), or None where there are
        no tasks. Asked again for the same message, the same task. A cancel that was not a Stop registers the
        writer again under a new id: ``on_task_id`` is awaited with it (in Trio), so the message can name it."""

    async def close_task(self, chat_id: str, message_id: str) -> None:
        """The writer is done with ``message_id`` (final, or held by another writer): its task ends."""


class NoTasks:
    """For emitters with no tabs to show a generating state: tasks are not kept."""

    async def open_task(
        self,
        chat_id: str,
        message_id: str,
        user_id: str,
        on_cancel: Callable[[], object],
        on_task_id: Callable[[str], Awaitable[object]] | None = None,
    ) -> str | None:
        return None

    async def close_task(self, chat_id: str, message_id: str) -> None:
        return None


@attrs.frozen
class Emitted:
    chat_id: str
    message_id: str
    user_id: str
    event: dict[str, Any]

    @property
    def type(self) -> str:
        return self.event.get("type", "")


class RecordingEmitter:
    """Records every event, in order, and keeps the response streams and the writers' tasks in memory. A test
    presses a tab's Stop with ``cancel_task``.

    What it records cannot change later: frozen parts (the renderer's items, ``owc.render.frozen``) are shared,
    everything still mutable is copied (``own``). A deep copy of every event and every live copy was the largest
    cost of a long run end to end (12.8 %), and it grew with the run."""

    def __init__(self) -> None:
        self.events: list[Emitted] = []
        self.streams: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.streams_saved = 0
        #: Open tasks: (chat, message) -> (task id, on_cancel).
        self.tasks: dict[tuple[str, str], tuple[str, Callable[[], object]]] = {}
        #: Per open task, the writer's ``on_task_id`` (told the new id by ``reregister_task``).
        self.task_namers: dict[tuple[str, str], Callable[[str], Awaitable[object]]] = {}
        self.tasks_opened = 0
        self._changed = trio.Event()

    def _moved(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Wait, without a clock, until ``predicate`` holds; re-checked after every event or live-copy save."""
        while not predicate():
            await self._changed.wait()

    async def open_task(
        self,
        chat_id: str,
        message_id: str,
        user_id: str,
        on_cancel: Callable[[], object],
        on_task_id: Callable[[str], Awaitable[object]] | None = None,
    ) -> str | None:
        key = (chat_id, message_id)
        if key not in self.tasks:
            self.tasks_opened += 1
            self.tasks[key] = (f"task-{self.tasks_opened}", on_cancel)
            if on_task_id is not None:
                self.task_namers[key] = on_task_id
        return self.tasks[key][0]

    async def close_task(self, chat_id: str, message_id: str) -> None:
        self.tasks.pop((chat_id, message_id), None)
        self.task_namers.pop((chat_id, message_id), None)

    async def reregister_task(self, chat_id: str, message_id: str) -> str | None:
        """A cancel that was not a Stop ("Send now", or nobody said): the writer goes on under a new task id, and
        is told it as Open WebUI's emitter tells it. The new id (None if there was no task)."""
        key = (chat_id, message_id)
        if key not in self.tasks:
            return None
        self.tasks_opened += 1
        task_id = f"task-{self.tasks_opened}"
        self.tasks[key] = (task_id, self.tasks[key][1])
        namer = self.task_namers.get(key)
        if namer is not None:
            await namer(task_id)
        return task_id

    def cancel_task(self, chat_id: str, message_id: str) -> bool:
        """A Stop (the page said so, ``owc.rules.intent``): the task ends, and its writer hears of it. False if
        there was none."""
        task = self.tasks.pop((chat_id, message_id), None)
        self.task_namers.pop((chat_id, message_id), None)
        if task is None:
            return False
        task[1]()
        return True

    async def emit(self, chat_id: str, message_id: str, user_id: str, event: dict[str, Any]) -> None:
        self.events.append(Emitted(chat_id, message_id, user_id, own(event)))
        self._moved()

    async def save_stream(self, chat_id: str, message_id: str, output: list[dict[str, Any]]) -> None:
        self.streams[(chat_id, message_id)] = own(output)
        self.streams_saved += 1
        self._moved()

    async def clear_stream(self, chat_id: str, message_id: str) -> None:
        self.streams.pop((chat_id, message_id), None)

    def of(self, message_id: str | None = None, type_: str | None = None) -> list[Emitted]:
        return [
            e
            for e in self.events
            if (message_id is None or e.message_id == message_id) and (type_ is None or e.type == type_)
        ]
