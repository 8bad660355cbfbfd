"""Open WebUI compatibility tier: owc writes into a database made by the real open-webui 0.12.4's own Alembic
migrations, and Open WebUI's own ``Chats`` / ``ChatMessages`` methods read it back (in their own venv)."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from owc.store import ChatOwnerMismatch, ChatStore, Claimed, TakenOver, Written, make_engine

pytestmark = pytest.mark.owui

USER = "owui-user-1"
MODEL = "openclaw.main"


@pytest.fixture(scope="session")
def owui():
    from owui.venv import OwuiUnavailable, ensure_owui_python

    try:
        ensure_owui_python()
    except OwuiUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"open-webui 0.12.4 could not be installed in CI: {exc}")
        pytest.skip(str(exc))
    from owui import venv

    return venv


@pytest.fixture(params=["sqlite", "postgres"])
def owui_db(request, tmp_path: Path, owui) -> str:
    """A database created by Open WebUI's own migrations, with a user and a chat holding one user turn."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'webui.db'}"
    else:
        from conftest import _postgres_database

        request.getfixturevalue("postgres_url")  # skipped without PostgreSQL (failed in CI)
        # A database of its own: Open WebUI's migrations make its tables, and the session's default database may
        # already hold the ones owc's store tests create (``chat_message`` without Open WebUI's history: "column
        # meta already exists" when a worker ran those first).
        url = _postgres_database("owc_owui_compat")
    migrated = owui.run_owui(["migrate"], url)
    assert migrated["current"] == migrated["head"] == "0bd252b206fb"
    if request.param == "postgres":
        try:
            owui.run_owui(["create-user", "--user-id", USER], url)
        except owui.OwuiError:
            pass  # the session's PostgreSQL is shared: the user may exist already
    else:
        owui.run_owui(["create-user", "--user-id", USER], url)
    return url


def new_chat(owui, url: str) -> str:
    chat_id = str(uuid.uuid4())
    owui.run_owui(
        [
            "create-chat",
            "--chat-id",
            chat_id,
            "--user-id",
            USER,
            "--title",
            "compat",
            "--user-message-id",
            f"u-{chat_id[:8]}",
            "--user-text",
            "Hello",
            "--model",
            MODEL,
        ],
        url,
    )
    return chat_id


def test_owc_messages_read_back_through_open_webui(owui, owui_db: str) -> None:
    chat_id = new_chat(owui, owui_db)
    user_message = f"u-{chat_id[:8]}"
    store = ChatStore(make_engine(owui_db))
    claimed = store.claim(chat_id, "agent-turn-1", run_id="run-1", writer="w", alive=lambda w: False, user_id=USER)
    assert isinstance(claimed, Claimed) and claimed.parent_id == user_message

    mid = owui.run_owui(["readback", "--chat-id", chat_id], owui_db)
    history = mid["chat"]["chat"]["history"]
    assert history["currentId"] == "agent-turn-1" and mid["chat"]["current_message_id"] == "agent-turn-1"
    assert history["messages"][user_message]["childrenIds"] == ["agent-turn-1"]
    assert (
        history["messages"]["agent-turn-1"]["done"] is False and history["messages"]["agent-turn-1"]["model"] == MODEL
    )
    assert mid["has_unfinished"] is True
    row = next(r for r in mid["messages"] if r["id"] == f"{chat_id}-agent-turn-1")
    assert (row["role"], row["parent_id"], row["done"], row["model_id"], row["content"], row["output"]) == (
        "assistant",
        user_message,
        False,
        MODEL,
        "",
        [],
    )

    output = [
        {
            "type": "function_call",
            "id": "fc_" + "a" * 24,
            "call_id": "call_1",
            "name": "exec",
            "arguments": "{}",
            "status": "completed",
        },
        {
            "type": "function_call_output",
            "id": "fco_" + "b" * 24,
            "call_id": "call_1",
            "output": [{"type": "input_text", "text": "ok"}],
            "status": "completed",
        },
        {
            "type": "message",
            "id": "msg_" + "c" * 24,
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "All done."}],
        },
    ]
    assert isinstance(store.write(chat_id, "agent-turn-1", content="All done.", output=output, done=True), Written)
    end = owui.run_owui(["readback", "--chat-id", chat_id], owui_db)
    message = end["chat"]["chat"]["history"]["messages"]["agent-turn-1"]
    assert (message["content"], message["output"], message["done"]) == ("All done.", output, True)
    assert end["has_unfinished"] is False
    row = next(r for r in end["messages"] if r["id"] == f"{chat_id}-agent-turn-1")
    assert (row["content"], row["output"], row["done"]) == ("All done.", output, True)
    assert end["messages_map"]["agent-turn-1"]["parentId"] == user_message
    assert end["messages_map"]["agent-turn-1"]["content"] == "All done."
    store.engine.dispose()


