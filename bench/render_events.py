"""Renderer throughput on a long run, and whether the cost per event grows with the run.

A run of 10,000 text deltas and 200 tool calls (start + result), as typed events built the way the Gateway
sends them (each ``chat`` delta carries the cumulative message, as the real Gateway's do). Prints events/s for
``TurnRenderer.feed`` and the cost per event in each tenth of the run: flat means the per-event cost does not
grow with the run's length. Then what a writer pays when it flushes after every event (the worst case: no
coalescing at all), by tenth: the flush before issue 16 (the whole ``output()`` rebuilt and diffed) and the
writer's flush now (``Shown.flush``: what changed since the last flush), each with last tenth / first tenth. The
copies the emitter made of each flush's output show end to end.

``--end-to-end`` also runs the simulator, owc (``open_runtime``), SQLite and the recording emitter in one process
and reports the cost per event by tenth of the run there, next to a bare receive loop fed by the same driver (its
ceiling: the in-process simulator's own cost, which grows with the run's text because every delta carries the
cumulative message). Each tenth ends when owc's live copy shows its last delta (the bare loop: when it read it),
so a tenth's time includes catching up; a run's claim (its one DB transaction before streaming) is not timed.

    python bench/render_events.py [--deltas 10000] [--tools 200] [--end-to-end] [--runs 2]

Runs against older checkouts too (for before/after figures): what they lack is skipped.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from owc.protocol import Event, EventFrame
from owc.protocol.events import parse_event
from owc.render import TurnRenderer, diff

try:
    from owc.render import Shown
except ImportError:  # before issue 16
    Shown = None

TOKEN = "bench-token"
USER = "bench"


def build(deltas: int, tools: int) -> list[Event]:
    events: list[Event] = []
    text, seq = "", 0
    every = max(1, deltas // max(1, tools))
    call = 0
    for i in range(deltas):
        seq += 1
        piece = f"w{i} "
        text += piece
        message = {"role": "assistant", "content": [{"type": "text", "text": text}]}
        payload = {
            "runId": "r",
            "sessionKey": "k",
            "seq": seq,
            "state": "delta",
            "deltaText": piece,
            "message": message,
        }
        events.append(parse_event(EventFrame("chat", payload)))
        if i % every == every - 1 and call < tools:
            call += 1
            result = {"content": [{"type": "text", "text": "ok"}]}
            for phase, extra in (("start", {"args": {"n": call}}), ("result", {"isError": False, "result": result})):
                seq += 1
                data = {"phase": phase, "name": "exec", "toolCallId": f"c{call}", **extra}
                payload = {"runId": "r", "sessionKey": "k", "seq": seq, "stream": "tool", "data": data}
                events.append(parse_event(EventFrame("agent", payload)))
    return events


def by_tenth(events: list[Event], step: Callable[[Event], None]) -> list[float]:
    """Microseconds per event of ``step`` in each tenth of ``events``."""
    tenth = len(events) // 10
    out = []
    for t in range(10):
        t0 = time.perf_counter()
        for event in events[t * tenth : (t + 1) * tenth]:
            step(event)
        out.append((time.perf_counter() - t0) / tenth * 1e6)
    return out


def line(label: str, tenths: list[float]) -> str:
    return f"{label:<46}" + " ".join(f"{x:6.1f}" for x in tenths) + f"   last/first {tenths[-1] / tenths[0]:.2f}"


def full_flushing(events: list[Event]) -> list[float]:
    """The writer's flush before issue 16: the whole output rebuilt, compared and diffed whole."""
    renderer = TurnRenderer("r")
    shown: list[dict[str, Any]] = []

    def step(event: Event) -> None:
        nonlocal shown
        renderer.feed(event)
        now = renderer.output()
        if now == shown:
            return
        diff(shown, now)
        shown = now

    return by_tenth(events, step)


def incremental_flushing(events: list[Event]) -> list[float]:
    """The writer's flush now: ``Shown.flush``, what changed since the last flush."""
    renderer, shown = TurnRenderer("r"), Shown()

    def step(event: Event) -> None:
        renderer.feed(event)
        shown.flush(renderer)

    return by_tenth(events, step)


# ------------------------------------------------------------------------------------------------ end to end


