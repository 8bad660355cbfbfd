"""Playing a scenario through owc: the simulator on loopback, owc runtimes ("deploys") on it, a database with
Open WebUI's schema, and a recording emitter standing for the tabs. ``owc demo`` and ``owc scenario run`` use
it; owc's run path never imports it (it sits beside the simulator, not in the runtime).

A deploy is an owc runtime (its connection, ledger) in an owc process (its writer registry): each deploy is a
process of its own unless ``connect`` names a ``process`` two deploys share (a worker holding a retired and a new
connection after a redeploy). ``kill`` is that deploy dying (its connection cut, nothing written on the way out);
``start`` after a kill is a new runtime on the same database, in its process if another deploy still keeps that
process alive, else in a new process, which must finish what the dead one left (the reconcile pass, the claims'
take-over rules).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from owc import ids
from owc.emit import RecordingEmitter
from owc.gateway import GatewayConfig
from owc.protocol import parse_chat_history
from owc.registry import WriterRegistry
from owc.render import shows_in_transcript
from owc.runs import RunKeeper
from owc.runtime import Runtime, RuntimeConfig, open_runtime
from owc.sim.chats import DatabaseChats
from owc.sim.scenario import ChatSpec, ScenarioPlayer, parse_scenario
from owc.sim.server import Simulator, open_simulator
from owc.store import TrioChatStore, open_store

log = logging.getLogger("owc.sim.play")

DEFAULT_DEPLOY = "owc"


class Deployments(DatabaseChats):
    """owc's side of a scenario (the scenario ``Host``): its deploys by name, the store (Open WebUI's side:
    ``DatabaseChats``), the tabs."""

    writes_messages = True

    def __init__(
        self, sim: Simulator, store: TrioChatStore, emitter: RecordingEmitter, nursery: trio.Nursery, token: str
    ) -> None:
        self.sim = sim
        self.store = store
        self.emitter = emitter
        self.nursery = nursery
        self.token = token
        self.runtimes: dict[str, Runtime] = {}
        #: Every deploy's keeper ever started (a killed process's counts still happened).
        self.keepers: list[RunKeeper] = []
        self._scopes: dict[str, trio.CancelScope] = {}
        self._process_of: dict[str, str] = {}  # deploy -> its process name
        self._registries: dict[str, WriterRegistry] = {}  # live process name -> its writer registry

    async def connect(self, deploy: str, process: str | None = None) -> None:
        self._process_of[deploy] = process or deploy
        await self.start(deploy)

    async def send(self, deploy: str, key: str, message: str, run_id: str) -> None:
        """owc's own ``chat.send`` on the deploy's connection (what the Pipe will send): the run's sender."""
        conn = self.runtimes[deploy].client.connection
        if conn is None or conn.closed:
            raise ValueError(f"deploy {deploy!r} has no open connection")
        await conn.request("chat.send", {"sessionKey": key, "message": message, "idempotencyKey": run_id})

    async def stop(self, chat: ChatSpec, deploy: str | None) -> list[str]:
        """The user's Stop in the chat's tab: each deploy (or the named one) stops the runs it streams there;
        returns once the Gateway has ended them (owc's ``chat.abort``)."""
        session = self.sim.sessions.get(chat.session_key)
        active = session.active if session is not None else None
        stopped = 0
        for name in [deploy] if deploy is not None else self.live():
            stopped += self.runtimes[name].stop_chat(chat.chat_id)
        log.info("sim.play.stop chat=%s deploy=%s stopped=%d", chat.name, deploy or "*", stopped)
        if not stopped or active is None:
            return []
        await self.sim.wait_for(lambda: active.state == "ended")
        return [active.run_id]

    def _registry(self, deploy: str) -> WriterRegistry:
        """The deploy's process's writer registry: a live process's, or a new process's."""
        process = self._process_of.setdefault(deploy, deploy)
        if not any(self._process_of.get(d) == process for d in self._scopes):
            self._registries[process] = WriterRegistry()  # no deploy keeps it alive: a new process
        return self._registries[process]

    async def start(self, deploy: str) -> None:
        if deploy in self._scopes:
            raise ValueError(f"deploy {deploy!r} is already running")
        config = RuntimeConfig(
            url=self.sim.url,
            token=self.token,
            gateway=GatewayConfig(instance_id=deploy),
            registry=self._registry(deploy),
        )
        runtime, scope = await self.nursery.start(self._serve, config)
        self.runtimes[deploy], self._scopes[deploy] = runtime, scope
        self.keepers.append(runtime.keeper)
        await runtime.connected()
        await self.sim.wait_for(
            lambda: any(c.instance_id == deploy and c.subscribed and not c.closing for c in self.sim.conns.values())
        )

    async def _serve(self, config: RuntimeConfig, task_status: trio.TaskStatus[Any]) -> None:
        with trio.CancelScope() as scope:
            async with open_runtime(config, self.store, self.emitter) as runtime:
                task_status.started((runtime, scope))
                await trio.sleep_forever()  # timer-ok: no deadline; the deploy runs until it is killed

    async def claimed(self, key: str, run_id: str, deploy: str | None) -> None:
        """Until the deploy (or, unnamed, any live deploy) holds the run's message, or is done with it."""
        if not self.runtimes:
            raise ValueError("no deploy runs")
        runtimes = [self.runtimes[deploy]] if deploy is not None else list(self.runtimes.values())

        async def until_held(runtime: Runtime, done: trio.CancelScope) -> None:
            def holds() -> bool:
                run = runtime.ledger.get(key, run_id)
                return (run is not None and run.life.claimed) or runtime.ledger.is_settled(key, run_id)

            await runtime.keeper.until(holds)
            done.cancel()

        async with trio.open_nursery() as nursery:
            for runtime in runtimes:
                nursery.start_soon(until_held, runtime, nursery.cancel_scope)

    async def teardown(self, chat: ChatSpec, message_id: str, deploy: str, text: str | None) -> None:
        """Open WebUI dies during its own teardown (SIGINT, or any death between the save and the handover): the
        request's cancel path saves the reply ``done: true`` as the tab had it (Open WebUI's middleware does that
        on a cancel), then the process, and owc's deploy in it, is gone before the handover reaches owc."""
        if deploy not in self._scopes:
            raise ValueError(f"deploy {deploy!r} is not running")
        fields: dict[str, Any] = {"done": True}
        if text is not None:
            fields["content"] = text
        # Open WebUI's upsert of the message: the keys it writes replace the message's, ``meta`` stays.
        await self.store.save_message(chat.chat_id, message_id, fields)
        log.info("sim.play.teardown chat=%s message=%s deploy=%s", chat.name, message_id, deploy)
        await self.kill(deploy)

    async def kill(self, deploy: str) -> None:
        """A deploy's process dying: its connection and every writer it had stop at once."""
        scope = self._scopes.pop(deploy, None)
        if scope is None:
            raise ValueError(f"deploy {deploy!r} is not running")
        self.sim.deaths.append((deploy, trio.current_time()))
        for conn in self.sim.conns.values():
            if conn.instance_id == deploy and not conn.closing:
                conn.killed = True  # sent frames until its socket closes, shown nowhere
        scope.cancel()
        self.runtimes.pop(deploy)
        await self.sim.wait_for(
            lambda: not any(c.instance_id == deploy and not c.closing for c in self.sim.conns.values())
        )

    async def settled(self) -> None:
        """Every live deploy has read all it was sent and has nothing left to do."""
        for runtime in list(self.runtimes.values()):
            await runtime.settled()

    def live(self) -> list[str]:
        return sorted(self._scopes)


