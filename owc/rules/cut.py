"""A cut run's continuation as a pure state machine: the facts the cut driver observes in, a new state and the
driver's actions out (issue 26, item 1).

In the manner of ``owc.rules.lifecycle`` (and h11's ``_state.py``): no I/O, no Trio, no clock. When a Gateway restart,
stop, container stop or crash cuts a run S, exactly one party continues it into S's message M (seed 000 section 2.7;
issue 14): the Gateway (its restart recovery, linked to M by rule E), owc (a resume run), or nobody (M ends, with a
note or none). ``owc/runs/cuts.py`` is the driver: it computes the facts (a row, a hello, a tick after a notice, a
send's result, what a transcript or a chat says), feeds them here and does what the answer says (write M open,
send the resume, end M with the note, add what was shown, wake the waiters). The owner rule itself (``owner()``,
``continues()``, ``may_resume()``, the notes) is ``owc.rules.owner``'s, called by the handlers below: one place
decides; link rule E's reading of a transcript is ``owc.rules.link``'s, and reaches this machine as the fact it
gives (a recovery linked, a newer run, a later run recovered instead ...).

States::

    CUT                 the run was cut; the owner rule has not classified it yet (``Classify``)
    OPENING             classified as continued (the Gateway, owc, or owc after the busy run): the cut run is not
                        settled here yet, so M is being written open (``done: false``, with its chain)
    ENDING              nobody continues it after all, decided while M was being written open: M ends once it is
    HELD                the Gateway owns it: M open, waiting for its recovery to link (rule E)
    BUSY                owc owes a resume but the session is busy: decided again on the busy run's settled row
    RESUME_OWED         owc owes a resume and the driver is asked (``LOOK``) how the session is now (``Session``):
                        never a resting state, the driver answers at once
    AFTER_HELLO         the Gateway said it is stopping: the resume waits for the next hello-ok (or a tick after
                        the notice: it is still serving)
    SENDING             a resume's ``chat.send`` is under way
    SEND_HELD           the send did not go through (not connected, draining): sent again under the same run id
                        (the idempotency key: never two runs) at the next hello, or a tick after a notice
    NOBODY              the owner rule gave it to nobody (a Stop, a real error, a finish, a newer run: its note):
                        the cut run's own writer finalizes M; no cut is kept
    CONTINUED           M's own resume (another process, or this one before a restart, sent it) is the session's
                        run: it continues M, no second resume goes and M is not ended
    CONTINUED_ELSEWHERE a reconcile pass found M continued (its chain goes on) or ended (a cut-off note) by another
                        process: what the cut run showed here is put in front (``ADD_SHOWN``)
    FINISHED_ELSEWHERE  the cut run settled with M finished by another process
    DROPPED             the cut run settled with no message: nothing to continue, nothing to link to
    UNCUT               the transcript says the run ended on its own (``ended_in``): not cut after all
    RESUMED             the resume was sent: the resume run carries M's chain now
    LINKED              the Gateway's recovery took M over (rule E)
    ENDED               nobody continues it: M ends with what it holds and the note (``END``), or none

An input a state does not take raises ``IllegalTransition``; the driver logs it and records it in
``Ledger.illegal`` (tests fail on it), and leaves the cut as it was.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import attrs

from owc.rules.owner import (
    BUDGET_NOTE,
    CUT_OFF,
    NEWER_RUN_NOTE,
    RECOVERY_FAILED_NOTE,
    Owner,
    Row,
    Seen,
    continues,
    may_resume,
    owner,
)


class CutState(enum.Enum):
    CUT = "cut"
    OPENING = "opening"
    ENDING = "ending"
    HELD = "held"
    BUSY = "busy"
    RESUME_OWED = "resume_owed"
    AFTER_HELLO = "after_hello"
    SENDING = "sending"
    SEND_HELD = "send_held"
    NOBODY = "nobody"
    CONTINUED = "continued"
    CONTINUED_ELSEWHERE = "continued_elsewhere"
    FINISHED_ELSEWHERE = "finished_elsewhere"
    DROPPED = "dropped"
    UNCUT = "uncut"
    RESUMED = "resumed"
    LINKED = "linked"
    ENDED = "ended"


#: The cut run is settled here and M is open for a continuation that has not come yet.
WAITING = frozenset(
    {CutState.HELD, CutState.BUSY, CutState.RESUME_OWED, CutState.AFTER_HELLO, CutState.SENDING, CutState.SEND_HELD}
)
#: States of a cut the session holds (``Cuts.by_key``): a continuation is owed, or M is being written open for one.
LIVE = WAITING | {CutState.OPENING}
#: States in which nothing more will happen to the cut (late inputs of a send or a link aside).
FINAL = frozenset(set(CutState) - LIVE - {CutState.CUT, CutState.ENDING})
#: The cut is no longer one: the cut run has no message, or was not cut (a recovery waiting for M takes its own).
GONE = frozenset({CutState.DROPPED, CutState.UNCUT})
#: The resume is owc's: the owner is ``RESUME``.
RESUMING = frozenset({CutState.RESUME_OWED, CutState.AFTER_HELLO, CutState.SENDING, CutState.SEND_HELD})


class Action(enum.Enum):
    #: mark the cut run: its writer writes M open (``Continuation.cut`` = the owner) instead of finishing it
    KEEP_OPEN = "keep_open"
    NOTE = "note"  # the cut run's writer ends M with the machine's note (``Continuation.note``): a newer run took over
    REGISTER = "register"  # hold the cut on its session (ending an older cut there that is not one of its runs)
    LOOK = "look"  # the driver looks at the session now and answers with ``Session``
    SEND = "send"  # send the resume (reserving its number on M first, unless a run id is held already)
    END = "end"  # end M with what it holds and the machine's note (or absorb the recovery's own message)
    ADD_SHOWN = "add_shown"  # put what the cut run showed here in front of the part another process continued M with
    WAKE = "wake"  # the cut went: waiters (a recovery in ``link``, ``quiet``) look again


class SettleOutcome(enum.Enum):
    OPEN = "open"  # M is written open with the cut run's output (``Continuation.kept_output``)
    NO_MESSAGE = "no_message"  # the run was abandoned: no message (nothing of it was shown, nothing stored)
    FINISHED_ELSEWHERE = "finished_elsewhere"  # M was finished by another process before it was written open


class SendOutcome(enum.Enum):
    SENT = "sent"
    HELD = "held"  # not connected, or refused retryably (draining, starting, UNAVAILABLE)
    REFUSED = "refused"  # refused for good (the error says why)


class Why(enum.Enum):
    """Why nobody continues a cut after all (the facts the driver found), each with its note."""

    SUPERSEDED = "superseded"  # a newer run took the session and was cut in turn before this cut's continuation came
    NEWER_RUN = "newer_run"  # link rule E: a run of its own took the session after the cut
    RECOVERED_OTHER = "recovered_other"  # the boot recovered a later run: this cut's run was followed by it
    ENDED_FIRST = "ended_first"  # a later run was recovered, and this cut's run had ended on its own before it
    NOT_RECOVERED = "not_recovered"  # a later run began before any recovery: the run ended on its own
    RECOVERED_ELSEWHERE = "recovered_elsewhere"  # its recovery has a finished message of its own (another process)


# ---------------------------------------------------------------------------------------------------- inputs


@attrs.frozen
class Classify:
    """The owner rule's inputs at the cut: the run's row (``row_at_terminal``, a push's, a hello's list), and whether
    the session's last run is M's own resume (``resumes_message``: someone continues the cut already)."""

    row: Row
    resume_of_m: bool = False


@attrs.frozen
class Settled:
    """The cut run is settled here (its lifecycle is ``DONE`` or ``ABANDONED``), M as it left it."""

    outcome: SettleOutcome


@attrs.frozen
class SessionRow:
    """A row of the cut's session (a push that carries one, or a list's). ``resume_of_m``: its last run is M's own
    resume; ``unseen``: its last run is none of M's runs and no connection of this process ever showed it."""

    row: Row
    resume_of_m: bool = False
    unseen: bool = False


