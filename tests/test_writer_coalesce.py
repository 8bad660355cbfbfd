"""A streaming writer's flush waits for what the reader already holds (``owc.runs.writer.coalesce``, issue 32 goal 2):
while a scheduler turn brings the run more, at most ``COALESCE_TURNS`` turns, and never on a clock."""

from __future__ import annotations

import trio
import trio.testing

from owc.runs.writer import COALESCE_TURNS, coalesce


def _versions(*values: int):
    """A version read that gives ``values`` in turn (the last one from then on): what the run's rendering was at
    each look, as a reader feeding between the writer's turns would leave it."""
    seq = list(values)

    def read() -> int:
        return seq.pop(0) if len(seq) > 1 else seq[0]

    return read


async def test_nothing_waiting_flushes_after_one_turn() -> None:
    # A paced stream: the turn brings nothing, so the flush follows at once.
    assert await coalesce(_versions(7)) == 1


async def test_waits_while_turns_bring_more_then_stops() -> None:
    # Two turns each brought an event (1 -> 2, 2 -> 3), the third brought none: three turns, one flush for all.
    assert await coalesce(_versions(1, 2, 2, 3, 3, 3)) == 3


async def test_a_flood_is_bounded() -> None:
    # Every turn brings more (a reader that never runs dry): the flush still comes after the bound.
    counter = iter(range(10**6))
    assert await coalesce(lambda: next(counter)) == COALESCE_TURNS
    assert await coalesce(lambda: next(counter), turns=3) == 3


async def test_no_clock(autojump_clock: trio.testing.MockClock) -> None:
    # Turns, never time: a flood's whole wait is no virtual time at all.
    counter = iter(range(10**6))
    before = trio.current_time()
    await coalesce(lambda: next(counter))
    assert trio.current_time() == before
