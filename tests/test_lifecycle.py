"""The run lifecycle (``owc/rules/lifecycle.py``), tested without a loop: every state x every input, and the
branches that depend on what the run showed, whether it ended, and whether this process holds its message."""

from __future__ import annotations

import pytest

from owc.rules.lifecycle import (
    INPUT_TYPES,
    Action,
    ClaimOutcome,
    ClaimResult,
    ConnectionClosed,
    Handover,
    Hello,
    IllegalTransition,
    Inline,
    Lifecycle,
    Listed,
    Retry,
    Showable,
    State,
    Stop,
    Terminal,
    TranscriptChecked,
    WriteOutcome,
    WriteResult,
    WriterFailed,
    legal_inputs,
)

INPUTS = {
    "Showable": Showable(),
    "Terminal": Terminal("t"),
    "Stop": Stop(),
    "Handover": Handover(),
    "Inline": Inline(),
    "Listed": Listed(),
    **{f"Claim.{o.name}": ClaimResult(o) for o in ClaimOutcome},
    "Checked.yes": TranscriptChecked(True),
    "Checked.no": TranscriptChecked(False),
    **{f"Write.{o.name}": WriteResult(o) for o in WriteOutcome},
    "Closed": ConnectionClosed(),
    "Hello": Hello("boot"),
    "Retry": Retry(),
    "Failed": WriterFailed(),
}

