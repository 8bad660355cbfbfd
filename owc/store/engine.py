"""The SQLAlchemy engine owc writes Open WebUI's database with.

SQLite gets Open WebUI's own pragmas (``_apply_sqlite_pragmas``): WAL, ``busy_timeout`` 5000 ms, synchronous
NORMAL, and its cache, temp store, memory map and journal limit (``OPEN_WEBUI_SQLITE_PRAGMAS``, from the same
``DATABASE_SQLITE_PRAGMA_*`` variables). The busy timeout is the pace of owc's retries on a locked database;
tests shorten it. PostgreSQL goes through psycopg 3 (``postgresql+psycopg://``); a bare ``postgresql://`` or
``postgres://`` URL is mapped to it.
JSON columns are written as compact orjson text, as Open WebUI's ``JSONCodec`` writes them.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Mapping
from typing import Any

import attrs
import orjson
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError


@attrs.frozen
class Serialized:
    """A chat JSON already serialised (outside the row lock, ``ChatStore``): the engine's serializer hands its text
    over as it is, so a JSON column's bind costs no serialisation under the lock, on SQLite and PostgreSQL alike."""

    text: str


def _dumps(value: Any) -> str:
    if isinstance(value, Serialized):
        return value.text
    return orjson.dumps(value).decode()


def normalize_url(url: str) -> str:
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


#: libpq's connect timeout for PostgreSQL (seconds): the transport's own bound, the only one on a connect.
CONNECT_TIMEOUT_S = 10
#: The key under which a SQLite connection records the identity of the file it opened.
FILE_ID = "owc_file_id"


