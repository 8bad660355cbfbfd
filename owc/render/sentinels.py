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
#: A letter or digit no token has (folded as the tokens' patterns fold): a text holding one is no sentinel. It is
#: never punctuation, so it survives the edge stripping too. One search, instead of eight matches and the
#: stripping, on the text of the segment a writer renders at every flush.
_FOREIGN = re.compile(
    "[^\\W_" + "".join(sorted({re.escape(c) for c in "".join(SILENT_SENTINELS) if c.isalnum()})) + "]",
    re.IGNORECASE,
)


def _strip_edge_punctuation(text: str) -> str:
    start, end = 0, len(text)
    while start < end and unicodedata.category(text[start]).startswith("P"):
        start += 1
    while end > start and unicodedata.category(text[end - 1]).startswith("P"):
        end -= 1
    return text[start:end]


def is_silent(text: str) -> bool:
    if not text or len(text) > 200 or _FOREIGN.search(text):  # the tokens, even repeated a few times, are short
        return False
    bare = _strip_edge_punctuation(text.strip())
    return any(rx.match(text) or rx.match(bare) for rx in _EXACT)


_LONGEST = max(len(s) for s in SILENT_SENTINELS)
#: How far from each end of a long text a non-blank character proves it is no sentinel (``may_become_silent``).
_EDGE = 64


def may_become_silent(text: str) -> bool:
    """Empty, a sentinel, or a prefix of one: not yet known to be something to show. Asked of the growing text
    segment on every flush, so a long one is answered from its ends: with something non-blank near both, what
    is left once stripped is longer than any sentinel, even repeated (``is_silent``'s 200), without copying it."""
    if len(text) > 2 * _EDGE + 200 and not text[:_EDGE].isspace() and not text[-_EDGE:].isspace():
        return False
    stripped = text.strip()
    if not stripped or is_silent(stripped):
        return True
    if len(stripped) > _LONGEST:
        return False  # longer than any token: no prefix of one (``upper`` never shortens a text)
    upper = stripped.upper()
    return any(s.startswith(upper) for s in SILENT_SENTINELS)
