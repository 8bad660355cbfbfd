"""The chat store: claim, handover and finalize writes under Open WebUI's own row lock.

Every write is one short transaction with the same semantics as Open WebUI's ``Chats._chat_transaction``:
SQLite ``BEGIN IMMEDIATE`` before the read (a database-wide write lock, so the read is the true tail), or
PostgreSQL ``SELECT ... FOR UPDATE`` (a row lock until commit). Two connections, deploys or processes racing
one run therefore serialize, and the second finds the message the first made.

Open WebUI's own writers wait at most 5 s for that lock and then silently give up (``except Exception:
return None``), so a long hold by owc would lose a user's data elsewhere, and even a short one delays them. A
write therefore reads the chat and builds its new JSON (the tree edit, the serialisation) *outside* the lock, then
takes the lock and checks, cheaply, that the row is still the one it read (SQLite, ``ChatStore._lock``: ``PRAGMA
data_version`` on the same connection, else the stored text compared whole; PostgreSQL, ``ChatStore._save``: the
writing ``UPDATE`` itself, which takes the row lock, holds to the row's ``xmin`` as read); only then does it write,
and under the lock it does nothing else. A row that changed in between (an Open WebUI save) is
read again; the last try does the whole read-modify-write under the lock, as Open WebUI does, so a write always
makes progress. Either way the write is decided from the row as it is when the lock is taken: a claim lands at
the chat's true tail, and nothing written in between is lost.

``ChatStore`` is synchronous (SQLAlchemy's sync engine); ``TrioChatStore`` runs it in worker threads behind a
capacity limiter. A transaction is never abandoned half-way on cancel: the thread finishes it.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from typing import Any, Generic, TypeVar

import attrs
import orjson
import trio
from sqlalchemy import (
    Connection,
    Engine,
    Text,
    bindparam,
    delete,
    false,
    insert,
    literal_column,
    select,
    true,
    type_coerce,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from owc.render.items import output_text
from owc.render.never_less import gained_since_claim, shown_in_front
from owc.render.seam import joined
from owc.rules.finished import CORRECT_MARK, OPEN_MARK, awaits_correction, message_finished
from owc.store import tree
from owc.store.engine import FILE_ID, Serialized, file_id, is_locked_error, make_engine, sqlite_file
from owc.store.schema import chat as chat_t
from owc.store.schema import chat_message as msg_t
from owc.store.schema import message_row_id, metadata

log = logging.getLogger("owc.store")

#: A finalize that meets a locked database tries this many times, each paced by the busy wait.
FINALIZE_ATTEMPTS = 6
#: A hold longer than this is logged: Open WebUI's own writers give up after a 5 s busy wait.
LONG_HOLD_S = 1.0
#: Tries of the short-hold path (read and build outside the lock, check and write under it) before the last try
#: reads, builds and writes under the lock: each failed try means another writer saved the chat in between, and
#: the locked try cannot fail that way, so a write never starves however busy the chat is.
OPTIMISTIC_TRIES = 3
#: SQLite: owc's writes since its last checkpoint (bytes of chat JSON, the bulk of the WAL they add) after which
#: it runs a PASSIVE checkpoint, outside any transaction. SQLite's automatic one (off on owc's connections, see
#: ``engine.make_engine``) comes after 1,000 pages of 4 KiB: the same WAL size.
CHECKPOINT_BYTES = 4 * 1024 * 1024
#: At most this many writes (finalizes, handovers) of one chat waiting for the write lane are made in one
#: transaction (``TrioChatStore.write``): each adds its message's ``chat_message`` upsert to that transaction's
#: hold, while the chat itself is read, parsed, serialised and written once for all.
WRITES_TOGETHER = 16


class StoreError(Exception):
    """A write that cannot be made because of the chat itself; nothing was written."""


class ChatMissing(StoreError):
    def __init__(self, chat_id: str) -> None:
        super().__init__(f"chat {chat_id} does not exist")
        self.chat_id = chat_id


class ChatOwnerMismatch(StoreError):
    def __init__(self, chat_id: str, expected: str, actual: str | None) -> None:
        super().__init__(f"chat {chat_id} belongs to another user than its session key names")
        self.chat_id, self.expected, self.actual = chat_id, expected, actual


class ChatCorrupt(StoreError):
    def __init__(self, chat_id: str, why: str) -> None:
        super().__init__(f"chat {chat_id} holds no usable message tree: {why}")
        self.chat_id = chat_id


class NotAnAssistantMessage(StoreError):
    """The message a run's id names is not an assistant message (a run id ``msg-<chat>-<M>-...`` whose M is the
    user's own message): a claim or a write never changes it, so the agent's reply never overwrites the user's
    words (issue 24, item 13)."""

    def __init__(self, chat_id: str, message_id: str, role: object) -> None:
        super().__init__(
            f"message {message_id} in chat {chat_id} is a {str(role)[:20]!r} message, not a reply: left as it is"
        )
        self.chat_id, self.message_id = chat_id, message_id


class MessageMissing(StoreError):
    def __init__(self, chat_id: str, message_id: str) -> None:
        super().__init__(f"message {message_id} is not in chat {chat_id}")
        self.chat_id, self.message_id = chat_id, message_id


class DatabaseGone(Exception):
    """The SQLite file owc opened was deleted or replaced under it: a write there would land in a file nobody
    reads. Reported as ``Unavailable`` (nothing written); the pooled connection is dropped, so a later try
    opens the file at its path again (and fails, rather than making an empty one, until it is back)."""


#: What a database that refuses writes raises (full, read-only, I/O error, unreachable, gone), as opposed to
#: what a chat that cannot take the message raises (``StoreError``).
REFUSALS = (DBAPIError, PoolTimeout, DatabaseGone, OSError)


def refusal_text(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    return str(orig if orig is not None else exc) or type(exc).__name__


#: owc made M at the tail: the new message and the parent's new ``childrenIds`` (what the tabs are told).
Claimed = tree.Inserted


@attrs.frozen
class TakenOver:
    """M existed, unfinished, and its recorded writer is dead: owc is its writer now."""

    message: dict[str, Any]
    previous_writer: str | None


@attrs.frozen
class AlreadyThere:
    """M exists and someone alive (or nobody owc knows, or a finished run) holds it: back off."""

    writer: str | None
    run_id: str | None
    done: bool


@attrs.frozen
class Absent:
    """M does not exist and the caller asked only to adopt an existing message (``create=False``)."""


@attrs.frozen
class Locked:
    """The database stayed locked for the whole busy wait: try again on the run's next event."""

    detail: str


@attrs.frozen
class Unavailable:
    """The database refused the transaction for a reason of its own (full, read-only, an I/O error, gone,
    unreachable): nothing was written. Like ``Locked``, a later try may succeed."""

    detail: str


ClaimResult = Claimed | TakenOver | AlreadyThere | Absent | Locked | Unavailable


@attrs.frozen
class Written:
    message: dict[str, Any]
    attempts: int = 1
    #: Other messages whose links changed when the line of M's session's messages was put in run order.
    moved: tuple[dict[str, Any], ...] = ()
    #: M's parent as written (its id and ``childrenIds``), and the chat's ``currentId``: where M sits, for the tabs.
    parent: dict[str, Any] | None = None
    current_id: str | None = None
    #: The run whose message M hangs right under (None: a user turn, the chat's root, a message of no run): M is
    #: then in a line of runs' messages that a transcript may have to put in start order (``put_in_order``).
    parent_run: str | None = None
    #: The entries this write appended to M's ``statusHistory`` (what the tabs are told as ``status`` events).
    statuses: tuple[dict[str, Any], ...] = ()


@attrs.frozen
class FilesAdded:
    """What ``add_files`` wrote: M's whole ``files`` list after it (what the tabs are sent) and the status lines
    appended."""

    files: tuple[dict[str, Any], ...]
    notes: tuple[dict[str, Any], ...] = ()
    #: M's content as it stands (the media desk checks it against the rewritten transcript).
    content: str = ""


@attrs.frozen
class NotWritten:
    """Still locked after every attempt, or refused by the database (``locked=False``: full, read-only, gone;
    not tried again at once). The writer logs ``NOT WRITTEN``, tells the user's tabs, and keeps the run for a
    later try."""

    detail: str
    attempts: int
    locked: bool = True


@attrs.frozen
class AlreadyDone:
    """``write(unless_done=True)`` found the message finished already (another process finalized it)."""

    message: dict[str, Any]


WriteResult = Written | NotWritten | AlreadyDone


@attrs.frozen
class WriteRequest:
    """One ``ChatStore.write`` among several of one chat (``write_many``): M's id and ``write``'s keyword arguments."""

    message_id: str
    kwargs: Mapping[str, Any]


@attrs.frozen
class Absorbed:
    """``absorb_recovery`` made one reply of two: M holds the cut run's part, then the recovery's, and the recovery's
    own message is gone. ``changed``: the other messages whose links changed (the removed message's parent and
    children); ``current_id``: the chat's view. What the tabs are told."""

    message: dict[str, Any]
    removed: str
    changed: tuple[dict[str, Any], ...] = ()
    current_id: str | None = None


@attrs.frozen
class NotAbsorbed:
    """``absorb_recovery`` wrote nothing: the recovery's message is no longer finished with exactly that run (or gone),
    M is not there, or M's chain goes on past the cut run (a continuation wrote it). ``why`` says which."""

    why: str


AbsorbResult = Absorbed | NotAbsorbed


@attrs.frozen
class ChatFacts:
    """What the reconcile pass needs to know about a chat before it reads any transcript."""

    updated_at: int  # seconds, as Open WebUI records it
    unfinished: frozenset[str]  # ids of its assistant messages with ``done: false`` (from ``chat_message``)
    #: Of the message ids asked about (``chat_facts(present=...)``), those the chat holds.
    present: frozenset[str] = frozenset()
    #: Ids of its finished messages a correction still owes their transcript (``CORRECT_MARK``).
    uncorrected: frozenset[str] = frozenset()


T = TypeVar("T")


@attrs.frozen
class _Plan(Generic[T]):
    """What a transaction decided from one read of the chat: its result, and what it writes (``chat`` None:
    nothing, and the answer needed no lock). Built outside the lock on the short-hold path."""

    result: T
    #: The chat to write, as changed (serialised by ``ChatStore._transact``, still outside the lock).
    chat: dict[str, Any] | None = None
    now: int = 0
    current_id: str | None = None
    #: Messages whose ``chat_message`` row is upserted whole; then messages whose row gets only the new parent.
    mirror: tuple[dict[str, Any], ...] = ()
    reparent: tuple[dict[str, Any], ...] = ()
    #: Messages taken out of the tree: their ``chat_message`` rows go.
    remove: tuple[str, ...] = ()


