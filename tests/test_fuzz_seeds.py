"""A fixed set of random fault schedules (``tests/schedules.py``) played through owc and judged by the oracle
(``tests/oracle.py``), plus the generator's and the shrinker's own checks. ``bench/fuzz_schedules.py`` plays
any number of seeds and shrinks the failing ones.

A seed whose every problem is a known, unfixed product bug (``fuzzing.KNOWN_BUGS``) is an xfail naming the
bug (not strict: once the fix lands it passes); any other problem fails with the schedule to replay."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import trio

from owc.sim.play import open_owc_with_simulator
from owc.sim.scenario import ScenarioPlayer, parse_scenario

from fuzzing import FIXED_BUGS, KNOWN_BUGS, judge, known_bug, virtual_time
from oracle import check_database
from schedules import MAY, SHOW, SILENT_FATE, build, generate, header, shrink

#: Seeds played in CI: ~0.3 s of CPU each in virtual time. Beyond the first 300, seeds that found a bug the
#: earlier fixed set did not (a schedule's outcome can depend on thread timing, so each is played every run):
#: 3669 and 9652 (a pass cut by its connection's close, a Gateway clock a little behind), 432, 1830 and 5314 (a
#: live claim below later runs another process gave their messages first).
#: 40536 (the oracle's streamed tail of a killed process), 41454 (the simulator's record of a killed process's
#: socket, as seed 282). 40434's hang is played by its repro (``recovered-elsewhere-hang``): its full schedule still
#: loses a cut run's streamed text in some plays (NOTES, issue 24's hangs and races). 30151 (a hold on a row whose
#: later run was taken for the boot's recovery: a hang) and 77089 (the cut-off note on a run that ended aborted).
#: 80279: a cut heartbeat that spoke, whose recovery belongs in its message (issue 24 item 6). 40164: a crash-cut
#: run's stream another deploy's recovery finished first (class A). 80211, 80221: a run whose end the transcript
#: hides, given the newer-run note (issue 24 item 3). 80324: a recovery's wait circle at one Gateway millisecond
#: (item 12). 61010: a run an earlier boot showed, carried behind a pass, and the new boot's recovery in its
#: millisecond (``earlier-boot-behind-recovery``). 41332: a cut made at a stop's notice, whose recovery the other
#: deploy gave a message of its own (``Cuts.on_boot_row``). 141646: a correction that kept an empty finish's note.
#: 141731: a hold for an announce that settled before the boot, taken for its recovery (``settled_before_boot``).
#: 151800: a run whose final fell in a drop, taken for the boot's cut beside the queued run the crash cut.
#: 150995: a recovery owc linked to the cut it held where nothing it reads tells which run the boot recovered (the
#: oracle's ``indistinct_link``). 211298, 150408: a joiner's stream of a crash-cut run, added to the message another
#: deploy finished first (``shown_in_front``'s ``missed``). 212956: a short finish whose process was killed before
#: its correction ran.
#: 150240: a heartbeat a crash cut before it stored anything but its hidden prompt, its recovery linked into the
#: earlier run's message owc held as the cut (``recovery-of-unstored-heartbeat``, ``link.heartbeat_recovered``).
#: 302660: a heartbeat that started after a gap showed and ended in its list's answer (``heartbeat-end-in-gap``).
#: 320774, 320809: a gap's pass cut short by a close (``gap-pass-cut``) or by a failing read (``gap-pass-failed``).
#: 322656: a silent sentinel in a joiner's run-wide text taken for the transcript's text gone on.
#: 305323: a heartbeat a pass found, claimed under a later run, ordered by a read from before its claim
#: (``order-read-before-claim``, ``Reading.before_claim``).
#: 333762: a silent run the transcript does not show, held for the whole pass while a later run the pass let go waited
#: for it (``unplaced-run-held-by-pass``: a wait circle).
#: 375143: a heartbeat's end lost in a drop, the cron run queued behind it claimed first (``earlier-run-end-lost``).
#: 399767: a recovery the transcript names as an earlier run's, linked into the cut owc held when the two runs'
#: times fell in one millisecond (``named-earlier-linked-to-held``, ``link.began_before``).
#: 428467: an error missed in a drop, its finalize without a transcript, its correction without the error
#: (``error-missed-corrected``).
#: 371031: as 150995, after the cut run's silent final reply, which chat.history hides like the completion (the
#: oracle judges "ended" on what owc can read).
CI_SEEDS = [
    *range(300),
    432,
    1830,
    3669,
    5314,
    9652,
    20686,
    20808,
    30151,
    30199,
    30468,
    40164,
    40536,
    41332,
    41454,
    61010,
    77089,
    80211,
    80221,
    80279,
    80324,
    141646,
    141731,
    100552,
    102690,
    151800,
    150995,
    150032,
    211298,
    150408,
    212956,
    150240,
    302660,
    320774,
    320809,
    322656,
    305323,
    333762,
    371031,
    375143,
    399767,
    428467,
]


@pytest.mark.parametrize("seed", CI_SEEDS)
async def test_fuzz_seed(seed: int, tmp_path: Path, mock_clock) -> None:
    schedule = generate(seed)
    async with virtual_time(mock_clock):  # ticks, backoffs and downtimes cost no real time (see fuzzing.py)
        problems = await judge(schedule, tmp_path / "webui.db")
    if problems:
        bug = known_bug(schedule, problems)
        if bug is not None:
            pytest.xfail(f"known bug: {bug}")
        listing = "\n".join(problems[:20])
        pytest.fail(
            f"seed {seed}: {len(problems)} problems\n{listing}\n"
            f"replay: python3 bench/fuzz_schedules.py --start {seed} --count 1\n{schedule.text()}"
        )


def test_schedules_are_deterministic_and_parse() -> None:
    for seed in range(300):
        a, b = generate(seed), generate(seed)
        assert a.text() == b.text() and a.expect == b.expect
        parse_scenario(a.text())  # the scenario language accepts every op it writes
        assert a.ops[-1] == {"op": "wait"}


def test_the_generator_covers_every_fault() -> None:
    seen: set[str] = set()
    for seed in range(300):
        seen |= generate(seed).features
    assert {
        "queued", "heartbeat", "sentinel", "sentinel-prefix", "other-key", "send", "slow", "drop", "away", "kill",
        "deploys", "history-fails", "restart-restart", "restart-stop", "restart-container", "restart-crash",
        # issue 24's shapes
        "error-away", "error-drop", "newer-during-restart", "cut-after-tool", "owui-teardown",
        "heartbeat-after-silent",
    } <= seen  # fmt: skip


def test_the_model_knows_what_each_run_must_produce() -> None:
    body = [
        {"op": "run", "run": "shown", "chat": "a"},
        {"op": "text", "run": "shown", "text": "Hello."},
        {"op": "run", "run": "queued", "chat": "a"},  # behind "shown": it begins when "shown" ends
        {"op": "text", "run": "queued", "text": "too early"},  # not running yet: repaired away
        {"op": "end", "run": "shown"},
        {"op": "text", "run": "queued", "text": "NO_REPLY"},
        {"op": "run", "run": "beat", "chat": "b", "heartbeat": True},
        {"op": "tool", "run": "beat", "name": "exec"},
        {"op": "run", "run": "elsewhere", "key": "main"},
        {"op": "text", "run": "elsewhere", "text": "Hi."},
        {"op": "run", "run": "cut", "chat": "c"},
        {"op": "text", "run": "cut", "text": "Live only."},
        {"op": "run", "run": "cut-tool", "chat": "b", "steps": [{"text": "x"}, {"end": "final"}]},
        {"op": "restart", "mode": "crash"},
        {"op": "run", "run": "after", "chat": "c"},  # a recovery may run on c: a wait is put before it
    ]
    s = build(body)
    assert {"op": "text", "run": "queued", "text": "too early"} not in s.ops
    assert s.expect == {
        "shown": SHOW,
        "queued": SILENT_FATE,
        "beat": SHOW,  # a heartbeat's tool call, persisted before the crash: shown as the Gateway's chat shows it
        "elsewhere": SILENT_FATE,
        "cut": MAY,
        "cut-tool": SILENT_FATE,  # queued behind the heartbeat run on b when the crash came: never began
        "after": SILENT_FATE,
    }
    assert s.order["a"] == ["shown", "queued"]
    index = s.ops.index({"op": "run", "run": "after", "chat": "c"})
    assert s.ops[index - 2 : index] == [{"op": "await_clients", "count": 1}, {"op": "wait"}] or s.ops[index - 1] == {
        "op": "wait"
    }
    parse_scenario(s.text())


def test_shrinking_keeps_the_schedule_valid_and_failing() -> None:
    s = generate(12)

    def fails(candidate) -> bool:  # "fails" when some run calls a tool while owc2 is connected
        parse_scenario(candidate.text())
        return any(op["op"] == "tool" for op in candidate.body) and "deploys" in candidate.features

    if not fails(s):
        s = build([{"op": "connect", "deploy": "owc2"}, *s.body])
    assert fails(s)
    small = shrink(s, fails)
    assert fails(small)
    kinds = [op["op"] for op in small.body]
    assert sorted(kinds) == ["connect", "run", "tool"], small.body


SKEWED = """
{"op": "chat", "chat": "a"}
{"op": "connect", "deploy": "owc"}
{"op": "run", "chat": "a", "run": "r1"}
{"op": "text", "run": "r1", "text": "Written live."}
{"op": "end", "run": "r1"}
{"op": "wait"}
{"op": "kill", "deploy": "owc"}
{"op": "run", "chat": "a", "run": "r2"}
{"op": "text", "run": "r2", "text": "Ended while owc was down."}
{"op": "end", "run": "r2"}
{"op": "start", "deploy": "owc"}
{"op": "wait"}
"""


async def test_a_gateway_clock_behind_the_databases_hides_no_run_that_ended_while_owc_was_down(
    tmp_path: Path, mock_clock
) -> None:
    """Found by the fuzzer: a process's first pass took the database host's time for its watermark, compared with
    the Gateway's; with the Gateway's clock behind, a run that ended while owc was down, soon after owc's last
    write, was never given its message. The pass now also goes by the transcript's order (runs after the last one
    the chat holds) and by the session's ``lastRunId``."""
    url = f"sqlite:///{tmp_path / 'webui.db'}"
    async with virtual_time(mock_clock), open_owc_with_simulator(url) as (sim, deployments):
        sim.skew(-3000)  # the Gateway's clock 3 s behind this host's (two hosts never agree exactly)
        player = ScenarioPlayer(sim, deployments)
        await player.play(parse_scenario(SKEWED))
        names = {spec.chat_id: name for name, spec in player.chats.items()}
        assert check_database(sim, url, names) == []


