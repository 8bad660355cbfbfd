"""Issues 16 and 32's bench: owc's throughput against the strongest simple readers and the transport's limit, its
cost per event over a long run, its database lock holds, whether it starves Open WebUI's own writers, and what
1,000 open runs cost. One command, one table (``--json FILE`` writes it too), a Goals block at the end (issue 32's
goals; printed, never asserted).

    python3 bench/throughput.py            # the full run (about 20 minutes on 2 busy cores)
    python3 bench/throughput.py --quick    # a smoke run, under a minute
    python3 bench/throughput.py --only reader,long --json out.json

How the figures are made honest (README.md in this folder says more):

* Frames are captured once, through owc itself, from the simulator (``workloads.capture``), then replayed from a
  separate process by a server that writes pre-encoded WebSocket frames straight to the socket
  (``replay.replay_server``); its own ceiling (a client that only counts bytes) is printed next to the readers.
* Every reader gets identical bytes: (a) a bare trio-websocket loop with default settings + ``orjson.loads``; (b)
  the same loop with the best ``receive_buffer_size`` / ``message_queue_size`` found by a sweep; (n) a naive loop
  on a raw socket that cuts the frames itself + ``orjson.loads`` (``baselines.py``; Trio socket or blocking socket
  in a thread, the faster); (w) asyncio ``websockets`` + ``orjson.loads`` (``baselines.py``); (c) owc's reader
  (``open_gateway_connection`` with a handler that counts); (d) owc end to end (``open_runtime``, SQLite in a temp
  dir, a counting emitter; and again with ``RecordingEmitter``). Interleaved, 5 repeats, min and median; the
  ratios issue 32 sets goals on (owc / (n), owc / (w)) are printed side by side from the same run.
* Cost per event over a long run is CPU time (``time.process_time``: every thread of this process, so owc's
  writer threads too) per tenth of the run, the replay pausing at each tenth until owc has read and written
  everything so far: no tenth is charged for work the reader or the writer carried over from another, and a
  loaded machine's waiting is not counted. Several rounds, min and median.
* Lock holds are timed from ``BEGIN IMMEDIATE`` / ``SELECT ... FOR UPDATE`` to the end of the commit, on the wire
  (``dbprobe.LockProbe``), whatever owc's store does inside. PostgreSQL runs durable (fsync, synchronous_commit and
  full_page_writes on, as users run it), checked with ``SHOW`` after it starts.
* The competing writer is a separate process saving the chat as Open WebUI does (``competing_writer``).
* The load average is printed before and after every section: on a shared machine it moves every figure.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import trio
import trio.lowlevel
import trio.testing
from baselines import loops_available, naive, receive_floor_paused, websockets_available, websockets_reader
from competing_writer import Save, competing_writer
from dbprobe import LockProbe, pct
from replay import Capture, cpu_count, encoded_size, replay_server, sink
from store_hold import chat_of
from trio_websocket import open_websocket_url
from workloads import TOKEN, USER, CountingEmitter, FinishingRecorder, capture, chat_ids, many, mix, session_key

import owc
from owc.gateway import open_gateway_connection
from owc.protocol.active import FINISHED_CAP
from owc.runs.ledger import SETTLED_MEMORY
from owc.runtime import RuntimeConfig, open_runtime
from owc.sim import open_simulator
from owc.store import make_engine, open_store
from owc.store.store import CHECKPOINT_BYTES

BENCH = Path(__file__).resolve().parent
#: No progress for this long (real seconds) and a measurement is reported failed instead of hanging the bench.
STALL_S = 60.0
#: Issue 32's goals (``Goals`` block): owc's reader against the naive raw loop (n) and asyncio websockets (w), owc
#: end to end against (n), last/first tenth's cost per event, lock hold p99 (ms), a competing writer's wait p99 (ms).
GOAL_READER_N, GOAL_READER_W, GOAL_E2E_N = 1.0, 1.0, 0.9
GOAL_TENTH, GOAL_HOLD_MS, GOAL_WAIT_MS = 1.3, 10.0, 100.0
#: PostgreSQL as users run it (its defaults), over tests/pgserver.py's throwaway settings (fsync off and the like).
PG_DURABLE = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "wal_level": "replica",
    "max_wal_senders": "10",
    "autovacuum": "on",
}
#: Every finalize writes the same output, so only the chat around it grows with the size.
FINAL_OUTPUT = [{"type": "message", "id": "msg_x", "content": [{"type": "output_text", "text": "final"}]}]


NAN = float("nan")


def log(text: str) -> None:
    """Progress on stderr, so stdout is the table alone."""
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def med(values: list[float]) -> float:
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


def low(values: list[float]) -> float:
    values = [v for v in values if v == v]
    return min(values) if values else float("nan")


def high(values: list[float]) -> float:
    values = [v for v in values if v == v]
    return max(values) if values else float("nan")


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages: printed around every section, since on a shared machine the load
    moves every figure (the ratios least)."""
    return [round(x, 2) for x in os.getloadavg()]


async def until_progress(
    wait: Callable[[Callable[[], bool]], Awaitable[None]],
    done: Callable[[], bool],
    progress: Callable[[], int],
    stall: float = STALL_S,
) -> bool:
    """``wait(done)``, unless nothing moves (``progress`` unchanged) for ``stall`` seconds: False then."""
    last = progress()
    while True:
        with trio.move_on_after(stall):
            await wait(done)
            return True
        now = progress()
        if now == last:
            return False
        last = now


# ============================================================================================== readers


async def read_bare(url: str, n: int, *, buffer: int = 4096, queue: int = 1) -> dict:
    """(a)/(b): a trio-websocket receive loop that only ``orjson.loads`` each message (the same handshake as owc's,
    so both pay it)."""
    start = time.perf_counter()
    async with open_websocket_url(url, receive_buffer_size=buffer, message_queue_size=queue) as ws:
        orjson.loads(await ws.get_message())  # connect.challenge
        await ws.send_message(orjson.dumps({"type": "req", "id": "c", "method": "connect", "params": {}}).decode())
        orjson.loads(await ws.get_message())  # hello-ok
        subscribe = {"type": "req", "id": "s", "method": "sessions.subscribe", "params": {"limit": 1000}}
        await ws.send_message(orjson.dumps(subscribe).decode())
        orjson.loads(await ws.get_message())  # the subscribe's reply
        count = 0
        with trio.move_on_after(STALL_S) as stalled:
            while count < n:
                orjson.loads(await ws.get_message())
                count += 1
        elapsed = time.perf_counter() - start
    if stalled.cancelled_caught:
        return {"rate": float("nan"), "error": f"stalled at {count}/{n} frames"}
    return {"rate": n / elapsed, "seconds": elapsed}


class _CountingRuns:
    """The connection view (owc.gateway's ``ConnectionRuns``) of (c): counts what the reader dispatches."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.count = 0
        self.gaps = 0
        self.at: float | None = None
        self.done = trio.Event()

    def on_event(self, event: Any) -> None:
        self.count += 1
        if self.count == self.target:
            self.at = time.perf_counter()
            self.done.set()

    def on_gap(self) -> None:
        self.gaps += 1

    async def on_hello(self, info: Any, resync: Any) -> None:
        return None

    async def on_resync(self, resync: Any) -> None:
        return None


class _CountingHandler:
    """owc.gateway's ``ConnectionHandler``: one counting view per connection."""

    def __init__(self, target: int) -> None:
        self.runs = _CountingRuns(target)

    @asynccontextmanager
    async def attach(self, conn: Any) -> AsyncIterator[_CountingRuns]:
        yield self.runs


async def read_owc(url: str, n: int) -> dict:
    """(c): owc's reader alone (``open_gateway_connection``: handshake, subscribe, decode, seq, typed payloads,
    dispatch) with a handler that only counts."""
    handler = _CountingHandler(n)
    start = time.perf_counter()
    async with open_gateway_connection(url, TOKEN, handler) as client:
        views = handler.runs
        ok = await until_progress(lambda _: views.done.wait(), views.done.is_set, lambda: views.count)
        opened = client.connections_opened
    if not ok or views.at is None:
        return {"rate": float("nan"), "error": f"stalled at {views.count}/{n} events"}
    out: dict[str, Any] = {"rate": n / (views.at - start), "seconds": views.at - start}
    if opened != 1 or views.gaps:
        out["note"] = f"{opened} connections, {views.gaps} gaps"
    return out


async def run_e2e(url: str, meta: dict, db_url: str, probe: LockProbe, *, recording: bool = False) -> dict:
    """(d): owc end to end (``open_runtime``: reader, run table, writers, SQLite) until every captured run's
    message is finished. Counts owc's lock-taking transactions in the window."""
    runs, n = meta["runs"], meta["frames"]
    async with open_store(db_url, create=True) as store:
        for chat in meta["chats"]:
            await store.create_chat(chat, USER)
        emitter: CountingEmitter | FinishingRecorder = FinishingRecorder() if recording else CountingEmitter()
        progress = (lambda: len(emitter.events)) if recording else (lambda: sum(emitter.types.values()))  # type: ignore[union-attr]
        gc.collect()
        window = time.monotonic()
        start = time.perf_counter()
        async with open_runtime(RuntimeConfig(url=url, token=TOKEN), store, emitter) as runtime:
            ok = await until_progress(emitter.until, lambda: len(emitter.finished) >= runs, progress)
            end = time.perf_counter()
            opened = runtime.client.connections_opened
        holds = probe.since(window)
    if not ok:
        return {"rate": float("nan"), "error": f"stalled: {len(emitter.finished)}/{runs} runs finished"}
    out: dict[str, Any] = {
        "rate": n / (end - start),
        "seconds": end - start,
        "transactions": len(holds),
        "tx_per_run": len(holds) / runs,
        "start": start,
    }
    if opened != 1:
        out["note"] = f"{opened} connections"
    return out


