"""Short lock holds (issue 16): owc reads the chat and builds its new JSON outside the row lock, then checks under
the lock that the row is still the one it read. An Open WebUI save landing in between must be kept, a claim must
still land at the chat's true tail, and two processes racing one run must still make one message. The save is put
in between deterministically through the store's seam (``ChatStore.before_lock``), never by timing. Both databases:
SQLite (``PRAGMA data_version``, else the text compared) and PostgreSQL (the row's ``xmin``)."""

from __future__ import annotations

import logging
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
import trio.testing

from owc.store import AlreadyDone, AlreadyThere, ChatStore, Claimed, Written, make_engine, open_store
from owc.store.store import OPTIMISTIC_TRIES

from store_race import USER

DEAD = lambda writer: False  # noqa: E731
ALIVE = lambda writer: True  # noqa: E731


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request, tmp_path: Path) -> str:
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url")
    return f"sqlite:///{tmp_path / 'webui.db'}"


@pytest.fixture
def store(url: str) -> Iterator[ChatStore]:
    s = ChatStore(make_engine(url, busy_timeout_ms=2000))
    s.create_tables()
    yield s
    s.engine.dispose()


def owui_save(url: str, chat_id: str, change: Callable[[dict[str, Any]], None]) -> None:
    """Another process saves the chat the way Open WebUI's ``_chat_transaction`` does: take the lock, read the JSON,
    change it, write it back, commit (its own connection, not owc's engine)."""
    if url.startswith("sqlite"):
        db = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None, timeout=5)
        try:
            db.execute("BEGIN IMMEDIATE")
            (raw,) = db.execute("SELECT chat FROM chat WHERE id = ?", (chat_id,)).fetchone()
            chat = orjson.loads(raw)
            change(chat)
            db.execute(
                "UPDATE chat SET chat = ?, title = ? WHERE id = ?",
                (orjson.dumps(chat).decode(), chat["title"], chat_id),
            )
            db.execute("COMMIT")
        finally:
            db.close()
        return
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as db:
        (raw,) = db.execute("SELECT chat::text FROM chat WHERE id = %s FOR UPDATE", (chat_id,)).fetchone()
        chat = orjson.loads(raw)
        change(chat)
        db.execute(
            "UPDATE chat SET chat = %s::json, title = %s WHERE id = %s",
            (orjson.dumps(chat).decode(), chat["title"], chat_id),
        )


def user_turn_chat(chat_id: str) -> dict[str, Any]:
    u1 = {"id": "u1", "parentId": None, "childrenIds": [], "role": "user", "content": "hi", "timestamp": 1}
    return {
        "id": chat_id,
        "title": "T",
        "models": ["openclaw.main"],
        "history": {"currentId": "u1", "messages": {"u1": u1}},
    }


def add_user_turn(message_id: str, title: str) -> Callable[[dict[str, Any]], None]:
    """The user sends a turn (and renames the chat): a message at the tail, and the view moves to it."""

    def change(chat: dict[str, Any]) -> None:
        history = chat["history"]
        tail = history["currentId"]
        history["messages"][message_id] = {
            "id": message_id, "parentId": tail, "childrenIds": [], "role": "user", "content": "more", "timestamp": 2,
        }  # fmt: skip
        history["messages"][tail]["childrenIds"].append(message_id)
        history["currentId"] = message_id
        chat["title"] = title

    return change


class Between:
    """The seam: ``action`` runs between owc's outside read and its lock, for the first ``times`` tries."""

    def __init__(self, action: Callable[[int], None], times: int = 1) -> None:
        self.calls = 0
        self.action, self.times = action, times

    def __call__(self, chat_id: str) -> None:
        self.calls += 1
        if self.calls <= self.times:
            self.action(self.calls)


def new_chat(store: ChatStore, chat: Callable[[str], dict[str, Any]] | None = None) -> str:
    chat_id = f"short-{uuid.uuid4()}"
    store.create_chat(chat_id, USER, chat=chat(chat_id) if chat else None)
    return chat_id


