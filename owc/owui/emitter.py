"""The Open WebUI emitter: owc's writers' events to real tabs, from the Trio guest (issue 12).

A writer (Trio) talks to ``owc.emit.Emitter``; inside Open WebUI this class carries each call across to the loop's
asyncio side (``TrioHost.run_in_asyncio``) and into Open WebUI's own objects, reached through a ``Surface`` (the real
one, ``OpenWebUISurface``, imports ``open_webui`` lazily; tests give a stand-in that behaves the same way):

* events go through ``get_event_emitter({user_id, chat_id, message_id}, update_db=False)`` (owc writes the
  database itself; reference ``pipe-runtime-0.12.4.md`` section 6). One emitter per message is kept while the
  message is in flight, because Open WebUI's emitter keeps the shared room's throttle state in its closure;
* a writer is an Open WebUI **task** of its chat while it writes (``create_task(redis, hold, id=chat_id)``, section
  7): tabs show the generating state, the message's ``meta.task_id`` names it, and the native Stop cancels it. The
  held coroutine only waits;
* a cancel of that task means what the stop request behind it said: Open WebUI's page calls one endpoint for its
  Stop button, Escape and "Send now", so the page hook tags each request with its control and owc's stop route
  records it before Open WebUI cancels anything (``owc.owui.page``); on a cancel the writer reads the records it
  has not read (``owc.rules.intent``): a Stop passes ``on_cancel`` to the writer; "Send now" or nothing said
  leaves the writer writing, under a new task. The hook also goes to the tabs when the message is introduced and
  to tabs that join the chat later (a page loaded before owc was);
* the live copy of the message (``save_response_stream`` keyed by that task id, section 8) lets a tab that loads
  the chat mid-run see it (``done: false`` overlay). Open WebUI looks only at tasks registered for the chat, so a
  message with no task has no overlay, and ending the task drops the copy with it.

Nothing here waits on a clock; each call ends when Open WebUI's coroutine does.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

import attrs

from owc.owui.intent_hook import install_code
from owc.owui.trio_host import HostError, OwnedTask, TrioHost
from owc.rules.intent import Intent, Mark, StopRecord, decide, mark_of, read

log = logging.getLogger("owc.owui")

#: Open WebUI's emitter for one message: ``await em(event)``.
EventEmitter = Callable[[dict[str, Any]], Awaitable[Any]]


class Surface(Protocol):
    """What owc uses of Open WebUI's process (asyncio side). Every method runs on the loop thread."""

    async def event_emitter(self, user_id: str, chat_id: str, message_id: str) -> EventEmitter | None:
        """Open WebUI's ``get_event_emitter`` for the message, without its database writes."""

    async def create_task(self, coroutine: Coroutine[Any, Any, Any], chat_id: str) -> tuple[str, asyncio.Task[Any]]:
        """Register ``coroutine`` as a task of ``chat_id`` (``open_webui.tasks.create_task``): its task id and the
        asyncio task."""

    async def save_response_stream(self, task_id: str, chat_id: str, message_id: str, output: list[Any]) -> None:
        """Keep the message's live output where ``GET /api/v1/chats/{id}`` overlays it."""

    async def clear_response_stream(self, task_id: str) -> None:
        """Drop the live output (the message is final in the database)."""

    async def stop_records(self, chat_id: str) -> tuple[StopRecord, ...]:
        """The chat's stop records (``owc.owui.page``): what each stop request said, oldest first."""

    async def message_user(self, chat_id: str, message_id: str) -> str | None:
        """The message's own ``user_id`` (None: it has none, or there is no such message)."""

    def room_sessions(self, chat_id: str) -> frozenset[str]:
        """The sessions in the chat's Socket.IO room on this worker (cheap: read on every flush)."""