async def _best_of(tries: int, read: Callable[[], Awaitable[dict]]) -> float:
    """The best events/s of ``tries`` reads: the machine's noise only ever slows a read down."""
    best = float("nan")
    for _ in range(tries):
        gc.collect()
        rate = (await read())["rate"]
        best = rate if best != best or rate > best else best
    return best


def _fastest(sweep: list[dict]) -> dict:
    return max(sweep, key=lambda s: s["rate"] if s["rate"] == s["rate"] else 0)


#: The interleaved readers of section 1, in the order of the first repeat (each later repeat starts one further on).
READERS = ("a", "b", "n", "w", "c", "d", "d_rec")
#: The ratios issue 32 sets goals on: (numerator, denominator) reader keys.
RATIOS = (("c", "n"), ("c", "w"), ("d", "n"))


async def section_reader(base: str, meta: dict, probe: LockProbe, tmp: str, args: argparse.Namespace) -> dict:
    url, n = f"{base}/mix", meta["frames"]
    log(f"reader: replay server ceiling (raw sink), {n} frames")
    sinks = [await trio.to_thread.run_sync(sink, base, "mix", meta["encoded"]) for _ in range(3)]
    ceiling = n / min(sinks)
    tries = 1 if args.quick else 3
    grid = (
        [(4096, 1), (65536, 16), (262144, 64)]
        if args.quick
        else [(b, q) for b in (4096, 65536, 262144) for q in (1, 16, 64)]
    )
    log(f"reader: (b) sweep over {len(grid)} receive_buffer_size / message_queue_size pairs, best of {tries}")
    sweep = []
    for buffer, queue in grid:
        rate = await _best_of(tries, lambda b=buffer, q=queue: read_bare(url, n, buffer=b, queue=q))
        sweep.append({"buffer": buffer, "queue": queue, "rate": rate})
    best = _fastest(sweep)
    tuned = (best["buffer"], best["queue"])
    # (n): a Trio socket or a blocking socket in a worker thread, and how much each recv asks for: the faster.
    sizes = (262144,) if args.quick else (65536, 262144, 1048576)
    naive_grid = [(how, size) for how in ("trio", "thread") for size in sizes]
    log(f"reader: (n) sweep over {len(naive_grid)} socket / recv size pairs, best of {tries}")
    naive_sweep = []
    for how, size in naive_grid:
        rate = await _best_of(tries, lambda h=how, z=size: naive(url, n, h, z))
        naive_sweep.append({"how": how, "recv": size, "rate": rate})
    best_naive = _fastest(naive_sweep)
    # (w): asyncio's own loop or uvloop, and websockets' read-ahead queue: the faster.
    missing = websockets_available()
    ws_grid = [] if missing else [(loop, q) for loop in loops_available() for q in ((16,) if args.quick else (16, 128))]
    log(
        f"reader: (w) sweep over {len(ws_grid)} loop / max_queue pairs, best of {tries}"
        + (f": {missing}" * bool(missing))
    )
    ws_sweep = []
    for loop, queue in ws_grid:
        rate = await _best_of(tries, lambda lp=loop, q=queue: websockets_reader(url, n, lp, q))
        ws_sweep.append({"loop": loop, "queue": queue, "rate": rate})
    best_ws = _fastest(ws_sweep) if ws_sweep else None

    rows: dict[str, list[dict]] = {k: [] for k in READERS}
    count = 0

    async def one(kind: str) -> dict:
        nonlocal count
        gc.collect()
        count += 1
        if kind == "a":
            return await read_bare(url, n)
        if kind == "b":
            return await read_bare(url, n, buffer=tuned[0], queue=tuned[1])
        if kind == "n":
            return await naive(url, n, best_naive["how"], best_naive["recv"])
        if kind == "w":
            if best_ws is None:
                return {"rate": float("nan"), "error": missing}
            return await websockets_reader(url, n, best_ws["loop"], best_ws["queue"])
        if kind == "c":
            return await read_owc(url, n)
        db = f"sqlite:///{tmp}/e2e-{count}.db"
        return await run_e2e(url, meta, db, probe, recording=kind == "d_rec")

    order = list(rows)
    loads = []
    for repeat in range(args.repeats):
        loads.append(loadavg())
        log(f"reader: repeat {repeat + 1}/{args.repeats} ({', '.join(order)}, interleaved), load {loads[-1]}")
        for kind in order[repeat % len(order) :] + order[: repeat % len(order)]:
            rows[kind].append(await one(kind))
    rates = {k: [r["rate"] for r in v] for k, v in rows.items()}
    tx = [r["tx_per_run"] for r in rows["d"] + rows["d_rec"] if "tx_per_run" in r]
    notes = sorted({r.get("note") or r.get("error") for v in rows.values() for r in v} - {None})
    ratios = {}
    for top, bottom in RATIOS:
        # The headline is median over median; each repeat's own ratio (its readers ran back to back, under the
        # same load) shows how far the figure moves between repeats.
        paired = [t / b for t, b in zip(rates[top], rates[bottom]) if t == t and b == b and b > 0]
        ratios[f"{top}/{bottom}"] = {
            "median": med(rates[top]) / med(rates[bottom]) if med(rates[bottom]) > 0 else float("nan"),
            "round_min": low(paired),
            "round_median": med(paired),
            "rounds": paired,
        }
    return {
        "frames": n,
        "bytes": meta["bytes"],
        "describe": meta["describe"],
        "sink_seconds": sinks,
        "server_events_per_s": ceiling,
        "server_mb_per_s": meta["encoded"] / min(sinks) / 1e6,
        "sweep": sweep,
        "tuned": {"buffer": tuned[0], "queue": tuned[1]},
        "naive_sweep": naive_sweep,
        "naive": best_naive,
        "ws_sweep": ws_sweep,
        "ws": best_ws,
        "ws_missing": missing,
        "rates": rates,
        "min": {k: low(v) for k, v in rates.items()},
        "median": {k: med(v) for k, v in rates.items()},
        "max": {k: high(v) for k, v in rates.items()},
        "ratios": ratios,
        "round_loads": loads,
        "tx_per_run": tx,
        "notes": notes,
    }


# ============================================================================================== per tenth


def _clocks() -> tuple[float, float, float]:
    """(process CPU, this thread's CPU, wall) now. Process CPU counts every thread of the bench's process (owc's
    writer threads too) and none of the replay server's; it does not count time the machine gave to others."""
    return time.process_time(), time.thread_time(), time.perf_counter()


async def read_bare_paused(url: str, n: int, pauses: list[int]) -> dict:
    """(a) on a capture that pauses: at each pause point (a frame count) note the clocks and send
    ``bench.continue`` (its reply is read, not counted); the clocks once more after the n-th frame."""
    marks: list[tuple[float, float, float]] = []
    pending = list(pauses)
    start = time.perf_counter()
    async with open_websocket_url(url) as ws:
        orjson.loads(await ws.get_message())  # connect.challenge
        await ws.send_message(orjson.dumps({"type": "req", "id": "c", "method": "connect", "params": {}}).decode())
        orjson.loads(await ws.get_message())  # hello-ok
        subscribe = {"type": "req", "id": "s", "method": "sessions.subscribe", "params": {"limit": 1000}}
        await ws.send_message(orjson.dumps(subscribe).decode())
        orjson.loads(await ws.get_message())  # the subscribe's reply
        count = 0
        with trio.move_on_after(STALL_S) as stalled:
            while count < n:
                if pending and count == pending[0]:
                    marks.append(_clocks())
                    pending.pop(0)
                    resume = {"type": "req", "id": f"p{count}", "method": "bench.continue", "params": {}}
                    await ws.send_message(orjson.dumps(resume).decode())
                if orjson.loads(await ws.get_message()).get("type") != "res":
                    count += 1
            marks.append(_clocks())
        elapsed = time.perf_counter() - start
    if stalled.cancelled_caught:
        return {"rate": float("nan"), "error": f"stalled at {count}/{n} frames"}
    return {"rate": n / elapsed, "seconds": elapsed, "marks": marks}


class _TenthsEmitter(CountingEmitter):
    """The counting emitter, also counting the tool results the writer's live copy shows and waking waiters at
    every live-copy save (so the bench can wait for a tenth's last tool result to be written). Only the items new
    since the last save are looked at: the check costs the same in every tenth and does not bend the figure."""

    def __init__(self) -> None:
        super().__init__()
        self.results = 0
        self.saves = 0
        self._items = 0

    async def save_stream(self, chat_id: str, message_id: str, output: list[dict[str, Any]]) -> None:
        for item in output[self._items :]:
            self.results += item.get("type") == "function_call_output"
        self._items = len(output)
        self.saves += 1
        self._wake()


