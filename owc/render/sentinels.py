"""Silent sentinels: texts an agent says when it means "nothing to show" (kept in one place).

A run whose only text is one of these gets no message; a run that ran tools and then said one shows its tool
cards and no text. Text that is still a prefix of a sentinel (``NO_RE``) is held back until it either
completes the sentinel or diverges from it.

The rule is the real Gateway's (2026.9.6, ``src/auto-reply/tokens.ts``: ``isSilentReplyText`` and
``NON_DELIVERABLE_REPLY_TOKENS``): a text is silent when it is one of the tokens, in any case, possibly
repeated (``NO_REPLY NO_REPLY``), possibly wrapped in punctuation (``NO_REPLY.``), with any whitespace around.
"""

from __future__ import annotations

import re
import unicodedata

SILENT_SENTINELS: tuple[str, ...] = ("NO_REPLY", "ANNOUNCE_SKIP", "REPLY_SKIP", "HEARTBEAT_OK")

_EXACT = tuple(re.compile(rf"^\s*{re.escape(t)}(?:\s+{re.escape(t)})*\s*$", re.IGNORECASE) for t in SILENT_SENTINELS)


def _strip_edge_punctuation(text: str) -> str:
    start, end = 0, len(text)
    while start < end and unicodedata.category(text[start]).startswith("P"):
        start += 1
    while end > start and unicodedata.category(text[end - 1]).startswith("P"):
        end -= 1
    return text[start:end]


def is_silent(text: str) -> bool:
    if not text or len(text) > 200:  # the tokens, even repeated a few times, are short
        return False
    bare = _strip_edge_punctuation(text.strip())
    return any(rx.match(text) or rx.match(bare) for rx in _EXACT)


def may_become_silent(text: str) -> bool:
    """Empty, a sentinel, or a prefix of one: not yet known to be something to show."""
    stripped = text.strip()
    if not stripped or is_silent(stripped):
        return True
    upper = stripped.upper()
    return any(s.startswith(upper) for s in SILENT_SENTINELS)
