"""The ended-while-away rule (``owc.rules.reconcile.runs_owed``), pure: which closed runs a pass owes a message."""

from __future__ import annotations

from typing import Any

from owc.protocol import parse_chat_history
from owc.rules.reconcile import goes_before_owed, runs_owed


def _history(*messages: dict[str, Any]) -> Any:
    return parse_chat_history({"sessionKey": "k", "messages": list(messages)})


def _owed(history: Any, messages: dict[str, Any], *, active: frozenset[str] = frozenset(), unknown: bool = False):
    return runs_owed(
        history,
        messages=messages,
        active=active,
        active_unknown=unknown,
        watermark_ms=1_000,
        message_id_of=lambda run_id: f"m-{run_id}",
    )


def _stub(run_id: str, *, done: bool = False) -> dict[str, Any]:
    return {"role": "assistant", "done": done, "meta": {"openclaw_run": run_id, "openclaw_writer": "dead"}}


def test_a_dead_writers_unfinished_message_of_a_run_the_transcript_never_kept_is_owed() -> None:
    """A crash cut the run before anything of it was stored, and the process that streamed it died: only its
    unfinished message says it ran. The pass finishes it (fuzzer, ``crash-cut-open``, seed 115)."""
    other = {"role": "assistant", "content": "old", "timestamp": 10, "__openclaw": {"runId": "Q"}}
    messages = {"m-Q": {**_stub("Q"), "done": True}, "m-R": _stub("R")}
    owed = _owed(_history(other), messages)
    assert [(o.run_id, o.message_id, o.unfinished) for o in owed] == [("R", "m-R", True)]
    # Not while the list shows it active, or shows the session active without saying which run is.
    assert _owed(_history(other), messages, active=frozenset({"R"})) == []
    assert _owed(_history(other), messages, unknown=True) == []
    # Not a message whose id does not follow from its run (not owc's), nor a finished one.
    assert _owed(_history(other), {"x": _stub("R")}) == []
    assert _owed(_history(other), {"m-R": _stub("R", done=True)}) == []


def test_a_run_the_transcript_shows_is_owed_once() -> None:
    mine = {"role": "assistant", "content": "hi", "timestamp": 2_000, "__openclaw": {"runId": "R"}}
    owed = _owed(_history(mine), {"m-R": _stub("R")})
    assert [(o.run_id, o.unfinished, o.first_ms) for o in owed] == [("R", True, 2_000)]


def test_a_first_pass_owes_runs_after_the_last_one_the_chat_holds_whatever_the_clocks_say() -> None:
    """A process's first watermark is this host's time; the Gateway's clock may be behind it. Runs after the newest
    run the chat holds a message of are owed by transcript order; older ones still go by the watermark."""
    old = {"role": "assistant", "content": "before owc", "timestamp": 100, "__openclaw": {"runId": "P"}}
    held = {"role": "assistant", "content": "written", "timestamp": 500, "__openclaw": {"runId": "Q"}}
    late = {"role": "assistant", "content": "while down", "timestamp": 600, "__openclaw": {"runId": "R"}}
    messages = {"m-Q": {**_stub("Q"), "done": True}}
    history = _history(old, held, late)
    assert _owed(history, messages) == []  # by the watermark (1,000) alone, R looks older than owc's last write
    owed = runs_owed(
        history,
        messages=messages,
        active=frozenset(),
        active_unknown=False,
        watermark_ms=1_000,
        message_id_of=lambda run_id: f"m-{run_id}",
        after_last_message=True,
    )
    assert [o.run_id for o in owed] == ["R"]  # P (before the held run) stays history from before owc


def test_a_first_pass_owes_the_sessions_last_run_when_the_chat_holds_no_run_yet() -> None:
    """The chat holds no message of any run, and the Gateway's clock is a few ms behind this host: the run that
    ended unseen looks older than the chat's own write. The hello's list names it the session's last run and the
    chat lacks its message: owed (CI, 1 play in 30 of ``test_a_reconcile_that_fell_short_runs_again_at_the_next_tick``).
    Earlier runs still go by the watermark; and a later pass (the watermark is then the Gateway's own time) does not
    use the list's word."""
    old = {"role": "assistant", "content": "before owc", "timestamp": 100, "__openclaw": {"runId": "P"}}
    late = {"role": "assistant", "content": "while down", "timestamp": 997, "__openclaw": {"runId": "R"}}
    history = _history(old, late)

    def owed(*, first_pass: bool, messages: dict[str, Any]) -> list[str]:
        return [
            o.run_id
            for o in runs_owed(
                history,
                messages=messages,
                active=frozenset(),
                active_unknown=False,
                watermark_ms=1_000,
                message_id_of=lambda run_id: f"m-{run_id}",
                after_last_message=first_pass,
                last_run="R",
            )
        ]

    assert owed(first_pass=True, messages={}) == ["R"]
    assert owed(first_pass=False, messages={}) == []
    assert owed(first_pass=True, messages={"m-R": {**_stub("R"), "done": True}}) == []  # held: nothing owed


def test_a_run_behind_a_pass_goes_before_the_run_owed_next_only_if_it_began_first() -> None:
    """``goes_before_owed``, cell by cell: transcript order is exact; Gateway times decide otherwise, and at an equal
    millisecond a run first seen under an earlier boot goes first (it began before the boot), while one of the pass's
    own boot keeps the place's tie-break (the transcript's run first)."""
    t = 1_000
    # Nothing owed that it could have to follow.
    assert goes_before_owed((t, 1, 5), None, earlier_boot=False)
    assert goes_before_owed((t, 1, 5), None, earlier_boot=True)
    # Placed by the same transcript (rank 0): its index decides, whatever the boot.
    for earlier_boot in (False, True):
        assert goes_before_owed((t, 0, 1), (t, 0, 2), earlier_boot=earlier_boot)
        assert not goes_before_owed((t, 0, 3), (t, 0, 2), earlier_boot=earlier_boot)
    # Strictly earlier or later in time: the times decide, whatever the boot.
    for earlier_boot in (False, True):
        assert goes_before_owed((t - 1, 1, 9), (t, 0, 0), earlier_boot=earlier_boot)
        assert not goes_before_owed((t + 1, 1, 1), (t, 0, 0), earlier_boot=earlier_boot)
    # An equal millisecond: the pass's own boot keeps the tie-break (a run not in the window stored nothing yet: the
    # newest); one an earlier boot showed began before the boot, so before the new boot's recovery (seed 61010).
    assert not goes_before_owed((t, 1, 1), (t, 0, 0), earlier_boot=False)
    assert goes_before_owed((t, 1, 1), (t, 0, 0), earlier_boot=True)
