"""How a command ends on SIGINT / SIGTERM: ``until_signal`` for every command but ``owc run`` (which drains first:
``bridge``), and ``LateSignals``, which both use so that a second signal close behind the first never
kills the process or turns its exit code into 130 / 143."""

from __future__ import annotations

import argparse
import signal
import sys

import trio

#: The signals that stop a command.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class LateSignals:
    """SIGINT / SIGTERM ignored while the block runs, except where a Trio signal receiver inside it listens for
    them; and, once the command was told to stop (``stopping``), ignored until the process exits.

    Open it around ``trio.open_signal_receiver``. When a receiver closes, Trio restores the handlers it found and
    delivers again every signal still pending in it; and a signal may arrive while the interpreter shuts down after
    ``trio.run`` (tens of milliseconds). With Python's own handlers either was a ``KeyboardInterrupt`` (exit 130) or
    death by the signal (143 for SIGTERM) although the stop was already under way. ``SIG_IGN`` takes those late
    signals instead: the stop under way decides the exit code. A command that ended without a signal gets the
    previous handlers back (nothing is stopping it)."""

    def __init__(self) -> None:
        self.stopping = False
        self._previous: dict[int, object] = {}

    def __enter__(self) -> LateSignals:
        self._previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in STOP_SIGNALS}
        return self

    def __exit__(self, *exc_info: object) -> None:
        if not self.stopping:
            for signum, handler in self._previous.items():
                signal.signal(signum, handler)  # type: ignore[arg-type]


async def until_signal(runner, args: argparse.Namespace) -> int:
    """Run a command until it returns or SIGINT / SIGTERM arrives. The signal becomes a cancel of the whole
    tree (not a KeyboardInterrupt raised inside whichever task happens to run), so every writer's cleanup
    runs: a run that has ended is still finalized on the way out. Signals after the first change nothing."""
    result = 0
    stopped_by: int | None = None
    with LateSignals() as late, trio.open_signal_receiver(*STOP_SIGNALS) as signals:  # outlives the watcher task
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                nonlocal stopped_by
                async for signum in signals:
                    print(f"owc stopping ({signal.Signals(signum).name})", file=sys.stderr, flush=True)
                    stopped_by = signum
                    late.stopping = True
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
