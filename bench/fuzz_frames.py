"""Mutated real Gateway frames thrown at owc between good runs (issue 11): a seeded frame fuzzer.

The frames are the real Gateway's (``shared/reference/openclaw/frames/*.jsonl``: every frame it sent a client)
and the simulator's own, recorded from a template run. Each mutation takes one and does one thing to it: a field
of the payload (any, or one owc reads) gets a wrong value (every JSON type, odd sizes, a lone surrogate, nesting
past orjson's limits); a field goes; the JSON text is cut, or bytes flipped, inserted or dropped; an odd
encoding (invalid UTF-8 in a binary message, a BOM); the event renamed; or a seq game (absurd, repeated, rewound,
skipped). They go, numbered as the Gateway numbers its frames, into owc's connection to the simulator
(``tests/hostile.py``) between the steps of good runs in real chats, in batches:

* most name a decoy session (no chat owns it), so any mutation is fair;
* some name a victim run in a chat of its own, whose writer streams them: only mutations that keep the victim's
  run id and session (a field's wrong value, not a byte flip) and no terminal template, so the victim ends when
  the simulator ends it;

After each batch a gap (one number spent unsent) must be seen, whatever seq the batch played with, and its
resync ends what the Gateway is not running. Then the batch's good runs must be finished messages with their
whole text and one card each, the victim's message finished, and owc on its first connection, with no writer
or handler failure logged. Prints the figures (exit status 1 if any is wrong):

    python3 bench/fuzz_frames.py --seed 1 --frames 10000
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from hostile import (  # noqa: E402
    NEXT,
    RAW_VALUES,
    READ_FIELDS,
    Hostile,
    Recorder,
    Spec,
    owc_deaths,
    paths_of,
    set_path,
    wrong_values,
)

from owc import ids  # noqa: E402
from owc.rules.lifecycle import State  # noqa: E402

from harness import open_env  # noqa: E402

FRAMES = Path(os.environ.get("OWC_SHARED") or ROOT.parent / "shared") / "reference" / "openclaw" / "frames"
TERMINAL_STATES = ("final", "aborted", "error")


def real_frames(folder: Path) -> list[dict[str, Any]]:
    """Every frame the real Gateway sent a client (events and replies), from the reference logs."""
    out = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            if not line.strip():
                continue
            entry = orjson.loads(line)
            frame = entry.get("frame")
            if entry.get("dir") == "in" and isinstance(frame, dict):
                out.append(frame)
    return out


def terminal(frame: dict[str, Any]) -> bool:
    payload = frame.get("payload") if isinstance(frame.get("payload"), dict) else {}
    data = payload.get("data") if isinstance(payload.get("data"), dict) else {}
    return (
        payload.get("state") in TERMINAL_STATES
        or data.get("phase") in ("end", "error")
        or payload.get("phase") in ("end", "error")
        or frame.get("event") in ("shutdown", "sessions.changed")
    )


class Mutator:
    """Seeded mutations of template frames; ``counts`` says how many of each kind were made."""

    def __init__(self, seed: int, templates: list[dict[str, Any]]) -> None:
        self.r = random.Random(seed)
        self.templates = templates
        self.events = [t for t in templates if t.get("type") == "event"]
        self.victim_templates = [t for t in self.events if not terminal(t) and isinstance(t.get("payload"), dict)]
        #: Tool events are few among real frames: a victim's mutations pick them often, for its cards.
        self.tool_templates = [t for t in self.victim_templates if t["payload"].get("stream") in ("tool", "item")]
        self.values = [*wrong_values(), *(f"<<{n}>>" for n in RAW_VALUES)]
        self.counts: collections.Counter[str] = collections.Counter()
        self.run_seq = 10**6

    def _value(self) -> Any:
        value = self.r.choice(self.values)
        if isinstance(value, str) and len(value) > 1000 and self.r.random() < 0.05:
            return "z" * self.r.choice([200_000, 1_000_000])  # rarely, a big one
        return value

    def _paths(self, frame: dict[str, Any]) -> list[str]:
        payload = frame.get("payload")
        extra = READ_FIELDS.get(frame.get("event"), ()) if isinstance(frame.get("event"), str) else ()
        return sorted(set(paths_of(payload, depth=4)) | set(extra)) if isinstance(payload, dict) else []

    def decoy(self, decoy_key: str) -> Spec:
        """Any mutation of any template, on the decoy session."""
        frame = orjson.loads(orjson.dumps(self.r.choice(self.templates)))
        payload = frame.get("payload")
        if isinstance(payload, dict):
            for key in ("sessionKey", "key"):
                if isinstance(payload.get(key), str):
                    payload[key] = decoy_key
        if frame.get("type") == "event":
            frame["seq"] = NEXT
        op = self.r.choices(
            ["value", "drop_field", "text", "encoding", "rename", "seq"], weights=[50, 10, 20, 8, 4, 8]
        )[0]
        self.counts[op] += 1
        if op == "value" and self._paths(frame):
            frame["payload"] = set_path(payload, self.r.choice(self._paths(frame)), self._value())
            return Spec(frame)
        if op == "drop_field" and self._paths(frame):
            path = self.r.choice(self._paths(frame))
            return Spec({**frame, "payload": _drop(payload, path)})
        if op == "rename":
            frame["event"] = self.r.choice(["x.unknown", "", "agent ", "CHAT", "session.tool.x", "tick"])
            return Spec(frame)
        if op == "seq":
            frame["seq"] = self.r.choice([2**63 - 1, 2**53 + 1, 0, 1, 7, -1, "3", 1.5, None])
            return Spec(frame)
        text = Spec(frame).render(lambda: 0)
        data = text.encode() if isinstance(text, str) else text
        if op == "encoding":
            kind = self.r.choice(["utf8", "bom", "surrogate"])
            if kind == "utf8":
                at = self.r.randrange(len(data) + 1)
                return Spec(message=data[:at] + self.r.choice([b"\xff", b"\xc3", b"\xed\xa0\x80"]) + data[at:])
            if kind == "bom":
                return Spec(message="\ufeff" + data.decode())
            quote = [i for i in range(1, len(data)) if data[i : i + 1] == b'"' and data[i - 1 : i] != b"\\"]
            if quote:
                at = self.r.choice(quote)
                return Spec(message=(data[:at] + b"\\udc01" + data[at:]).decode())
            return Spec(message=data.decode())
        # text: cut it, or flip, insert or drop a few bytes
        data = bytearray(data)
        for _ in range(self.r.randint(1, 4)):
            kind = self.r.choice(["cut", "flip", "insert", "drop"])
            if not data:
                break
            at = self.r.randrange(len(data))
            if kind == "cut":
                del data[at:]
            elif kind == "flip":
                data[at] = self.r.randrange(256)
            elif kind == "insert":
                data[at:at] = bytes([self.r.choice(b'{}[]",:\\0123456789aeflnrstu ')])
            else:
                del data[at]
        raw = bytes(data)
        try:
            return Spec(message=raw.decode())
        except UnicodeDecodeError:
            return Spec(message=raw)  # a binary message

    def victim(self, key: str, run_id: str) -> Spec:
        """A field's wrong value in a non-terminal template that keeps naming the victim run."""
        pool = self.tool_templates if self.tool_templates and self.r.random() < 0.4 else self.victim_templates
        frame = orjson.loads(orjson.dumps(self.r.choice(pool)))
        payload = frame["payload"]
        payload["sessionKey"] = key
        payload["runId"] = run_id
        if payload.get("state") is not None:
            payload["state"] = "delta"
        if isinstance(payload.get("seq"), int):
            self.run_seq += 1  # the run's own count moves on, or the renderer drops the event as a repeat
            payload["seq"] = self.run_seq
        paths = [p for p in self._paths(frame) if p not in ("runId", "sessionKey", "clientRunId", "state")]
        cards = [p for p in paths if p in ("data.args", "data.result")]
        path = self.r.choice(cards if cards and self.r.random() < 0.3 else paths or ["x"])
        payload = set_path(payload, path, self._value())
        data = payload.get("data")
        if isinstance(data, dict):
            if data.get("phase") in ("end", "error"):
                data["phase"] = "model"
            if path.startswith("data.") and isinstance(data.get("toolCallId"), str):
                data["toolCallId"] = f"call-{self.r.randrange(10**9)}"  # a card of its own
                if path == "data.args":
                    data["phase"] = "start"  # where a card takes its arguments
        self.counts["victim"] += 1
        return Spec({"type": "event", "event": frame["event"], "payload": payload, "seq": NEXT})


