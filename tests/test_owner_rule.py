"""The owner rule (``owc/rules/owner.py``; seed 000 section 2.7): who continues a cut run. Every row of the
seed's table, from a settled push and from a post-hello list (the same row either way), and the exit texts."""

from __future__ import annotations

import pytest

from owc.rules.owner import (
    MAX_RESUMES,
    Heard,
    Owner,
    Row,
    Seen,
    continues,
    empty_finish_note,
    ended_before,
    may_resume,
    outside_kill,
    owner,
    row_at_terminal,
    settled_before_boot,
)

R = "run-1"
TERMINAL = Seen(terminal=True)
STOP_NOTICE = Seen(terminal=True, notice_before_terminal=True, restart_expected=False)
RESTART_NOTICE = Seen(terminal=True, notice_before_terminal=True, restart_expected=True)


@pytest.mark.parametrize(
    ("row", "seen", "expected"),
    [
        # Row 1: a newer run is the session's: it decides.
        (Row("failed", last_run_id="run-2", last_run_error="process exited with code 143"), TERMINAL, Owner.NEWER_RUN),
        # Row 2: the Gateway recovers what is still running, or a run whose terminal never came (a crash).
        (Row("running", last_run_id=R), Seen(terminal=False), Owner.GATEWAY),
        (Row("running", has_active_run=True, last_run_id=R), RESTART_NOTICE, Owner.GATEWAY),  # restart mode
        (Row(None), Seen(terminal=False), Owner.GATEWAY),  # neither a row nor a terminal: the Gateway's
        # Row 3: never into a busy session.
        (Row("failed", has_active_run=True, last_run_id=R, last_run_error="code 143"), TERMINAL, Owner.WAIT),
        # Row 4: an outside kill (container stop, SIGKILL, OOM): owc resumes.
        (
            Row("failed", last_run_id=R, last_run_error="Claude Code process exited with code 143"),
            TERMINAL,
            Owner.RESUME,
        ),
        (Row("failed", last_run_id=R, last_run_error="Codex process exited with code 137"), TERMINAL, Owner.RESUME),
        (Row("failed", last_run_id=R, last_run_error="process exited with signal SIGKILL"), TERMINAL, Owner.RESUME),
        # Row 5: killed after a stop-mode notice on this connection: owc resumes.
        (Row("killed", last_run_id=R), STOP_NOTICE, Owner.RESUME),
        # ... also when the close came before any terminal: the post-hello list's row says how it ended.
        (Row("killed", last_run_id=R), Seen(terminal=False, notice_before_terminal=True), Owner.RESUME),
        (Row("failed", last_run_id=R, last_run_error="process exited with code 137"), Seen(False), Owner.RESUME),
        # Row 6: killed with no notice (a user's or an RPC's abort), or after a restart notice: a Stop.
        (Row("killed", last_run_id=R), TERMINAL, Owner.STOP),
        (Row("killed", last_run_id=R), RESTART_NOTICE, Owner.STOP),
        (Row("killed", last_run_id=R), Seen(terminal=False), Owner.STOP),  # persisted killed, no notice
        # Row 7: any other failure is a real error; a CLI exit 1 is not an outside kill.
        (Row("failed", last_run_id=R, last_run_error="Claude Code process exited with code 1"), TERMINAL, Owner.ERROR),
        (Row("failed", last_run_id=R, last_run_error="rate limited"), TERMINAL, Owner.ERROR),
        (Row("failed", last_run_id=R), TERMINAL, Owner.ERROR),
        # A run that simply finished.
        (Row("done", last_run_id=R), TERMINAL, Owner.DONE),
        (Row(None), TERMINAL, Owner.DONE),
    ],
)
def test_every_row_of_the_owner_table(row: Row, seen: Seen, expected: Owner) -> None:
    assert owner(R, row, seen) is expected


@pytest.mark.parametrize(
    ("text", "killed"),
    [
        ("Claude Code process exited with code 143", True),
        ("process exited with code 137.", True),
        ("process exited with signal SIGTERM", True),
        ("process exited with signal SIGKILL", True),
        ("process exited with code 1", False),
        ("process exited with code 1430", False),
        ("process exited with code 14", False),
        ("exited with code 143", False),  # not the transport's sentence
        ("", False),
        (None, False),
    ],
)
def test_the_outside_kill_exit_texts(text: str | None, killed: bool) -> None:
    assert outside_kill(text) is killed


def test_the_resume_budget_is_a_count() -> None:
    assert [may_resume(n) for n in range(MAX_RESUMES + 2)] == [True] * MAX_RESUMES + [False, False]


@pytest.mark.parametrize(
    ("state", "stop_reason", "error", "notice", "expected"),
    [
        ("aborted", "restart", None, RESTART_NOTICE, Owner.GATEWAY),  # restart mode keeps M open
        ("aborted", "rpc", None, STOP_NOTICE, Owner.RESUME),  # stop mode: nobody recovers, owc resumes
        ("aborted", "rpc", None, TERMINAL, Owner.STOP),  # a user's abort
        ("error", None, "Claude Code process exited with code 143", TERMINAL, Owner.RESUME),  # container stop
        ("error", None, "model refused", TERMINAL, Owner.ERROR),
        ("final", "stop", None, TERMINAL, Owner.DONE),
    ],
)
def test_the_row_a_terminal_implies(state, stop_reason, error, notice, expected) -> None:
    assert owner(R, row_at_terminal(state, stop_reason, error, R), notice) is expected