@attrs.define(eq=False)
class _Task:
    """A writer's Open WebUI task: the message it writes, the id it is registered under (a new one after a cancel
    that did not stop it) and the event that lets the held coroutine end."""

    chat_id: str
    message_id: str
    user_id: str
    on_cancel: Callable[[], object]
    release: asyncio.Event
    task_id: str = ""
    #: Tells the writer (on the Trio side) the id it is registered under after a re-registration, so the
    #: message's ``meta.task_id`` names a live task (``ChatStore.set_task_id``). None: nobody to tell.
    on_task_id: Callable[[str], Awaitable[object]] | None = None
    #: One ``meta.task_id`` write at a time, each naming the newest id: the last write is the newest.
    naming: asyncio.Lock = attrs.field(factory=asyncio.Lock)
    #: A Stop was decided: ``on_cancel`` has been passed to the writer, which finalizes and closes the task.
    stopping: bool = False
    #: The writer's final ``chat:messages`` went out: nothing may put the message back to ``done: false``.
    final_sent: bool = False
    #: The live copy last saved (kept to save it again under a new task id: Open WebUI drops it with a task).
    output: list[dict[str, Any]] | None = None
    #: Set when the tabs hold the message (its first ``chat:messages``): a tab runs an ``execute`` (the page
    #: hook) only for a message it holds.
    introduced: asyncio.Event = attrs.field(factory=asyncio.Event)
    #: The stop records this task has read (``owc.rules.intent``): taken once it is registered, moved by each
    #: cancel's reading. None until taken, or if the records could not be read then (a cancel is then unknown).
    mark: Mark | None = None
    #: Set once ``mark`` was taken (a cancel right after the registration waits for it).
    marked: asyncio.Event = attrs.field(factory=asyncio.Event)
    #: One reading of the records at a time (two cancels in a row read each record once).
    reading: asyncio.Lock = attrs.field(factory=asyncio.Lock)

    @property
    def key(self) -> tuple[str, str]:
        return (self.chat_id, self.message_id)