class _GcClock:
    """The collector's passes while installed in ``gc.callbacks``: generation, CPU seconds, and the stretch of the
    run it fell in. A full (generation 2) pass over owc's heap is tens of milliseconds, charged whole to whichever
    tenth it lands in: the table says where they landed, so a lumpy tenth can be told from a trend."""

    def __init__(self) -> None:
        self.passes: list[tuple[int, float, int]] = []
        self.stretch = 0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.passes.append((info["generation"], time.process_time() - self._started, self.stretch))


async def run_tenths(url: str, meta: dict, db_url: str, counts: list[int]) -> dict:
    """owc end to end on the paused long capture: before each pause the run's ``counts[k]``-th tool result is the last
    frame, so once the writer's live copy shows it (the writer has written everything up to the pause) and a round
    trip is back (the replay server answers it only from the pause: the reader has read it all), the stretch is
    done; the last one ends with ``runtime.settled()`` after the run is finished. The clocks there cut the run;
    ``bench.continue`` releases the next stretch. The first stretch (connect, up to the first tool result) is not
    a tenth, nor is the last (from the last tool result to the run settled: the final and the finalize)."""
    runs = meta["runs"]
    async with open_store(db_url, create=True) as store:
        for chat in meta["chats"]:
            await store.create_chat(chat, USER)
        emitter = _TenthsEmitter()
        progress = lambda: emitter.saves + sum(emitter.types.values())  # noqa: E731
        targets: list[Callable[[], bool]] = [lambda c=c: emitter.results >= c for c in counts]
        targets.append(lambda: len(emitter.finished) >= runs)
        marks: list[tuple[float, float, float]] = []
        gc.collect()
        collector = _GcClock()
        gc.callbacks.append(collector)
        start = time.perf_counter()
        try:
            async with open_runtime(RuntimeConfig(url=url, token=TOKEN), store, emitter) as runtime:
                for k, done in enumerate(targets):
                    collector.stretch = k
                    if k:
                        await runtime.client.request("bench.continue", {})
                    if not await until_progress(emitter.until, done, progress):
                        stalled = f"stalled in stretch {k}: {emitter.results} results shown"
                        return {"rate": float("nan"), "error": stalled}
                    if k < len(counts):
                        # Mid-run the run's writer is live, so ``settled`` would wait for the run's end: a round
                        # trip instead (its reply comes after the stretch's last frame, which the live copy already
                        # shows: that frame was in the last slice the server sent before the pause).
                        await runtime.client.request("sessions.list", {"limit": 1})
                    else:
                        await runtime.settled()
                    marks.append(_clocks())
                end = time.perf_counter()
                opened = runtime.client.connections_opened
        finally:
            gc.callbacks.remove(collector)
    out: dict[str, Any] = {"rate": meta["frames"] / (end - start), "seconds": end - start, "marks": marks}
    # The full collections inside the tenths (stretch k + 1 is tenth k), as (tenth, ms).
    out["gc_full"] = [(at - 1, sec * 1e3) for gen, sec, at in collector.passes if gen == 2 and 1 <= at <= 10]
    if opened != 1:
        out["note"] = f"{opened} connections"
    return out


def _per_event(marks: list[tuple[float, float, float]], bounds: list[int], clock: int) -> list[float]:
    """Microseconds per frame in each tenth, from the clocks noted at each bound."""
    return [(marks[k + 1][clock] - marks[k][clock]) / (bounds[k + 1] - bounds[k]) * 1e6 for k in range(10)]


def _ratio(row: list[float]) -> float:
    return row[-1] / row[0] if len(row) == 10 and row[0] > 0 else float("nan")


async def section_long(base: str, meta: dict, probe: LockProbe, tmp: str, args: argparse.Namespace) -> dict:
    """Cost per event in each tenth of one long run, end to end, as CPU time (the replay pauses at each tenth, see
    ``run_tenths``), with the default bare loop (a) on the same frames as the reference: the cumulative ``chat``
    snapshots make every reader's cost grow with the run, and that part is the input's."""
    url, n = f"{base}/long", meta["frames"]
    counts, bounds = meta.get("tenth_calls"), meta.get("pauses")
    if not counts or not bounds:
        return {"error": "the long run needs at least 11 tool calls"}
    # Tenth k: frames bounds[k] .. bounds[k + 1]. The end (the last tool result to the end of the stream: the final
    # and what follows it) is apart: finalizing is a cost per run, not per event, and would swell the last tenth.
    rows: dict[str, list[list[float]]] = {
        "e2e_cpu": [], "e2e_main": [], "e2e_wall": [], "bare_cpu": [], "floor_cpu": []
    }  # fmt: skip
    e2e_rates, bare_rates, notes = [], [], []
    finalize_ms: list[float] = []  # owc's CPU from the last tool result to the run settled
    gc_full: list[list[tuple[int, float]]] = []  # per round: the full collections in the tenths, (tenth, ms)
    paired: list[list[float]] = []  # per round with both: owc's CPU less the floor's, per tenth
    for repeat in range(args.long_repeats):
        log(f"long: repeat {repeat + 1}/{args.long_repeats} (bare loop, then owc end to end), load {loadavg()}")
        gc.collect()
        bare = await read_bare_paused(url, n, bounds)
        bare_rates.append(bare["rate"])
        if len(bare.get("marks", [])) == 12:
            rows["bare_cpu"].append(_per_event(bare["marks"], bounds, 0))
        else:
            notes.append(bare.get("error", "bare: marks missing"))
        floor = await receive_floor_paused(url, n, bounds, _clocks)
        floor_row = None
        if len(floor.get("marks", [])) == 12:
            floor_row = _per_event(floor["marks"], bounds, 0)
            rows["floor_cpu"].append(floor_row)
        else:
            notes.append(floor.get("error", "floor: marks missing"))
        e2e = await run_tenths(url, meta, f"sqlite:///{tmp}/long-{repeat}.db", counts)
        e2e_rates.append(e2e["rate"])
        if len(e2e.get("marks", [])) == 12:
            for key, clock in (("e2e_cpu", 0), ("e2e_main", 1), ("e2e_wall", 2)):
                rows[key].append(_per_event(e2e["marks"], bounds, clock))
            if floor_row is not None:  # a round's owc less the same round's floor: only rounds with both
                paired.append([e - f for e, f in zip(rows["e2e_cpu"][-1], floor_row, strict=True)])
            finalize_ms.append((e2e["marks"][11][0] - e2e["marks"][10][0]) * 1e3)
            gc_full.append(e2e["gc_full"])
        notes.extend(x for x in (e2e.get("error"), e2e.get("note")) if x)
    # Per tenth: the JSON parse alone (orjson.loads, the same frames) and the bytes per event; owc's cost beyond
    # the parse is what owc itself adds per event.
    decode, kb = [], []
    if meta.get("decode_s") and meta.get("frame_bytes"):
        for k in range(10):
            lo, hi = bounds[k], bounds[k + 1]
            decode.append(sum(meta["decode_s"][lo:hi]) / (hi - lo) * 1e6)
            kb.append(sum(meta["frame_bytes"][lo:hi]) / (hi - lo) / 1e3)
    out: dict[str, Any] = {
        "frames": n,
        "deltas": args.long_deltas,
        "bytes": meta["bytes"],
        "describe": meta["describe"],
        "rounds": len(rows["e2e_cpu"]),
        "notes": notes,
        "e2e_rate": med(e2e_rates),
        "bare_rate": med(bare_rates),
        "tenth_frames": [bounds[k + 1] - bounds[k] for k in range(10)],
        "end_frames": n - bounds[10],
        "finalize_ms": finalize_ms,
        "finalize_ms_min": low(finalize_ms),
        "finalize_ms_median": med(finalize_ms),
        "gc_full": gc_full,
    }
    for key, per_round in rows.items():
        median_row = [med([r[k] for r in per_round]) for k in range(10)] if per_round else []
        min_row = [low([r[k] for r in per_round]) for k in range(10)] if per_round else []
        round_ratios = [_ratio(r) for r in per_round]
        out[key] = {
            "per_round": per_round,
            "median": median_row,
            "min": min_row,
            "ratio": _ratio(median_row),  # last/first of the per-tenth medians: the goal's figure
            "ratio_min_row": _ratio(min_row),
            "round_ratios": round_ratios,
            "round_ratio_min": low(round_ratios),
            "round_ratio_median": med(round_ratios),
        }
    beyond = [e - d for e, d in zip(out["e2e_cpu"]["median"], decode)] if decode else []
    # What owc costs beyond the bytes' arrival, round by round (each round's floor ran just before its owc).
    above = [med([r[k] for r in paired]) for k in range(10)] if paired else []
    out["above_floor"] = {
        "median": above,
        "ratio": _ratio(above),
        "round_ratios": [_ratio(r) for r in paired],
        "round_ratio_min": low([_ratio(r) for r in paired]),
        "round_ratio_median": med([_ratio(r) for r in paired]),
    }
    for key, row in (("decode", decode), ("beyond", beyond), ("kb", kb)):
        out[key] = {"median": row, "ratio": _ratio(row)}
    return out


# ============================================================================================== 1,000 open runs


def _snapshot() -> tracemalloc.Snapshot:
    """What is traced now, less what the bench itself allocated (its emitter's sets and the like)."""
    gc.collect()
    return tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, str(BENCH / "*")), tracemalloc.Filter(False, tracemalloc.__file__)]
    )


