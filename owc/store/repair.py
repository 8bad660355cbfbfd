"""``owc owui repair-variants``: the old Pipe's variant groups put in one line (issue 30; seed 000 section 4,
condition G), on a copy first, then, with ``--apply``, chat by chat under Open WebUI's row lock with a backup.

The rule and the new JSON are ``owc.rules.variants`` (pure); this module reads, copies, writes and backs up.

**The copy.** SQLite: the database file is copied with SQLite's own online backup (a consistent snapshot, the WAL
included, taken as a reader: it never blocks Open WebUI's writers) into the output folder (``copy.db``, 0600), and
every repair is made there, through the very transaction the real apply uses; the copy is then read back and
planned again (a repaired chat must have nothing left to do). PostgreSQL: each chat's repair is made in a
transaction that is rolled back: the same statements, on the real row under its row lock, the written row read back
inside the transaction and compared, then nothing kept. Why not a dump into a scratch schema: it needs CREATE on
the database and a copy of every chat of every user (large, and a second place holding them all), while the rolled
back transaction exercises exactly what ``--apply`` will run and leaves nothing behind; its hold is one chat's, as
short as Open WebUI's own saves (a few milliseconds), like the apply's.

**The apply.** Each chat is planned again from its row as it is under the lock (Open WebUI may have saved it since
the copy run), its backup written (``backups/<chat id>.json``, 0600: the row's stored ``chat`` text exactly, its
``current_message_id``, the ``chat_message`` rows the repair changes, and a hash of what it writes), then the chat
row and its ``chat_message`` rows are written and committed; a backup that cannot be written means no change. The
chat's ``updated_at`` is left alone, so old chats do not jump to the top of the sidebar. ``chat_message`` rows that
exist get the new ``parent_id`` and ``done``; missing rows are not made (Open WebUI fills them from the JSON).

**The way back** (``restore``): a backup puts its chat back exactly, unless the chat changed after the repair (a
new message would be lost): that chat is named and left.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import orjson
from sqlalchemy import Connection, Engine, Text, cast, inspect, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from owc.rules import variants
from owc.store.engine import Serialized, is_locked_error, make_engine, normalize_url
from owc.store.schema import chat as chat_t
from owc.store.schema import chat_message as msg_t
from owc.store.schema import message_row_id
from owc.store.store import ChatCorrupt, ChatStore, DatabaseGone


class RepairError(Exception):
    """A failure the user can fix, in one line (the CLI maps the kind to its exit code)."""


class ForeignDatabase(RepairError):
    """The database holds no Open WebUI ``chat`` table."""


class DatabaseLocked(RepairError):
    """The database stayed locked past the busy wait."""


class Unusable(RepairError):
    """The database or the output folder cannot be used (missing file, unreachable, not writable)."""


#: Columns of Open WebUI's ``chat`` table the repair needs.
NEEDED = ("id", "user_id", "title", "chat")


@attrs.frozen
class ChatOutcome:
    chat_id: str
    title: str
    plan: variants.Plan
    #: "copy" (repaired on the copy / in the rolled-back transaction), "applied", "refused", "changed" (its apply
    #: found no repair left), "unreadable", "locked" (the apply stopped before it).
    status: str
    backup: Path | None = None
    detail: str = ""


@attrs.frozen
class Report:
    folder: Path
    diff: Path
    copy: str  # what the copy was, in words
    chats: tuple[ChatOutcome, ...]
    applied: tuple[ChatOutcome, ...] = ()
    #: The one line of a stop (a locked database during the apply); the chats after it were not written.
    stopped: str | None = None

    @property
    def refused(self) -> tuple[ChatOutcome, ...]:
        return tuple(c for c in (*self.chats, *self.applied) if c.status in ("refused", "unreadable"))


@attrs.frozen
class _Schema:
    current_column: bool  # chat.current_message_id
    messages_table: bool  # chat_message


def _redact(url: str) -> str:
    from owc.gateway.url import redact_url

    return redact_url(url)


def open_database(url: str, *, busy_timeout_ms: int = 5000) -> tuple[Engine, _Schema]:
    """An engine on Open WebUI's database, refused (one line) when it is not one: a SQLite path that is no file
    (never created, unlike owc's embedded default), a server that does not answer, no ``chat`` table."""
    try:
        parsed = make_url(normalize_url(url))
    except Exception:
        raise Unusable(f"database {_redact(url)}: not a database URL") from None
    if parsed.get_backend_name() == "sqlite":
        path = parsed.database or ""
        if not path or path == ":memory:" or not Path(path).is_file():
            raise Unusable(f"database {_redact(url)}: no such file")
    try:
        engine = make_engine(url, busy_timeout_ms=busy_timeout_ms, pool_size=2)
    except (ValueError, SQLAlchemyError, ImportError) as exc:
        raise Unusable(f"database {_redact(url)}: {_first_line(exc)}") from None
    try:
        schema = _check_schema(engine, url)
    except BaseException:
        engine.dispose()
        raise
    return engine, schema


def _check_schema(engine: Engine, url: str) -> _Schema:
    try:
        found = inspect(engine)
        tables = set(found.get_table_names())
        if "chat" not in tables:
            raise ForeignDatabase(
                f"database {_redact(url)} is not Open WebUI's: it has no `chat` table"
                f" ({len(tables)} other table{'s' if len(tables) != 1 else ''})"
            )
        columns = {c["name"] for c in found.get_columns("chat")}
    except OperationalError as exc:
        if is_locked_error(exc):
            raise DatabaseLocked(_locked_line(url)) from None
        raise Unusable(f"database {_redact(url)}: {_first_line(exc.orig or exc)}") from None
    except SQLAlchemyError as exc:
        raise Unusable(f"database {_redact(url)}: {_first_line(getattr(exc, 'orig', None) or exc)}") from None
    missing = [c for c in NEEDED if c not in columns]
    if missing:
        raise ForeignDatabase(
            f"database {_redact(url)} is not Open WebUI's: its `chat` table lacks {', '.join(missing)}"
        )
    return _Schema(current_column="current_message_id" in columns, messages_table="chat_message" in tables)


def _locked_line(url: str) -> str:
    return (
        f"database {_redact(url)} stayed locked (another writer held it past the busy wait): nothing more was"
        " written; run the same command again"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _may_hold_bubbles(text: str) -> bool:
    """A cheap filter before parsing: the old headers' arrow or the task marker is in the text (orjson and
    Open WebUI write non-ASCII as UTF-8, never as ``\\u`` escapes; the escape is checked too)."""
    return "↳" in text or "\\u21b3" in text or "openclaw:taskId" in text


def survey(engine: Engine) -> list[tuple[str, str, variants.Plan | str]]:
    """Every chat that may hold the old bubbles, read without a lock (a committed snapshot), with its plan (or why
    it cannot be read). Chats without a bubble are skipped unparsed."""
    out: list[tuple[str, str, variants.Plan | str]] = []
    with engine.connect() as conn:
        rows = conn.execute(
            select(chat_t.c.id, chat_t.c.title, cast(chat_t.c.chat, Text).label("chat")).order_by(chat_t.c.id)
        )
        for row in rows:
            text = row.chat
            if not isinstance(text, str) or not _may_hold_bubbles(text):
                continue
            try:
                chat = orjson.loads(text)
            except orjson.JSONDecodeError:
                out.append((row.id, row.title or "", "its chat JSON does not parse"))
                continue
            out.append((row.id, row.title or "", variants.plan(chat)))
    return out


@contextmanager
def _locked(store: ChatStore, chat_id: str) -> Iterator[tuple[Connection, Any, float]]:
    """The store's own row lock (``ChatStore._lock_and_read``: SQLite ``BEGIN IMMEDIATE``, PostgreSQL ``FOR
    UPDATE``), the row read under it; the caller commits or rolls back (a rollback on any error)."""
    with store.engine.connect() as conn:
        row, locked_at = store._lock_and_read(conn, chat_id)
        try:
            yield conn, row, locked_at
        finally:
            if conn.in_transaction():
                conn.rollback()


def _write_private(path: Path, data: bytes) -> None:
    """A new file of mode 0600 (never through a link, never over another file), written and synced."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _private_dir(path: Path) -> None:
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path, 0o700)
    except OSError as exc:
        raise Unusable(f"cannot use the folder {path}: {exc.strerror or exc}") from None


def repair_chat(
    store: ChatStore,
    schema: _Schema,
    chat_id: str,
    title: str,
    *,
    commit: bool,
    backups: Path | None = None,
) -> ChatOutcome:
    """One chat's repair in one transaction under its row lock: plan from the row as it is under the lock, back
    it up (``backups``), write the chat and its ``chat_message`` rows, read the row back and compare, then commit
    (``commit``) or roll back (the PostgreSQL dry run). Nothing is written when the plan is no ``Repair``."""
    with _locked(store, chat_id) as (conn, row, locked_at):
        if row is None:
            return ChatOutcome(chat_id, title, variants.NothingToDo(), "changed", detail="the chat is gone")
        try:
            chat = ChatStore._load(chat_id, row, None)
        except ChatCorrupt as exc:
            return ChatOutcome(chat_id, title, variants.NothingToDo(), "unreadable", detail=str(exc))
        plan = variants.plan(chat)
        if isinstance(plan, variants.Refusal):
            return ChatOutcome(chat_id, title, plan, "refused", detail=plan.why)
        if not isinstance(plan, variants.Repair):
            return ChatOutcome(chat_id, title, plan, "changed", detail="nothing left to repair")
        now = int(time.time())
        new_text = orjson.dumps(plan.chat).decode()
        changed = plan.changed_ids
        rows: list[dict[str, Any]] = []
        if schema.messages_table:
            found = conn.execute(
                select(msg_t.c.id, msg_t.c.parent_id, msg_t.c.done, msg_t.c.updated_at).where(
                    msg_t.c.id.in_([message_row_id(chat_id, m) for m in changed])
                )
            )
            rows = [dict(r._mapping) for r in found]
        backup = None
        if backups is not None:
            current = (
                conn.execute(select(chat_t.c.current_message_id).where(chat_t.c.id == chat_id)).scalar()
                if schema.current_column
                else None
            )
            record = {
                "owc": "repair-variants backup 1",
                "chat_id": chat_id,
                "user_id": row.user_id,
                "title": title,
                "chat": _raw_text(conn, chat_id),  # the stored text, exactly
                "current_message_id": current,
                "chat_message": rows,
                "after_sha256": hashlib.sha256(new_text.encode()).hexdigest(),
                "written_at": now,
            }
            backup = backups / f"{_safe_name(chat_id)}.json"
            if backup.exists():  # an earlier apply's backup of this chat: kept, this one beside it
                backup = backups / f"{_safe_name(chat_id)}.{now}.{os.getpid()}.json"
            _write_private(backup, json.dumps(record, ensure_ascii=False, indent=1).encode())
        values: dict[str, Any] = {"chat": Serialized(new_text)}
        if schema.current_column:
            values["current_message_id"] = plan.current_after
        conn.execute(update(chat_t).where(chat_t.c.id == chat_id).values(**values))
        if schema.messages_table:
            finished = set(plan.finished)
            messages = plan.chat["history"]["messages"]
            for mid in changed:
                fields: dict[str, Any] = {"parent_id": messages[mid].get("parentId"), "updated_at": now}
                if mid in finished:
                    fields["done"] = True
                conn.execute(update(msg_t).where(msg_t.c.id == message_row_id(chat_id, mid)).values(**fields))
        if orjson.loads(_raw_text(conn, chat_id)) != plan.chat:
            raise RuntimeError(f"chat {chat_id}: the row read back differs from what was written")
        if commit:
            store._commit(conn, chat_id, locked_at, wrote=len(new_text))
            return ChatOutcome(chat_id, title, plan, "applied" if backups is not None else "copy", backup=backup)
        conn.rollback()
        return ChatOutcome(chat_id, title, plan, "copy")


def _raw_text(conn: Connection, chat_id: str) -> str:
    """The chat column's text exactly as stored (PostgreSQL's ``json`` keeps its text; a ``::text`` cast returns
    it unparsed, where psycopg would otherwise hand over a parsed value)."""
    text = conn.execute(select(cast(chat_t.c.chat, Text)).where(chat_t.c.id == chat_id)).scalar()
    return text if isinstance(text, str) else "null"


def _safe_name(chat_id: str) -> str:
    keep = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in chat_id)
    return keep[:120] or "chat"


def _copy_sqlite(url: str, target: Path, busy_timeout_ms: int) -> None:
    """SQLite's online backup of the database into ``target`` (a new 0600 file): a reader's snapshot."""
    source = make_url(normalize_url(url)).database or ""
    _write_private(target, b"")
    try:
        src = sqlite3.connect(f"file:{os.path.abspath(source)}?mode=ro", uri=True, timeout=busy_timeout_ms / 1000)
        try:
            dst = sqlite3.connect(target)
            try:
                src.backup(dst)
            finally:
                dst.close()
        finally:
            src.close()
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc).lower() or "busy" in str(exc).lower():
            raise DatabaseLocked(_locked_line(url)) from None
        raise Unusable(f"cannot copy the database {_redact(url)}: {exc}") from None


def run(
    url: str,
    folder: Path,
    *,
    apply: bool,
    busy_timeout_ms: int = 5000,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """The whole command: the copy run and its diff, then (``apply``) the real repair chat by chat."""
    say = progress or (lambda _line: None)
    engine, schema = open_database(url, busy_timeout_ms=busy_timeout_ms)
    try:
        _private_dir(folder)
        is_sqlite = engine.dialect.name == "sqlite"
        outcomes: list[ChatOutcome] = []
        try:
            if is_sqlite:
                copy_path = folder / "copy.db"
                if copy_path.exists():
                    raise Unusable(f"{copy_path} exists already: pass another --out folder")
                _copy_sqlite(url, copy_path, busy_timeout_ms)
                copy_engine = make_engine(f"sqlite:///{copy_path}", busy_timeout_ms=busy_timeout_ms, pool_size=2)
                copy_words = f"a copy of the database file, {copy_path}"
            else:
                copy_engine = engine
                copy_words = "each chat's repair in a transaction rolled back (nothing kept)"
            try:
                copy_store = ChatStore(copy_engine)
                copy_schema = _check_schema(copy_engine, url) if is_sqlite else schema
                for chat_id, title, found in survey(copy_engine):
                    if isinstance(found, str):
                        outcomes.append(ChatOutcome(chat_id, title, variants.NothingToDo(), "unreadable", detail=found))
                    elif isinstance(found, variants.Refusal):
                        outcomes.append(ChatOutcome(chat_id, title, found, "refused", detail=found.why))
                    elif isinstance(found, variants.Repair):
                        outcomes.append(repair_chat(copy_store, copy_schema, chat_id, title, commit=is_sqlite))
                    elif found.kept:
                        outcomes.append(ChatOutcome(chat_id, title, found, "kept"))
                if is_sqlite:  # read the copy back: every repaired chat has nothing left to do
                    again = {cid: p for cid, _t, p in survey(copy_engine)}
                    for outcome in outcomes:
                        if outcome.status == "copy" and isinstance(again.get(outcome.chat_id), variants.Repair):
                            raise RuntimeError(f"chat {outcome.chat_id}: the copy still has groups after its repair")
            finally:
                if copy_engine is not engine:
                    copy_engine.dispose()
        except OperationalError as exc:
            if is_locked_error(exc):
                raise DatabaseLocked(_locked_line(url)) from None
            raise Unusable(f"database {_redact(url)}: {_first_line(exc.orig or exc)}") from None
        diff = folder / "diff.txt"
        _write_diff(folder, outcomes, copy_words)
        say(f"copy run: {copy_words}; diff: {diff}")
        report = Report(folder=folder, diff=diff, copy=copy_words, chats=tuple(outcomes))
        if not apply:
            return report
        backups = folder / "backups"
        _private_dir(backups)
        store = ChatStore(engine)
        applied: list[ChatOutcome] = []
        for outcome in outcomes:
            if outcome.status != "copy":
                continue
            try:
                done = repair_chat(store, schema, outcome.chat_id, outcome.title, commit=True, backups=backups)
            except OperationalError as exc:
                if not is_locked_error(exc):
                    raise
                line = _locked_line(url)
                applied.append(ChatOutcome(outcome.chat_id, outcome.title, outcome.plan, "locked", detail=line))
                return attrs.evolve(report, applied=tuple(applied), stopped=line)
            except DatabaseGone as exc:
                raise Unusable(str(exc)) from None
            applied.append(done)
            say(f"chat {done.chat_id}: {done.status}{': ' + done.detail if done.detail else ''}")
        return attrs.evolve(report, applied=tuple(applied))
    finally:
        engine.dispose()


def _short(mid: str | None) -> str:
    return "-" if mid is None else mid[:8]


def _write_diff(folder: Path, outcomes: list[ChatOutcome], copy_words: str) -> None:
    """``diff.txt`` (for a person) and ``diff.json`` (every id whole), both 0600."""
    lines = [f"owc owui repair-variants: the copy run ({copy_words})", ""]
    records = []
    for o in outcomes:
        p = o.plan
        head = f'chat {o.chat_id} "{o.title}": '
        record: dict[str, Any] = {"chat_id": o.chat_id, "title": o.title, "status": o.status, "detail": o.detail}
        if isinstance(p, variants.Repair) and o.status == "copy":
            lines.append(head + f"{len(p.groups)} group(s) put in one line")
            for g in p.groups:
                cont = f" -> {g.continuation}" if g.continuation else ""
                lines.append(f"  group under {g.parent}: {' -> '.join(g.bubbles)}{cont}")
            lines.append(f"  parent chain before: {' > '.join(map(_short, p.line_before))}")
            lines.append(f"  parent chain after:  {' > '.join(map(_short, p.line_after))}")
            lines.append(f"  currentId: {p.current_before} -> {p.current_after}")
            for m in p.moved:
                lines.append(f"  moved {m.message}: parent {m.parent_before} -> {m.parent_after}")
            lines.append(f"  messages: {p.count} before, {p.count} after, none lost")
            done_note = f" (set on {len(p.finished)}: {', '.join(p.finished)})" if p.finished else ""
            lines.append(f"  every reply done: true{done_note}")
            record.update(
                groups=[attrs.asdict(g) for g in p.groups],
                moved=[attrs.asdict(m) for m in p.moved],
                current_before=p.current_before,
                current_after=p.current_after,
                line_before=list(p.line_before),
                line_after=list(p.line_after),
                messages_before=p.count,
                messages_after=p.count,
                finished=list(p.finished),
            )
        elif o.status in ("refused", "unreadable"):
            lines.append(head + f"SKIPPED: {o.detail}")
        elif p.kept:
            lines.append(head + "nothing to repair")
        for k in p.kept:
            lines.append(f"  kept as it is, under {k.parent} ({', '.join(k.children)}): {k.why}")
        record["kept"] = [attrs.asdict(k) for k in p.kept]
        records.append(record)
        lines.append("")
    counts = variants.summary(o.plan for o in outcomes)
    skipped = counts["refused"] + sum(1 for o in outcomes if o.status == "unreadable")
    lines.append(
        f"{counts['repaired']} chat(s) with {counts['groups']} group(s) to repair, {skipped} skipped,"
        f" {counts['kept']} group(s) kept (a person's own variants)"
    )
    _write_private(folder / "diff.txt", ("\n".join(lines) + "\n").encode())
    _write_private(folder / "diff.json", json.dumps(records, ensure_ascii=False, indent=1).encode())


@attrs.frozen
class Restored:
    chat_id: str
    status: str  # "restored", "changed since" (left), "missing"
    detail: str = ""


def restore(url: str, folder: Path, *, busy_timeout_ms: int = 5000) -> list[Restored]:
    """Put back every chat backed up in ``folder/backups`` (or ``folder`` itself) exactly, under its row lock; a
    chat changed after its repair is named and left (putting it back would lose what was written since)."""
    source = folder / "backups" if (folder / "backups").is_dir() else folder
    files = sorted(source.glob("*.json"))
    if not files:
        raise Unusable(f"no backups in {source}")
    engine, schema = open_database(url, busy_timeout_ms=busy_timeout_ms)
    store = ChatStore(engine)
    out: list[Restored] = []
    try:
        for path in files:
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
                chat_id = record["chat_id"]
            except (OSError, ValueError, KeyError, TypeError):
                raise Unusable(f"{path} is no backup of owc repair-variants") from None
            try:
                with _locked(store, chat_id) as (conn, row, locked_at):
                    if row is None:
                        out.append(Restored(chat_id, "missing", "the chat is gone"))
                        continue
                    if hashlib.sha256(_raw_text(conn, chat_id).encode()).hexdigest() != record["after_sha256"]:
                        out.append(Restored(chat_id, "changed since", "written after its repair: left as it is"))
                        continue
                    values: dict[str, Any] = {"chat": Serialized(record["chat"])}
                    if schema.current_column:
                        values["current_message_id"] = record["current_message_id"]
                    conn.execute(update(chat_t).where(chat_t.c.id == chat_id).values(**values))
                    for r in record["chat_message"] if schema.messages_table else ():
                        conn.execute(
                            update(msg_t)
                            .where(msg_t.c.id == r["id"])
                            .values(parent_id=r["parent_id"], done=r["done"], updated_at=r["updated_at"])
                        )
                    store._commit(conn, chat_id, locked_at)
                    out.append(Restored(chat_id, "restored"))
            except OperationalError as exc:
                if is_locked_error(exc):
                    raise DatabaseLocked(_locked_line(url)) from None
                raise
        return out
    finally:
        engine.dispose()
