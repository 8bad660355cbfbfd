"""One run as this process knows it: its lifecycle, its renderer, its message, and its writer's handle.

A ``Run`` lives in the ledger (``owc/runs/ledger.py``) from the moment a connection first hears of it until it
is settled, across the connections in between: a drop does not lose what the run showed, who holds its
message, or that it ended.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs
import trio

from owc import ids
from owc.protocol import ChatHistory
from owc.render import TurnRenderer
from owc.render.seam import with_live_seam
from owc.render.status import StatusLines
from owc.rules.lifecycle import Lifecycle, Stop, Terminal
from owc.rules.owner import Heard, Owner

RunKey = tuple[str, str]  # (session key, run id)
#: What ends a writer's streaming phase: the run's own terminal, or the user's Stop (the lifecycle's
#: ``STREAMING`` cells that answer ``END_STREAM``). A handover is not one: it ends the Pipe request's inline phase
#: (``INLINE``), whose request Open WebUI ends, and it *starts* a writer (``INLINE`` + ``Handover`` answers
#: ``START_WRITER``); no writer is streaming then, so none is ended by it.
StreamEnd = Terminal | Stop


class WriterHandle:
    """What a writer task hands back when it has started (``nursery.start``): the cancel scope of its
    streaming phase, made inside the task, and the way to end it with what ended it."""

    def __init__(self) -> None:
        self.scope = trio.CancelScope()
        #: What ended the streaming phase (None: it has not ended, or the writer left it by itself).
        self.ended_by: StreamEnd | None = None
        self.finished = trio.Event()

    def end(self, why: StreamEnd) -> None:
        """End the streaming phase (the first end wins); the writer goes on to finalize."""
        if self.ended_by is None:
            self.ended_by = why
        self.scope.cancel()


class HandoverState(enum.Enum):
    """Where a user turn's handover stands: the Pipe's request ended, and a writer takes its message over."""

    NONE = "none"  # not a user turn, or its request has not ended
    PENDING = "pending"  # its request ended while no connection was up: the next connection's hello hands it over
    DONE = "done"  # handed over: its writer takes back the message the request's own save marked done


@attrs.define(eq=False)
class WriterSlot:
    """A run's writing as its table sees it, across the writer tasks it may have (one per connection at most).
    ``nursery.start`` returns the handle only once the task has started, and meanwhile the run must count as
    written (a second writer would be started otherwise)."""

    #: ``nursery.start`` has not returned yet.
    starting: bool = False
    #: What the task handed back when it started (None: never started here, or not yet).
    handle: WriterHandle | None = None
    #: A user turn's handover (``HandoverState``): its writer takes back the message the request's save marked done.
    handover: HandoverState = HandoverState.NONE
    #: The tabs were told its message is not saved yet (once; they hear again when it is).
    told_unsaved: bool = False

    @property
    def live(self) -> bool:
        return self.starting or (self.handle is not None and not self.handle.finished.is_set())


@attrs.define(eq=False)
class Standing:
    """Where a run stands in its chat's run-start order, and against the reconcile passes. Claims on one chat go in
    this order (``owc.rules.claim``)."""

    #: (the Gateway time it was first known to have run, the ledger's count when it was opened).
    order: tuple[int, int] = (0, 0)
    #: The ledger's count when it was opened, kept (a pass may replace ``order``'s with a transcript index).
    number: int = 0
    #: ``order`` holds a Gateway time of the run's own (else a stand-in: the newest time seen when it was
    #: first known, replaced by the first time of its own that arrives).
    timed: bool = False
    #: 0 once a reconcile pass placed the run by its transcript (``order`` is then its first message's time
    #: and its index among the window's runs), 1 while it is placed by what the connection saw.
    rank: int = 1
    #: The Gateway boot (``HelloOk.boot_id``) of the connection that first saw it live (None: opened by a reconcile
    #: pass, or a boot without an id). A run is carried only forward, so another boot id is an earlier boot: the run
    #: began before that later boot did, and before every run the later boot started (``goes_before_owed``).
    boot: str | None = None
    #: Given its message by a hello's reconcile pass (it ended while owc was away).
    reconciled: bool = False
    #: First seen while a hello's reconcile pass still owed its chat older runs (before the list was in, or
    #: before the pass was done with the chat). Cleared when a pass is done with the chat; if the connection
    #: closes first, the run is carried still behind a pass, and the next connection's pass goes first.
    behind_pass: bool = False
    #: A ``chat`` or ``agent`` event of its own reached a connection (not only its start and end).
    heard: bool = False
    #: Where its own events (a lifecycle push too) fell among the Gateway's events this process heard
    #: (``Ledger.heard``): a run of its session heard after its last one ran after it had ended (``ended_before``).
    heard_at: Heard | None = None

    @property
    def place(self) -> tuple[int, int, int]:
        """The run's place in its chat's run-start order, comparable across runs of one chat. At equal Gateway
        times a run placed by its transcript goes first: a run not in the window has stored nothing yet, so it
        is the session's newest (or one a crash cut), and runs on one session never overlap."""
        return (self.order[0], self.rank, self.order[1])


