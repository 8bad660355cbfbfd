"""Every lock-taking transaction owc makes, timed from the moment it holds the lock to its commit.

Why from the wire and not from owc's ``on_hold`` callback: that callback starts its timer after the locked read,
and the issue's goal is the hold from ``BEGIN IMMEDIATE`` (SQLite: the database-wide write lock is taken there)
or ``SELECT ... FOR UPDATE`` / the ``UPDATE`` of the chat row (PostgreSQL: the row lock) to the moment the lock
is released (``Hold`` says exactly where each starts). SQLAlchemy's engine events see those statements on any
engine in the process, whoever made it, and the commit / rollback is timed by wrapping the dialect's ``do_commit``
/ ``do_rollback`` (the DBAPI call that releases the lock), so the figures hold whatever owc's store does inside its
transactions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine


@dataclass(frozen=True)
class Hold:
    """One lock-taking transaction. SQLite: the lock is held from the moment ``BEGIN IMMEDIATE`` returns (before
    that, the transaction waited for it: ``wait``). PostgreSQL: from the moment ``SELECT ... FOR UPDATE`` or the
    ``UPDATE`` of the chat row is sent (the row lock is taken inside that statement; under contention its wait is
    inside the hold: a figure taken beside another writer says so)."""

    start: float  # time.monotonic() when the lock was taken (comparable across processes on Linux)
    seconds: float  # from then to the end of the commit / rollback: the lock hold
    wait: float  # seconds the locking statement waited for the lock (SQLite; 0 for PostgreSQL)
    committed: bool
    backend: str  # "sqlite" or "postgresql"


def _locks(backend: str, statement: str) -> bool:
    """The statement that takes the lock: SQLite's ``BEGIN IMMEDIATE``; on PostgreSQL ``SELECT ... FOR UPDATE`` or
    an ``UPDATE`` of the ``chat`` row (owc's short-hold write takes the row lock in its conditional ``UPDATE``, alone
    or as the ``WITH saved AS (UPDATE chat ...)`` of the statement that also writes the message's row)."""
    if backend == "sqlite":
        return statement.lstrip()[:15].upper() == "BEGIN IMMEDIATE"
    text = statement.upper()
    start = text.lstrip()
    return (
        "FOR UPDATE" in text
        or start.startswith("UPDATE CHAT SET")
        or (start.startswith("WITH") and "UPDATE CHAT SET" in text)
    )


class LockProbe:
    """Installed once per process; ``holds`` grows for as long as it is installed (``clear`` between figures)."""

    def __init__(self) -> None:
        self.holds: list[Hold] = []
        self._sent: dict[int, float] = {}  # connection -> when its locking statement was sent
        self._open: dict[int, tuple[float, float, str]] = {}  # connection -> (lock taken, wait, backend)
        self._patch_lock = threading.Lock()
        self._installed = False

    def install(self) -> LockProbe:
        if not self._installed:
            event.listen(Engine, "before_cursor_execute", self._before)
            event.listen(Engine, "after_cursor_execute", self._after)
            self._installed = True
        return self

    def uninstall(self) -> None:
        if self._installed:
            event.remove(Engine, "before_cursor_execute", self._before)
            event.remove(Engine, "after_cursor_execute", self._after)
            self._installed = False

    def clear(self) -> None:
        self.holds.clear()

    def since(self, start: float, end: float | None = None) -> list[Hold]:
        return [h for h in self.holds if h.start >= start and (end is None or h.start <= end)]

    def _before(self, conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        backend = conn.dialect.name
        if not _locks(backend, statement):
            return
        self._patch(conn.dialect)
        key = id(conn.connection)
        if key not in self._open and key not in self._sent:  # a second locking read keeps the first lock's time
            self._sent[key] = time.monotonic()

    def _after(self, conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        key = id(conn.connection)
        sent = self._sent.pop(key, None)
        if sent is None:
            return
        backend = conn.dialect.name
        if backend == "sqlite":
            now = time.monotonic()
            self._open[key] = (now, now - sent, backend)
        elif getattr(conn.connection.dbapi_connection, "autocommit", False):
            # A statement that is its own transaction (owc's one-statement write): its lock is released by the
            # time its reply is read, so the hold ends here (an upper bound: the reply also waited for the GIL).
            # Committed only if it wrote: owc's version-checked statement writes nothing when the row changed.
            wrote = getattr(cursor, "rowcount", -1)
            self.holds.append(Hold(sent, time.monotonic() - sent, 0.0, wrote is None or wrote != 0, backend))
        else:
            self._open[key] = (sent, 0.0, backend)

    def _patch(self, dialect: Any) -> None:
        if getattr(dialect, "_bench_lock_probe", None) is self:
            return
        with self._patch_lock:
            if getattr(dialect, "_bench_lock_probe", None) is self:
                return
            dialect.do_commit = self._ended(dialect.do_commit, committed=True)
            dialect.do_rollback = self._ended(dialect.do_rollback, committed=False)
            dialect._bench_lock_probe = self

    def _ended(self, release: Callable[[Any], None], *, committed: bool) -> Callable[[Any], None]:
        def timed(dbapi_connection: Any) -> None:
            try:
                release(dbapi_connection)
            finally:
                self._sent.pop(id(dbapi_connection), None)  # a locking statement that failed (gave up waiting)
                opened = self._open.pop(id(dbapi_connection), None)
                if opened is not None:
                    start, wait, backend = opened
                    self.holds.append(Hold(start, time.monotonic() - start, wait, committed, backend))

        return timed


def pct(values: list[float], q: float) -> float:
    """The q-quantile by rank (nearest rank, no interpolation): p99 of 200 values is the 198th smallest."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]
