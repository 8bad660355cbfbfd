"""Random fault schedules played through owc and judged by the tests' oracle (issue 11).

Each seed makes one scenario file (``tests/schedules.py``: chats, hand-driven and scripted runs that say text,
call tools and end every way, queued back to back, heartbeats, silent sentinels, runs on other keys, sends,
drops, slow consumers, cut sockets, failing transcript reads, the four Gateway restart modes, two owc deploys
killed and started). It is played through owc into a fresh SQLite file (``owc/sim/play.py``) in virtual time
(``tests/fuzzing.py``), and ``tests/oracle.py`` checks the design's invariants against what the simulated
Gateway did and what the generator says the schedule must produce. Prints ``passed X of N``; each failing
schedule is written to ``--out`` as it was and, shrunk by delta debugging, as ``seed-N.min.jsonl`` (replay
either with ``owc scenario run FILE --db sqlite:///x.db``). A failure that a known, unfixed bug explains
(``tests/fuzzing.py`` ``KNOWN_BUGS``) is counted and named apart, and shrunk only with ``--shrink-known``.

    python3 bench/fuzz_schedules.py --start 0 --count 1000
    python3 bench/fuzz_schedules.py --seeds ci --repeat 100 --no-shrink   # the CI seeds, 100 plays in a row
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import trio
import trio.testing

ROOT = Path(__file__).resolve().parents[1]
# This checkout's owc, not whichever one is installed (a script's own folder is on the path, its checkout is not:
# run from a second work tree, it played the installed tree's owc).
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fuzzing import judge, known_bug, shrink_failure, virtual_time  # noqa: E402
from oracle import kind_of  # noqa: E402
from schedules import generate  # noqa: E402


def _seed_list(text: str) -> list[int]:
    if text == "ci":
        from test_fuzz_seeds import CI_SEEDS

        return list(CI_SEEDS)
    return [int(part) for part in text.split(",") if part.strip()]


async def main(args: argparse.Namespace, clock: trio.testing.MockClock | None) -> int:
    if clock is None:
        return await fuzz(args)
    async with virtual_time(clock):
        return await fuzz(args)


async def fuzz(args: argparse.Namespace) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    failed: list[int] = []
    known: list[int] = []
    hung: list[int] = []
    started = time.perf_counter()
    seeds = args.seeds if args.seeds else list(range(args.start, args.start + args.count))
    plays = [seed for _ in range(args.repeat) for seed in seeds]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for played, seed in enumerate(plays, 1):
            schedule = generate(seed)
            db = folder / f"{seed}.db"
            problems = await judge(schedule, db)
            db.unlink(missing_ok=True)
            if played % 100 == 0:
                bad = len(failed) + len(known) + bool(problems)
                print(f"progress: {played} played (to seed {seed}), {played - bad} passed", flush=True)
            if not problems:
                continue
            if any(kind_of(p) == "hang" for p in problems):
                hung.append(seed)
            bug = known_bug(schedule, problems)
            (known if bug else failed).append(seed)
            (args.out / f"seed-{seed}.jsonl").write_text(schedule.text())
            (args.out / f"seed-{seed}.problems.json").write_text(json.dumps(problems, indent=1))
            more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
            print(f"seed {seed}: {problems[0][:220]}{more}" + (" [known bug]" if bug else ""), flush=True)
            if args.shrink and (not bug or args.shrink_known):
                small = await shrink_failure(schedule, problems, folder, budget=args.budget)
                (args.out / f"seed-{seed}.min.jsonl").write_text(small.text())
                print(f"seed {seed}: shrunk from {len(schedule.body)} to {len(small.body)} ops", flush=True)
    bad = failed + known
    elapsed = time.perf_counter() - started
    which = (f"{len(seeds)} listed seeds" if args.seeds else f"seeds {args.start}..{args.start + args.count - 1}") + (
        f", {args.repeat} times" if args.repeat > 1 else ""
    )
    print(
        f"passed {len(plays) - len(bad)} of {len(plays)} ({which}, {elapsed:.0f} s)"
        + (f"; failing seeds {failed}" if failed else "")
        + (f"; failing with a known bug {known}" if known else "")
        + (f"; hung (did not settle) {hung}" if hung else ""),
        flush=True,
    )
    return 1 if bad else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--out", type=Path, default=Path("fuzz-failures"), help="where failing schedules are written")
    parser.add_argument("--no-shrink", dest="shrink", action="store_false", help="do not shrink failing schedules")
    parser.add_argument("--shrink-known", action="store_true", help="shrink failures of known bugs too")
    parser.add_argument("--budget", type=int, default=300, help="plays per shrink")
    parser.add_argument("--real-clock", action="store_true", help="play in real time (default: virtual time)")
    parser.add_argument(
        "--seeds",
        type=_seed_list,
        default=None,
        help="play these seeds (comma-separated; 'ci' for tests/test_fuzz_seeds.py CI_SEEDS) instead of a range",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="play the seeds this many times in a row (a race shows as a seed that fails now and then)",
    )
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # owc's own warnings (seq gaps, reconnects) are the faults being injected
    clock = None if args.real_clock else trio.testing.MockClock()
    sys.exit(trio.run(main, args, clock, clock=clock))
