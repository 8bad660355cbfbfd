"""The cut machine (``owc/rules/cut.py``), tested without a loop: every state x every input, and the branches that
depend on the owner, a held resume id, a tick past a notice and what the driver's facts say."""

from __future__ import annotations

import pytest

from owc.rules.cut import (
    FINAL,
    INPUT_TYPES,
    LIVE,
    Action,
    Classify,
    ContinuedElsewhere,
    CutMachine,
    CutState,
    Hello,
    IllegalTransition,
    Linked,
    NobodyContinues,
    Reserved,
    SendAbandoned,
    SendOutcome,
    Sent,
    Session,
    SessionRow,
    Settled,
    SettleOutcome,
    Tick,
    Uncut,
    Why,
    legal_inputs,
)
from owc.rules.owner import (
    BUDGET_NOTE,
    CUT_OFF,
    MAX_RESUMES,
    NEWER_RUN_NOTE,
    RECOVERY_FAILED_NOTE,
    Owner,
    Row,
    Seen,
)

INPUTS = {
    "Classify.running": Classify(Row("running", last_run_id="S")),
    "Classify.stop": Classify(Row("killed", last_run_id="S")),
    "Classify.newer": Classify(Row("done", last_run_id="N")),
    "Classify.own_resume": Classify(Row("done", last_run_id="N"), resume_of_m=True),
    **{f"Settled.{o.name}": Settled(o) for o in SettleOutcome},
    "Row.busy": SessionRow(Row("running", has_active_run=True, last_run_id="N")),
    "Row.done": SessionRow(Row("done", last_run_id="N")),
    "Row.killed": SessionRow(Row("killed", last_run_id="S")),
    "Row.own_resume": SessionRow(Row("done", last_run_id="N"), resume_of_m=True),
    "Row.failed_unseen": SessionRow(Row("failed", last_run_id="X", last_run_error="boom"), unseen=True),
    "Hello": Hello(),
    "Tick": Tick(),
    "Session.free": Session(),
    "Session.stopping": Session(stopping=True),
    "Session.busy": Session(busy=True),
    "Session.newer": Session(newer=True),
    "Session.own_resume": Session(newer=True, resume_of_m=True),
    "Reserved.ok": Reserved(1),
    "Reserved.spent": Reserved(MAX_RESUMES + 1),
    **{f"Sent.{o.name}": Sent(o, "no") for o in SendOutcome},
    "Abandoned": SendAbandoned(reserved=True),
    "Linked": Linked(),
    "Elsewhere.shown": ContinuedElsewhere(shown=True),
    "Elsewhere.none": ContinuedElsewhere(shown=False),
    **{f"Nobody.{w.name}": NobodyContinues(w) for w in Why},
    "Uncut": Uncut(),
}

#: The owner a cut in each state has (OPENING, ENDING and the ends: owc's resume).
_OWNERS = {CutState.CUT: None, CutState.HELD: Owner.GATEWAY, CutState.BUSY: Owner.WAIT}


def fresh(state: CutState) -> CutMachine:
    """A cut in ``state`` with no facts: seen with its terminal, no notice, no resume id held, no tick past a notice."""
    return CutMachine("S", Seen(terminal=True), state=state, owner=_OWNERS.get(state, Owner.RESUME))


