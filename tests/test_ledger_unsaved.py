"""Issue 32, goal 5: what 10,000 runs ending together cost, and what they leave behind.

* The ledger keeps the runs whose message the database would not take (``State.UNSAVED``) apart, so the retry a
  terminal or a write that went through asks for reads those, not every unsettled run (before: 30,000 scans of
  10,000 runs in one finalize burst). The index must always be exactly what a scan would find, in the same order.
* A session's newest row, kept for good by the cuts (``Cuts.rows``), is kept without the push's raw payload.
"""

from __future__ import annotations

import random

from owc import ids
from owc.protocol import SessionRow, SessionsChanged
from owc.rules.lifecycle import _TABLE, IllegalTransition, State
from owc.rules.lifecycle_graph import _variants
from owc.runs.cuts import Cuts
from owc.runs.ledger import Ledger

CHAT = "6f1c1c1e-6a55-4d0e-9d0c-3f2b7a1d0b11"


def _scan(ledger: Ledger) -> list:
    """What ``retry_unsaved`` used to read: every unsettled run in UNSAVED, in the order they were opened."""
    return [run for run in ledger.unsettled() if run.life.state is State.UNSAVED]


def test_the_ledgers_unsaved_runs_are_always_what_a_scan_of_every_run_finds() -> None:
    """Random legal lifecycle inputs to a dozen runs (fed as the run table feeds them: ``apply``, then ``moved``),
    some runs settled and new ones opened on the way: after every step the index holds exactly the UNSAVED runs a
    scan finds, in open order, and never a settled one."""
    rng = random.Random(32)
    inputs = [event for kind in {kind for _, kind in _TABLE} for _, event in _variants(kind)]
    ledger = Ledger()
    key = ids.session_key("main", "u1", CHAT)
    opened = 0
    seen_unsaved = left_unsaved = 0
    for step in range(4000):
        runs = ledger.unsettled()
        if len(runs) < 12:
            ledger.open(key, f"r{opened}")
            opened += 1
            continue
        run = rng.choice(runs)
        if rng.random() < 0.03:
            was = run.life.state is State.UNSAVED
            ledger.retire(run)  # the table's RETIRE (a settled run leaves the index whatever its state)
            left_unsaved += was
        else:
            try:
                run.life.apply(rng.choice(inputs))
            except (IllegalTransition, AssertionError):
                continue
            ledger.moved(run)
        unsaved = ledger.unsaved()
        assert unsaved == _scan(ledger), f"step {step}"
        seen_unsaved += bool(unsaved)
    # The walk went where the index matters: runs were UNSAVED, and some left the ledger while UNSAVED.
    assert seen_unsaved > 100 and left_unsaved > 0


def test_unsaved_runs_come_in_the_order_they_were_opened_even_after_a_pass_placed_one() -> None:
    """A pass that places a run by its transcript replaces ``order``; the retry's order is still open order."""
    ledger = Ledger()
    key = ids.session_key("main", "u1", CHAT)
    runs = [ledger.open(key, f"r{i}") for i in range(3)]
    runs[0].place_in_transcript(5, 9)
    for run in reversed(runs):
        run.life.state = State.UNSAVED  # as the lifecycle leaves it when a write is not taken
        ledger.moved(run)
    assert ledger.unsaved() == runs


def test_a_sessions_row_is_kept_without_its_raw_payload() -> None:
    """The cuts keep a row per session for good: its parsed fields, not the push's payload (3 KB each)."""
    cuts = Cuts(keeper=None)  # type: ignore[arg-type]  # on_row of a session without a cut reads nothing else
    key = ids.session_key("main", "u1", CHAT)
    payload = {"key": key, "status": "running", "hasActiveRun": True, "lastRunId": "r1", "big": "x" * 3000}
    cuts.on_row(None, SessionsChanged(key, has_active_run=True, status="running", last_run_id="r1", raw=payload))  # type: ignore[arg-type]
    kept = cuts.rows[key]
    assert isinstance(kept, SessionsChanged) and not kept.raw
    assert (kept.has_active_run, kept.status, kept.last_run_id) == (True, "running", "r1")
    cuts.on_row(None, SessionRow(key, status="done", has_active_run=False, aborted_last_run=True, raw=payload))  # type: ignore[arg-type]
    kept = cuts.rows[key]
    assert isinstance(kept, SessionRow) and not kept.raw
    assert (kept.has_active_run, kept.status, kept.aborted_last_run) == (False, "done", True)
