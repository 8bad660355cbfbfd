"""Claimers for the race tests: many writers (threads or processes) claim the same runs at once."""

from __future__ import annotations

import random
import uuid

from owc import ids
from owc.store import Claimed, make_engine
from owc.store.store import AlreadyThere, ChatStore, Locked

USER = "race-user"


def plan(chats: int, runs_per_chat: int, tag: str = "") -> list[tuple[str, str, str, str]]:
    """(chat_id, session_key, run_id, message_id) for every run, the same in every claimer of one race."""
    out = []
    for c in range(chats):
        chat_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"owc-race-chat-{tag}-{c}"))
        key = ids.session_key("main", USER, chat_id)
        for r in range(runs_per_chat):
            run_id = f"race-run-{c}-{r}"
            out.append((chat_id, key, run_id, ids.message_id(key, run_id)))
    return out


def claim_all(
    url: str, writer: str, chats: int, runs_per_chat: int, seed: int, tag: str = "", busy_timeout_ms: int = 5000
) -> dict[str, int]:
    """Claim every planned run (in an order of our own); return what happened, counted."""
    store = ChatStore(make_engine(url, busy_timeout_ms=busy_timeout_ms, pool_size=1))
    runs = plan(chats, runs_per_chat, tag)
    random.Random(seed).shuffle(runs)
    counts = {"claimed": 0, "already": 0, "locked": 0}
    claimed_runs = []
    try:
        for chat_id, _key, run_id, message_id in runs:
            while True:
                result = store.claim(
                    chat_id, message_id, run_id=run_id, writer=writer, alive=lambda w: True, user_id=USER
                )
                if isinstance(result, Locked):
                    counts["locked"] += 1
                    continue  # a real writer tries again on the run's next event
                break
            if isinstance(result, Claimed):
                counts["claimed"] += 1
                claimed_runs.append(run_id)
            elif isinstance(result, AlreadyThere):
                counts["already"] += 1
    finally:
        store.engine.dispose()
    counts["runs"] = len(runs)
    return counts
