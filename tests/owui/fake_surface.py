"""A stand-in for Open WebUI 0.12.4's process where owc's emitter touches it (``open_webui.tasks``,
``open_webui.socket.main.get_event_emitter``; reference ``pipe-runtime-0.12.4.md`` sections 6 to 8): ``create_task``
registers an asyncio task under the chat and drops the task's response stream when the task ends; ``stop_chat`` is
``POST /api/tasks/chat/{id}/stop`` without Redis behind owc's stop route (``owc.owui.page``): the request's record
first (what the page hook tagged it with, and who sent it), then every task of the chat cancelled and awaited;
``event_emitter`` returns one closure per message. Tabs are ``FakeTab``s: in the chat's room while open (the page
hook itself runs in Chromium, in ``tests/test_owui_intent_hook.py``). The real server is the W tier's."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from typing import Any

from owc.rules.intent import StopLog, StopRecord, kind_of


class FakeTab:
    """One browser tab's Socket.IO session, in the chat's room while open."""

    def __init__(self, session_id: str, user_id: str, chat_id: str) -> None:
        self.session_id = session_id
        self.user_id = user_id
        self.chat_id = chat_id


class FakeOpenWebUI:
    """Open WebUI's task registry, response streams and socket emitter, as far as owc uses them."""

    def __init__(self) -> None:
        self.tasks: dict[str, asyncio.Task[Any]] = {}
        self.item_tasks: dict[str, list[str]] = {}
        self.response_streams: dict[str, dict[str, Any]] = {}
        self.emitted: list[tuple[str, str, str, dict[str, Any]]] = []
        self.emitters_made = 0
        self._next = 0
        self.tabs: list[FakeTab] = []
        #: Sessions in a chat's room on this worker but not (yet) in the session pool's chat list, or the reverse.
        self.room_only: dict[str, set[str]] = {}
        #: (chat, message) -> the message's ``user_id`` where a test sets one (Open WebUI's stub of another user).
        self.authors: dict[tuple[str, str], str] = {}
        #: The stop records owc's stop route keeps (without Redis: in the process).
        self.stops = StopLog()
        #: Reading the records fails (Redis down).
        self.records_fail = False

    def open_tab(self, session_id: str, user_id: str, chat_id: str) -> FakeTab:
        tab = FakeTab(session_id, user_id, chat_id)
        self.tabs.append(tab)
        return tab

    def close_tab(self, tab: FakeTab) -> None:
        self.tabs.remove(tab)

    async def message_user(self, chat_id: str, message_id: str) -> str | None:
        return self.authors.get((chat_id, message_id))

    async def stop_records(self, chat_id: str) -> tuple[StopRecord, ...]:
        if self.records_fail:
            raise ConnectionError("Redis went away")
        return self.stops.records(chat_id)

    def record_stop(self, chat_id: str, said: str | None, user_id: str | None = "u") -> StopRecord | None:
        """owc's stop route: one request's record (``said``: the header, None without one), if it has a sender."""
        if user_id is None:
            return None
        record = StopRecord(uuid.uuid4().hex, kind_of(said), user_id)
        self.stops.add(chat_id, record)
        return record

    def room_sessions(self, chat_id: str) -> frozenset[str]:
        return frozenset(t.session_id for t in self.tabs if t.chat_id == chat_id) | frozenset(
            self.room_only.get(chat_id, set())
        )

    def executed(self, chat_id: str | None = None) -> list[tuple[str, str, str]]:
        """The ``execute`` events emitted (user, chat, message): the page hook's installs."""
        return [(u, c, m) for u, c, m, e in self.emitted if e.get("type") == "execute" and chat_id in (None, c)]

    async def event_emitter(self, user_id: str, chat_id: str, message_id: str) -> Any:
        self.emitters_made += 1

        async def emit(event: dict[str, Any]) -> None:
            self.emitted.append((user_id, chat_id, message_id, event))

        return emit

    async def create_task(self, coroutine: Coroutine[Any, Any, Any], chat_id: str) -> tuple[str, asyncio.Task[Any]]:
        self._next += 1
        task_id = f"t{self._next}"
        task = asyncio.create_task(coroutine)
        self.tasks[task_id] = task
        self.item_tasks.setdefault(chat_id, []).append(task_id)

        def cleanup(_task: asyncio.Task[Any]) -> None:  # Open WebUI's cleanup_task: the stream goes with the task
            self.tasks.pop(task_id, None)
            self.response_streams.pop(task_id, None)
            if task_id in self.item_tasks.get(chat_id, []):
                self.item_tasks[chat_id].remove(task_id)

        task.add_done_callback(cleanup)
        return task_id, task

    async def save_response_stream(self, task_id: str, chat_id: str, message_id: str, output: list[Any]) -> None:
        self.response_streams[task_id] = {"chat_id": chat_id, "message_id": message_id, "output": output}

    async def clear_response_stream(self, task_id: str) -> None:
        self.response_streams.pop(task_id, None)

    async def stop_chat(self, chat_id: str, said: str | None = None, user_id: str | None = "u") -> int:
        """``POST /api/tasks/chat/{id}/stop`` without Redis, from ``user_id`` with the page hook's tag ``said``
        (None: a request without one, as the API's or a hookless tab's): recorded, then each task of the chat
        cancelled and awaited."""
        self.record_stop(chat_id, said, user_id)
        stopped = 0
        for task_id in list(self.item_tasks.get(chat_id, [])):
            task = self.tasks.get(task_id)
            if task is not None:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                stopped += 1
        return stopped
