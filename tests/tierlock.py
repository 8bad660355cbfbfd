"""The one file lock the test tiers' installers share (the real Gateway, the Open WebUI venvs, the browser): an
exclusive ``flock`` beside what is being installed, so concurrent test sessions install once and never see a
half-written tree. ``flock`` has no timeout, so a waiter retries a non-blocking attempt every ``poll`` seconds
up to ``timeout`` (a harness bound on another process's install, not a rule of owc's), then raises ``fail(why)``.
The lock is released by closing the file, also when the process dies."""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Callable, Iterator
from pathlib import Path


def _sleep(seconds: float) -> None:
    time.sleep(seconds)  # timer-ok: harness waits for another process's install


@contextlib.contextmanager
def held(
    path: Path,
    *,
    timeout: float,
    poll: float,
    fail: Callable[[str], Exception],
    wait: Callable[[float], None] = _sleep,
) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` for the block. ``wait`` is the pause between attempts (a seam tests
    replace to see a waiter)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as lock:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise fail(f"another process has held {path} for over {timeout} s") from None
                wait(poll)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
