"""Drive the REAL Open WebUI 0.12.4 DB layer. Runs INSIDE the Open WebUI venv (see ``venv.py``), never in ours.

It imports ``open_webui`` only (never ``owc``) and uses Open WebUI's own methods. Every subcommand prints ONE
JSON object on its last stdout line; everything else that anything writes to stdout (Open WebUI's logging goes
to stdout, env.py prints "dotenv not installed") is redirected to stderr first.

    owui_side.py migrate
    owui_side.py create-user --user-id U [--role admin] [--name N] [--email E]
    owui_side.py create-chat --chat-id C --user-id U [--title T] [--user-message-id M --user-text TEXT --model MODEL]
    owui_side.py readback --chat-id C
    owui_side.py share-continue --chat-id C --user-id OWNER --grantee U [--others U ...]
    owui_side.py continue-turn --chat-id C --user-id U --user-message-id M --reply-id R --text TEXT --model MODEL
    owui_side.py clone --chat-id C --user-id U
    owui_side.py task-ids --chat-id C --user-id U [--task-ids T ...]
    owui_side.py hammer --chat-id C --count N --tag T [--interval S] [--ready-file P] [--start-file P]

Environment (set by ``venv.owui_env``): DATABASE_URL, WEBUI_SECRET_KEY, DATA_DIR, STATIC_DIR, FRONTEND_BUILD_DIR,
VECTOR_DB, ENABLE_DB_MIGRATIONS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

_REAL_STDOUT = None


def _emit(obj: Any) -> None:
    assert _REAL_STDOUT is not None
    _REAL_STDOUT.write(json.dumps(obj, default=str, ensure_ascii=False) + "\n")
    _REAL_STDOUT.flush()


def _dump(model: Any) -> Any:
    return None if model is None else model.model_dump(mode="json")


async def _dispose() -> None:
    from open_webui.internal.db import async_engine

    await async_engine.dispose()


def _wait_file(path: str | None, timeout: float = 120.0) -> None:
    if not path:
        return
    deadline = time.monotonic() + timeout
    while not Path(path).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout} s")
        time.sleep(0.01)


# --------------------------------------------------------------------------------------------------------------
# migrate: config.py:65-76 (run_migrations) without the rest of open_webui.config


def cmd_migrate(_: argparse.Namespace) -> dict[str, Any]:
    from alembic import command
    from alembic.config import Config as AlembicConfig
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
    from open_webui.env import DATABASE_URL, OPEN_WEBUI_DIR
    from sqlalchemy import create_engine, inspect

    cfg = AlembicConfig(str(OPEN_WEBUI_DIR / "alembic.ini"))
    cfg.set_main_option("script_location", str(OPEN_WEBUI_DIR / "migrations"))
    started = time.monotonic()
    command.upgrade(cfg, "head")
    elapsed = time.monotonic() - started

    head = ScriptDirectory.from_config(cfg).get_current_head()
    engine = create_engine(DATABASE_URL)
    try:
        with engine.connect() as conn:
            current = MigrationContext.configure(conn).get_current_revision()
            tables = sorted(inspect(conn).get_table_names())
            dialect = conn.dialect.name
    finally:
        engine.dispose()
    return {"head": head, "current": current, "dialect": dialect, "tables": tables, "elapsed_s": round(elapsed, 3)}


# --------------------------------------------------------------------------------------------------------------
# create-user: Users.insert_new_user(id, name, email, profile_image_url='/user.png', role='pending', ...)


async def cmd_create_user(ns: argparse.Namespace) -> dict[str, Any]:
    from open_webui.models.users import Users

    try:
        user = await Users.insert_new_user(
            ns.user_id, ns.name or ns.user_id, ns.email or f"{ns.user_id}@owc.test", role=ns.role
        )
        if user is None:
            raise RuntimeError(f"Users.insert_new_user({ns.user_id!r}) returned None")
        return {"user": _dump(user)}
    finally:
        await _dispose()


# --------------------------------------------------------------------------------------------------------------
# create-chat: Chats.insert_new_chat(id, user_id, ChatForm) + a user turn with no reply


def _new_chat_blob(chat_id: str, title: str, models: list[str]) -> dict[str, Any]:
    """The chat blob the backend writes for a new chat (main.py:1458-1480), before any message."""
    return {
        "id": chat_id,
        "title": title,
        "models": models,
        "history": {"currentId": None, "messages": {}},
        "messages": [],
        "files": [],
        "tags": [],
        "timestamp": int(time.time() * 1000),
    }


def _user_message(message_id: str, parent_id: str | None, text: str, models: list[str], user: Any) -> dict[str, Any]:
    """A user message as ``insert_chat_turn`` builds it (chats.py:1301-1309)."""
    return {
        "id": message_id,
        "parentId": parent_id,
        "role": "user",
        "content": text,
        "models": models,
        "childrenIds": [],
        "timestamp": int(time.time()),
        "user_id": user.id,
        "user": {"id": user.id, "name": user.name},
    }


async def cmd_create_chat(ns: argparse.Namespace) -> dict[str, Any]:
    from open_webui.models.chats import ChatForm, Chats
    from open_webui.models.users import Users

    try:
        models = [ns.model] if ns.model else []
        chat = await Chats.insert_new_chat(
            ns.chat_id, ns.user_id, ChatForm(chat=_new_chat_blob(ns.chat_id, ns.title, models))
        )
        if chat is None:
            raise RuntimeError(f"Chats.insert_new_chat({ns.chat_id!r}) returned None")
        if ns.user_message_id:
            user = await Users.get_user_by_id(ns.user_id)
            if user is None:
                raise RuntimeError(f"no user {ns.user_id!r}")
            parent = chat.chat.get("history", {}).get("currentId")  # the current leaf (None in a new chat)
            message = _user_message(ns.user_message_id, parent, ns.user_text or "", models, user)
            chat = await Chats.upsert_message_to_chat_by_id_and_message_id(ns.chat_id, ns.user_message_id, message)
            if chat is None:
                raise RuntimeError("Chats.upsert_message_to_chat_by_id_and_message_id returned None")
        return _dump(await Chats.get_chat_by_id(ns.chat_id))
    finally:
        await _dispose()


# --------------------------------------------------------------------------------------------------------------
# Shared chats (issue 24, item 13): Open WebUI's own sharing calls, as its routers make them


async def cmd_share_continue(ns: argparse.Namespace) -> dict[str, Any]:
    """The owner shares the chat in ``continue`` mode with one user: ``POST /chats/{id}/share`` (routers/chats.py
    2158-2161: ``SharedChats.create`` + ``update_chat_share_id_by_id``) and the share's access grant to the user
    (``AccessGrants.grant_access('shared_chat', chat_id, 'user', grantee, 'read')``, what the share dialog sets).
    Then who may write into the chat, by ``Chats.get_accessible_chat_by_id(..., permission='write')``: the check
    ``POST /api/chat/completions`` makes before the Pipe runs (main.py:1561)."""
    from open_webui.models.access_grants import AccessGrants
    from open_webui.models.chats import Chats
    from open_webui.models.shared_chats import SharedChats
    from open_webui.models.users import Users

    try:
        shared = await SharedChats.create(ns.chat_id, ns.user_id, share_mode="continue")
        if shared is None:
            raise RuntimeError("SharedChats.create returned None")
        await Chats.update_chat_share_id_by_id(ns.chat_id, shared.id)
        await AccessGrants.grant_access("shared_chat", ns.chat_id, "user", ns.grantee, "read")
        may_write = {}
        for user_id in [ns.user_id, ns.grantee, *ns.others]:
            user = await Users.get_user_by_id(user_id)
            may_write[user_id] = await Chats.get_accessible_chat_by_id(ns.chat_id, user, permission="write") is not None
        return {"share_id": shared.id, "may_write": may_write}
    finally:
        await _dispose()


async def cmd_continue_turn(ns: argparse.Namespace) -> dict[str, Any]:
    """A user sends a message in a chat they may write into: what ``POST /api/chat/completions`` does before it
    calls the Pipe (main.py:1561-1575: the write check, then ``Chats.insert_chat_turn`` with the user message and
    the reply stub). Returns the turn and the ``__metadata__`` / ``__user__`` ids the Pipe then gets (main.py:1317)."""
    from open_webui.models.chats import Chats
    from open_webui.models.users import Users

    try:
        user = await Users.get_user_by_id(ns.user_id)
        chat = await Chats.get_accessible_chat_by_id(ns.chat_id, user, permission="write")
        if chat is None:
            raise RuntimeError(f"{ns.user_id} may not write into {ns.chat_id}")
        parent = chat.chat["history"]["currentId"]
        user_message = {"id": ns.user_message_id, "parentId": parent, "role": "user", "content": ns.text,
                        "models": [ns.model]}  # fmt: skip
        turn = await Chats.insert_chat_turn(
            ns.chat_id, user, user_message, [{"message_id": ns.reply_id, "model_id": ns.model}]
        )
        metadata = {"chat_id": ns.chat_id, "message_id": ns.reply_id, "user_message_id": ns.user_message_id}
        return {"turn": turn, "metadata": metadata, "user": {"id": user.id}}
    finally:
        await _dispose()


async def cmd_clone(ns: argparse.Namespace) -> dict[str, Any]:
    """``POST /chats/{share_id}/clone/shared`` after its access checks (routers/chats.py 2046-2083): the chat as
    the user may see it, imported as a new chat of the user's own (``Chats.import_chats(user.id, ...)``)."""
    from open_webui.models.chats import ChatImportForm, Chats
    from open_webui.models.users import Users

    try:
        user = await Users.get_user_by_id(ns.user_id)
        chat = await Chats.get_chat_by_id(ns.chat_id)
        updated = {**chat.chat, "originalChatId": chat.id, "branchPointMessageId": chat.chat["history"]["currentId"],
                   "title": f"Clone of {chat.title}"}  # fmt: skip
        for message in (updated.get("history", {}).get("messages") or {}).values():
            if (message.get("user_id") or chat.user_id) == chat.user_id:
                message["user_id"] = user.id
        form = ChatImportForm(chat=updated, meta=chat.meta, variables={}, pinned=chat.pinned, folder_id=None)
        (clone,) = await Chats.import_chats(user.id, [form])
        return {"chat": _dump(clone)}
    finally:
        await _dispose()