class OwuiEmitter:
    """``owc.emit.Emitter`` over Open WebUI's socket emitter, task registry and response streams."""

    def __init__(self, host: TrioHost, surface: Surface) -> None:
        self._host = host
        self._surface = surface
        self._emitters: dict[tuple[str, str], EventEmitter] = {}
        self._tasks: dict[tuple[str, str], _Task] = {}
        #: Per chat, the room's sessions that were sent the page hook (dropped with the chat's last task).
        self._hooked: dict[str, frozenset[str]] = {}
        # The asyncio tasks the emitter starts are the host's task group's (``TrioHost.start_asyncio``); these hold
        # them by what they are for, so each ends with it (``close_task``, ``release_all``), not only with the host.
        #: Per chat, the handling of cancels in flight (ended with the chat's last task).
        self._asks: dict[str, set[OwnedTask]] = {}
        #: Decisions after a user turn's request was cancelled (ended when decided, or at shutdown).
        self._inline_asks: set[OwnedTask] = set()
        #: Per message, the ``meta.task_id`` writes in flight after a re-registration (ended with its task).
        self._namings: dict[tuple[str, str], set[OwnedTask]] = {}

    # ------------------------------------------------------------------ events

    async def emit(self, chat_id: str, message_id: str, user_id: str, event: dict[str, Any]) -> None:
        await self._host.run_in_asyncio(self._emit, chat_id, message_id, user_id, event)

    async def _emitter(self, chat_id: str, message_id: str, user_id: str) -> EventEmitter | None:
        key = (chat_id, message_id)
        em = self._emitters.get(key)
        if em is None:
            em = await self._surface.event_emitter(user_id, chat_id, message_id)
            if em is None:
                log.warning("owui.no_emitter chat=%s message=%s (Open WebUI gave none)", chat_id, message_id)
                return None
            self._emitters[key] = em
        return em

    async def _emit(self, chat_id: str, message_id: str, user_id: str, event: dict[str, Any]) -> None:
        em = await self._emitter(chat_id, message_id, user_id)
        if em is None:
            return
        task = self._tasks.get((chat_id, message_id))
        introduced = _introduces(event, message_id)
        if task is not None and introduced is True:
            task.final_sent = True  # from here on the message is final in every tab
        await em(event)
        if task is not None and introduced is False and self._tasks.get(task.key) is task:
            # The tabs have the message now: give them the page hook (an ``execute`` runs only for a message the
            # tab holds), for a page loaded before owc patched Open WebUI (every later page has it from its load).
            task.introduced.set()
            await self._install(task, em)

    # ------------------------------------------------------------------ the writer as an Open WebUI task

    async def open_task(
        self,
        chat_id: str,
        message_id: str,
        user_id: str,
        on_cancel: Callable[[], object],
        on_task_id: Callable[[str], Awaitable[object]] | None = None,
    ) -> str | None:
        """Register the message's writer as a task of its chat. A cancel of it (the page's Stop button, Escape, or
        "Send now": one endpoint for all three) means what its stop request said (``owc.rules.intent``):
        ``on_cancel`` is called (on the Trio side) only for a Stop; after a cancel the writer is registered again
        under a new id, which ``on_task_id`` is awaited with (in Trio). Returns the task id (None if Open WebUI
        refused: no Stop button then)."""
        key = (chat_id, message_id)
        if key in self._tasks:
            return self._tasks[key].task_id
        try:
            task = await self._host.run_in_asyncio(self._open_task, chat_id, message_id, user_id, on_cancel, on_task_id)
        except Exception:
            log.exception("owui.task_failed chat=%s message=%s", chat_id, message_id)
            return None
        return task.task_id

    async def _open_task(
        self,
        chat_id: str,
        message_id: str,
        user_id: str,
        on_cancel: Callable[[], object],
        on_task_id: Callable[[str], Awaitable[object]] | None,
    ) -> _Task:
        task = _Task(chat_id, message_id, user_id, on_cancel, asyncio.Event(), on_task_id=on_task_id)
        await self._register(task)
        self._tasks[task.key] = task
        log.info("owui.task_opened chat=%s message=%s task=%s", chat_id, message_id, task.task_id)
        # Taken once the task exists: a stop recorded before was not about it. (A stop whose record lands between
        # the registration and this read counts as read: its cancel is then unknown, never a wrong Stop.)
        try:
            task.mark = await self._mark(chat_id)
        finally:
            task.marked.set()  # a cancel's reading never waits on a mark that is not coming (None: unknown)
        return task

    async def _mark(self, chat_id: str) -> Mark | None:
        """A reader of the chat's stop records that starts now (None: they cannot be read)."""
        try:
            return mark_of(await self._surface.stop_records(chat_id))
        except Exception as exc:
            log.warning("owui.stop_records_unread chat=%s: %s: %s", chat_id, type(exc).__name__, exc)
            return None

    async def _register(self, task: _Task) -> None:
        """(Re-)register ``task``'s writer with Open WebUI under a new task id: a coroutine that only waits, as a
        task Open WebUI makes and owns (its Stop cancels it), ended by ``release``."""
        release = asyncio.Event()
        task.release = release  # set from here on by close_task, even while create_task is still running
        coroutine = release.wait()
        try:
            task.task_id, held = await self._surface.create_task(coroutine, task.chat_id)
        except BaseException:
            # Open WebUI may have started it (with Redis, its create_task awaits after making the asyncio task):
            # released, it ends; closed only if it never started (no "was never awaited" warning).
            release.set()
            if inspect.getcoroutinestate(coroutine) == inspect.CORO_CREATED:
                coroutine.close()
            raise

        def ended(held: asyncio.Task[Any]) -> None:
            # A done callback, not an ``except`` in the coroutine: a task cancelled before its first step never
            # runs its body, and that cancel must be heard too.
            if held.cancelled() and not release.is_set():
                self._cancelled(task)

        held.add_done_callback(ended)

    def _cancelled(self, task: _Task) -> None:
        """Open WebUI cancelled the writer's task (loop thread). Which control did it is the stop request's to
        say; the writer goes on meanwhile, and a new task keeps the chat's generating state and live copy."""
        if self._tasks.get(task.key) is not task or task.stopping:
            return
        log.info("owui.task_cancelled chat=%s message=%s task=%s", task.chat_id, task.message_id, task.task_id)
        try:
            self._host.start_asyncio(self._after_cancel, task, owner=self._asks.setdefault(task.chat_id, set()))
        except HostError:  # owc is closing: its writer ends with it, and the next process finishes the message
            log.info("owui.cancel_after_close chat=%s message=%s", task.chat_id, task.message_id)

    async def _after_cancel(self, task: _Task) -> None:
        try:
            if self._tasks.get(task.key) is not task:
                raise _Closed  # the writer closed meanwhile: nothing to register again (a Stop still counts)
            await self._register(task)
            self._name_task(task)
            if task.output is not None and self._tasks.get(task.key) is task:
                # Open WebUI dropped the live copy with the cancelled task: a tab loading the chat now must see it.
                await self._surface.save_response_stream(task.task_id, task.chat_id, task.message_id, task.output)
        except _Closed:
            pass
        except Exception:
            log.exception("owui.task_reregister_failed chat=%s message=%s", task.chat_id, task.message_id)
        # Read after the registration: a stop request that came between the cancel and it (and so found no task
        # to cancel) wrote its record before Open WebUI listed the chat's tasks, so it is read here.
        intent, said = await self._intent(task)
        log.info(
            "owui.intent chat=%s message=%s intent=%s read=%s pid=%d",
            task.chat_id,
            task.message_id,
            intent.value,
            ",".join(r.kind.value for r in said) or "nothing",
            os.getpid(),
        )
        if intent is Intent.STOP:
            self._stop(task)
        elif intent is Intent.UNKNOWN:
            await self._reannounce(task)

    def _name_task(self, task: _Task) -> None:
        """The writer was registered again: its message's ``meta.task_id`` is to name the new id (issue 24, item
        11: Open WebUI's ``/stop`` for a shared chat's reply finds the task by it). Written beside the reading,
        not before it (a database wait must not delay a Stop), by an asyncio task that ends with the writer's."""
        if task.on_task_id is None or self._tasks.get(task.key) is not task:
            return
        try:
            self._host.start_asyncio(self._write_task_id, task, owner=self._namings.setdefault(task.key, set()))
        except HostError:
            log.info("owui.task_id_after_close chat=%s message=%s", task.chat_id, task.message_id)

    async def _write_task_id(self, task: _Task) -> None:
        assert task.on_task_id is not None
        async with task.naming:  # the id read under the lock: the last write names the newest registration
            if self._tasks.get(task.key) is not task:
                return
            try:
                await self._host.run_in_trio(task.on_task_id, task.task_id)
            except Exception:
                log.exception("owui.task_id_not_saved chat=%s message=%s", task.chat_id, task.message_id)

    async def _actor(self, chat_id: str, message_id: str, user_id: str) -> str:
        """The user whose stop cancels the message's task: the message's own ``user_id`` where it has one, as Open
        WebUI's Stop reads it (``filter_task_ids_by_user_id``), else the writer's (the chat's owner). In a chat
        shared in ``continue`` mode the reply of the user who continued it is theirs, while the writer runs under
        the chat's key, its owner's (issue 24, item 13)."""
        try:
            return await self._surface.message_user(chat_id, message_id) or user_id
        except Exception:
            log.exception("owui.message_user_failed chat=%s message=%s", chat_id, message_id)
            return user_id

    async def _intent(self, task: _Task) -> tuple[Intent, tuple[StopRecord, ...]]:
        """What the stop requests this task has not read yet said (its user's: another user's stop did not cancel
        it); the task's mark moves past every record there now."""
        await task.marked.wait()
        async with task.reading:
            user_id = await self._actor(task.chat_id, task.message_id, task.user_id)
            try:
                records = await self._surface.stop_records(task.chat_id)
            except Exception as exc:
                log.warning("owui.stop_records_unread chat=%s: %s: %s", task.chat_id, type(exc).__name__, exc)
                return Intent.UNKNOWN, ()
            if task.mark is None:  # not readable when the task began: which records are this cancel's is unknown
                task.mark = mark_of(records)
                return Intent.UNKNOWN, ()
            said, task.mark = read(records, task.mark, user_id)
            return decide(said), said

    # ------------------------------------------------------------------ user turns (the Pipe's own requests)

    async def install_hook(self, chat_id: str, message_id: str, user_id: str) -> None:
        """A user turn begins (loop thread): the tabs get the page hook, so a Stop or "Send now" that ends its
        request can be told apart. ``message_id`` is Open WebUI's own reply stub, which the tabs hold."""
        em = await self._emitter(chat_id, message_id, user_id)
        if em is None:
            return
        try:
            await em({"type": "execute", "data": {"code": install_code()}})
        except Exception:
            log.exception("owui.hook_install_failed chat=%s", chat_id)
        finally:
            self._emitters.pop((chat_id, message_id), None)  # the request's own emitter serves the turn

    async def stop_mark(self, chat_id: str) -> Mark | None:
        """A user turn begins (loop thread, its request already a task of the chat): the stop records so far are
        not about it (``decide_after_request_cancel``)."""
        return await self._mark(chat_id)

    async def say(self, chat_id: str, message_id: str, user_id: str, event: dict[str, Any]) -> None:
        """One event about a user turn's message (loop thread), e.g. a status line above the reply."""
        em = await self._emitter(chat_id, message_id, user_id)
        try:
            if em is not None:
                await em(event)
        except Exception:
            log.exception("owui.say_failed chat=%s", chat_id)
        finally:
            self._emitters.pop((chat_id, message_id), None)

    def decide_after_request_cancel(
        self, chat_id: str, message_id: str, user_id: str, mark: Mark | None, on_stop: Callable[[], object]
    ) -> None:
        """A user turn's request was cancelled (loop thread, at the request task's end): read what the stop request
        behind it said; ``on_stop`` (Trio side) only for a Stop. Nothing else is done here: the request's end hands
        the run to a writer whatever was said (a Stop then aborts it)."""

        async def decide_it() -> None:
            # The request's task is Open WebUI's own reply stub's, whose user is the sender (``user_id``): no database
            # read on the dying request's way out (it would hold up Open WebUI's own cancel save and the handover).
            actor = user_id
            try:
                records = await self._surface.stop_records(chat_id)
            except Exception as exc:
                log.warning("owui.stop_records_unread chat=%s: %s: %s", chat_id, type(exc).__name__, exc)
                records = None
            said: tuple[StopRecord, ...] = ()
            if records is not None and mark is not None:
                said, _ = read(records, mark, actor)
            intent = decide(said)
            log.info(
                "owui.intent chat=%s message=%s intent=%s read=%s pid=%d (a user turn)",
                chat_id,
                message_id,
                intent.value,
                ",".join(r.kind.value for r in said) or "nothing",
                os.getpid(),
            )
            if intent is Intent.STOP:
                try:
                    self._host.run_sync_soon(on_stop)
                except HostError:
                    log.info("owui.stop_after_close chat=%s message=%s", chat_id, message_id)

        # Outside the dying request: a task of the host's group, held here until decided (cancelled by release_all).
        try:
            self._host.start_asyncio(decide_it, owner=self._inline_asks)
        except HostError:
            log.info("owui.stop_after_close chat=%s message=%s", chat_id, message_id)

    def _stop(self, task: _Task) -> None:
        """A Stop: the writer aborts the run and finalizes its message with what it has."""
        if task.stopping:
            return
        task.stopping = True
        try:
            self._host.run_sync_soon(task.on_cancel)
        except HostError:
            log.info("owui.stop_after_close chat=%s message=%s", task.chat_id, task.message_id)

    async def _reannounce(self, task: _Task) -> None:
        """Nothing said which control: the message goes on, and the tabs (a tab that pressed something marked it
        done) are told it is still being written, so they show the generating state and a Stop button again; and
        they get the hook (a tab that stopped without it gets it now: its next Stop is told)."""
        if self._tasks.get(task.key) is not task or task.stopping or task.final_sent:
            return
        em = self._emitters.get(task.key)
        if em is None:
            return
        message = {"id": task.message_id, "done": False}
        try:
            await em({"type": "chat:messages", "data": {"messages": {task.message_id: message}}})
        except Exception:
            log.exception("owui.reannounce_failed chat=%s message=%s", task.chat_id, task.message_id)
        if task.introduced.is_set():
            await self._install(task, em)

    async def _install(self, task: _Task, em: EventEmitter) -> None:
        """Send the page hook to the user's tabs on the chat (a no-op in a tab that has it)."""
        try:
            self._hooked[task.chat_id] = self._hooked.get(task.chat_id, frozenset()) | self._surface.room_sessions(
                task.chat_id
            )
            await em({"type": "execute", "data": {"code": install_code()}})
        except Exception:
            log.exception("owui.hook_install_failed chat=%s", task.chat_id)

    async def close_task(self, chat_id: str, message_id: str) -> None:
        """The writer is done with the message: its task ends (tabs leave the generating state once the chat has
        no task left) and the message's emitter and live copy go with it."""
        key = (chat_id, message_id)
        self._emitters.pop(key, None)
        task = self._tasks.pop(key, None)
        if task is not None:
            task.release.set()  # the loop thread is this thread: the held coroutine returns at its next step
        for naming in self._namings.pop(key, set()):
            naming.cancel()
        if not any(t.chat_id == chat_id for t in self._tasks.values()):
            self._hooked.pop(chat_id, None)
            for ask in self._asks.pop(chat_id, set()):
                ask.cancel()

    def release_all(self) -> None:
        """owc is shutting down: every writer's task ends (a later process finishes their messages)."""
        for key in list(self._tasks):
            self._emitters.pop(key, None)
            self._tasks.pop(key).release.set()
        for namings in self._namings.values():
            for naming in namings:
                naming.cancel()
        self._namings.clear()
        self._hooked.clear()
        for asked in list(self._inline_asks):
            asked.cancel()
        for asks in self._asks.values():
            for ask in asks:
                ask.cancel()
        self._asks.clear()

    # ------------------------------------------------------------------ the live copy

    async def save_stream(self, chat_id: str, message_id: str, output: list[dict[str, Any]]) -> None:
        if (chat_id, message_id) not in self._tasks:
            return  # Open WebUI overlays only streams of tasks registered for the chat
        await self._host.run_in_asyncio(self._save_stream, chat_id, message_id, output)

    async def _save_stream(self, chat_id: str, message_id: str, output: list[dict[str, Any]]) -> None:
        task = self._tasks.get((chat_id, message_id))
        if task is None:
            return
        task.output = output
        await self._surface.save_response_stream(task.task_id, chat_id, message_id, output)
        # A tab that joined the chat since the hook went out (a reload, a chat opened mid-run) gets it now.
        em = self._emitters.get(task.key)
        if em is not None and chat_id in self._hooked:
            if self._surface.room_sessions(chat_id) - self._hooked[chat_id]:
                await self._install(task, em)

    async def clear_stream(self, chat_id: str, message_id: str) -> None:
        task = self._tasks.get((chat_id, message_id))
        if task is not None:
            await self._host.run_in_asyncio(self._clear_stream, task)

    async def _clear_stream(self, task: _Task) -> None:
        task.output = None
        await self._surface.clear_response_stream(task.task_id)