@attrs.frozen
class Hello:
    """A new connection said hello-ok (its list is in)."""


@attrs.frozen
class Tick:
    """A Gateway tick after a ``shutdown`` notice on the same connection: it is still serving."""


@attrs.frozen
class Session:
    """The session now, as the driver sees it when it is asked (``LOOK``): ``stopping``, a ``shutdown`` notice
    without ``restartExpectedMs`` on this connection; ``busy``, its newest row has an active run; ``newer``, that
    row's last run is none of M's runs nor the held resume; ``resume_of_m``, that run is M's own resume."""

    stopping: bool = False
    busy: bool = False
    newer: bool = False
    resume_of_m: bool = False


@attrs.frozen
class Reserved:
    """The resume's number was reserved on M (``count``: the n-th resume of M, another process's included)."""

    count: int


@attrs.frozen
class Sent:
    outcome: SendOutcome
    error: str | None = None


@attrs.frozen
class SendAbandoned:
    """The send's task ended without an answer (its connection closed); ``reserved``: a run id was reserved."""

    reserved: bool


@attrs.frozen
class Linked:
    """A restart recovery that waited for M (link rule E) takes it over."""


@attrs.frozen
class ContinuedElsewhere:
    """A reconcile pass found M continued (its chain goes on past the cut run) or ended with a cut-off note by
    another process; ``shown``: the cut run showed something here (what M may lack)."""

    shown: bool = False


