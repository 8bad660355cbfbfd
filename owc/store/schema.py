"""The parts of Open WebUI 0.12.4's schema owc touches, column for column (``open_webui/models/chats.py``
``Chat`` and ``open_webui/models/chat_messages.py`` ``ChatMessage``, as its Alembic head ``0bd252b206fb`` creates
them). owc creates these two tables for its embedded default and works unchanged on a database that Open
WebUI's own migrations made: it never relies on anything the migrations would not have created.
"""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Boolean, Column, ForeignKey, Index, MetaData, String, Table, Text, text

metadata = MetaData()

chat = Table(
    "chat",
    metadata,
    Column("id", String, primary_key=True),
    Column("user_id", String),
    Column("title", Text),
    Column("created_at", BigInteger),  # epoch seconds
    Column("updated_at", BigInteger),  # epoch seconds
    Column("share_id", Text, unique=True),
    Column("archived", Boolean),
    Column("chat", JSON),  # {"history": {"messages": {...}, "currentId": ...}, "messages": [...], ...}
    Column("pinned", Boolean),
    Column("meta", JSON, nullable=False, server_default="{}"),
    Column("folder_id", Text),
    Column("tasks", JSON),
    Column("summary", Text),
    Column("last_read_at", BigInteger),
    Column("current_message_id", Text),  # denormalized history.currentId
    Column("variables", JSON),
    Column("timer_at", BigInteger),
    Index("folder_id_idx", "folder_id"),
    Index("user_id_pinned_idx", "user_id", "pinned"),
    Index("user_id_archived_idx", "user_id", "archived"),
    Index("updated_at_user_id_idx", "updated_at", "user_id"),
    Index("folder_id_user_id_idx", "folder_id", "user_id"),
    Index("user_id_updated_at_id_idx", "user_id", text("updated_at DESC"), "id"),
    Index(
        "timer_at_idx",
        "timer_at",
        sqlite_where=text("timer_at IS NOT NULL"),
        postgresql_where=text("timer_at IS NOT NULL"),
    ),
    Index(
        "user_id_timer_at_idx",
        "user_id",
        "timer_at",
        sqlite_where=text("timer_at IS NOT NULL"),
        postgresql_where=text("timer_at IS NOT NULL"),
    ),
    Index("user_id_folder_unread_idx", "user_id", "folder_id", "archived", "updated_at", "last_read_at", "id"),
)

chat_message = Table(
    "chat_message",
    metadata,
    Column("id", Text, primary_key=True),  # "{chat_id}-{message_id}"
    Column("chat_id", Text, ForeignKey("chat.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("user_id", Text, index=True),
    Column("role", Text, nullable=False),
    Column("parent_id", Text),
    Column("content", JSON),
    Column("output", JSON),
    Column("model_id", Text, index=True),
    Column("files", JSON),
    Column("sources", JSON),
    Column("embeds", JSON),
    Column("done", Boolean),
    Column("status_history", JSON),
    Column("error", JSON),
    Column("usage", JSON),
    Column("created_at", BigInteger, index=True),
    Column("updated_at", BigInteger),
    Column("context_summary", Text),
    Column("meta", JSON),
    Index("chat_message_chat_parent_idx", "chat_id", "parent_id"),
    Index("chat_message_model_created_idx", "model_id", "created_at"),
    Index("chat_message_user_created_idx", "user_id", "created_at"),
    Index("chat_message_chat_role_done_idx", "chat_id", "role", "done"),
)


def message_row_id(chat_id: str, message_id: str) -> str:
    return f"{chat_id}-{message_id}"


#: The columns owc reads and writes, table by table: exactly those Open WebUI 0.12.4's migrations give ``chat`` and
#: ``chat_message`` (a database that has them is Open WebUI's, or one owc made with ``create_tables``).
REQUIRED_COLUMNS: dict[str, frozenset[str]] = {
    table.name: frozenset(column.name for column in table.columns) for table in (chat, chat_message)
}


def schema_problem(tables: dict[str, frozenset[str]], *, create: bool) -> str | None:
    """Why owc must not write into a database whose tables (name -> column names) are ``tables``; None when it may.

    owc writes into the database Open WebUI uses, never one of its own: a typo in the URL, or another application's
    database, must not quietly become a second, empty "Open WebUI" (or get ``chat`` tables added) while the real one
    is never written. So an empty database is taken only when ``create`` (``owc run --create-db``, the scenario
    player, the demo) asks for Open WebUI's tables to be made; a database with other tables and no ``chat`` is
    never taken; a ``chat`` / ``chat_message`` without Open WebUI 0.12's columns (another application's, or an
    older Open WebUI's) is never taken, whatever ``create`` says: creating would not add the columns."""
    ours = {name: tables[name] for name in REQUIRED_COLUMNS if name in tables}
    if not tables:
        if create:
            return None
        return (
            "an empty database, not Open WebUI's: point the URL at the database Open WebUI uses (its DATABASE_URL,"
            " or DATA_DIR/webui.db), or pass --create-db to make Open WebUI's chat tables in it"
        )
    if not ours:
        shown = _some(sorted(tables))
        return (
            f"no Open WebUI chat tables (it holds {shown}): not Open WebUI's database; point the URL at the"
            " database Open WebUI uses (its DATABASE_URL, or DATA_DIR/webui.db)"
        )
    absent = [name for name in REQUIRED_COLUMNS if name not in ours]
    if absent:
        return (
            f"no table {', '.join(absent)} beside {', '.join(ours)}: not Open WebUI 0.12's schema (an older"
            " Open WebUI: upgrade it and let it migrate first; or another application's tables)"
        )
    for name, needed in REQUIRED_COLUMNS.items():
        missing = sorted(needed - ours[name])
        if missing:
            return (
                f"the table {name} lacks the columns {_some(missing)}: not Open WebUI 0.12's schema (another"
                " application's table, or an older Open WebUI: upgrade it and let it migrate first)"
            )
    return None


def _some(names: list[str]) -> str:
    """Up to five names, and how many more: a line stays a line."""
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
