"""Events per second through owc's Gateway connection reader, against a bare trio-websocket receive loop.

The simulator (same process, real loopback socket) streams one run's deltas as fast as it can; each delta is
two events (``agent`` assistant + ``chat`` delta). Phase 1: owc's ``GatewayClient`` with a handler that
counts typed events. Phase 2: a bare ``trio_websocket`` connection that only ``orjson.loads`` each message.
Both see the same frames; the ratio is owc's overhead (decode, seq tracking, typed payloads, dispatch).

    python bench/gateway_reader.py [--deltas N] [--rounds R]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path

import orjson
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from owc.gateway import NullHandler, open_gateway_connection  # noqa: E402
from owc.protocol import ChatEvent  # noqa: E402
from owc.sim import open_simulator  # noqa: E402
from rawclient import raw_client  # noqa: E402

TOKEN = "bench-token"
KEY = "agent:main:openwebui-bench-3f0c9f2e-8a51-4b1e-9d7a-0c6f2b1e4a55"


class Counter(NullHandler):
    def __init__(self, target: int) -> None:
        self.count = 0
        self.target = target
        self.done = trio.Event()

    def on_event(self, session, event) -> None:
        self.count += 1
        if isinstance(event, ChatEvent) and event.state == "final":
            self.done.set()


def stream(sim, run_id: str, deltas: int) -> None:
    run = sim.start_run(KEY, run_id)
    run.text("x" * deltas, chunks=["x"] * deltas)
    run.end()


async def owc_rate(deltas: int, n: int) -> float:
    async with open_simulator(token=TOKEN) as sim:
        handler = Counter(0)
        async with open_gateway_connection(sim.url, TOKEN, handler) as client:
            await client.wait_session()
            start = time.perf_counter()
            before = handler.count
            stream(sim, f"owc-{n}", deltas)
            await handler.done.wait()
            elapsed = time.perf_counter() - start
            return (handler.count - before) / elapsed


async def bare_rate(deltas: int, n: int) -> float:
    async with open_simulator(token=TOKEN) as sim:
        async with raw_client(sim.url, TOKEN) as client:
            await client.request("sessions.subscribe", {})
            ws = client.ws
            start = time.perf_counter()
            stream(sim, f"bare-{n}", deltas)
            count = 0
            while True:
                frame = orjson.loads(await ws.get_message())
                count += 1
                if frame.get("event") == "chat" and frame["payload"].get("state") == "final":
                    break
            return count / (time.perf_counter() - start)


async def main(deltas: int, rounds: int) -> None:
    owc, bare = [], []
    for n in range(rounds):
        owc.append(await owc_rate(deltas, n))
        bare.append(await bare_rate(deltas, n))
    o, b = statistics.median(owc), statistics.median(bare)
    print(f"{deltas} deltas per run (~{2 * deltas} events), {rounds} rounds, simulator in the same process")
    print(f"owc GatewayClient reader   {o:>10,.0f} events/s (median)")
    print(f"bare trio-websocket+orjson {b:>10,.0f} events/s (median)")
    print(f"ratio owc/bare             {o / b:>10.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--deltas", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    trio.run(main, args.deltas, args.rounds)