#: From a fresh cut in each state (``fresh``: no facts): input -> the state it moves to, plus the actions the driver
#: must take; ``-`` is an illegal input. Reviewed cell by cell against ``owc/runs/cuts.py`` as it was before the
#: machine (the flags ``ready``, ``sending``, ``held``, ``after_hello``, ``ending``, ``dropped`` and their branches).
TABLE = """
CUT:
    Classify.running:OPENING+KEEP_OPEN+REGISTER  Classify.stop:NOBODY  Classify.newer:NOBODY+NOTE
    Classify.own_resume:CONTINUED+KEEP_OPEN  Settled.OPEN:-  Settled.NO_MESSAGE:-  Settled.FINISHED_ELSEWHERE:-
    Row.busy:-  Row.done:-  Row.killed:-  Row.own_resume:-  Row.failed_unseen:-  Hello:-  Tick:-  Session.free:-
    Session.stopping:-  Session.busy:-  Session.newer:-  Session.own_resume:-  Reserved.ok:-  Reserved.spent:-
    Sent.SENT:-  Sent.HELD:-  Sent.REFUSED:-  Abandoned:-  Linked:-  Elsewhere.shown:-  Elsewhere.none:-
    Nobody.SUPERSEDED:-  Nobody.NEWER_RUN:-  Nobody.RECOVERED_OTHER:-  Nobody.ENDED_FIRST:-  Nobody.NOT_RECOVERED:-
    Nobody.RECOVERED_ELSEWHERE:-  Uncut:-
OPENING:
    Classify.running:-  Classify.stop:-  Classify.newer:-  Classify.own_resume:-  Settled.OPEN:RESUME_OWED+LOOK
    Settled.NO_MESSAGE:DROPPED+WAKE  Settled.FINISHED_ELSEWHERE:FINISHED_ELSEWHERE+WAKE  Row.busy:OPENING
    Row.done:OPENING  Row.killed:OPENING  Row.own_resume:OPENING  Row.failed_unseen:OPENING  Hello:OPENING
    Tick:OPENING  Session.free:-  Session.stopping:-  Session.busy:-  Session.newer:-  Session.own_resume:-
    Reserved.ok:-  Reserved.spent:-  Sent.SENT:-  Sent.HELD:-  Sent.REFUSED:-  Abandoned:-  Linked:-
    Elsewhere.shown:OPENING  Elsewhere.none:OPENING  Nobody.SUPERSEDED:ENDING  Nobody.NEWER_RUN:ENDING
    Nobody.RECOVERED_OTHER:ENDING  Nobody.ENDED_FIRST:ENDING  Nobody.NOT_RECOVERED:ENDING
    Nobody.RECOVERED_ELSEWHERE:ENDING  Uncut:UNCUT+WAKE
ENDING:
    Classify.running:-  Classify.stop:-  Classify.newer:-  Classify.own_resume:-  Settled.OPEN:ENDED+END
    Settled.NO_MESSAGE:DROPPED+WAKE  Settled.FINISHED_ELSEWHERE:FINISHED_ELSEWHERE+WAKE  Row.busy:-  Row.done:-
    Row.killed:-  Row.own_resume:-  Row.failed_unseen:-  Hello:-  Tick:-  Session.free:-  Session.stopping:-
    Session.busy:-  Session.newer:-  Session.own_resume:-  Reserved.ok:-  Reserved.spent:-  Sent.SENT:-
    Sent.HELD:-  Sent.REFUSED:-  Abandoned:-  Linked:-  Elsewhere.shown:-  Elsewhere.none:-  Nobody.SUPERSEDED:-
    Nobody.NEWER_RUN:-  Nobody.RECOVERED_OTHER:-  Nobody.ENDED_FIRST:-  Nobody.NOT_RECOVERED:-
    Nobody.RECOVERED_ELSEWHERE:-  Uncut:-
HELD:
    Classify.running:-  Classify.stop:-  Classify.newer:-  Classify.own_resume:-  Settled.OPEN:-
    Settled.NO_MESSAGE:-  Settled.FINISHED_ELSEWHERE:-  Row.busy:HELD  Row.done:HELD  Row.killed:ENDED+END
    Row.own_resume:HELD  Row.failed_unseen:ENDED+END  Hello:HELD  Tick:HELD  Session.free:-  Session.stopping:-
    Session.busy:-  Session.newer:-  Session.own_resume:-  Reserved.ok:-  Reserved.spent:-  Sent.SENT:-
    Sent.HELD:-  Sent.REFUSED:-  Abandoned:-  Linked:LINKED  Elsewhere.shown:CONTINUED_ELSEWHERE+ADD_SHOWN+WAKE
    Elsewhere.none:CONTINUED_ELSEWHERE+WAKE  Nobody.SUPERSEDED:ENDED+END  Nobody.NEWER_RUN:ENDED+END
    Nobody.RECOVERED_OTHER:ENDED+END  Nobody.ENDED_FIRST:ENDED+END  Nobody.NOT_RECOVERED:ENDED+END
    Nobody.RECOVERED_ELSEWHERE:ENDED+END  Uncut:-
BUSY:
    Classify.running:-  Classify.stop:-  Classify.newer:-  Classify.own_resume:-  Settled.OPEN:-
    Settled.NO_MESSAGE:-  Settled.FINISHED_ELSEWHERE:-  Row.busy:BUSY  Row.done:ENDED+END  Row.killed:ENDED+END
    Row.own_resume:CONTINUED+WAKE  Row.failed_unseen:ENDED+END  Hello:BUSY  Tick:BUSY  Session.free:-
    Session.stopping:-  Session.busy:-  Session.newer:-  Session.own_resume:-  Reserved.ok:-  Reserved.spent:-
    Sent.SENT:-  Sent.HELD:-  Sent.REFUSED:-  Abandoned:-  Linked:LINKED
    Elsewhere.shown:CONTINUED_ELSEWHERE+ADD_SHOWN+WAKE  Elsewhere.none:CONTINUED_ELSEWHERE+WAKE
    Nobody.SUPERSEDED:ENDED+END  Nobody.NEWER_RUN:ENDED+END  Nobody.RECOVERED_OTHER:ENDED+END
    Nobody.ENDED_FIRST:ENDED+END  Nobody.NOT_RECOVERED:ENDED+END  Nobody.RECOVERED_ELSEWHERE:ENDED+END  Uncut:-
RESUME_OWED:
    Classify.running:-  Classify.stop:-  Classify.newer:-  Classify.own_resume:-  Settled.OPEN:-
    Settled.NO_MESSAGE:-  Settled.FINISHED_ELSEWHERE:-  Row.busy:-  Row.done:-  Row.killed:-  Row.own_resume:-
    Row.failed_unseen:-  Hello:-  Tick:-  Session.free:SENDING+SEND  Session.stopping:AFTER_HELLO
    Session.busy:BUSY  Session.newer:ENDED+END  Session.own_resume:CONTINUED+WAKE  Reserved.ok:-  Reserved.spent:-
    Sent.SENT:-  Sent.HELD:-  Sent.REFUSED:-  Abandoned:-  Linked:-  Elsewhere.shown:-  Elsewhere.none:-
    Nobody.SUPERSEDED:-  Nobody.NEWER_RUN:-  Nobody.RECOVERED_OTHER:-  Nobody.ENDED_FIRST:-  Nobody.NOT_RECOVERED:-
    Nobody.RECOVERED_ELSEWHERE:-  Uncut:-
AFTER_HELLO:
    Classify.running:-  Classify.stop:-  Classify.newer:-  Classify.own_resume:-  Settled.OPEN:-
    Settled.NO_MESSAGE:-  Settled.FINISHED_ELSEWHERE:-  Row.busy:AFTER_HELLO  Row.done:AFTER_HELLO
    Row.killed:AFTER_HELLO  Row.own_resume:AFTER_HELLO  Row.failed_unseen:AFTER_HELLO  Hello:RESUME_OWED+LOOK
    Tick:RESUME_OWED+LOOK  Session.free:-  Session.stopping:-  Session.busy:-  Session.newer:-
    Session.own_resume:-  Reserved.ok:-  Reserved.spent:-  Sent.SENT:-  Sent.HELD:-  Sent.REFUSED:-  Abandoned:-
    Linked:LINKED  Elsewhere.shown:CONTINUED_ELSEWHERE+ADD_SHOWN+WAKE  Elsewhere.none:CONTINUED_ELSEWHERE+WAKE
    Nobody.SUPERSEDED:ENDED+END  Nobody.NEWER_RUN:ENDED+END  Nobody.RECOVERED_OTHER:ENDED+END
    Nobody.ENDED_FIRST:ENDED+END  Nobody.NOT_RECOVERED:ENDED+END  Nobody.RECOVERED_ELSEWHERE:ENDED+END  Uncut:-
SENDING:
    Classify.running:-  Classify.stop:-  Classify.newer:-  Classify.own_resume:-  Settled.OPEN:-
    Settled.NO_MESSAGE:-  Settled.FINISHED_ELSEWHERE:-  Row.busy:SENDING  Row.done:SENDING  Row.killed:SENDING
    Row.own_resume:SENDING  Row.failed_unseen:SENDING  Hello:SENDING  Tick:SENDING  Session.free:-
    Session.stopping:-  Session.busy:-  Session.newer:-  Session.own_resume:-  Reserved.ok:SENDING
    Reserved.spent:ENDED+END  Sent.SENT:RESUMED  Sent.HELD:SEND_HELD  Sent.REFUSED:ENDED+END  Abandoned:SEND_HELD
    Linked:LINKED  Elsewhere.shown:CONTINUED_ELSEWHERE+ADD_SHOWN+WAKE  Elsewhere.none:CONTINUED_ELSEWHERE+WAKE
    Nobody.SUPERSEDED:ENDED+END  Nobody.NEWER_RUN:ENDED+END  Nobody.RECOVERED_OTHER:ENDED+END
    Nobody.ENDED_FIRST:ENDED+END  Nobody.NOT_RECOVERED:ENDED+END  Nobody.RECOVERED_ELSEWHERE:ENDED+END  Uncut:-
SEND_HELD:
    Classify.running:-  Classify.stop:-  Classify.newer:-  Classify.own_resume:-  Settled.OPEN:-
    Settled.NO_MESSAGE:-  Settled.FINISHED_ELSEWHERE:-  Row.busy:SEND_HELD  Row.done:SEND_HELD
    Row.killed:SEND_HELD  Row.own_resume:SEND_HELD  Row.failed_unseen:SEND_HELD  Hello:RESUME_OWED+LOOK
    Tick:SEND_HELD  Session.free:-  Session.stopping:-  Session.busy:-  Session.newer:-  Session.own_resume:-
    Reserved.ok:-  Reserved.spent:-  Sent.SENT:-  Sent.HELD:-  Sent.REFUSED:-  Abandoned:-  Linked:LINKED
    Elsewhere.shown:CONTINUED_ELSEWHERE+ADD_SHOWN+WAKE  Elsewhere.none:CONTINUED_ELSEWHERE+WAKE
    Nobody.SUPERSEDED:ENDED+END  Nobody.NEWER_RUN:ENDED+END  Nobody.RECOVERED_OTHER:ENDED+END
    Nobody.ENDED_FIRST:ENDED+END  Nobody.NOT_RECOVERED:ENDED+END  Nobody.RECOVERED_ELSEWHERE:ENDED+END  Uncut:-
NOBODY:
    Classify.running:-  Classify.stop:-  Classify.newer:-  Classify.own_resume:-  Settled.OPEN:-
    Settled.NO_MESSAGE:-  Settled.FINISHED_ELSEWHERE:-  Row.busy:-  Row.done:-  Row.killed:-  Row.own_resume:-
    Row.failed_unseen:-  Hello:-  Tick:-  Session.free:-  Session.stopping:-  Session.busy:-  Session.newer:-
    Session.own_resume:-  Reserved.ok:-  Reserved.spent:-  Sent.SENT:-  Sent.HELD:-  Sent.REFUSED:-  Abandoned:-
    Linked:-  Elsewhere.shown:-  Elsewhere.none:-  Nobody.SUPERSEDED:-  Nobody.NEWER_RUN:-
    Nobody.RECOVERED_OTHER:-  Nobody.ENDED_FIRST:-  Nobody.NOT_RECOVERED:-  Nobody.RECOVERED_ELSEWHERE:-  Uncut:-
CONTINUED:
    Classify.running:-  Classify.stop:-  Classify.newer:-  Classify.own_resume:-  Settled.OPEN:-
    Settled.NO_MESSAGE:-  Settled.FINISHED_ELSEWHERE:-  Row.busy:-  Row.done:-  Row.killed:-  Row.own_resume:-
    Row.failed_unseen:-  Hello:-  Tick:-  Session.free:-  Session.stopping:-  Session.busy:-  Session.newer:-
    Session.own_resume:-  Reserved.ok:-  Reserved.spent:-  Sent.SENT:-  Sent.HELD:-  Sent.REFUSED:-  Abandoned:-
    Linked:CONTINUED  Elsewhere.shown:-  Elsewhere.none:-  Nobody.SUPERSEDED:-  Nobody.NEWER_RUN:-
    Nobody.RECOVERED_OTHER:-  Nobody.ENDED_FIRST:-  Nobody.NOT_RECOVERED:-  Nobody.RECOVERED_ELSEWHERE:-  Uncut:-
CONTINUED_ELSEWHERE:
    Classify.running:-  Classify.stop:-  Classify.newer:-  Classify.own_resume:-  Settled.OPEN:-
    Settled.NO_MESSAGE:-  Settled.FINISHED_ELSEWHERE:-  Row.busy:-  Row.done:-  Row.killed:-  Row.own_resume:-
    Row.failed_unseen:-  Hello:-  Tick:-  Session.free:-  Session.stopping:-  Session.busy:-  Session.newer:-
    Session.own_resume:-  Reserved.ok:CONTINUED_ELSEWHERE  Reserved.spent:ENDED+END  Sent.SENT:CONTINUED_ELSEWHERE
    Sent.HELD:CONTINUED_ELSEWHERE  Sent.REFUSED:ENDED+END  Abandoned:CONTINUED_ELSEWHERE
    Linked:CONTINUED_ELSEWHERE  Elsewhere.shown:-  Elsewhere.none:-  Nobody.SUPERSEDED:-  Nobody.NEWER_RUN:-
    Nobody.RECOVERED_OTHER:-  Nobody.ENDED_FIRST:-  Nobody.NOT_RECOVERED:-  Nobody.RECOVERED_ELSEWHERE:-  Uncut:-
FINISHED_ELSEWHERE:
    Classify.running:-  Classify.stop:-  Classify.newer:-  Classify.own_resume:-  Settled.OPEN:-
    Settled.NO_MESSAGE:-  Settled.FINISHED_ELSEWHERE:-  Row.busy:-  Row.done:-  Row.killed:-  Row.own_resume:-
    Row.failed_unseen:-  Hello:-  Tick:-  Session.free:-  Session.stopping:-  Session.busy:-  Session.newer:-
    Session.own_resume:-  Reserved.ok:-  Reserved.spent:-  Sent.SENT:-  Sent.HELD:-  Sent.REFUSED:-  Abandoned:-
    Linked:FINISHED_ELSEWHERE  Elsewhere.shown:-  Elsewhere.none:-  Nobody.SUPERSEDED:-  Nobody.NEWER_RUN:-
    Nobody.RECOVERED_OTHER:-  Nobody.ENDED_FIRST:-  Nobody.NOT_RECOVERED:-  Nobody.RECOVERED_ELSEWHERE:-  Uncut:-
DROPPED:
    Classify.running:-  Classify.stop:-  Classify.newer:-  Classify.own_resume:-  Settled.OPEN:-
    Settled.NO_MESSAGE:-  Settled.FINISHED_ELSEWHERE:-  Row.busy:-  Row.done:-  Row.killed:-  Row.own_resume:-
    Row.failed_unseen:-  Hello:-  Tick:-  Session.free:-  Session.stopping:-  Session.busy:-  Session.newer:-
    Session.own_resume:-  Reserved.ok:-  Reserved.spent:-  Sent.SENT:-  Sent.HELD:-  Sent.REFUSED:-  Abandoned:-
    Linked:-  Elsewhere.shown:-  Elsewhere.none:-  Nobody.SUPERSEDED:-  Nobody.NEWER_RUN:-
    Nobody.RECOVERED_OTHER:-  Nobody.ENDED_FIRST:-  Nobody.NOT_RECOVERED:-  Nobody.RECOVERED_ELSEWHERE:-  Uncut:-
UNCUT:
    Classify.running:-  Classify.stop:-  Classify.newer:-  Classify.own_resume:-  Settled.OPEN:-
    Settled.NO_MESSAGE:-  Settled.FINISHED_ELSEWHERE:-  Row.busy:-  Row.done:-  Row.killed:-  Row.own_resume:-
    Row.failed_unseen:-  Hello:-  Tick:-  Session.free:-  Session.stopping:-  Session.busy:-  Session.newer:-
    Session.own_resume:-  Reserved.ok:-  Reserved.spent:-  Sent.SENT:-  Sent.HELD:-  Sent.REFUSED:-  Abandoned:-
    Linked:-  Elsewhere.shown:-  Elsewhere.none:-  Nobody.SUPERSEDED:-  Nobody.NEWER_RUN:-
    Nobody.RECOVERED_OTHER:-  Nobody.ENDED_FIRST:-  Nobody.NOT_RECOVERED:-  Nobody.RECOVERED_ELSEWHERE:-  Uncut:-
RESUMED:
    Classify.running:-  Classify.stop:-  Classify.newer:-  Classify.own_resume:-  Settled.OPEN:-
    Settled.NO_MESSAGE:-  Settled.FINISHED_ELSEWHERE:-  Row.busy:-  Row.done:-  Row.killed:-  Row.own_resume:-
    Row.failed_unseen:-  Hello:-  Tick:-  Session.free:-  Session.stopping:-  Session.busy:-  Session.newer:-
    Session.own_resume:-  Reserved.ok:-  Reserved.spent:-  Sent.SENT:-  Sent.HELD:-  Sent.REFUSED:-  Abandoned:-
    Linked:RESUMED  Elsewhere.shown:-  Elsewhere.none:-  Nobody.SUPERSEDED:-  Nobody.NEWER_RUN:-
    Nobody.RECOVERED_OTHER:-  Nobody.ENDED_FIRST:-  Nobody.NOT_RECOVERED:-  Nobody.RECOVERED_ELSEWHERE:-  Uncut:-
LINKED:
    Classify.running:-  Classify.stop:-  Classify.newer:-  Classify.own_resume:-  Settled.OPEN:-
    Settled.NO_MESSAGE:-  Settled.FINISHED_ELSEWHERE:-  Row.busy:-  Row.done:-  Row.killed:-  Row.own_resume:-
    Row.failed_unseen:-  Hello:-  Tick:-  Session.free:-  Session.stopping:-  Session.busy:-  Session.newer:-
    Session.own_resume:-  Reserved.ok:LINKED  Reserved.spent:ENDED+END  Sent.SENT:LINKED  Sent.HELD:LINKED
    Sent.REFUSED:ENDED+END  Abandoned:LINKED  Linked:LINKED  Elsewhere.shown:-  Elsewhere.none:-
    Nobody.SUPERSEDED:-  Nobody.NEWER_RUN:-  Nobody.RECOVERED_OTHER:-  Nobody.ENDED_FIRST:-  Nobody.NOT_RECOVERED:-
    Nobody.RECOVERED_ELSEWHERE:-  Uncut:-
ENDED:
    Classify.running:-  Classify.stop:-  Classify.newer:-  Classify.own_resume:-  Settled.OPEN:-
    Settled.NO_MESSAGE:-  Settled.FINISHED_ELSEWHERE:-  Row.busy:-  Row.done:-  Row.killed:-  Row.own_resume:-
    Row.failed_unseen:-  Hello:-  Tick:-  Session.free:-  Session.stopping:-  Session.busy:-  Session.newer:-
    Session.own_resume:-  Reserved.ok:ENDED  Reserved.spent:ENDED+END  Sent.SENT:ENDED  Sent.HELD:ENDED
    Sent.REFUSED:ENDED+END  Abandoned:ENDED  Linked:ENDED  Elsewhere.shown:-  Elsewhere.none:-  Nobody.SUPERSEDED:-
    Nobody.NEWER_RUN:-  Nobody.RECOVERED_OTHER:-  Nobody.ENDED_FIRST:-  Nobody.NOT_RECOVERED:-
    Nobody.RECOVERED_ELSEWHERE:-  Uncut:-
"""