#: From a fresh run in each state (no facts: nothing shown, not ended, nothing claimed): input -> the state it
#: moves to, plus the actions the shell must take; ``-`` is an illegal input. Reviewed cell by cell against
#: seed 000 sections 2.2-2.7 and NOTES.md's diagram.
TABLE = """
OPEN:
    Showable:CLAIMING+START_WRITER  Terminal:ABANDONED+RETIRE  Stop:OPEN+ABORT_RUN  Handover:-  Inline:INLINE
    Listed:CLAIMING+START_WRITER  Claim.WON:-  Claim.HELD:-  Claim.HELD_ELSEWHERE:-
    Claim.FINISHED:-  Claim.ABSENT:-  Claim.LOCKED:-  Claim.UNAVAILABLE:-  Claim.FAILED:-
    Checked.yes:-  Checked.no:-  Write.WRITTEN:-  Write.FINISHED_ELSEWHERE:-
    Write.NOT_WRITTEN:-  Closed:OPEN  Hello:OPEN  Retry:-  Failed:-
CLAIMING:
    Showable:CLAIMING  Terminal:CLAIMING  Stop:CLAIMING  Handover:-  Inline:-
    Listed:CLAIMING  Claim.WON:STREAMING  Claim.HELD:STANDBY  Claim.HELD_ELSEWHERE:STANDBY
    Claim.FINISHED:DONE+RETIRE  Claim.ABSENT:OPEN  Claim.LOCKED:CLAIMING  Claim.UNAVAILABLE:CLAIMING
    Claim.FAILED:ABANDONED+RETIRE
    Checked.yes:-  Checked.no:-  Write.WRITTEN:-  Write.FINISHED_ELSEWHERE:-
    Write.NOT_WRITTEN:-  Closed:OPEN  Hello:-  Retry:-  Failed:ABANDONED+RETIRE
STREAMING:
    Showable:STREAMING  Terminal:FINALIZING+END_STREAM  Stop:FINALIZING+END_STREAM  Handover:-  Inline:-
    Listed:STREAMING  Claim.WON:-  Claim.HELD:-  Claim.HELD_ELSEWHERE:-
    Claim.FINISHED:-  Claim.ABSENT:-  Claim.LOCKED:-  Claim.UNAVAILABLE:-  Claim.FAILED:-
    Checked.yes:-  Checked.no:-  Write.WRITTEN:-  Write.FINISHED_ELSEWHERE:-
    Write.NOT_WRITTEN:-  Closed:DETACHED  Hello:-  Retry:-  Failed:ABANDONED+RETIRE
STANDBY:
    Showable:STANDBY  Terminal:CLAIMING+START_WRITER  Stop:STANDBY  Handover:-  Inline:-
    Listed:STANDBY  Claim.WON:-  Claim.HELD:-  Claim.HELD_ELSEWHERE:-
    Claim.FINISHED:-  Claim.ABSENT:-  Claim.LOCKED:-  Claim.UNAVAILABLE:-  Claim.FAILED:-
    Checked.yes:-  Checked.no:-  Write.WRITTEN:-  Write.FINISHED_ELSEWHERE:-
    Write.NOT_WRITTEN:-  Closed:OPEN  Hello:-  Retry:-  Failed:-
DETACHED:
    Showable:DETACHED  Terminal:CLAIMING+START_WRITER  Stop:DETACHED  Handover:-  Inline:-
    Listed:CLAIMING+START_WRITER  Claim.WON:-  Claim.HELD:-  Claim.HELD_ELSEWHERE:-
    Claim.FINISHED:-  Claim.ABSENT:-  Claim.LOCKED:-  Claim.UNAVAILABLE:-  Claim.FAILED:-
    Checked.yes:-  Checked.no:-  Write.WRITTEN:-  Write.FINISHED_ELSEWHERE:-
    Write.NOT_WRITTEN:-  Closed:DETACHED  Hello:DETACHED  Retry:-  Failed:-
CHECKING:
    Showable:CHECKING  Terminal:CHECKING  Stop:CHECKING  Handover:-  Inline:-
    Listed:CHECKING  Claim.WON:-  Claim.HELD:-  Claim.HELD_ELSEWHERE:-
    Claim.FINISHED:-  Claim.ABSENT:-  Claim.LOCKED:-  Claim.UNAVAILABLE:-  Claim.FAILED:-
    Checked.yes:CLAIMING  Checked.no:CLAIMING  Write.WRITTEN:-  Write.FINISHED_ELSEWHERE:-
    Write.NOT_WRITTEN:-  Closed:OPEN  Hello:-  Retry:-  Failed:ABANDONED+RETIRE
FINISHING:
    Showable:FINISHING  Terminal:FINISHING  Stop:FINISHING  Handover:-  Inline:-
    Listed:FINISHING  Claim.WON:-  Claim.HELD:-  Claim.HELD_ELSEWHERE:-
    Claim.FINISHED:-  Claim.ABSENT:-  Claim.LOCKED:-  Claim.UNAVAILABLE:-  Claim.FAILED:-
    Checked.yes:-  Checked.no:-  Write.WRITTEN:DONE+RETIRE  Write.FINISHED_ELSEWHERE:DONE+RETIRE
    Write.NOT_WRITTEN:UNSAVED  Closed:OPEN  Hello:-  Retry:-  Failed:ABANDONED+RETIRE
FINALIZING:
    Showable:FINALIZING  Terminal:FINALIZING  Stop:FINALIZING  Handover:-  Inline:-
    Listed:FINALIZING  Claim.WON:-  Claim.HELD:-  Claim.HELD_ELSEWHERE:-
    Claim.FINISHED:-  Claim.ABSENT:-  Claim.LOCKED:-  Claim.UNAVAILABLE:-  Claim.FAILED:-
    Checked.yes:-  Checked.no:-  Write.WRITTEN:DONE+RETIRE  Write.FINISHED_ELSEWHERE:DONE+RETIRE
    Write.NOT_WRITTEN:UNSAVED  Closed:DETACHED  Hello:-  Retry:-  Failed:ABANDONED+RETIRE
INLINE:
    Showable:INLINE  Terminal:INLINE  Stop:INLINE  Handover:CLAIMING+START_WRITER  Inline:-
    Listed:INLINE  Claim.WON:-  Claim.HELD:-  Claim.HELD_ELSEWHERE:-
    Claim.FINISHED:-  Claim.ABSENT:-  Claim.LOCKED:-  Claim.UNAVAILABLE:-  Claim.FAILED:-
    Checked.yes:-  Checked.no:-  Write.WRITTEN:DONE+RETIRE  Write.FINISHED_ELSEWHERE:DONE+RETIRE
    Write.NOT_WRITTEN:UNSAVED  Closed:INLINE  Hello:INLINE  Retry:-  Failed:-
UNSAVED:
    Showable:UNSAVED  Terminal:UNSAVED  Stop:UNSAVED  Handover:UNSAVED  Inline:-
    Listed:UNSAVED  Claim.WON:-  Claim.HELD:-  Claim.HELD_ELSEWHERE:-
    Claim.FINISHED:-  Claim.ABSENT:-  Claim.LOCKED:-  Claim.UNAVAILABLE:-  Claim.FAILED:-
    Checked.yes:-  Checked.no:-  Write.WRITTEN:-  Write.FINISHED_ELSEWHERE:-
    Write.NOT_WRITTEN:-  Closed:UNSAVED  Hello:UNSAVED  Retry:UNSAVED  Failed:-
DONE:
    Showable:DONE  Terminal:DONE  Stop:DONE  Handover:DONE  Inline:-
    Listed:DONE  Claim.WON:-  Claim.HELD:-  Claim.HELD_ELSEWHERE:-
    Claim.FINISHED:-  Claim.ABSENT:-  Claim.LOCKED:-  Claim.UNAVAILABLE:-  Claim.FAILED:-
    Checked.yes:-  Checked.no:-  Write.WRITTEN:-  Write.FINISHED_ELSEWHERE:-
    Write.NOT_WRITTEN:-  Closed:DONE  Hello:DONE  Retry:-  Failed:-
ABANDONED:
    Showable:ABANDONED  Terminal:ABANDONED  Stop:ABANDONED  Handover:ABANDONED  Inline:-
    Listed:ABANDONED  Claim.WON:-  Claim.HELD:-  Claim.HELD_ELSEWHERE:-
    Claim.FINISHED:-  Claim.ABSENT:-  Claim.LOCKED:-  Claim.UNAVAILABLE:-  Claim.FAILED:-
    Checked.yes:-  Checked.no:-  Write.WRITTEN:-  Write.FINISHED_ELSEWHERE:-
    Write.NOT_WRITTEN:-  Closed:ABANDONED  Hello:ABANDONED  Retry:-  Failed:-
"""


