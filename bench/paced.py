"""Issue 32, goal 4: the latency a person sees while runs stream at the Gateway's own pace.

Goal: "event received -> tab told, p50/p99, with 1 / 100 / 1,000 runs streaming at the Gateway's own pace (75 ms
text pacing), and p99 < 10 ms at 100 runs." The throughput bench floods owc; a person never watches a flood. Here
each run sends one text delta every 75 ms (the Gateway's own text pacing), all runs at once, and the figure is how
long each event waits inside owc before the tab is told about it.

How:

* **Frames.** A run mix is captured once through owc from the simulator (``workloads.capture``: one run per chat, all
  chats streaming at once, ``--deltas`` text deltas and ``--tools`` tool calls each), so the frames are exactly what
  an owc connection receives, and the replies to owc's requests (``chat.history`` at each finalize) are the
  simulator's.
* **Pacing.** A server in a separate process (``replay``'s raw-socket connection, its frames sent on a schedule
  instead of as fast as the socket goes) sends run ``j``'s ``k``-th text delta at ``j * 75 / runs + k * 75`` ms: every
  run paced at 75 ms, the runs' ticks spread evenly over the interval (as runs started at different moments are).
  Every other frame of a run (its tool calls, lifecycle, the assistant stream) follows the frame before it right
  away. The capture's order (and so every seq) is kept.
* **Clocks.** owc end to end (``open_runtime``, SQLite in a temporary directory). Two hooks, set on the classes in
  this process only (no owc file is changed): the connection's ``WebSocket.get_messages`` notes when each batch of
  frames came off the socket (the reader's receipt: every frame of a batch shares it), and ``TurnRenderer.feed``
  notes, for every ``chat`` delta and tool event that changed the run's rendering, that batch's time under the run's
  chat. The emitter (``LatencyEmitter``, the ``Emitter`` protocol, keeping nothing but clocks) takes the first
  ``response:completion`` or ``chat:completion`` for the chat as the tab told about everything noted for it so far
  (a writer's flush renders everything fed before it; nothing runs between its render and its emits here).
* **Figures.** Per run count: p50, p99 and max (by rank) of the events that came once the run's message existed
  (``streaming``: the goal's figure) and of all events (``with starts``: a run's first events also wait for its
  claim, one database transaction per run, which the runs starting together queue for); the load average before
  and after; PASS/FAIL against p99 < 10 ms at 100 runs (printed, never asserted).
* **Where the tail's time went.** The main thread's ``/proc/.../schedstat`` (time on a CPU, time runnable but
  waiting for one) is read at each receipt and each tab told, so the slowest 1 % of events' waits split into owc's
  main thread running, waiting for a CPU (the machine's load: nothing owc does can shorten it) and neither (not
  runnable: the GIL held by a store thread, or idle). Full garbage collections during the round are counted and
  timed (each stops the main thread).

What it does not count: time a frame spent in the kernel before owc read it (owc busy elsewhere): the reader's
receipt is the earliest clock owc has. ``--rounds`` repeats every size and prints each round's figures plus the
median of the rounds' p99 (the load of a shared 2-core machine moves a single round's tail).

    PYTHONPATH=. python3 bench/paced.py                         # 1, 100, 1,000 runs; a few minutes
    PYTHONPATH=. python3 bench/paced.py --runs 100 --rounds 3 --deltas 60
    PYTHONPATH=. python3 bench/paced.py --switch-interval 0.0005 # sys.setswitchinterval for owc's process
    PYTHONPATH=. python3 bench/paced.py --gc-freeze              # gc.freeze() before each round
"""

from __future__ import annotations

import argparse
import collections
import gc
import logging
import math
import multiprocessing
import os
import pickle
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import trio
import trio.lowlevel
from replay import Capture, _Conn, ws_frame
from workloads import TOKEN, USER, Workload, capture, chat_ids, piece, session_key

from owc.gateway.websocket import WebSocket
from owc.protocol import AgentEvent, ChatEvent
from owc.render import TurnRenderer
from owc.runtime import RuntimeConfig, open_runtime
from owc.sim import Simulator
from owc.store import open_store