def _cells() -> list[tuple[CutState, str, str]]:
    """The table's cells: a line ``STATE:`` starts a state, the indented lines under it hold its cells."""
    out = []
    state = None
    for line in TABLE.strip().splitlines():
        if not line.startswith(" "):
            state = CutState[line.rstrip(":")]
            continue
        for cell in line.split():
            name, expected = cell.split(":")
            assert state is not None
            out.append((state, name, expected))
    return out


def test_the_table_covers_every_state_and_every_input() -> None:
    cells = _cells()
    assert {s for s, _, _ in cells} == set(CutState)
    assert {name for _, name, _ in cells} == set(INPUTS)
    assert len(cells) == len(CutState) * len(INPUTS)
    assert {type(i) for i in INPUTS.values()} == set(INPUT_TYPES)


@pytest.mark.parametrize("state", list(CutState), ids=lambda s: s.name)
def test_transitions(state: CutState) -> None:
    """Each cell of ``state``'s row (one test per state: a file of 600 one-cell tests trips the log guard)."""
    for _, name, expected in (cell for cell in _cells() if cell[0] is state):
        cut = fresh(state)
        if expected == "-":
            with pytest.raises(IllegalTransition):
                cut.apply(INPUTS[name])
            assert cut.state is state, name  # an illegal input changes nothing
            assert type(INPUTS[name]) not in legal_inputs(state), name
            continue
        actions = cut.apply(INPUTS[name])
        target, *acts = expected.split("+")
        assert cut.state is CutState[target], name
        assert [a.name for a in actions] == acts, name