def file_id(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``, or None if there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def sqlite_file(engine: Engine) -> str | None:
    """The path of a SQLite engine's database file (None for an in-memory one, or another backend)."""
    url = engine.url
    if url.get_backend_name() != "sqlite" or not url.database or url.query.get("uri") != "true":
        return None
    return url.database[len("file:") :] if url.database.startswith("file:") else None


def is_sqlite_memory(url: str) -> bool:
    """``sqlite://``, ``sqlite:///:memory:``, or a ``file:`` URI with ``mode=memory``: a database that lives in one
    connection of one process, which Open WebUI can never read."""
    parsed = make_url(normalize_url(url))
    if parsed.get_backend_name() != "sqlite":
        return False
    database = parsed.database or ""
    return database in ("", ":memory:") or parsed.query.get("mode") == "memory" or "mode=memory" in database


def sqlite_path(url: str) -> str | None:
    """The file a plain ``sqlite:///path`` URL names (None for a ``file:`` URI, an in-memory database, or another
    backend): the file ``make_engine`` would create if it did not exist."""
    parsed = make_url(normalize_url(url))
    if parsed.get_backend_name() != "sqlite" or is_sqlite_memory(url):
        return None
    database = parsed.database or ""
    return None if database.startswith("file:") else os.path.abspath(database)


#: Open WebUI 0.12.4's SQLite pragmas beyond WAL, synchronous and the busy wait (``open_webui/env.py``: each from
#: its ``DATABASE_SQLITE_PRAGMA_*`` variable, these defaults, skipped when the variable is set empty). A 64 MiB page
#: cache and memory-mapped reads make a large chat's locked read a memory copy instead of page reads: issue 32
#: measured finalize p50 at 1,000 messages 6.9 -> 2.0 ms with them. owc applies the same, read from the same
#: variables, so its connections and Open WebUI's behave alike.
OPEN_WEBUI_SQLITE_PRAGMAS = (
    ("cache_size", "DATABASE_SQLITE_PRAGMA_CACHE_SIZE", "-65536"),
    ("temp_store", "DATABASE_SQLITE_PRAGMA_TEMP_STORE", "MEMORY"),
    ("mmap_size", "DATABASE_SQLITE_PRAGMA_MMAP_SIZE", "268435456"),
    ("journal_size_limit", "DATABASE_SQLITE_PRAGMA_JOURNAL_SIZE_LIMIT", "67108864"),
)
_PRAGMA_VALUE = re.compile(r"-?[0-9]+|[A-Za-z]+")


def open_webui_sqlite_pragmas(environ: Mapping[str, str] | None = None) -> list[str]:
    """The ``PRAGMA`` statements of ``OPEN_WEBUI_SQLITE_PRAGMAS`` for this environment. A value that is neither a
    number nor a word is skipped (it would be spliced into SQL), as an empty one is."""
    env = os.environ if environ is None else environ
    out = []
    for name, variable, default in OPEN_WEBUI_SQLITE_PRAGMAS:
        value = env.get(variable, default).strip()
        if value and _PRAGMA_VALUE.fullmatch(value):
            out.append(f"PRAGMA {name}={value}")
    return out


def make_engine(url: str, *, busy_timeout_ms: int = 5000, pool_size: int = 4) -> Engine:
    url = normalize_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if is_sqlite_memory(url):
            raise ValueError(
                "an in-memory SQLite database cannot be shared with Open WebUI (each connection would get its own,"
                " and nothing outlives owc): give the file Open WebUI uses, sqlite:////path/to/webui.db"
            )
        path = parsed.database
        if path and path != ":memory:" and not path.startswith("file:"):
            # The file is made here if it does not exist yet (the embedded default); every connection then
            # opens it read-write without creating: a database deleted under owc fails the write (and is
            # reported) instead of being silently replaced by an empty file at the first reconnect.
            path = os.path.abspath(path)
            try:
                sqlite3.connect(path).close()
            except sqlite3.Error as exc:
                raise ValueError(f"cannot open the SQLite database file {path}: {exc}") from None
            parsed = parsed.set(database=f"file:{path}", query={**parsed.query, "mode": "rw", "uri": "true"})
        else:
            path = None
        engine = create_engine(
            parsed,
            connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000},
            json_serializer=_dumps,
            json_deserializer=orjson.loads,
            pool_size=pool_size,
            max_overflow=pool_size,
        )

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: sqlite3.Connection, record: Any) -> None:
            if path is not None:
                record.info[FILE_ID] = file_id(path)  # what this connection opened (``ChatStore._same_file``)
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            cursor.execute("PRAGMA synchronous=NORMAL")
            for statement in open_webui_sqlite_pragmas():
                cursor.execute(statement)
            # No checkpoint inside owc's commits: SQLite runs its automatic one in the COMMIT call of whichever
            # connection pushes the WAL past 1,000 pages, so a write's transaction (and owc's queue behind it) took
            # the copy and the fsyncs with it. owc checkpoints itself, outside any transaction
            # (``ChatStore._checkpoint``); Open WebUI's own connections keep their defaults.
            cursor.execute("PRAGMA wal_autocheckpoint=0")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    if parsed.get_backend_name() == "postgresql":
        # The same bound as SQLite's busy wait: a row lock held by a stuck writer fails the statement
        # (reported as locked) instead of holding a worker thread, and a shielded finalize, indefinitely.
        engine = create_engine(
            url,
            # A server that does not answer fails the connect in 10 s (libpq's own timeout) instead of holding a
            # worker thread, and ``owc run``'s start-up check, until the kernel gives up on TCP.
            connect_args={"options": f"-c lock_timeout={int(busy_timeout_ms)}", "connect_timeout": CONNECT_TIMEOUT_S},
            json_serializer=_dumps,
            json_deserializer=orjson.loads,
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_pre_ping=True,
        )

        @event.listens_for(engine, "connect")
        def _lz4(dbapi_conn: Any, record: Any) -> None:
            """The chat JSON owc writes is TOAST-compressed with lz4 instead of pglz, on owc's sessions only: the
            compression runs inside the UPDATE, under the row lock, and lz4 takes half the time (520 KB: 3.7 ->
            1.8 ms). Readers decompress either kind (PostgreSQL 14+); a server without lz4 (or older) keeps its
            default, and Open WebUI's sessions keep theirs."""
            try:
                with dbapi_conn.cursor() as cursor:
                    cursor.execute("SET default_toast_compression = 'lz4'")
                dbapi_conn.commit()
            except Exception:  # any refusal (no lz4, a server before 14) means: keep the server's default
                dbapi_conn.rollback()

        return engine
    raise ValueError(f"unsupported database {parsed.get_backend_name()!r}: use sqlite:/// or postgresql+psycopg://")


def is_locked_error(exc: OperationalError) -> bool:
    """SQLite's "database is locked" after the busy wait ran out, or PostgreSQL's lock_timeout."""
    text = str(exc.orig).lower()
    return "database is locked" in text or "database table is locked" in text or "lock timeout" in text