@attrs.frozen
class NobodyContinues:
    """Nobody continues the cut after all: the facts the driver found (``why``) say so."""

    why: Why


@attrs.frozen
class Uncut:
    """The cut run's transcript says it ended on its own (``ended_in``): it was not cut."""


Input = (
    Classify
    | Settled
    | SessionRow
    | Hello
    | Tick
    | Session
    | Reserved
    | Sent
    | SendAbandoned
    | Linked
    | ContinuedElsewhere
    | NobodyContinues
    | Uncut
)
#: Every input type, for the exhaustive transition-table test.
INPUT_TYPES: tuple[type, ...] = (
    Classify, Settled, SessionRow, Hello, Tick, Session, Reserved, Sent, SendAbandoned, Linked, ContinuedElsewhere,
    NobodyContinues, Uncut,
)  # fmt: skip


class IllegalTransition(Exception):
    """An input the cut's state does not take: a bug in the driver that fed it."""

    def __init__(self, state: CutState, event: Input) -> None:
        super().__init__(f"{type(event).__name__} is not an input of a cut in state {state.value}")
        self.state, self.event = state, event


def note_for(why: Why) -> str | None:
    """The note M ends with when nobody continues it for ``why``: none when the run had ended on its own."""
    return None if why in (Why.ENDED_FIRST, Why.NOT_RECOVERED) else NEWER_RUN_NOTE


# ------------------------------------------------------------------------------------------------ the machine


@attrs.define
class CutMachine:
    """One cut's state and the facts its transitions read.

    ``source``: the cut run; ``seen``: what the connection saw of its cut (for the owner rule); ``owner``: the owner
    rule's last decision; ``held``: a resume run id is reserved for this cut (sent again under it, never a second
    number); ``past_notice``: a tick came after a ``shutdown`` notice, so a notice no longer makes the resume wait
    for a hello that may never come (issue 24, item 13); ``note``: what M ends with when nobody continues it.
    """

    source: str
    seen: Seen
    state: CutState = CutState.CUT
    owner: Owner | None = None
    held: bool = False
    past_notice: bool = False
    note: str | None = None

    @property
    def settled(self) -> bool:
        """The cut run is settled here, whatever became of M: what a recovery waiting for M (``link``) waits for, so
        no way of settling it leaves the recovery waiting for ever (fuzzer, seed 172)."""
        return self.state not in (CutState.CUT, CutState.OPENING, CutState.ENDING, CutState.UNCUT)

    @property
    def gone(self) -> bool:
        """Nothing to continue and nothing to link to (``DROPPED``, ``UNCUT``)."""
        return self.state in GONE

    @property
    def ending(self) -> bool:
        return self.state in (CutState.ENDING, CutState.ENDED)

    @property
    def live(self) -> bool:
        """The session holds the cut (``Cuts.by_key``)."""
        return self.state in LIVE

    def apply(self, event: Input) -> tuple[Action, ...]:
        """Apply one input; returns what the driver must do. Raises ``IllegalTransition`` (state unchanged)."""
        handler = _TABLE.get((self.state, type(event)))
        if handler is None:
            raise IllegalTransition(self.state, event)
        return handler(self, event)

    # ------------------------------------------------------------------ helpers the transitions share

    def _to(self, state: CutState, *actions: Action) -> tuple[Action, ...]:
        self.state = state
        return actions

    def _end(self, note: str | None) -> tuple[Action, ...]:
        """Nobody continues it: M ends once it is written open (now, if it is)."""
        self.note = note
        if self.state is CutState.OPENING:
            return self._to(CutState.ENDING)
        return self._to(CutState.ENDED, Action.END)

    def _continue(self, decision: Owner) -> tuple[Action, ...]:
        """M is open and ``decision`` continues it: hold for the Gateway, wait for the busy run, or resume."""
        self.owner = decision
        if decision is Owner.GATEWAY:
            return self._to(CutState.HELD)
        if decision is Owner.WAIT:
            return self._to(CutState.BUSY)
        return self._to(CutState.RESUME_OWED, Action.LOOK)

    def _redecide(self, decision: Owner) -> tuple[Action, ...]:
        """The owner rule again, on a later row: a decision that continues acts, any other ends M."""
        if continues(decision):
            return self._continue(decision)
        self.owner = decision
        return self._end(NEWER_RUN_NOTE if decision is Owner.NEWER_RUN else None)