#: The ``chat_message`` columns a write of a message changes in an existing row (with ``status_history`` when the
#: message has status lines): the others (its chat, role, parent, model, creation) are set when the row is made.
_MIRRORED = ("content", "output", "done", "error", "meta", "updated_at")


def _upsert(insert: Callable[[Any], Any], changed: tuple[str, ...]) -> Any:
    """The ``chat_message`` upsert that sets ``changed`` on a row already there. Built once per dialect at import:
    building it (the ``excluded`` alias and its column collection) cost ~1 ms of pure Python, and it ran inside the
    row lock on every write."""
    query = insert(msg_t)
    return query.on_conflict_do_update(
        index_elements=[msg_t.c.id], set_={column: query.excluded[column] for column in changed}
    )


#: The upserts by (dialect, whether the message has status lines): immutable statements, compiled once by the
#: engine's cache and shared by every connection and thread.
_UPSERTS = {
    (dialect, with_status): _upsert(insert, _MIRRORED + (("status_history",) if with_status else ()))
    for dialect, insert in (("postgresql", pg_insert), ("sqlite", sqlite_insert))
    for with_status in (True, False)
}

#: The ``chat_message`` columns a mirror row fills, in the order of the combined statement's ``SELECT``.
_MIRROR_ROW = tuple(column.name for column in msg_t.columns if column.name not in ("status_history",))


def _save_and_mirror(with_status: bool, moves_view: bool) -> Any:
    """PostgreSQL: the version-checked ``UPDATE`` of the chat row and the upsert of one message's ``chat_message``
    row as one statement (``WITH saved AS (UPDATE chat ... RETURNING id) INSERT INTO chat_message ... SELECT ...
    FROM saved ON CONFLICT ...``). The row gets its message only if the ``UPDATE`` wrote (the ``SELECT`` is over
    what it returned), so whether the statement returns the row says, as ``_save``'s row count does, whether the
    chat row was still the one read (SQLAlchemy keeps no row count of an ``INSERT``). One round trip inside the row
    lock instead of two (the second also paid SQLAlchemy's execution of a separate statement): the common write,
    one message, its hold shortened by ~1 ms at 1,000 messages. Binds:
    ``chat_id``, ``version``, ``chat``, ``now`` (and ``current``), then ``m_<column>`` for the row."""
    values: dict[str, Any] = {"chat": bindparam("chat", type_=chat_t.c.chat.type), "updated_at": bindparam("now")}
    if moves_view:
        values["current_message_id"] = bindparam("current")
    saved = (
        update(chat_t)
        .where(chat_t.c.id == bindparam("chat_id"), literal_column("xmin::text") == bindparam("version"))
        .values(**values)
        .returning(chat_t.c.id)
        .cte("saved")
    )
    names = _MIRROR_ROW + (("status_history",) if with_status else ())
    row = select(*(bindparam(f"m_{name}", type_=msg_t.c[name].type) for name in names)).select_from(saved)
    query = pg_insert(msg_t).from_select(list(names), row).add_cte(saved)
    changed = _MIRRORED + (("status_history",) if with_status else ())
    return query.on_conflict_do_update(
        index_elements=[msg_t.c.id], set_={column: query.excluded[column] for column in changed}
    ).returning(msg_t.c.id)


#: The combined statements by (whether the message has status lines, whether the write moves the chat's view).
_SAVES_AND_MIRRORS = {
    (status, view): _save_and_mirror(status, view) for status in (True, False) for view in (True, False)
}


def _mirror_row(chat_id: str, user_id: str | None, message: dict[str, Any], now: int) -> dict[str, Any]:
    """A message's ``chat_message`` row, as ``ChatMessages.upsert_message`` would make it (with ``status_history``
    only when the message has status lines: Open WebUI reads a message's status lines from that column first,
    ``DB_TO_JSON_KEY_MAP``)."""
    row = {
        "id": message_row_id(chat_id, message["id"]),
        "chat_id": chat_id,
        "user_id": message.get("user_id") or user_id,
        "role": message.get("role", "assistant"),
        "parent_id": message.get("parentId"),
        "model_id": message.get("model"),
        "files": message.get("files"),
        "sources": message.get("sources"),
        "embeds": message.get("embeds"),
        "usage": message.get("usage"),
        "context_summary": message.get("contextSummary"),
        "created_at": message.get("timestamp") or now,
        "content": message.get("content"),
        "output": message.get("output"),
        "done": message.get("done", True),
        "error": message.get("error"),
        "meta": message.get("meta"),
        "updated_at": now,
    }
    if "statusHistory" in message:
        row["status_history"] = message.get("statusHistory")
    return row


def _serialized(chat: dict[str, Any]) -> Serialized:
    return Serialized(orjson.dumps(chat).decode())


@attrs.frozen
class _Read:
    """The chat row read without the lock, and what tells under the lock whether it is still the same."""

    row: Any  # id, user_id, chat (text on SQLite; psycopg may hand it over parsed)
    version: Any  # SQLite: the connection's ``PRAGMA data_version``; PostgreSQL: the row version's ``xmin``


def _run_of(message: Any) -> str | None:
    """The run an assistant message is the message of (``meta.openclaw_run``), if it is one."""
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return None
    meta = message.get("meta")
    run = meta.get("openclaw_run") if isinstance(meta, dict) else None
    return run if isinstance(run, str) else None


def _gained_since_claim(
    existing: dict[str, Any], output: list[Any], meta: Mapping[str, Any] | None
) -> tuple[list[Any], int] | None:
    """A continuation's finish (``meta``: its chain and ``own_at``) over an M that is finished with exactly the runs
    before it (the chain without the continuation; a message of one run: its ``openclaw_run``): M's output is those
    runs' part as it stands now, and what it gained after the continuation's claim read it (another process put a
    crash-cut run's streamed tail in, ``add_shown``) is kept in front (``render.never_less.gained_since_claim``)."""
    if not isinstance(meta, Mapping) or not message_finished(existing):
        return None
    chain, own_at = meta.get("openclaw_chain"), meta.get("openclaw_own_at")
    held = existing.get("output")
    if not isinstance(chain, list) or len(chain) < 2 or not isinstance(own_at, int) or not isinstance(held, list):
        return None
    old = existing.get("meta") if isinstance(existing.get("meta"), dict) else {}
    before = old.get("openclaw_chain")
    if not isinstance(before, list):
        before = [old["openclaw_run"]] if isinstance(old.get("openclaw_run"), str) else None
    if before is None or [str(x) for x in before] != [str(x) for x in chain[:-1]]:
        return None
    return gained_since_claim(held, output, own_at, str(chain[-1]))


def _earlier_part(existing: dict[str, Any], run_id: str) -> list[Any] | None:
    """M's earlier runs' part (its output before ``meta.openclaw_own_at``) when M is a chain whose last run is
    ``run_id``; None when M is no such chain (its output is that run's alone)."""
    meta = existing.get("meta") if isinstance(existing.get("meta"), dict) else {}
    chain, own_at, output = meta.get("openclaw_chain"), meta.get("openclaw_own_at"), existing.get("output")
    if not isinstance(chain, list) or len(chain) < 2 or str(chain[-1]) != run_id:
        return None
    if not isinstance(own_at, int) or not isinstance(output, list) or not 0 <= own_at <= len(output):
        return None
    return list(output[:own_at])


