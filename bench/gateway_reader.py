"""Events per second through owc's Gateway connection reader, against a bare trio-websocket receive loop.

The frames are the simulator's: one run's deltas (two events each: ``agent`` assistant + ``chat`` delta)
captured once, exactly as a subscribed connection received them. A replay server in a **separate process**
(so its cost is not on the reader's core) then sends those same encoded frames as fast as the socket takes
them, over real loopback, to each reader in turn:

* owc: ``GatewayClient`` (handshake, subscribe-and-list, decode, seq tracking, typed payloads, dispatch to a
  handler that counts);
* bare: a ``trio_websocket`` connection that only ``orjson.loads`` each message.

The ratio is owc's reader overhead over the bare loop on identical input.

    python bench/gateway_reader.py [--deltas N] [--rounds R]
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import statistics
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import trio
from trio_websocket import ConnectionClosed, open_websocket_url, serve_websocket

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from owc.gateway import Connection, HelloInfo, NullHandler, Resync, open_gateway_connection
from owc.protocol import ChatEvent, Event
from owc.sim import open_simulator

from rawclient import raw_client

TOKEN = "bench-token"
KEY = "agent:main:openwebui-bench-3f0c9f2e-8a51-4b1e-9d7a-0c6f2b1e4a55"


# ---------------------------------------------------------------------------------------------- capture


async def capture(deltas: int) -> dict[str, Any]:
    """The handshake replies and one run's event frames, as the simulator sent them to a subscriber."""
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        subscribed = await client.request("sessions.subscribe", {"limit": 1000})
        run = sim.start_run(KEY, "bench-run")
        run.text("x" * deltas, chunks=["x"] * deltas)
        run.end()
        frames: list[str] = []
        while True:
            message = await client.ws.get_message()
            frames.append(message)
            frame = orjson.loads(message)
            if frame.get("event") == "chat" and frame["payload"].get("state") == "final":
                break
        return {"hello": client.hello.raw, "subscribed": subscribed.payload, "frames": frames}


# ---------------------------------------------------------------------------------------------- replay


def serve(recorded: dict[str, Any], port_out: Any) -> None:
    """The replay server (its own process): per connection, answer the handshake and the subscribe like the
    Gateway did, then send the recorded event frames back to back. Other requests get an empty list."""
    logging.disable(logging.CRITICAL)

    async def handler(request: Any) -> None:
        try:
            await replay(await request.accept())
        except* ConnectionClosed:
            pass  # the reader is done with it

    async def replay(ws: Any) -> None:
        challenge = {"type": "event", "event": "connect.challenge", "payload": {"nonce": "n", "ts": 0}}
        await ws.send_message(orjson.dumps(challenge).decode())

        async def reply(req: dict[str, Any], payload: Any) -> None:
            response = {"type": "res", "id": req["id"], "ok": True, "payload": payload}
            await ws.send_message(orjson.dumps(response).decode())

        first = orjson.loads(await ws.get_message())
        if first.get("method") == "connect":
            await reply(first, recorded["hello"])
            subscribe = orjson.loads(await ws.get_message())
            await reply(subscribe, recorded["subscribed"])
        async with trio.open_nursery() as nursery:

            async def answer_the_rest() -> None:
                while True:
                    req = orjson.loads(await ws.get_message())
                    await reply(req, {"sessions": [], "count": 0})

            nursery.start_soon(answer_the_rest)
            for message in recorded["frames"]:
                await ws.send_message(message)
            await trio.sleep_forever()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            server = await nursery.start(serve_websocket, handler, "127.0.0.1", 0, None)
            port_out.send(server.port)

    trio.run(main)


# ---------------------------------------------------------------------------------------------- readers


class CountingRuns:
    """The per-connection view the reader dispatches to: it only counts, so the figure is the reader's own cost
    (decode, seq tracking, typed payloads, dispatch) and none of the run path's."""

    def __init__(self) -> None:
        self.count = 0
        self.done = trio.Event()

    def on_event(self, event: Event) -> None:
        self.count += 1
        if isinstance(event, ChatEvent) and event.state == "final":
            self.done.set()

    def on_gap(self) -> None:
        pass

    async def on_hello(self, info: HelloInfo, resync: Resync) -> None:
        pass

    async def on_resync(self, resync: Resync) -> None:
        pass


class Counter(NullHandler):
    """The bare connection on purpose (no ``open_runtime``, no keeper): a ``NullHandler`` whose one connection
    view counts the events the reader dispatches."""

    def __init__(self) -> None:
        self.runs = CountingRuns()

    @asynccontextmanager
    async def attach(self, conn: Connection) -> AsyncIterator[CountingRuns]:
        yield self.runs


async def owc_rate(url: str, events: int) -> float:
    handler = Counter()
    start = time.perf_counter()
    async with open_gateway_connection(url, TOKEN, handler):
        await handler.runs.done.wait()
        elapsed = time.perf_counter() - start
    assert handler.runs.count >= events - 1, (handler.runs.count, events)
    return events / elapsed


async def bare_rate(url: str, events: int) -> float:
    start = time.perf_counter()
    async with open_websocket_url(url) as ws:
        orjson.loads(await ws.get_message())  # challenge
        connect = {"type": "req", "id": "c", "method": "connect", "params": {}}
        await ws.send_message(orjson.dumps(connect).decode())
        orjson.loads(await ws.get_message())  # hello-ok
        subscribe = {"type": "req", "id": "s", "method": "sessions.subscribe", "params": {}}
        await ws.send_message(orjson.dumps(subscribe).decode())
        orjson.loads(await ws.get_message())  # subscribed
        count = 0
        while count < events:
            orjson.loads(await ws.get_message())
            count += 1
        return events / (time.perf_counter() - start)


async def main(deltas: int, rounds: int) -> None:
    recorded = await capture(deltas)
    events = len(recorded["frames"])
    spawn = multiprocessing.get_context("spawn")  # a fork inside a running Trio loop would inherit its state
    receive, send = spawn.Pipe(duplex=False)
    server = spawn.Process(target=serve, args=(recorded, send), daemon=True)
    server.start()
    try:
        if not receive.poll(60):
            raise RuntimeError("the replay server did not start")
        url = f"ws://127.0.0.1:{receive.recv()}/"
        owc, bare = [], []
        for _ in range(rounds):  # interleaved, so drift on the machine hits both alike
            owc.append(await owc_rate(url, events))
            bare.append(await bare_rate(url, events))
    finally:
        server.terminate()
        server.join(5)
    o, b = statistics.median(owc), statistics.median(bare)
    print(f"{deltas} deltas per run = {events} event frames, {rounds} rounds, replayed from a separate process")
    print(f"owc GatewayClient reader   {o:>10,.0f} events/s (median; handshake and subscribe included)")
    print(f"bare trio-websocket+orjson {b:>10,.0f} events/s (median; same frames, same handshake)")
    print(f"ratio owc/bare             {o / b:>10.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--deltas", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    trio.run(main, args.deltas, args.rounds)
