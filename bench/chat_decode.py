"""Cost per ``chat`` delta frame, and per ``agent`` ``assistant`` frame, of decoding it into a typed event, by reply
length: owc's ``decode_frame`` (with its fast paths, issue 32) against the full parse (``orjson.loads`` of the whole
frame, then the same typed event).

Both carry the whole reply so far (the chat delta its ``message``, the assistant event its ``data.text``), so a full
parse costs O(reply) per frame; the fast paths should cost the same at 1 KB and at 500 KB. Prints min/median over 5
rounds, microseconds per frame.

    PYTHONPATH=. python3 bench/chat_decode.py [--sizes 1000,6000,100000,500000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from functools import partial

import orjson

from owc.protocol.events import EventDecoder, parse_event
from owc.protocol.frames import decode_frame, frame_from_json


def delta_frame(text: str, delta: str, seq: int) -> bytes:
    """A delta as the Gateway 2026.9.6 sends it (its key order, compact JSON)."""
    payload = {
        "runId": "e45a91a6-cb86-4bdd-8bba-fa84994aecbd",
        "sessionKey": "agent:main:openwebui-u-c",
        "agentId": "main",
        "seq": seq,
        "state": "delta",
        "deltaText": delta,
        "message": {"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": 1795975364794},
    }
    return orjson.dumps({"type": "event", "event": "chat", "payload": payload, "seq": seq})


def assistant_frame(text: str, delta: str, seq: int) -> bytes:
    """An ``agent`` ``assistant`` event as 2026.9.6 sends it (``frames.jsonl``'s key order): the text ends with its
    delta, as every real one does."""
    run = "e45a91a6-cb86-4bdd-8bba-fa84994aecbd"
    payload = {
        "runId": run,
        "stream": "assistant",
        "data": {"text": text + delta, "delta": delta, "itemId": f"{run}:1"},
        "sessionKey": "agent:main:openwebui-u-c",
        "agentId": "main",
        "seq": seq,
        "ts": 1795975364779,
        "isHeartbeat": False,
    }
    return orjson.dumps({"type": "event", "event": "agent", "payload": payload, "seq": seq})


def per_frame_us(fn: Callable[[], object], count: int, rounds: int = 5) -> tuple[float, float]:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(count):
            fn()
        times.append((time.perf_counter() - start) / count * 1e6)
    return min(times), statistics.median(times)


def _owc(decoder: EventDecoder, data: bytes) -> object:
    return decoder.decode(decode_frame(data))


def _full(data: bytes) -> object:
    return parse_event(frame_from_json(orjson.loads(data)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,6000,12000,100000,500000")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'frame':>9} {'reply chars':>12} {'owc min/med us':>16} {'full parse min/med us':>22} {'ratio':>6}")
    for kind, make in (("chat", delta_frame), ("assistant", assistant_frame)):
        for size in (int(s) for s in args.sizes.split(",")):
            data = make('w "quoted" ' * (size // 11) + "w" * (size % 11), "word ", 7)
            count = 2000 if size < 200_000 else 300
            fast = per_frame_us(partial(_owc, EventDecoder(), data), count)
            full = per_frame_us(partial(_full, data), count)
            shown = f"{fast[0]:>7.1f}/{fast[1]:<8.1f} {full[0]:>11.1f}/{full[1]:<10.1f}"
            print(f"{kind:>9} {size:>12} {shown} {full[1] / fast[1]:>6.1f}x")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
