"""Test bounds that fail loudly: ``bounded(seconds, what)`` instead of a bare ``trio.fail_after``.

A bare ``trio.fail_after`` raises ``TooSlowError`` only when its ``Cancelled`` comes back to it. Code inside the
block can end the ``Cancelled`` first: a library's own timeout or close path (trio-websocket's ``aclose`` drops a
``Cancelled`` while its caller is handling another exception, and its ``connect_timeout`` is never raised if the
server accepts TCP and then says nothing), or a nursery whose own scope was cancelled too. The block then ends as
if it had finished, and the test fails later on something unrelated (the twelfth session's CI: an
``UnboundLocalError`` for a variable the block never got to set).

``bounded`` decides from the deadline, not from the ``Cancelled``: when the block ends, normally or not, after its
deadline passed, it raises ``BoundExpired`` naming the bound and the step the test last said it was waiting for
(``bound.waiting("turn B's final")``); whatever the block raised is kept as the cause. ``BoundExpired`` is a
``trio.TooSlowError``, so code that expects one still catches it.

A ``Cancelled`` can also end early without the deadline: a nursery inside the block whose own scope was
cancelled (one of its tasks let a ``Cancelled`` out) takes every ``Cancelled`` in it, the block's own code's
too, and the block ends as if finished. ``bounded(..., to_the_end=True)`` catches that as well: the block calls
``bound.end()`` where its work ends (inside its innermost ``async with``), and a block that ends normally without
it fails naming its last step.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import attrs
import trio


class BoundExpired(trio.TooSlowError):
    """A test's bound ran out: the message says which bound and what the test was waiting for then."""


@attrs.define
class Bound:
    """One bound: its length, what it covers, its cancel scope and the step it is in now."""

    seconds: float
    what: str
    scope: trio.CancelScope
    step: str | None = None
    ended: bool = False

    def waiting(self, step: str) -> None:
        """Say what the block waits for from here on: the failure names the last step said."""
        self.step = step

    def end(self) -> None:
        """The block's last statement, with ``to_the_end=True``: the block ran to its end. Put it inside the
        innermost ``async with`` of the block (a nursery that ends a Cancelled lets the code after it run)."""
        self.ended = True

    @property
    def expired(self) -> bool:
        """The deadline passed (checked against the clock too: Trio marks the scope cancelled only once its
        scheduler has run after the deadline)."""
        return self.scope.cancel_called or trio.current_time() >= self.scope.deadline

    def message(self) -> str:
        waiting = f" while waiting for {self.step}" if self.step else ""
        return f"the {self.seconds:g} s bound on {self.what} expired{waiting}"


@contextmanager
def bounded(seconds: float, what: str, *, to_the_end: bool = False) -> Iterator[Bound]:
    """Run the block within ``seconds`` (Trio's clock: real seconds, or a ``MockClock``'s) and fail with
    ``BoundExpired`` when they run out, even if something inside ate the ``Cancelled``. ``to_the_end``: the block
    must also reach ``bound.end()`` when it ends normally."""
    if not seconds > 0 or math.isinf(seconds):
        raise ValueError(f"a bound must be a finite number of seconds > 0, not {seconds!r}")
    bound = Bound(seconds, what, trio.CancelScope(deadline=trio.current_time() + seconds))
    try:
        with bound.scope:
            yield bound
    except BaseException as exc:
        if bound.expired:
            raise BoundExpired(bound.message()) from exc
        raise
    if bound.expired:
        # Either this scope caught its own Cancelled (the usual way) or something inside swallowed it and the
        # block ran on: both are the bound running out.
        caught = "" if bound.scope.cancelled_caught else " (its Cancelled was swallowed inside the block)"
        raise BoundExpired(bound.message() + caught)
    if to_the_end and not bound.ended:
        waiting = f" (last step: {bound.step})" if bound.step else ""
        raise AssertionError(
            f"the block under the {seconds:g} s bound on {what} ended before its end{waiting}, with no error and "
            "its bound not expired: a Cancelled was ended inside it (a nursery whose own scope was cancelled)"
        )
