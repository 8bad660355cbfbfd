"""Reconnect backoff: 1 s doubling to a 4 s cap while an outage is young, to 30 s once it is long; jittered; reset
after a healthy hello.

The one reconnect timer of owc. Why two caps (issue 25, item 7; NOTES "Issue 25: errors, secret and live
valves, reconnect"): a person watching a reply waits, after the Gateway is back, up to one backoff step before owc
tries again. With a single 30 s cap that wait reached 30 s for any outage longer than half a minute (a real Gateway
restart takes 20 s from its start to ready on the 2-core test box, so the attempt at 15 s failed and the next came
at 31 s). So the delays stop growing at ``watch_cap`` (4 s: the Gateway is back within 4.8 s, jitter included)
until the waits of this outage add up to ``patience`` (120 s); only then do they double on to ``cap``: an outage
that long is no restart a person sits through, and the Gateway (or many owc processes) should not be asked every
4 s for ever. The patience is counted in the delays the schedule itself gave (not read off a clock), so the whole
schedule is a pure function of the attempt number and the random source.

Jitter spreads many owc processes reconnecting to one restarted Gateway; the random source is injectable so tests
can check the exact sequence.
"""

from __future__ import annotations

import random

import attrs


@attrs.define
class Backoff:
    initial: float = 1.0
    #: The long cap, reached only after ``patience`` seconds of waiting in one outage.
    cap: float = 30.0
    jitter: float = 0.2  # each delay is scaled by a factor in [1 - jitter, 1 + jitter], never above the cap in force
    rng: random.Random = attrs.field(factory=random.Random)
    #: The cap while the outage is young (never below ``initial``, never above ``cap``).
    watch_cap: float = 4.0
    #: Seconds of waiting (the sum of the un-jittered delays given since the last reset) at ``watch_cap`` before the
    #: delays grow on to ``cap``.
    patience: float = 120.0
    _next: float = attrs.field(init=False, default=0.0)
    _waited: float = attrs.field(init=False, default=0.0)

    def __attrs_post_init__(self) -> None:
        self.reset()

    @property
    def waited(self) -> float:
        """The un-jittered delays given since the last reset, in seconds (what ``patience`` is compared with)."""
        return self._waited

    def limit(self) -> float:
        """The cap in force for the next delay."""
        if self._waited < self.patience:
            return min(self.cap, max(self.watch_cap, self.initial))
        return self.cap

    def next_delay(self) -> float:
        limit = self.limit()
        base = min(self._next, limit)
        # Doubling from the delay actually given: past the patience the delays grow 4, 8, 16, 30, not jump to 30.
        self._next = min(self.cap, base * 2)
        self._waited += base
        if self.jitter:
            base *= 1 + self.rng.uniform(-self.jitter, self.jitter)
        return min(limit, base)

    def reset(self) -> None:
        self._next = self.initial
        self._waited = 0.0