def test_a_claim_lands_under_a_turn_saved_between_its_read_and_its_lock(store: ChatStore, url: str) -> None:
    """The claim read the chat when u1 was its tail; the user's next turn u2 was saved before owc took the lock. The
    check under the lock sees the change, the claim reads again, and M goes under u2 (the true tail), with the
    save's title kept."""
    chat_id = new_chat(store, user_turn_chat)
    store.before_lock = between = Between(lambda _n: owui_save(url, chat_id, add_user_turn("u2", "Renamed")))
    result = store.claim(chat_id, "m", run_id="r", writer="w", alive=DEAD, user_id=USER)
    assert isinstance(result, Claimed) and result.parent_id == "u2" and result.parent_children == ("m",)
    assert between.calls == 2  # the first try found the row changed; the second wrote
    chat = store.read_chat(chat_id)
    messages = chat["history"]["messages"]
    assert chat["title"] == "Renamed" and chat["history"]["currentId"] == "m"
    assert messages["u1"]["childrenIds"] == ["u2"] and messages["u2"]["childrenIds"] == ["m"]
    assert messages["m"]["parentId"] == "u2"
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql(f"SELECT parent_id FROM chat_message WHERE id = '{chat_id}-m'").scalar() == "u2"


def test_a_finalize_keeps_a_save_made_between_its_read_and_its_lock(store: ChatStore, url: str) -> None:
    chat_id = new_chat(store, user_turn_chat)
    store.claim(chat_id, "m", run_id="r", writer="w", alive=DEAD, user_id=USER)
    store.before_lock = between = Between(lambda _n: owui_save(url, chat_id, add_user_turn("u2", "Renamed")))
    result = store.write(chat_id, "m", content="final", output=[], done=True)
    assert isinstance(result, Written) and between.calls == 2
    chat = store.read_chat(chat_id)
    messages = chat["history"]["messages"]
    assert chat["title"] == "Renamed" and set(messages) == {"u1", "m", "u2"}
    assert messages["m"]["content"] == "final" and messages["m"]["done"] is True
    assert messages["u2"]["parentId"] == "m" and chat["history"]["currentId"] == "u2"


@pytest.mark.postgres
def test_a_postgres_finalize_that_waits_for_a_save_in_flight_keeps_it(postgres_url: str) -> None:
    """PostgreSQL: owc's writing ``UPDATE`` takes the row lock and checks the row version in one statement. Here Open
    WebUI's save holds the row (updated, not committed) when that ``UPDATE`` comes: it waits, the save commits, and
    PostgreSQL evaluates the ``UPDATE``'s condition again on the saved version, which is a new one: owc writes nothing
    that try, reads again, and the save is kept (the user's turn, the title) with owc's finalize on top."""
    import psycopg

    store = ChatStore(make_engine(postgres_url, busy_timeout_ms=5000))
    store.create_tables()
    try:
        chat_id = new_chat(store, user_turn_chat)
        store.claim(chat_id, "m", run_id="r", writer="w", alive=DEAD, user_id=USER)
        dsn = postgres_url.replace("postgresql+psycopg://", "postgresql://")
        saving = psycopg.connect(dsn)
        watcher_errors: list[BaseException] = []

        def commit_once_owc_waits() -> None:
            try:
                with psycopg.connect(dsn, autocommit=True) as watch:
                    # owc's UPDATE waiting for the save's transaction: a lock not granted (the state itself, polled)
                    while not watch.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()[0]:
                        threading.Event().wait(0.005)
                saving.commit()
            except BaseException as exc:  # reported by the test below
                watcher_errors.append(exc)

        def save_in_flight(_n: int) -> None:
            (raw,) = saving.execute("SELECT chat::text FROM chat WHERE id = %s FOR UPDATE", (chat_id,)).fetchone()
            chat = orjson.loads(raw)
            add_user_turn("u2", "Renamed")(chat)
            saving.execute(
                "UPDATE chat SET chat = %s::json, title = %s WHERE id = %s",
                (orjson.dumps(chat).decode(), chat["title"], chat_id),
            )
            threading.Thread(target=commit_once_owc_waits, daemon=True).start()

        store.before_lock = between = Between(save_in_flight)
        result = store.write(chat_id, "m", content="final", output=[], done=True)
        saving.close()
        assert not watcher_errors
        assert isinstance(result, Written) and between.calls == 2
        chat = store.read_chat(chat_id)
        messages = chat["history"]["messages"]
        assert chat["title"] == "Renamed" and set(messages) == {"u1", "m", "u2"}
        assert messages["m"]["content"] == "final" and messages["u2"]["parentId"] == "m"
    finally:
        store.engine.dispose()


