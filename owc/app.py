"""owc assembled: connections ("deploys") with their bridges, a store, an emitter; scenario playing and the
design's invariants, for ``owc demo``, ``owc scenario run`` and ``owc run``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from owc.emit import RecordingEmitter
from owc.gateway import Backoff, GatewayClient, GatewayConfig
from owc.registry import WRITERS, WriterRegistry
from owc.runs import Bridge
from owc.sim import Simulator, open_simulator
from owc.sim.scenario import ChatSpec, ScenarioPlayer, parse_scenario
from owc.store import TrioChatStore, open_store

log = logging.getLogger("owc.app")

DEFAULT_DEPLOY = "owc"


class Deployments:
    """owc's side of a scenario (the scenario ``Host``): its connections by deploy name, the store, the tabs."""

    def __init__(self, sim: Simulator, store: TrioChatStore, emitter: RecordingEmitter, nursery: trio.Nursery, token: str, registry: WriterRegistry = WRITERS) -> None:
        self.sim = sim
        self.store = store
        self.emitter = emitter
        self.nursery = nursery
        self.token = token
        self.registry = registry
        self.bridges: dict[str, Bridge] = {}
        self.clients: dict[str, GatewayClient] = {}
        self._scopes: dict[str, trio.CancelScope] = {}

    async def create_chat(self, chat: ChatSpec) -> None:
        await self.store.create_chat(
            chat.chat_id,
            chat.user_id,
            title=chat.title,
            chat={"id": chat.chat_id, "title": chat.title, "models": ["openclaw"], "history": {"messages": {}, "currentId": None}, "messages": []},
        )

    async def connect(self, deploy: str) -> None:
        await self.start(deploy)

    async def start(self, deploy: str) -> None:
        if deploy in self._scopes:
            raise ValueError(f"deploy {deploy!r} is already running")
        bridge = self.bridges.get(deploy) or Bridge(self.store, self.emitter, self.registry)
        client = GatewayClient(self.sim.url, self.token, bridge, GatewayConfig(instance_id=deploy), backoff=Backoff())
        self.bridges[deploy], self.clients[deploy] = bridge, client

        async def run(task_status: trio.TaskStatus[trio.CancelScope] = trio.TASK_STATUS_IGNORED) -> None:
            with trio.CancelScope() as scope:
                task_status.started(scope)
                await client.run()

        self._scopes[deploy] = await self.nursery.start(run)
        await client.wait_session()
        await self.sim.wait_for(lambda: any(c.instance_id == deploy and c.subscribed and not c.closing for c in self.sim.conns.values()))

    async def kill(self, deploy: str) -> None:
        """A deploy dying: its connection and every writer it had stop at once."""
        scope = self._scopes.pop(deploy, None)
        if scope is None:
            raise ValueError(f"deploy {deploy!r} is not running")
        scope.cancel()
        await self.sim.wait_for(lambda: not any(c.instance_id == deploy and not c.closing for c in self.sim.conns.values()))

    async def settled(self) -> None:
        """Every connection has read all it was sent, and every writer has finished."""
        for _ in range(2):
            for name, client in self.clients.items():
                if name in self._scopes and client.session is not None and not client.session.closed:
                    try:
                        await client.request("sessions.list", {"limit": 1})
                    except Exception:  # a connection that is closing has nothing more to read
                        log.debug("app.settle_roundtrip_failed deploy=%s", name)
            for bridge in self.bridges.values():
                await bridge.until(lambda b=bridge: b.open_writers() == 0)

    def live(self) -> list[str]:
        return sorted(self._scopes)


@attrs.frozen
class Violation:
    chat: str
    what: str


def check_invariants(chats: dict[str, dict[str, Any]], player: ScenarioPlayer) -> list[Violation]:
    """The design's invariants on the chats a scenario played into (shared/design.md, "Invariants")."""
    from owc import ids

    out: list[Violation] = []
    never = {op_run for op_run, run in player.runs.items() if run.run.heartbeat or ids.is_action_run(run.run_id)}
    # Invariant 3 holds "after the run's terminal": a run a crash cut has none (the Gateway recovers it).
    terminated = {run.run_id for run in player.runs.values() if run.run.terminal is not None}
    terminated |= {r.run_id for r in player.sim.runs.values() if r.terminal is not None}
    for name, spec in player.chats.items():
        messages = chats.get(name, {})
        by_run: dict[str, list[str]] = {}
        for mid, m in messages.items():
            meta = m.get("meta") if isinstance(m.get("meta"), dict) else {}
            if meta.get("openclaw_run"):
                by_run.setdefault(meta["openclaw_run"], []).append(mid)
                if m.get("done") is not True and meta["openclaw_run"] in terminated:
                    out.append(Violation(name, f"message {mid} of run {meta['openclaw_run']} is not done"))
            if len(m.get("childrenIds") or []) > 1:
                out.append(Violation(name, f"message {mid} has {len(m['childrenIds'])} children (a sibling variant)"))
        for run_id, mids in by_run.items():
            if len(mids) > 1:
                out.append(Violation(name, f"run {run_id} has {len(mids)} messages"))
            expected = ids.message_id(spec.session_key, run_id)
            if expected is not None and mids[0] != expected:
                out.append(Violation(name, f"run {run_id}'s message is {mids[0]}, not message_id(R) = {expected}"))
        for op_name in never:
            run_id = player.run_ids[op_name]
            if run_id in by_run and player.runs[op_name].run.key == spec.session_key:
                out.append(Violation(name, f"run {op_name} ({run_id}) must have no message"))
    return out


@attrs.frozen
class Played:
    player: ScenarioPlayer
    chats: dict[str, dict[str, Any]]  # chat name -> history.messages
    emitter: RecordingEmitter
    violations: list[Violation]
    claims: int
    finalized: int


@asynccontextmanager
async def open_owc_with_simulator(db_url: str, token: str = "owc-local-sim-token") -> AsyncIterator[tuple[Simulator, Deployments]]:
    async with open_simulator(token=token) as sim, open_store(db_url, create=True) as store:
        async with trio.open_nursery() as nursery:
            deployments = Deployments(sim, store, RecordingEmitter(), nursery, token, WriterRegistry())
            yield sim, deployments
            nursery.cancel_scope.cancel()


async def play_scenario(text: str, db_url: str, *, progress: Callable[[str], None] | None = None) -> Played:
    """Play a scenario through owc (simulator on loopback -> owc -> the database). A scenario with no
    ``connect`` op gets one deploy named ``owc`` before it starts."""
    ops = parse_scenario(text)
    async with open_owc_with_simulator(db_url) as (sim, deployments):
        if not any(op.op == "connect" for op in ops):
            await deployments.start(DEFAULT_DEPLOY)
        player = ScenarioPlayer(sim, deployments)
        for op in ops:
            if progress is not None:
                progress(f"line {op.line}: {op.op} {' '.join(f'{k}={v}' for k, v in op.args.items() if k != 'steps')}")
            await player.play([op])
        await sim.wait_for(sim.quiescent)
        await deployments.settled()
        chats = {}
        for name, spec in player.chats.items():
            chat = await deployments.store.read_chat(spec.chat_id)
            chats[name] = chat["history"]["messages"] if chat else {}
        claims = sum(b.totals()[0] for b in deployments.bridges.values())
        finalized = sum(b.totals()[1] for b in deployments.bridges.values())
        return Played(player, chats, deployments.emitter, check_invariants(chats, player), claims, finalized)
