"""``owc owui repair-variants`` on a database in the old Pipe's shapes (tests/old_pipe_fixture.py), on SQLite and a
real PostgreSQL: the dry run changes nothing and writes its diff, the apply repairs chat by chat with a backup, a
second apply changes nothing, the backups restore each chat exactly; a locked database and a foreign one are refused
in one line with their exit codes. The checker here is independent of owc's planner."""

from __future__ import annotations

import json
import sqlite3
import stat
import uuid
from typing import Any

import old_pipe_fixture
import pytest
from sqlalchemy import Text, cast, select

from owc.cli import EXIT_BUSY, EXIT_CONFIG, EXIT_INVARIANTS, EXIT_OK, main
from owc.store import make_engine
from owc.store.schema import chat as chat_t
from owc.store.schema import chat_message as msg_t

BUBBLE_HEADS = ("*↳ Proactive message*", "*↳ Sub-agent")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def old_db(request, tmp_path) -> str:
    """A fresh database holding the old Pipe's fixture: a SQLite file, or a PostgreSQL database of its own."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'webui.db'}"
    else:
        import psycopg

        base = request.getfixturevalue("postgres_url")
        name = f"owc_repair_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(base.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        url = base.rsplit("/", 1)[0] + f"/{name}"
    old_pipe_fixture.build(url)
    return url


def _snapshot(url: str) -> dict[str, Any]:
    """Every chat row (its stored text exactly, its current message) and every chat_message row's links."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            chats = {
                r.id: (r.chat, r.current_message_id, r.updated_at)
                for r in conn.execute(
                    select(chat_t.c.id, cast(chat_t.c.chat, Text).label("chat"), chat_t.c.current_message_id,
                           chat_t.c.updated_at)
                )
            }  # fmt: skip
            rows = {
                r.id: (r.parent_id, r.done, r.updated_at)
                for r in conn.execute(select(msg_t.c.id, msg_t.c.parent_id, msg_t.c.done, msg_t.c.updated_at))
            }
        return {"chats": chats, "rows": rows}
    finally:
        engine.dispose()


def _tree(snapshot: dict[str, Any], chat_id: str) -> dict[str, Any]:
    return json.loads(snapshot["chats"][chat_id][0])


def _independent_check(before: dict[str, Any], after: dict[str, Any], chat_id: str, *, linear: bool) -> None:
    """No message lost or changed in its text, links both ways, the view a leaf (and the row's column agrees),
    chat_message rows follow the JSON's links, every reply done; ``linear``: every chain one line."""
    old, new = _tree(before, chat_id)["history"], _tree(after, chat_id)["history"]
    assert set(old["messages"]) == set(new["messages"])
    for mid, m in new["messages"].items():
        assert m["content"] == old["messages"][mid]["content"]
        assert m["role"] == old["messages"][mid]["role"]
        if m["parentId"] is not None:
            assert mid in new["messages"][m["parentId"]]["childrenIds"]
        for c in m["childrenIds"]:
            assert new["messages"][c]["parentId"] == mid
        if linear:
            assert len(m["childrenIds"]) <= 1, (chat_id, mid, m["childrenIds"])
        if m["role"] == "assistant":
            assert m.get("done") is True
        row = after["rows"].get(f"{chat_id}-{mid}")
        if row is not None:
            assert row[0] == m["parentId"]
            assert row[1] is True or m["role"] == "user"
    assert not new["messages"][new["currentId"]]["childrenIds"]
    assert after["chats"][chat_id][1] == new["currentId"]
    assert after["chats"][chat_id][2] == before["chats"][chat_id][2]  # updated_at untouched: the sidebar keeps order


def _bubbles_beside_a_turn(tree: dict[str, Any]) -> int:
    """Groups of the old path's shape, counted without owc: a parent with a bubble child and one user child."""
    msgs = tree["history"]["messages"]
    n = 0
    for m in msgs.values():
        kids = [msgs[c] for c in m["childrenIds"]]
        bubbles = [k for k in kids if k["role"] == "assistant" and k["content"].startswith(BUBBLE_HEADS)]
        others = [k for k in kids if k not in bubbles]
        if bubbles and len(others) == 1 and others[0]["role"] == "user":
            n += 1
    return n