# ---------------------------------------------------------------------------------------------- transitions
# One function per (state, input) pair that is legal. A pair not in ``_TABLE`` is illegal.

Handler = Callable[[CutMachine, Input], tuple[Action, ...]]
_TABLE: dict[tuple[CutState, type], Handler] = {}


def _on(states: CutState | frozenset[CutState] | tuple[CutState, ...], *inputs: type) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for state in (states,) if isinstance(states, CutState) else tuple(states):
            for kind in inputs:
                assert (state, kind) not in _TABLE, (state, kind)
                _TABLE[(state, kind)] = fn
        return fn

    return register


def _stay(cut: CutMachine, event: Input) -> tuple[Action, ...]:
    return ()


@_on(CutState.CUT, Classify)
def _classify(cut: CutMachine, event: Input) -> tuple[Action, ...]:
    assert isinstance(event, Classify)
    if event.resume_of_m:
        # The session's last run is M's own resume (another process, or this one before a restart, sent it): the cut
        # is being continued. M is written open (never over what the resume wrote: ``unless_continued``) and no
        # second resume goes (its count on M would give it another id: a double continuation).
        cut.owner = Owner.RESUME
        return cut._to(CutState.CONTINUED, Action.KEEP_OPEN)
    decision = owner(cut.source, event.row, cut.seen)
    cut.owner = decision
    if decision is Owner.NEWER_RUN:
        cut.note = NEWER_RUN_NOTE
        return cut._to(CutState.NOBODY, Action.NOTE)
    if not continues(decision):
        return cut._to(CutState.NOBODY)
    return cut._to(CutState.OPENING, Action.KEEP_OPEN, Action.REGISTER)


@_on((CutState.OPENING, CutState.ENDING), Settled)
def _settled(cut: CutMachine, event: Input) -> tuple[Action, ...]:
    assert isinstance(event, Settled)
    if event.outcome is SettleOutcome.NO_MESSAGE:
        # The run has no message: its transcript shows nothing of it and nothing was streamed. It may be a heartbeat's
        # turn that had said nothing yet (whose empty start chat.history cannot tell: a resume would make it speak),
        # and nothing of it was ever shown to continue (fuzzer, seed 4: a container stop under a heartbeat).
        return cut._to(CutState.DROPPED, Action.WAKE)
    if event.outcome is SettleOutcome.FINISHED_ELSEWHERE:
        # Its message was finished by another process (which saw the same cut and its continuation end). A recovery
        # this process linked to M goes on into M (``link``): its claim finds M finished and backs off.
        return cut._to(CutState.FINISHED_ELSEWHERE, Action.WAKE)
    if cut.state is CutState.ENDING:
        return cut._to(CutState.ENDED, Action.END)
    assert cut.owner is not None
    return cut._continue(cut.owner)


# A row while M is being written open changes nothing: the resume looks at the newest row when it is owed.
_on((CutState.OPENING, CutState.AFTER_HELLO, CutState.SENDING, CutState.SEND_HELD), SessionRow)(_stay)


