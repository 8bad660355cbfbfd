"""Writes of one chat made together (issue 32, the finalize burst): ``ChatStore.write_many`` decides several writes in
turn on one read and parse of the chat and writes it once; ``TrioChatStore.write`` makes the writes of a chat that
wait for the lane together. What must hold: the chat ends as the same writes one after another would leave it, each
caller gets its own result as its own write left it, a refused write changes nothing while the others are made, and
a cancelled caller either wrote nothing (still waiting) or gets the result of the write made for it."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from sqlalchemy import text

from owc.store import ChatStore, Claimed, Written, make_engine, open_store
from owc.store.store import ChatOwnerMismatch, MessageMissing, StoreError, WriteRequest

from store_race import USER

DEAD = lambda writer: False  # noqa: E731
FINAL = [{"type": "message", "id": "o", "content": [{"type": "output_text", "text": "final"}]}]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request, tmp_path: Path) -> str:
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url")
    return f"sqlite:///{tmp_path / 'webui.db'}"


@pytest.fixture
def store(url: str) -> Iterator[ChatStore]:
    s = ChatStore(make_engine(url, busy_timeout_ms=2000))
    s.create_tables()
    yield s
    s.engine.dispose()


def chat_with_runs(store: ChatStore, n: int) -> str:
    """A chat with a user turn and ``n`` claimed, unfinished messages m0..m{n-1} under it, one after another."""
    chat_id = f"together-{uuid.uuid4()}"
    store.create_chat(chat_id, USER)
    store.add_message(chat_id, {"id": "u1", "role": "user", "content": "hi"}, current=True)
    for i in range(n):
        result = store.claim(chat_id, f"m{i}", run_id=f"r{i}", writer="w", alive=DEAD, user_id=USER)
        assert isinstance(result, Claimed)
    return chat_id


def twin(store: ChatStore, chat_id: str) -> str:
    """A second chat holding exactly what ``chat_id`` holds (JSON and ``chat_message`` rows)."""
    other = f"together-{uuid.uuid4()}"
    store.create_chat(other, USER, chat=store.read_chat(chat_id))
    return other


def mirror_rows(store: ChatStore, chat_id: str) -> dict[str, tuple[Any, ...]]:
    with store.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT id, parent_id, content, done, CAST(output AS TEXT), CAST(meta AS TEXT),"
                " CAST(status_history AS TEXT) FROM chat_message WHERE chat_id = :c"
            ),
            {"c": chat_id},
        ).all()
    return {row[0][len(chat_id) + 1 :]: tuple(row[1:]) for row in rows}


def requests() -> list[WriteRequest]:
    """A handover then the finalize of m1, finalizes of m0 and m2 (one with a status line), a write of a message
    that is not there and one naming another user: what a burst on one chat can hold."""
    return [
        WriteRequest("m1", {"content": "half", "output": [], "done": False}),
        WriteRequest("m0", {"content": "final", "output": FINAL, "done": True, "user_id": USER}),
        WriteRequest("gone", {"content": "x", "output": [], "done": True}),
        WriteRequest("m1", {"content": "final", "output": FINAL, "done": True}),
        WriteRequest("m2", {"content": "final", "output": FINAL, "done": True, "user_id": "someone-else"}),
        WriteRequest(
            "m2", {"content": "final", "output": FINAL, "done": True, "status": [{"action": "x", "description": "d"}]}
        ),
    ]


def one_by_one(store: ChatStore, chat_id: str) -> list[Any]:
    out: list[Any] = []
    for request in requests():
        try:
            out.append(store.write(chat_id, request.message_id, **request.kwargs))
        except StoreError as exc:
            out.append(exc)
    return out


def test_writes_made_together_leave_the_chat_as_one_after_another(
    store: ChatStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same writes, one transaction each on one chat and all in one ``write_many`` on its twin: the same chat JSON,
    the same ``chat_message`` rows, the same results in the same places (a refused write is its caller's error, the
    others are made). The batch reads and parses the chat once and commits once."""
    alone = chat_with_runs(store, 3)
    together = twin(store, alone)
    expected = one_by_one(store, alone)

    loads, holds = [0], []
    real_load = ChatStore._load

    def counted(chat_id: str, row: Any, user_id: str | None) -> dict[str, Any]:
        loads[0] += 1
        return real_load(chat_id, row, user_id)

    monkeypatch.setattr(ChatStore, "_load", staticmethod(counted))
    store.on_hold = lambda _chat, seconds: holds.append(seconds)
    got = store.write_many(together, requests())

    assert (loads[0], len(holds)) == (1, 1)
    assert [type(r) for r in got] == [type(r) for r in expected]
    assert isinstance(got[2], MessageMissing) and isinstance(got[4], ChatOwnerMismatch)
    for mine, theirs in zip(got, expected):
        if isinstance(mine, Written):
            assert mine.message == theirs.message and mine.statuses == theirs.statuses
    assert store.read_chat(together)["history"] == store.read_chat(alone)["history"]
    assert mirror_rows(store, together) == mirror_rows(store, alone)
    assert store.read_chat(together)["history"]["messages"]["m1"]["done"] is True