async def cmd_task_ids(ns: argparse.Namespace) -> dict[str, Any]:
    """Which of a chat's tasks a user's Stop reaches (``Chats.filter_task_ids_by_user_id``, main.py:2200)."""
    from open_webui.models.chats import Chats

    try:
        chat = await Chats.get_chat_by_id(ns.chat_id)
        return {"task_ids": await Chats.filter_task_ids_by_user_id(chat, ns.user_id, ns.task_ids)}
    finally:
        await _dispose()


# --------------------------------------------------------------------------------------------------------------
# readback


async def cmd_readback(ns: argparse.Namespace) -> dict[str, Any]:
    from open_webui.models.chat_messages import ChatMessages
    from open_webui.models.chats import Chats

    try:
        chat = await Chats.get_chat_by_id(ns.chat_id)
        rows = await ChatMessages.get_messages_by_chat_id(ns.chat_id)
        has_unfinished = await ChatMessages.has_unfinished_assistant_by_chat_id(ns.chat_id)
        # Last: when chat_message has gaps this falls back to / backfills from the blob (a write).
        messages_map = await Chats.get_messages_map_by_chat_id(ns.chat_id)
        return {
            "chat": _dump(chat),
            "messages": [_dump(row) for row in rows],
            "has_unfinished": has_unfinished,
            "messages_map": messages_map,
        }
    finally:
        await _dispose()


