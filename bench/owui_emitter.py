"""Per-event cost of the emitter path a writer takes: the recording emitter under ``trio.run`` against the Open
WebUI emitter in guest mode (Trio as a guest on an asyncio loop, each event carried to the loop's side and into an
Open WebUI-shaped emitter), on asyncio's loop and on uvloop (Open WebUI's).

The Open WebUI side here is a stand-in that does nothing with the event (its own cost, Socket.IO, is Open WebUI's
and the same whoever calls it): the figure is what owc adds per event. Also the live-copy save
(``save_stream``) and a writer's task open + close.

    python bench/owui_emitter.py [--events N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import time
from collections.abc import Coroutine
from typing import Any

import trio

from owc.emit import RecordingEmitter
from owc.owui import trio_host
from owc.owui.emitter import OwuiEmitter

EVENT = {"type": "chat:completion", "data": {"output": [{"type": "message", "content": [{"text": "x" * 80}]}]}}


class NullOpenWebUI:
    """Open WebUI's side doing nothing: ``get_event_emitter``'s closure, ``create_task``, the stream store."""

    async def event_emitter(self, user_id: str, chat_id: str, message_id: str) -> Any:
        async def emit(event: dict[str, Any]) -> None:
            return None

        return emit

    async def create_task(self, coroutine: Coroutine[Any, Any, None], chat_id: str) -> tuple[str, asyncio.Task[None]]:
        return "task", asyncio.get_running_loop().create_task(coroutine)  # as Open WebUI's registry: its own task

    async def stop_records(self, chat_id: str) -> tuple[Any, ...]:
        return ()

    async def message_user(self, chat_id: str, message_id: str) -> str | None:
        return None

    def room_sessions(self, chat_id: str) -> frozenset[str]:
        return frozenset()

    async def save_response_stream(self, task_id: str, chat_id: str, message_id: str, output: list[Any]) -> None:
        return None

    async def clear_response_stream(self, task_id: str) -> None:
        return None


async def _emits(emitter: Any, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await emitter.emit("chat", "message", "user", EVENT)
    return (time.perf_counter() - start) / n * 1e6


async def _saves(emitter: Any, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await emitter.save_stream("chat", "message", EVENT["data"]["output"])
    return (time.perf_counter() - start) / n * 1e6


async def _tasks(emitter: Any, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        await emitter.open_task("chat", f"m{i}", "user", lambda: None)
        await emitter.close_task("chat", f"m{i}")
    return (time.perf_counter() - start) / n * 1e6


def recording(n: int) -> dict[str, float]:
    async def main() -> dict[str, float]:
        emitter = RecordingEmitter()
        return {"emit": await _emits(emitter, n), "save_stream": await _saves(emitter, n)}

    return trio.run(main)


def guest_mode(n: int, loop_factory: Any) -> dict[str, float]:
    async def idle(*, task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started(None)
        await trio.sleep_forever()

    async def main() -> dict[str, float]:
        host = await trio_host.start(idle)
        try:
            emitter = OwuiEmitter(host, NullOpenWebUI())

            async def measure() -> dict[str, float]:
                await emitter.open_task("chat", "message", "user", lambda: None)  # a live copy needs the writer's task
                figures = {"emit": await _emits(emitter, n), "save_stream": await _saves(emitter, n)}
                await emitter.close_task("chat", "message")
                figures["task_open_close"] = await _tasks(emitter, max(1, n // 10))
                return figures

            return await host.run_in_trio(measure)
        finally:
            await host.aclose()

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    loops: dict[str, Any] = {"asyncio": None}
    if importlib.util.find_spec("uvloop") is not None:
        import uvloop

        loops["uvloop"] = uvloop.new_event_loop
    rows: dict[str, list[dict[str, float]]] = {"recording (trio.run)": []}
    for name in loops:
        rows[f"owui guest ({name})"] = []
    for _ in range(args.rounds):
        rows["recording (trio.run)"].append(recording(args.events))
        for name, factory in loops.items():
            rows[f"owui guest ({name})"].append(guest_mode(args.events, factory))
    print(f"per-event cost, median of {args.rounds} rounds of {args.events:,} events (µs)")
    print(f"{'path':<24} {'emit':>8} {'save_stream':>12} {'task open+close':>16}")
    for name, results in rows.items():
        cols = [
            statistics.median(r[k] for r in results) if k in results[0] else None
            for k in ("emit", "save_stream", "task_open_close")
        ]
        print(
            f"{name:<24} "
            + " ".join(f"{c:>{w}.1f}" if c is not None else f"{'-':>{w}}" for c, w in zip(cols, (8, 12, 16)))
        )


if __name__ == "__main__":
    main()