def _cells() -> list[tuple[State, str, str]]:
    """The table's cells: a line ``STATE:`` starts a state, the indented lines under it hold its cells."""
    out = []
    state = None
    for line in TABLE.strip().splitlines():
        if not line.startswith(" "):
            state = State[line.rstrip(":")]
            continue
        for cell in line.split():
            name, expected = cell.split(":")
            out.append((state, name, expected))
    return out


def test_the_table_covers_every_state_and_every_input() -> None:
    cells = _cells()
    assert {s for s, _, _ in cells} == set(State)
    assert {name for _, name, _ in cells} == set(INPUTS)
    assert len(cells) == len(State) * len(INPUTS)
    assert {type(i) for i in INPUTS.values()} == set(INPUT_TYPES)


@pytest.mark.parametrize(
    ("state", "name", "expected"), _cells(), ids=lambda v: v.name if isinstance(v, State) else str(v)
)
def test_transition(state: State, name: str, expected: str) -> None:
    life = Lifecycle(state=state)
    if expected == "-":
        with pytest.raises(IllegalTransition):
            life.apply(INPUTS[name])
        assert life.state is state  # an illegal input changes nothing
        assert type(INPUTS[name]) not in legal_inputs(state)
        return
    actions = life.apply(INPUTS[name])
    target, *acts = expected.split("+")
    assert life.state is State[target]
    assert [a.name for a in actions] == acts


