"""Reconnect backoff: 1 s doubling to 30 s, jittered, reset after a healthy hello.

The one reconnect timer of owc. Jitter spreads many owc processes reconnecting to one restarted Gateway;
the random source is injectable so tests can check the exact sequence.
"""

from __future__ import annotations

import random

import attrs


@attrs.define
class Backoff:
    initial: float = 1.0
    cap: float = 30.0
    jitter: float = 0.2  # each delay is scaled by a factor in [1 - jitter, 1 + jitter], never above cap
    rng: random.Random = attrs.field(factory=random.Random)
    _next: float = attrs.field(init=False, default=0.0)

    def __attrs_post_init__(self) -> None:
        self._next = self.initial

    def next_delay(self) -> float:
        base = self._next
        self._next = min(self.cap, base * 2)
        if self.jitter:
            base *= 1 + self.rng.uniform(-self.jitter, self.jitter)
        return min(self.cap, base)

    def reset(self) -> None:
        self._next = self.initial