def test_each_result_is_as_its_own_write_left_it(store: ChatStore) -> None:
    """A handover and the finalize of one message in one batch: the handover's caller gets M as the handover wrote it
    (unfinished, its text), not as the finalize after it left the same message."""
    chat_id = chat_with_runs(store, 1)
    first, second = store.write_many(
        chat_id,
        [
            WriteRequest("m0", {"content": "half", "output": [], "done": False}),
            WriteRequest("m0", {"content": "final", "output": FINAL, "done": True}),
        ],
    )
    assert isinstance(first, Written) and isinstance(second, Written)
    assert (first.message["content"], first.message["done"]) == ("half", False)
    assert (second.message["content"], second.message["done"]) == ("final", True)


# ---------------------------------------------------------------------------------------------- the lane (Trio)


class Gated:
    """``ChatStore`` as the Trio store sees it, with every ``write_many`` recorded and the first call of the lane (a
    claim of ``hold``) held until ``release``: the writes behind it wait in the lane meanwhile."""

    def __init__(self, real: ChatStore, hold: str) -> None:
        self.real, self.hold = real, hold
        self.batches: list[list[str]] = []
        self.first_in, self.release = threading.Event(), threading.Event()
        self.in_batch: Callable[[list[str]], None] = lambda ids: None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def claim(self, chat_id: str, message_id: str, **kwargs: Any) -> Any:
        if message_id == self.hold:
            self.first_in.set()
            self.release.wait(30)
        return self.real.claim(chat_id, message_id, **kwargs)

    def write_many(self, chat_id: str, requests: list[WriteRequest]) -> Any:
        ids = [f"{chat_id[-4:]}:{r.message_id}" for r in requests]
        self.batches.append(ids)
        self.in_batch(ids)
        return self.real.write_many(chat_id, requests)


async def two_chats(store: Any) -> tuple[str, str]:
    ids = []
    for _ in range(2):
        chat_id = f"lane-{uuid.uuid4()}"
        await store.create_chat(chat_id, USER)
        await store.add_message(chat_id, {"id": "u1", "role": "user", "content": "hi"}, current=True)
        for i in range(5):
            await store.claim(chat_id, f"m{i}", run_id=f"r{i}", writer="w", alive=DEAD, user_id=USER)
        ids.append(chat_id)
    return ids[0], ids[1]