REPROS = sorted((Path(__file__).parent / "fuzz_repros").glob("*.jsonl"))


def _schedule_of(path: Path):
    ops = [json.loads(line) for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return build(ops[len(header()) :])


def test_every_shrunk_reproduction_is_a_valid_schedule_of_a_known_bug() -> None:
    assert {p.stem for p in REPROS} <= set(KNOWN_BUGS) | set(FIXED_BUGS)
    for path in REPROS:
        ops = [json.loads(line) for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
        assert _schedule_of(path).ops == ops, path.name  # nothing in it is repaired away or added
        parse_scenario(path.read_text())


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(p, marks=pytest.mark.xfail(strict=False, reason=f"known bug: {KNOWN_BUGS[p.stem]}"))
        if p.stem in KNOWN_BUGS
        else p
        for p in REPROS
    ],
    ids=[p.stem for p in REPROS],
)
async def test_shrunk_reproduction(path: Path, tmp_path: Path, mock_clock) -> None:
    """The fuzzer's shrunk reproductions of the bugs it found (``tests/fuzz_repros``; replay one with ``owc scenario
    run``): one of a known bug fails until it is fixed (some only in some plays: they are races); one of a fixed
    bug is a regression test."""
    schedule = _schedule_of(path)
    async with virtual_time(mock_clock):
        problems = await judge(schedule, tmp_path / "webui.db")
    if problems and (bug := known_bug(schedule, problems)) is not None:
        pytest.xfail(f"known bug: {bug}")  # another, open bug shows in it too (issue 24's checks)
    assert problems == []


async def test_virtual_time_jumps_over_timers_but_never_while_a_thread_works(mock_clock) -> None:
    async with virtual_time(mock_clock):
        started = trio.current_time()
        await trio.sleep(600)  # ten virtual minutes: a jump, not a wait
        assert trio.current_time() - started >= 600
        before = trio.current_time()
        with trio.move_on_after(5):  # a deadline the clock would jump to while the thread works
            await trio.to_thread.run_sync(time.sleep, 0.3)
        assert trio.current_time() - before < 5