async def drive(
    sim: Any, keys: list[str], args: argparse.Namespace, caught_up: Callable[[str], Awaitable[None]]
) -> list[list[float]]:
    """Stream ``args.runs`` runs one after the other (a chat each), yielding after every delta as a live Gateway
    paces them; returns [seconds, events] per tenth, summed over the runs."""
    import trio

    every = max(1, args.deltas // max(1, args.tools))
    tenth = max(1, (args.deltas - 1) // 10)
    sent = lambda: sum(c.seq for c in sim.conns.values())  # noqa: E731  # every event frame the simulator sent
    out = [[0.0, 0] for _ in range(10)]
    for r in range(args.runs):
        run = sim.start_run(keys[r], f"bench-{r}-{uuid.uuid4().hex[:6]}")
        first = f"{r}w0 "
        run.text(first, chunks=[first])
        await caught_up(first)  # the claim and the message: before the clock starts
        call, t0, e0 = 0, time.perf_counter(), sent()
        for i in range(1, args.deltas):
            word = f"{r}w{i} "
            run.text(word, chunks=[word])
            await trio.lowlevel.checkpoint()
            if i % tenth == 0 and i // tenth <= 10:
                await caught_up(word)
                k = i // tenth - 1
                out[k][0] += time.perf_counter() - t0
                out[k][1] += sent() - e0
                t0, e0 = time.perf_counter(), sent()
            if i % every == every - 1 and call < args.tools:
                call += 1
                run.tool("exec", {"n": call}, "ok")
        run.end()
        await caught_up(None)  # the run's message finalized (owc) / its final read (bare)
    return out


async def owc_tenths(args: argparse.Namespace) -> list[float]:
    from owc import ids
    from owc.emit import RecordingEmitter
    from owc.registry import WriterRegistry
    from owc.runtime import RuntimeConfig, open_runtime
    from owc.sim import open_simulator
    from owc.store import open_store

    with tempfile.TemporaryDirectory() as tmp:
        async with (
            open_simulator(token=TOKEN) as sim,
            open_store(f"sqlite:///{tmp}/bench.db", create=True) as store,
        ):
            keys = []
            for _ in range(args.runs):
                chat_id = str(uuid.uuid4())
                await store.create_chat(chat_id, USER)
                keys.append(ids.session_key("main", USER, chat_id))
            emitter = RecordingEmitter()
            config = RuntimeConfig(url=sim.url, token=TOKEN, registry=WriterRegistry())
            async with open_runtime(config, store, emitter) as runtime:
                await runtime.settled()
                finished = 0

                def shows(word: str) -> bool:
                    for output in emitter.streams.values():
                        last = output[-1] if output else None
                        if last and last.get("type") == "message" and last["content"][0]["text"].endswith(word):
                            return True
                    return False

                async def caught_up(word: str | None) -> None:
                    nonlocal finished
                    if word is None:
                        finished += 1
                        await runtime.keeper.until(lambda: runtime.keeper.totals()[1] >= finished)
                    else:
                        await emitter.until(lambda: shows(word))

                return per_event(await drive(sim, keys, args, caught_up))


async def bare_tenths(args: argparse.Namespace) -> list[float]:
    import orjson
    import trio

    from owc import ids
    from owc.sim import open_simulator

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from rawclient import raw_client

    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        await client.request("sessions.subscribe", {})
        keys = [ids.session_key("main", USER, str(uuid.uuid4())) for _ in range(args.runs)]
        last, finals, moved = "", 0, trio.Event()

        async def read() -> None:
            nonlocal last, finals, moved
            while True:
                frame = orjson.loads(await client.ws.get_message())
                if frame.get("event") == "chat":
                    payload = frame["payload"]
                    last = payload.get("deltaText") or last
                    finals += payload.get("state") == "final"
                    moved.set()
                    moved = trio.Event()

        async def caught_up(word: str | None) -> None:
            target = finals + 1 if word is None else None
            while (finals < target) if target is not None else (last != word):
                await moved.wait()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            tenths = per_event(await drive(sim, keys, args, caught_up))
            nursery.cancel_scope.cancel()
        return tenths


def per_event(tenths: list[list[float]]) -> list[float]:
    return [seconds / max(1, events) * 1e6 for seconds, events in tenths]


def end_to_end(args: argparse.Namespace) -> None:
    import trio

    logging.disable(logging.WARNING)
    owc = trio.run(owc_tenths, args)
    bare = trio.run(bare_tenths, args)
    print(
        f"\nend to end ({args.runs} run(s) of {args.deltas} deltas, {args.tools} tool calls; simulator, owc, SQLite "
        "and the recording emitter in one process), us per event by tenth:"
    )
    print(line("  owc (open_runtime)", owc))
    print(line("  bare receive loop (same driver)", bare))
    print(line("  owc's own (owc - bare)", [o - b for o, b in zip(owc, bare)]))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--deltas", type=int, default=10_000)
    parser.add_argument("--tools", type=int, default=200)
    parser.add_argument("--end-to-end", action="store_true")
    parser.add_argument("--runs", type=int, default=2, help="runs for --end-to-end")
    parser.add_argument("--skip-render", action="store_true", help="only --end-to-end")
    args = parser.parse_args()
    if not args.skip_render:
        events = build(args.deltas, args.tools)
        renderer = TurnRenderer("r")
        start = time.perf_counter()
        tenths = by_tenth(events, renderer.feed)
        for event in events[len(events) // 10 * 10 :]:
            renderer.feed(event)
        total = time.perf_counter() - start
        print(
            f"{len(events)} events ({args.deltas} deltas, {args.tools} tool calls), "
            f"final text {len(renderer.text):,} chars"
        )
        print(f"feed: {len(events) / total:,.0f} events/s")
        print(line("feed, us per event by tenth", tenths))
        t0 = time.perf_counter()
        out = renderer.output()
        d = diff(out[:-5], out)
        print(
            f"output() + diff at the end: {(time.perf_counter() - t0) * 1e3:.2f} ms "
            f"for {len(out)} items ({len(d.events)} events)"
        )
        print("flushing after every event (no coalescing), us per event by tenth:")
        print(line("  full: output() + diff (before)", full_flushing(events)))
        if Shown is not None:
            print(line("  incremental: Shown.flush (the writer's now)", incremental_flushing(events)))
    if args.end_to_end:
        end_to_end(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
