"""The correction of a message finished from its stream (``owc/runs/correct.py``): what it writes once the
transcript answers."""

from __future__ import annotations

from typing import Any

import pytest

from owc.runs.correct import Correction, _correct
from owc.store import Written

KEY = "agent:main:openwebui-u-c"


def _page() -> dict[str, Any]:
    """The run's transcript as ``chat.history`` gives it: its turn, a tool call and result, then the Gateway's record
    that it failed (``stopReason: "error"``, the failure's copy as its first paragraph)."""
    return {
        "sessionKey": KEY,
        "hasMore": False,
        "messages": [
            {"role": "user", "content": "Wake up.", "idempotencyKey": "R:user"},
            {
                "role": "assistant",
                "content": [{"type": "toolCall", "id": "call-1", "name": "exec", "arguments": {}}],
                "stopReason": "toolUse",
                "__openclaw": {"runId": "R"},
            },
            {"role": "toolResult", "toolCallId": "call-1", "content": "ok", "__openclaw": {"runId": "R"}},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "LLM request failed (boom)."}],
                "stopReason": "error",
                "__openclaw": {"runId": "R"},
            },
        ],
    }


class _Store:
    def __init__(self) -> None:
        self.writes: list[dict[str, Any]] = []

    async def write(self, chat_id: str, message_id: str, **kw: Any) -> Written:
        self.writes.append(kw)
        return Written({"id": message_id, **kw})


class _Emitter:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def emit(self, chat_id: str, message_id: str, user_id: str | None, event: dict[str, Any]) -> None:
        self.events.append(event)


@pytest.mark.parametrize("terminal_seen", [False, True])
async def test_a_correction_shows_the_failure_the_transcript_records_unless_the_run_ended_live(
    terminal_seen: bool,
) -> None:
    """Fuzz seed 428467: the run failed while owc was away, a later run took the session row, and ``chat.history``
    failed at its finalize: finished from the stream, with no error to show. Its correction reads the transcript
    and shows the recorded failure as a live error terminal would. A run whose own terminal owc saw live keeps that
    terminal's word (a final or aborted end is no error, whatever else says)."""

    async def request(method: str, params: Any = None) -> Any:
        assert method == "chat.history"
        return _page()

    item = Correction(KEY, "R", "c", "M", "u", error=None, content=True, terminal_seen=terminal_seen)
    store, emitter = _Store(), _Emitter()
    assert await _correct(item, request, store, emitter)  # type: ignore[arg-type]
    (write,) = store.writes
    completion = emitter.events[-1]["data"]
    if terminal_seen:
        assert write["error"] is None and "error" not in completion
    else:
        assert write["error"] and "boom" in write["error"]
        assert completion["error"]["content"] == write["error"]