def _traced(snapshot: tracemalloc.Snapshot) -> int:
    return sum(stat.size for stat in snapshot.statistics("filename"))


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def section_many(base: str, meta: dict, tmp: str, args: argparse.Namespace) -> dict:
    """``runs`` runs open at once on one replayed connection, twice (two batches on the same chats): nothing lost,
    memory per open run and per finished run, and whether finished runs keep costing memory."""
    url, runs = f"{base}/many", meta["runs"] // 2
    db_path = f"{tmp}/many.db"
    points: dict[str, dict[str, int]] = {}
    snapshots: dict[str, tracemalloc.Snapshot] = {}
    async with open_store(f"sqlite:///{db_path}", create=True) as store:
        for chat in meta["chats"]:
            await store.create_chat(chat, USER)
        emitter = CountingEmitter()
        progress = lambda: sum(emitter.types.values())  # noqa: E731
        gc.collect()
        tracemalloc.start()
        try:
            async with open_runtime(RuntimeConfig(url=url, token=TOKEN), store, emitter) as runtime:
                await runtime.connected()

                async def weigh(name: str) -> None:
                    await trio.testing.wait_all_tasks_blocked(cushion=0.05)
                    snapshots[name] = snap = _snapshot()
                    points[name] = {"traced": _traced(snap), "rss": _rss(), "ledger": len(runtime.ledger)}
                    log(f"many: {name}: {points[name]}")

                async def step(done: Callable[[], bool]) -> bool:
                    await runtime.client.request("bench.continue", {})
                    return await until_progress(emitter.until, done, progress)

                await weigh("start")
                ok = await step(lambda: len(emitter.introduced) >= runs)
                await weigh("batch 1 open")
                ok = ok and await step(lambda: len(emitter.finished) >= runs)
                await weigh("batch 1 finished")
                ok = ok and await step(lambda: len(emitter.introduced) >= 2 * runs)
                await weigh("batch 2 open")
                ok = ok and await step(lambda: len(emitter.finished) >= 2 * runs)
                await weigh("batch 2 finished")
                opened = runtime.client.connections_opened
        finally:
            tracemalloc.stop()
    with sqlite3.connect(db_path) as db:
        (in_db,) = db.execute("SELECT COUNT(*) FROM chat_message WHERE role = 'assistant' AND done = 1").fetchone()
    p = points
    kept_where: list[str] = []
    if "batch 1 finished" in snapshots and "batch 2 finished" in snapshots:
        # Where batch 2's finished runs left memory (the lines that allocated it), for the table's explanation.
        diff = snapshots["batch 2 finished"].compare_to(snapshots["batch 1 finished"], "lineno")
        for stat in diff[:8]:
            frame = stat.traceback[0]
            where = f"{Path(frame.filename).name}:{frame.lineno}"
            kept_where.append(f"{where} {stat.size_diff / runs:+.0f} B/run")
            log(f"many: kept by {where}: {stat.size_diff / runs:+.0f} B/run ({stat.count_diff:+d} blocks)")

    def per_run(a: str, b: str, key: str) -> float:
        return (p[b][key] - p[a][key]) / runs if a in p and b in p else float("nan")

    return {
        "runs": runs,
        "ok": ok,
        "connections": opened,
        "finished_emitted": len(emitter.finished),
        "finished_in_db": in_db,
        "expected": 2 * runs,
        "points": points,
        "open_entry_bytes": per_run("start", "batch 1 open", "traced"),
        "open_entry_rss": per_run("start", "batch 1 open", "rss"),
        "finished_bytes_1": per_run("start", "batch 1 finished", "traced"),
        "finished_bytes_2": per_run("batch 1 finished", "batch 2 finished", "traced"),
        "finished_rss_2": per_run("batch 1 finished", "batch 2 finished", "rss"),
        "open_entry_bytes_2": per_run("batch 1 finished", "batch 2 open", "traced"),
        "kept_where": kept_where,
    }


# ============================================================================================== lock holds


async def holds_on(url: str, sizes: list[int], reps: int, probe: LockProbe) -> list[dict]:
    """Claim, then finalize, ``reps`` messages one after another in a chat of each size, through owc's store as
    the runtime opens it (``open_store``)."""
    rows = []
    async with open_store(url, create=True) as store:
        for size in sizes:
            chat_id = f"hold-{size}-{uuid.uuid4().hex[:8]}"
            await store.create_chat(chat_id, "u", chat=chat_of(size, chat_id))
            for op in ("claim", "finalize"):
                before = await trio.to_thread.run_sync(chat_text, url, chat_id)
                since = time.monotonic()
                for r in range(reps):
                    mid = f"owc-{r}"
                    if op == "claim":
                        await store.claim(
                            chat_id, mid, run_id=f"run-{r}", writer="bench", alive=lambda w: True, user_id="u"
                        )
                    else:
                        await store.write(chat_id, mid, content="final text " * 50, output=FINAL_OUTPUT, done=True)
                ms = [h.seconds * 1e3 for h in probe.since(since)]
                after = await trio.to_thread.run_sync(chat_text, url, chat_id)
                floor = await trio.to_thread.run_sync(bare_rewrites, url, chat_id, (before, after), reps)
                rows.append(
                    {
                        "messages": size, "op": op, "n": len(ms), "p50": med(ms), "p99": pct(ms, 0.99), "max": max(ms),
                        "floor_p50": med(floor), "floor_p99": pct(floor, 0.99),
                    }
                )  # fmt: skip
                log(
                    f"holds: {url.split(':')[0]} {size} messages {op}: p99 {rows[-1]['p99']:.1f} ms ({len(ms)} holds);"
                    f" floor p99 {rows[-1]['floor_p99']:.1f} ms"
                )
    return rows


def chat_text(url: str, chat_id: str) -> str:
    """The chat's JSON as stored, read on a driver connection of its own."""
    engine = make_engine(url)
    try:
        raw = engine.raw_connection()
        try:
            cur = raw.cursor()
            sqlite = engine.dialect.name == "sqlite"
            cur.execute(("SELECT CAST(chat AS TEXT) FROM chat WHERE id = ?" if sqlite else
                         "SELECT chat::text FROM chat WHERE id = %s"), (chat_id,))  # fmt: skip
            text = cur.fetchone()[0]
            raw.commit()
            return text
        finally:
            raw.close()
    finally:
        engine.dispose()


def bare_rewrites(url: str, chat_id: str, texts: tuple[str, str], reps: int) -> list[float]:
    """The floor under any hold on this chat: ``reps`` writes of a chat's whole JSON by one bare statement, on a
    driver connection with owc's session settings (``make_engine``: lz4 on PostgreSQL, the pragmas on SQLite) and
    nothing else: no read, no mirror, no Python between lock and commit. Open WebUI keeps a chat in one JSON value,
    so every write of one message rewrites all of it; this is what that costs any writer.

    ``texts``: the chat as it stood when owc's writes of the figure began and as they left it, written in turn (the
    floor's chat is the size of owc's, on average, and each write differs from the stored value: SQLite does not
    rewrite an identical one). Timed as the probe times owc's holds (ms): SQLite from ``BEGIN IMMEDIATE`` returning
    to the end of the commit; PostgreSQL one statement in autocommit (owc's write of one message), from its sending
    to its reply. SQLite's WAL is checkpointed every ``CHECKPOINT_BYTES`` of writes, outside the timing, as owc's
    store does (else the floor runs through a WAL of hundreds of MB), and truncated after, so owc's next figures do
    not read through it."""
    engine = make_engine(url)
    raw = engine.raw_connection()
    try:
        sqlite = engine.dialect.name == "sqlite"
        if not sqlite:
            raw.rollback()
            raw.driver_connection.autocommit = True
        cur = raw.cursor()
        write = "UPDATE chat SET chat = ?, updated_at = ? WHERE id = ?" if sqlite else (
            "UPDATE chat SET chat = %s::json, updated_at = %s WHERE id = %s"
        )  # fmt: skip
        out, grown = [], 0
        for i in range(reps):
            text = texts[1] if (reps - i) % 2 == 1 else texts[0]  # the last write leaves the chat as owc did
            if sqlite:
                cur.execute("BEGIN IMMEDIATE")
                started = time.perf_counter()
                cur.execute(write, (text, int(time.time()) + i, chat_id))
                raw.commit()
            else:
                started = time.perf_counter()
                cur.execute(write, (text, int(time.time()) + i, chat_id))
            out.append((time.perf_counter() - started) * 1e3)
            grown += len(text)
            if sqlite and grown >= CHECKPOINT_BYTES:
                grown = 0
                cur.execute("PRAGMA wal_checkpoint(PASSIVE)")
                cur.fetchall()
                raw.commit()
        if sqlite:
            busy = cur.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            raw.commit()
            if busy:
                log("holds: the floor's WAL was not truncated (busy): owc's next figures read through it")
        return out
    finally:
        if not sqlite:
            raw.driver_connection.autocommit = False
        raw.close()
        engine.dispose()


def _filesystem(path: str) -> str:
    """The file system type under ``path`` (the longest mount point above it in /proc/mounts): fsync on tmpfs costs
    nothing, on a disk it is the point."""
    real, best, kind = os.path.realpath(path), "", "?"
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                fields = line.split()
                point = fields[1]
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if len(fields) > 2 and inside and len(point) > len(best):
                    best, kind = point, fields[2]
    except OSError:
        pass
    return kind