def test_dry_run_then_apply_then_again_then_restore(old_db, tmp_path, capsys):
    original = _snapshot(old_db)
    expect = {fc.chat_id: fc for fc in old_pipe_fixture.CHATS}
    to_repair = [cid for cid, fc in expect.items() if fc.expect == "repair"]
    assert all(_bubbles_beside_a_turn(_tree(original, cid)) for cid in to_repair)

    # The dry run: the database is untouched, the diff names every chat it would change and the one it skips.
    out = tmp_path / "dry"
    assert main(["owui", "repair-variants", "--db", old_db, "--out", str(out)]) == EXIT_INVARIANTS
    captured = capsys.readouterr()
    assert "c9-stub" in captured.err and "unfinished" in captured.err
    assert _snapshot(old_db) == original
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    diff = (out / "diff.txt").read_text()
    for cid in to_repair:
        assert f"chat {cid} " in diff
    assert "parent chain before" in diff and "none lost" in diff and "every reply done: true" in diff
    records = {r["chat_id"]: r for r in json.loads((out / "diff.json").read_text())}
    assert {cid for cid, r in records.items() if r["status"] == "copy"} == set(to_repair)
    assert records["c9-stub"]["status"] == "refused"
    assert records["c1-proactive"]["line_after"] == ["c1-u1", "c1-a1", "c1-p1", "c1-u2", "c1-a2"]
    if "sqlite" in old_db:
        assert stat.S_IMODE((out / "copy.db").stat().st_mode) == 0o600
        copied = _snapshot(f"sqlite:///{out / 'copy.db'}")
        for cid in to_repair:
            _independent_check(original, copied, cid, linear=cid != "c3-two-bubbles")

    # The apply: each repaired chat checked independently, a person's variants as they were, one backup each.
    applied = tmp_path / "applied"
    assert main(["owui", "repair-variants", "--db", old_db, "--out", str(applied), "--apply"]) == EXIT_INVARIANTS
    after = _snapshot(old_db)
    for cid in to_repair:
        _independent_check(original, after, cid, linear=cid != "c3-two-bubbles")
        assert _bubbles_beside_a_turn(_tree(after, cid)) == 0
    for cid, fc in expect.items():
        if fc.expect != "repair":
            assert after["chats"][cid] == original["chats"][cid], cid
        for parent, children in fc.real_groups:
            assert tuple(_tree(after, cid)["history"]["messages"][parent]["childrenIds"]) == children
    backups = sorted((applied / "backups").iterdir())
    assert [p.stem for p in backups] == sorted(to_repair)
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in backups)

    # A second apply changes nothing.
    assert main(["owui", "repair-variants", "--db", old_db, "--out", str(tmp_path / "again"), "--apply"]) in (
        EXIT_OK,
        EXIT_INVARIANTS,  # the stub chat is still skipped, and named
    )
    assert _snapshot(old_db) == after
    assert not list((tmp_path / "again" / "backups").iterdir())

    # The backups put every chat back exactly: its stored text, its current message, its chat_message rows.
    assert main(["owui", "repair-variants", "--db", old_db, "--out", str(applied), "--restore"]) == EXIT_OK
    assert _snapshot(old_db) == original


def test_restore_leaves_a_chat_written_after_the_repair(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'webui.db'}"
    old_pipe_fixture.build(url)
    assert main(["owui", "repair-variants", "--db", url, "--out", str(tmp_path / "o"), "--apply"]) == EXIT_INVARIANTS
    with sqlite3.connect(tmp_path / "webui.db") as conn:  # Open WebUI saves c1 after the repair
        text = conn.execute("SELECT chat FROM chat WHERE id = 'c1-proactive'").fetchone()[0]
        conn.execute("UPDATE chat SET chat = ? WHERE id = 'c1-proactive'", (text.replace("ACME", "ACME Ltd"),))
    capsys.readouterr()
    assert main(["owui", "repair-variants", "--db", url, "--out", str(tmp_path / "o"), "--restore"]) == EXIT_INVARIANTS
    assert "c1-proactive not restored" in capsys.readouterr().err


def test_locked_database_one_line(tmp_path, capsys):
    path = tmp_path / "webui.db"
    old_pipe_fixture.build(f"sqlite:///{path}")
    before = _snapshot(f"sqlite:///{path}")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the database's write lock
    try:
        code = main(
            ["owui", "repair-variants", "--db", f"sqlite:///{path}", "--out", str(tmp_path / "o"), "--apply",
             "--busy-timeout", "200"]
        )  # fmt: skip
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == EXIT_BUSY
    err = capsys.readouterr().err.strip().splitlines()
    assert [line for line in err if "locked" in line] == [err[-1]] and err[-1].startswith("owc: database ")
    assert "Traceback" not in "\n".join(err)
    assert _snapshot(f"sqlite:///{path}") == before


def test_foreign_database_refused(tmp_path, capsys):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT)")
    assert main(["owui", "repair-variants", "--db", f"sqlite:///{path}", "--out", str(tmp_path / "o")]) == EXIT_CONFIG
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not Open WebUI's" in err[0] and "`chat` table" in err[0]
    assert main(["owui", "repair-variants", "--db", f"sqlite:///{tmp_path / 'none.db'}"]) == EXIT_CONFIG
    assert not (tmp_path / "none.db").exists()  # never created
    assert "no such file" in capsys.readouterr().err


def test_fixture_has_the_old_functions(tmp_path):
    url = f"sqlite:///{tmp_path / 'webui.db'}"
    built = old_pipe_fixture.build(url)
    with sqlite3.connect(tmp_path / "webui.db") as conn:
        rows = {r[0]: r[1:] for r in conn.execute("SELECT id, type, is_active, is_global, valves FROM function")}
    assert {k: v[0] for k, v in rows.items()} == {
        "openclaw_gateway": "pipe", "openclaw_status_action": "action", "openclaw_thinking": "filter",
    }  # fmt: skip
    pipe_valves = json.loads(rows["openclaw_gateway"][3])
    assert json.loads(pipe_valves["DEVICE_IDENTITY"])["id"] == built.identity["id"]
    assert pipe_valves["SEND_STOP_ON_CANCEL"] is True and pipe_valves["STATE_DIR"] == "/data/openclaw-bridge"
    assert rows["openclaw_thinking"][2] == 0  # never global
    action = json.loads(rows["openclaw_status_action"][3])
    assert set(action) == {"GATEWAY_URL", "GATEWAY_TOKEN", "DEVICE_IDENTITY", "STATE_DIR", "AGENT_ID"}
