"""A run's lifecycle as a pure state machine: typed inputs in, a new state and the shell's actions out.

In the manner of h11's ``_state.py``: no I/O, no Trio, no clock. The run table and the run writer (``owc/runs``)
feed it what happened (a showable item, the run's terminal, a Stop, a claim's result, a Pipe request's handover, a
closed connection ...) and do what it answers (start a writer, end a streaming writer's stream with the
``Terminal`` or ``Stop`` that ended it, abort the run at the Gateway, retire the run). A ``Handover`` ends no
writer: it ends the Pipe request's hold (``INLINE``) and starts one. It answers what one run does next; the
questions around that are answered beside it: which run of a chat claims first (``RunTable.claim_turn``,
``Ledger.claim_blocker``: a writer waits its turn before it claims), who continues a cut run's message
(``owc.rules.owner``, ``owc.rules.link``, driven by ``owc/runs/cuts.py``), whether another writer holds the message
(the store's claim, whose answer comes back as a ``ClaimResult``). The no-timer end rules are structural: nothing
but an input moves a run, and no input is a clock.

States (seed 000 sections 2.2-2.7; ``docs/lifecycle.md`` has the diagram, generated from the table)::

    OPEN        known here, no message claimed by this process; waits for its first showable item or its end
    CLAIMING    a writer claims the message at the chat's tail (or adopts an existing one)
    STREAMING   this process writes the message and streams the run live to the tabs
    STANDBY     another live writer holds the message; keep rendering, look again at the run's end
    DETACHED    this process claimed the message and the connection writing it closed (carried to the next one)
    CHECKING    the run ended showing nothing, but its stream may have missed content: read the transcript
    FINISHING   the run ended while another process held the message: one conditional write, no streaming
    FINALIZING  the run ended (or was stopped): read the transcript once, write the finished message
    INLINE      a live Pipe request streams the run through Open WebUI's own request (the Pipe issue)
    UNSAVED     the run ended and the database would not take its message (locked past every try, full,
                read-only, gone): kept, and tried again on a ``Retry`` (a Gateway tick or terminal, another
                write that went through) or the next hello; never on a clock of its own
    DONE        the message is finished (here or by whoever held it)
    ABANDONED   no message from this run here: it showed nothing, or the chat cannot take it (logged)

An input a state does not take raises ``IllegalTransition``; the shell logs it and leaves the run as it was
(a bug must never kill the connection), and the tests make it fail.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import attrs


class State(enum.Enum):
    OPEN = "open"
    CLAIMING = "claiming"
    STREAMING = "streaming"
    STANDBY = "standby"
    DETACHED = "detached"
    CHECKING = "checking"
    FINISHING = "finishing"
    FINALIZING = "finalizing"
    INLINE = "inline"
    UNSAVED = "unsaved"
    DONE = "done"
    ABANDONED = "abandoned"


#: States in which a run is settled: nothing more will happen to its message here.
SETTLED = frozenset({State.DONE, State.ABANDONED})
#: States in which a writer task of this process works on the run.
WRITING = frozenset({State.CLAIMING, State.STREAMING, State.CHECKING, State.FINISHING, State.FINALIZING})


class Action(enum.Enum):
    START_WRITER = "start_writer"  # start the run's writer task (it reads the state to know what to do)
    END_STREAM = "end_stream"  # end the writer's streaming scope with the input (a Terminal or a Stop)
    ABORT_RUN = "abort_run"  # ask the Gateway to abort the run (``chat.abort``)
    RETIRE = "retire"  # the run is settled: drop its renderer


class ClaimOutcome(enum.Enum):
    WON = "won"  # made the message, took over a dead writer's, or it was already this connection's
    HELD = "held"  # another live writer of this process holds it, or another process's while the run is live
    HELD_ELSEWHERE = "held_elsewhere"  # another process's writer holds it (liveness unknowable) and the run ended
    FINISHED = "finished"  # the message is already done
    ABSENT = "absent"  # an adopt-only claim found no message
    LOCKED = "locked"  # the database stayed locked for the whole busy wait
    #: The database refused the write (locked past every try after the run's end, full, read-only, gone).
    UNAVAILABLE = "unavailable"
    FAILED = "failed"  # the chat cannot take the message (missing, another user's, corrupt): logged


class WriteOutcome(enum.Enum):
    WRITTEN = "written"
    FINISHED_ELSEWHERE = "finished_elsewhere"  # a conditional write found it done already
    #: The database would not take it (locked after every attempt, full, read-only, gone): logged NOT WRITTEN,
    #: tabs told, kept for a retry.
    NOT_WRITTEN = "not_written"


# ---------------------------------------------------------------------------------------------------- inputs


@attrs.frozen
class Showable:
    """The run's first showable item (a tool call, or text that cannot become a silent sentinel)."""


