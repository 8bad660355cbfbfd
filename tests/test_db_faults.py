"""The database misbehaves under owc with real SQLite faults (issue 11): a lock held past the run's end, a full
disk, a read-only database, a deleted database file. Each time the message is not lost: the tab is told it is
not saved yet, the run stays in the ledger, and the Gateway's next tick writes it once the database takes
writes again. The connection and other runs go on meanwhile.

The faults are SQLite's own: another connection's ``BEGIN IMMEDIATE`` (``database is locked``),
``PRAGMA max_page_count`` (``database or disk is full``, as on a full disk), ``PRAGMA query_only``
(``attempt to write a readonly database``), and the file unlinked under the open pool."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import event

from owc import ids
from owc.rules.lifecycle import State

from harness import Env, open_env


def db_file(tmp_path: Path) -> Path:
    return tmp_path / "webui.db"


class PragmaFault:
    """A pragma applied to every connection owc checks out of its pool while ``on`` (SQLite's own errors)."""

    def __init__(self, env: Env, on_sql: str, off_sql: str) -> None:
        self.on = False
        self.on_sql, self.off_sql = on_sql, off_sql
        event.listen(env.store.sync.engine, "checkout", self._checkout)

    def _checkout(self, dbapi_conn, _record, _proxy) -> None:
        dbapi_conn.execute(self.on_sql if self.on else self.off_sql)


async def run_through_fault(env: Env, clock, key: str, chat_id: str, run_id: str, lift) -> dict:
    """Play a run that ends while the database refuses; check what the tab and the ledger see; lift the fault,
    let the Gateway tick once, and return the stored message."""
    keeper = env.keepers["A"]
    env.sim.start_run(key, run_id).text("Kept through the fault.").end()
    m = ids.message_id(key, run_id)
    await keeper.until(lambda: env.emitter.of(m, "chat:message:error"))
    (notice,) = env.emitter.of(m, "chat:message:error")
    assert "could not be saved yet" in notice.event["data"]["error"]["content"]
    run = keeper.ledger.get(key, run_id)
    # Kept: it may be tried again meanwhile (the run's own sessions.changed end is an event), always in vain.
    await keeper.until(lambda: run.life.state is State.UNSAVED and not run.writer_live)
    lift()
    clock.jump(30)  # the Gateway's next tick
    await env.settled()
    message = (await env.messages(chat_id))[m]
    assert any(e.event["data"].get("done") for e in env.emitter.of(m, "chat:completion"))
    assert not env.clients["A"].connection.closed and env.clients["A"].connections_opened == 1
    return message


class LockHolder:
    """Another process's writer holding the chat's lock: SQLite's database-wide ``BEGIN IMMEDIATE``, or
    PostgreSQL's row lock (``SELECT ... FOR UPDATE``), as Open WebUI's own ``_chat_transaction`` takes them."""

    def __init__(self, tmp_path: Path, db_url: str | None, chat_id: str) -> None:
        self.chat_id = chat_id
        if db_url is None:
            self.conn = sqlite3.connect(db_file(tmp_path), timeout=0)
            self.pg = False
        else:
            import psycopg

            self.conn = psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://"))
            self.pg = True

    def hold(self) -> None:
        if self.pg:
            self.conn.execute("SELECT 1 FROM chat WHERE id = %s FOR UPDATE", (self.chat_id,))
        else:
            self.conn.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        self.conn.rollback()

    def close(self) -> None:
        self.conn.close()


@pytest.mark.virtual_seconds(30)
async def test_a_lock_held_past_the_runs_end_loses_nothing(tmp_path, clock, db_url) -> None:
    """Another process holds the chat's lock through every finalize attempt (before: NOT WRITTEN in the log
    only, and the message stayed ``done: false`` for good)."""
    async with open_env(tmp_path, db_url=db_url, busy_timeout_ms=20) as env:
        chat_id, key = await env.chat()
        await env.connect()
        holder = LockHolder(tmp_path, db_url, chat_id)
        env.sim.start_run(key, "before").text("Written before the lock.").end()
        await env.settled()
        holder.hold()
        try:
            message = await run_through_fault(env, clock, key, chat_id, "locked-out", holder.release)
        finally:
            holder.close()
        assert message["done"] is True and message["content"] == "Kept through the fault."
        assert message["parentId"] == ids.message_id(key, "before")


@pytest.mark.virtual_seconds(30)
async def test_a_full_disk_loses_nothing(tmp_path, clock) -> None:
    """The disk fills up mid-run: the claim went through, the finalize does not (before: the writer failed
    with ``done: false``, the tabs were not told, and nothing tried again)."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        full = PragmaFault(env, "PRAGMA max_page_count = 1", "PRAGMA max_page_count = 1073741823")
        run = env.sim.start_run(key, "big", steps=None)
        run.text("x" * 10)
        m = ids.message_id(key, "big")
        await env.keepers["A"].until(lambda: env.keepers["A"].totals()[0] == 1)
        full.on = True
        run.text(" and a long tail " + "y" * 200_000).end()
        await env.keepers["A"].until(lambda: env.emitter.of(m, "chat:message:error"))
        assert (await env.messages(chat_id))[m]["done"] is False
        full.on = False
        clock.jump(30)
        await env.settled()
        message = (await env.messages(chat_id))[m]
        assert message["done"] is True and message["content"].endswith("y" * 100)


@pytest.mark.virtual_seconds(30)
async def test_a_read_only_database_loses_nothing(tmp_path, clock) -> None:
    """The database is read-only from the run's start: not even the claim goes through, so the message is made
    when it can be, at the chat's tail, with the whole reply."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        ro = PragmaFault(env, "PRAGMA query_only = ON", "PRAGMA query_only = OFF")
        ro.on = True

        def lift() -> None:
            ro.on = False

        message = await run_through_fault(env, clock, key, chat_id, "read-only", lift)
        assert message["done"] is True and message["content"] == "Kept through the fault."
        assert message["parentId"] == "u1"


@pytest.mark.virtual_seconds(30)
async def test_a_deleted_database_file_is_not_written_into(tmp_path, clock) -> None:
    """The database file is deleted under owc's open pool (before: the finalize "succeeded" into the unlinked
    file, lost to every reader). owc refuses to write there, keeps the message, and writes it into the file
    put back at the same path."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        path = db_file(tmp_path)
        backup = tmp_path / "backup.db"
        with sqlite3.connect(path) as src, sqlite3.connect(backup) as dst:
            src.backup(dst)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)

        def restore() -> None:
            shutil.copy(backup, path)

        message = await run_through_fault(env, clock, key, chat_id, "gone", restore)
        assert message["done"] is True and message["content"] == "Kept through the fault."


async def test_a_message_kept_unsaved_is_found_by_the_next_process(tmp_path, clock) -> None:
    """owc's process dies while a message waits for the database: the run's transcript is still on the
    Gateway, so the next process's reconcile gives it its message."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat(now=env.sim.now_ms() // 1000 - 60)
        await env.connect("A")
        ro = PragmaFault(env, "PRAGMA query_only = ON", "PRAGMA query_only = OFF")
        ro.on = True
        env.sim.start_run(key, "orphaned").text("Saved by the next process.").end()
        m = ids.message_id(key, "orphaned")
        await env.keepers["A"].until(lambda: env.emitter.of(m, "chat:message:error"))
        await env.kill("A")
        ro.on = False
        await env.connect("B")
        await env.settled()
        message = (await env.messages(chat_id))[m]
        assert message["done"] is True and message["content"] == "Saved by the next process."