def test_the_illegal_input_names_its_state() -> None:
    cut = fresh(CutState.HELD)
    with pytest.raises(IllegalTransition, match="Uncut is not an input of a cut in state held"):
        cut.apply(Uncut())


def test_every_live_state_holds_the_session_and_every_final_one_lets_it_go() -> None:
    assert LIVE.isdisjoint(FINAL)
    assert set(CutState) == LIVE | FINAL | {CutState.CUT, CutState.ENDING}
    # Only RESUME_OWED is never at rest: the driver answers its LOOK at once, and no other input is taken there.
    assert legal_inputs(CutState.RESUME_OWED) == {Session}


# ------------------------------------------------------------------------------ branches that depend on facts


@pytest.mark.parametrize(
    ("row", "seen", "decided", "state"),
    [
        (Row("running", last_run_id="S"), Seen(terminal=True), Owner.GATEWAY, CutState.OPENING),
        (Row(None), Seen(terminal=False), Owner.GATEWAY, CutState.OPENING),  # no row, no terminal: the Gateway's
        (Row("killed", has_active_run=True, last_run_id="S"), Seen(terminal=True), Owner.WAIT, CutState.OPENING),
        (Row("failed", last_run_id="S", last_run_error="process exited with code 143"), Seen(True), Owner.RESUME,
         CutState.OPENING),
        (Row("killed", last_run_id="S"), Seen(True, notice_before_terminal=True), Owner.RESUME, CutState.OPENING),
        (Row("killed", last_run_id="S"), Seen(True, True, restart_expected=True), Owner.STOP, CutState.NOBODY),
        (Row("failed", last_run_id="S", last_run_error="boom"), Seen(True), Owner.ERROR, CutState.NOBODY),
        (Row("done", last_run_id="S"), Seen(True), Owner.DONE, CutState.NOBODY),
    ],
)  # fmt: skip
def test_the_owner_rule_classifies_the_cut(row: Row, seen: Seen, decided: Owner, state: CutState) -> None:
    cut = CutMachine("S", seen)
    actions = cut.apply(Classify(row))
    assert (cut.owner, cut.state) == (decided, state)
    assert actions == ((Action.KEEP_OPEN, Action.REGISTER) if state is CutState.OPENING else ())
    assert cut.note is None


