"""The run mixes the throughput bench captures, the emitters it counts with, and the capture itself.

Runs are driven on the simulator as another client would start them (cron-like agent turns on Open WebUI chats'
session keys), so every ``chat`` delta carries the cumulative message, as the real Gateway sends it, and tool calls
come as the Gateway's ``session.tool`` / ``agent`` item events. Only owc's public entry points are used
(``open_simulator``, ``open_store``, ``open_runtime``, the ``Emitter`` protocol), so the bench keeps working while
owc's reader, renderer, writer and store change underneath.
"""

from __future__ import annotations

import collections
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import trio
import trio.lowlevel
from replay import Capture, recording_proxy

from owc.emit import RecordingEmitter
from owc.runtime import RuntimeConfig, open_runtime
from owc.sim import Simulator, open_simulator
from owc.store import open_store

TOKEN = "bench-token"
USER = "bench-user"
_NS = uuid.UUID("6a1c1f7e-4a1e-4c55-9b51-0b3f3f0e9a10")

#: Words of a plausible reply: model deltas are a word or two (3-12 characters), not one letter.
_WORDS = (
    "The ", "disk ", "usage ", "on ", "the ", "build ", "server ", "is ", "fine; ", "I ", "checked ", "every ",
    "volume ", "and ", "found ", "nothing ", "over ", "eighty ", "percent. ", "Next, ", "the ", "logs: ",
)  # fmt: skip


def session_key(chat_id: str, agent: str = "main") -> str:
    """An Open WebUI chat's session key, as Open WebUI's pipe names it (``agent:<agent>:openwebui-<user>-<chat>``):
    the wire convention between owc and the Gateway, written out here so the bench does not import owc's ids."""
    return f"agent:{agent}:openwebui-{USER}-{chat_id}"


def chat_ids(prefix: str, n: int) -> list[str]:
    return [str(uuid.uuid5(_NS, f"{prefix}-{i}")) for i in range(n)]


def piece(i: int) -> str:
    return _WORDS[i % len(_WORDS)]


# ---------------------------------------------------------------------------------------------- emitters


