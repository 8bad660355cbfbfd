"""The owner rule (``owc/rules/owner.py``; seed 000 section 2.7): who continues a cut run. Every row of the
seed's table, from a settled push and from a post-hello list (the same row either way), and the exit texts."""

from __future__ import annotations

import pytest

from owc.rules.owner import MAX_RESUMES, Owner, Row, Seen, may_resume, outside_kill, owner

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
        (Row("killed", last_run_id=R), Seen(terminal=False), Owner.GATEWAY),  # no terminal reached us
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
        # Row 6: killed with no notice (a user's or an RPC's abort), or after a restart notice: a Stop.
        (Row("killed", last_run_id=R), TERMINAL, Owner.STOP),
        (Row("killed", last_run_id=R), RESTART_NOTICE, Owner.STOP),
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
