"""Renderer throughput on a long run, and whether the per-event cost grows with the run.

A run of 10,000 text deltas and 200 tool calls (start + result), as typed events built the way the Gateway
sends them (each ``chat`` delta carries the cumulative message, as the real Gateway's do). Prints events/s for
``TurnRenderer.feed`` and the cost per event in each tenth of the run: flat means the per-event cost does not
grow with the run's length. Also prints the cost of a full ``output()`` + ``diff`` at the end (what a writer
pays per flush, not per event).

    python bench/render_events.py [--deltas 10000] [--tools 200]
"""

from __future__ import annotations

import argparse
import sys
import time

from owc.protocol import Event, EventFrame
from owc.protocol.events import parse_event
from owc.render import TurnRenderer, diff


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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--deltas", type=int, default=10_000)
    parser.add_argument("--tools", type=int, default=200)
    args = parser.parse_args()
    events = build(args.deltas, args.tools)
    renderer = TurnRenderer("r")
    tenth = len(events) // 10
    per_tenth = []
    start = time.perf_counter()
    for t in range(10):
        t0 = time.perf_counter()
        for event in events[t * tenth : (t + 1) * tenth]:
            renderer.feed(event)
        per_tenth.append((time.perf_counter() - t0) / tenth * 1e6)
    for event in events[10 * tenth :]:
        renderer.feed(event)
    total = time.perf_counter() - start
    print(
        f"{len(events)} events ({args.deltas} deltas, {args.tools} tool calls), final text {len(renderer.text):,} chars"
    )
    print(f"feed: {len(events) / total:,.0f} events/s")
    print("us per event by tenth of the run: " + " ".join(f"{x:.2f}" for x in per_tenth))
    print(f"last tenth / first tenth: {per_tenth[-1] / per_tenth[0]:.2f}")
    t0 = time.perf_counter()
    out = renderer.output()
    d = diff(out[:-5], out)
    print(
        f"output() + diff at the end: {(time.perf_counter() - t0) * 1e3:.2f} ms "
        f"for {len(out)} items ({len(d.events)} events)"
    )
    # What a writer pays when it flushes after every event (the worst case: no coalescing at all).
    writer, shown, flush_tenths = TurnRenderer("r"), [], []
    for t in range(10):
        t0 = time.perf_counter()
        for event in events[t * tenth : (t + 1) * tenth]:
            writer.feed(event)
            now = writer.output()
            diff(shown, now)
            shown = now
        flush_tenths.append((time.perf_counter() - t0) / tenth * 1e6)
    print("feed + output() + diff, us per event by tenth: " + " ".join(f"{x:.0f}" for x in flush_tenths))
    print(
        f"  last tenth / first tenth: {flush_tenths[-1] / flush_tenths[0]:.1f} "
        "(grows with the number of items, not the text)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