def _drop(payload: Any, path: str) -> Any:
    payload = orjson.loads(orjson.dumps(payload))
    node = payload
    keys = path.split(".")
    for key in keys[:-1]:
        node = (
            node[int(key)]
            if isinstance(node, list) and key.isdigit() and int(key) < len(node)
            else (node.get(key) if isinstance(node, dict) else None)
        )
        if node is None:
            return payload
    if isinstance(node, dict):
        node.pop(keys[-1], None)
    elif isinstance(node, list) and keys[-1].isdigit() and int(keys[-1]) < len(node):
        del node[int(keys[-1])]
    return payload


class Result:
    def __init__(self) -> None:
        self.frames = 0
        self.batches = 0
        self.good_runs = 0
        self.lost: list[str] = []
        self.victims_unfinished: list[str] = []
        self.hung: list[int] = []
        self.deaths: list[str] = []
        self.connections = 0
        self.gaps = 0
        self.gaps_unseen = 0
        self.repaired = 0
        self.bad_frames = 0


async def fuzz(seed: int, total: int, batch: int, real: list[dict[str, Any]], tmp: Path, out: Result) -> Mutator:
    monkeypatch = pytest.MonkeyPatch()
    records: list[logging.LogRecord] = []
    handler = _Collect(records)
    logging.getLogger("owc").addHandler(handler)
    logging.getLogger("owc").setLevel(logging.INFO)
    try:
        recorder = Recorder(monkeypatch)
        async with open_env(tmp) as env:
            chats = [await env.chat() for _ in range(2)]
            decoy_key = ids.session_key("main", "user-1", str(uuid.uuid4()))
            keeper = await env.connect()
            env.sim.start_run(decoy_key, "template").text("Template.").tool("exec", {"cmd": "ls"}, "out").end()
            await env.settled()
            recorder.on = False
            mutator = Mutator(seed, [*real, *recorder.frames])
            hostile = Hostile(env.sim)
            n = 0
            while out.frames < total:
                victim_chat, victim_key = await env.chat()
                victim_id = f"victim-{n}"
                victim = env.sim.start_run(victim_key, victim_id).text("Victim.")

                def streams(key: str = victim_key, run_id: str = victim_id) -> bool:
                    run = keeper.ledger.get(key, run_id)
                    return run is not None and run.life.state is State.STREAMING

                await keeper.until(streams)
                specs = [
                    mutator.victim(victim_key, victim_id) if mutator.r.random() < 0.2 else mutator.decoy(decoy_key)
                    for _ in range(min(batch, total - out.frames))
                ]
                expected = {}
                half = len(specs) // 2
                for k, part in enumerate((specs[:half], specs[half:])):
                    chat_id, key = chats[(n + k) % 2]
                    run_id = f"good-{n}-{k}"
                    run = env.sim.start_run(key, run_id).text(f"Run {n}.{k} begins.")
                    steps = [
                        lambda run=run, k=k, n=n: run.tool("exec", {"n": n}, f"result {n}.{k}"),
                        lambda run=run, k=k, n=n: run.text(f"Run {n}.{k} ends."),
                    ]
                    cuts = {len(part) // 3: 0, 2 * len(part) // 3: 1}
                    for i, spec in enumerate(part):
                        hostile.send(spec)
                        if i in cuts:
                            steps[cuts.pop(i)]()
                    for step in sorted(cuts.values()):
                        steps[step]()
                    run.end()
                    expected[(chat_id, key, run_id)] = f"Run {n}.{k} begins.\nRun {n}.{k} ends."
                victim.end()
                out.frames += len(specs)
                with trio.move_on_after(60) as waited:
                    await env.settled()
                    # A gap after the batch (one number spent unsent) must be seen, whatever seq the batch
                    # played with, and its resync ends what the Gateway is not running.
                    conn = env.clients["A"].connection
                    gaps = conn.gaps if conn is not None else 0
                    hostile.next_seq()
                    hostile.event("tick", {"ts": 1})
                    await env.settled()
                    if conn is None or conn.gaps == gaps:
                        out.gaps_unseen += 1
                if waited.cancelled_caught:
                    out.hung.append(n)
                for (chat_id, key, run_id), text in expected.items():
                    out.good_runs += 1
                    message = (await env.messages(chat_id)).get(ids.message_id(key, run_id))
                    cards = [i for i in (message or {}).get("output", []) if i["type"] == "function_call_output"]
                    if not (message and message["done"] and message["content"] == text and len(cards) == 1):
                        out.lost.append(
                            f"{run_id}: {message and message['content']!r:.80} done={message and message['done']}"
                        )
                unfinished = [m["id"] for m in (await env.messages(victim_chat)).values() if m.get("done") is False]
                if unfinished:
                    out.victims_unfinished.append(victim_id)
                n += 1
                out.batches = n
                print(f"  batch {n}: {out.frames} frames, {len(out.lost)} good runs lost", file=sys.stderr)
            conn = env.clients["A"].connection
            out.connections = env.clients["A"].connections_opened
            out.gaps = conn.gaps if conn is not None else -1
            out.deaths = owc_deaths(records)
    finally:
        logging.getLogger("owc").removeHandler(handler)
        monkeypatch.undo()
    out.repaired = sum("protocol.frame_repaired" in r.getMessage() for r in records)
    out.bad_frames = sum(r.getMessage().startswith(("gateway.bad_frame", "gateway.bad_event")) for r in records)
    return mutator


class _Collect(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__(logging.INFO)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING or record.getMessage().startswith("gateway.closed"):
            self.records.append(record)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--frames", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=250)
    parser.add_argument("--frames-dir", type=Path, default=FRAMES)
    args = parser.parse_args()
    real = real_frames(args.frames_dir)
    if not real:
        print(f"no frames under {args.frames_dir}", file=sys.stderr)
        return 1
    out = Result()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        mutator = trio.run(fuzz, args.seed, args.frames, args.batch, real, Path(tmp), out)
    elapsed = time.perf_counter() - start
    deaths = sum(d.startswith("gateway.closed") for d in out.deaths)
    print(f"seed {args.seed}: {out.frames:,} mutated frames in {elapsed:.0f} s")
    print(f"  templates: {len(real)} real Gateway frames and the simulator's of a template run")
    print(f"  mutations: {dict(sorted(mutator.counts.items()))}")
    print(f"  owc: {out.bad_frames:,} frames refused and logged, {out.repaired:,} repaired, {out.gaps} gaps")
    print(f"  connection deaths: {deaths} (connections opened {out.connections})")
    print(f"  good runs lost: {len(out.lost)} of {out.good_runs}")
    print(f"  victim messages left done:false: {len(out.victims_unfinished)} of {out.batches}")
    print(f"  batches that did not settle: {len(out.hung)}")
    print(f"  gaps after a batch that owc did not see: {out.gaps_unseen} of {out.batches}")
    print(f"  writer or handler failures logged: {len(out.deaths)}")
    for line in [*out.lost[:10], *out.deaths[:10]]:
        print(f"    {line}")
    bad = deaths or out.lost or out.hung or out.deaths or out.victims_unfinished or out.gaps_unseen
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
