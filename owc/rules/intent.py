"""Stop or "Send now": what a cancel of a writer's Open WebUI task meant (seed 000 case 8; issue 12).

Open WebUI's page calls one endpoint (``POST /api/tasks/chat/{id}/stop``) for its Stop button, the Escape key and
"Send now" on a queued message, so the server only sees a cancel. The page knows which control it was: owc installs
a small hook in each tab on the chat that records, for every stop call the page makes, the control behind it (see
``owc.owui.intent_hook``). On a cancel owc asks the tabs; this module reads their answers and decides.

* any tab recorded a **Stop** since it was last asked: the run is stopped (aborted at the Gateway, the message
  finalized with what it has). One Stop cancels every task of the chat, so it stops every writer of the chat;
* a tab recorded **Send now** and none a Stop: the message keeps streaming to the run's own end (the queued
  message is the page's next turn);
* **no answer** (no tab on the chat, a tab without the hook, a page that never replies, a cancel from the API):
  the message keeps streaming. A run is never stopped on a guess, and nothing here waits on a clock: an
  unanswered question simply never decides.

Pure: no I/O, no Trio. The shell (``owc.owui.emitter``) asks, this decides.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

import attrs

#: What the page hook records per stop call (``owc.owui.intent_hook``).
STOP = "stop"
SEND_NOW = "send_now"
KINDS = frozenset({STOP, SEND_NOW})


class Intent(enum.Enum):
    STOP = "stop"  # stop the run, finalize with what it has
    SEND_NOW = "send_now"  # keep writing; the page sends its queued message as the next turn
    UNKNOWN = "unknown"  # nobody said: keep writing, and put the tabs back in the generating state


@attrs.frozen
class PageAnswer:
    """One tab's answer: whether it had the hook, and the controls behind the stop calls it made since owc last
    asked it (oldest first)."""

    hooked: bool
    kinds: tuple[str, ...] = ()


class BadAnswer(ValueError):
    """A tab's answer is not the hook's shape (an old hook, an error reply, a hostile page)."""


def read_answer(raw: Any) -> PageAnswer:
    """Parse a tab's reply to the question. Open WebUI answers ``{"error": ...}`` for a tab that went away; that,
    and anything that is not the hook's shape, is a ``BadAnswer`` (counts as no answer)."""
    if not isinstance(raw, dict):
        raise BadAnswer(f"not an object: {type(raw).__name__}")
    if "error" in raw:
        raise BadAnswer(f"the page did not answer: {str(raw['error'])[:200]}")
    hooked = raw.get("hook")
    if not isinstance(hooked, bool):
        raise BadAnswer("no 'hook' flag")
    kinds = raw.get("kinds", [])
    if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
        raise BadAnswer("'kinds' is not a list of strings")
    unknown = sorted({k for k in kinds if k not in KINDS})
    if unknown:
        raise BadAnswer(f"unknown kinds {unknown[:5]}")
    return PageAnswer(hooked=hooked, kinds=tuple(kinds))


def stops(answer: PageAnswer) -> bool:
    """This one answer decides alone: a Stop was recorded (whatever other tabs say, or never say)."""
    return STOP in answer.kinds


def decide(answers: Iterable[PageAnswer]) -> Intent:
    """The intent behind a cancel, from every tab that answered. A Stop anywhere wins: it is the one control that
    asks for the run to end, and the page's Stop is never recorded for anything else."""
    answers = list(answers)
    if any(stops(a) for a in answers):
        return Intent.STOP
    if any(SEND_NOW in a.kinds for a in answers):
        return Intent.SEND_NOW
    return Intent.UNKNOWN
