"""End to end: runs x deltas x tool calls from the simulator through owc into SQLite, recording emitter.

Prints events/s through owc, DB transactions per run (the design's target: claim + finalize, whatever the
number of events), the time from a run's first showable event to its ``chat:messages`` emit (median, p99),
and the same frames through a bare receive loop in the same run as the ceiling, with the ratio.

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

import orjson
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from owc import ids  # noqa: E402
from owc.emit import RecordingEmitter  # noqa: E402
from owc.gateway import open_gateway_connection  # noqa: E402
from owc.registry import WriterRegistry  # noqa: E402
from owc.runs import Bridge  # noqa: E402
from owc.sim import open_simulator  # noqa: E402
from owc.store import open_store  # noqa: E402
from rawclient import raw_client  # noqa: E402

TOKEN = "bench-token"
USER = "bench"


class TimedEmitter(RecordingEmitter):
    def __init__(self) -> None:
        super().__init__()
        self.introduced: dict[str, float] = {}

    async def emit(self, chat_id, message_id, user_id, event) -> None:
        if event.get("type") == "chat:messages":
            self.introduced.setdefault(message_id, time.perf_counter())
        self.events.append(None)  # count only: the bench measures owc, not deep copies


class TimedBridge(Bridge):
    """Records when owc's reader dispatched the event that made a run showable (its writer started)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.shown_at: dict[str, float] = {}

    def on_event(self, session, event) -> None:
        super().on_event(session, event)
        table = self.tables.get(session.id)
        if table is not None:
            for entry in table.entries.values():
                if entry.writer_started and entry.message_id not in self.shown_at:
                    self.shown_at[entry.message_id] = time.perf_counter()


async def drive(sim, keys: list[str], n_runs: int, deltas: int, tools: int) -> None:
    """Stream the runs, yielding to the event loop after every delta (as a live Gateway would pace them)."""
    every = max(1, deltas // max(1, tools))
    for r in range(n_runs):
        key = keys[r % len(keys)]
        run = sim.start_run(key, f"bench-{r}-{uuid.uuid4().hex[:6]}")
        call = 0
        for i in range(deltas):
            run.text(f"w{i} ", chunks=[f"w{i} "])
            await trio.sleep(0)
            if i % every == every - 1 and call < tools:
                call += 1
                run.tool("exec", {"n": call}, "ok")
        run.end()


async def owc_phase(args) -> dict:
    holds: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with open_simulator(token=TOKEN) as sim, open_store(f"sqlite:///{tmp}/bench.db", create=True) as store:
            store.sync.on_hold = lambda _chat, s: holds.append(s)
            keys = []
            for c in range(4):
                chat_id = str(uuid.uuid4())
                await store.create_chat(chat_id, USER)
                keys.append(ids.session_key("main", USER, chat_id))
            setup_tx = len(holds)
            emitter = TimedEmitter()
            bridge = TimedBridge(store, emitter, WriterRegistry())
            async with open_gateway_connection(sim.url, TOKEN, bridge) as client:
                await client.wait_connection()
                events_before = sum(c.seq for c in sim.conns.values())
                start = time.perf_counter()
                await drive(sim, keys, args.runs, args.deltas, args.tools)
                await bridge.until(lambda: bridge.totals()[1] >= args.runs)
                elapsed = time.perf_counter() - start
                events = sum(c.seq for c in sim.conns.values()) - events_before
            latencies = [(emitter.introduced[m] - t) * 1e3 for m, t in bridge.shown_at.items() if m in emitter.introduced]
            return {"elapsed": elapsed, "events": events, "tx_per_run": (len(holds) - setup_tx) / args.runs, "latencies": latencies, "claims": bridge.totals()}


async def bare_phase(args) -> dict:
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


async def main(args) -> None:
    owc = await owc_phase(args)
    bare = await bare_phase(args)
    o_rate, b_rate = owc["events"] / owc["elapsed"], bare["events"] / bare["elapsed"]
    print(f"{args.runs} runs x {args.deltas} deltas x {args.tools} tool calls; simulator, owc and SQLite in one process")
    print(f"owc end to end       {o_rate:>10,.0f} events/s  ({owc['events']} events in {owc['elapsed']:.2f} s)")
    print(f"bare receive loop    {b_rate:>10,.0f} events/s  ({bare['events']} events in {bare['elapsed']:.2f} s)")
    print(f"ratio owc/bare       {o_rate / b_rate:>10.2f}")
    print(f"DB transactions/run  {owc['tx_per_run']:>10.2f}  (claim + finalize = 2)")
    lat = owc["latencies"]
    print(f"first showable event dispatched -> chat:messages emitted: median {statistics.median(lat):.1f} ms, p99 {pct(lat, 0.99):.1f} ms ({len(lat)} runs)")
    print(f"claimed, finalized   {owc['claims']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--deltas", type=int, default=200)
    parser.add_argument("--tools", type=int, default=5)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    trio.run(main, args)
