"""Steps a simulated model plays for a run, and the default responder.

A run the simulator starts by itself (a ``chat.send`` from a client, a restart recovery at boot) plays a list
of steps. Tests and scenario files drive other runs step by step through the same ``SimRun`` methods.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

#: The offline Gateway's fake model answers every turn with this text (reference offline-gateway).
CANNED_ANSWER = "Hello from the fake model. This is a canned answer."
#: What the real ``read`` tool answered the fake model's argument-less call with (frames_tool.jsonl).
READ_VALIDATION_ERROR = (
    'Validation failed for tool "read":\n  - path: must have required properties path\n\nReceived arguments:\n{}'
)


@attrs.frozen
class Text:
    """Assistant text, streamed as one delta per chunk (``chunks`` splits it on spaces by default)."""

    text: str
    chunks: tuple[str, ...] | None = None

    def deltas(self) -> tuple[str, ...]:
        if self.chunks is not None:
            return self.chunks
        words = self.text.split(" ")
        return tuple(w if i == 0 else " " + w for i, w in enumerate(words) if w or i == 0)


@attrs.frozen
class Tool:
    name: str
    args: Any = attrs.field(factory=dict)
    result: Any = ""
    is_error: bool = False
    call_id: str | None = None


@attrs.frozen
class Hold:
    """Keep the run active until the test (or a ``chat.abort``) ends it: a model that is still thinking."""


@attrs.frozen
class Delay:
    """Wait ``seconds`` on Trio's clock (MockClock in tests) between steps."""

    seconds: float


@attrs.frozen
class End:
    state: str = "final"  # final | error | aborted
    yielded: bool = False
    error: str | None = None
    stop_reason: str | None = None


Step = Text | Tool | Hold | Delay | End
#: ``(session_key, message) -> steps`` for a ``chat.send`` run.
Responder = Callable[[str, str], Sequence[Step]]
#: ``(session_key, source_run_id) -> steps`` for a restart-recovery run.
RecoveryScript = Callable[[str, str | None], Sequence[Step]]


def fake_model_responder(session_key: str, message: str) -> Sequence[Step]:
    """Behaves like the offline Gateway's fake model: ``USE_TOOL`` makes it call ``read`` once (which the
    real tool rejects) before answering; ``ECHO_TOOL`` says the answer's first word before that call (so the
    answer starts with an earlier item's text); ``SLOW`` makes it start answering and then hold (after two
    words with ``ECHO_TOOL``: the conformance tier stops it there)."""
    steps: list[Step] = []
    echo = "ECHO_TOOL" in message
    if echo:
        steps.append(Text(CANNED_ANSWER.split(" ")[0]))
    if "USE_TOOL" in message or echo:
        steps.append(Tool("read", {}, result=READ_VALIDATION_ERROR, is_error=True, call_id="call_fake1"))
    if "SLOW" in message:
        return [*steps, Text("Hello from" if echo else "Hello"), Hold()]
    return [*steps, Text(CANNED_ANSWER), End()]


def default_recovery(session_key: str, source_run_id: str | None) -> Sequence[Step]:
    return [Text("Recovered after the Gateway restart."), End()]