# --------------------------------------------------------------------------------------------------------------
# hammer: Open WebUI's own writers, concurrently with an external one


def _branch(history: dict[str, Any]) -> list[dict[str, Any]]:
    """The linear ``messages`` list of the current branch, as the frontend's createMessagesList builds it."""
    messages = history.get("messages") or {}
    out: list[dict[str, Any]] = []
    current = history.get("currentId")
    seen: set[str] = set()
    while current and current in messages and current not in seen:
        seen.add(current)
        out.append(messages[current])
        current = messages[current].get("parentId")
    return list(reversed(out))


async def cmd_hammer(ns: argparse.Namespace) -> dict[str, Any]:
    """``count`` writes, alternating (even i) a user message ``{tag}-u{i}`` under the current leaf via
    ``upsert_message_to_chat_by_id_and_message_id`` and (odd i) a stale frontend save via ``update_chat_by_id``:
    the full chat dict from the read taken at the start of iteration i-1, i.e. BEFORE the previous write, with
    the title set to ``{tag}-title-{i}``. ``none_count`` counts calls that returned None (Open WebUI swallows
    errors, e.g. SQLite 'database is locked' after its 5 s busy wait, and returns None)."""
    from open_webui.models.chats import Chats
    from open_webui.models.users import Users

    try:
        chat = await Chats.get_chat_by_id(ns.chat_id)
        if chat is None:
            raise RuntimeError(f"no chat {ns.chat_id!r}")
        user = await Users.get_user_by_id(chat.user_id)
        if user is None:
            raise RuntimeError(f"no user {chat.user_id!r}")
        if ns.ready_file:
            Path(ns.ready_file).touch()
        _wait_file(ns.start_file)

        writes: list[dict[str, Any]] = []
        user_ids: list[str] = []
        titles: list[str] = []
        none_count = 0
        snapshot = None  # the read taken before the previous write
        started = time.monotonic()
        for i in range(ns.count):
            read = await Chats.get_chat_by_id(ns.chat_id)
            if read is None:
                raise RuntimeError(f"chat {ns.chat_id!r} vanished")
            t = time.monotonic()
            if i % 2 == 0:
                message_id = f"{ns.tag}-u{i}"
                leaf = read.chat.get("history", {}).get("currentId")
                message = _user_message(
                    message_id, leaf, f"{ns.tag} user message {i}", read.chat.get("models") or [], user
                )
                result = await Chats.upsert_message_to_chat_by_id_and_message_id(ns.chat_id, message_id, message)
                entry = {"i": i, "kind": "user_message", "id": message_id, "parent_id": leaf}
                user_ids.append(message_id)
            else:
                stale = (snapshot or read).chat
                title = f"{ns.tag}-title-{i}"
                history = stale.get("history") or {"messages": {}, "currentId": None}
                full = {**stale, "title": title, "history": history, "messages": _branch(history)}
                result = await Chats.update_chat_by_id(ns.chat_id, full)
                entry = {"i": i, "kind": "stale_save", "title": title, "stale_current_id": history.get("currentId")}
                titles.append(title)
            entry["ok"] = result is not None
            entry["elapsed_s"] = round(time.monotonic() - t, 3)
            none_count += result is None
            writes.append(entry)
            snapshot = read
            if ns.interval:
                await asyncio.sleep(ns.interval)
        return {
            "chat_id": ns.chat_id,
            "tag": ns.tag,
            "count": ns.count,
            "user_message_ids": user_ids,
            "titles": titles,
            "none_count": none_count,
            "writes": writes,
            "elapsed_s": round(time.monotonic() - started, 3),
        }
    finally:
        await _dispose()