def test_a_save_of_another_chat_between_costs_no_second_read(store: ChatStore, url: str, caplog) -> None:
    """A save of another chat changes SQLite's ``data_version`` but not this chat's text (nor, on PostgreSQL, this
    row's ``xmin``): owc writes on its first try."""
    chat_id, other = new_chat(store, user_turn_chat), new_chat(store, user_turn_chat)
    store.before_lock = between = Between(lambda _n: owui_save(url, other, add_user_turn("u2", "Other")))
    with caplog.at_level(logging.INFO, logger="owc.store"):
        result = store.claim(chat_id, "m", run_id="r", writer="w", alive=DEAD, user_id=USER)
    assert isinstance(result, Claimed) and result.parent_id == "u1" and between.calls == 1
    assert not [r for r in caplog.records if r.getMessage().startswith("store.changed_under")]
    assert store.read_chat(other)["title"] == "Other"


def test_a_chat_saved_at_every_try_is_written_under_the_lock(store: ChatStore, url: str, caplog) -> None:
    """However busy the chat, the write makes progress: after ``OPTIMISTIC_TRIES`` changed rows the last try reads,
    builds and writes under the lock (no seam there), and every save made meanwhile is kept."""
    chat_id = new_chat(store, user_turn_chat)
    store.claim(chat_id, "m", run_id="r", writer="w", alive=DEAD, user_id=USER)

    def save(n: int) -> None:
        owui_save(url, chat_id, add_user_turn(f"u{n + 1}", f"Renamed {n}"))

    store.before_lock = between = Between(save, times=100)
    with caplog.at_level(logging.INFO, logger="owc.store"):
        result = store.write(chat_id, "m", content="final", output=[], done=True)
    assert isinstance(result, Written) and result.attempts == 1
    assert between.calls == OPTIMISTIC_TRIES == 3
    changed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("store.changed_under")]
    assert [c.rsplit("attempt=", 1)[1] for c in changed] == ["1/3", "2/3", "3/3"]
    chat = store.read_chat(chat_id)
    messages = chat["history"]["messages"]
    assert chat["title"] == "Renamed 3" and {"u2", "u3", "u4"} <= set(messages)
    assert messages["m"]["done"] is True and messages["m"]["content"] == "final"


def test_two_processes_racing_one_run_between_read_and_lock_make_one_message(store: ChatStore, url: str) -> None:
    """Process A reads the chat (no M yet); process B claims the same run before A takes the lock. A's check fails,
    A reads again, finds B's message held by a writer it cannot see die, and backs off: one message."""
    chat_id = new_chat(store, user_turn_chat)
    other = ChatStore(make_engine(url, busy_timeout_ms=2000))
    try:
        b_result: list[object] = []

        def b_claims(_n: int) -> None:
            b_result.append(other.claim(chat_id, "m", run_id="r", writer="B/1", alive=ALIVE, user_id=USER))

        store.before_lock = between = Between(b_claims)
        a_result = store.claim(chat_id, "m", run_id="r", writer="A/1", alive=ALIVE, user_id=USER)
    finally:
        other.engine.dispose()
    assert isinstance(b_result[0], Claimed) and a_result == AlreadyThere(writer="B/1", run_id="r", done=False)
    assert between.calls == 1  # A's second read answered without the lock: nothing to write
    messages = store.read_chat(chat_id)["history"]["messages"]
    assert set(messages) == {"u1", "m"} and messages["m"]["meta"]["openclaw_writer"] == "B/1"
    with store.engine.connect() as conn:
        rows = conn.exec_driver_sql(f"SELECT id FROM chat_message WHERE chat_id = '{chat_id}'").scalars().all()
    assert sorted(rows) == [f"{chat_id}-m", f"{chat_id}-u1"]  # the mirror too: m once


def test_a_finalize_racing_another_process_finalize_writes_once(store: ChatStore, url: str) -> None:
    """``unless_done``: B finishes M between A's read and A's lock; A reads again and leaves M as B wrote it."""
    chat_id = new_chat(store, user_turn_chat)
    store.claim(chat_id, "m", run_id="r", writer="A/1", alive=DEAD, user_id=USER)
    other = ChatStore(make_engine(url, busy_timeout_ms=2000))
    try:
        store.before_lock = Between(
            lambda _n: other.write(chat_id, "m", content="by B", output=[], done=True, unless_done=True)
        )
        result = store.write(chat_id, "m", content="by A", output=[], done=True, unless_done=True)
    finally:
        other.engine.dispose()
    assert isinstance(result, AlreadyDone) and result.message["content"] == "by B"
    assert store.read_chat(chat_id)["history"]["messages"]["m"]["content"] == "by B"


