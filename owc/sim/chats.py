"""The Open WebUI side of a scenario in a real database, without owc: ``owc sim --scenario FILE --db URL``.

Played against the bare simulator, a scenario's chats existed only in the simulator: an ``owc run`` connected to
it found no chat for any run and logged ``runs.claim_failed`` for each. With a database, each ``chat`` op makes
the chat there (and the user turns and messages Open WebUI would write), as Open WebUI does, so the ``owc run``
on that database claims the runs' messages and writes them. owc is another process here: the ops that need owc
in this one (deploys, stops, claims) are refused with the line that names them, and ``expect`` is skipped (what
that ``owc run`` has written by then is its own pace).
"""

from __future__ import annotations

from typing import Any

from owc.sim.scenario import ChatSpec
from owc.store import TrioChatStore

NEEDS_OWC = "needs owc in the same process: play this file with `owc scenario run`"


class DatabaseChats:
    """A scenario ``Host`` that is only Open WebUI's database: chats, user turns, stubs, messages."""

    #: ``expect`` is checked only where owc writes in the same process (``Deployments``).
    writes_messages = False

    def __init__(self, store: TrioChatStore) -> None:
        self.store = store

    async def create_chat(self, chat: ChatSpec) -> None:
        """The chat as Open WebUI makes a new one (its ``chat`` JSON with an empty history)."""
        await self.store.create_chat(
            chat.chat_id,
            chat.user_id,
            title=chat.title,
            chat={
                "id": chat.chat_id,
                "title": chat.title,
                "models": ["openclaw"],
                "history": {"messages": {}, "currentId": None},
                "messages": [],
            },
        )

    async def create_stub(self, chat: ChatSpec, message_id: str, text: str) -> None:
        """A user turn and Open WebUI's placeholder for its reply, as ``insert_chat_turn`` writes them, and no
        owc writer: a request that died left it."""
        user_id = f"{message_id}-user"
        await self.store.add_turn(chat.chat_id, user_id, message_id, text=text)

    async def add_message(self, chat: ChatSpec, message: dict[str, Any], *, current: bool) -> None:
        await self.store.add_message(chat.chat_id, message, current=current)

    async def set_current(self, chat: ChatSpec, message_id: str) -> None:
        await self.store.set_current(chat.chat_id, message_id)

    async def read_chat(self, chat: ChatSpec) -> dict[str, Any] | None:
        return await self.store.read_chat(chat.chat_id)

    async def settled(self) -> None:
        """Nothing of owc's to wait for here (the ``owc run`` beside it settles at its own pace)."""

    async def connect(self, deploy: str, process: str | None = None) -> None:
        raise ValueError(NEEDS_OWC)

    async def send(self, deploy: str, key: str, message: str, run_id: str) -> None:
        raise ValueError(NEEDS_OWC)

    async def stop(self, chat: ChatSpec, deploy: str | None) -> list[str]:
        raise ValueError(NEEDS_OWC)

    async def claimed(self, key: str, run_id: str, deploy: str | None) -> None:
        raise ValueError(NEEDS_OWC)

    async def kill(self, deploy: str) -> None:
        raise ValueError(NEEDS_OWC)

    async def start(self, deploy: str) -> None:
        raise ValueError(NEEDS_OWC)

    async def teardown(self, chat: ChatSpec, message_id: str, deploy: str, text: str | None) -> None:
        raise ValueError(NEEDS_OWC)