@attrs.frozen
class Terminal:
    """The run's own end: its chat terminal, its ``sessions.changed`` end/error, or its absence from a list
    after a gap or a reconnect (``reason`` says which). Also the intent that ends a writer's stream."""

    reason: str
    state: str | None = None  # final | error | aborted, when a chat terminal said so
    stop_reason: str | None = None
    error: str | None = None

    @classmethod
    def from_row(
        cls, reason: str, run_id: str, status: str | None, last_run_id: str | None, last_run_error: str | None
    ) -> Terminal:
        """The end of a run whose own terminal owc did not see (it ended while owc was away, or in a seq gap), as
        its session row tells it: a row whose last run is this one and that ``failed`` carries the run's error
        (``lastRunError``), shown as a live error terminal is (issue 24, item 2). A row naming another run says
        nothing of how this one ended."""
        if status == "failed" and last_run_id == run_id:
            return cls(reason, "error", None, last_run_error or None)
        return cls(reason)


@attrs.frozen
class Stop:
    """The user pressed Stop: abort the run at the Gateway, finalize the message with what there is."""


@attrs.frozen
class Inline:
    """A Pipe request sent the run (``chat.send``) and streams it through its own response: Open WebUI's request
    writes the message's stream, and this process holds the message (``claimed``) until the request ends."""


@attrs.frozen
class Handover:
    """The inline request ended (before its run, or at its end): a writer continues the same message, and on the
    run's own terminal finalizes it from the transcript (seed 000 section 2.6)."""


@attrs.frozen
class Listed:
    """A list (after a gap or at a hello) shows the run still active."""


@attrs.frozen
class ClaimResult:
    outcome: ClaimOutcome


@attrs.frozen
class TranscriptChecked:
    """The transcript was read for a run that ended showing nothing; ``shows``: it holds something to show."""

    shows: bool


@attrs.frozen
class WriteResult:
    outcome: WriteOutcome


@attrs.frozen
class ConnectionClosed:
    """The connection that saw the run closed; its writer (if any) was cancelled."""


@attrs.frozen
class Hello:
    """A new connection said hello-ok (after its subscribe-and-list)."""

    boot_id: str | None = None
    boot_changed: bool = False


@attrs.frozen
class Retry:
    """The database may take writes again (a Gateway tick or a run's terminal arrived, or another write went
    through): an ``UNSAVED`` run tries once more."""


@attrs.frozen
class WriterFailed:
    """The writer hit an unexpected error (logged): the run is this connection's loss alone."""


Input = (
    Showable
    | Terminal
    | Stop
    | Inline
    | Handover
    | Listed
    | ClaimResult
    | TranscriptChecked
    | WriteResult
    | ConnectionClosed
    | Hello
    | Retry
    | WriterFailed
)
#: Every input type, for the exhaustive transition-table test.
INPUT_TYPES: tuple[type, ...] = (
    Showable, Terminal, Stop, Inline, Handover, Listed, ClaimResult, TranscriptChecked, WriteResult, ConnectionClosed,
    Hello, Retry, WriterFailed,
)  # fmt: skip


