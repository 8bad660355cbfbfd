"""Events to Open WebUI tabs: the interface a run writer talks to, and a recording implementation.

The events are Open WebUI 0.12's own (reference section 4): ``chat:messages`` (a new message and its
parent's children; tabs add it and move their view to it), ``response:completion`` (raw Responses events
for the owner's tabs), ``chat:completion`` (output snapshots for the shared chat room, and the final one with
``done``), ``chat:active``, ``chat:message:error``. The live copy of a message in flight is kept in a
response stream, so a tab that loads the chat mid-turn sees it (Open WebUI's ``save_response_stream``).
The Open WebUI socket adapter is not built yet (the host issue); the recording emitter serves tests and the CLI.
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

import attrs


class Emitter(Protocol):
    async def emit(self, chat_id: str, message_id: str, user_id: str, event: dict[str, Any]) -> None:
        """Send one event about message ``message_id`` of chat ``chat_id`` (owned by ``user_id``)."""

    async def save_stream(self, chat_id: str, message_id: str, output: list[dict[str, Any]]) -> None:
        """Keep the in-flight output where a tab that opens the chat mid-turn finds it."""

    async def clear_stream(self, chat_id: str, message_id: str) -> None:
        """The message is final in the database: drop its live copy."""


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
    """Records every event, in order, and keeps the response streams in memory."""

    def __init__(self) -> None:
        self.events: list[Emitted] = []
        self.streams: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.streams_saved = 0

    async def emit(self, chat_id: str, message_id: str, user_id: str, event: dict[str, Any]) -> None:
        self.events.append(Emitted(chat_id, message_id, user_id, copy.deepcopy(event)))

    async def save_stream(self, chat_id: str, message_id: str, output: list[dict[str, Any]]) -> None:
        self.streams[(chat_id, message_id)] = copy.deepcopy(output)
        self.streams_saved += 1

    async def clear_stream(self, chat_id: str, message_id: str) -> None:
        self.streams.pop((chat_id, message_id), None)

    def of(self, message_id: str | None = None, type_: str | None = None) -> list[Emitted]:
        return [
            e
            for e in self.events
            if (message_id is None or e.message_id == message_id) and (type_ is None or e.type == type_)
        ]