def test_a_newer_run_gives_the_cut_runs_own_writer_the_note() -> None:
    cut = CutMachine("S", Seen(terminal=True))
    assert cut.apply(Classify(Row("killed", last_run_id="N"))) == (Action.NOTE,)
    assert (cut.state, cut.owner, cut.note) == (CutState.NOBODY, Owner.NEWER_RUN, NEWER_RUN_NOTE)


@pytest.mark.parametrize(
    ("decided", "state", "actions"),
    [
        (Owner.GATEWAY, CutState.HELD, ()),
        (Owner.WAIT, CutState.BUSY, ()),
        (Owner.RESUME, CutState.RESUME_OWED, (Action.LOOK,)),
    ],
)
def test_m_written_open_waits_for_its_owner(decided: Owner, state: CutState, actions: tuple[Action, ...]) -> None:
    cut = CutMachine("S", Seen(terminal=True), state=CutState.OPENING, owner=decided)
    assert cut.apply(Settled(SettleOutcome.OPEN)) == actions
    assert cut.state is state and cut.settled and cut.live


def test_an_end_decided_while_m_is_written_open_waits_for_it_and_keeps_its_note() -> None:
    cut = CutMachine("S", Seen(terminal=False), state=CutState.OPENING, owner=Owner.GATEWAY)
    assert cut.apply(NobodyContinues(Why.NOT_RECOVERED)) == ()
    assert cut.state is CutState.ENDING and cut.ending and not cut.settled and not cut.live and cut.note is None
    assert cut.apply(Settled(SettleOutcome.OPEN)) == (Action.END,)
    assert cut.state is CutState.ENDED and cut.settled


