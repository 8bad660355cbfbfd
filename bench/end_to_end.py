"""End to end: runs x deltas x tool calls from the simulator through owc into SQLite, recording emitter.

owc is assembled by ``open_runtime``, the one entry point ``owc run`` and the Open WebUI host use, so the
figures are those of the run path as shipped (Gateway client, keeper, ledger, writers). Prints events/s through
owc, DB transactions per run (the design's target: claim + finalize, whatever the number of events), the time
from a run's first showable event to its ``chat:messages`` emit (median, p99), and the same frames through a
bare receive loop in the same run as the ceiling, with the ratio.

    python bench/end_to_end.py [--runs 20] [--deltas 200] [--tools 5]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import trio
import trio.lowlevel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from owc import ids
from owc.emit import RecordingEmitter
from owc.gateway import ConnectionRuns, HelloInfo, Resync
from owc.protocol import Event
from owc.registry import WriterRegistry
from owc.runs import Ledger
from owc.runtime import RuntimeConfig, open_runtime
from owc.sim import Simulator, open_simulator
from owc.store import open_store

from rawclient import raw_client

TOKEN = "bench-token"
USER = "bench"


class TimedEmitter(RecordingEmitter):
    """Notes when each message's ``chat:messages`` went out: the end of the latency the bench reports."""

    def __init__(self) -> None:
        super().__init__()
        self.introduced: dict[str, float] = {}

    async def emit(self, chat_id: str, message_id: str, user_id: str, event: dict[str, Any]) -> None:
        if event.get("type") == "chat:messages":
            self.introduced.setdefault(message_id, time.perf_counter())
        self.events.append(None)  # type: ignore[arg-type]  # count only: the bench measures owc, not deep copies


class TimedRuns:
    """Stands between the connection's reader and its run table and notes when the reader dispatched the event
    that made a run showable (the start of the latency). ``open_runtime`` builds the keeper itself, so the bench
    wraps the connection's view (the ``ConnectionRuns`` protocol) instead of subclassing the keeper."""

    def __init__(self, inner: ConnectionRuns, ledger: Ledger) -> None:
        self.inner = inner
        self.ledger = ledger
        self.shown_at: dict[str, float] = {}

    def on_event(self, event: Event) -> None:
        self.inner.on_event(event)
        for run in self.ledger.unsettled():
            if run.life.showable and run.message_id not in self.shown_at:
                self.shown_at[run.message_id] = time.perf_counter()

    def on_gap(self) -> None:
        self.inner.on_gap()

    async def on_hello(self, info: HelloInfo, resync: Resync) -> None:
        await self.inner.on_hello(info, resync)

    async def on_resync(self, resync: Resync) -> None:
        await self.inner.on_resync(resync)


async def drive(sim: Simulator, keys: list[str], n_runs: int, deltas: int, tools: int) -> None:
    """Stream the runs, yielding to the event loop after every delta (as a live Gateway would pace them)."""
    every = max(1, deltas // max(1, tools))
    for r in range(n_runs):
        key = keys[r % len(keys)]
        run = sim.start_run(key, f"bench-{r}-{uuid.uuid4().hex[:6]}")
        call = 0
        for i in range(deltas):
            run.text(f"w{i} ", chunks=[f"w{i} "])
            await trio.lowlevel.checkpoint()
            if i % every == every - 1 and call < tools:
                call += 1
                run.tool("exec", {"n": call}, "ok")
        run.end()


async def owc_phase(args: argparse.Namespace) -> dict[str, Any]:
    holds: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            open_simulator(token=TOKEN) as sim,
            open_store(f"sqlite:///{tmp}/bench.db", create=True) as store,
        ):
            store.sync.on_hold = lambda _chat, s: holds.append(s)
            keys = []
            for _ in range(4):
                chat_id = str(uuid.uuid4())
                await store.create_chat(chat_id, USER)
                keys.append(ids.session_key("main", USER, chat_id))
            emitter = TimedEmitter()
            config = RuntimeConfig(url=sim.url, token=TOKEN, registry=WriterRegistry())
            async with open_runtime(config, store, emitter) as runtime:
                await runtime.settled()  # hello handled and its reconcile done: what follows is the runs' alone
                conn = runtime.client.connection
                assert conn is not None
                timed = conn.runs = TimedRuns(conn.runs, runtime.ledger)
                setup_tx = len(holds)
                events_before = sum(c.seq for c in sim.conns.values())
                start = time.perf_counter()
                await drive(sim, keys, args.runs, args.deltas, args.tools)
                await runtime.keeper.until(lambda: runtime.keeper.totals()[1] >= args.runs)
                elapsed = time.perf_counter() - start
                events = sum(c.seq for c in sim.conns.values()) - events_before
                connections = runtime.client.connections_opened
                illegal = list(runtime.ledger.illegal)
            latencies = [
                (emitter.introduced[m] - t) * 1e3 for m, t in timed.shown_at.items() if m in emitter.introduced
            ]
            return {
                "elapsed": elapsed,
                "events": events,
                "tx_per_run": (len(holds) - setup_tx) / args.runs,
                "latencies": latencies,
                "claims": runtime.keeper.totals(),
                "connections": connections,
                "illegal": illegal,
            }


async def bare_phase(args: argparse.Namespace) -> dict[str, Any]:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        await client.request("sessions.subscribe", {})
        keys = [ids.session_key("main", USER, str(uuid.uuid4())) for _ in range(4)]
        start = time.perf_counter()
        count = 0

        async def read() -> None:
            nonlocal count
            finals = 0
            while finals < args.runs:
                frame = orjson.loads(await client.ws.get_message())
                count += 1
                if frame.get("event") == "chat" and frame["payload"].get("state") == "final":
                    finals += 1

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await drive(sim, keys, args.runs, args.deltas, args.tools)
        return {"elapsed": time.perf_counter() - start, "events": count}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


async def main(args: argparse.Namespace) -> None:
    owc = await owc_phase(args)
    bare = await bare_phase(args)
    o_rate, b_rate = owc["events"] / owc["elapsed"], bare["events"] / bare["elapsed"]
    print(
        f"{args.runs} runs x {args.deltas} deltas x {args.tools} tool calls; "
        "simulator, owc (open_runtime) and SQLite in one process"
    )
    print(f"owc end to end       {o_rate:>10,.0f} events/s  ({owc['events']} events in {owc['elapsed']:.2f} s)")
    print(f"bare receive loop    {b_rate:>10,.0f} events/s  ({bare['events']} events in {bare['elapsed']:.2f} s)")
    print(f"ratio owc/bare       {o_rate / b_rate:>10.2f}")
    print(f"DB transactions/run  {owc['tx_per_run']:>10.2f}  (claim + finalize = 2)")
    lat = owc["latencies"]
    median = statistics.median(lat) if lat else float("nan")
    print(
        f"first showable event dispatched -> chat:messages emitted: median {median:.1f} ms, "
        f"p99 {pct(lat, 0.99):.1f} ms ({len(lat)} runs)"
    )
    print(f"claimed, finalized   {owc['claims']}")
    if owc["connections"] != 1:
        print(f"note: {owc['connections']} connections (a reconnect: latencies after it were not timed)")
    if owc["illegal"]:
        print(f"note: {len(owc['illegal'])} illegal lifecycle inputs, first: {owc['illegal'][0]}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--deltas", type=int, default=200)
    parser.add_argument("--tools", type=int, default=5)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    trio.run(main, args)
