"""A wait per condition (issue 26, item 2): a waiter re-checks its condition only when its chat's runs moved (or
something every chat's waits read), not at every change of any run (``owc/runs/wakes.py``)."""

from __future__ import annotations

import trio
import trio.testing

from owc.runs.wakes import Wakes


async def test_a_chat_waiter_rechecks_only_when_its_chat_moves() -> None:
    wakes = Wakes()
    checks: list[int] = []
    holds = False

    def predicate() -> bool:
        checks.append(1)
        return holds

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wakes.until, predicate, "a")
        await trio.testing.wait_all_tasks_blocked()
        assert len(checks) == 1
        for _ in range(5):
            wakes.wake("b")  # another chat's runs: not its condition
            await trio.testing.wait_all_tasks_blocked()
        assert len(checks) == 1
        wakes.wake("a")
        await trio.testing.wait_all_tasks_blocked()
        assert len(checks) == 2
        wakes.wake()  # every chat (a hello, a close, a tick)
        await trio.testing.wait_all_tasks_blocked()
        assert len(checks) == 3
        holds = True
        wakes.wake("a")
    assert len(checks) == 4


async def test_a_wait_for_anything_hears_every_change() -> None:
    wakes = Wakes()
    seen = 0

    def predicate() -> bool:
        nonlocal seen
        seen += 1
        return seen > 3

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wakes.until, predicate)
        for chat in ("a", "b", None):
            await trio.testing.wait_all_tasks_blocked()
            wakes.wake(chat)
    assert seen == 4


async def test_a_change_between_the_check_and_the_wait_is_not_missed() -> None:
    """The event is taken before the waiter yields (``next``): a change that lands right after it is heard."""
    wakes = Wakes()
    event = wakes.next("a")
    wakes.wake("a")
    assert event.is_set()
    assert not wakes.next("a").is_set()  # the next change gets a new one
