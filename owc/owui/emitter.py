"""The Open WebUI emitter: owc's writers' events to real tabs, from the Trio guest (issue 12).

A writer (Trio) talks to ``owc.emit.Emitter``; inside Open WebUI this class carries each call across to the loop's
asyncio side (``TrioHost.run_in_asyncio``) and into Open WebUI's own objects, reached through a ``Surface`` (the real
one, ``OpenWebUISurface``, imports ``open_webui`` lazily; tests give a stand-in that behaves the same way):

* events go through ``get_event_emitter({user_id, chat_id, message_id}, update_db=False)`` (owc writes the
  database itself; reference ``pipe-runtime-0.12.4.md`` section 6). One emitter per message is kept while the
  message is in flight, because Open WebUI's emitter keeps the shared room's throttle state in its closure;
* a writer is an Open WebUI **task** of its chat while it writes (``create_task(redis, hold, id=chat_id)``, section
  7): tabs show the generating state, the message's ``meta.task_id`` names it, and the native Stop cancels it. The
  held coroutine only waits; its cancel is passed to the writer (``on_cancel``, on the Trio side), which decides;
* the live copy of the message (``save_response_stream`` keyed by that task id, section 8) lets a tab that loads
  the chat mid-run see it (``done: false`` overlay). Open WebUI looks only at tasks registered for the chat, so a
  message with no task has no overlay, and ending the task drops the copy with it.

Nothing here waits on a clock; each call ends when Open WebUI's coroutine does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

import attrs

from owc.owui.guest import HostError, TrioHost

log = logging.getLogger("owc.owui")

#: Open WebUI's emitter for one message: ``await em(event)``.
EventEmitter = Callable[[dict[str, Any]], Awaitable[Any]]


class Surface(Protocol):
    """What owc uses of Open WebUI's process (asyncio side). Every method runs on the loop thread."""

    async def event_emitter(self, user_id: str, chat_id: str, message_id: str) -> EventEmitter | None:
        """Open WebUI's ``get_event_emitter`` for the message, without its database writes."""

    async def create_task(self, coroutine: Coroutine[Any, Any, None], chat_id: str) -> str:
        """Register ``coroutine`` as a task of ``chat_id`` (``open_webui.tasks.create_task``); its task id."""

    async def save_response_stream(self, task_id: str, chat_id: str, message_id: str, output: list[Any]) -> None:
        """Keep the message's live output where ``GET /api/v1/chats/{id}`` overlays it."""

    async def clear_response_stream(self, task_id: str) -> None:
        """Drop the live output (the message is final in the database)."""


@attrs.frozen
class _Task:
    """A writer's Open WebUI task: its id and the event that lets the held coroutine end."""

    task_id: str
    release: asyncio.Event