@pytest.mark.parametrize("why", list(Why))
def test_each_reason_nobody_continues_has_its_note(why: Why) -> None:
    cut = fresh(CutState.HELD)
    assert cut.apply(NobodyContinues(why)) == (Action.END,)
    quiet = why in (Why.ENDED_FIRST, Why.NOT_RECOVERED)  # the run had ended on its own: nothing cut it (seed 77089)
    assert cut.note == (None if quiet else NEWER_RUN_NOTE)


def test_a_cut_run_with_no_message_or_finished_elsewhere_settles_the_cut_for_a_waiting_recovery() -> None:
    """Fuzz seed 172: whichever way the cut run settles, a recovery waiting in ``link`` goes on."""
    for outcome, state in (
        (SettleOutcome.NO_MESSAGE, CutState.DROPPED),
        (SettleOutcome.FINISHED_ELSEWHERE, CutState.FINISHED_ELSEWHERE),
    ):
        for start in (CutState.OPENING, CutState.ENDING):
            cut = CutMachine("S", Seen(True), state=start, owner=Owner.GATEWAY)
            assert cut.apply(Settled(outcome)) == (Action.WAKE,)
            assert cut.state is state and (cut.settled or cut.gone)
    uncut = CutMachine("S", Seen(False), state=CutState.OPENING, owner=Owner.GATEWAY)
    uncut.apply(Uncut())
    assert uncut.gone and not uncut.settled