def _user(owui, url: str, user_id: str) -> None:
    try:
        owui.run_owui(["create-user", "--user-id", user_id, "--role", "user"], url)
    except owui.OwuiError:
        if not url.startswith("postgresql"):
            raise  # the session's PostgreSQL is shared: the user may exist already


def test_a_chat_shared_to_continue_takes_the_senders_reply_under_the_owners_key(owui, owui_db: str) -> None:
    """Issue 24, item 13, proved with Open WebUI 0.12.4's own code: the owner shares a chat in ``continue`` mode with
    one user; that user may write into it (a third may not), and their turn is saved in the **owner's** row, the
    messages carrying their own ``user_id``; the request names that chat and the sender. owc keys the run by the
    chat's owner (``ChatStore.chat_owner``): under the sender's key (the Pipe's before) the claim is refused, so
    the reply lost its end once the request ended; under the owner's the writer takes it and finishes it whole,
    it stays the sender's (their Stop reaches its task, the owner's does not). A clone is a chat of the cloner's
    own: its key is theirs, and the original is untouched."""
    suffix = uuid.uuid4().hex[:8]
    ann, bea, cid = f"ann-{suffix}", f"bea-{suffix}", f"cid-{suffix}"
    for user in (ann, bea, cid):
        _user(owui, owui_db, user)
    chat_id = str(uuid.uuid4())
    owui.run_owui(
        ["create-chat", "--chat-id", chat_id, "--user-id", ann, "--title", "trip", "--user-message-id",
         f"u-{suffix}", "--user-text", "Plan the trip.", "--model", MODEL],
        owui_db,
    )  # fmt: skip
    shared = owui.run_owui(
        ["share-continue", "--chat-id", chat_id, "--user-id", ann, "--grantee", bea, "--others", cid], owui_db
    )
    assert shared["may_write"] == {ann: True, bea: True, cid: False}
    reply = str(uuid.uuid4())
    sent = owui.run_owui(
        ["continue-turn", "--chat-id", chat_id, "--user-id", bea, "--user-message-id", f"u2-{suffix}",
         "--reply-id", reply, "--text", "And day two?", "--model", MODEL],
        owui_db,
    )  # fmt: skip
    assert sent["metadata"]["chat_id"] == chat_id and sent["user"]["id"] == bea  # what the Pipe gets
    assert sent["turn"]["messages"][reply]["user_id"] == bea

    store = ChatStore(make_engine(owui_db))
    try:
        assert store.chat_owner(chat_id) == ann
        run_id = f"msg-{chat_id}-{reply}-input-t1"
        hold = {"run_id": run_id, "writer": "w", "alive": lambda w: False, "create": False, "adopt_writerless": True}
        with pytest.raises(ChatOwnerMismatch):
            store.claim(chat_id, reply, user_id=bea, **hold)  # the sender's key: refused, nothing written
        assert isinstance(store.claim(chat_id, reply, user_id=ann, **hold), TakenOver)  # the owner's key
        assert store.set_task_id(chat_id, reply, "task-1", holds=lambda w: w == "w")
        text = "Day two: Porto, by train."
        output = [{"type": "message", "id": "msg_" + "d" * 24, "status": "completed", "role": "assistant",
                   "content": [{"type": "output_text", "text": text}]}]  # fmt: skip
        written = store.write(chat_id, reply, content=text, output=output, done=True, user_id=ann)
        assert isinstance(written, Written)
        back = owui.run_owui(["readback", "--chat-id", chat_id], owui_db)
        message = back["chat"]["chat"]["history"]["messages"][reply]
        assert (message["content"], message["done"], message["user_id"]) == (text, True, bea)
        row = next(r for r in back["messages"] if r["id"] == f"{chat_id}-{reply}")
        assert (row["content"], row["done"], row["user_id"]) == (text, True, bea)
        # What OwuiSurface.message_user reads (Chats.get_message_by_id_and_message_id: this map first): whose tabs
        # a cancel of the writer's task is asked about.
        assert back["messages_map"][reply]["user_id"] == bea
        assert back["chat"]["user_id"] == ann and back["has_unfinished"] is False
        stops = {
            who: owui.run_owui(["task-ids", "--chat-id", chat_id, "--user-id", who, "--task-ids", "task-1"], owui_db)
            for who in (bea, ann)
        }
        assert stops[bea]["task_ids"] == ["task-1"] and stops[ann]["task_ids"] == []

        clone = owui.run_owui(["clone", "--chat-id", chat_id, "--user-id", bea], owui_db)["chat"]
        assert clone["id"] != chat_id and clone["user_id"] == bea and store.chat_owner(clone["id"]) == bea
        assert owui.run_owui(["readback", "--chat-id", chat_id], owui_db)["chat"]["chat"] == back["chat"]["chat"]
    finally:
        store.engine.dispose()


