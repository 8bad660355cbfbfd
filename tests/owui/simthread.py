"""The Gateway simulator in a thread of its own (``trio.run``), on loopback: for tests whose own side is not Trio
(an asyncio loop hosting owc as a guest, or the real Open WebUI server in another process). Drive it with
``trio.from_thread.run_sync(fn, trio_token=token)``; ``call(token, fn)`` does that."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import trio

from owc.sim import Simulator, open_simulator

T = TypeVar("T")


@contextmanager
def simulator_thread(token: str, **kwargs: Any) -> Iterator[tuple[Simulator, trio.lowlevel.TrioToken]]:
    """A Gateway simulator in its own thread; yields it and its Trio token. ``kwargs`` go to ``open_simulator``."""
    ready, box, failed = threading.Event(), {}, []

    async def serve() -> None:
        async with open_simulator(token=token, **kwargs) as sim:
            box["sim"], box["token"], box["stop"] = sim, trio.lowlevel.current_trio_token(), trio.Event()
            ready.set()
            await box["stop"].wait()

    def main() -> None:
        try:
            trio.run(serve)
        except BaseException as exc:  # reported by the waiter below, not lost in a thread
            failed.append(exc)
            ready.set()

    thread = threading.Thread(target=main, name="owc-simulator", daemon=True)
    thread.start()
    if not ready.wait(60) or failed:
        raise RuntimeError(f"the simulator did not start: {failed[:1]}")
    try:
        yield box["sim"], box["token"]
    finally:
        trio.from_thread.run_sync(box["stop"].set, trio_token=box["token"])
        thread.join(60)


def call(token: trio.lowlevel.TrioToken, fn: Callable[[], T]) -> T:
    """Run ``fn`` in the simulator's thread (its state is Trio's; never touch it from another thread directly)."""
    return trio.from_thread.run_sync(fn, trio_token=token)