def start_durable_postgres() -> tuple[Any, dict[str, str]]:
    """A throwaway cluster the way tests/pgserver.py starts one, but durable as users run PostgreSQL: its defaults
    for ``PG_DURABLE`` over the test settings (fsync off, synchronous_commit off, full_page_writes off, wal_level
    minimal, no autovacuum), which would flatter every commit. The settings are read back with ``SHOW``, so the
    table says what the server ran with, not what was asked."""
    sys.path.insert(0, str(BENCH.parent / "tests"))
    import psycopg

    import pgserver

    settings = getattr(pgserver, "_SETTINGS", None)
    if not isinstance(settings, dict) or "fsync" not in settings:
        raise RuntimeError("tests/pgserver.py no longer has the _SETTINGS the bench overrides for durability")
    pgserver._SETTINGS = {**settings, **PG_DURABLE}
    try:
        server = pgserver.start_postgres()
    finally:
        pgserver._SETTINGS = settings
    try:
        with psycopg.connect(server.url.replace("postgresql+psycopg://", "postgresql://")) as conn:
            shown = {name: str(conn.execute(f"SHOW {name}").fetchone()[0]) for name in PG_DURABLE}  # type: ignore[index]
            shown["data"] = _filesystem(str(server.datadir.parent))
            shown["version"] = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
    except BaseException:
        server.stop()
        raise
    return server, shown


async def section_holds(tmp: str, probe: LockProbe, args: argparse.Namespace) -> dict:
    sizes = [int(s) for s in args.hold_sizes.split(",")]
    out: dict[str, Any] = {"sizes": sizes, "reps": args.hold_reps, "sqlite_fs": _filesystem(tmp)}
    out["sqlite"] = await holds_on(f"sqlite:///{tmp}/holds.db", sizes, args.hold_reps, probe)
    if args.no_postgres:
        out["postgresql"] = "skipped: --no-postgres"
        return out
    try:
        server, out["pg_settings"] = await trio.to_thread.run_sync(start_durable_postgres)
    except Exception as exc:
        out["postgresql"] = f"skipped: {type(exc).__name__}: {str(exc)[:200]}"
        return out
    try:
        if any(out["pg_settings"].get(k) != v for k, v in PG_DURABLE.items() if k != "max_wal_senders"):
            out["pg_warning"] = "PostgreSQL did not take the durable settings (see the settings line)"
        out["postgresql"] = await holds_on(server.url, sizes, args.hold_reps, probe)
    finally:
        await trio.to_thread.run_sync(server.stop)
    return out


# ============================================================================================== competing writer


def _window(saves: list[Save], holds: list[Any], start: float, end: float) -> dict:
    inside = [s for s in saves if start <= s.start <= end]
    waits = [s.wait * 1e3 for s in inside]
    owc = [h.seconds * 1e3 for h in holds if start <= h.start <= end]
    return {
        "seconds": end - start,
        "saves": len(inside),
        "gave_up": sum(s.gave_up for s in inside),
        "wait_p50": med(waits),
        "wait_p99": pct(waits, 0.99),
        "wait_max": max(waits) if waits else float("nan"),
        "probe_hold_p50": med([s.hold * 1e3 for s in inside if not s.gave_up]),
        "owc_tx": len(owc),
        "owc_wait_p99": pct([h.wait * 1e3 for h in holds if start <= h.start <= end], 0.99),
        "owc_hold_p99": pct(owc, 0.99),
        "owc_hold_max": max(owc) if owc else float("nan"),
    }


async def section_competing(tmp: str, probe: LockProbe, args: argparse.Namespace) -> dict:
    """owc claims ``burst_runs`` runs on one ``burst_messages``-message chat (each on its own agent's session key, all
    open at once once claimed), then all of them end at once: a burst of finalizes. A separate process saves the same
    chat the whole time, like Open WebUI. The runs start one after another by default (``--burst-start``): started
    together, a thousand claims queue on one chat and the claim window alone takes ~10 minutes."""
    db_path = f"{tmp}/compete.db"
    runs = args.burst_runs
    (chat_id,) = chat_ids("compete", 1)
    keys = [session_key(chat_id, agent=f"a{i:04d}") for i in range(runs)]
    windows: dict[str, tuple[float, float]] = {}
    async with open_simulator(token=TOKEN) as sim, open_store(f"sqlite:///{db_path}", create=True) as store:
        log(f"competing: a {args.burst_messages}-message chat")
        await store.create_chat(chat_id, USER, chat=chat_of(args.burst_messages, chat_id))
        emitter = CountingEmitter()
        progress = lambda: sum(emitter.types.values())  # noqa: E731
        async with open_runtime(RuntimeConfig(url=sim.url, token=TOKEN), store, emitter) as runtime:
            await runtime.settled()
            with competing_writer(db_path, chat_id, pause=args.probe_pause_ms / 1000) as saves:
                start = time.monotonic()
                await trio.sleep(3 if not args.quick else 1)
                windows["owc idle"] = (start, time.monotonic())
                log(f"competing: {runs} runs start and claim ({args.burst_start})")
                start = time.monotonic()
                handles, ok = [], True
                for i, key in enumerate(keys):
                    handles.append(sim.start_run(key, f"burst-{i}").text("Working on it. ", chunks=["Working on it. "]))
                    if args.burst_start == "staggered":  # the next run starts once this one has its message
                        ok = ok and await until_progress(
                            emitter.until, lambda i=i: len(emitter.introduced) > i, progress
                        )
                    elif i % 50 == 49:
                        await trio.lowlevel.checkpoint()
                ok = ok and await until_progress(emitter.until, lambda: len(emitter.introduced) >= runs, progress)
                how = "one after another" if args.burst_start == "staggered" else "started together"
                windows[f"owc claims {runs} runs ({how})"] = (start, time.monotonic())
                log(f"competing: {len(emitter.introduced)} claimed; all {runs} end at once")
                start = time.monotonic()
                for handle in handles:
                    handle.text("Done.", chunks=["Done."]).end()
                ok = ok and await until_progress(emitter.until, lambda: len(emitter.finished) >= runs, progress)
                windows[f"owc finalizes {runs} runs (burst)"] = (start, time.monotonic())
                log(f"competing: {len(emitter.finished)} finalized")
        holds = probe.since(windows["owc idle"][0])
    return {
        "messages": args.burst_messages,
        "runs": runs,
        "pause_ms": args.probe_pause_ms,
        "ok": ok,
        "claimed": len(emitter.introduced),
        "finalized": len(emitter.finished),
        "windows": {name: _window(saves, holds, a, b) for name, (a, b) in windows.items()},
    }


# ============================================================================================== virtual seconds


def section_virtual(tmp: str, probe: LockProbe, turns: int) -> dict:
    """Agent turns (text, a tool call, text, end) through the simulator and owc under Trio's ``MockClock``: a turn
    that waits on any timer of owc's shows as virtual seconds (the clock jumps after 1 s of real idleness)."""

    async def main() -> dict:
        async with open_simulator(token=TOKEN) as sim, open_store(f"sqlite:///{tmp}/virtual.db", create=True) as store:
            (chat_id,) = chat_ids("virtual", 1)
            await store.create_chat(chat_id, USER)
            emitter = CountingEmitter()
            async with open_runtime(RuntimeConfig(url=sim.url, token=TOKEN), store, emitter) as runtime:
                await runtime.settled()
                per_turn, since = [], time.monotonic()
                with trio.move_on_after(3600) as guard:  # virtual: only a regression that waits for good gets here
                    for i in range(turns):
                        start = trio.current_time()
                        run = sim.start_run(session_key(chat_id), f"virtual-{i}", user_text="Check the disks")
                        run.text("Checking the disks.").tool("exec", {"cmd": "df -h"}, "/dev/vda 252G")
                        run.text("All disks are fine.").end()
                        await emitter.until(lambda i=i: len(emitter.finished) >= i + 1)
                        await runtime.settled()
                        per_turn.append(trio.current_time() - start)
                holds = probe.since(since)
        return {
            "turns": len(per_turn),
            "per_turn": per_turn,
            "mean": sum(per_turn) / len(per_turn) if per_turn else float("nan"),
            "tx_per_run": len(holds) / max(1, len(per_turn)),
            "timed_out": guard.cancelled_caught,
        }

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=1.0))


# ============================================================================================== printing


def fmt(x: float, spec: str = ",.0f") -> str:
    return "n/a" if x != x else format(x, spec)


def load_line(x: dict) -> str:
    """A section's load average before and after it (1, 5, 15 minutes)."""
    load = x.get("load") or {}
    show = lambda v: " ".join(f"{a:.2f}" for a in v) if v else "?"  # noqa: E731
    return f"   load average before {show(load.get('before'))}, after {show(load.get('after'))}"


#: Section 1's row labels (the tuned ones get their settings added).
READER_NAMES = {
    "a": "(a) bare trio-websocket, defaults (4 KiB, queue 1)",
    "b": "(b) bare trio-websocket, tuned",
    "n": "(n) naive raw socket + orjson",
    "w": "(w) asyncio websockets + orjson",
    "c": "(c) owc reader (GatewayClient, counting handler)",
    "d": "(d) owc end to end, SQLite, counting emitter",
    "d_rec": "(d) owc end to end, SQLite, RecordingEmitter",
}
RATIO_NAMES = {"c/n": "owc reader / (n)", "c/w": "owc reader / (w)", "d/n": "owc end to end / (n)"}