def test_an_answer_that_writes_nothing_takes_no_lock(tmp_path: Path) -> None:
    """A claim that finds M held by a live writer, or a finalize that finds M finished, writes nothing: it answers
    from a committed snapshot without waiting for the lock (before: it waited the whole busy timeout behind
    another writer, then said ``Locked``, and the run tried again)."""
    path = tmp_path / "held.db"
    store = ChatStore(make_engine(f"sqlite:///{path}", busy_timeout_ms=50))
    store.create_tables()
    chat_id = new_chat(store, user_turn_chat)
    store.claim(chat_id, "m", run_id="r", writer="w1", alive=DEAD, user_id=USER)
    store.write(chat_id, "m", content="done", output=[], done=True)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        again = store.claim(chat_id, "m", run_id="r", writer="w2", alive=ALIVE, user_id=USER)
        finished = store.write(chat_id, "m", content="late", output=[], done=True, unless_done=True)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        store.engine.dispose()
    assert again == AlreadyThere(writer="w1", run_id="r", done=True)
    assert isinstance(finished, AlreadyDone) and finished.message["content"] == "done"


def test_checkpoints_run_outside_owcs_transactions(tmp_path: Path, caplog) -> None:
    """SQLite's automatic checkpoint is off on owc's connections (it ran inside the COMMIT of whichever write took
    the WAL past 1,000 pages); owc runs a PASSIVE one after its commit once its writes reach ``checkpoint_bytes``,
    and the WAL stays bounded. Open WebUI's own connections keep SQLite's default."""
    path = tmp_path / "wal.db"
    store = ChatStore(make_engine(f"sqlite:///{path}"))
    store.create_tables()
    store.checkpoint_bytes = 200_000
    try:
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 0
        owui = sqlite3.connect(path)
        assert owui.execute("PRAGMA wal_autocheckpoint").fetchone() == (1000,)
        owui.close()
        chat_id = new_chat(store, user_turn_chat)
        store.claim(chat_id, "m", run_id="r", writer="w", alive=DEAD, user_id=USER)
        with caplog.at_level(logging.DEBUG, logger="owc.store"):
            for i in range(40):  # ~50 KB a write: a checkpoint every 4th write
                store.write(chat_id, "m", content=f"{i} " + "x" * 50_000, output=[], done=False)
        checkpoints = [r.getMessage() for r in caplog.records if r.getMessage().startswith("store.checkpoint ")]
        assert len(checkpoints) == 10 and all("busy=0" in c for c in checkpoints)
        # Without them the WAL would hold every write (40 x 50 KB); a complete checkpoint lets the next write
        # start the WAL over, so it stays near one checkpoint's worth.
        assert Path(f"{path}-wal").stat().st_size < 600_000
    finally:
        store.engine.dispose()


async def test_owcs_writes_to_one_database_queue_in_one_lane(tmp_path: Path) -> None:
    """Claims and finalizes of one database run one at a time, in the order they came (``TrioChatStore.lane``):
    side by side they changed the chat under each other's outside reads and busy-waited for SQLite's lock against
    Open WebUI's writer. Reads do not queue behind a write."""
    async with open_store(f"sqlite:///{tmp_path / 'lane.db'}", create=True) as store:
        chat_id = f"lane-{uuid.uuid4()}"
        await store.create_chat(chat_id, USER, chat=user_turn_chat(chat_id))
        real, entered, inside = store.sync, [], [0, 0]  # inside: now, most
        first_in, release = threading.Event(), threading.Event()

        class Gated:
            def __getattr__(self, name: str) -> Any:
                return getattr(real, name)

            def _through(self, fn: Callable[..., Any], message_id: str, *args: Any, **kwargs: Any) -> Any:
                entered.append(message_id)
                inside[0] += 1
                inside[1] = max(inside)
                try:
                    if message_id == "m0":
                        first_in.set()
                        release.wait(30)
                    return fn(*args, **kwargs)
                finally:
                    inside[0] -= 1

            def claim(self, chat_id: str, message_id: str, **kwargs: Any) -> Any:
                return self._through(real.claim, message_id, chat_id, message_id, **kwargs)

            def write_many(self, chat_id: str, requests: Any) -> Any:  # ``TrioChatStore.write`` makes its writes so
                finals = "+".join(f"{r.message_id}-final" for r in requests)
                return self._through(real.write_many, finals, chat_id, requests)

        store.sync = Gated()  # type: ignore[assignment]
        results: dict[str, Any] = {}

        async def claim(message_id: str) -> None:
            results[message_id] = await store.claim(
                chat_id, message_id, run_id=f"r-{message_id}", writer="w", alive=DEAD, user_id=USER
            )

        async def finalize(message_id: str) -> None:
            await store.write(chat_id, message_id, content="done", output=[], done=True)

        async with trio.open_nursery() as nursery:
            try:
                nursery.start_soon(claim, "m0")
                await trio.to_thread.run_sync(first_in.wait, 30)
                for message_id in ("m1", "m2"):
                    nursery.start_soon(claim, message_id)
                    await trio.testing.wait_all_tasks_blocked()  # each in the lane before the next arrives
                nursery.start_soon(finalize, "m0")
                await trio.testing.wait_all_tasks_blocked()
                assert entered == ["m0"]  # the rest wait in the lane, not in SQLite's busy handler
                assert (await store.read_chat(chat_id))["history"]["currentId"] == "u1"  # a read does not queue
            finally:
                release.set()
        assert entered == ["m0", "m1", "m2", "m0-final"] and inside[1] == 1
        assert all(isinstance(r, Claimed) for r in results.values())
        messages = (await store.read_chat(chat_id))["history"]["messages"]
        assert [messages[m]["parentId"] for m in ("m0", "m1", "m2")] == ["u1", "m0", "m1"]