class OwuiEmitter:
    """``owc.emit.Emitter`` over Open WebUI's socket emitter, task registry and response streams."""

    def __init__(self, host: TrioHost, surface: Surface) -> None:
        self._host = host
        self._surface = surface
        self._emitters: dict[tuple[str, str], EventEmitter] = {}
        self._tasks: dict[tuple[str, str], _Task] = {}

    # ------------------------------------------------------------------ events

    async def emit(self, chat_id: str, message_id: str, user_id: str, event: dict[str, Any]) -> None:
        await self._host.run_in_asyncio(self._emit, chat_id, message_id, user_id, event)

    async def _emit(self, chat_id: str, message_id: str, user_id: str, event: dict[str, Any]) -> None:
        key = (chat_id, message_id)
        em = self._emitters.get(key)
        if em is None:
            em = await self._surface.event_emitter(user_id, chat_id, message_id)
            if em is None:
                log.warning("owui.no_emitter chat=%s message=%s (Open WebUI gave none)", chat_id, message_id)
                return
            self._emitters[key] = em
        await em(event)

    # ------------------------------------------------------------------ the writer as an Open WebUI task

    async def open_task(self, chat_id: str, message_id: str, on_cancel: Callable[[], object]) -> str | None:
        """Register the message's writer as a task of its chat; ``on_cancel`` is called (on the Trio side) if Open
        WebUI cancels it (the Stop button, Escape, or "Send now": the page calls one endpoint for all three).
        Returns the task id (None if Open WebUI refused: the writer goes on without a Stop button)."""
        key = (chat_id, message_id)
        if key in self._tasks:
            return self._tasks[key].task_id
        try:
            task = await self._host.run_in_asyncio(self._open_task, chat_id, message_id, on_cancel)
        except Exception:
            log.exception("owui.task_failed chat=%s message=%s", chat_id, message_id)
            return None
        self._tasks[key] = task
        return task.task_id

    async def _open_task(self, chat_id: str, message_id: str, on_cancel: Callable[[], object]) -> _Task:
        release = asyncio.Event()

        async def hold() -> None:
            try:
                await release.wait()
            except asyncio.CancelledError:
                try:
                    self._host.run_sync_soon(on_cancel)  # the writer decides; this task is over either way
                except HostError:
                    log.info("owui.task_cancelled_after_close chat=%s message=%s", chat_id, message_id)
                raise

        coroutine = hold()
        try:
            task_id = await self._surface.create_task(coroutine, chat_id)
        except BaseException:
            coroutine.close()  # never started: no "was never awaited" warning
            raise
        task = _Task(task_id=task_id, release=release)
        log.info("owui.task_opened chat=%s message=%s task=%s", chat_id, message_id, task_id)
        return task

    async def close_task(self, chat_id: str, message_id: str) -> None:
        """The writer is done with the message: its task ends (tabs leave the generating state once the chat has
        no task left) and the message's emitter and live copy go with it."""
        key = (chat_id, message_id)
        self._emitters.pop(key, None)
        task = self._tasks.pop(key, None)
        if task is not None:
            task.release.set()  # the loop thread is this thread: the held coroutine returns at its next step

    def release_all(self) -> None:
        """owc is shutting down: every writer's task ends (a later process finishes their messages)."""
        for key in list(self._tasks):
            self._emitters.pop(key, None)
            self._tasks.pop(key).release.set()

    # ------------------------------------------------------------------ the live copy

    async def save_stream(self, chat_id: str, message_id: str, output: list[dict[str, Any]]) -> None:
        task = self._tasks.get((chat_id, message_id))
        if task is None:
            return  # Open WebUI overlays only streams of tasks registered for the chat
        await self._host.run_in_asyncio(self._surface.save_response_stream, task.task_id, chat_id, message_id, output)

    async def clear_stream(self, chat_id: str, message_id: str) -> None:
        task = self._tasks.get((chat_id, message_id))
        if task is not None:
            await self._host.run_in_asyncio(self._surface.clear_response_stream, task.task_id)


class OpenWebUISurface:
    """The real ``Surface``: Open WebUI 0.12.4's own functions, imported when first used (owc imports without
    Open WebUI installed). ``app`` is Open WebUI's FastAPI app (``__request__.app`` or the Event's ``__app__``):
    its ``state.redis`` is the task registry's Redis when Open WebUI runs with one, else None."""

    def __init__(self, app: Any) -> None:
        self._app = app

    @property
    def _redis(self) -> Any:
        return getattr(getattr(self._app, "state", None), "redis", None)

    async def event_emitter(self, user_id: str, chat_id: str, message_id: str) -> EventEmitter | None:
        from open_webui.socket.main import get_event_emitter

        info = {"user_id": user_id, "chat_id": chat_id, "message_id": message_id}
        emitter: EventEmitter | None = await get_event_emitter(info, update_db=False)
        return emitter

    async def create_task(self, coroutine: Coroutine[Any, Any, None], chat_id: str) -> str:
        from open_webui.tasks import create_task

        task_id, _ = await create_task(self._redis, coroutine, id=chat_id)
        return str(task_id)

    async def save_response_stream(self, task_id: str, chat_id: str, message_id: str, output: list[Any]) -> None:
        from open_webui.tasks import save_response_stream

        await save_response_stream(self._redis, task_id, chat_id, message_id, output)

    async def clear_response_stream(self, task_id: str) -> None:
        from open_webui.tasks import clear_response_stream

        await clear_response_stream(self._redis, task_id)