# --------------------------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="owui_side.py")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("migrate")
    p = sub.add_parser("create-user")
    p.add_argument("--user-id", required=True)
    p.add_argument(
        "--role", default="admin", help="Open WebUI's own default is 'pending'; admin skips permission checks"
    )
    p.add_argument("--name")
    p.add_argument("--email")
    p = sub.add_parser("create-chat")
    p.add_argument("--chat-id", required=True)
    p.add_argument("--user-id", required=True)
    p.add_argument("--title", default="New Chat")
    p.add_argument("--user-message-id")
    p.add_argument("--user-text")
    p.add_argument("--model")
    p = sub.add_parser("readback")
    p.add_argument("--chat-id", required=True)
    p = sub.add_parser("share-continue")
    p.add_argument("--chat-id", required=True)
    p.add_argument("--user-id", required=True, help="the chat's owner")
    p.add_argument("--grantee", required=True)
    p.add_argument("--others", nargs="*", default=[], help="users whose write access is only reported")
    p = sub.add_parser("continue-turn")
    p.add_argument("--chat-id", required=True)
    p.add_argument("--user-id", required=True)
    p.add_argument("--user-message-id", required=True)
    p.add_argument("--reply-id", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--model", required=True)
    p = sub.add_parser("clone")
    p.add_argument("--chat-id", required=True)
    p.add_argument("--user-id", required=True)
    p = sub.add_parser("task-ids")
    p.add_argument("--chat-id", required=True)
    p.add_argument("--user-id", required=True)
    p.add_argument("--task-ids", nargs="*", default=[])
    p = sub.add_parser("hammer")
    p.add_argument("--chat-id", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--tag", required=True)
    p.add_argument("--interval", type=float, default=0.0, help="seconds to sleep after each write")
    p.add_argument("--ready-file", help="touched once imports and the first read are done")
    p.add_argument("--start-file", help="wait (<= 120 s) for this file before the first write")
    return parser


def main(argv: list[str] | None = None) -> int:
    global _REAL_STDOUT
    ns = _parser().parse_args(argv)
    # Keep fd 1 for the JSON line only: Python-level and C-level writes to stdout go to stderr from here on.
    sys.stdout.flush()
    _REAL_STDOUT = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if "owc" in sys.modules:  # pragma: no cover - a guard, never expected
        raise RuntimeError("owui_side.py must not import owc")
    try:
        if ns.cmd == "migrate":
            result = cmd_migrate(ns)
        else:
            handler = {
                "create-user": cmd_create_user,
                "create-chat": cmd_create_chat,
                "readback": cmd_readback,
                "share-continue": cmd_share_continue,
                "continue-turn": cmd_continue_turn,
                "clone": cmd_clone,
                "task-ids": cmd_task_ids,
                "hammer": cmd_hammer,
            }[ns.cmd]
            result = asyncio.run(handler(ns))
    except Exception:
        traceback.print_exc()
        return 1
    _emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
