"""Decode throughput of the protocol core on real Gateway frames.

Prints frames/s for: orjson.loads alone (the floor any decoder pays), envelope decode (``decode_frame``), and
envelope + typed payload (``EventDecoder.decode``), over every event frame in shared/reference.

    python bench/protocol_decode.py [--rounds N]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import orjson

from owc.protocol import EventDecoder, EventFrame, decode_frame

FRAMES = Path(__file__).resolve().parents[2] / "shared" / "reference" / "openclaw" / "frames"


def load() -> list[bytes]:
    out = []
    for path in sorted(FRAMES.glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            frame = orjson.loads(line).get("frame")
            if isinstance(frame, dict) and frame.get("type") == "event":
                out.append(orjson.dumps(frame))
    return out


def rate(label: str, fn, frames: list[bytes], rounds: int) -> float:
    start = time.perf_counter()
    for _ in range(rounds):
        for data in frames:
            fn(data)
    elapsed = time.perf_counter() - start
    per_s = len(frames) * rounds / elapsed
    print(f"{label:<34} {per_s:>12,.0f} frames/s  {elapsed / (len(frames) * rounds) * 1e6:8.2f} us/frame")
    return per_s


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    logging.disable(logging.INFO)
    frames = load()
    if not frames:
        print(f"no frames under {FRAMES}", file=sys.stderr)
        return 1
    size = sum(map(len, frames)) / len(frames)
    print(f"{len(frames)} real event frames, mean {size:,.0f} bytes, {args.rounds} rounds")
    floor = rate("orjson.loads", orjson.loads, frames, args.rounds)
    env = rate("decode_frame (envelope)", decode_frame, frames, args.rounds)
    decoder = EventDecoder()

    def typed(data: bytes) -> None:
        frame = decode_frame(data)
        assert isinstance(frame, EventFrame)
        decoder.decode(frame)

    full = rate("decode_frame + typed payload", typed, frames, args.rounds)
    print(f"envelope / loads ratio {env / floor:.2f}; typed / loads ratio {full / floor:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