class ChatStore:
    """Synchronous store; every method is one short transaction (see module docstring)."""

    def __init__(
        self,
        engine: Engine,
        *,
        finalize_attempts: int = FINALIZE_ATTEMPTS,
        optimistic_tries: int = OPTIMISTIC_TRIES,
        on_hold: Callable[[str, float], None] | None = None,
    ) -> None:
        self.engine = engine
        self.finalize_attempts = finalize_attempts
        self.optimistic_tries = optimistic_tries
        self.is_sqlite = engine.dialect.name == "sqlite"
        #: Called with (chat id, seconds) for every lock hold: from the lock to the commit.
        self.on_hold = on_hold
        #: A seam for tests: called with the chat id after the read outside the lock and before the lock is
        #: taken, where another process's save can land (the check under the lock must then catch it).
        self.before_lock: Callable[[str], None] | None = None
        self.checkpoint_bytes = CHECKPOINT_BYTES
        self._wal_growth = 0  # SQLite: bytes written since the last checkpoint (worker threads share it)
        self._wal_lock = threading.Lock()

    def create_tables(self) -> None:
        """Create ``chat`` and ``chat_message`` if absent (the embedded default; never alters existing ones)."""
        metadata.create_all(self.engine, checkfirst=True)

    @contextmanager
    def _locked(self, chat_id: str) -> Iterator[tuple[Connection, Any]]:
        """Open WebUI's ``_chat_transaction``: lock, read the row, yield, commit (rollback on error)."""
        with self.engine.connect() as conn:
            row, locked_at = self._lock_and_read(conn, chat_id)
            yield conn, row
            self._commit(conn, chat_id, locked_at)

    def _lock_and_read(self, conn: Connection, chat_id: str) -> tuple[Any, float]:
        """Take the chat's lock and read its row under it: the row and the lock's time."""
        if self.is_sqlite:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            self._same_file(conn)
        row = conn.execute(
            select(chat_t.c.id, chat_t.c.user_id, type_coerce(chat_t.c.chat, Text).label("chat"))
            .where(chat_t.c.id == chat_id)
            .with_for_update()
        ).first()
        return row, time.perf_counter()

    def _commit(self, conn: Connection, chat_id: str, locked_at: float, wrote: int = 0) -> None:
        """Commit (the lock is released), account the hold, then, on SQLite, checkpoint if ``wrote`` (bytes) took
        the WAL's growth past ``checkpoint_bytes``."""
        conn.commit()
        held = time.perf_counter() - locked_at
        if held > LONG_HOLD_S:
            log.warning("store.long_hold chat=%s seconds=%.3f", chat_id, held)
        if self.on_hold is not None:
            self.on_hold(chat_id, held)
        if self.is_sqlite and wrote:
            with self._wal_lock:
                self._wal_growth += wrote
                due = self._wal_growth >= self.checkpoint_bytes
                if due:
                    self._wal_growth = 0
            if due:
                self._checkpoint(conn)

    def _checkpoint(self, conn: Connection) -> None:
        """A PASSIVE checkpoint, on a connection in no transaction. It never blocks a writer, Open WebUI's or owc's:
        it takes only the checkpointer's lock, never the write lock (FULL, RESTART and TRUNCATE do, and wait for
        it), and it never waits (no busy handler): a frame a reader still needs is left for the next checkpoint.
        Writers append to the WAL meanwhile; the first writer after a complete checkpoint starts the WAL over."""
        started = time.perf_counter()
        try:
            busy, frames, copied = conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)").one()
            conn.commit()
        except REFUSALS as exc:  # the write it follows is committed: a failed checkpoint is only retried later
            log.warning("store.checkpoint_failed error=%s", refusal_text(exc))
            return
        log.debug(
            "store.checkpoint frames=%s copied=%s busy=%s seconds=%.3f",
            frames,
            copied,
            busy,
            time.perf_counter() - started,
        )

    def _transact(self, chat_id: str, decide: Callable[[Any], _Plan[T]]) -> T:
        """One write of ``chat_id``, decided by ``decide`` from a chat row (it parses the row afresh each time, may
        raise ``StoreError``, and returns what to write, already serialised).

        Short-hold path, up to ``optimistic_tries`` times: read the row without the lock, decide and serialise,
        then take the lock on the same connection and write only if the row is still the one read; else roll back
        and read again. Then the last try: lock, read, decide and write, all under the lock (Open WebUI's way).
        Either way the write rests on the row as it is under the lock, so a claim lands at the chat's true tail and
        a save made in between is kept. An answer that writes nothing (``AlreadyThere``, ``AlreadyDone``, a typed
        error) comes from a committed snapshot without the lock, as the same locked read would have given it."""
        for attempt in range(1, self.optimistic_tries + 1):
            with self.engine.connect() as conn:
                read = self._read(conn, chat_id)
                plan = decide(read.row)
                if plan.chat is None:
                    return plan.result
                if self.before_lock is not None:
                    self.before_lock(chat_id)
                text = _serialized(plan.chat)
                if self.is_sqlite:
                    locked_at = self._lock(conn, chat_id, read)
                    if locked_at is not None:
                        self._apply(conn, chat_id, read.row.user_id, plan, text)
                        self._commit(conn, chat_id, locked_at, wrote=len(text.text))
                        return plan.result
                else:
                    # PostgreSQL: the UPDATE that writes the row takes its lock and checks its version in one
                    # statement (``_save``'s ``version``), so the hold is that statement, the mirror and the commit.
                    locked_at = time.perf_counter()
                    if self._apply(conn, chat_id, read.row.user_id, plan, text, version=read.version):
                        self._commit(conn, chat_id, locked_at, wrote=len(text.text))
                        return plan.result
                conn.rollback()
            log.info("store.changed_under chat=%s attempt=%d/%d", chat_id, attempt, self.optimistic_tries)
        with self.engine.connect() as conn:
            row, locked_at = self._lock_and_read(conn, chat_id)
            plan = decide(row)
            text = _serialized(plan.chat) if plan.chat is not None else None
            if text is not None:
                self._apply(conn, chat_id, row.user_id, plan, text)
            self._commit(conn, chat_id, locked_at, wrote=len(text.text) if text is not None else 0)
            return plan.result

    def _read(self, conn: Connection, chat_id: str) -> _Read:
        """The chat row without the lock (a committed snapshot: a reader blocks no writer on either backend), and
        its version. SQLite: ``data_version`` is read in the same read transaction as the row, and it changes
        whenever *another* connection commits anything, so an equal value under the lock proves that nothing
        changed in between (own commits do not count: none happen, the connection is held throughout)."""
        columns = [chat_t.c.id, chat_t.c.user_id, type_coerce(chat_t.c.chat, Text).label("chat")]
        if self.is_sqlite:
            conn.exec_driver_sql("BEGIN")
            version = conn.exec_driver_sql("PRAGMA data_version").scalar()
            row = conn.execute(select(*columns).where(chat_t.c.id == chat_id)).first()
        else:
            row = conn.execute(
                select(*columns, literal_column("xmin::text").label("version")).where(chat_t.c.id == chat_id)
            ).first()
            version = row.version if row is not None else None
        conn.rollback()
        return _Read(row, version)

    def _lock(self, conn: Connection, chat_id: str, read: _Read) -> float | None:
        """SQLite: take the database's write lock on ``conn`` and tell whether the row is still the one ``read`` saw:
        the lock's time (held: write, then commit) or None (changed: roll back and read again). ``PRAGMA
        data_version`` unchanged means no other connection committed anything since the read; changed (a save of
        another chat, a checkpoint's WAL reset, owc's own other connections), the stored text and owner are compared
        with what was read, whole: exact, and cheaper than parsing (a ``memcmp``, ~3 ms for 5 MB). PostgreSQL takes
        its row lock in the writing ``UPDATE`` itself (``_save``'s ``version``)."""
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        self._same_file(conn)
        locked_at = time.perf_counter()
        if conn.exec_driver_sql("PRAGMA data_version").scalar() == read.version:
            return locked_at
        now = conn.exec_driver_sql(
            "SELECT user_id, chat IS ? FROM chat WHERE id = ?", (read.row.chat, chat_id)
        ).first() if read.row is not None else None  # fmt: skip
        same = now is not None and now[0] == read.row.user_id and bool(now[1])
        return locked_at if same else None

    def _apply(
        self,
        conn: Connection,
        chat_id: str,
        user_id: str | None,
        plan: _Plan[Any],
        text: Serialized,
        version: Any = None,
    ) -> bool:
        """The writes of a plan, under the lock: the chat row (``text``: the plan's chat, serialised), then its
        ``chat_message`` mirror. ``version`` (PostgreSQL): write only the row version read (``_save``); False, having
        written nothing, when the row changed since."""
        if version is not None and len(plan.mirror) == 1:  # PostgreSQL's short-hold write of one message
            row = _mirror_row(chat_id, user_id, plan.mirror[0], plan.now)
            binds = {"chat_id": chat_id, "version": version, "chat": text, "now": plan.now}
            if plan.current_id is not None:
                binds["current"] = plan.current_id
            binds.update((f"m_{name}", value) for name, value in row.items())
            query = _SAVES_AND_MIRRORS["status_history" in row, plan.current_id is not None]
            if not plan.reparent and not plan.remove and not conn.in_transaction():
                # The whole write is this one statement: run as its own transaction (autocommit), the row lock is
                # taken and released inside the server, in one round trip. In a transaction the commit is a second
                # round trip, and its reply waits for this process's GIL: with runs streaming on the Trio thread,
                # up to a switch interval (5 ms) inside the hold, per round trip (holds_contended.py's streaming
                # case). ``_commit`` then commits nothing; the pool resets the level when the connection goes back.
                conn.execution_options(isolation_level="AUTOCOMMIT")
            if conn.execute(query, binds).first() is None:
                return False
        elif self._save(conn, chat_id, text, plan.now, current_id=plan.current_id, version=version):
            self._mirror_many(conn, chat_id, user_id, plan.mirror, plan.now)
        else:
            return False
        for other in plan.reparent:
            conn.execute(
                update(msg_t)
                .where(msg_t.c.id == message_row_id(chat_id, other["id"]))
                .values(parent_id=other.get("parentId"), updated_at=plan.now)
            )
        for message_id in plan.remove:
            conn.execute(delete(msg_t).where(msg_t.c.id == message_row_id(chat_id, message_id)))
        return True

    def _same_file(self, conn: Connection) -> None:
        """Under the write lock: the file this connection has open is still the one at the database's path
        (one ``stat``). A deleted or replaced file raises ``DatabaseGone`` and drops the connection."""
        path = sqlite_file(self.engine)
        if path is None:
            return
        opened = conn.info.get(FILE_ID)
        if opened is None or file_id(path) != opened:
            conn.invalidate()
            raise DatabaseGone(f"the database file {path} was deleted or replaced")

    @staticmethod
    def _load(chat_id: str, row: Any, user_id: str | None) -> dict[str, Any]:
        if row is None:
            raise ChatMissing(chat_id)
        if user_id is not None and row.user_id != user_id:
            raise ChatOwnerMismatch(chat_id, user_id, row.user_id)
        raw = row.chat
        if raw is None or isinstance(raw, (dict, list)):
            value = raw  # psycopg hands a json column over already parsed, whatever the declared type
        else:
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise ChatCorrupt(chat_id, f"not JSON ({exc.msg})") from None
        if value is None:
            value = {}
        try:
            tree.messages_of(value)
        except tree.TreeError as exc:
            raise ChatCorrupt(chat_id, str(exc)) from None
        return value

    def _save(
        self,
        conn: Connection,
        chat_id: str,
        chat: dict[str, Any] | Serialized,
        now: int,
        current_id: str | None = None,
        version: Any = None,
    ) -> bool:
        """Write the chat row. ``version`` (PostgreSQL; None: unconditional): only while the row's ``xmin`` is still
        the one read outside the lock. Every update makes a row version whose ``xmin`` is its own transaction's id,
        and an ``UPDATE`` that finds the row locked by another writer waits, then evaluates its ``WHERE`` again on the
        version that writer committed (PostgreSQL's READ COMMITTED rule): so one statement takes the row lock, checks
        and writes (no ``SELECT ... FOR UPDATE`` round trip inside the hold). False: the row changed, nothing
        written."""
        values: dict[str, Any] = {"chat": chat, "updated_at": now}
        if current_id is not None:
            values["current_message_id"] = current_id
        query = update(chat_t).where(chat_t.c.id == chat_id)
        if version is not None:
            query = query.where(literal_column("xmin::text") == version)
        return conn.execute(query.values(**values)).rowcount == 1

    @classmethod
    def _mirror(cls, conn: Connection, chat_id: str, user_id: str | None, message: dict[str, Any], now: int) -> None:
        """Keep ``chat_message`` in step, as ``ChatMessages.upsert_message`` would (it drives the unfinished
        indicators and is what Open WebUI reads first)."""
        cls._mirror_many(conn, chat_id, user_id, (message,), now)

    @staticmethod
    def _mirror_many(
        conn: Connection, chat_id: str, user_id: str | None, messages: Sequence[dict[str, Any]], now: int
    ) -> None:
        """``_mirror`` for several messages: one upsert statement executed for all rows (psycopg sends them without
        a round trip each), so writes made together (``write_many``) add no round trip per message to the hold."""
        # One upsert, so a row Open WebUI inserts meanwhile (its chat_message backfill, its own
        # upsert_message) cannot make owc's insert fail on the primary key.
        dialect = "postgresql" if conn.dialect.name == "postgresql" else "sqlite"
        with_status: list[dict[str, Any]] = []
        without: list[dict[str, Any]] = []
        for message in messages:
            row = _mirror_row(chat_id, user_id, message, now)
            (with_status if "status_history" in row else without).append(row)
        for rows, status in ((with_status, True), (without, False)):
            if rows:
                conn.execute(_UPSERTS[dialect, status], rows[0] if len(rows) == 1 else rows)

    # ------------------------------------------------------------------ claim

    def claim(
        self,
        chat_id: str,
        message_id: str,
        *,
        run_id: str,
        writer: str,
        alive: Callable[[str | None], bool],
        user_id: str | None = None,
        task_id: str | None = None,
        create: bool = True,
        adopt_writerless: bool = False,
        reopen: bool = False,
    ) -> ClaimResult:
        """Make M at the chat's true tail, or report who has it. One transaction.

        ``create=False`` only adopts: an existing M whose writer is dead is taken over, a missing M is
        reported ``Absent`` (a run found active after a reconnect may never have shown anything).

        ``adopt_writerless``: an unfinished M with no recorded writer (Open WebUI's own placeholder, left by a
        request that died: seed P20) is taken over too.

        ``reopen``: a handover (seed 000 section 2.6): the inline request's own end-of-stream save marked M
        ``done`` with the output it had; its writer takes M back all the same (unless a live writer holds it).

        ``user_id`` is the user the session key names: a chat of another user is refused. ``alive`` tells
        whether a recorded writer is still a live connection (the process-wide registry).
        """

        def decide(row: Any) -> _Plan[ClaimResult]:
            chat = self._load(chat_id, row, user_id)
            now = int(time.time())
            existing = chat["history"]["messages"].get(message_id)
            if existing is not None and not isinstance(existing, dict):
                raise ChatCorrupt(chat_id, f"message {message_id} is not an object")
            if existing is not None and existing.get("role", "assistant") != "assistant":
                raise NotAnAssistantMessage(chat_id, message_id, existing.get("role"))
            if existing is not None:
                meta = existing.get("meta") if isinstance(existing.get("meta"), dict) else {}
                holder = meta.get("openclaw_writer")
                done = message_finished(existing)
                chain = meta.get("openclaw_chain") if isinstance(meta.get("openclaw_chain"), list) else []
                # M finished with this run's part in it (another process ran it to its end): nothing to take back.
                takes_back = reopen and not (done and run_id in chain)
                orphan = holder is None and adopt_writerless
                if (
                    (done and not takes_back)
                    or (holder is None and not orphan)
                    or holder == writer
                    # A live writer keeps M, unless M is finished: its writer is done with it, and a continuation
                    # (``reopen``: a recovery or a resume linked into M) takes it back whoever finished it.
                    or (holder is not None and alive(holder) and not (done and takes_back))
                ):
                    return _Plan(AlreadyThere(writer=holder, run_id=meta.get("openclaw_run"), done=done))
                existing["meta"] = {
                    **meta,
                    "openclaw_writer": writer,
                    "openclaw_run": meta.get("openclaw_run") or run_id,
                    OPEN_MARK: True,  # owed its finish until owc writes it finished
                }
                taken = TakenOver(message=existing, previous_writer=holder)
                return _Plan(taken, chat, now, mirror=(existing,))
            if not create:
                return _Plan(Absent())
            inserted = tree.insert_assistant(
                chat, message_id, run_id=run_id, writer=writer, user_id=row.user_id, task_id=task_id, now=now
            )
            return _Plan(inserted, chat, now, current_id=message_id, mirror=(inserted.message,))

        try:
            result = self._transact(chat_id, decide)
            if isinstance(result, TakenOver):
                log.info("store.taken_over chat=%s message=%s from=%s", chat_id, message_id, result.previous_writer)
            return result
        except OperationalError as exc:
            if is_locked_error(exc):
                log.warning("store.claim_locked chat=%s message=%s", chat_id, message_id)
                return Locked(str(exc.orig))
            log.error("store.claim_refused chat=%s message=%s error=%s", chat_id, message_id, refusal_text(exc))
            return Unavailable(refusal_text(exc))
        except REFUSALS as exc:
            log.error("store.claim_refused chat=%s message=%s error=%s", chat_id, message_id, refusal_text(exc))
            return Unavailable(refusal_text(exc))

    # ------------------------------------------------------------------ handover and finalize

    def reserve_resume(
        self,
        chat_id: str,
        message_id: str,
        *,
        source: str,
        chain: Sequence[str],
        content: str,
        output: list[Any],
        limit: int,
    ) -> tuple[int, bool]:
        """Reserve M's next resume for the cut run ``source``, in one locked transaction: returns ``(n, new)``, the
        resume's number and whether this call made it. A cut another process already resumed gets that resume's
        number back (``new`` False): two processes deciding the same cut send the same run id, and the Gateway
        starts one run. M keeps its count (``meta.openclaw_resumes``, the budget: a restart of owc does not reset
        it) and, per cut run, the resume it got (``meta.openclaw_resumed``). M is written open with the cut's
        chain and output unless its chain already goes on past ``source`` (its continuation wrote it). With ``limit``
        resumes spent, nothing is written and ``(limit + 1, False)`` comes back: the budget is over."""

        def decide(row: Any) -> _Plan[tuple[int, bool]]:
            chat = self._load(chat_id, row, None)
            existing = chat["history"]["messages"].get(message_id)
            if not isinstance(existing, dict):
                raise MessageMissing(chat_id, message_id)
            meta = existing.get("meta") if isinstance(existing.get("meta"), dict) else {}
            resumed = meta.get("openclaw_resumed") if isinstance(meta.get("openclaw_resumed"), dict) else {}
            count = meta.get("openclaw_resumes") if isinstance(meta.get("openclaw_resumes"), int) else 0
            if isinstance(resumed.get(source), int):
                return _Plan((resumed[source], False))
            if count >= limit:
                return _Plan((limit + 1, False))
            n = count + 1
            fields = {"openclaw_resumes": n, "openclaw_resumed": {**resumed, source: n}}
            if tree.continued_past(existing, source):
                existing["meta"] = {**meta, **fields}
                message = existing
            else:
                message = tree.update_message(
                    chat,
                    message_id,
                    content=content,
                    output=output,
                    done=False,
                    meta={**fields, "openclaw_chain": list(chain)},
                )
            return _Plan((n, True), chat, int(time.time()), mirror=(message,))

        return self._transact(chat_id, decide)

    def write(
        self,
        chat_id: str,
        message_id: str,
        *,
        content: str,
        output: list[Any],
        done: bool,
        error: str | None = None,
        meta: dict[str, Any] | None = None,
        unless_done: bool = False,
        unless_continued: str | None = None,
        run_order: Sequence[str] = (),
        user_id: str | None = None,
        continues: bool = False,
        unless_holds: str | None = None,
        fills: bool = False,
        status: Sequence[Mapping[str, Any]] = (),
        own_part: str | None = None,
    ) -> WriteResult:
        """Write M's content and output: a handover (``done=False``) or the finalize (``done=True``). ``run_order``:
        M's session's runs in transcript (start) order; the line of their messages around M is put in that order
        (``tree.reorder_run_line``).
        One transaction per attempt; a locked database is retried ``finalize_attempts`` times, each attempt
        waiting the busy timeout, then ``NotWritten``. ``unless_done``: leave a finished message as it is
        (``AlreadyDone``): a process finishing a run another process may be finishing too. ``unless_continued``: the
        same for a message whose chain (``meta.openclaw_chain``) goes on past that run: its continuation wrote it,
        and the cut run has nothing to add (a process that saw the cut late must not write over it). ``unless_holds``:
        the same for a finished message whose chain holds that run: another process's copy of the same continuation
        finished it after this one's claim (two deploys linked the same recovery), and this write, from M as it was
        at the claim, could only replace that finish with less. ``status``: entries appended to M's
        ``statusHistory`` in the same write (``tree.add_status``: a finishing write closes a line left open);
        ``Written.statuses`` says what was appended. ``own_part``: ``output`` is that run's own part alone (a correction
        from its transcript): when M is a chain whose last run it is, M's earlier runs' part (before
        ``meta.openclaw_own_at``) stays in front, with the seam (``owc.render.seam.joined``), never the run's part
        twice nor a second seam."""

        request = WriteRequest(
            message_id,
            {
                "content": content, "output": output, "done": done, "error": error, "meta": meta,
                "unless_done": unless_done, "unless_continued": unless_continued, "run_order": run_order,
                "user_id": user_id, "continues": continues, "unless_holds": unless_holds, "fills": fills,
                "status": status, "own_part": own_part,
            },
        )  # fmt: skip
        (result,) = self.write_many(chat_id, [request])
        if isinstance(result, StoreError):
            raise result
        return result

    def write_many(self, chat_id: str, requests: Sequence[WriteRequest]) -> list[WriteResult | StoreError]:
        """Several ``write`` calls of one chat in one transaction: each decided in turn, in the order given, on one
        read and parse of the chat (each sees the ones before it, as it would one transaction later), then the chat
        serialised and written once. The result of each, in order; a ``StoreError`` one of them raised is its result
        (nothing of it written; the others are). A locked or refusing database gives every one the same
        ``NotWritten``.

        Why: every write reads, parses and serialises the whole chat (a 10,000-message chat is ~5 MB of JSON: ~25 ms
        of parse on this project's 2-core machine, ~100 ms under load), so a burst of finalizes on one big chat
        (many agents ending together) cost one whole-chat rewrite each; writes of the chat already waiting their
        turn (``TrioChatStore.write``) now share one."""
        attempt = 0

        def decide(row: Any) -> _Plan[list[WriteResult | StoreError]]:
            chat: dict[str, Any] | None = None
            results: list[WriteResult | StoreError] = []
            plans: list[_Plan[WriteResult]] = []
            for index, request in enumerate(requests):
                user_id = request.kwargs.get("user_id")
                try:
                    if chat is None:
                        # ``user_id``: the user the run's session key names; a chat moved to another user mid-run is
                        # refused.
                        chat = self._load(chat_id, row, user_id)
                    elif user_id is not None and row.user_id != user_id:
                        raise ChatOwnerMismatch(chat_id, user_id, row.user_id)
                    plan = self._decide_write(chat_id, chat, request.message_id, attempt, **request.kwargs)
                except StoreError as exc:
                    results.append(exc)
                    continue
                # A later write of the batch may change the dicts this result holds (the same message, a line put in
                # order): its caller gets them as this write left them, as a transaction of its own would give them.
                results.append(plan.result if index == len(requests) - 1 else copy.deepcopy(plan.result))
                plans.append(plan)
            writing = [plan for plan in plans if plan.chat is not None]
            if chat is None or not writing:
                return _Plan(results)
            mirror: dict[int, dict[str, Any]] = {}
            reparent: dict[int, dict[str, Any]] = {}
            for plan in writing:  # each message once, as the last write left it (the dicts are the chat's own)
                mirror.update((id(m), m) for m in plan.mirror)
                reparent.update((id(m), m) for m in plan.reparent)
            current = chat["history"].get("currentId")
            moved_view = any(plan.current_id is not None for plan in writing)
            return _Plan(
                results,
                chat,
                max(plan.now for plan in writing),
                current_id=current if moved_view and isinstance(current, str) else None,
                mirror=tuple(mirror.values()),
                reparent=tuple(reparent.values()),
            )

        last = ""
        for attempt in range(1, self.finalize_attempts + 1):
            try:
                results = self._transact(chat_id, decide)
                for request, result in zip(requests, results):
                    if isinstance(result, Written) and result.moved:
                        log.info(
                            "store.reordered chat=%s message=%s moved=%d",
                            chat_id,
                            request.message_id,
                            len(result.moved),
                        )
                if len(requests) > 1:
                    log.info("store.writes_together chat=%s writes=%d", chat_id, len(requests))
                return results
            except REFUSALS as exc:
                ids = ",".join(request.message_id for request in requests)
                if not (isinstance(exc, OperationalError) and is_locked_error(exc)):
                    log.error("store.write_refused chat=%s message=%s error=%s", chat_id, ids, refusal_text(exc))
                    return [NotWritten(detail=refusal_text(exc), attempts=attempt, locked=False) for _ in requests]
                last = str(exc.orig)
                log.warning(
                    "store.write_locked chat=%s message=%s attempt=%d/%d", chat_id, ids, attempt, self.finalize_attempts
                )
        return [NotWritten(detail=last, attempts=attempt) for _ in requests]

    def _decide_write(
        self,
        chat_id: str,
        chat: dict[str, Any],
        message_id: str,
        attempt: int,
        *,
        content: str,
        output: list[Any],
        done: bool,
        error: str | None = None,
        meta: dict[str, Any] | None = None,
        unless_done: bool = False,
        unless_continued: str | None = None,
        run_order: Sequence[str] = (),
        user_id: str | None = None,
        continues: bool = False,
        unless_holds: str | None = None,
        fills: bool = False,
        status: Sequence[Mapping[str, Any]] = (),
        own_part: str | None = None,
    ) -> _Plan[WriteResult]:
        """One ``write`` decided on ``chat`` (parsed, its owner checked; changed in place): what it returns and
        writes. Every check that can refuse it (a ``StoreError``) comes before the first change to ``chat``, so a
        refused write of a batch leaves the chat as the writes before it left it."""
        if message_id not in chat["history"]["messages"]:
            raise MessageMissing(chat_id, message_id)
        existing = chat["history"]["messages"][message_id]
        if not isinstance(existing, dict):
            raise ChatCorrupt(chat_id, f"message {message_id} is not an object")
        if existing.get("role", "assistant") != "assistant":
            raise NotAnAssistantMessage(chat_id, message_id, existing.get("role"))
        if unless_done and message_finished(existing):
            return _Plan(AlreadyDone(message=existing))
        if unless_continued is not None and tree.continued_past(existing, unless_continued):
            return _Plan(AlreadyDone(message=existing))
        if unless_holds is not None and message_finished(existing) and tree.holds_run(existing, unless_holds):
            return _Plan(AlreadyDone(message=existing))
        new_content, new_output, new_meta = content, output, meta
        if own_part is not None:
            front = _earlier_part(existing, own_part)
            if front is not None:
                new_output, own_at = joined(front, own_part, output)
                new_content, new_meta = output_text(new_output), {**(meta or {}), "openclaw_own_at": own_at}
        gained = _gained_since_claim(existing, output, meta) if done and continues else None
        if gained is not None:
            new_output = gained[0]
            new_content, new_meta = output_text(new_output), {**(meta or {}), "openclaw_own_at": gained[1]}
            log.info("store.kept_gained chat=%s message=%s (M gained since the claim)", chat_id, message_id)
        now = int(time.time())
        finished_before = copy.deepcopy(existing) if done and message_finished(existing) else None
        had = len(existing.get("statusHistory") or []) if isinstance(existing.get("statusHistory"), list) else 0
        message = tree.update_message(
            chat,
            message_id,
            content=new_content,
            output=new_output,
            done=done,
            error=error,
            meta=new_meta,
            continues=continues,
            fills=fills,
            status=status,
        )
        statuses = tuple(message.get("statusHistory") or [])[had:]
        moved = tree.reorder_run_line(chat, message_id, run_order) if run_order else []
        current = chat["history"].get("currentId") if moved else None
        parent = tree.messages_of(chat).get(message.get("parentId") or "")
        written = Written(
            message=message,
            attempts=attempt,
            moved=tuple(m for m in moved if m is not message),
            parent=(
                {"id": parent["id"], "childrenIds": list(parent.get("childrenIds") or [])}
                if isinstance(parent, dict) and isinstance(parent.get("id"), str)
                else None
            ),
            current_id=chat["history"].get("currentId") if isinstance(chat["history"].get("currentId"), str) else None,
            parent_run=_run_of(parent),
            statuses=statuses,
        )
        if finished_before is not None and not moved and orjson.dumps(message) == orjson.dumps(finished_before):
            # A finalize of a message already finished with exactly this (another process finished the same run
            # from the same transcript): it costs a read and writes nothing (issue 24, item 13: with 8 processes
            # on PostgreSQL, 235 of 500 runs were written twice).
            return _Plan(written)
        return _Plan(
            written,
            chat,
            now,
            current_id=current if isinstance(current, str) else None,
            mirror=(message,),
            reparent=tuple(moved),
        )

    def put_in_order(
        self, chat_id: str, message_id: str, *, run_order: Sequence[str], user_id: str | None = None
    ) -> WriteResult | None:
        """Put the line of M's session's messages around M in ``run_order`` (its runs in transcript order:
        ``tree.reorder_run_line``), changing nothing else: what a finalize does with its transcript in hand, for a
        finished M whose finalize could not read it (``chat.history`` failed; ``owc/runs/correct.py``). None: M is
        gone, or the line is in order already (nothing written); ``Written.moved``: every message whose links
        changed, M's own included when it moved; ``NotWritten``: the database would not take it."""

        def decide(row: Any) -> _Plan[WriteResult | None]:
            chat = self._load(chat_id, row, user_id)
            message = tree.messages_of(chat).get(message_id)
            if not isinstance(message, dict) or message.get("role", "assistant") != "assistant":
                return _Plan(None)
            current_before = chat["history"].get("currentId")
            moved = tree.reorder_run_line(chat, message_id, run_order)
            if not moved:
                return _Plan(None)
            current = chat["history"].get("currentId")
            written = Written(
                message=message,
                moved=tuple(moved),
                current_id=current if isinstance(current, str) and current != current_before else None,
            )
            return _Plan(
                written,
                chat,
                int(time.time()),
                current_id=current if isinstance(current, str) else None,
                reparent=tuple(moved),
            )

        last, attempt = "", 0
        for attempt in range(1, self.finalize_attempts + 1):
            try:
                result = self._transact(chat_id, decide)
                if isinstance(result, Written):
                    log.info("store.reordered chat=%s message=%s moved=%d", chat_id, message_id, len(result.moved))
                return result
            except REFUSALS as exc:
                if not (isinstance(exc, OperationalError) and is_locked_error(exc)):
                    log.error("store.order_refused chat=%s message=%s error=%s", chat_id, message_id, refusal_text(exc))
                    return NotWritten(detail=refusal_text(exc), attempts=attempt, locked=False)
                last = str(exc.orig)
        return NotWritten(detail=last, attempts=attempt)

    def add_shown(
        self,
        chat_id: str,
        message_id: str,
        *,
        shown_through: Mapping[str, Sequence[Any]],
        missed: Mapping[str, str] | None = None,
        user_id: str | None = None,
    ) -> WriteResult | None:
        """A finished M that lacks what this process showed of it: put that in front of the continuation's part, in
        one conditional write under the row lock (issue 24, items 5 and 14). A crash cut run R that stored nothing of
        what it streamed, and another process's continuation (which never saw that stream) finished M with its own
        part only; R's process, back later, finds M finished (``render.never_less.shown_in_front`` decides what is
        added, from M's chain and ``meta.openclaw_own_at``, as M is under the lock). None: M is not finished, or
        holds it all already (a second pass adds nothing); ``NotWritten``: the database would not take it.
        ``missed``: the runs of ``shown_through`` whose stream here had a gap or joined mid-run, each with the run-wide
        text it received (``shown_in_front``)."""

        def decide(row: Any) -> _Plan[WriteResult | None]:
            chat = self._load(chat_id, row, user_id)
            existing = chat["history"]["messages"].get(message_id)
            if not isinstance(existing, dict) or existing.get("role", "assistant") != "assistant":
                return _Plan(None)
            if not message_finished(existing):
                return _Plan(None)  # M is being written: its writer shows what M held at its claim
            meta = existing.get("meta") if isinstance(existing.get("meta"), dict) else {}
            chain = meta.get("openclaw_chain")
            own_at = meta.get("openclaw_own_at")
            output = existing.get("output")
            if not isinstance(chain, list) and isinstance(meta.get("openclaw_run"), str):
                # A message of one run, finished by another process from that run's transcript (fuzz seed 40164).
                chain, own_at = [meta["openclaw_run"]], 0
            if isinstance(chain, list) and len(chain) == 1 and own_at is None:
                own_at = 0  # a chain of one run: its part is the whole of M
            if not isinstance(chain, list) or not isinstance(own_at, int) or not isinstance(output, list):
                return _Plan(None)
            added = shown_in_front([str(x) for x in chain], own_at, output, shown_through, missed)
            if added is None:
                return _Plan(None)
            new_output, new_own_at = added
            message = tree.update_message(
                chat,
                message_id,
                content=output_text(new_output),
                output=new_output,
                done=True,
                meta={"openclaw_own_at": new_own_at} if "openclaw_own_at" in meta else None,
            )
            return _Plan(Written(message=message), chat, int(time.time()), mirror=(message,))

        last, attempt = "", 0
        for attempt in range(1, self.finalize_attempts + 1):
            try:
                return self._transact(chat_id, decide)
            except REFUSALS as exc:
                if not (isinstance(exc, OperationalError) and is_locked_error(exc)):
                    log.error("store.add_refused chat=%s message=%s error=%s", chat_id, message_id, refusal_text(exc))
                    return NotWritten(detail=refusal_text(exc), attempts=attempt, locked=False)
                last = str(exc.orig)
        return NotWritten(detail=last, attempts=attempt)

    # ------------------------------------------------------------------ reads (tests, CLI, reconcile)

    def chat_times(self) -> dict[str, int]:
        """Every chat's ``updated_at`` (seconds): what the chats looked like before this process wrote any (read
        once, at the first connection, as the ended-while-away watermark). One indexed scan of two columns."""
        with self.engine.connect() as conn:
            return {
                chat_id: int(updated or 0)
                for chat_id, updated in conn.execute(select(chat_t.c.id, chat_t.c.updated_at))
            }

    def chat_facts(self, chat_ids: list[str], present: Mapping[str, str] | None = None) -> dict[str, ChatFacts]:
        """For each existing chat: when it was last written, its unfinished assistant messages, and whether it
        holds the message ``present`` names for it (chat id -> message id). Indexed queries, no lock
        (``chat_message_chat_role_done_idx`` serves the second, the primary key the third)."""
        out: dict[str, ChatFacts] = {}
        if not chat_ids:
            return out
        held: dict[str, set[str]] = {}
        with self.engine.connect() as conn:
            if present:
                rows = [f"{chat_id}-{message_id}" for chat_id, message_id in present.items()]
                for row_id, chat_id in conn.execute(select(msg_t.c.id, msg_t.c.chat_id).where(msg_t.c.id.in_(rows))):
                    held.setdefault(chat_id, set()).add(row_id[len(chat_id) + 1 :])
            updated = dict(
                conn.execute(select(chat_t.c.id, chat_t.c.updated_at).where(chat_t.c.id.in_(chat_ids))).all()
            )
            unfinished: dict[str, set[str]] = {}
            query = select(msg_t.c.chat_id, msg_t.c.id).where(
                msg_t.c.chat_id.in_(chat_ids), msg_t.c.role == "assistant", msg_t.c.done == false()
            )
            for chat_id, row_id in conn.execute(query):
                prefix = f"{chat_id}-"
                if row_id.startswith(prefix):
                    unfinished.setdefault(chat_id, set()).add(row_id[len(prefix) :])
            uncorrected: dict[str, set[str]] = {}
            query = select(msg_t.c.chat_id, msg_t.c.id).where(
                msg_t.c.chat_id.in_(chat_ids),
                msg_t.c.role == "assistant",
                msg_t.c.done == true(),
                msg_t.c.meta[CORRECT_MARK].as_boolean() == true(),
            )
            for chat_id, row_id in conn.execute(query):
                prefix = f"{chat_id}-"
                if row_id.startswith(prefix):
                    uncorrected.setdefault(chat_id, set()).add(row_id[len(prefix) :])
        for chat_id, updated_at in updated.items():
            out[chat_id] = ChatFacts(
                int(updated_at or 0),
                frozenset(unfinished.get(chat_id, ())),
                frozenset(held.get(chat_id, ())),
                frozenset(uncorrected.get(chat_id, ())),
            )
        return out

    def chat_owner(self, chat_id: str) -> str | None:
        """The user who owns the chat (its row's ``user_id``), or None for no such chat: one indexed read of one
        column, no lock. The chat's session key names this user, whoever sends (``Runtime.chat_session_key``)."""
        with self.engine.connect() as conn:
            owner = conn.execute(select(chat_t.c.user_id).where(chat_t.c.id == chat_id)).scalar()
        return owner if isinstance(owner, str) and owner else None

    def read_chat(self, chat_id: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(type_coerce(chat_t.c.chat, Text)).where(chat_t.c.id == chat_id)).first()
        if row is None or row[0] is None:
            return None
        return row[0] if isinstance(row[0], dict) else orjson.loads(row[0])

    def add_turn(self, chat_id: str, user_message_id: str, reply_id: str, *, text: str) -> None:
        """A user turn and Open WebUI's placeholder for its reply at the chat's tail, under the row lock (for
        the embedded default, the scenarios and tests: Open WebUI writes these itself)."""
        with self._locked(chat_id) as (conn, row):
            chat = self._load(chat_id, row, None)
            now = int(time.time())
            for message in tree.insert_user_turn(
                chat, user_message_id, reply_id, text=text, user_id=row.user_id, now=now
            ):
                self._mirror(conn, chat_id, row.user_id, message, now)
            self._save(conn, chat_id, chat, now, current_id=reply_id)

    def add_message(self, chat_id: str, message: dict[str, Any], *, current: bool) -> None:
        """A message Open WebUI itself writes (a user turn, its placeholder, an edit that starts a branch), under
        its ``parentId`` (None: a new root; absent: the chat's tail) and, if ``current``, the one the chat shows
        (for the scenarios and tests: Open WebUI writes these itself)."""
        with self._locked(chat_id) as (conn, row):
            chat = self._load(chat_id, row, None)
            messages = tree.messages_of(chat)
            now = int(time.time())
            message = {"childrenIds": [], "timestamp": now, "user_id": row.user_id, **message}
            if "parentId" not in message:
                message["parentId"] = tree.anchor(chat)
            messages[message["id"]] = message
            parent = messages.get(message.get("parentId") or "")
            if isinstance(parent, dict):
                parent["childrenIds"] = [*(parent.get("childrenIds") or []), message["id"]]
            if current:
                chat["history"]["currentId"] = message["id"]
            self._mirror(conn, chat_id, row.user_id, message, now)
            self._save(conn, chat_id, chat, now, current_id=message["id"] if current else None)

    def save_message(self, chat_id: str, message_id: str, fields: dict[str, Any]) -> None:
        """A save of a message's keys as Open WebUI's own ``upsert_message_to_chat_by_id_and_message_id`` makes it
        (its middleware's end-of-request save, ``{done: true, output}`` on a cancel): the keys given replace the
        message's, every other key (``meta`` among them) stays. For the scenarios and tests: Open WebUI writes these
        itself."""
        with self._locked(chat_id) as (conn, row):
            chat = self._load(chat_id, row, None)
            message = tree.messages_of(chat).get(message_id)
            if not isinstance(message, dict):
                raise MessageMissing(chat_id, message_id)
            message.update(fields)
            now = int(time.time())
            self._mirror(conn, chat_id, row.user_id, message, now)
            self._save(conn, chat_id, chat, now)

    def absorb_recovery(
        self,
        chat_id: str,
        message_id: str,
        *,
        source: str | None,
        recovery: str,
        recovery_message_id: str,
        user_id: str | None = None,
    ) -> AbsorbResult:
        """Make one reply of a cut run's message M and the message another process gave the run's restart recovery
        of its own, in one transaction under the row lock: M gets the recovery's output after its own (what the cut
        run ``source`` showed, as M holds it), the recovery's error if it has one, and the chain ``[..., source,
        recovery]`` (so every later reading, the reconcile's ``openclaw_chain`` lookup, link rule E, finds the
        recovery in M); it is finished; the recovery's own message is taken out of the tree
        (``tree.remove_message``) and out of ``chat_message``.

        Only while the recovery's message is still finished with exactly that run (its ``openclaw_run``, no chain
        past it) and M's chain does not go on past ``source``: anything else (a continuation wrote M, the recovery's
        message changed or went) is ``NotAbsorbed`` and nothing is written. Why (issue 24, item 4's shape D): two
        deploys, a crash under a run that had stored nothing; the deploy back first could not name the run its
        recovery continued, nor find its message (the other deploy, which had streamed the run, had not claimed
        it yet), so it gave the recovery a message of its own; nothing in the Gateway says more, so the process
        holding M repairs it when it is back.

        M that already holds the recovery (its chain names it: the other process linked it, in a race with the
        message of its own this one made) keeps what it holds, and the recovery's own message goes all the same:
        a double continuation otherwise. ``source`` None: only that case."""

        def decide(row: Any) -> _Plan[AbsorbResult]:
            chat = self._load(chat_id, row, user_id)
            messages = chat["history"]["messages"]
            into, other = messages.get(message_id), messages.get(recovery_message_id)
            if not isinstance(into, dict) or into.get("role", "assistant") != "assistant":
                return _Plan(NotAbsorbed("the cut run's message is not there"))
            if (
                recovery_message_id == message_id
                or not isinstance(other, dict)
                or other.get("role", "assistant") != "assistant"
            ):
                return _Plan(NotAbsorbed("the recovery's message is not there"))
            meta = other.get("meta") if isinstance(other.get("meta"), dict) else {}
            chain = meta.get("openclaw_chain")
            if (
                not message_finished(other)
                or meta.get("openclaw_run") != recovery
                or (chain not in (None, []) and chain != [recovery])
            ):
                return _Plan(NotAbsorbed("the recovery's message is not finished with that run alone"))
            held = into.get("meta", {}).get("openclaw_chain") if isinstance(into.get("meta"), dict) else None
            if isinstance(held, list) and recovery in held:
                message = into  # M holds the recovery already: only its double goes
            elif source is None or tree.continued_past(into, source):
                return _Plan(NotAbsorbed("the cut run's message was continued, or holds no part of the recovery"))
            else:
                runs = [str(x) for x in held] if isinstance(held, list) and source in held else [source]
                # The seam between M's part and the recovery's (``owc.render.seam``), as a finalize puts it.
                output, own_at = joined(into.get("output") or [], recovery, other.get("output") or [])
                error = other.get("error")
                message = tree.update_message(
                    chat,
                    message_id,
                    content=output_text(output),
                    output=output,
                    done=True,
                    error=str(error.get("content")) if isinstance(error, dict) and error.get("content") else None,
                    meta={"openclaw_chain": [*runs[: runs.index(source) + 1], recovery], "openclaw_own_at": own_at},
                    continues=True,
                )
            if tree.above(messages, recovery_message_id, message_id):
                changed = tree.take_place(chat, message_id, recovery_message_id)  # M made below it: M goes there
            else:
                changed = tree.remove_message(chat, recovery_message_id)
            current = chat["history"].get("currentId")
            result = Absorbed(
                message=message,
                removed=recovery_message_id,
                changed=tuple(m for m in changed if m is not message),
                current_id=current if isinstance(current, str) else None,
            )
            return _Plan(
                result,
                chat,
                int(time.time()),
                current_id=result.current_id,
                mirror=(message,),
                reparent=tuple(changed),  # M among them when it hung under the recovery's message
                remove=(recovery_message_id,),
            )

        result = self._transact(chat_id, decide)
        if isinstance(result, Absorbed):
            log.info("store.absorbed chat=%s message=%s removed=%s", chat_id, message_id, recovery_message_id)
        return result

    def set_task_id(self, chat_id: str, message_id: str, task_id: str, *, holds: Callable[[str | None], bool]) -> bool:
        """Name ``task_id`` in the message's ``meta.task_id`` while a writer ``holds`` accepts (this process's:
        ``Registry.is_local``; a run carried to the next connection changes its writer, not its task) holds it
        unfinished: its writer was registered again as an Open WebUI task under a new id (a cancel that was not a
        Stop, ``owc.owui.emitter``), and Open WebUI's ``/stop`` of a shared chat's reply looks the task up by that
        key. One key merged into ``meta`` under the row lock (``meta`` also holds the run, the writer and the open
        mark); False, writing nothing, when the message is gone, finished, held by another process's writer (the
        id names no task there) or already names it."""
        return self._change_held_meta(
            chat_id,
            message_id,
            holds,
            lambda meta: None if meta.get("task_id") == task_id else {**meta, "task_id": task_id},
        )

    def release(self, chat_id: str, message_id: str, *, holds: Callable[[str | None], bool]) -> bool:
        """Let go of an unfinished message held by a writer ``holds`` accepts (this process's:
        ``Registry.is_local``): owc is closing for good (Open WebUI's shutdown) while the message's run goes on at
        the Gateway. The next process, or another worker, then takes the writerless message at once
        (``claim(adopt_writerless=True)``) and streams the run, instead of standing by, until the run's end, for a
        writer it cannot see is gone (issue 25, item 1: a tab kept open across a restart showed neither the run
        nor a working Stop). ``meta.openclaw_writer`` out under the row lock; the open mark stays (the message is
        still owed its finish). False, writing nothing, when the message is gone, finished or held by another
        process's writer."""
        return self._change_held_meta(
            chat_id, message_id, holds, lambda meta: {k: v for k, v in meta.items() if k != "openclaw_writer"}
        )

    def _change_held_meta(
        self,
        chat_id: str,
        message_id: str,
        holds: Callable[[str | None], bool],
        change: Callable[[dict[str, Any]], dict[str, Any] | None],
    ) -> bool:
        """One write of an unfinished assistant message's ``meta`` under the row lock, while a writer ``holds``
        accepts holds it: ``change`` gives the new ``meta`` (None: nothing to change). False, writing nothing, when
        the message is gone, not an assistant's, finished, held by another writer, or unchanged."""
        with self._locked(chat_id) as (conn, row):
            if row is None:
                return False
            chat = self._load(chat_id, row, None)
            message = tree.messages_of(chat).get(message_id)
            if not isinstance(message, dict) or message.get("role", "assistant") != "assistant":
                return False
            meta = message.get("meta") if isinstance(message.get("meta"), dict) else {}
            if not holds(meta.get("openclaw_writer")) or message_finished(message):
                return False
            changed = change(meta)
            if changed is None:
                return False
            message["meta"] = changed
            now = int(time.time())
            self._mirror(conn, chat_id, row.user_id, message, now)
            self._save(conn, chat_id, chat, now)
            return True

    def add_status(
        self, chat_id: str, message_id: str, entries: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]] | None:
        """Append status lines to M's ``statusHistory`` (in the chat JSON and its ``chat_message`` row), as Open WebUI's
        own ``add_message_status_to_chat_by_id_and_message_id`` does for a request's ``status`` events: one short
        transaction under the row lock, nothing else of M touched. What was appended; None, writing nothing, when M is
        gone, not an assistant message, or finished (its lines were closed by the write that finished it: a line said
        after that, such as a drop under a writer whose message another process finished, no longer holds). A database
        that refuses writes raises (``REFUSALS``): the caller keeps the entries for its next write."""

        def decide(row: Any) -> _Plan[list[dict[str, Any]] | None]:
            if row is None or not entries:
                return _Plan(None)
            chat = self._load(chat_id, row, None)
            message = tree.messages_of(chat).get(message_id)
            if not isinstance(message, dict) or message.get("role", "assistant") != "assistant":
                return _Plan(None)
            if message_finished(message):
                return _Plan(None)
            added = tree.add_status(message, entries, finished=False)
            return _Plan(added, chat, int(time.time()), mirror=(message,))

        return self._transact(chat_id, decide)

    def add_lines_at_tail(
        self, chat_id: str, entries: Sequence[Mapping[str, Any]], *, mark: str
    ) -> tuple[str, list[dict[str, Any]]] | None:
        """Append status lines to the message at the chat's tail (``history.currentId``), when it is an assistant
        message, finished or not: what the chat shows now. An entry whose ``mark`` value a line of the chat already
        has (in any message: the tail moves on) is not added again (every worker's connection gets the same Gateway
        event and says the same line: one copy stays). ``(M's id, what was appended)``; None, writing nothing, when
        the tail is not an assistant message or nothing is new. A database that refuses writes raises
        (``REFUSALS``)."""

        def decide(row: Any) -> _Plan[tuple[str, list[dict[str, Any]]] | None]:
            if row is None or not entries:
                return _Plan(None)
            chat = self._load(chat_id, row, None)
            tail = chat["history"].get("currentId")
            message = tree.messages_of(chat).get(tail) if isinstance(tail, str) else None
            if not isinstance(message, dict) or message.get("role") != "assistant":
                return _Plan(None)
            seen = {
                e.get(mark)
                for m in tree.messages_of(chat).values()
                if isinstance(m, dict) and isinstance(m.get("statusHistory"), list)
                for e in m["statusHistory"]
                if isinstance(e, Mapping) and e.get(mark)
            }
            fresh = [e for e in entries if e.get(mark) not in seen]
            if not fresh:
                return _Plan(None)
            added = tree.add_status(message, fresh, finished=False)
            return _Plan((str(tail), added), chat, int(time.time()), mirror=(message,))

        return self._transact(chat_id, decide)

    def add_files(
        self,
        chat_id: str,
        message_id: str,
        files: Sequence[Mapping[str, Any]],
        notes: Sequence[Mapping[str, Any]] = (),
    ) -> FilesAdded | None:
        """Add the files an agent made to M's ``files`` (the list Open WebUI's page shows under a reply: images
        inline, other files as chips) and a status line per file that could not be kept, in one short transaction
        under the row lock; nothing else of M is touched, finished or not (the files come after the run's final).
        A file already there (the same ``openclaw_artifact``) is not added twice, so a second pass over the same
        transcript writes nothing. None, writing nothing, when M is gone, not an assistant message, or gains
        nothing. A database that refuses writes raises (``REFUSALS``): the caller keeps them for its next pass."""

        def decide(row: Any) -> _Plan[FilesAdded | None]:
            if row is None or not (files or notes):
                return _Plan(None)
            chat = self._load(chat_id, row, None)
            message = tree.messages_of(chat).get(message_id)
            if not isinstance(message, dict) or message.get("role", "assistant") != "assistant":
                return _Plan(None)
            merged, gained = tree.merge_files(message.get("files"), files)
            added = tree.add_status(message, notes, finished=False) if notes else []
            if not gained and not added:
                return _Plan(None)
            if gained:
                message["files"] = merged
            content = message.get("content")
            result = FilesAdded(
                files=tuple(merged), notes=tuple(added), content=content if isinstance(content, str) else ""
            )
            return _Plan(result, chat, int(time.time()), mirror=(message,))

        return self._transact(chat_id, decide)

    def drop_correct_mark(self, chat_id: str, message_id: str) -> bool:
        """Remove ``CORRECT_MARK`` from a finished message whose correction found nothing better in the transcript
        (the stream's copy stands), so that no later pass looks at it again. One key out of ``meta`` under the row
        lock; False, writing nothing, when the message is gone, open or unmarked."""
        with self._locked(chat_id) as (conn, row):
            if row is None:
                return False
            chat = self._load(chat_id, row, None)
            message = tree.messages_of(chat).get(message_id)
            if not isinstance(message, dict) or not awaits_correction(message):
                return False
            message["meta"] = {k: v for k, v in message["meta"].items() if k != CORRECT_MARK}
            now = int(time.time())
            self._mirror(conn, chat_id, row.user_id, message, now)
            self._save(conn, chat_id, chat, now)
            return True

    def set_current(self, chat_id: str, message_id: str) -> None:
        """The message the chat shows (``history.currentId`` and ``current_message_id``), as Open WebUI sets it
        when the user picks a branch."""
        with self._locked(chat_id) as (conn, row):
            chat = self._load(chat_id, row, None)
            chat["history"]["currentId"] = message_id
            self._save(conn, chat_id, chat, int(time.time()), current_id=message_id)

    def create_chat(
        self,
        chat_id: str,
        user_id: str,
        *,
        title: str = "New Chat",
        chat: dict[str, Any] | None = None,
        now: int | None = None,
    ) -> None:
        """Insert a chat row the way Open WebUI's ``insert_new_chat`` shapes it (for the embedded default,
        the demo and tests; against a real Open WebUI the chats are Open WebUI's). ``now``: its time (seconds)."""
        now = int(time.time()) if now is None else now
        body = (
            chat
            if chat is not None
            else {
                "id": chat_id,
                "title": title,
                "models": [],
                "history": {"messages": {}, "currentId": None},
                "messages": [],
                "tags": [],
                "timestamp": now * 1000,
            }
        )
        current = body.get("history", {}).get("currentId") if isinstance(body.get("history"), dict) else None
        with self.engine.begin() as conn:
            conn.execute(
                insert(chat_t).values(
                    id=chat_id, user_id=user_id, title=title, chat=body, created_at=now, updated_at=now,
                    last_read_at=now, share_id=None, archived=False, pinned=False, meta={}, folder_id=None,
                    current_message_id=current,
                )
            )  # fmt: skip
            messages = body.get("history", {}).get("messages", {}) if isinstance(body.get("history"), dict) else {}
            for message in messages.values() if isinstance(messages, dict) else ():
                if isinstance(message, dict) and "id" in message:
                    self._mirror(conn, chat_id, user_id, message, now)


