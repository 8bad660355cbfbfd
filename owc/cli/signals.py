"""How a command that is not ``owc run`` ends on SIGINT / SIGTERM (``owc run`` drains first: ``bridge``)."""

from __future__ import annotations

import argparse
import signal
import sys

import trio


async def until_signal(runner, args: argparse.Namespace) -> int:
    """Run a command until it returns or SIGINT / SIGTERM arrives. The signal becomes a cancel of the whole
    tree (not a KeyboardInterrupt raised inside whichever task happens to run), so every writer's cleanup
    runs: a run that has ended is still finalized on the way out."""
    result = 0
    stopped_by: int | None = None
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:  # outlives the watcher task
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                nonlocal stopped_by
                async for signum in signals:
                    print(f"owc stopping ({signal.Signals(signum).name})", file=sys.stderr, flush=True)
                    stopped_by = signum
                    nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(watch)
            result = await runner(args)
            nursery.cancel_scope.cancel()
    # A command cut short by a signal did not finish: say so the shell's way (128 + the signal's number),
    # except ``owc run`` and ``owc sim``, whose normal end is a signal.
    if stopped_by is not None and args.command in ("demo", "scenario"):
        return 128 + stopped_by
    return result