@_on(CutState.BUSY, SessionRow)
def _busy_row(cut: CutMachine, event: Input) -> tuple[Action, ...]:
    assert isinstance(event, SessionRow)
    if event.row.has_active_run:
        return ()  # still busy
    if event.resume_of_m:
        # The busy run was M's own resume (another process sent it): it continues M. Before, the resume was taken for
        # a newer run that took the session, and M was ended with the note over what the resume wrote (fuzzer, seed
        # 20808, under load: two deploys that both saw a container stop cut the run).
        return cut._to(CutState.CONTINUED, Action.WAKE)
    # The busy run settled: decide again (a newer run that took the session ends M; else resume).
    decision = owner(cut.source, event.row, cut.seen)
    return cut._redecide(Owner.RESUME if decision is Owner.WAIT else decision)


@_on(CutState.HELD, SessionRow)
def _held_row(cut: CutMachine, event: Input) -> tuple[Action, ...]:
    assert isinstance(event, SessionRow)
    row = event.row
    if row.has_active_run:
        return ()
    if row.status not in ("running", None) and row.last_run_id == cut.source:
        # The Gateway let the row go without a recovery (a later boot marked it killed or failed).
        return cut._redecide(owner(cut.source, row, attrs.evolve(cut.seen, terminal=True)))
    if row.status == "failed" and event.unseen:
        # The Gateway gave the recovery up (seed 004: attempts that fail before the agent starts, each under a fresh
        # run id, until the budget is spent and the session is tombstoned): the row failed under a run no connection
        # ever showed. Nobody continues the cut run; M ends with why (issue 24, item 7: before, M waited for a row
        # naming the cut run itself, which never came, and stayed ``done: false``).
        error = (row.last_run_error or "no reason given").strip()[:300]
        return cut._end(RECOVERY_FAILED_NOTE.format(error=error))
    return ()


# A hello, or a tick after a notice, changes nothing for a cut that waits on something else.
_on((CutState.OPENING, CutState.HELD, CutState.BUSY, CutState.SENDING), Hello, Tick)(_stay)


@_on((CutState.AFTER_HELLO, CutState.SEND_HELD), Hello)
def _hello(cut: CutMachine, event: Input) -> tuple[Action, ...]:
    return cut._to(CutState.RESUME_OWED, Action.LOOK)  # held resumes go now


@_on((CutState.AFTER_HELLO, CutState.SEND_HELD), Tick)
def _tick(cut: CutMachine, event: Input) -> tuple[Action, ...]:
    # After a ``shutdown`` notice on this connection a tick says the Gateway is still serving: a resume held for the
    # next hello is tried now (a refused one is held again, under the same run id, for the next tick or hello). Issue
    # 24, item 13: a notice the Gateway never followed with a close left M ``done: false`` until a reconnect. A send
    # whose connection closed before a run id was reserved waits for the hello.
    if cut.state is CutState.SEND_HELD and not cut.held:
        return ()
    cut.past_notice = True
    return cut._to(CutState.RESUME_OWED, Action.LOOK)


@_on(CutState.RESUME_OWED, Session)
def _look(cut: CutMachine, event: Input) -> tuple[Action, ...]:
    assert isinstance(event, Session)
    if event.stopping and not cut.held and not cut.past_notice:
        # The Gateway said it is stopping: a send now would be refused or cut again. The next hello sends.
        return cut._to(CutState.AFTER_HELLO)
    if event.busy and not cut.held:
        cut.owner = Owner.WAIT  # never resume into a busy session: decide again on that run's settled row
        return cut._to(CutState.BUSY)
    if event.newer:
        if event.resume_of_m:
            return cut._to(CutState.CONTINUED, Action.WAKE)  # M's own resume, another process's (seed 20808)
        return cut._end(NEWER_RUN_NOTE)  # a newer run took the session: it decides
    return cut._to(CutState.SENDING, Action.SEND)


@_on(CutState.SENDING, Reserved)
def _reserved(cut: CutMachine, event: Input) -> tuple[Action, ...]:
    # The budget is a count on M, never a clock: reserved before the send (a crash after it must not reset it), and
    # once per cut run (a cut another process resumed already gets that resume's number: both send one run id).
    assert isinstance(event, Reserved)
    if not may_resume(event.count - 1):
        return cut._end(BUDGET_NOTE.format(n=event.count))
    cut.held = True
    return ()