def test_a_pushed_row_fills_in_the_terminal() -> None:
    push = Row("running", has_active_run=True, last_run_id=R, last_run_error="Codex process exited with code 137")
    row = row_at_terminal("error", None, None, R, push)
    assert row.status == "failed" and row.last_run_error.endswith("137") and not row.has_active_run
    assert owner(R, row_at_terminal("aborted", "rpc", None, R, Row("killed", last_run_id="later")), TERMINAL) is (
        Owner.NEWER_RUN
    )
    assert continues(Owner.GATEWAY) and continues(Owner.RESUME) and continues(Owner.WAIT)
    assert not any(continues(o) for o in (Owner.STOP, Owner.ERROR, Owner.NEWER_RUN, Owner.DONE))


@pytest.mark.parametrize(
    ("status", "updated_at", "booted_at", "before"),
    [
        ("done", 999, 1000, True),  # settled by the process before the boot
        ("killed", 1, 1000, True),
        ("failed", 999, 1000, True),
        ("done", 1000, 1000, False),  # the boot's own millisecond: not told apart, judged as without a time
        ("done", 1001, 1000, False),  # after the boot: may be its recovery
        ("running", 1, 1000, False),  # a row left running is what a boot recovers
        (None, 1, 1000, False),
        ("done", None, 1000, False),  # a time unknown: judged as without one
        ("done", 999, None, False),
    ],
)
def test_a_row_settled_before_the_boot(status, updated_at, booted_at, before) -> None:
    """Fuzz seed 141731: a newer run whose row settled before the boot began is not that boot's recovery."""
    assert settled_before_boot(status, updated_at, booted_at) is before


BOOT, NEXT_BOOT = "boot-1", "boot-2"


@pytest.mark.parametrize(
    ("run", "other", "ended"),
    [
        # The other run's first event came after this run's last one, under the same boot: this run had ended.
        (Heard(BOOT, 1, 1), Heard(BOOT, 2, 5), True),  # a heartbeat heard only at its start, then a queued run
        (Heard(BOOT, 1, 3), Heard(BOOT, 4, 4), True),
        # Its events came first: the other ran before it (or they are one run's), so it may be the one cut.
        (Heard(BOOT, 4, 6), Heard(BOOT, 1, 3), False),
        (Heard(BOOT, 1, 3), Heard(BOOT, 1, 3), False),
        # Their events interleave: no order is known (a straggler of one among the other's): nothing said.
        (Heard(BOOT, 1, 4), Heard(BOOT, 3, 6), False),
        # Another boot's run (the boot's recovery, a run it admitted) says nothing of how the old boot ended it.
        (Heard(BOOT, 1, 1), Heard(NEXT_BOOT, 2, 2), False),
        # No boot id to tell boots apart; never heard (opened by a hand-over, a list, a transcript).
        (Heard(None, 1, 1), Heard(None, 2, 2), False),
        (None, Heard(BOOT, 2, 2), False),
        (Heard(BOOT, 1, 1), None, False),
    ],
)
def test_a_run_heard_before_another_run_of_its_session_had_ended(run, other, ended) -> None:
    """Fuzz seed 151800: a heartbeat's final (after a tool call, ``NO_REPLY``) fell in a drop, a queued
    ``sessions_send`` then ran and a crash cut it; only the later run was the boot's to cut (``ended_before``)."""
    assert ended_before(run, other) is ended


def test_the_note_of_an_empty_finish_says_cut_off_only_for_a_cut() -> None:
    """A run that ended ``final`` whose transcript could not be read was not cut: no cut-off wording (issue 24
    item 3's rule, the recorded gap of seed 141646); any other empty finish says nothing was saved, and why. Both
    are notes a later fill drops (``EMPTY_FINISH_NOTES``)."""
    from owc.rules.owner import CUT_OFF, EMPTY_FINISH_NOTES, NOT_READ_NOTE

    assert empty_finish_note("final", "chat final", True) == NOT_READ_NOTE and CUT_OFF not in NOT_READ_NOTE
    crashed = empty_finish_note(None, "the Gateway restarted (a new boot): no run outlives its boot", True)
    assert crashed.startswith(CUT_OFF) and crashed.endswith("(the Gateway restarted).")
    assert empty_finish_note("final", "chat final", False).startswith(CUT_OFF)  # read, and empty: nothing saved
    assert empty_finish_note("aborted", None, True).endswith("(it was stopped).")
    notes = [empty_finish_note(s, "r", f) for s in ("final", "error", None) for f in (True, False)]
    assert all(note.startswith(EMPTY_FINISH_NOTES) for note in notes)


#: Every ``Terminal.reason`` owc makes (owc/runs: table.py, inline.py, reconcile.py), as it makes them.
TERMINAL_REASONS = [
    "chat final",
    "chat error",
    "chat aborted",
    "chat.send ok",
    "sessions.changed end",
    "sessions.changed error",
    "it ended before a later run of its session ran",
    "the Gateway restarted (a new boot): no run outlives its boot",
    "absent from the list at hello (it ended while the connection was down)",
    "absent from the list (gap)",
    "absent from the list (hello)",
    "ended while owc was away",
]


@pytest.mark.parametrize("reason", TERMINAL_REASONS)
def test_an_empty_finish_says_why_in_a_readers_words_never_the_protocols(reason: str) -> None:
    """Issue 24's known gap: the note of an empty finish put owc's log reason in the chat ("... saved (absent from
    the list (gap)).", "(chat final)", "(sessions.changed end)"). The note names a cause a reader understands, or
    none; never a protocol term."""
    from owc.rules.owner import NOTHING_SAVED_PREFIX

    for state in (None, "final", "error"):
        note = empty_finish_note(state, reason, False)
        assert note.startswith(NOTHING_SAVED_PREFIX)
        for term in ("chat ", "chat.send", "sessions.", "list", "hello", "gap", "boot", "final", "(chat"):
            assert term not in note, (reason, note)