@pytest.mark.parametrize("together", [16, 2])
async def test_writes_of_one_chat_waiting_in_the_lane_are_made_together(tmp_path: Path, together: int) -> None:
    """Five finalizes of chat A and one of chat B queue behind a claim that holds the lane. A's first takes every A
    write waiting (at most ``together`` at once), in the order they came; B's is made apart. Each caller gets its own
    message back, finished, and the chats hold every finish."""
    async with open_store(f"sqlite:///{tmp_path / 'lane.db'}", create=True) as store:
        store.together = together
        a, b = await two_chats(store)
        gated = store.sync = Gated(store.sync, hold="held")  # type: ignore[assignment]
        results: dict[str, Any] = {}

        async def finalize(chat_id: str, message_id: str) -> None:
            results[f"{chat_id[-4:]}:{message_id}"] = await store.write(
                chat_id, message_id, content="final", output=FINAL, done=True
            )

        async with trio.open_nursery() as nursery:
            try:
                nursery.start_soon(
                    lambda: store.claim(a, "held", run_id="rh", writer="w", alive=DEAD, user_id=USER)  # type: ignore[arg-type,return-value]
                )
                await trio.to_thread.run_sync(gated.first_in.wait, 30)
                for chat_id, message_id in [(a, "m0"), (a, "m1"), (b, "m0"), (a, "m2"), (a, "m3"), (a, "m4")]:
                    nursery.start_soon(finalize, chat_id, message_id)
                    await trio.testing.wait_all_tasks_blocked()
                assert gated.batches == []
            finally:
                gated.release.set()
        a_ids = [f"{a[-4:]}:m{i}" for i in range(5)]
        a_batches = [a_ids[i : i + together] for i in range(0, 5, together)]
        assert gated.batches == [a_batches[0], [f"{b[-4:]}:m0"], *a_batches[1:]]
        for key, result in results.items():
            assert isinstance(result, Written) and result.message["id"] == key.split(":")[1]
            assert result.message["done"] is True
        for chat_id, n in ((a, 5), (b, 1)):
            messages = (await store.read_chat(chat_id))["history"]["messages"]
            assert [messages[f"m{i}"]["done"] for i in range(n)] == [True] * n


async def test_a_write_cancelled_while_it_waits_writes_nothing(tmp_path: Path) -> None:
    """A finalize cancelled while it waits for the lane, before any write took it, leaves the queue: the write of the
    same chat that gets the lane makes only its own."""
    async with open_store(f"sqlite:///{tmp_path / 'lane.db'}", create=True) as store:
        a, _ = await two_chats(store)
        gated = store.sync = Gated(store.sync, hold="held")  # type: ignore[assignment]
        async with trio.open_nursery() as nursery:
            try:
                nursery.start_soon(
                    lambda: store.claim(a, "held", run_id="rh", writer="w", alive=DEAD, user_id=USER)  # type: ignore[arg-type,return-value]
                )
                await trio.to_thread.run_sync(gated.first_in.wait, 30)
                nursery.start_soon(lambda: store.write(a, "m0", content="final", output=FINAL, done=True))  # type: ignore[arg-type,return-value]
                await trio.testing.wait_all_tasks_blocked()
                scope = trio.CancelScope()
                nursery.start_soon(scope_write, store, a, scope)
                await trio.testing.wait_all_tasks_blocked()
                assert len(store._waiting[a]) == 2
                scope.cancel()
                await trio.testing.wait_all_tasks_blocked()
                assert len(store._waiting[a]) == 1
            finally:
                gated.release.set()
        assert gated.batches == [[f"{a[-4:]}:m0"]] and a not in store._waiting
        messages = (await store.read_chat(a))["history"]["messages"]
        assert (messages["m0"]["done"], messages["m1"]["done"]) == (True, False)


async def scope_write(store: Any, chat_id: str, scope: trio.CancelScope) -> None:
    with scope:
        await store.write(chat_id, "m1", content="final", output=FINAL, done=True)


async def test_a_write_taken_into_a_batch_gets_its_result_when_cancelled(tmp_path: Path) -> None:
    """Two finalizes of one chat made together; the second's caller is cancelled while the batch runs. Its write is
    being made (the transaction completes), so its caller gets its result, as a caller whose own thread runs does,
    instead of believing nothing was written."""
    async with open_store(f"sqlite:///{tmp_path / 'lane.db'}", create=True) as store:
        a, _ = await two_chats(store)
        gated = store.sync = Gated(store.sync, hold="held")  # type: ignore[assignment]
        batch_in, batch_go = threading.Event(), threading.Event()

        def hold_batch(ids: list[str]) -> None:
            batch_in.set()
            batch_go.wait(30)

        gated.in_batch = hold_batch
        results: dict[str, Any] = {}
        second = trio.CancelScope()

        async def finalize(message_id: str, scope: trio.CancelScope) -> None:
            with scope:
                results[message_id] = await store.write(a, message_id, content="final", output=FINAL, done=True)

        async with trio.open_nursery() as nursery:
            try:
                nursery.start_soon(
                    lambda: store.claim(a, "held", run_id="rh", writer="w", alive=DEAD, user_id=USER)  # type: ignore[arg-type,return-value]
                )
                await trio.to_thread.run_sync(gated.first_in.wait, 30)
                nursery.start_soon(finalize, "m0", trio.CancelScope())
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(finalize, "m1", second)
                await trio.testing.wait_all_tasks_blocked()
                gated.release.set()
                await trio.to_thread.run_sync(batch_in.wait, 30)
                second.cancel()
                await trio.testing.wait_all_tasks_blocked()
                assert "m1" not in results  # still waiting for the batch's transaction
            finally:
                gated.release.set()
                batch_go.set()
        assert gated.batches == [[f"{a[-4:]}:m0", f"{a[-4:]}:m1"]]
        assert isinstance(results["m1"], Written) and results["m1"].message["id"] == "m1"
        assert (await store.read_chat(a))["history"]["messages"]["m1"]["done"] is True