class CountingEmitter:
    """owc's ``Emitter`` that keeps nothing but counts: the end-to-end figure without the recording emitter's deep
    copies. A message is finished when its final ``chat:completion`` (``done: true``) goes out; it was introduced
    (claimed) when its first ``chat:messages`` did. With ``track``, each live-copy save notes (time, items) so the
    bench can tell how far through a run the writer was at any moment."""

    def __init__(self, *, track: bool = False) -> None:
        self.types: collections.Counter[str] = collections.Counter()
        #: Hashes of the message ids, not the ids: the memory figures must not count strings only the bench keeps.
        self.introduced: set[int] = set()
        self.finished: set[int] = set()
        self.track = track
        self.progress: list[tuple[float, int]] = []
        self.last_output: list[dict[str, Any]] | None = None
        self.final_at: float | None = None
        self._changed = trio.Event()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def until(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self._changed.wait()

    async def emit(self, chat_id: str, message_id: str, user_id: str, event: dict[str, Any]) -> None:
        kind = event.get("type", "")
        self.types[kind] += 1
        if kind == "chat:messages" and hash(message_id) not in self.introduced:
            self.introduced.add(hash(message_id))
            self._wake()
        elif kind == "chat:completion" and (event.get("data") or {}).get("done") is True:
            self.finished.add(hash(message_id))
            self.final_at = time.perf_counter()
            self._wake()

    async def save_stream(self, chat_id: str, message_id: str, output: list[dict[str, Any]]) -> None:
        if self.track:
            self.progress.append((time.perf_counter(), len(output)))
            self.last_output = output

    async def clear_stream(self, chat_id: str, message_id: str) -> None:
        return None

    async def open_task(
        self,
        chat_id: str,
        message_id: str,
        user_id: str,
        on_cancel: Callable[[], object],
        on_task_id: Callable[[str], Awaitable[object]] | None = None,
    ) -> None:
        return None  # as owc's ``Emitter.open_task`` (its ``on_task_id`` too: without it every writer logged a failure)

    async def close_task(self, chat_id: str, message_id: str) -> None:
        return None


class FinishingRecorder(RecordingEmitter):
    """owc's ``RecordingEmitter`` as tests use it (every event deep-copied and kept), noting finished messages."""

    def __init__(self) -> None:
        super().__init__()
        self.finished: set[str] = set()

    async def emit(self, chat_id: str, message_id: str, user_id: str, event: dict[str, Any]) -> None:
        await super().emit(chat_id, message_id, user_id, event)
        if event.get("type") == "chat:completion" and (event.get("data") or {}).get("done") is True:
            self.finished.add(message_id)


# ---------------------------------------------------------------------------------------------- workloads


@dataclass
class Workload:
    """A run mix on the simulator. ``drive`` starts and plays every run; ``mark`` (given by the capture) places a
    pause point in the replay once owc has read everything sent so far and ``ready`` holds."""

    name: str
    chats: list[str]
    runs: int
    drive: Callable[[Simulator, Callable[[Callable[[], bool]], Awaitable[None]], CountingEmitter], Awaitable[None]]
    describe: str = ""


def mix(name: str, *, chats: int, runs: int, deltas: int, tools: int) -> Workload:
    """``runs`` runs spread over ``chats`` chats (one at a time per chat, as the Gateway runs a session), all chats
    streaming at once in round-robin, ``deltas`` text deltas and ``tools`` tool calls (start + result) each."""
    ids = chat_ids(name, chats)
    keys = [session_key(c) for c in ids]

    async def drive(sim: Simulator, mark: Any, emitter: CountingEmitter) -> None:
        queues = [collections.deque(range(k, runs, chats)) for k in range(chats)]
        active: list[list[Any] | None] = [None] * chats  # [run handle, deltas done, tools done]
        every = max(1, deltas // max(1, tools)) if tools else deltas + 1
        while any(active) or any(queues):
            for k in range(chats):
                if active[k] is None and queues[k]:
                    active[k] = [sim.start_run(keys[k], f"{name}-{queues[k].popleft()}"), 0, 0]
                slot = active[k]
                if slot is None:
                    continue
                run, i, done = slot
                text = piece(i)
                run.text(text, chunks=[text])
                if (i + 1) % every == 0 and done < tools:
                    done += 1
                    result = f"exit 0; {done} files checked, " + "ok " * 40
                    run.tool("exec", {"command": f"check --volume {done}"}, result)
                i += 1
                if i >= deltas:
                    while done < tools:  # the schedule's remainder, so every run has exactly ``tools`` calls
                        done += 1
                        run.tool("exec", {"command": f"check --volume {done}"}, "exit 0")
                    run.end()
                    active[k] = None
                else:
                    active[k] = [run, i, done]
            await trio.lowlevel.checkpoint()  # let the simulator's writer, the proxy and owc move

    return Workload(name, ids, runs, drive, f"{runs} runs x {deltas} deltas x {tools} tool calls on {chats} chats")


def many(name: str, *, runs: int, batches: int = 2) -> Workload:
    """``runs`` runs open at once on one connection, one per chat, in ``batches`` batches on the same chats. The
    replay pauses before the first frame, with every run of a batch open (claimed), and after each batch is
    finished, so the bench can weigh memory at each point."""
    ids = chat_ids(name, runs)
    keys = [session_key(c) for c in ids]

    async def drive(sim: Simulator, mark: Any, emitter: CountingEmitter) -> None:
        await mark(lambda: True)
        for batch in range(batches):
            handles = []
            for k, key in enumerate(keys):
                run = sim.start_run(key, f"{name}-{batch}-{k}")
                for i in range(3):
                    run.text(piece(i), chunks=[piece(i)])
                handles.append(run)
                if k % 50 == 49:
                    await trio.lowlevel.checkpoint()
            opened = (batch + 1) * runs
            await mark(lambda opened=opened: len(emitter.introduced) >= opened)
            for k, run in enumerate(handles):
                for i in range(3, 5):
                    run.text(piece(i), chunks=[piece(i)])
                run.tool("exec", {"command": "uptime"}, "up 3 days")
                run.end()
                if k % 50 == 49:
                    await trio.lowlevel.checkpoint()
            if batch + 1 < batches:
                await mark(lambda opened=opened: len(emitter.finished) >= opened)

    return Workload(name, ids, runs * batches, drive, f"{batches} x {runs} runs open at once, one per chat")


# ---------------------------------------------------------------------------------------------- capture


async def capture(workload: Workload, db_url: str) -> Capture:
    """Run the workload on the simulator with owc attached through the recording proxy, until owc has finished
    every run and is quiet; the proxy's recording is the capture. Raises if owc reconnected or lost a run."""
    cap = Capture(workload.name)
    async with (
        open_simulator(token=TOKEN) as sim,
        recording_proxy(sim.url, cap) as proxy,
        open_store(db_url, create=True) as store,
    ):
        for chat in workload.chats:
            await store.create_chat(chat, USER)
        emitter = CountingEmitter()
        async with open_runtime(RuntimeConfig(url=proxy.url, token=TOKEN), store, emitter) as runtime:
            await runtime.settled()

            async def mark(ready: Callable[[], bool]) -> None:
                await emitter.until(ready)
                # A reply comes after every event sent before it: once it is back, the proxy has every frame so far.
                await runtime.client.request("sessions.list", {"limit": 1})
                cap.pauses.append(len(cap.frames))

            await workload.drive(sim, mark, emitter)
            await emitter.until(lambda: len(emitter.finished) >= workload.runs)
            await runtime.settled()
    if proxy.connections != 1:
        raise RuntimeError(f"capture {workload.name}: owc opened {proxy.connections} connections (a reconnect)")
    cap.meta = {
        "chats": workload.chats,
        "user": USER,
        "runs": workload.runs,
        "describe": workload.describe,
        "tool_frames": tool_frames(cap.frames),
        "finals": sum(1 for f in cap.frames if b'"state":"final"' in f and b'"event":"chat"' in f),
    }
    return cap


def tool_frames(frames: Sequence[bytes]) -> list[int]:
    """Indices of the frames that start a tool call (one per call, whichever event kind carries it to owc)."""
    out: list[int] = []
    for index, raw in enumerate(frames):
        if b'"phase":"start"' not in raw or (b"session.tool" not in raw and b'"stream":"tool"' not in raw):
            continue
        frame = orjson.loads(raw)
        payload = frame.get("payload") or {}
        data = payload.get("data") or {}
        if data.get("phase") == "start" and (frame.get("event") == "session.tool" or payload.get("stream") == "tool"):
            out.append(index)
    return out
