"""The Open WebUI 0.12 chat store: its schema, its row lock, and owc's claim / handover / finalize writes."""

from owc.store.engine import make_engine, normalize_url
from owc.store.schema import chat, chat_message, metadata
from owc.store.store import (
    Absent,
    AlreadyThere,
    ChatCorrupt,
    ChatMissing,
    ChatOwnerMismatch,
    ChatStore,
    Claimed,
    ClaimResult,
    Locked,
    MessageMissing,
    NotWritten,
    StoreError,
    TakenOver,
    TrioChatStore,
    Written,
    WriteResult,
    open_store,
)

__all__ = [
    "Absent",
    "AlreadyThere",
    "ChatCorrupt",
    "ChatMissing",
    "ChatOwnerMismatch",
    "ChatStore",
    "ClaimResult",
    "Claimed",
    "Locked",
    "MessageMissing",
    "NotWritten",
    "StoreError",
    "TakenOver",
    "TrioChatStore",
    "WriteResult",
    "Written",
    "chat",
    "chat_message",
    "make_engine",
    "metadata",
    "normalize_url",
    "open_store",
]
