"""Random fault schedules played through owc and judged by the tests' oracle (issue 11, a first version).

Each seed makes one scenario file (docs/scenarios.md): three chats, runs that say text, call tools and end every
way, dropped events, cut sockets, the four Gateway restart modes, and owc's process killed and started again.
It is played through owc into a fresh SQLite file (`owc/sim/play.py`), and `tests/oracle.py` checks the design's
invariants against what the simulated Gateway did. Prints ``passed X of N`` and writes each failing schedule to
``--out`` so it can be replayed with ``owc scenario run``. No shrinking yet.

    python3 bench/fuzz_schedules.py --start 0 --count 100
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from owc.sim.play import play_scenario  # noqa: E402

from oracle import check  # noqa: E402

CHATS = ("a", "b", "c")
TEXTS = ("Hello there.", "Working on it.", "NO_REPLY", "Done.")


def schedule(seed: int) -> str:
    """One random schedule; it never drives a run the simulator no longer runs (a restart ends them all)."""
    r = random.Random(seed)
    ops: list[dict[str, Any]] = [{"op": "chat", "chat": c, "user": "u"} for c in CHATS]
    ops.append({"op": "connect", "deploy": "owc"})
    active: dict[str, str] = {}
    n = 0
    for _ in range(r.randint(8, 30)):
        x = r.random()
        free = [c for c in CHATS if c not in active]
        if x < 0.25 and free:
            chat = r.choice(free)
            n += 1
            active[chat] = f"r{n}"
            ops.append({"op": "run", "chat": chat, "run": f"r{n}", "origin": r.choice(["cron", "sessions_send"])})
        elif x < 0.5 and active:
            ops.append({"op": "text", "run": active[r.choice(list(active))], "text": r.choice(TEXTS)})
        elif x < 0.62 and active:
            run = active[r.choice(list(active))]
            ops.append({"op": "tool", "run": run, "name": "exec", "args": {"i": n}, "result": "ok"})
        elif x < 0.75 and active:
            state = r.choice(["final", "final", "error", "aborted"])
            end: dict[str, Any] = {"op": "end", "run": active.pop(r.choice(list(active))), "state": state}
            if state == "error":
                end["error"] = "boom"
            ops.append(end)
        elif x < 0.82:
            ops.append({"op": "drop", "count": r.randint(1, 5)})
        elif x < 0.87:
            ops.append({"op": "disconnect"})
        elif x < 0.91:
            ops.append({"op": "restart", "mode": r.choice(["restart", "stop", "container", "crash"])})
            ops.append({"op": "await_clients"})
            active.clear()
        elif x < 0.95:
            ops.append({"op": "kill", "deploy": "owc"})
            for _ in range(r.randint(0, 3)):
                if active:
                    ops.append({"op": "text", "run": active[r.choice(list(active))], "text": "While owc was down."})
            ops.append({"op": "start", "deploy": "owc"})
        elif not active:
            ops.append({"op": "wait"})
    ops.extend({"op": "end", "run": run} for run in active.values())
    ops.append({"op": "wait"})
    return "\n".join(json.dumps(op) for op in ops) + "\n"


async def play(seed: int, folder: Path) -> list[str]:
    text = schedule(seed)
    with trio.fail_after(120):  # a bench's own bound on a hung play: it reports the seed, it decides nothing
        played = await play_scenario(text, f"sqlite:///{folder / f'{seed}.db'}")
    chats = {spec.chat_id: (name, played.chats[name]) for name, spec in played.player.chats.items()}
    problems = check(played.player.sim, chats)
    problems += [f"{chat}: {run} NOT FINISHED" for chat, run in played.unfinished]
    problems += [f"{chat}: {run} MISSING" for chat, run in played.missing]
    return problems


async def main(args: argparse.Namespace) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.start, args.start + args.count):
            try:
                problems = await play(seed, Path(tmp))
            except Exception as exc:  # a crash of the play is a finding like any other
                problems = [f"play failed: {type(exc).__name__}: {exc}"]
            if problems:
                failed.append(seed)
                (args.out / f"seed-{seed}.jsonl").write_text(schedule(seed))
                print(
                    f"seed {seed}: {problems[0][:200]}" + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else "")
                )
    print(f"passed {args.count - len(failed)} of {args.count}" + (f"; failing seeds {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--out", type=Path, default=Path("fuzz-failures"), help="where failing schedules are written")
    sys.exit(trio.run(main, parser.parse_args()))
