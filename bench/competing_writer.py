"""A second process saving one chat the way Open WebUI does, to see whether owc makes it wait or give up.

Open WebUI's own chat writers run a read-modify-write transaction under the same lock owc takes (its
``_chat_transaction``: SQLite ``BEGIN IMMEDIATE``, read the chat JSON, change it, write it back, commit) and give up
when SQLite's busy timeout (5 s, Open WebUI's pragma) runs out: the user's save is then silently lost. This probe
does exactly that in a loop, in its own process (its own GIL and its own SQLite connection, as Open WebUI would
be), pausing between saves like a person using a chat, and records for every save how long ``BEGIN IMMEDIATE``
waited for the lock and whether it gave up. Times are ``time.monotonic()``, which on Linux is one clock for every
process, so the bench can cut the records into the windows when owc was busy.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson

#: Open WebUI's SQLite busy timeout (its ``_apply_sqlite_pragmas``): a writer waits this long, then gives up.
BUSY_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Save:
    start: float  # monotonic, when BEGIN IMMEDIATE was sent
    wait: float  # seconds BEGIN IMMEDIATE took (the lock wait), or until it gave up
    hold: float  # seconds from the lock to the commit (0 for a give-up)
    gave_up: bool


def _probe(path: str, chat_id: str, pause: float, stop: Any, out: Any) -> None:
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    db.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
    saves: list[tuple[float, float, float, bool]] = []
    out.send("ready")
    n = 0
    while not stop.is_set():
        start = time.monotonic()
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # "database is locked": the busy timeout ran out, the save is lost
            saves.append((start, time.monotonic() - start, 0.0, True))
            time.sleep(pause)
            continue
        locked = time.monotonic()
        try:
            (raw,) = db.execute("SELECT chat FROM chat WHERE id = ?", (chat_id,)).fetchone()
            chat = orjson.loads(raw)
            n += 1
            chat["title"] = f"Renamed by the competing writer ({n})"
            db.execute(
                "UPDATE chat SET chat = ?, title = ?, updated_at = ? WHERE id = ?",
                (orjson.dumps(chat).decode(), chat["title"], int(time.time()), chat_id),
            )
            db.execute("COMMIT")
            saves.append((start, locked - start, time.monotonic() - locked, False))
        except sqlite3.OperationalError:
            db.execute("ROLLBACK")
            saves.append((start, time.monotonic() - start, 0.0, True))
        time.sleep(pause)
    db.close()
    out.send(saves)


def _probe_pg(url: str, chat_id: str, pause: float, stop: Any, out: Any) -> None:
    """``_probe`` on PostgreSQL, as Open WebUI's ``_chat_transaction`` runs there: ``SELECT ... FOR UPDATE`` (the row
    lock; its wait is the save's wait), read, change the title, write back, commit. A wait past ``BUSY_TIMEOUT_S``
    (``lock_timeout``, the same bound) counts as a give-up, as on SQLite."""
    import psycopg

    db = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"))
    db.execute(f"SET lock_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    db.commit()
    saves: list[tuple[float, float, float, bool]] = []
    out.send("ready")
    n = 0
    while not stop.is_set():
        start = time.monotonic()
        try:
            row = db.execute("SELECT chat::text FROM chat WHERE id = %s FOR UPDATE", (chat_id,)).fetchone()
        except psycopg.errors.LockNotAvailable:
            db.rollback()
            saves.append((start, time.monotonic() - start, 0.0, True))
            time.sleep(pause)
            continue
        locked = time.monotonic()
        chat = orjson.loads(row[0])  # type: ignore[index]
        n += 1
        chat["title"] = f"Renamed by the competing writer ({n})"
        db.execute(
            "UPDATE chat SET chat = %s::json, title = %s, updated_at = %s WHERE id = %s",
            (orjson.dumps(chat).decode(), chat["title"], int(time.time()), chat_id),
        )
        db.commit()
        saves.append((start, locked - start, time.monotonic() - locked, False))
        time.sleep(pause)
    db.close()
    out.send(saves)


@contextmanager
def competing_writer(path: str, chat_id: str, *, pause: float) -> Iterator[list[Save]]:
    """Run the probe in a spawned process for the block; the list it yields is filled with every save on exit.
    ``path``: a SQLite file, or a ``postgresql`` URL (``_probe_pg``)."""
    spawn = multiprocessing.get_context("spawn")
    receive, send = spawn.Pipe(duplex=False)
    stop = spawn.Event()
    target = _probe_pg if path.startswith("postgresql") else _probe
    process = spawn.Process(target=target, args=(path, chat_id, pause, stop, send), daemon=True, name="bench-owui")
    process.start()
    saves: list[Save] = []
    try:
        if not receive.poll(60) or receive.recv() != "ready":
            raise RuntimeError("the competing writer did not start")
        yield saves
    finally:
        stop.set()
        if receive.poll(30):
            saves.extend(Save(*row) for row in receive.recv())
        process.join(10)
        if process.is_alive():
            process.terminate()
            process.join(5)
