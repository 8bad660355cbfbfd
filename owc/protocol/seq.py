"""The per-connection envelope ``seq`` tracker.

The Gateway numbers the event frames it sends each connection 1, 2, 3 ... and spends a number on every
``dropIfSlow`` event it drops for a slow consumer, so a jump means at least one event was lost. Frames
without ``seq`` (``connect.challenge``) are outside the count. A new connection starts a new count: make a
new tracker (or ``reset``) per connection.

The rule: only the expected next number is in order. Any other number is a gap, and the tracker re-bases on
it: a jump forward means events were lost; a number that repeats or goes backwards means the count can no
longer vouch for the stream (the Gateway never does either). Re-basing is what keeps one absurd number (a
seq of 2^63-1) from blinding gap detection for the rest of the connection: before, ``last`` stayed at the
absurd value and every later event was "stale". A jump beyond ``ABSURD_JUMP`` (or past JavaScript's exact
integers) is flagged ``absurd`` for the log.
"""

from __future__ import annotations

import enum

import attrs

#: A forward jump larger than this is no slow consumer's loss (the Gateway would have closed it first).
ABSURD_JUMP = 1_000_000
#: ``Number.MAX_SAFE_INTEGER``: a JavaScript Gateway cannot count past it exactly.
MAX_SAFE_INTEGER = 2**53 - 1


class SeqStatus(enum.Enum):
    IN_ORDER = "in_order"
    GAP = "gap"  # a jump forward: ``missed`` numbers were lost
    REWOUND = "rewound"  # a duplicate or an older number: the count re-bases on it, counted as a gap
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
        return self.status in (SeqStatus.GAP, SeqStatus.REWOUND)

    @property
    def absurd(self) -> bool:
        """A number no honest Gateway sends: a huge jump, or past JavaScript's exact integers."""
        if self.received is None or self.expected is None or not self.is_gap:
            return False
        return self.received > MAX_SAFE_INTEGER or self.received - self.expected > ABSURD_JUMP


@attrs.define
class SeqTracker:
    """Feed it every event frame's ``seq`` in arrival order.

    ``last`` starts at 0 because a connection's first numbered event is 1: a first event numbered 3 means
    1 and 2 were dropped. Every numbered event sets ``last`` (see the module's rule).
    """

    last: int = 0

    def feed(self, seq: int | None) -> SeqResult:
        if seq is None:
            return SeqResult(SeqStatus.UNNUMBERED)
        expected = self.last + 1
        if seq == expected:
            self.last = seq
            return SeqResult(SeqStatus.IN_ORDER, expected, seq)
        self.last = seq
        if seq > expected:
            return SeqResult(SeqStatus.GAP, expected, seq)
        return SeqResult(SeqStatus.REWOUND, expected, seq)

    def reset(self) -> None:
        self.last = 0
