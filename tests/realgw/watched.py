"""A recording emitter a real-Gateway test can wait on (no clock: each save of a live copy wakes it)."""

from __future__ import annotations

from typing import Any

import trio

from owc.emit import RecordingEmitter
from owc.render import output_text


class WatchedEmitter(RecordingEmitter):
    """A ``RecordingEmitter`` a test can wait on: every live copy a writer saves wakes the waiters."""

    def __init__(self) -> None:
        super().__init__()
        self._saved = trio.Event()

    async def save_stream(self, chat_id: str, message_id: str, output: list[dict[str, Any]]) -> None:
        await super().save_stream(chat_id, message_id, output)
        self._saved.set()
        self._saved = trio.Event()

    async def until_streamed(self, chat_id: str, message_id: str, text: str) -> None:
        """Until owc has streamed ``text`` into the message's live copy."""
        while text not in output_text(self.streams.get((chat_id, message_id), [])):
            await self._saved.wait()