def test_a_held_cut_whose_row_the_gateway_let_go_is_decided_again() -> None:
    # A later boot marked the row failed by an outside kill: owc resumes it.
    cut = fresh(CutState.HELD)
    killed = Row("failed", last_run_id="S", last_run_error="process exited with code 137")
    assert cut.apply(SessionRow(killed)) == (Action.LOOK,)
    assert (cut.state, cut.owner) == (CutState.RESUME_OWED, Owner.RESUME)
    # A row that failed under a run some connection showed (its own path decides) leaves the cut held.
    held = fresh(CutState.HELD)
    assert held.apply(SessionRow(Row("failed", last_run_id="X"), unseen=False)) == ()
    assert held.state is CutState.HELD


def test_the_gateway_giving_the_recovery_up_ends_m_with_its_words() -> None:
    """Seed 004 / issue 24, item 7."""
    cut = fresh(CutState.HELD)
    cut.apply(SessionRow(Row("failed", last_run_id="X", last_run_error="  no model  "), unseen=True))
    assert cut.note == RECOVERY_FAILED_NOTE.format(error="no model")
    quiet = fresh(CutState.HELD)
    quiet.apply(SessionRow(Row("failed", last_run_id="X"), unseen=True))
    assert quiet.note == RECOVERY_FAILED_NOTE.format(error="no reason given")


