"""Silent sentinels: texts an agent says when it means "nothing to show" (kept in one place).

A run whose only text is one of these gets no message; a run that ran tools and then said one shows its tool
cards and no text. Text that is still a prefix of a sentinel (``NO_RE``) is held back until it either
completes the sentinel or diverges from it.
"""

from __future__ import annotations

SILENT_SENTINELS: tuple[str, ...] = ("NO_REPLY", "ANNOUNCE_SKIP")


def is_silent(text: str) -> bool:
    return text.strip() in SILENT_SENTINELS


def may_become_silent(text: str) -> bool:
    """Empty, a sentinel, or a prefix of one: not yet known to be something to show."""
    stripped = text.strip()
    return not stripped or any(s.startswith(stripped) for s in SILENT_SENTINELS)