async def test_a_batch_whose_leader_is_cancelled_before_its_thread_starts_is_made_for_all(tmp_path: Path) -> None:
    """The write that took the batch (its leader) is cancelled while the batch waits for a thread (a connection drop
    cancels one run's write while another run's finalize of the same chat waits in it). The writes it took belong to
    their callers: the transaction is made for all of them, and each gets its result. Before, every write of the
    batch failed with "the write was interrupted", the other callers' though nobody cancelled them (helper-39)."""
    async with open_store(f"sqlite:///{tmp_path / 'lane.db'}", create=True) as store:
        a, _ = await two_chats(store)
        store.limiter.total_tokens = 1
        await store.limiter.acquire()  # no thread free: the batch waits for one
        results: dict[str, Any] = {}
        scopes = {"m0": trio.CancelScope(), "m1": trio.CancelScope()}

        async def finalize(message_id: str) -> None:
            with scopes[message_id]:
                try:
                    results[message_id] = await store.write(a, message_id, content="final", output=FINAL, done=True)
                except RuntimeError as exc:
                    results[message_id] = exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(finalize, "m0")
            nursery.start_soon(finalize, "m1")  # in the same turn: whichever leads takes both
            await trio.testing.wait_all_tasks_blocked()
            assert store.lane.locked() and not results
            for scope in scopes.values():
                scope.cancel()  # the leader's cancel reaches it waiting for the thread; the other's, taken, waits
            await trio.testing.wait_all_tasks_blocked()
            store.limiter.release()
        assert all(isinstance(results[m], Written) for m in ("m0", "m1")), results
        chat = await store.read_chat(a)
        assert all(chat["history"]["messages"][m]["done"] is True for m in ("m0", "m1"))


async def test_a_batch_that_fails_for_one_write_is_made_apart(tmp_path: Path) -> None:
    """A fault of owc's in one write of a batch (here an argument ``write`` does not take: a ``TypeError``, not a
    refusal) fails that write's caller only: the batch is made again one write at a time."""
    async with open_store(f"sqlite:///{tmp_path / 'lane.db'}", create=True) as store:
        a, _ = await two_chats(store)
        gated = store.sync = Gated(store.sync, hold="held")  # type: ignore[assignment]
        results: dict[str, Any] = {}

        async def finalize(message_id: str, **extra: Any) -> None:
            try:
                results[message_id] = await store.write(
                    a, message_id, content="final", output=FINAL, done=True, **extra
                )
            except TypeError as exc:
                results[message_id] = exc

        async with trio.open_nursery() as nursery:
            try:
                nursery.start_soon(
                    lambda: store.claim(a, "held", run_id="rh", writer="w", alive=DEAD, user_id=USER)  # type: ignore[arg-type,return-value]
                )
                await trio.to_thread.run_sync(gated.first_in.wait, 30)
                nursery.start_soon(finalize, "m0")
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(lambda: finalize("m1", bogus=True))
                await trio.testing.wait_all_tasks_blocked()
            finally:
                gated.release.set()
        m = a[-4:]
        assert gated.batches == [[f"{m}:m0", f"{m}:m1"], [f"{m}:m0"], [f"{m}:m1"]]
        assert isinstance(results["m0"], Written) and isinstance(results["m1"], TypeError)
        messages = (await store.read_chat(a))["history"]["messages"]
        assert (messages["m0"]["done"], messages["m1"]["done"]) == (True, False)