@attrs.define(eq=False)
class _Waiting:
    """A ``TrioChatStore.write`` call waiting for the lane, which another call of the same chat may make for it."""

    request: WriteRequest
    #: Cancelled once its write is made by another call: the caller stops waiting for the lane.
    woken: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: trio.Event = attrs.field(factory=trio.Event)
    taken: bool = False  # in a batch being made: its result will come
    result: Any = None  # what ``ChatStore.write`` returned, or the exception it raised


class TrioChatStore:
    """``ChatStore`` for Trio code: each call runs in a worker thread, at most ``capacity`` at once.

    Every write (claim, handover, finalize, resume reservation, the helpers' saves) goes through one lane per
    database, first come, first served (``trio.Lock`` is fair): one owc write transaction at a time. Why: owc's
    writes read the chat outside the lock (``ChatStore._transact``); side by side on one chat they would keep
    changing the row under each other and fall back to long locked tries, and on SQLite owc's parallel writers
    busy-wait for the database-wide lock with the same back-off as Open WebUI's, so a burst of them took the lock
    turn after turn and Open WebUI's writer waited past its 5 s. In one lane, the next write's read and build
    outside the lock leave the lock free between owc's holds, for a waiting Open WebUI writer to take.
    Reads (``read_chat``, ``chat_facts``, ``chat_times``) take no lock and do not queue."""

    def __init__(self, sync: ChatStore, capacity: int = 4, together: int = WRITES_TOGETHER) -> None:
        self.sync = sync
        self.limiter = trio.CapacityLimiter(capacity)
        self.lane = trio.Lock()
        #: At most this many waiting writes of one chat are made in one transaction (``write``).
        self.together = together
        self._waiting: dict[str, list[_Waiting]] = {}  # chat id -> its ``write`` calls waiting, in order

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await trio.to_thread.run_sync(partial(fn, *args, **kwargs), limiter=self.limiter)

    def lane_figures(self) -> tuple[bool, int, int, int]:
        """The write lane and the threads now, for the operator's view: whether a write holds the lane, how many
        writes wait for it, threads in use, threads in all. Reads only."""
        lane, threads = self.lane.statistics(), self.limiter.statistics()
        return lane.locked, lane.tasks_waiting, threads.borrowed_tokens, int(threads.total_tokens)

    async def _write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A write, in the database's lane. A caller cancelled while it waits leaves the queue having written
        nothing; once its thread runs, the transaction completes (``to_thread`` waits for it) and only then is
        the lane free."""
        async with self.lane:
            return await self._run(fn, *args, **kwargs)

    async def claim(self, chat_id: str, message_id: str, **kwargs: Any) -> ClaimResult:
        return await self._write(self.sync.claim, chat_id, message_id, **kwargs)

    async def write(self, chat_id: str, message_id: str, **kwargs: Any) -> WriteResult:
        """``ChatStore.write`` in the lane, made together with the writes of the same chat waiting their turn.

        The write that gets the lane takes, in the order they came, every write of its chat still waiting (at most
        ``together``), itself among them, and makes them in one transaction (``ChatStore.write_many``): one read,
        parse, serialisation and commit of the chat for all, instead of one each. Each waiting caller is then woken
        with its own result, without taking the lane again. A burst of finalizes on one big chat (many agents ending
        together) therefore costs a few whole-chat rewrites, not one per run.

        Cancelled while it waits, a write nobody took leaves having written nothing, as before; one another write
        already took is being made (its transaction completes), so its caller waits for that result, as a caller
        whose own thread runs does."""
        mine = _Waiting(WriteRequest(message_id, kwargs))
        self._waiting.setdefault(chat_id, []).append(mine)
        try:
            with mine.woken:
                async with self.lane:
                    await self._write_batch(chat_id, self._take(chat_id, mine))
        except trio.Cancelled:
            if not mine.taken:
                raise
            with trio.CancelScope(shield=True):  # taken: the transaction runs whatever happens here
                await mine.done.wait()
        finally:
            if not mine.taken:  # cancelled (or failed) before any write took it: it leaves the queue
                waiting = self._waiting[chat_id]
                waiting.remove(mine)
                if not waiting:
                    del self._waiting[chat_id]
        if isinstance(mine.result, BaseException):
            raise mine.result
        return mine.result

    def _take(self, chat_id: str, mine: _Waiting) -> list[_Waiting]:
        """The writes of ``chat_id`` made together with ``mine``: the first ``together`` waiting, and ``mine``."""
        waiting = self._waiting.pop(chat_id)
        at = waiting.index(mine)
        batch, rest = waiting[: max(self.together, at + 1)], waiting[max(self.together, at + 1) :]
        if rest:
            self._waiting[chat_id] = rest
        for entry in batch:
            entry.taken = True
        return batch

    async def _write_batch(self, chat_id: str, batch: list[_Waiting]) -> None:
        """Make ``batch``'s writes (in the lane) and give each its result. A batch whose transaction failed in a way
        no single write explains (an error that is not a refusal of the database: a fault of owc's) is made again one
        write at a time, so that only the write at fault fails."""
        results: list[Any] = []
        try:
            # Shielded: the writes taken belong to their callers, not to the one that leads the batch. Cancelled while
            # the batch waits for a thread, the leader failed them all ("the write was interrupted"), though their
            # callers were not cancelled (a connection drop cancelling one run's write in another run's finalize).
            # Once a thread runs, the transaction completes anyway (``to_thread`` waits): the shield only covers the
            # wait for one, and each transaction is bounded by the database's busy wait.
            with trio.CancelScope(shield=True):
                try:
                    results = await self._run(self.sync.write_many, chat_id, [entry.request for entry in batch])
                except Exception as exc:
                    if len(batch) == 1:
                        results = [exc]
                    else:
                        log.error("store.writes_apart chat=%s writes=%d error=%r", chat_id, len(batch), exc)
                        results = []
                        for entry in batch:
                            try:
                                results.extend(await self._run(self.sync.write_many, chat_id, [entry.request]))
                            except Exception as alone:
                                results.append(alone)
        finally:
            for index, entry in enumerate(batch):
                entry.result = results[index] if index < len(results) else RuntimeError("the write was interrupted")
                entry.done.set()
                entry.woken.cancel()  # a caller waiting for the lane stops waiting: its write is made

    async def put_in_order(self, chat_id: str, message_id: str, **kwargs: Any) -> WriteResult | None:
        return await self._write(self.sync.put_in_order, chat_id, message_id, **kwargs)

    async def add_shown(self, chat_id: str, message_id: str, **kwargs: Any) -> WriteResult | None:
        return await self._write(self.sync.add_shown, chat_id, message_id, **kwargs)

    async def absorb_recovery(self, chat_id: str, message_id: str, **kwargs: Any) -> AbsorbResult:
        return await self._write(self.sync.absorb_recovery, chat_id, message_id, **kwargs)

    async def read_chat(self, chat_id: str) -> dict[str, Any] | None:
        return await self._run(self.sync.read_chat, chat_id)

    async def chat_owner(self, chat_id: str) -> str | None:
        return await self._run(self.sync.chat_owner, chat_id)

    async def reserve_resume(self, chat_id: str, message_id: str, **kwargs: Any) -> tuple[int, bool]:
        return await self._write(self.sync.reserve_resume, chat_id, message_id, **kwargs)

    async def add_turn(self, chat_id: str, user_message_id: str, reply_id: str, *, text: str) -> None:
        await self._write(self.sync.add_turn, chat_id, user_message_id, reply_id, text=text)

    async def chat_facts(self, chat_ids: list[str], present: Mapping[str, str] | None = None) -> dict[str, ChatFacts]:
        return await self._run(self.sync.chat_facts, chat_ids, present)

    async def chat_times(self) -> dict[str, int]:
        return await self._run(self.sync.chat_times)

    async def add_message(self, chat_id: str, message: dict[str, Any], *, current: bool) -> None:
        await self._write(self.sync.add_message, chat_id, message, current=current)

    async def save_message(self, chat_id: str, message_id: str, fields: dict[str, Any]) -> None:
        await self._write(self.sync.save_message, chat_id, message_id, fields)

    async def add_status(
        self, chat_id: str, message_id: str, entries: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]] | None:
        return await self._write(self.sync.add_status, chat_id, message_id, entries)

    async def add_lines_at_tail(
        self, chat_id: str, entries: Sequence[Mapping[str, Any]], *, mark: str
    ) -> tuple[str, list[dict[str, Any]]] | None:
        return await self._write(self.sync.add_lines_at_tail, chat_id, entries, mark=mark)

    async def add_files(
        self,
        chat_id: str,
        message_id: str,
        files: Sequence[Mapping[str, Any]],
        notes: Sequence[Mapping[str, Any]] = (),
    ) -> FilesAdded | None:
        return await self._write(self.sync.add_files, chat_id, message_id, files, notes)

    async def drop_correct_mark(self, chat_id: str, message_id: str) -> bool:
        return await self._write(self.sync.drop_correct_mark, chat_id, message_id)

    async def release(self, chat_id: str, message_id: str, *, holds: Callable[[str | None], bool]) -> bool:
        return await self._write(self.sync.release, chat_id, message_id, holds=holds)

    async def set_task_id(
        self, chat_id: str, message_id: str, task_id: str, *, holds: Callable[[str | None], bool]
    ) -> bool:
        return await self._write(self.sync.set_task_id, chat_id, message_id, task_id, holds=holds)

    async def set_current(self, chat_id: str, message_id: str) -> None:
        await self._write(self.sync.set_current, chat_id, message_id)

    async def create_chat(self, chat_id: str, user_id: str, **kwargs: Any) -> None:
        await self._write(self.sync.create_chat, chat_id, user_id, **kwargs)


@asynccontextmanager
async def open_store(
    url: str, *, create: bool = False, capacity: int = 4, busy_timeout_ms: int = 5000
) -> AsyncIterator[TrioChatStore]:
    """A ``TrioChatStore`` on ``url`` (``sqlite:///path`` or ``postgresql+psycopg://...``) for the block."""
    engine = await trio.to_thread.run_sync(
        partial(make_engine, url, busy_timeout_ms=busy_timeout_ms, pool_size=capacity)
    )
    try:
        sync = ChatStore(engine)
        if create:
            await trio.to_thread.run_sync(sync.create_tables)
        yield TrioChatStore(sync, capacity)
    finally:
        with trio.CancelScope(shield=True):  # cancelled, to_thread would not even start the dispose
            await trio.to_thread.run_sync(engine.dispose)