@attrs.define(eq=False)
class Reading:
    """A run's transcript as this process read it, and its check's wait."""

    #: The transcript once read after the run's end (a check, a reconcile): the finalize reuses it.
    history: ChatHistory | None = None
    #: ``history`` was read before this process's claim put the run's message at the chat's tail: it holds the run
    #: whole (read after its end), but not the runs of the session that began after it was read, whose messages the
    #: claim may have landed under; the finalize reads it again for the order it puts that line in (fuzz seed
    #: 305323).
    before_claim: bool = False
    #: Its transcript check waits for a read that failed to be answered (the next tick): it holds nobody up.
    check_waits: bool = False


@attrs.define(eq=False)
class Continuation:
    """A run's part in a cut run's continuation (``owc/runs/cuts.py``, ``owc.rules.cut``): as the cut run (its message
    kept open, or ended with a note), or as the continuation (a resume, or a recovery linked by rule E)."""

    #: The owner rule kept its message open for a continuation: its writer writes M open.
    cut: Owner | None = None
    #: The note its message ends with when nobody continues it (a newer run took the session).
    note: str | None = None
    #: A continuation: the runs its message holds before it.
    chain: tuple[str, ...] = ()
    #: What its message shows before its own output (the earlier runs' output; None: read it at the claim).
    prefix: list[dict[str, Any]] | None = None
    #: Resumes its message had when it began (the budget is counted on the message).
    resumes: int = 0
    #: The output a cut run left its message with (written open), for its continuation.
    kept_output: list[dict[str, Any]] | None = None
    #: Link rule E was checked for it (it is a recovery, or not).
    link_checked: bool = False
    #: Link rule E said it is a restart recovery (linked, or of a run the transcript does not name): once its message
    #: is finished, a double of it another process made is taken out (``Cuts.one_reply``).
    recovery: bool = False
    #: Waiting, before its claim, for the message of the cut run it continues (``Cuts.link``): it waits on that run,
    #: so it holds no other run's claim up (``Ledger.claim_blocker``).
    linking: bool = False
    #: ``prefix`` with the seam after it, as the writer shows it live (kept, so its identity changes with ``prefix``).
    seamed: tuple[object, list[dict[str, Any]] | None] = (None, None)


@attrs.define(eq=False)
class Run:
    """One run: who it is, its lifecycle and what it shows, and four records of what this process knows of it (its
    writing, its standing in the chat's order, its transcript, its part in a continuation)."""

    session_key: str
    run_id: str
    ref: ids.SessionRef
    message_id: str
    renderer: TurnRenderer
    life: Lifecycle = attrs.field(factory=Lifecycle)
    #: The status lines of its message as this process says them (``owc.render.status``): fed by the table, the
    #: writer and the Pipe's request; delivered by whoever writes the message now (the request while inline).
    status: StatusLines = attrs.field(factory=StatusLines)
    writer: WriterSlot = attrs.field(factory=WriterSlot)
    standing: Standing = attrs.field(factory=Standing)
    read: Reading = attrs.field(factory=Reading)
    cont: Continuation = attrs.field(factory=Continuation)
    #: Set at the run's next change (an event, an input): what its writer waits on while it streams.
    _changed: trio.Event = attrs.field(factory=trio.Event)

    @property
    def key(self) -> RunKey:
        return (self.session_key, self.run_id)

    @property
    def place(self) -> tuple[int, int, int]:
        """The run's place in its chat's run-start order (``Standing.place``)."""
        return self.standing.place

    def place_in_transcript(self, first_ms: int | None, index: int) -> None:
        """A pass read the chat's transcript and found the run at ``index`` among its runs."""
        at = self.standing
        at.order, at.rank, at.timed = (first_ms if first_ms is not None else at.order[0], index), 0, True

    @property
    def writer_live(self) -> bool:
        return self.writer.live

    def poke(self) -> None:
        """Something about the run changed (an event, a state): wake its writer."""
        self._changed.set()

    async def wait_changed(self) -> None:
        await self._changed.wait()
        self._changed = trio.Event()

    def shown_prefix(self) -> list[dict[str, Any]] | None:
        """What its message shows before its own output while it streams: the earlier runs' output (a
        continuation's), and the seam that says a continuation begins (``owc.render.seam``). The same list object
        while ``prefix`` is (a writer's flush compares it by identity)."""
        cont = self.cont
        held, seamed = cont.seamed
        if held is not cont.prefix:
            seamed = with_live_seam(cont.prefix, self.run_id, cont.chain)
            cont.seamed = (cont.prefix, seamed)
        return seamed

    def output(self) -> list[dict[str, Any]]:
        """What its message shows now: the earlier runs' output and the seam (a continuation's), then its own."""
        own = self.renderer.output()
        prefix = self.shown_prefix()
        return [*prefix, *own] if prefix else own

    def mark_missed(self, reason: str) -> None:
        """The stream may lack some of the run's events (joined mid-run, a gap, a reconnect)."""
        self.renderer.mark_gap(reason)
        self.life.missed = True