@_on(CutState.SENDING, Sent)
def _sent(cut: CutMachine, event: Input) -> tuple[Action, ...]:
    assert isinstance(event, Sent)
    if event.outcome is SendOutcome.SENT:
        return cut._to(CutState.RESUMED)  # the resume run carries the chain now
    if event.outcome is SendOutcome.HELD:
        cut.held = True
        return cut._to(CutState.SEND_HELD)  # the Gateway is draining or starting: the next hello sends it
    return cut._end(f"{CUT_OFF}, and the Gateway refused its resume: {event.error}")


@_on(CutState.SENDING, SendAbandoned)
def _abandoned(cut: CutMachine, event: Input) -> tuple[Action, ...]:
    assert isinstance(event, SendAbandoned)
    cut.held = event.reserved
    return cut._to(CutState.SEND_HELD)


# A send under way when its cut ended or went elsewhere (or a recovery took M): its answer changes nothing, except
# that a budget spent or a refusal ends M (again) with its own note, as the send always did.
@_on((CutState.ENDED, CutState.CONTINUED_ELSEWHERE, CutState.LINKED), Reserved)
def _late_reserved(cut: CutMachine, event: Input) -> tuple[Action, ...]:
    assert isinstance(event, Reserved)
    if not may_resume(event.count - 1):
        cut.note = BUDGET_NOTE.format(n=event.count)
        return cut._to(CutState.ENDED, Action.END)
    cut.held = True
    return ()


@_on((CutState.ENDED, CutState.CONTINUED_ELSEWHERE, CutState.LINKED), Sent)
def _late_sent(cut: CutMachine, event: Input) -> tuple[Action, ...]:
    assert isinstance(event, Sent)
    if event.outcome is SendOutcome.REFUSED:
        cut.note = f"{CUT_OFF}, and the Gateway refused its resume: {event.error}"
        return cut._to(CutState.ENDED, Action.END)
    return ()


_on((CutState.ENDED, CutState.CONTINUED_ELSEWHERE, CutState.LINKED), SendAbandoned)(_stay)


@_on(WAITING - {CutState.RESUME_OWED}, Linked)
def _linked(cut: CutMachine, event: Input) -> tuple[Action, ...]:
    return cut._to(CutState.LINKED)


# A recovery that waited for M while the cut settled some other way goes on into M (its claim finds M as it is).
_on(
    (
        CutState.ENDED,
        CutState.FINISHED_ELSEWHERE,
        CutState.CONTINUED_ELSEWHERE,
        CutState.CONTINUED,
        CutState.RESUMED,
        CutState.LINKED,
    ),
    Linked,
)(_stay)


# M is not written open yet: the cut run's writer finds it continued (``unless_continued``).
_on(CutState.OPENING, ContinuedElsewhere)(_stay)


@_on(WAITING - {CutState.RESUME_OWED}, ContinuedElsewhere)
def _continued_elsewhere(cut: CutMachine, event: Input) -> tuple[Action, ...]:
    # Another process continued M (or ended it) while this one held it open with what the cut run showed here: a
    # continuation that finished M from the transcript lacks what the tabs here showed (issue 24, item 5).
    assert isinstance(event, ContinuedElsewhere)
    if event.shown:
        return cut._to(CutState.CONTINUED_ELSEWHERE, Action.ADD_SHOWN, Action.WAKE)
    return cut._to(CutState.CONTINUED_ELSEWHERE, Action.WAKE)


@_on(LIVE - {CutState.RESUME_OWED}, NobodyContinues)
def _nobody(cut: CutMachine, event: Input) -> tuple[Action, ...]:
    assert isinstance(event, NobodyContinues)
    return cut._end(note_for(event.why))


@_on(CutState.OPENING, Uncut)
def _uncut(cut: CutMachine, event: Input) -> tuple[Action, ...]:
    # Held for a recovery because no terminal reached owc before a new boot, but its last stored message ended it (a
    # final answer, an error): the boot recovers runs still running, not this one. A recovery waiting for its message
    # takes one of its own.
    return cut._to(CutState.UNCUT, Action.WAKE)


def legal_inputs(state: CutState) -> frozenset[type]:
    """The input types a state takes (for tests and for the driver's error messages)."""
    return frozenset(kind for (s, kind) in _TABLE if s is state)
