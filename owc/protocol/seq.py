"""The per-connection envelope ``seq`` tracker.

The Gateway numbers the event frames it sends each connection 1, 2, 3 ... and spends a number on every
``dropIfSlow`` event it drops for a slow consumer, so a jump means at least one event was lost. Frames
without ``seq`` (``connect.challenge``) are outside the count. A new connection starts a new count: make a
new tracker (or ``reset``) per connection.
"""

from __future__ import annotations

import enum

import attrs


class SeqStatus(enum.Enum):
    IN_ORDER = "in_order"
    GAP = "gap"
    STALE = "stale"  # a duplicate or an older number: ignore for gap purposes
    UNNUMBERED = "unnumbered"


@attrs.frozen
class SeqResult:
    status: SeqStatus
    expected: int | None = None
    received: int | None = None

    @property
    def missed(self) -> int:
        """How many numbers were skipped (0 unless a gap)."""
        if self.status is SeqStatus.GAP and self.expected is not None and self.received is not None:
            return self.received - self.expected
        return 0

    @property
    def is_gap(self) -> bool:
        return self.status is SeqStatus.GAP


@attrs.define
class SeqTracker:
    """Feed it every event frame's ``seq`` in arrival order.

    ``last`` starts at 0 because a connection's first numbered event is 1: a first event numbered 3 means
    1 and 2 were dropped. A stale number never moves ``last`` backwards.
    """

    last: int = 0

    def feed(self, seq: int | None) -> SeqResult:
        if seq is None:
            return SeqResult(SeqStatus.UNNUMBERED)
        expected = self.last + 1
        if seq == expected:
            self.last = seq
            return SeqResult(SeqStatus.IN_ORDER, expected, seq)
        if seq > expected:
            self.last = seq
            return SeqResult(SeqStatus.GAP, expected, seq)
        return SeqResult(SeqStatus.STALE, expected, seq)

    def reset(self) -> None:
        self.last = 0