class _Closed(Exception):
    """The writer closed its task while a cancel was being handled."""


def _introduces(event: dict[str, Any], message_id: str) -> bool | None:
    """For a ``chat:messages`` event carrying the message: True when it carries it final, False while not; None
    for any other event."""
    if event.get("type") != "chat:messages":
        return None
    messages = (event.get("data") or {}).get("messages") or {}
    message = messages.get(message_id) if isinstance(messages, dict) else None
    if not isinstance(message, dict):
        return None
    return message.get("done") is True


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

    async def create_task(self, coroutine: Coroutine[Any, Any, Any], chat_id: str) -> tuple[str, asyncio.Task[Any]]:
        # Open WebUI's own API, not an owc task: the task it makes is Open WebUI's, in its registry, so that its Stop
        # can cancel it and its tabs show the chat generating (the held coroutine only waits for ``release``). owc
        # ends it by setting ``release`` (``close_task``, ``release_all``); the AST check of owc/owui exempts this
        # call by name (``tests/test_owui_task_owners.py``).
        from open_webui.tasks import create_task

        task_id, task = await create_task(self._redis, coroutine, id=chat_id)
        return str(task_id), task

    async def save_response_stream(self, task_id: str, chat_id: str, message_id: str, output: list[Any]) -> None:
        from open_webui.tasks import save_response_stream

        await save_response_stream(self._redis, task_id, chat_id, message_id, output)

    async def clear_response_stream(self, task_id: str) -> None:
        from open_webui.tasks import clear_response_stream

        await clear_response_stream(self._redis, task_id)

    async def stop_records(self, chat_id: str) -> tuple[StopRecord, ...]:
        from owc.owui.page import stop_book

        return await stop_book(self._app).records(chat_id)

    async def message_user(self, chat_id: str, message_id: str) -> str | None:
        from open_webui.models.chats import Chats

        message = await Chats.get_message_by_id_and_message_id(chat_id, message_id)
        user_id = message.get("user_id") if isinstance(message, dict) else None
        return user_id if isinstance(user_id, str) and user_id else None

    def room_sessions(self, chat_id: str) -> frozenset[str]:
        from open_webui.socket.main import sio

        return frozenset(session_id for session_id, _ in sio.manager.get_participants("/", f"chat:{chat_id}"))
