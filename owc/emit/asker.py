"""Questions to Open WebUI tabs: the interface the question desk (``owc.runs.questions``) talks to, and a
recording implementation for tests. The Open WebUI implementation is ``owc.owui.questions``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import attrs
import trio

from owc.protocol.questions import QuestionRecord


class Asker(Protocol):
    async def show(self, chat_id: str, user_id: str, record: QuestionRecord, *, session: str | None = None) -> int:
        """Show ``record`` in the tabs of ``user_id`` that have chat ``chat_id`` open (only tab ``session``, when
        given). Sent again, it is the same dialog. Returns how many tabs were sent it."""

    async def close(self, chat_id: str, user_id: str, question_id: str, status: str) -> int:
        """Close the dialog of ``question_id`` in every tab that shows it; ``status`` says what became of it."""


class NoAsker:
    """Where no tab can show a question (``owc run``: no page). The question waits at the Gateway, which expires
    it on its own clock; a chat.send answers it as plain text."""

    async def show(self, chat_id: str, user_id: str, record: QuestionRecord, *, session: str | None = None) -> int:
        return 0

    async def close(self, chat_id: str, user_id: str, question_id: str, status: str) -> int:
        return 0


@attrs.frozen
class Asked:
    kind: str  # "show" | "close"
    chat_id: str
    user_id: str
    question_id: str
    record: QuestionRecord | None = None
    status: str | None = None
    session: str | None = None


class RecordingAsker:
    """Records every show and close, in order; ``until`` waits for one without a clock."""

    def __init__(self) -> None:
        self.calls: list[Asked] = []
        self._changed = trio.Event()

    async def until(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self._changed.wait()

    def _moved(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def show(self, chat_id: str, user_id: str, record: QuestionRecord, *, session: str | None = None) -> int:
        self.calls.append(Asked("show", chat_id, user_id, record.id, record=record, session=session))
        self._moved()
        return 1

    async def close(self, chat_id: str, user_id: str, question_id: str, status: str) -> int:
        self.calls.append(Asked("close", chat_id, user_id, question_id, status=status))
        self._moved()
        return 1

    def shown(self) -> list[Asked]:
        return [c for c in self.calls if c.kind == "show"]

    def closed(self) -> list[Asked]:
        return [c for c in self.calls if c.kind == "close"]