@pytest.mark.postgres
def test_owcs_postgres_sessions_compress_with_lz4(postgres_url: str) -> None:
    """owc's sessions TOAST-compress what they write with lz4 (half pglz's time, under the row lock); another
    session (Open WebUI's) keeps the server's default, and reads owc's rows as ever."""
    import psycopg

    store = ChatStore(make_engine(postgres_url))
    store.create_tables()
    try:
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW default_toast_compression").scalar() == "lz4"
        chat_id = new_chat(store, user_turn_chat)
        store.claim(chat_id, "m", run_id="r", writer="w", alive=DEAD, user_id=USER)
        store.write(chat_id, "m", content="x" * 100_000, output=[], done=True)
        with psycopg.connect(postgres_url.replace("postgresql+psycopg://", "postgresql://")) as owui:
            assert owui.execute("SHOW default_toast_compression").fetchone() == ("pglz",)
            method, raw = owui.execute(
                "SELECT pg_column_compression(chat), chat::text FROM chat WHERE id = %s", (chat_id,)
            ).fetchone()
        assert method == "lz4" and orjson.loads(raw)["history"]["messages"]["m"]["content"] == "x" * 100_000
    finally:
        store.engine.dispose()


@pytest.mark.postgres
def test_a_postgres_write_of_one_message_is_one_statement_in_its_own_transaction(postgres_url: str) -> None:
    """PostgreSQL: a claim or a finalize of one message takes the row lock and lets it go in one round trip: the
    chat's version-checked ``UPDATE`` and the message's ``chat_message`` row in one statement, run as its own
    transaction (autocommit), so no second round trip (a ``COMMIT``) waits on this process inside the hold. What it
    wrote is all there: the chat's message and its mirror row, status lines included."""
    from sqlalchemy import event

    store = ChatStore(make_engine(postgres_url, busy_timeout_ms=2000))
    store.create_tables()
    sent: list[tuple[str, bool]] = []

    def before(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        sent.append((statement.split(None, 1)[0].upper(), bool(conn.connection.dbapi_connection.autocommit)))

    event.listen(store.engine, "before_cursor_execute", before)
    try:
        chat_id = new_chat(store, user_turn_chat)
        for write in (
            lambda: store.claim(chat_id, "m", run_id="r", writer="w", alive=DEAD, user_id=USER),
            lambda: store.write(
                chat_id, "m", content="final", output=[], done=True, status=[{"description": "x", "done": True}]
            ),
        ):
            sent.clear()
            write()
            # The unlocked read (a SELECT in a transaction of its own), then the write alone, in autocommit.
            assert sent == [("SELECT", False), ("WITH", True)]
        chat = store.read_chat(chat_id)
        assert chat["history"]["messages"]["m"]["content"] == "final"
        with store.engine.connect() as conn:
            content, done, status = conn.exec_driver_sql(
                f"SELECT content, done, status_history FROM chat_message WHERE id = '{chat_id}-m'"
            ).one()
        assert (content, done) == ("final", True) and status and status[0]["description"] == "x"
    finally:
        event.remove(store.engine, "before_cursor_execute", before)
        store.engine.dispose()
