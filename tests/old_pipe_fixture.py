"""A database in the old asyncio Pipe's shapes (``../shared/reference/old-system/inventory.md``), for the tests of the
move from it (issue 30: repair-variants, and later migrate / status / rollback).

What it holds, each built the way the old code wrote it (inventory 3.6, E1, E2, G1, section 2), not copied from it:

* Open WebUI 0.12.4's ``chat`` and ``chat_message`` (owc's ``owc.store.schema``) and its ``function`` table
  (``open_webui/models/functions.py``'s columns; the fast tier has no Open WebUI migrations to make it);
* the old Functions: ``openclaw_gateway`` (pipe, active and global, the valves its installer always wrote),
  ``openclaw_status_action`` (action, the five valves mirrored from the Pipe), ``openclaw_thinking`` (filter,
  active, never global). Their ``content`` is a stand-in of our own with the old frontmatter, not the old code;
* chats (``CHATS``): old-path variant groups (a proactive bubble and the person's next turn under one old leaf; a
  sub-agent bubble with its task marker; two bubbles chained by the old anchoring; a nested race), a person's own
  regenerations and edits (which must never move), a bubble beside a person's edits and beside a regeneration of
  it (kept), an already healed chat, a chat whose only bubble is the tail, a chat with an unfinished stub (refused).

``python3 tests/old_pipe_fixture.py sqlite:///path/webui.db`` builds one by hand.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from collections.abc import Iterator
from typing import Any

import attrs
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import JSON, BigInteger, Boolean, Column, Engine, MetaData, String, Table, Text, insert

from owc.store import make_engine
from owc.store.store import ChatStore

#: Open WebUI 0.12.4's ``function`` table (``open_webui/models/functions.py`` ``Function``).
function_metadata = MetaData()
function_t = Table(
    "function",
    function_metadata,
    Column("id", String, primary_key=True),
    Column("version_id", Text, nullable=True),
    Column("user_id", String, index=True),
    Column("name", Text, nullable=False),
    Column("type", Text, nullable=False),
    Column("content", Text, nullable=True),
    Column("meta", JSON, nullable=True),
    Column("valves", JSON, nullable=True),
    Column("is_active", Boolean, default=False),
    Column("is_global", Boolean),
    Column("updated_at", BigInteger),
    Column("created_at", BigInteger),
)

USER = "5f0c2a8e-1d2b-4c3a-9e8f-0a1b2c3d4e5f"
MODEL = "openclaw_gateway.openai/gpt-5.5"
MODEL_NAME = "GPT-5.5 (openai) · OpenClaw"
T0 = 1_760_000_000  # seconds; each chat's messages are minutes apart from here
GATEWAY_URL = "localhost:18789"
GATEWAY_TOKEN = "old-pipe-fixture-token-0123456789abcdef"
STATE_DIR = "/data/openclaw-bridge"


def proactive(text: str) -> str:
    """A ``*↳ Proactive message*`` bubble's content (inventory 3.6)."""
    return f"*↳ Proactive message*\n\n{text}"


def subagent(text: str, task_id: str, title: str | None = "research") -> str:
    """A ``*↳ Sub-agent finished...*`` bubble's content, with its hidden task marker (inventory 3.6)."""
    head = f"*↳ Sub-agent finished: {title}*" if title else "*↳ Sub-agent finished*"
    return f"{head}\n\n{text}\n\n<!-- openclaw:taskId={task_id} -->"


