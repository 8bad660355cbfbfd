"""A stand-in for Open WebUI 0.12.4's process where owc's emitter touches it (``open_webui.tasks``,
``open_webui.socket.main.get_event_emitter``; reference ``pipe-runtime-0.12.4.md`` sections 6 to 8): ``create_task``
registers an asyncio task under the chat and drops the task's response stream when the task ends; ``stop_chat``
cancels every task of the chat and awaits each, as ``POST /api/tasks/chat/{id}/stop`` does without Redis;
``event_emitter`` returns one closure per message. The real server is the W tier's."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class FakeOpenWebUI:
    """Open WebUI's task registry, response streams and socket emitter, as far as owc uses them."""

    def __init__(self) -> None:
        self.tasks: dict[str, asyncio.Task[Any]] = {}
        self.item_tasks: dict[str, list[str]] = {}
        self.response_streams: dict[str, dict[str, Any]] = {}
        self.emitted: list[tuple[str, str, str, dict[str, Any]]] = []
        self.emitters_made = 0
        self._next = 0

    async def event_emitter(self, user_id: str, chat_id: str, message_id: str) -> Any:
        self.emitters_made += 1

        async def emit(event: dict[str, Any]) -> None:
            self.emitted.append((user_id, chat_id, message_id, event))

        return emit

    async def create_task(self, coroutine: Coroutine[Any, Any, None], chat_id: str) -> str:
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
        return task_id

    async def save_response_stream(self, task_id: str, chat_id: str, message_id: str, output: list[Any]) -> None:
        self.response_streams[task_id] = {"chat_id": chat_id, "message_id": message_id, "output": output}

    async def clear_response_stream(self, task_id: str) -> None:
        self.response_streams.pop(task_id, None)

    async def stop_chat(self, chat_id: str) -> int:
        """``POST /api/tasks/chat/{id}/stop`` without Redis: cancel each task of the chat and await it."""
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