def _wait_for_file(path: Path, process, limit_s: float = 120.0) -> None:
    """The Open WebUI process signals readiness with a file (it imports for ~2 s); bounded."""
    deadline = time.monotonic() + limit_s
    while not path.exists():
        assert process.poll() is None, "the Open WebUI process died before it was ready"
        assert time.monotonic() < deadline, "the Open WebUI process was not ready in time"
        time.sleep(0.02)


def test_open_webui_writers_and_owc_on_one_chat_lose_nothing(owui, owui_db: str, tmp_path: Path) -> None:
    chat_id = new_chat(owui, owui_db)
    ready, start = tmp_path / "ready", tmp_path / "start"
    hammer = owui.start_owui(
        [
            "hammer",
            "--chat-id",
            chat_id,
            "--count",
            "30",
            "--tag",
            "H",
            "--interval",
            "0.02",
            "--ready-file",
            str(ready),
            "--start-file",
            str(start),
        ],
        owui_db,
    )
    store = ChatStore(make_engine(owui_db))
    written: dict[str, str] = {}
    try:
        _wait_for_file(ready, hammer)
        start.touch()
        n = 0
        while hammer.poll() is None or n < 5:  # keep writing for as long as Open WebUI writes
            mid, text = f"agent-{n}", f"answer {n}"
            assert isinstance(
                store.claim(chat_id, mid, run_id=f"run-{n}", writer="w", alive=lambda w: False, user_id=USER), Claimed
            )
            assert isinstance(store.write(chat_id, mid, content=text[:4], output=[], done=False), Written)
            assert isinstance(store.write(chat_id, mid, content=text, output=[], done=True), Written)
            written[mid] = text
            n += 1
        result = hammer.result()
    finally:
        hammer.stop()
        store.engine.dispose()
    assert result["none_count"] == 0  # no Open WebUI write gave up on the lock
    end = owui.run_owui(["readback", "--chat-id", chat_id], owui_db)
    blob = end["chat"]["chat"]["history"]["messages"]
    rows = {r["id"].removeprefix(f"{chat_id}-"): r for r in end["messages"]}
    for user_id in result["user_message_ids"]:
        assert user_id in blob and user_id in rows
    for mid, text in written.items():
        assert blob[mid]["content"] == text and blob[mid]["done"] is True, mid
        assert rows[mid]["content"] == text and rows[mid]["done"] is True, mid
    assert end["has_unfinished"] is False
    assert len(written) >= 5 and len(result["user_message_ids"]) == 15


def test_owc_creates_the_tables_open_webui_migrations_create(owui, tmp_path: Path) -> None:
    """The embedded default's tables equal, column for column and index for index, what Open WebUI 0.12.4's
    own Alembic migrations create, so a database owc made is one Open WebUI can open."""
    from sqlalchemy import create_engine, inspect

    theirs_url = f"sqlite:///{tmp_path / 'theirs.db'}"
    owui.run_owui(["migrate"], theirs_url)
    ours = ChatStore(make_engine(f"sqlite:///{tmp_path / 'ours.db'}"))
    ours.create_tables()

    def shape(url: str) -> dict[str, object]:
        found = inspect(create_engine(url))
        out: dict[str, object] = {}
        for table in ("chat", "chat_message"):
            out[table] = {
                "columns": [(c["name"], str(c["type"]), c["nullable"]) for c in found.get_columns(table)],
                "primary_key": found.get_pk_constraint(table)["constrained_columns"],
                "indexes": sorted(
                    (i["name"], tuple(i["column_names"]), bool(i["unique"])) for i in found.get_indexes(table)
                ),
                "foreign_keys": [
                    (f["constrained_columns"], f["referred_table"]) for f in found.get_foreign_keys(table)
                ],
            }
        return out

    assert shape(f"sqlite:///{tmp_path / 'ours.db'}") == shape(theirs_url)