class _Chat:
    """A chat built message by message, as the old Pipe and Open WebUI's frontend shaped them."""

    def __init__(self, chat_id: str, title: str) -> None:
        self.chat_id, self.title = chat_id, title
        self.messages: dict[str, dict[str, Any]] = {}
        self.current: str | None = None
        self.minute = 0

    def _ts(self) -> int:
        self.minute += 1
        return T0 + 60 * self.minute

    def _add(self, mid: str, parent: str | None, body: dict[str, Any]) -> str:
        self.messages[mid] = {"id": mid, "parentId": parent, "childrenIds": [], **body}
        if parent is not None:
            self.messages[parent]["childrenIds"].append(mid)
        self.current = mid
        return mid

    def user(self, mid: str, parent: str | None, text: str) -> str:
        """The person's turn (Open WebUI's frontend: no ``done``)."""
        body = {"role": "user", "content": text, "timestamp": self._ts(), "models": [MODEL]}
        return self._add(mid, parent, body)

    def reply(self, mid: str, parent: str, text: str, *, done: bool | None = True) -> str:
        """The Pipe's reply to a turn (Open WebUI's placeholder, finished by its middleware)."""
        body: dict[str, Any] = {
            "role": "assistant", "content": text, "model": MODEL, "modelName": MODEL_NAME, "modelIdx": 0,
            "timestamp": self._ts(), "user_id": USER,
        }  # fmt: skip
        if done is not None:
            body["done"] = done
        return self._add(mid, parent, body)

    def bubble(self, mid: str, parent: str, content: str, *, stale_view: bool = True) -> str:
        """The old path's write (``_append_proactive_message_to_chat``): under ``parent`` (the deepest leaf it
        found), no ``done``, the leaf's model. ``stale_view``: the open tab never saw it, so the view (and the
        person's next turn) stays at ``parent``."""
        before = self.current
        body = {
            "role": "assistant", "content": content, "timestamp": self._ts(), "model": MODEL, "modelName": MODEL_NAME,
        }  # fmt: skip
        self._add(mid, parent, body)
        if stale_view:
            self.current = before
        return mid

    def json(self) -> dict[str, Any]:
        line, mid = [], self.current
        while mid is not None:
            line.append({"role": self.messages[mid]["role"], "content": self.messages[mid]["content"]})
            mid = self.messages[mid]["parentId"]
        return {
            "id": self.chat_id, "title": self.title, "models": [MODEL], "params": {},
            "history": {"messages": self.messages, "currentId": self.current},
            "messages": list(reversed(line)), "tags": [], "files": [], "timestamp": T0 * 1000,
        }  # fmt: skip


@attrs.frozen
class FixtureChat:
    """One chat of the fixture and what a correct repair does with it."""

    chat_id: str
    title: str
    chat: dict[str, Any]
    #: "repair" (old-path groups: becomes linear), "keep" (nothing of the old path's to do), "refuse".
    expect: str
    #: Sibling groups that are a person's own variants: (parent, children), never to move.
    real_groups: tuple[tuple[str, tuple[str, ...]], ...] = ()