def test_only_a_terminal_or_a_stop_ends_a_stream_and_a_handover_starts_a_writer() -> None:
    """What ``owc.runs.run.StreamEnd`` says (issue 26, item 3): the cells that end a writer's stream answer a
    ``Terminal`` or a ``Stop``, and every cell a ``Handover`` moves starts a writer and ends none."""
    ends = {name for _, name, expected in _cells() if "END_STREAM" in expected.split("+")}
    assert ends == {"Terminal", "Stop"}
    moved = [(state, expected) for state, name, expected in _cells() if name == "Handover" and "+" in expected]
    assert moved == [(State.INLINE, "CLAIMING+START_WRITER")]


def test_settled_states_always_retire() -> None:
    for state, name, expected in _cells():
        if expected.split("+")[0] in ("DONE", "ABANDONED") and state not in (State.DONE, State.ABANDONED):
            assert expected.endswith("+RETIRE"), (state, name)


# ------------------------------------------------------------------------------ branches that depend on facts


def test_a_showable_run_that_ends_unclaimed_is_claimed_then_finalized() -> None:
    life = Lifecycle(showable=True)
    assert life.apply(Terminal("chat final")) == (Action.START_WRITER,)
    assert life.state is State.CLAIMING and life.may_create
    life.apply(ClaimResult(ClaimOutcome.WON))
    assert life.state is State.FINALIZING and life.claimed


def test_a_run_that_ends_showing_nothing_but_missed_events_reads_its_transcript() -> None:
    life = Lifecycle(missed=True)
    assert life.apply(Terminal("chat error")) == (Action.START_WRITER,)
    assert life.state is State.CHECKING
    life.apply(TranscriptChecked(True))
    assert life.state is State.CLAIMING and life.may_create  # the same writer makes the message
    life.apply(ClaimResult(ClaimOutcome.WON))
    assert life.state is State.FINALIZING


def test_a_run_that_ends_showing_nothing_and_missed_nothing_gets_no_message() -> None:
    life = Lifecycle()
    assert life.apply(Terminal("chat final")) == (Action.RETIRE,)
    assert life.state is State.ABANDONED


def test_claimed_message_survives_a_drop_and_is_taken_back() -> None:
    life = Lifecycle(state=State.STREAMING, showable=True, claimed=True)
    life.apply(ConnectionClosed())
    assert life.state is State.DETACHED
    assert life.apply(Hello("b2", boot_changed=False)) == ()  # still running as far as anyone knows
    assert life.apply(Listed()) == (Action.START_WRITER,)
    assert life.state is State.CLAIMING
    life.apply(ClaimResult(ClaimOutcome.WON))
    assert life.state is State.STREAMING


def test_a_run_that_ended_during_the_drop_is_finalized_at_the_next_hello() -> None:
    life = Lifecycle(state=State.FINALIZING, showable=True, claimed=True, terminal=Terminal("chat final"))
    life.apply(ConnectionClosed())  # the finalize was cut with its connection
    assert life.state is State.DETACHED
    assert life.apply(Hello("b")) == (Action.START_WRITER,)
    assert life.state is State.CLAIMING
    life.apply(ClaimResult(ClaimOutcome.WON))
    assert life.state is State.FINALIZING


def test_an_unclaimed_ended_run_is_decided_again_at_the_next_hello() -> None:
    life = Lifecycle(state=State.CHECKING, missed=True, terminal=Terminal("chat final"))
    life.apply(ConnectionClosed())
    assert life.state is State.OPEN
    assert life.apply(Hello("b")) == (Action.START_WRITER,)
    assert life.state is State.CHECKING


