"""owc end to end for tests: the simulator on loopback, a real database with Open WebUI's schema (a SQLite file,
or the session's PostgreSQL server), owc runtimes (``open_runtime``: a Gateway client, a keeper, a ledger) and a
recording emitter. Every runtime is strict: an illegal lifecycle input fails the test."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from owc import ids
from owc.emit import RecordingEmitter
from owc.emit.asker import RecordingAsker
from owc.gateway import GatewayClient, GatewayConfig
from owc.registry import WriterRegistry
from owc.runs import RunKeeper
from owc.runtime import Runtime, RuntimeConfig, open_runtime
from owc.sim import Simulator, open_simulator
from owc.store import TrioChatStore, open_store

from conftest import TOKEN

USER = "user-1"


class Env:
    def __init__(self, sim: Simulator, store: TrioChatStore, nursery: trio.Nursery) -> None:
        self.sim = sim
        self.store = store
        self.nursery = nursery
        self.emitter = RecordingEmitter()
        #: Where every runtime shows the Gateway's questions (one recording of the tabs, issue 27).
        self.asker = RecordingAsker()
        self.registry = WriterRegistry()
        self.runtimes: dict[str, Runtime] = {}
        self.keepers: dict[str, RunKeeper] = {}
        self.clients: dict[str, GatewayClient] = {}
        self._scopes: dict[str, trio.CancelScope] = {}

    async def connect(
        self,
        name: str = "A",
        emitter: RecordingEmitter | None = None,
        registry: WriterRegistry | None = None,
        store: TrioChatStore | None = None,
    ) -> RunKeeper:
        """An owc runtime; ``registry`` stands for another process (default: this test's one process); ``store``: its
        own view of the database (default: the shared one), for a test that holds one process's writes back."""
        config = RuntimeConfig(
            url=self.sim.url,
            token=TOKEN,
            gateway=GatewayConfig(instance_id=name, backoff_jitter=0),
            registry=registry if registry is not None else self.registry,
            strict=True,
        )
        runtime, scope = await self.nursery.start(self._serve, config, emitter or self.emitter, store or self.store)
        self.runtimes[name], self._scopes[name] = runtime, scope
        self.keepers[name], self.clients[name] = runtime.keeper, runtime.client
        await runtime.connected()
        await self.sim.wait_for(lambda: any(c.instance_id == name and c.subscribed for c in self.sim.conns.values()))
        return runtime.keeper

    async def _serve(
        self,
        config: RuntimeConfig,
        emitter: RecordingEmitter,
        store: TrioChatStore,
        task_status: trio.TaskStatus[Any],
    ) -> None:
        with trio.CancelScope() as scope:
            async with open_runtime(config, store, emitter, self.asker) as runtime:
                task_status.started((runtime, scope))
                await trio.sleep_forever()

    async def kill(self, name: str) -> None:
        """The owc process ``name`` dies: its connection and writers stop at once, nothing written on the way out."""
        self._scopes.pop(name).cancel()
        self.runtimes.pop(name)
        self.clients.pop(name)
        await self.sim.wait_for(
            lambda: not any(c.instance_id == name and not c.closing for c in self.sim.conns.values())
        )

    async def chat(
        self,
        chat_id: str | None = None,
        *,
        model: str = "openclaw.main",
        user_turn: bool = True,
        now: int | None = None,
    ) -> tuple[str, str]:
        """A chat (with one user turn) and its session key; ``now``: when it was last written (seconds)."""
        chat_id = chat_id or str(uuid.uuid4())
        body: dict[str, Any] = {
            "id": chat_id,
            "title": "t",
            "models": [model],
            "history": {"messages": {}, "currentId": None},
            "messages": [],
        }
        if user_turn:
            body["history"] = {
                "currentId": "u1",
                "messages": {
                    "u1": {
                        "id": "u1",
                        "parentId": None,
                        "childrenIds": [],
                        "role": "user",
                        "content": "hi",
                        "models": [model],
                        "timestamp": 1,
                    }
                },
            }
        await self.store.create_chat(chat_id, USER, chat=body, now=now)
        return chat_id, ids.session_key("main", USER, chat_id)

    async def settled(self) -> None:
        """Wait, without a clock, until the simulator is quiescent and every runtime has read all it was sent
        and has nothing left to do."""
        while True:
            await self.sim.wait_for(self.sim.quiescent)
            runs = len(self.sim.runs)
            for runtime in list(self.runtimes.values()):
                await runtime.settled()
            if self.sim.quiescent() and len(self.sim.runs) == runs:
                return  # nothing new began while owc settled (a resume owc sent is a run of the Gateway's)

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Wait, without a clock, until ``predicate`` holds; re-checked whenever any runtime's runs move (a
        predicate over two processes must not wait on one of them only)."""
        while not predicate():
            # The events are taken before the tasks start: a change between the check and a task's first step
            # (a writer's state moving) would otherwise be missed, and the wait last until the next tick.
            changes = [keeper.next_change() for keeper in self.keepers.values()]
            async with trio.open_nursery() as nursery:
                for change in changes:
                    nursery.start_soon(self._first_change, change, nursery.cancel_scope)

    @staticmethod
    async def _first_change(change: trio.Event, scope: trio.CancelScope) -> None:
        await change.wait()
        scope.cancel()

    async def messages(self, chat_id: str) -> dict[str, Any]:
        chat = await self.store.read_chat(chat_id)
        return chat["history"]["messages"]

    def illegal(self) -> list[str]:
        return [line for keeper in self.keepers.values() for line in keeper.ledger.illegal]


@asynccontextmanager
async def open_env(
    tmp_path: Path, *, db_url: str | None = None, busy_timeout_ms: int = 5000, **sim_kwargs: Any
) -> AsyncIterator[Env]:
    async with open_simulator(token=TOKEN, **sim_kwargs) as sim:
        db = db_url or f"sqlite:///{tmp_path / 'webui.db'}"
        async with open_store(db, create=True, busy_timeout_ms=busy_timeout_ms) as store:
            async with trio.open_nursery() as nursery:
                env = Env(sim, store, nursery)
                yield env
                nursery.cancel_scope.cancel()
            assert env.illegal() == [], "illegal lifecycle inputs (bugs in the run table or writer)"