def render(r: dict) -> str:
    out: list[str] = []
    w = out.append
    env = r["env"]
    w(f"owc throughput bench ({env['mode']}), owc {env['commit']}, Python {env['python']}, {env['cpus']} CPUs")
    w(f"load before: {env['uptime_before']}")
    w(f"load after:  {env.get('uptime_after', '?')}   wall time {env.get('wall_s', 0):.0f} s")
    w(
        "PostgreSQL runs durable (fsync, synchronous_commit, full_page_writes on, wal_level replica: its defaults,"
        " as users run it); CPU figures are time.process_time"
    )
    if "reader" in r:
        x = r["reader"]
        w("")
        w(f"1. Same frames, replayed from a separate process: {x['describe']}")
        w(f"   = {x['frames']:,} event frames, {x['bytes'] / 1e6:.1f} MB; {len(x['rates']['a'])} repeats, interleaved")
        w(load_line(x) + "; per repeat: " + ", ".join(f"{v[0]:.2f}" for v in x.get("round_loads", [])))
        med_of = x["median"]
        fastest = max(v for v in med_of.values() if v == v)
        w(
            f"   replay server -> raw sink  {fmt(x['server_events_per_s']):>12} events/s"
            f" ({x['server_mb_per_s']:,.0f} MB/s): {x['server_events_per_s'] / fastest:.0f}x the fastest reader below"
        )
        names = dict(READER_NAMES)
        tuned, nv, ws = x["tuned"], x.get("naive") or {}, x.get("ws")
        names["b"] += f" ({tuned['buffer'] // 1024} KiB, queue {tuned['queue']})"
        if nv:
            names["n"] += f" ({nv['how']}, {nv['recv'] // 1024} KiB recv)"
        names["w"] += f" ({ws['loop']}, max_queue {ws['queue']})" if ws else " (not installed)"
        bases = {k: med_of.get(k, float("nan")) for k in ("a", "b", "n", "w")}
        w(f"   {'path':<58} {'min ev/s':>9} {'median':>9} {'max':>9}" + "".join(f" {'/(' + k + ')':>6}" for k in bases))
        for k, name in names.items():
            m = med_of.get(k, float("nan"))
            cells = "".join(f" {fmt(m / v if v > 0 else float('nan'), '.2f'):>6}" for v in bases.values())
            w(f"   {name:<58} {fmt(x['min'][k]):>9} {fmt(m):>9} {fmt(x['max'][k]):>9}{cells}")
        w("   issue 32's ratios, side by side from this run (median over median; each repeat's own ratio min/median):")
        for key, label in RATIO_NAMES.items():
            ratio = x["ratios"][key]
            w(
                f"     {label:<24} {fmt(ratio['median'], '.2f'):>6}   (repeats {fmt(ratio['round_min'], '.2f')}"
                f" / {fmt(ratio['round_median'], '.2f')})"
            )
        sweep = "  ".join(f"{s['buffer'] // 1024}K/{s['queue']}:{fmt(s['rate'] / 1000, '.1f')}k" for s in x["sweep"])
        w(f"   (b) sweep, receive_buffer_size/message_queue_size, best events/s of a few reads: {sweep}")
        sweep = "  ".join(f"{s['how']}/{s['recv'] // 1024}K:{fmt(s['rate'] / 1000, '.1f')}k" for s in x["naive_sweep"])
        w(f"   (n) sweep, socket/recv size: {sweep}")
        if x.get("ws_sweep"):
            sweep = "  ".join(f"{s['loop']}/{s['queue']}:{fmt(s['rate'] / 1000, '.1f')}k" for s in x["ws_sweep"])
            w(f"   (w) sweep, loop/max_queue: {sweep}")
        elif x.get("ws_missing"):
            w(f"   (w) {x['ws_missing']}")
        if x["notes"]:
            w(f"   notes: {'; '.join(x['notes'])}")
        if r.get("replay_stats"):
            w(f"   replay server answers: {r['replay_stats']}")
    if "holds" in r:
        x = r["holds"]
        w("")
        w(f"2. Lock hold, BEGIN IMMEDIATE / SELECT ... FOR UPDATE -> commit, ms ({x['reps']} repetitions each)")
        w(load_line(x))
        pg = x.get("pg_settings")
        if pg:
            w(
                f"   PostgreSQL {pg.get('version', '?')}, durable: "
                + ", ".join(f"{k}={v}" for k, v in pg.items() if k not in ("version", "data"))
                + f"; data on {pg.get('data', '?')}"
            )
        if x.get("pg_warning"):
            w(f"   WARNING: {x['pg_warning']}")
        w(f"   SQLite: owc's own pragmas; database on {x.get('sqlite_fs', '?')}")
        w(
            f"   {'backend':<11} {'messages':>8} {'claim p50':>10} {'claim p99':>10}"
            f" {'fin. p50':>9} {'fin. p99':>9} {'fin. max':>9} {'floor p50':>10} {'floor p99':>10}"
        )
        for backend in ("sqlite", "postgresql"):
            rows = x.get(backend)
            if isinstance(rows, str):
                w(f"   {backend:<11} {rows}")
                continue
            for size in x["sizes"]:
                c = next(row for row in rows if row["messages"] == size and row["op"] == "claim")
                f = next(row for row in rows if row["messages"] == size and row["op"] == "finalize")
                w(
                    f"   {backend:<11} {size:>8,} {c['p50']:>10.1f} {c['p99']:>10.1f} {f['p50']:>9.1f} {f['p99']:>9.1f}"
                    f" {f['max']:>9.1f} {f.get('floor_p50', NAN):>10.1f} {f.get('floor_p99', NAN):>10.1f}"
                )
        w(
            "   floor: the chat's JSON (as owc's writes found it and as they left it, in turn) written whole by one"
            " bare UPDATE, nothing else in the transaction (bare_rewrites): what Open WebUI's one-JSON-per-chat schema"
            " costs any writer"
        )
    if "competing" in r:
        x = r["competing"]
        w("")
        w(
            f"3. Competing writer: a separate process saving the chat like Open WebUI (BEGIN IMMEDIATE, read, write,"
            f" commit; busy timeout 5 s; {x['pause_ms']} ms between saves) on a {x['messages']:,}-message chat"
        )
        w(load_line(x))
        w(f"   owc claimed {x['claimed']}/{x['runs']}, finalized {x['finalized']}/{x['runs']}")
        w(
            f"   {'window':<42} {'s':>6} {'saves':>6} {'wait p50':>9} {'p99':>8} {'max':>8} {'give-ups':>8}"
            f" {'owc tx':>7} {'owc hold p99':>12} {'max':>8}"
        )
        for name, v in x["windows"].items():
            w(
                f"   {name:<42} {v['seconds']:>6.1f} {v['saves']:>6} {fmt(v['wait_p50'], '.1f'):>9}"
                f" {fmt(v['wait_p99'], '.1f'):>8} {fmt(v['wait_max'], '.1f'):>8} {v['gave_up']:>8} {v['owc_tx']:>7}"
                f" {fmt(v['owc_hold_p99'], '.1f'):>12} {fmt(v['owc_hold_max'], '.1f'):>8}"
            )
        w("   (waits and holds in ms; the probe's own save holds the lock "
          f"{fmt(med([v['probe_hold_p50'] for v in x['windows'].values()]), '.0f')} ms at the median)")  # fmt: skip
    if "long" in r:
        x = r["long"]
        w("")
        if "error" in x:
            w(f"4. Cost per event by tenth of one long run: {x['error']}")
        else:
            w(
                f"4. Cost per event by tenth of one long run: {x['describe']}"
                f" = {x['frames']:,} frames, {x['bytes'] / 1e6:.0f} MB; {x['rounds']} rounds"
            )
            w(load_line(x))
            w(
                f"   {'us/event':<30}"
                + "".join(f"{k:>7}" for k in range(1, 11))
                + f"{'last/first':>11}{'rounds min/med':>16}{'events/s':>10}"
            )
            for name, key, stat, rate in (
                ("owc end to end, CPU, median", "e2e_cpu", "median", "e2e_rate"),
                ("owc end to end, CPU, min", "e2e_cpu", "min", None),
                ("owc main thread CPU, median", "e2e_main", "median", None),
                ("owc end to end, wall, median", "e2e_wall", "median", None),
                ("bare loop (a), CPU, median", "bare_cpu", "median", "bare_rate"),
                ("receive floor, CPU, median", "floor_cpu", "median", None),
                ("owc above the floor, median", "above_floor", "median", None),
                ("JSON parse alone", "decode", "median", None),
                ("owc CPU beyond the parse", "beyond", "median", None),
                ("KB per event (not us)", "kb", "median", None),
            ):
                row = x[key][stat]
                spec = ">7.1f" if key == "kb" else ">7.0f"
                cells = "".join(f"{v:{spec}}" for v in row) if row else "  n/a".ljust(70)
                ratio = _ratio(row)
                rounds = (
                    f"{fmt(x[key]['round_ratio_min'], '.2f')}/{fmt(x[key]['round_ratio_median'], '.2f')}"
                    if stat == "median" and "round_ratios" in x[key]
                    else ""
                )
                w(f"   {name:<30}{cells}{fmt(ratio, '.2f'):>11}{rounds:>16}{fmt(x[rate]) if rate else '':>10}")
            last = x["tenth_frames"][-1] if x.get("tenth_frames") else 0
            w(
                f"   the run's end apart ({x['end_frames']} frames from the last tool result: the final, the finalize):"
                f" owc CPU {fmt(x['finalize_ms_min'], '.1f')} / {fmt(x['finalize_ms_median'], '.1f')} ms min/median;"
                f" charged to the last tenth it would add {fmt(x['finalize_ms_median'] * 1e3 / max(1, last), '.0f')}"
                " us/event"
            )
            if "gc_full" in x:
                passes = [p for round_ in x["gc_full"] for p in round_]
                where = (
                    f": {fmt(med([ms for _, ms in passes]), '.0f')} ms CPU each (median), in tenths "
                    + ", ".join(str(t + 1) for t, _ in passes)
                    + " (each charged whole to its tenth)"
                    if passes
                    else ""
                )
                w(
                    f"   full garbage collections inside owc's tenths: {len(passes)}"
                    f" in {len(x['gc_full'])} rounds{where}"
                )
            w("   (CPU: time.process_time, all of the bench process's threads; the replay pauses at each cut until owc")
            w("    has read and written it all; cuts at the first tool result, every tenth of them and the last one.")
            w("    Each chat delta carries the whole message so far, as the Gateway sends it: the bare loop's and the")
            w("    parse's growth is the input's own)")
            if x["notes"]:
                w(f"   notes: {'; '.join(x['notes'])}")
    if "many" in r:
        x = r["many"]
        w("")
        w(f"5. {x['runs']:,} runs open at once on one replayed connection, two batches on the same chats")
        w(load_line(x))
        w(
            f"   finished: {x['finished_emitted']}/{x['expected']} told to the tabs,"
            f" {x['finished_in_db']}/{x['expected']} done in the database; {x['connections']} connection(s)"
        )
        w(
            f"   memory per open run entry: {fmt(x['open_entry_bytes'])} B traced"
            f" (batch 2: {fmt(x['open_entry_bytes_2'])} B), {fmt(x['open_entry_rss'])} B RSS"
        )
        w(
            f"   memory kept per finished run: batch 1 {fmt(x['finished_bytes_1'])} B,"
            f" batch 2 {fmt(x['finished_bytes_2'])} B traced ({fmt(x['finished_rss_2'])} B RSS)"
            + "".join(f"\n      kept by {where}" for where in x.get("kept_where", [])[:5])
        )
        ledger = ", ".join(f"{k} {v['ledger']}" for k, v in x["points"].items())
        w(f"   open run entries (len(runtime.ledger)): {ledger}")
        w("   finished-run set: its size is not public (memory above is the measure)")
    w("")
    w("6. Invariants")
    tx = r.get("reader", {}).get("tx_per_run", [])
    if tx:
        w(f"   DB transactions per run (lock-taking, end to end on the mix): {min(tx):.2f}-{max(tx):.2f}")
    if "virtual" in r:
        v = r["virtual"]
        w(
            f"   virtual seconds per turn (MockClock, {v['turns']} agent turns): {fmt(v['mean'], '.3f')}"
            f" (transactions per run there: {v['tx_per_run']:.2f})"
        )
    w("")
    w("Goals (issue 32; printed, never asserted)")
    for name, value, verdict in goals(r):
        w(f"   {name:<72} {value:>30}  {verdict}")
    return "\n".join(out)