@attrs.frozen
class Played:
    player: ScenarioPlayer
    chats: dict[str, dict[str, Any]]  # chat name -> history.messages
    emitter: RecordingEmitter
    claims: int
    finalized: int
    #: Messages of runs that have ended and are still ``done: false`` (owc's own report, not the tests' oracle).
    unfinished: list[tuple[str, str]]  # (chat name, run name or id)
    #: Runs on a chat's key whose transcript shows something and that have no message at all.
    missing: list[tuple[str, str]] = attrs.field(factory=list)
    #: What the scenario's own ``expect`` ops found wrong, each naming its line.
    failures: list[str] = attrs.field(factory=list)


@asynccontextmanager
async def open_owc_with_simulator(
    db_url: str, token: str = "owc-local-sim-token"
) -> AsyncIterator[tuple[Simulator, Deployments]]:
    async with open_simulator(token=token) as sim, open_store(db_url, create=True) as store:
        async with trio.open_nursery() as nursery:
            deployments = Deployments(sim, store, RecordingEmitter(), nursery, token)
            yield sim, deployments
            nursery.cancel_scope.cancel()


async def play_scenario(text: str, db_url: str, *, progress: Callable[[str], None] | None = None) -> Played:
    """Play a scenario through owc (simulator on loopback -> owc -> the database). A scenario with no
    ``connect`` op gets one deploy named ``owc`` before it starts."""
    ops = parse_scenario(text, through_owc=True)
    async with open_owc_with_simulator(db_url) as (sim, deployments):
        if not any(op.op == "connect" for op in ops):
            await deployments.start(DEFAULT_DEPLOY)
        player = ScenarioPlayer(sim, deployments)
        for op in ops:
            if progress is not None:
                progress(f"line {op.line}: {op.op} {' '.join(f'{k}={v}' for k, v in op.args.items() if k != 'steps')}")
            await player.play([op])
        if progress is not None:
            progress("the final settle (every run ended, owc finished with each)")
        await sim.wait_for(sim.quiescent)
        sim.tick_now()  # the next tick shows a gap the last events left (nothing after them would)
        await deployments.settled()
        await player.check_expectations()
        chats = {}
        for name, spec in player.chats.items():
            chat = await deployments.store.read_chat(spec.chat_id)
            chats[name] = chat["history"]["messages"] if chat else {}
        claims = sum(b.totals()[0] for b in deployments.keepers)
        finalized = sum(b.totals()[1] for b in deployments.keepers)
        return Played(
            player,
            chats,
            deployments.emitter,
            claims,
            finalized,
            _unfinished(chats, player),
            _missing(chats, player),
            player.failures,
        )