def test_standby_looks_again_at_the_end() -> None:
    life = Lifecycle(state=State.CLAIMING, showable=True)
    life.apply(ClaimResult(ClaimOutcome.HELD_ELSEWHERE))
    assert life.state is State.STANDBY  # another process streams it: never two streams
    life.apply(Terminal("chat final"))
    assert life.state is State.CLAIMING
    life.apply(ClaimResult(ClaimOutcome.HELD_ELSEWHERE))
    assert life.state is State.FINISHING  # ended: one conditional write, in case that process died
    life.apply(WriteResult(WriteOutcome.FINISHED_ELSEWHERE))
    assert life.state is State.DONE


def test_held_by_a_live_writer_of_this_process_at_the_end_is_left_to_it() -> None:
    life = Lifecycle(state=State.CLAIMING, showable=True, terminal=Terminal("chat final"))
    assert life.apply(ClaimResult(ClaimOutcome.HELD)) == (Action.RETIRE,)
    assert life.state is State.ABANDONED


def test_an_adopt_that_finds_nothing_waits_then_makes_it_when_showable() -> None:
    life = Lifecycle(state=State.CLAIMING, missed=True)
    life.apply(ClaimResult(ClaimOutcome.ABSENT))
    assert life.state is State.OPEN
    assert life.apply(Showable()) == (Action.START_WRITER,)
    assert life.state is State.CLAIMING and life.may_create


def test_showable_while_adopting_makes_the_message_at_once() -> None:
    life = Lifecycle(state=State.CLAIMING)
    life.apply(Showable())
    assert life.apply(ClaimResult(ClaimOutcome.ABSENT)) == (Action.START_WRITER,)
    assert life.state is State.CLAIMING


def test_an_ended_adopt_that_finds_nothing_and_shows_nothing_is_checked_or_dropped() -> None:
    missed = Lifecycle(state=State.CLAIMING, missed=True, terminal=Terminal("absent"))
    missed.apply(ClaimResult(ClaimOutcome.ABSENT))
    assert missed.state is State.CHECKING
    clean = Lifecycle(state=State.CLAIMING, terminal=Terminal("absent"))
    clean.apply(ClaimResult(ClaimOutcome.ABSENT))
    assert clean.state is State.ABANDONED


def test_a_stop_ends_the_stream_and_is_remembered() -> None:
    life = Lifecycle(state=State.STREAMING, showable=True, claimed=True)
    assert life.apply(Stop()) == (Action.END_STREAM,)
    assert life.state is State.FINALIZING and life.stop and life.ended


def test_a_stop_before_anything_showed_only_aborts() -> None:
    life = Lifecycle()
    assert life.apply(Stop()) == (Action.ABORT_RUN,)
    assert life.state is State.OPEN and not life.ended  # the abort's terminal ends it


def test_a_terminal_while_claiming_finalizes_right_after_the_claim() -> None:
    life = Lifecycle(state=State.CLAIMING, showable=True)
    life.apply(Terminal("chat final"))
    life.apply(ClaimResult(ClaimOutcome.WON))
    assert life.state is State.FINALIZING


def test_only_the_first_terminal_counts() -> None:
    life = Lifecycle(state=State.CLAIMING, showable=True)
    life.apply(Terminal("chat error", state="error", error="boom"))
    life.apply(Terminal("sessions.changed end"))
    assert life.terminal is not None and life.terminal.error == "boom"


def test_an_owed_message_is_finished_even_if_the_run_showed_nothing() -> None:
    life = Lifecycle(owed=True, missed=True)
    life.apply(Terminal("ended while owc was away"))
    assert life.state is State.CLAIMING  # no transcript check needed: the message exists, unfinished


def test_handover_gives_the_inline_message_to_a_writer() -> None:
    life = Lifecycle(state=State.INLINE, showable=True)
    assert life.apply(Handover()) == (Action.START_WRITER,)
    assert life.state is State.CLAIMING and life.claimed


def test_hello_records_the_boot() -> None:
    life = Lifecycle()
    life.apply(Hello("boot-2", boot_changed=True))
    assert life.boot_id == "boot-2"