class IllegalTransition(Exception):
    """An input the run's state does not take: a bug in the shell that fed it."""

    def __init__(self, state: State, event: Input) -> None:
        super().__init__(f"{type(event).__name__} is not an input of a run in state {state.value}")
        self.state, self.event = state, event


# ------------------------------------------------------------------------------------------------ the machine


@attrs.define
class Lifecycle:
    """One run's state and the facts the transitions read.

    ``missed``: the stream may lack some of the run's content (it joined mid-run, a seq gap, a reconnect), so
    a run that ends showing nothing gets a transcript read before it is given up. ``stop``: the end is a Stop
    (the writer aborts the run before it finalizes). ``claimed``: this process holds the message (a writer of a
    closed connection may have held it: a new writer takes it over).
    """

    state: State = State.OPEN
    showable: bool = False
    missed: bool = False
    claimed: bool = False
    terminal: Terminal | None = None
    stop: bool = False
    transcript_shows: bool = False
    #: The transcript was read after the run's end (``CHECKING``): it is not read again for the same question.
    checked: bool = False
    #: The message exists unfinished and nobody else will finish it (an orphan stub, a dead process's message
    #: found by the reconcile): it is finished even if the run showed nothing.
    owed: bool = False
    boot_id: str | None = None

    @property
    def ended(self) -> bool:
        return self.terminal is not None or self.stop

    @property
    def settled(self) -> bool:
        return self.state in SETTLED

    @property
    def may_create(self) -> bool:
        """A claim may make the message: the run showed something (live, or in its transcript). Otherwise a
        claim only adopts a message that exists (a dead writer's, or Open WebUI's own orphan stub)."""
        return self.showable or self.transcript_shows or self.owed

    def apply(self, event: Input) -> tuple[Action, ...]:
        """Apply one input; returns what the shell must do. Raises ``IllegalTransition`` (state unchanged)."""
        handler = _TABLE.get((self.state, type(event)))
        if handler is None:
            raise IllegalTransition(self.state, event)
        return handler(self, event)

    # ------------------------------------------------------------------ helpers the transitions share

    def _to(self, state: State, *actions: Action) -> tuple[Action, ...]:
        self.state = state
        if state in SETTLED:
            return (*actions, Action.RETIRE)
        return actions

    def _record_end(self, event: Input) -> None:
        if isinstance(event, Terminal) and self.terminal is None:
            self.terminal = event
        elif isinstance(event, Stop):
            self.stop = True

    def _ended_unclaimed(self) -> tuple[Action, ...]:
        """The run is over and this process holds no message: make it if the run showed anything, read the
        transcript if the stream may have missed what it showed, else nothing to show."""
        if self.may_create:
            return self._to(State.CLAIMING, Action.START_WRITER)
        if self.missed and not self.checked:
            return self._to(State.CHECKING, Action.START_WRITER)
        return self._to(State.ABANDONED)

    def _resume(self) -> tuple[Action, ...]:
        """On a new connection: what an unsettled run carried from the last one does next."""
        if self.ended:
            if self.claimed:
                return self._to(State.CLAIMING, Action.START_WRITER)  # take its own message back and finish it
            return self._ended_unclaimed()
        return ()  # still running as far as anyone knows: the hello's list decides (Listed, or a Terminal)


# ---------------------------------------------------------------------------------------------- transitions
# One function per (state, input) pair that is legal. A pair not in ``_TABLE`` is illegal.

Handler = Callable[[Lifecycle, Input], tuple[Action, ...]]
_TABLE: dict[tuple[State, type], Handler] = {}


def _on(states: State | tuple[State, ...], *inputs: type) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for state in states if isinstance(states, tuple) else (states,):
            for kind in inputs:
                assert (state, kind) not in _TABLE, (state, kind)
                _TABLE[(state, kind)] = fn
        return fn

    return register