def goals(r: dict) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []

    def line(name: str, value: float | None, ok: bool | None, shown: str | None = None) -> None:
        if value is None or value != value:
            out.append((name, shown or "not measured", "n/a"))
        else:
            out.append((name, shown or f"{value:.2f}", "PASS" if ok else "FAIL"))

    x = r.get("reader")
    for key, goal in (("c/n", GOAL_READER_N), ("c/w", GOAL_READER_W), ("d/n", GOAL_E2E_N)):
        name = f"{RATIO_NAMES[key]} >= {goal:.2f} (median over median)"
        ratio = x["ratios"][key] if x else None
        if ratio is None:
            line(name, None, None)
        else:
            shown = f"{fmt(ratio['median'], '.2f')} (repeats {fmt(ratio['round_min'], '.2f')}-" + (
                f"{fmt(max(ratio['rounds']), '.2f')})" if ratio["rounds"] else "n/a)"
            )
            line(name, ratio["median"], ratio["median"] >= goal, shown)
    x = r.get("long")
    if x and "e2e_cpu" in x:
        cpu = x["e2e_cpu"]
        size = f"{x['deltas']:,} deltas" + ("" if x["deltas"] == 10_000 else "; the goal: 10,000")
        line(
            f"per-tenth CPU last/first <= {GOAL_TENTH}, end to end ({size})",
            cpu["ratio"],
            cpu["ratio"] <= GOAL_TENTH,
            f"{fmt(cpu['ratio'], '.2f')} (min row {fmt(cpu['ratio_min_row'], '.2f')},"
            f" rounds {fmt(cpu['round_ratio_min'], '.2f')}-{fmt(high(cpu['round_ratios']), '.2f')})",
        )
    else:
        line(f"per-tenth CPU last/first <= {GOAL_TENTH}, end to end (10,000 deltas)", None, None)
    x = r.get("holds")
    for backend, label in (("sqlite", "SQLite"), ("postgresql", "PostgreSQL, durable")):
        rows = x.get(backend) if x else None
        for op in ("claim", "finalize"):
            name = f"{op} hold p99 < {GOAL_HOLD_MS:.0f} ms at 1,000 messages, idle loop, {label}"
            row = (
                next((w for w in rows if w["messages"] == 1000 and w["op"] == op), None)
                if isinstance(rows, list)
                else None
            )
            if row is None:
                out.append((name, rows[:30] if isinstance(rows, str) and rows else "not measured", "n/a"))
            else:
                floor = row.get("floor_p99")
                shown = f"{row['p99']:.1f} ms" + (f" (bare rewrite p99 {floor:.1f} ms)" if floor is not None else "")
                line(name, row["p99"], row["p99"] < GOAL_HOLD_MS, shown)
    for name, where in (
        ("hold p99 < 10 ms at 1,000 messages while 100 runs stream", "holds_contended.py"),
        ("hold p99 < 10 ms with an Open WebUI writer saving every 2 ms", "holds_contended.py"),
        ("event -> tab p99 < 10 ms, 100 runs at the Gateway's pace", "paced.py"),
    ):
        out.append((name, f"measured by bench/{where}", "n/a"))  # its own process and minutes: run it apart
    x = r.get("competing")
    if x:
        burst = next(v for k, v in x["windows"].items() if "burst" in k)
        ok = burst["gave_up"] == 0 and burst["wait_p99"] < GOAL_WAIT_MS
        shown = f"{burst['gave_up']} give-ups, p99 {fmt(burst['wait_p99'], '.0f')} ms ({x['runs']:,} runs)"
        line(f"competing writer: 0 give-ups, wait p99 < {GOAL_WAIT_MS:.0f} ms (finalize burst)", 0.0, ok, shown)
    else:
        line(f"competing writer: 0 give-ups, wait p99 < {GOAL_WAIT_MS:.0f} ms (finalize burst)", None, None)
    x = r.get("many")
    if x:
        lost = x["expected"] - min(x["finished_emitted"], x["finished_in_db"])
        line(f"{x['runs']:,} concurrent runs: nothing lost", lost, lost == 0, f"{lost} lost")
        # What a finished run leaves is its key in two sets capped at 10,000 entries each (the ledger's settled
        # keys, the connection's finished runs; their caps are tested in tests/), so "bounded" is the cap times
        # what an entry costs; the line fails if that passes 16 MB.
        kept = x["finished_bytes_2"]
        cap_mb = kept * max(FINISHED_CAP, SETTLED_MEMORY) / 1e6
        line(
            "finished runs bounded (10,000-entry caps): kept x cap < 16 MB",
            kept,
            cap_mb < 16,
            f"{fmt(kept)} B/run, <= {cap_mb:.1f} MB",
        )
    else:
        line("concurrent runs: nothing lost", None, None)
    tx = (r.get("reader") or {}).get("tx_per_run") or []
    # At most the design's 2 (claim + finalize): writes of one chat waiting for the lane are made in one
    # transaction (``TrioChatStore.write``), so runs of one chat ending together share theirs.
    line("at most 2 DB transactions per run", max(tx) if tx else None, bool(tx) and all(t < 2.005 for t in tx),
         f"{min(tx):.2f}-{max(tx):.2f}" if tx else None)  # fmt: skip
    v = r.get("virtual")
    line("0 virtual seconds per turn", v and v["mean"], v and v["mean"] == 0, v and f"{v['mean']:.3f} s")
    return out