def _unfinished(chats: dict[str, dict[str, Any]], player: ScenarioPlayer) -> list[tuple[str, str]]:
    names = {run_id: name for name, run_id in player.run_ids.items()}
    ended = {run.run_id for run in player.sim.runs.values() if run.state == "ended"}
    # A message a cut run keeps open for its continuation is unfinished only once that has ended too.
    ended -= {r.recovers for r in player.sim.runs.values() if r.recovers and r.state != "ended"}
    out = []
    for chat, messages in chats.items():
        for message in messages.values():
            run_id = (message.get("meta") or {}).get("openclaw_run")
            if run_id in ended and message.get("done") is not True:
                out.append((chat, names.get(run_id, run_id)))
    return out


def _missing(chats: dict[str, dict[str, Any]], player: ScenarioPlayer) -> list[tuple[str, str]]:
    """Ended runs on a scenario chat's key that have no message although their transcript shows something: the
    case a report of unfinished messages cannot see."""
    names = {run_id: name for name, run_id in player.run_ids.items()}
    by_key = {spec.session_key: name for name, spec in player.chats.items()}
    out = []
    for run in player.sim.runs.values():
        chat = by_key.get(run.key)
        # A recovery writes into the message of the run it recovers when owc can tell which that is (link rule E:
        # the transcript names it, or owc saw it cut); otherwise (a run begun by another client and cut while owc
        # was away) it has a message of its own. Either counts, as does a message whose chain holds it.
        candidates, source, seen = [], run, set()
        while source is not None and source.run_id not in seen:
            seen.add(source.run_id)
            candidates.append(ids.message_id(source.key, source.run_id))
            source = player.sim.runs.get(source.recovers) if source.recovers is not None else None
        if chat is None or candidates[0] is None or run.state != "ended":
            continue
        if any(m is not None and m in chats[chat] for m in candidates):
            continue
        if run.recovers is not None and any(
            run.run_id in ((m.get("meta") or {}).get("openclaw_chain") or []) for m in chats[chat].values()
        ):
            # owc linked the recovery to another run's message: the run it held cut, where the transcript shows
            # nothing that tells that run from the one the Gateway recovered (a hidden sub-agent completion after
            # it, steered into it or a run of its own: fuzz seed 150995). Linked, not missing.
            continue
        session = player.sim.sessions.get(run.key)
        history = parse_chat_history({"sessionKey": run.key, "messages": session.transcript if session else []})
        if shows_in_transcript(history, run.run_id):
            out.append((chat, names.get(run.run_id, run.run_id)))
    return out


def message_names(player: ScenarioPlayer) -> dict[str, str]:
    """Message id -> the scenario's name of the run it belongs to (recovery runs: by their id)."""
    names: dict[str, str] = {}
    for run in player.sim.runs.values():
        mid = ids.message_id(run.key, run.run_id)
        if mid is not None:
            names[mid] = run.run_id[:8]
    for op_name, run in player.runs.items():
        mid = ids.message_id(run.run.key, run.run_id)
        if mid is not None:
            names[mid] = op_name
    return names
