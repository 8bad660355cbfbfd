"""owc end to end for tests: the simulator on loopback, a real SQLite file with Open WebUI's schema, owc
connections (``Bridge`` + ``GatewayClient``) and a recording emitter."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from conftest import TOKEN
from owc import ids
from owc.emit import RecordingEmitter
from owc.gateway import Backoff, GatewayClient, GatewayConfig
from owc.registry import WriterRegistry
from owc.runs import Bridge
from owc.sim import Simulator, open_simulator
from owc.store import TrioChatStore, open_store

USER = "user-1"


class Env:
    def __init__(self, sim: Simulator, store: TrioChatStore, nursery: trio.Nursery) -> None:
        self.sim = sim
        self.store = store
        self.nursery = nursery
        self.emitter = RecordingEmitter()
        self.registry = WriterRegistry()
        self.bridges: dict[str, Bridge] = {}
        self.clients: dict[str, GatewayClient] = {}

    async def connect(self, name: str = "A", emitter: RecordingEmitter | None = None, registry: WriterRegistry | None = None) -> Bridge:
        """An owc connection; ``registry`` stands for another process (default: this test's one process)."""
        bridge = Bridge(self.store, emitter or self.emitter, registry if registry is not None else self.registry)
        client = GatewayClient(self.sim.url, TOKEN, bridge, GatewayConfig(instance_id=name), backoff=Backoff(jitter=0))
        self.bridges[name], self.clients[name] = bridge, client
        await self.nursery.start(client.run)
        await client.wait_session()
        await self.sim.wait_for(lambda: any(c.instance_id == name and c.subscribed for c in self.sim.conns.values()))
        return bridge

    async def chat(self, chat_id: str | None = None, *, model: str = "openclaw.main", user_turn: bool = True) -> tuple[str, str]:
        """A chat (with one user turn) and its session key."""
        chat_id = chat_id or str(uuid.uuid4())
        body: dict[str, Any] = {"id": chat_id, "title": "t", "models": [model], "history": {"messages": {}, "currentId": None}, "messages": []}
        if user_turn:
            body["history"] = {"currentId": "u1", "messages": {"u1": {"id": "u1", "parentId": None, "childrenIds": [], "role": "user", "content": "hi", "models": [model], "timestamp": 1}}}
        await self.store.create_chat(chat_id, USER, chat=body)
        return chat_id, ids.session_key("main", USER, chat_id)

    async def settled(self) -> None:
        """Wait, without a clock, until the simulator is quiescent, every connection has read all it was sent
        (a request's reply comes after every event sent before it), and every writer has finished."""
        await self.sim.wait_for(self.sim.quiescent)
        for _ in range(2):  # a resync or a writer's own requests may follow the first round trip
            for client in self.clients.values():
                if client.session is not None and not client.session.closed:
                    await client.request("sessions.list", {"limit": 1})
            while True:
                busy = [b for b in self.bridges.values() if b.open_writers()]
                if not busy:
                    break
                table = next(t for t in busy[0].tables.values() if t.open_writers())
                await table.wait_changed()

    async def messages(self, chat_id: str) -> dict[str, Any]:
        chat = await self.store.read_chat(chat_id)
        return chat["history"]["messages"]


@asynccontextmanager
async def open_env(tmp_path: Path, **sim_kwargs: Any) -> AsyncIterator[Env]:
    async with open_simulator(token=TOKEN, **sim_kwargs) as sim:
        async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
            async with trio.open_nursery() as nursery:
                env = Env(sim, store, nursery)
                yield env
                nursery.cancel_scope.cancel()