def test_the_busy_runs_settled_row_decides_again() -> None:
    cut = fresh(CutState.BUSY)
    # The row still names the cut run (the busy run was no newer run of its own): owc resumes.
    assert cut.apply(SessionRow(Row("killed", last_run_id="S"))) == (Action.END,)  # a Stop: no notice seen
    waiting = CutMachine("S", Seen(True, notice_before_terminal=True), state=CutState.BUSY, owner=Owner.WAIT)
    assert waiting.apply(SessionRow(Row("killed", last_run_id="S"))) == (Action.LOOK,)
    assert (waiting.state, waiting.owner) == (CutState.RESUME_OWED, Owner.RESUME)
    assert fresh(CutState.BUSY).apply(SessionRow(Row("running", has_active_run=True))) == ()  # still busy


def test_a_resume_waits_for_the_hello_after_a_stop_notice_until_a_tick_says_the_gateway_still_serves() -> None:
    """Issue 24, item 13: a notice never followed by a close."""
    cut = fresh(CutState.RESUME_OWED)
    assert cut.apply(Session(stopping=True)) == ()
    assert cut.state is CutState.AFTER_HELLO
    assert cut.apply(Tick()) == (Action.LOOK,)
    assert cut.past_notice
    assert cut.apply(Session(stopping=True)) == (Action.SEND,)  # past the notice: the notice no longer holds it
    assert cut.state is CutState.SENDING


def test_a_held_resume_id_is_sent_again_at_the_next_hello_or_tick_whatever_the_session_says() -> None:
    """The same run id (the idempotency key): never two runs. A held id goes even into a busy or stopping session,
    as before (the Gateway answers the idempotency key)."""
    cut = fresh(CutState.SENDING)
    assert cut.apply(Reserved(2)) == ()
    assert cut.held
    assert cut.apply(Sent(SendOutcome.HELD)) == ()
    assert cut.state is CutState.SEND_HELD
    assert cut.apply(Tick()) == (Action.LOOK,)
    assert cut.apply(Session(stopping=True, busy=True)) == (Action.SEND,)
    # The row naming the held resume itself is no newer run: the driver says ``newer`` only for another run.
    abandoned = fresh(CutState.SENDING)
    assert abandoned.apply(SendAbandoned(reserved=False)) == ()
    assert abandoned.state is CutState.SEND_HELD and not abandoned.held
    assert abandoned.apply(Tick()) == ()  # no id reserved: the hello sends it
    assert abandoned.apply(Hello()) == (Action.LOOK,)


def test_the_budget_is_a_count_on_m() -> None:
    cut = fresh(CutState.SENDING)
    assert cut.apply(Reserved(MAX_RESUMES)) == ()
    spent = fresh(CutState.SENDING)
    assert spent.apply(Reserved(MAX_RESUMES + 1)) == (Action.END,)
    assert spent.state is CutState.ENDED and spent.note == BUDGET_NOTE.format(n=MAX_RESUMES + 1)


def test_a_refused_resume_ends_m_with_the_gateways_words() -> None:
    cut = fresh(CutState.SENDING)
    assert cut.apply(Sent(SendOutcome.REFUSED, "INVALID_REQUEST: no")) == (Action.END,)
    assert cut.note == f"{CUT_OFF}, and the Gateway refused its resume: INVALID_REQUEST: no"


def test_a_send_that_outlives_its_cuts_end_ends_m_again_only_with_a_note_of_its_own() -> None:
    """As the send always did: its cut ended (a newer run took the session) while the send was under way."""
    cut = fresh(CutState.SENDING)
    cut.apply(NobodyContinues(Why.SUPERSEDED))
    assert cut.apply(Sent(SendOutcome.SENT)) == ()
    assert cut.apply(Reserved(MAX_RESUMES + 1)) == (Action.END,)
    assert cut.note == BUDGET_NOTE.format(n=MAX_RESUMES + 1)


def test_m_continued_elsewhere_gets_what_was_shown_here_only_if_something_was() -> None:
    """Issue 24, item 5: never less than the tabs were shown."""
    assert fresh(CutState.HELD).apply(ContinuedElsewhere(shown=True)) == (Action.ADD_SHOWN, Action.WAKE)
    assert fresh(CutState.HELD).apply(ContinuedElsewhere(shown=False)) == (Action.WAKE,)
    assert fresh(CutState.OPENING).apply(ContinuedElsewhere(shown=True)) == ()  # its writer finds it continued