def _chats() -> Iterator[FixtureChat]:
    # 1. The classic (observed 2026-07-19): a cron wake's bubble under the old leaf, then the person's next turn
    #    from a tab that had not seen it: a 1/2 · 2/2 group under a1.
    c = _Chat("c1-proactive", "Daily digest")
    u1 = c.user("c1-u1", None, "Summarise my inbox every morning.")
    a1 = c.reply("c1-a1", u1, "Will do: a summary at 08:00.")
    c.bubble("c1-p1", a1, proactive("Inbox: 3 new, 1 urgent."))
    u2 = c.user("c1-u2", a1, "Thanks, what was urgent?")
    c.reply("c1-a2", u2, "The invoice from ACME.")
    yield FixtureChat(c.chat_id, c.title, c.json(), "repair")

    # 2. A sub-agent's end (with its task marker), then the person's turn beside it.
    c = _Chat("c2-subagent", "Research")
    u1 = c.user("c2-u1", None, "Research the market, use a sub-agent.")
    a1 = c.reply("c2-a1", u1, "Started a sub-agent.")
    c.bubble("c2-s1", a1, subagent("Found 4 competitors.", "task-7f3a"))
    u2 = c.user("c2-u2", a1, "Any news?")
    c.reply("c2-a2", u2, "Yes, see above.")
    yield FixtureChat(c.chat_id, c.title, c.json(), "repair")

    # 3. Two wakes while the tab was stale: the second chained under the first (the old anchoring followed the
    #    newest child down), then the person's turn beside the first; plus, later, a person's own regeneration.
    c = _Chat("c3-two-bubbles", "Heartbeats")
    u1 = c.user("c3-u1", None, "Ping me when the build is done.")
    a1 = c.reply("c3-a1", u1, "OK.")
    p1 = c.bubble("c3-p1", a1, proactive("Build 1 done."))
    c.current = p1
    c.bubble("c3-p2", p1, subagent("Tests green.", "task-91", title=None))
    c.current = a1
    u2 = c.user("c3-u2", a1, "Great. Deploy?")
    c.reply("c3-a2", u2, "Deploying now.")
    c.reply("c3-a2b", u2, "Deploying (regenerated).")
    yield FixtureChat(c.chat_id, c.title, c.json(), "repair", real_groups=(("c3-u2", ("c3-a2", "c3-a2b")),))

    # 4. A person's own variants only: a regenerated reply and an edited question. Nothing moves.
    c = _Chat("c4-regen", "Poems")
    u1 = c.user("c4-u1", None, "A poem about rain.")
    a1 = c.reply("c4-a1", u1, "Rain falls...")
    c.reply("c4-a1b", u1, "Drops on glass...")
    c.user("c4-u2", "c4-a1b", "Shorter.")
    c.user("c4-u2b", "c4-a1b", "Shorter, please, and in French.")
    c.reply("c4-a2", "c4-u2b", "Pluie.")
    yield FixtureChat(
        c.chat_id, c.title, c.json(), "keep",
        real_groups=(("c4-u1", (a1, "c4-a1b")), ("c4-a1b", ("c4-u2", "c4-u2b"))),
    )  # fmt: skip

    # 5. A bubble beside a person's two edits of their next turn: their variants stay; the group is kept.
    c = _Chat("c5-mixed", "Mixed")
    u1 = c.user("c5-u1", None, "Watch the queue.")
    a1 = c.reply("c5-a1", u1, "Watching.")
    c.bubble("c5-p1", a1, proactive("Queue is empty."))
    u2 = c.user("c5-u2", a1, "Status?")
    c.reply("c5-a2", u2, "Empty.")
    u2b = c.user("c5-u2b", a1, "Status of the queue?")
    c.reply("c5-a2b", u2b, "Still empty.")
    yield FixtureChat(c.chat_id, c.title, c.json(), "keep", real_groups=(("c5-a1", ("c5-p1", "c5-u2", "c5-u2b")),))

    # 6. A regeneration of a bubble (the person clicked regenerate on it): kept.
    c = _Chat("c6-regen-bubble", "Regenerated bubble")
    u1 = c.user("c6-u1", None, "Remind me at noon.")
    a1 = c.reply("c6-a1", u1, "Reminder set.")
    c.bubble("c6-p1", a1, proactive("It is noon."), stale_view=False)
    c.reply("c6-r1", a1, "It is noon (regenerated).")
    yield FixtureChat(c.chat_id, c.title, c.json(), "keep", real_groups=(("c6-a1", ("c6-p1", "c6-r1")),))

    # 7. Already healed by the old Pipe (a1 -> bubble -> the person's turn): one line, nothing to do.
    c = _Chat("c7-healed", "Healed")
    u1 = c.user("c7-u1", None, "Hello")
    a1 = c.reply("c7-a1", u1, "Hi")
    p1 = c.bubble("c7-p1", a1, proactive("Good morning."), stale_view=False)
    u2 = c.user("c7-u2", p1, "Morning!")
    c.reply("c7-a2", u2, "How can I help?")
    yield FixtureChat(c.chat_id, c.title, c.json(), "keep")

    # 8. The bubble is the tail (the person never wrote after it): no group.
    c = _Chat("c8-tail", "Tail")
    u1 = c.user("c8-u1", None, "Tell me when it is done.")
    a1 = c.reply("c8-a1", u1, "Sure.")
    c.bubble("c8-p1", a1, subagent("It is done.", "task-tail"))
    yield FixtureChat(c.chat_id, c.title, c.json(), "keep")

    # 9. A group, and an unfinished stub (the old Pipe's empty done:false reply left by a dead request): the repair
    #    would have to finish it, so the chat is refused and named.
    c = _Chat("c9-stub", "Stub")
    u1 = c.user("c9-u1", None, "Run the report.")
    a1 = c.reply("c9-a1", u1, "Running.")
    c.bubble("c9-p1", a1, proactive("Report ready."))
    u2 = c.user("c9-u2", a1, "Send it.")
    c.reply("c9-a2", u2, "", done=False)
    yield FixtureChat(c.chat_id, c.title, c.json(), "refuse")

    # 10. Nested: two bubbles written side by side by two old connections racing (both read the same leaf), under
    #     a first bubble, all beside the person's turn.
    c = _Chat("c10-nested", "Race")
    u1 = c.user("c10-u1", None, "Watch two things.")
    a1 = c.reply("c10-a1", u1, "Watching both.")
    p1 = c.bubble("c10-p1", a1, proactive("First thing happened."))
    c.bubble("c10-p2", p1, proactive("Second thing happened."))
    c.bubble("c10-p3", p1, proactive("Second thing happened (other connection)."))
    u2 = c.user("c10-u2", a1, "Both?")
    c.reply("c10-a2", u2, "Both.")
    yield FixtureChat(c.chat_id, c.title, c.json(), "repair")

    # 11. A plain chat of the old Pipe's: no bubble at all.
    c = _Chat("c11-plain", "Plain")
    u1 = c.user("c11-u1", None, "2+2?")
    c.reply("c11-a1", u1, "4")
    yield FixtureChat(c.chat_id, c.title, c.json(), "keep")