#: The Gateway's text pacing: one ``chat`` delta per run every 75 ms.
PACE_S = 0.075
#: Issue 32's goal: p99 event -> tab under this at 100 runs.
GOAL_P99_MS = 10.0
GOAL_RUNS = 100
#: No finished run for this long (real seconds): the round is reported stalled instead of hanging the bench.
STALL_S = 120.0


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except OSError:
        return "load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def rank(values: list[float], q: float) -> float:
    """The value at rank ``ceil(q * n)`` (p99 of 200 is the 198th): no interpolation."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


# ---------------------------------------------------------------------------------------------- the schedule


def staggered(name: str, *, runs: int, deltas: int, tools: int, start_rounds: int) -> Workload:
    """``runs`` runs on as many chats, driven in rounds (one text delta per streaming run per round, chats in
    order): run ``j`` starts at round ``j * start_rounds // runs`` and sends ``deltas + j * deltas // (2 * runs)``
    deltas (so the runs neither start nor end all at once, and most of the time all of them stream), with ``tools``
    tool calls spread over its deltas. The capture's frames are in round order, which ``schedule`` turns into time."""
    ids = chat_ids(name, runs)
    keys = [session_key(c) for c in ids]
    starts = [j * start_rounds // runs for j in range(runs)]
    lengths = [deltas + j * deltas // (2 * runs) for j in range(runs)]

    async def drive(sim: Simulator, mark: Any, emitter: Any) -> None:
        handles: list[Any] = [None] * runs
        done = [0] * runs
        for r in range(max(s + n for s, n in zip(starts, lengths))):
            for j in range(runs):
                i = r - starts[j]
                if i < 0 or i >= lengths[j]:
                    continue
                if handles[j] is None:
                    handles[j] = sim.start_run(keys[j], f"{name}-{j}")
                run = handles[j]
                text = piece(i)
                run.text(text, chunks=[text])
                every = max(1, lengths[j] // (tools + 1))
                if tools and (i + 1) % every == 0 and done[j] < tools:
                    done[j] += 1
                    run.tool(
                        "exec", {"command": f"check --volume {done[j]}"}, f"exit 0; {done[j]} checked " + "ok " * 40
                    )
                if i == lengths[j] - 1:
                    run.end()
            await trio.lowlevel.checkpoint()  # let the simulator's writer, the proxy and owc move

    return Workload(name, ids, runs, drive, f"{runs} runs x {deltas}-{max(lengths)} deltas x {tools} tool calls")


def schedule(frames: list[bytes], runs: dict[str, tuple[int, int]], pace: float) -> list[float]:
    """Each frame's send time (seconds from the start). ``runs``: run id -> (``j``, its start round). Run ``j``
    sends its ``k``-th text delta at ``(start + k + j / len(runs)) * pace``, its round in the capture, so each run is
    paced at ``pace`` and the runs' ticks are spread over it; any other frame follows the one before it, never
    earlier (the capture's order is the wire's)."""
    count = max(1, len(runs))
    deltas: collections.Counter[str] = collections.Counter()
    times: list[float] = []
    last = 0.0
    for raw in frames:
        frame = orjson.loads(raw)
        payload = frame.get("payload")
        run = payload.get("runId") if isinstance(payload, dict) else None
        if frame.get("event") == "chat" and payload.get("state") == "delta" and run in runs:
            j, start = runs[run]
            last = max(last, (start + deltas[run] + j / count) * pace)
            deltas[run] += 1
        times.append(last)
    return times


# ---------------------------------------------------------------------------------------------- the paced server


class _Paced:
    """A capture, encoded once, with each frame's send time."""

    def __init__(self, capture: Capture, times: list[float]) -> None:
        self.capture = capture
        self.encoded = [ws_frame(f) for f in capture.frames]
        self.times = times
        capture.frames = []


class _PacedConn(_Conn):
    """``replay``'s connection (handshake, answers from the capture, a reader thread), sending on a schedule."""

    def _serve(self) -> None:
        from wsproto.events import AcceptConnection, Request, TextMessage

        target = self._upgrade(Request, AcceptConnection)
        if target is None:
            return
        stream = self.stream = self.streams.get(target.strip("/"))
        if stream is None:
            return
        challenge = {"type": "event", "event": "connect.challenge", "payload": {"nonce": "bench", "ts": 0}}
        self.sock.sendall(self.ws.send(TextMessage(data=orjson.dumps(challenge).decode())))
        threading.Thread(target=self._read, daemon=True).start()
        while not self.subscribed.wait(0.05):
            self._flush()
            if self.closed:
                return
        self._flush()
        encoded, times = stream.encoded, stream.times
        start = time.monotonic() + 0.05
        i, n = 0, len(encoded)
        while i < n and not self.closed:
            now = time.monotonic() - start
            j = i
            while j < n and times[j] <= now:
                j += 1
            if j > i:
                self.sock.sendall(b"".join(encoded[i:j]))
                i = j
            self._flush()
            if i < n:
                # Woken early by a reply to send (a finalize's ``chat.history``), else at the next frame's time.
                self.wake.wait(max(0.0, times[i] - (time.monotonic() - start)))
                self.wake.clear()
        while not self.closed:
            self.wake.wait(0.05)
            self.wake.clear()
            self._flush()


def _serve_paced(path: str, pace: float, port_out: Any) -> None:
    logging.disable(logging.CRITICAL)
    with open(path, "rb") as f:
        cap: Capture = pickle.load(f)
    runs = {run: (j, start) for run, (j, start) in cap.meta["starts"].items()}
    streams = {"paced": _Paced(cap, schedule(cap.frames, runs, pace))}
    stats: collections.Counter[str] = collections.Counter()
    listener = socket.create_server(("127.0.0.1", 0), backlog=16)
    port_out.send(listener.getsockname()[1])
    while True:
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_PacedConn(sock, streams, stats).serve, daemon=True).start()  # type: ignore[arg-type]


@contextmanager
def paced_server(path: str, pace: float) -> Any:
    """The paced server in its own process (spawned, as ``replay.replay_server``), ended by its pid on the way out."""
    spawn = multiprocessing.get_context("spawn")
    receive, send = spawn.Pipe(duplex=False)
    process = spawn.Process(target=_serve_paced, args=(path, pace, send), daemon=True, name="bench-paced")
    process.start()
    try:
        deadline = time.monotonic() + 300
        while not receive.poll(0.2):
            if not process.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the paced server did not start (exit code {process.exitcode})")
        yield f"ws://127.0.0.1:{receive.recv()}/paced"
    finally:
        process.terminate()
        process.join(10)


# ---------------------------------------------------------------------------------------------- owc's side


class Clocks:
    """The hooks' shared state: when the reader's current batch came off the socket, what each chat's tab is owed."""

    def __init__(self) -> None:
        self.batch_at = 0.0
        self.batch_sched = (0, 0)
        #: chat id -> (receipt, the main thread's schedstat then, whether the chat's message existed) of events not
        #: told yet.
        self.owed: dict[str, list[tuple[float, tuple[int, int], bool]]] = collections.defaultdict(list)
        self.introduced: set[str] = set()
        self.streaming: list[float] = []
        self.starting: list[float] = []
        #: Per streaming event, where its wait went on owc's main thread: (ran, waited for a CPU) in seconds.
        self.split: list[tuple[float, float]] = []
        self._stat: int | None = None

    def open_sched(self) -> None:
        """Read the calling thread's ``schedstat`` from now on (Linux; elsewhere the split is left out)."""
        try:
            self._stat = os.open(f"/proc/self/task/{threading.get_native_id()}/schedstat", os.O_RDONLY)
        except OSError:
            self._stat = None

    def close_sched(self) -> None:
        if self._stat is not None:
            os.close(self._stat)
            self._stat = None

    def sched(self) -> tuple[int, int]:
        """The main thread's time on a CPU and time runnable but waiting for one (the machine's load), ns."""
        if self._stat is None:
            return (0, 0)
        ran, waited, _ = os.pread(self._stat, 128, 0).split()
        return int(ran), int(waited)


def chat_of(session_key: str | None) -> str | None:
    """The chat id of an Open WebUI session key (``agent:<agent>:openwebui-<user>-<chat>``)."""
    if not session_key:
        return None
    marker = f"openwebui-{USER}-"
    at = session_key.find(marker)
    return session_key[at + len(marker) :] if at >= 0 else None


@contextmanager
def hooks(clocks: Clocks) -> Any:
    """Note each batch's receipt and each rendering-changing event, on the classes, for this process only."""
    get_messages, feed = WebSocket.get_messages, TurnRenderer.feed
    session_of: dict[str, str | None] = {}

    async def stamped(self: WebSocket) -> list[bytes]:
        messages = await get_messages(self)
        clocks.batch_at = time.perf_counter()
        clocks.batch_sched = clocks.sched()
        return messages

    def noted(self: TurnRenderer, event: Any) -> bool:
        changed = feed(self, event)
        if not changed:
            return changed
        if isinstance(event, ChatEvent):
            counted = event.state == "delta"
        else:
            counted = isinstance(event, AgentEvent) and event.tool is not None
        if counted:
            chat = session_of.get(self.run_id)
            if chat is None:
                chat = session_of[self.run_id] = chat_of(event.session_key)
            if chat is not None:
                clocks.owed[chat].append((clocks.batch_at, clocks.batch_sched, chat in clocks.introduced))
        return changed

    WebSocket.get_messages = stamped  # type: ignore[method-assign]
    TurnRenderer.feed = noted  # type: ignore[method-assign]
    try:
        yield
    finally:
        WebSocket.get_messages = get_messages  # type: ignore[method-assign]
        TurnRenderer.feed = feed  # type: ignore[method-assign]


class LatencyEmitter:
    """owc's ``Emitter``, keeping only clocks: a chat's first ``response:completion`` / ``chat:completion`` after an
    event tells the tab about it. Counts finished messages (their final ``chat:completion``)."""

    TOLD = frozenset({"response:completion", "chat:completion"})

    def __init__(self, clocks: Clocks) -> None:
        self.clocks = clocks
        self.finished: set[str] = set()
        self._changed = trio.Event()

    async def until(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self._changed.wait()

    async def emit(self, chat_id: str, message_id: str, user_id: str, event: dict[str, Any]) -> None:
        kind = event.get("type")
        clocks = self.clocks
        if kind in self.TOLD:
            owed = clocks.owed.get(chat_id)
            if owed:
                now, (ran, waited) = time.perf_counter(), clocks.sched()
                for at, (ran0, waited0), streaming in owed:
                    if streaming:
                        clocks.streaming.append(now - at)
                        clocks.split.append(((ran - ran0) / 1e9, (waited - waited0) / 1e9))
                    else:
                        clocks.starting.append(now - at)
                owed.clear()
            if kind == "chat:completion" and (event.get("data") or {}).get("done") is True:
                self.finished.add(chat_id)
                self._changed.set()
                self._changed = trio.Event()
        elif kind == "chat:messages":
            clocks.introduced.add(chat_id)

    async def save_stream(self, chat_id: str, message_id: str, output: list[dict[str, Any]]) -> None:
        return None

    async def clear_stream(self, chat_id: str, message_id: str) -> None:
        return None

    async def open_task(self, *args: Any, **kwargs: Any) -> None:
        return None

    async def close_task(self, chat_id: str, message_id: str) -> None:
        return None


async def measure(url: str, chats: list[str], db_url: str) -> dict[str, Any]:
    """owc end to end on the paced stream until every run's message is finished."""
    clocks = Clocks()
    clocks.open_sched()
    collections_ = _GcPasses()
    gc.callbacks.append(collections_)
    try:
        return await _measure(url, chats, db_url, clocks, collections_)
    finally:
        gc.callbacks.remove(collections_)
        clocks.close_sched()


class _GcPasses:
    """Full collections (generation 2) while installed in ``gc.callbacks``: each one stops owc's main thread."""

    def __init__(self) -> None:
        self.full: list[float] = []
        self._at = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._at = time.perf_counter()
        else:
            self.full.append(time.perf_counter() - self._at)


def _tail_split(clocks: Clocks) -> dict[str, float]:
    """Where the slowest 1 % of streaming events' waits went on owc's main thread, as shares of their total:
    running (owc's own work, or anyone's on that thread), waiting for a CPU (runnable, the machine busy: the load)
    and the rest (not runnable: the GIL held by a store thread, or nothing to do)."""
    if not clocks.split or len(clocks.split) != len(clocks.streaming):
        return {}
    cut = rank(clocks.streaming, 0.99)
    tail = [(lat, split) for lat, split in zip(clocks.streaming, clocks.split) if lat >= cut]
    total = sum(lat for lat, _ in tail)
    ran = sum(min(lat, r) for lat, (r, _) in tail)
    waited = sum(min(lat - min(lat, r), w) for lat, (r, w) in tail)
    return {"ran": ran / total, "cpu_wait": waited / total, "other": 1 - (ran + waited) / total} if total else {}


async def _measure(url: str, chats: list[str], db_url: str, clocks: Clocks, passes: _GcPasses) -> dict[str, Any]:
    async with open_store(db_url, create=True) as store:
        for chat in chats:
            await store.create_chat(chat, USER)
        emitter = LatencyEmitter(clocks)
        with hooks(clocks):
            started = time.perf_counter()
            cpu = time.process_time()
            async with open_runtime(RuntimeConfig(url=url, token=TOKEN), store, emitter) as runtime:
                with trio.move_on_after(STALL_S * max(1, len(chats) // 100)) as stalled:
                    await emitter.until(lambda: len(emitter.finished) >= len(chats))
                    await runtime.settled()
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    out: dict[str, Any] = {
        "streaming_ms": [x * 1e3 for x in clocks.streaming],
        "starting_ms": [x * 1e3 for x in clocks.starting],
        "finished": len(emitter.finished),
        "seconds": seconds,
        "cpu": cpu,
        "tail_split": _tail_split(clocks),
        "gc_full_ms": [x * 1e3 for x in passes.full],
    }
    if stalled.cancelled_caught:
        out["error"] = f"stalled: {len(emitter.finished)}/{len(chats)} finished"
    return out


# ---------------------------------------------------------------------------------------------- main


def _row(label: str, values: list[float]) -> str:
    if not values:
        return f"   {label:<24} no events"
    return (
        f"   {label:<24} {len(values):>8,}  p50 {rank(values, 0.5):7.2f}  p99 {rank(values, 0.99):7.2f}"
        f"  max {max(values):8.2f} ms"
    )


async def _capture(runs: int, deltas: int, tools: int, start_rounds: int, tmp: str) -> tuple[str, list[str], int]:
    name = f"paced{runs}"
    workload = staggered(name, runs=runs, deltas=deltas, tools=tools, start_rounds=start_rounds)
    cap = await capture(workload, f"sqlite:///{tmp}/capture-{runs}.db")
    cap.meta["starts"] = {f"{name}-{j}": (j, j * start_rounds // runs) for j in range(runs)}
    path = f"{tmp}/paced-{runs}.capture"
    cap.save(path)
    return path, list(workload.chats), len(cap.frames)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", default="1,100,1000", help="run counts, streaming at once (default 1,100,1000)")
    p.add_argument(
        "--deltas", type=int, default=60, help="text deltas of the shortest run (default 60: 4.5 s at 75 ms)"
    )
    p.add_argument("--tools", type=int, default=2, help="tool calls per run (default 2)")
    p.add_argument("--pace-ms", type=float, default=PACE_S * 1e3, help="text pacing per run (default 75)")
    p.add_argument("--start-spread-s", type=float, default=1.0, help="the runs start over this long (default 1 s)")
    p.add_argument("--rounds", type=int, default=1, help="rounds of each size (default 1)")
    p.add_argument("--switch-interval", type=float, help="sys.setswitchinterval for owc's process (default: Python's)")
    p.add_argument(
        "--gc-freeze", action="store_true", help="gc.freeze() before each round: what is alive then is never scanned"
    )
    p.add_argument("--json", help="also write every figure as JSON")
    args = p.parse_args(argv)
    logging.disable(logging.WARNING)  # as throughput.py: owc's info lines would be part of the figure
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    sizes = [int(x) for x in args.runs.split(",") if x]
    print(f"owc paced latency bench, {Path(__file__).resolve().parent.parent}, Python {sys.version.split()[0]}")
    print(f"uptime before: {uptime()}")
    print(
        f"{args.deltas} deltas and {args.tools} tool calls per run, one delta per run every {args.pace_ms:g} ms;"
        f" switch interval {sys.getswitchinterval() * 1e3:g} ms" + ("; gc.freeze() before each round" * args.gc_freeze)
    )
    results: dict[str, Any] = {"args": vars(args), "uptime_before": uptime(), "sizes": {}}
    with tempfile.TemporaryDirectory(prefix="owc-paced-") as tmp:
        for runs in sizes:
            log(f"capture: {runs} runs")
            start_rounds = max(0, round(args.start_spread_s / (args.pace_ms / 1e3)))
            path, chats, frames = trio.run(_capture, runs, args.deltas, args.tools, start_rounds, tmp)
            rounds = []
            with paced_server(path, args.pace_ms / 1e3) as url:
                for k in range(args.rounds):
                    before = loadavg()
                    log(f"{runs} runs: round {k + 1}/{args.rounds}, load {before}")
                    gc.collect()  # the capture's garbage is not owc's: a full collection of it must not land in a round
                    if args.gc_freeze:
                        gc.freeze()
                    got = trio.run(measure, url, chats, f"sqlite:///{tmp}/paced-{runs}-{k}.db")
                    gc.unfreeze()
                    got.update(load_before=before, load_after=loadavg(), frames=frames)
                    rounds.append(got)
            results["sizes"][str(runs)] = rounds
            print(f"\n{runs} run(s) at once, {frames:,} frames:")
            for k, got in enumerate(rounds):
                print(
                    f"  round {k + 1}: load {got['load_before']} -> {got['load_after']}, {got['seconds']:.1f} s,"
                    f" owc CPU {got['cpu'] / got['seconds'] * 100:.0f} % of one core,"
                    f" {got['finished']}/{runs} finished{'  ' + got['error'] if 'error' in got else ''}"
                )
                print(_row("streaming (ms)", got["streaming_ms"]))
                print(_row("with starts (ms)", got["streaming_ms"] + got["starting_ms"]))
                split, full = got["tail_split"], got["gc_full_ms"]
                if split:
                    print(
                        f"   the slowest 1 %: owc's main thread ran {split['ran']:.0%} of their wait, was runnable but"
                        f" waited for a CPU {split['cpu_wait']:.0%}, neither {split['other']:.0%} (the GIL, or idle)"
                    )
                print(
                    f"   full garbage collections: {len(full)}" + (f", {max(full):.1f} ms the longest" if full else "")
                )
            if len(rounds) > 1:
                p99s = [rank(g["streaming_ms"], 0.99) for g in rounds]
                each = ", ".join(f"{x:.2f}" for x in p99s)
                print(f"   streaming p99 by round: {each}; median {statistics.median(p99s):.2f} ms")
    results["uptime_after"] = uptime()
    print(f"\nuptime after: {results['uptime_after']}")
    if str(GOAL_RUNS) in results["sizes"]:
        p99s = [rank(g["streaming_ms"], 0.99) for g in results["sizes"][str(GOAL_RUNS)]]
        value = statistics.median(p99s)
        verdict = "PASS" if value < GOAL_P99_MS else "FAIL"
        print(f"Goal: event -> tab p99 < {GOAL_P99_MS:g} ms at {GOAL_RUNS} runs, streaming: {value:.2f} ms  {verdict}")
    else:
        print(
            f"Goal: event -> tab p99 < {GOAL_P99_MS:g} ms at {GOAL_RUNS} runs: not measured (no --runs {GOAL_RUNS}) n/a"
        )
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