# ============================================================================================== main


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except OSError:
        return "load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def owc_commit() -> str:
    root = Path(owc.__file__).resolve().parents[1]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "log", "-1", "--format=%h %s"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except OSError:
        head = "?"
    return f"{head[:60]} ({root})"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run under a minute")
    p.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    p.add_argument("--only", default="reader,long,many,holds,competing,virtual", help="sections to run")
    p.add_argument("--repeats", type=int, help="repeats of each reader (default 5; quick 2)")
    p.add_argument("--mix-chats", type=int, help="chats streaming at once in the mix (default 8)")
    p.add_argument("--mix-runs", type=int, help="runs in the mix (default 40; quick 8)")
    p.add_argument("--mix-deltas", type=int, help="text deltas per run in the mix (default 250; quick 100)")
    p.add_argument("--mix-tools", type=int, help="tool calls per run in the mix (default 5; quick 2)")
    p.add_argument("--long-deltas", type=int, help="deltas in the long run (default 10000; quick 1000)")
    p.add_argument("--long-tools", type=int, help="tool calls in the long run (default 200; quick 20)")
    p.add_argument("--long-repeats", type=int, help="rounds of the long run (default 7; quick 2)")
    p.add_argument("--many-runs", type=int, help="runs open at once, per batch (default 1000; quick 100)")
    p.add_argument("--hold-sizes", help="chat sizes for the lock holds (default 10,1000,5000; quick 10,1000)")
    p.add_argument("--hold-reps", type=int, help="claims and finalizes per size (default 200; quick 30)")
    p.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL")
    p.add_argument("--burst-runs", type=int, help="runs finalized in the burst (default 1000; quick 40)")
    p.add_argument("--burst-messages", type=int, help="messages in the burst's chat (default 10000; quick 2000)")
    p.add_argument("--probe-pause-ms", type=int, help="the competing writer's pause between saves (default 200)")
    p.add_argument(
        "--burst-start",
        choices=("staggered", "together"),
        default="staggered",
        help="the burst's runs start one after another, each once the previous one is claimed (default), or all\n"
        "together (1,000 claims queued on one chat: owc's claim-order wakeups then cost ~10 minutes)",
    )
    p.add_argument("--virtual-turns", type=int, default=3)
    p.add_argument("--capture-timeout", type=float, help="seconds a capture may take (default 1800; quick 120)")
    args = p.parse_args(argv)
    full = {
        "repeats": 5, "mix_chats": 8, "mix_runs": 40, "mix_deltas": 250, "mix_tools": 5, "long_deltas": 10_000,
        "long_tools": 200, "long_repeats": 7, "many_runs": 1000, "hold_sizes": "10,1000,5000", "hold_reps": 200,
        "burst_runs": 1000, "burst_messages": 10_000, "probe_pause_ms": 200, "capture_timeout": 1800,
    }  # fmt: skip
    quick = {
        "repeats": 2, "mix_chats": 4, "mix_runs": 8, "mix_deltas": 100, "mix_tools": 2, "long_deltas": 1000,
        "long_tools": 20, "long_repeats": 2, "many_runs": 100, "hold_sizes": "10,1000", "hold_reps": 30,
        "burst_runs": 40, "burst_messages": 2000, "probe_pause_ms": 100, "capture_timeout": 120,
    }  # fmt: skip
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.sections = set(args.only.split(","))
    return args


def _decode_times(frames: list[bytes], repeats: int = 3) -> list[float]:
    """Per frame, the least of ``repeats`` timings of ``orjson.loads`` on it (seconds)."""
    best = [float("inf")] * len(frames)
    for _ in range(repeats):
        for i, raw in enumerate(frames):
            t = time.perf_counter()
            orjson.loads(raw)
            best[i] = min(best[i], time.perf_counter() - t)
    return best


def _result_frame(frames: list[bytes], start: int) -> int:
    """The index of the frame that carries the result of the tool call started at ``frames[start]``."""
    call = ((orjson.loads(frames[start]).get("payload") or {}).get("data") or {}).get("toolCallId")
    for index in range(start + 1, len(frames)):
        if b'"phase":"result"' in frames[index]:
            data = (orjson.loads(frames[index]).get("payload") or {}).get("data") or {}
            if data.get("phase") == "result" and data.get("toolCallId") == call:
                return index
    raise RuntimeError(f"no result frame for the tool call at frame {start}")


async def capture_all(args: argparse.Namespace, tmp: str) -> dict[str, tuple[str, dict]]:
    """Capture each stream the replayed sections need, once; keep only the files and what the bench must know."""
    wanted = []
    if "reader" in args.sections:
        wanted.append(
            mix("mix", chats=args.mix_chats, runs=args.mix_runs, deltas=args.mix_deltas, tools=args.mix_tools)
        )
    if "long" in args.sections:
        wanted.append(mix("long", chats=1, runs=1, deltas=args.long_deltas, tools=args.long_tools))
    if "many" in args.sections:
        wanted.append(many("many", runs=args.many_runs))
    out = {}
    for workload in wanted:
        log(f"capture: {workload.name}: {workload.describe}")
        with trio.move_on_after(args.capture_timeout) as guard:  # a capture owc stalls in must not hang the bench
            cap: Capture = await capture(workload, f"sqlite:///{tmp}/capture-{workload.name}.db")
        if guard.cancelled_caught:
            raise RuntimeError(
                f"capture {workload.name}: not finished after {args.capture_timeout:.0f} s (owc stalled on the"
                " simulator: the owc under test is broken, or raise --capture-timeout)"
            )
        meta = dict(cap.meta)
        total = len(meta["tool_frames"])
        cuts = [1 + round(k * (total - 1) / 10) for k in range(11)]
        if workload.name == "long" and len(set(cuts)) == 11:
            # Tenths are cut at the first tool call, at every tenth of them and at the last one (which the long
            # run's schedule puts right before its end); the replay pauses right after each cut's tool result
            # frame, so the bench can let owc finish a tenth before the next one is sent. After the result, not
            # the start: a pause while a call has no result would have owc's writer write its "Running <tool>"
            # status line at every pause, a database write the unpaused stream does not make.
            meta["tenth_calls"] = cuts
            meta["pauses"] = [_result_frame(cap.frames, meta["tool_frames"][c - 1]) + 1 for c in cuts]
            cap.pauses = list(meta["pauses"])
        path = f"{tmp}/{workload.name}.capture"
        cap.save(path)
        meta.update(
            frames=len(cap.frames),
            bytes=cap.bytes,
            encoded=encoded_size(cap),
            final_frames=[i for i, f in enumerate(cap.frames) if b'"event":"chat"' in f and b'"state":"final"' in f],
        )
        if workload.name == "long":
            # The per-tenth table's decomposition: each frame's size and what parsing its JSON alone costs (the
            # part of any reader's cost that grows with the cumulative ``chat`` snapshots).
            meta["frame_bytes"] = [len(f) for f in cap.frames]
            meta["decode_s"] = _decode_times(cap.frames)
        log(f"capture: {workload.name}: {meta['frames']:,} frames, {meta['bytes'] / 1e6:.1f} MB, pauses {cap.pauses}")
        out[workload.name] = (path, meta)
        del cap
        gc.collect()
    return out


def _loaded(result: dict, before: list[float]) -> dict:
    """A section's figures with the load average before and after it."""
    result["load"] = {"before": before, "after": loadavg()}
    return result


async def replayed_sections(base: str, caps: dict, probe: LockProbe, tmp: str, args: argparse.Namespace) -> dict:
    out: dict[str, Any] = {}
    if "mix" in caps:
        before = loadavg()
        out["reader"] = _loaded(await section_reader(base, caps["mix"][1], probe, tmp, args), before)
    if "long" in caps:
        before = loadavg()
        out["long"] = _loaded(await section_long(base, caps["long"][1], probe, tmp, args), before)
    if "many" in caps:
        before = loadavg()
        out["many"] = _loaded(await section_many(base, caps["many"][1], tmp, args), before)
    async with open_websocket_url(f"{base}/mix" if "mix" in caps else f"{base}/{next(iter(caps))}") as ws:
        orjson.loads(await ws.get_message())
        await ws.send_message(orjson.dumps({"type": "req", "id": "x", "method": "bench.stats"}).decode())
        stats = orjson.loads(await ws.get_message()).get("payload") or {}
    out["replay_stats"] = ", ".join(f"{k} {v}" for k, v in sorted(stats.items()))
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    logging.disable(logging.WARNING)  # owc's own warnings would cost time in the figures; errors still print
    began = time.perf_counter()
    results: dict[str, Any] = {
        "env": {
            "mode": "quick" if args.quick else "full",
            "commit": owc_commit(),
            "python": sys.version.split()[0],
            "cpus": cpu_count(),
            "uptime_before": uptime(),
            "args": {k: v for k, v in vars(args).items() if k != "sections"},
        }
    }
    probe = LockProbe().install()
    with tempfile.TemporaryDirectory(prefix="owc-bench-") as tmp:
        caps = trio.run(capture_all, args, tmp)
        if caps:
            with replay_server({name: path for name, (path, _) in caps.items()}) as base:
                results.update(trio.run(replayed_sections, base, caps, probe, tmp, args))
        if "holds" in args.sections:
            before = loadavg()
            results["holds"] = _loaded(trio.run(section_holds, tmp, probe, args), before)
        if "competing" in args.sections:
            before = loadavg()
            results["competing"] = _loaded(trio.run(section_competing, tmp, probe, args), before)
        if "virtual" in args.sections:
            log("virtual: agent turns under MockClock")
            before = loadavg()
            results["virtual"] = _loaded(section_virtual(tmp, probe, args.virtual_turns), before)
    results["env"]["uptime_after"] = uptime()
    results["env"]["wall_s"] = time.perf_counter() - began
    results["goals"] = [{"goal": g, "value": v, "verdict": s} for g, v, s in goals(results)]
    print(render(results))
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    return 0


if __name__ == "__main__":
    sys.exit(main())