CHATS: tuple[FixtureChat, ...] = tuple(_chats())


def device_identity() -> dict[str, str]:
    """An Ed25519 identity in the old ``DEVICE_IDENTITY`` valve's shape (inventory A2: id = SHA-256 hex of the
    raw public key, ``publicKey`` base64url raw without padding, ``privateKey`` PKCS8 PEM)."""
    key = Ed25519PrivateKey.generate()
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return {
        "id": hashlib.sha256(raw).hexdigest(),
        "publicKey": base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "privateKey": pem,
    }


def _frontmatter(title: str, description: str) -> str:
    return (
        f'"""\ntitle: {title}\nauthor: openclaw-openwebui-integration\nversion: 0.7.0\nlicense: MIT\n'
        f"required_open_webui_version: 0.10.2\ndescription: {description}\n"
        '"""\n# Stand-in for the old artifact (tests/old_pipe_fixture.py): its frontmatter, not its code.\n'
    )


def functions(identity: dict[str, str], now: int = T0) -> list[dict[str, Any]]:
    """The old Functions' rows, valves as the old installers wrote them (inventory G1, G3, G4, section 2)."""
    pipe_valves = {
        "GATEWAY_URL": GATEWAY_URL, "GATEWAY_TOKEN": GATEWAY_TOKEN, "AGENT_ID": "main",
        "DEVICE_IDENTITY": json.dumps(identity), "STATE_DIR": STATE_DIR, "OWUI_BASE_URL": "http://127.0.0.1:8080",
        "CHATGPT_MODEL": "openai/gpt-5.5", "ENABLE_FILE_SERVER": True, "USE_OWUI_FILES": True,
        "SEND_STOP_ON_CANCEL": True, "CONFIGURED_MODELS": "openai/gpt-5.5,anthropic/claude-opus-4-8",
        "DEFAULT_MODEL": "openai/gpt-5.5",
    }  # fmt: skip
    mirrored = ("GATEWAY_URL", "GATEWAY_TOKEN", "DEVICE_IDENTITY", "STATE_DIR", "AGENT_ID")
    action_valves = {k: pipe_valves[k] for k in mirrored}
    rows = [
        ("openclaw_gateway", "OpenClaw Gateway", "pipe", pipe_valves, True, True,
         "class Pipe:\n    class Valves:\n        pass\n"),
        ("openclaw_status_action", "OpenClaw Status", "action", action_valves, True, True,
         "class Action:\n    class Valves:\n        pass\n"),
        ("openclaw_thinking", "OpenClaw Thinking", "filter", {"priority": 0, "override_advanced_params": True},
         True, False, "class Filter:\n    class Valves:\n        pass\n"),
    ]  # fmt: skip
    out = []
    for fid, name, kind, valves, active, is_global, code in rows:
        out.append({
            "id": fid, "version_id": None, "user_id": USER, "name": name, "type": kind,
            "content": _frontmatter(name, f"old {kind}") + code,
            "meta": {"description": f"old {kind}", "manifest": {"title": name, "version": "0.7.0"}},
            "valves": valves, "is_active": active, "is_global": is_global, "updated_at": now, "created_at": now,
        })  # fmt: skip
    return out


@attrs.frozen
class Fixture:
    url: str
    chats: tuple[FixtureChat, ...]
    identity: dict[str, str]


def build(url: str, *, engine: Engine | None = None) -> Fixture:
    """Make the tables (absent ones only) and fill them: the old Functions and ``CHATS``."""
    own = engine is None
    engine = engine or make_engine(url)
    try:
        store = ChatStore(engine)
        store.create_tables()
        function_metadata.create_all(engine, checkfirst=True)
        identity = device_identity()
        with engine.begin() as conn:
            for row in functions(identity):
                conn.execute(insert(function_t).values(**row))
        for fc in CHATS:
            store.create_chat(fc.chat_id, USER, title=fc.title, chat=json.loads(json.dumps(fc.chat)), now=T0)
        return Fixture(url=url, chats=CHATS, identity=identity)
    finally:
        if own:
            engine.dispose()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 tests/old_pipe_fixture.py DATABASE_URL")
    built = build(sys.argv[1])
    print(f"{len(built.chats)} chats and 3 old Functions written to {sys.argv[1]}")