def _stay(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    return ()


def _record(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    """Note the fact (showable, an end) without a move: the writer in charge reads it when it gets there."""
    if isinstance(event, Showable):
        life.showable = True
    life._record_end(event)
    return ()


# Late or repeated inputs after a run is settled change nothing.
_on((State.DONE, State.ABANDONED), Showable, Terminal, Stop, Listed, ConnectionClosed, Hello, Handover)(_stay)


@_on(State.OPEN, Showable)
def _open_showable(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    life.showable = True
    if life.ended:
        return life._ended_unclaimed()
    return life._to(State.CLAIMING, Action.START_WRITER)


@_on(State.OPEN, Terminal)
def _open_terminal(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    life._record_end(event)
    return life._ended_unclaimed()


@_on(State.OPEN, Listed)
def _open_listed(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    # A run listed active after a gap or a reconnect: adopt at once what an earlier writer left (a claim that
    # only adopts, or makes the message if the run already showed something), so its message is not left
    # unfinished when the run ends without another showable event.
    return life._to(State.CLAIMING, Action.START_WRITER)


@_on(State.OPEN, Stop)
def _open_stop(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    # Nothing is shown yet, so there is no message to finalize; the run is still aborted (the user asked), and
    # the abort's own terminal ends it like any other.
    return (Action.ABORT_RUN,)


@_on(State.OPEN, Hello)
def _open_hello(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    _note_boot(life, event)
    return life._resume()


_on(State.OPEN, ConnectionClosed)(_stay)


@_on(State.OPEN, Inline)
def _open_inline(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    # The request holds the message (Open WebUI made it; owc recorded this process as its writer): no writer of
    # this process streams it while the request does, and other processes back off from it.
    life.claimed = True
    return life._to(State.INLINE)


@_on(State.CLAIMING, ClaimResult)
def _claiming_result(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    assert isinstance(event, ClaimResult)
    outcome = event.outcome
    if outcome is ClaimOutcome.WON:
        life.claimed = True
        return life._to(State.FINALIZING if life.ended else State.STREAMING)
    if outcome is ClaimOutcome.HELD:
        if life.ended:
            return life._to(State.ABANDONED)  # a live writer of this process finishes it at the same terminal
        return life._to(State.STANDBY)
    if outcome is ClaimOutcome.HELD_ELSEWHERE:
        return life._to(State.FINISHING) if life.ended else life._to(State.STANDBY)
    if outcome is ClaimOutcome.FINISHED:
        return life._to(State.DONE)
    if outcome is ClaimOutcome.ABSENT:
        life.claimed = False
        if life.may_create:
            return life._to(State.CLAIMING, Action.START_WRITER)  # it became showable while adopting: make it
        if life.ended:
            return life._ended_unclaimed()
        return life._to(State.OPEN)
    if outcome is ClaimOutcome.LOCKED:
        return ()  # the writer tries again on the run's next change (or, once ended, a bounded number of times)
    if outcome is ClaimOutcome.UNAVAILABLE:
        # Ended: kept until the database takes writes again. Still running: the run's next event tries again.
        return life._to(State.UNSAVED) if life.ended else ()
    return life._to(State.ABANDONED)  # FAILED


_on(State.CLAIMING, Showable, Terminal, Stop)(_record)
_on(State.CLAIMING, Listed)(_stay)


@_on((State.CLAIMING, State.CHECKING, State.FINISHING), ConnectionClosed)
def _writer_lost_unclaimed(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    # The writer was cancelled before it held anything this process must finish: carry the run as OPEN (or
    # as DETACHED if it had taken its message); the next connection's hello decides again.
    return life._to(State.DETACHED if life.claimed else State.OPEN)


@_on(State.STREAMING, Terminal)
def _streaming_terminal(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    life._record_end(event)
    return life._to(State.FINALIZING, Action.END_STREAM)


@_on(State.STREAMING, Stop)
def _streaming_stop(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    life.stop = True
    return life._to(State.FINALIZING, Action.END_STREAM)


@_on((State.STREAMING, State.FINALIZING), ConnectionClosed)
def _claimed_writer_lost(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    # This process holds the message and its writer's connection closed: the next connection takes it back.
    # Nothing is written meanwhile: an ended run is finalized from the transcript there, never from a stream
    # that may lack what the closing connection did not deliver.
    return life._to(State.DETACHED)


_on(State.STREAMING, Showable, Listed)(_record)


@_on(State.STANDBY, Terminal)
def _standby_terminal(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    # Look again at the end: the writer that held the message may have died meanwhile.
    life._record_end(event)
    return life._to(State.CLAIMING, Action.START_WRITER)


_on(State.STANDBY, Showable, Listed)(_record)
# The writer that holds the message is another connection's or process's: the Stop is theirs to act on.
_on(State.STANDBY, Stop)(_stay)


@_on(State.STANDBY, ConnectionClosed)
def _standby_closed(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    return life._to(State.OPEN)


@_on(State.DETACHED, Listed)
def _detached_listed(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    return life._to(State.CLAIMING, Action.START_WRITER)  # take its message back and stream on


@_on(State.DETACHED, Terminal)
def _detached_terminal(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    life._record_end(event)
    return life._to(State.CLAIMING, Action.START_WRITER)  # take it back and finalize from the transcript


@_on(State.DETACHED, Hello)
def _detached_hello(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    _note_boot(life, event)
    return life._resume()


_on(State.DETACHED, Showable, Stop)(_record)
_on(State.DETACHED, ConnectionClosed)(_stay)


@_on(State.CHECKING, TranscriptChecked)
def _checked(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    assert isinstance(event, TranscriptChecked)
    life.transcript_shows = event.shows
    life.checked = True
    # The same writer goes on to claim: to make the message if the transcript shows something, else only to
    # adopt one that exists unfinished (a dead writer's, whose run a crash cut before its transcript said
    # anything): it is finished rather than left ``done: false``. None there: the run is given up.
    return life._to(State.CLAIMING)


_on(State.CHECKING, Showable, Terminal, Stop, Listed)(_record)


@_on((State.FINISHING, State.FINALIZING), WriteResult)
def _written(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    assert isinstance(event, WriteResult)
    if event.outcome is WriteOutcome.NOT_WRITTEN:
        return life._to(State.UNSAVED)
    return life._to(State.DONE)


_on((State.FINISHING, State.FINALIZING), Showable, Terminal, Stop, Listed)(_record)


@_on(State.INLINE, Handover)
def _handover(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    # The request ended before its run: a writer takes the same message over, from the renderer the request
    # fed all along; if the run has already ended it finalizes at once.
    life.claimed = True
    return life._to(State.CLAIMING, Action.START_WRITER)


_on(State.INLINE, Showable, Terminal, Stop, Listed, ConnectionClosed, Hello)(_record)


@_on(State.INLINE, WriteResult)
def _inline_written(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    return _written(life, event)


@_on(State.UNSAVED, Retry)
def _retry(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    return life._resume()  # its own message back (or made now, or finished where another process holds it)


@_on(State.UNSAVED, Hello)
def _unsaved_hello(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    _note_boot(life, event)
    return life._resume()


_on(State.UNSAVED, Showable, Terminal, Stop, Listed, Handover)(_record)
_on(State.UNSAVED, ConnectionClosed)(_stay)


@_on((State.CLAIMING, State.STREAMING, State.CHECKING, State.FINISHING, State.FINALIZING), WriterFailed)
def _failed(life: Lifecycle, event: Input) -> tuple[Action, ...]:
    return life._to(State.ABANDONED)


def _note_boot(life: Lifecycle, event: Input) -> None:
    assert isinstance(event, Hello)
    if event.boot_id is not None:
        life.boot_id = event.boot_id


def legal_inputs(state: State) -> frozenset[type]:
    """The input types a state takes (for tests and for the shell's error messages)."""
    return frozenset(kind for (s, kind) in _TABLE if s is state)
