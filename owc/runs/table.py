"""The run table of one Gateway connection, and the keeper that gives every connection its table.

``RunKeeper.attach(conn)`` is an async context manager the connection enters for exactly its own lifetime
(``owc/gateway/connection.py``); inside it the connection's writer id is registered alive, and the table's
nursery holds one writer task per run this connection writes. Leaving it cancels those writers and tells every
run it touched that its connection closed; the runs themselves stay in the ``Ledger``, which outlives the
connection, so the next connection's hello accounts for each of them.

Runs are opened for an Open WebUI chat's session key on the Gateway's start signal (``sessions.changed``
phase start), on a list that shows them active, or on **any first event that names them** (a run whose start
push was lost or reordered by the Gateway's debounce). Runs on other keys and ``owui-action-`` runs never get a
message; a heartbeat runner's turn gets one when its transcript shows a reply, decided at its end (the Gateway
shows this connection nothing else of it), as the Gateway's own chat shows it. A run ends only on its own end:
its chat terminal, ``sessions.changed`` end/error, or its absence from a list after a gap or a reconnect. Reason
pushes and rows never end a run.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs
import trio

from owc import ids
from owc.emit import Emitter
from owc.gateway import HelloInfo, NotConnected, Resync, SessionClosed
from owc.protocol import AgentEvent, ChatEvent, Event, SessionRow, SessionsChanged, Shutdown, Tick
from owc.protocol.events import is_internal_run_id
from owc.protocol.questions import QuestionRequested, QuestionResolved
from owc.registry import WRITERS, WriterRegistry
from owc.render import status as lines
from owc.rules.claim import ClaimFacts, Turn, claim_turn
from owc.rules.lifecycle import (
    Action,
    ClaimOutcome,
    ClaimResult,
    ConnectionClosed,
    Handover,
    Hello,
    IllegalTransition,
    Input,
    Listed,
    Retry,
    Showable,
    State,
    Stop,
    Terminal,
    WriteOutcome,
    WriteResult,
)
from owc.rules.owner import Owner, Row, Seen, ended_before, row_at_terminal, settled_before_boot
from owc.rules.reconcile import goes_before_owed
from owc.runs.correct import Corrections
from owc.runs.cuts import Cuts, resumes_message
from owc.runs.ledger import Ledger
from owc.runs.media import MediaDesk
from owc.runs.questions import QuestionDesk
from owc.runs.reconcile import reconcile
from owc.runs.run import HandoverState, Run, RunKey
from owc.runs.status import StatusDesk
from owc.runs.wakes import Wakes
from owc.runs.writer import FINALIZES_AT_ONCE, Stats, WriterContext, abort_run, history_reads, write_run
from owc.store import TrioChatStore

if TYPE_CHECKING:
    from owc.gateway import Connection

log = logging.getLogger("owc.runs")

#: How many sessions one hello's reconcile pass reads at most (newest first); the rest wait for a later hello.
RECONCILE_LIMIT = 50


def _at_its_start(event: ChatEvent | AgentEvent) -> bool:
    """The event is one a run sends as it begins, before anything it shows: the ``run_status`` / ``status``
    preparing phases, then its lifecycle ``start`` (the real Gateway's order, followed by the simulator).
    A run first seen by any other event began before this connection saw it."""
    if isinstance(event, AgentEvent):
        return event.stream == "run_status" or (event.lifecycle is not None and event.lifecycle.phase == "start")
    return event.state == "status"


class RunTable:
    """One per connection; its writers live in its nursery, inside the connection's."""

    def __init__(self, keeper: RunKeeper, conn: Connection, nursery: trio.Nursery) -> None:
        self.keeper = keeper
        self.conn = conn
        self.ledger = keeper.ledger
        self._nursery = nursery
        #: False once the connection has ended: its nursery takes no new task (the runs hear ``ConnectionClosed``
        #: next, and the next connection's table starts what they need).
        self.live = True
        self.writer_id = keeper.registry.writer_id(conn.id)
        #: Transcript reads in flight on this connection at once: their replies (up to ``HISTORY_MAX_BYTES`` each)
        #: stay within half the Gateway's buffer for a client (``policy.maxBufferedBytes``), so 10,000 runs ending
        #: together queue here instead of each waiting out its RPC bound at the Gateway (issue 24, item 9).
        self.history_reads = trio.CapacityLimiter(history_reads(conn.hello.policy.max_buffered_bytes))
        self.ctx = WriterContext(
            store=keeper.store,
            emitter=keeper.emitter,
            request=self.request,
            writer_id=self.writer_id,
            registry=keeper.registry,
            apply=self.apply,
            stats=keeper.stats,
            claim_turn=self.claim_turn,
            correct_later=keeper.corrections.add,
            next_tick=self.next_tick,
            stop=keeper.stop_run,
            uncut=keeper.cuts.uncut,
            one_reply=lambda run: keeper.cuts.finished_recovery(self, run),
            heard_before=self.ledger.heard_before,
            dropped=lambda: self.conn.closed,
            wake=keeper.wake,
            usage_line=lambda: keeper.usage_line,
            delivered=keeper.media.finished,
            finalizing=keeper.finalizing,
        )
        #: Sessions a list showed active without run ids: a run first seen on one may have started earlier.
        self._unknown: set[str] = set()
        self.reconciling = 0
        #: The hello's reconcile pass ran to its end (only then may the next connection look past this one's
        #: events: a pass cut short by a close must be done again from the same watermark).
        self.reconciled = False
        self.hello: HelloInfo | None = None
        #: Runs carried from earlier connections (unsettled in the ledger when this one began).
        self.carried: set[RunKey] = {run.key for run in self.ledger.unsettled()}
        #: Chats the hello's reconcile pass has yet to look at: runs that ended while owc was away come before
        #: any run now live there, so a live run's claim in one of them waits for the pass (bounded by its
        #: RPCs' own timeouts; no clock of its own).
        self.reconcile_pending: set[str] = set()
        #: For a pending chat whose transcript the pass has read: the Gateway time of the next run it owes
        #: (None: nothing more). A carried run behind an earlier pass may claim once it comes before that.
        self.next_owed: dict[str, tuple[int, int, int] | None] = {}
        #: Chats a pass let go without giving them what they owe (``reconciled_chat(settled=False)``).
        self.unsettled_chats: set[str] = set()
        #: What the hello's reconcile pass was given, for a pass again at a tick if it fell short.
        self._hello_pass: tuple[Resync, int | None] | None = None
        #: A seq gap not yet resynced, and the Gateway time of the last event this connection saw before the
        #: oldest such gap (None: no event had come yet; the hello pass's watermark then serves): a run that
        #: ended after it may have started and ended inside the gap, and only a pass over the transcript finds
        #: it (``_gap_pass``). Kept for the burst's later lists (a gap found while one was on its way).
        self._gap_open = False
        self._gap_next: int | None = None
        self._gap_mark: int | None = None
        #: Gap passes run one at a time (a burst of gaps lists again while one is under way), each after the
        #: hello's pass (they share its chat holds, ``reconcile_pending``); how many are scheduled.
        self._gap_lock = trio.Lock()
        self._gap_passes = 0
        #: Gap passes owed and not yet done whole (scheduled, cut short by a ``chat.history`` that failed: again at
        #: the next tick): until each is done, this connection's last event is no watermark for the next one's pass
        #: (``on_closed``), and the runtime is not quiet.
        self.gaps_owed: list[_GapPass] = []

    # ------------------------------------------------------------------ the lifecycle's actions

    def apply(self, run: Run, event: Input) -> None:
        """Feed one input to a run's lifecycle and do what it answers. An illegal input is a bug: logged and
        recorded (tests fail on it, ``strict`` raises), never a crash of the connection."""
        before = run.life.state
        try:
            actions = run.life.apply(event)
        except IllegalTransition as exc:
            self.ledger.illegal.append(f"{run.run_id}: {exc}")
            log.error("runs.illegal_input run=%s %s", run.run_id, exc)
            if self.ledger.strict:
                raise
            return
        self.ledger.moved(run)
        log.debug(
            "runs.input run=%s %s -> %s on %s", run.run_id, before.value, run.life.state.value, type(event).__name__
        )
        if isinstance(event, Terminal):
            self.retry_unsaved("a run's terminal")
        elif isinstance(event, (ClaimResult, WriteResult)) and event.outcome in (
            ClaimOutcome.WON,
            WriteOutcome.WRITTEN,
        ):
            self.retry_unsaved("a write went through")
        for action in actions:
            if action is Action.START_WRITER:
                self._start_writer(run)
            elif action is Action.END_STREAM:
                if run.writer.handle is not None and isinstance(event, (Terminal, Stop)):
                    run.writer.handle.end(event)
            elif action is Action.ABORT_RUN:
                self._start_soon(abort_run, self.conn.request, run, name=f"owc.abort:{run.run_id}")
            elif action is Action.RETIRE:
                self.ledger.retire(run)
                self.keeper.cuts.on_settled(self, run)
        run.poke()
        self.keeper.wake(run.ref.chat_id)

    def spawn(self, fn: Callable[..., Any], *args: Any) -> None:
        """Start a task of this connection (it ends with the connection)."""
        self._nursery.start_soon(fn, *args)

    def _start_writer(self, run: Run) -> None:
        if run.writer_live:
            return  # the run's writer reads the new state when it looks next (it was poked)
        if self._start_soon(self._spawn, run, name=f"owc.writer:{run.run_id}"):
            run.writer.starting = True

    def _start_soon(self, fn: Callable[..., Awaitable[object]], *args: object, name: str) -> bool:
        """Start a task of this connection, unless the connection has ended (a caller holding this table past its
        connection's end, like a request whose task ends during the close, is never crashed by it)."""
        if not self.live:
            log.warning("runs.connection_gone task=%s (the connection ended: the next one takes it up)", name)
            return False
        self._nursery.start_soon(fn, *args, name=name)
        return True

    async def _spawn(self, run: Run) -> None:
        try:
            run.writer.handle = await self._nursery.start(write_run, self.ctx, run, name=f"owc.writer:{run.run_id}")
        finally:
            run.writer.starting = False
            self.keeper.wake(run.ref.chat_id)

    async def claim_turn(self, run: Run) -> None:
        """Wait until ``run`` may claim (``WriterContext.claim_turn``): no earlier run of its chat is still
        claiming or checking (``Ledger.claim_blocker``), and no reconcile pass still owes its chat older runs."""
        self.keeper.cuts.adopt(run)
        await self.keeper.cuts.adopt_stored(run)
        if self.keeper.cuts.may_link(run):
            await self.keeper.cuts.link(self, run)  # a restart recovery writes into the message of the run it recovers

        def may_claim() -> bool:
            return claim_turn(self._claim_facts(run)) is Turn.GO

        turn = claim_turn(self._claim_facts(run))
        if turn is not Turn.GO:
            log.info("runs.claim_waits run=%s chat=%s for=%s", run.run_id, run.ref.chat_id, turn.value)
            await self.keeper.until(may_claim, run.ref.chat_id)

    def _claim_facts(self, run: Run) -> ClaimFacts:
        """What claim order needs to know of ``run`` now (``owc.rules.claim``): gathered here, judged there."""
        claiming = run.life.state is State.CLAIMING
        carried = run.key in self.carried
        return ClaimFacts(
            claiming=claiming,
            awaited=claiming and self.keeper.cuts.awaited(run),
            reconciled=run.standing.reconciled,
            carried=carried,
            behind_pass=run.standing.behind_pass,
            hello=self.hello is not None,
            pass_due=run.ref.chat_id in self.reconcile_pending,
            placed=run.standing.rank == 0 or run.standing.timed,
            before_owed=claiming and not run.standing.reconciled and self._before_next_owed(run),
            earlier=claiming and self.ledger.claim_blocker(run, self.carried) is not None,
        )

    def _before_next_owed(self, run: Run) -> bool:
        chat = run.ref.chat_id
        if chat not in self.reconcile_pending:
            return True
        if chat not in self.next_owed:
            return False  # the pass has not read the chat's transcript yet
        nxt = self.next_owed[chat]
        boot = self.conn.hello.boot_id
        earlier_boot = (
            run.standing.boot is not None and boot is not None and run.standing.boot != boot
        )  # a run carried across a boot
        # A recovery waiting for a later cut run's message holds the pass: the runs it owes began after this one.
        return goes_before_owed(run.place, nxt, earlier_boot=earlier_boot) or (
            nxt is not None and self.keeper.cuts.owed_after(run, nxt)
        )

    def owes_next(self, chat_id: str, place: tuple[int, int, int] | None) -> None:
        """The pass will give ``chat_id`` the run at ``place`` (``Run.place``) next (None: none that any run
        still waiting there could have to follow)."""
        self.next_owed[chat_id] = place
        self.keeper.wake(chat_id)

    def reconciled_chat(self, chat_id: str, *, settled: bool = True) -> None:
        """The reconcile pass is done with ``chat_id``: live claims there may go on. ``settled``: it gave the
        chat every run it owed; if not (its transcript could not be read, the pass's bound), live claims go on
        all the same (a failing read must not hold them), but runs known there stay behind the pass, so the
        next connection's pass goes first if this connection closes before a pass again settles the chat."""
        if settled:
            self.unsettled_chats.discard(chat_id)
            for run in self.ledger.unsettled():
                if run.ref.chat_id == chat_id:
                    run.standing.behind_pass = False
        else:
            self.unsettled_chats.add(chat_id)
        self.next_owed.pop(chat_id, None)
        if chat_id in self.reconcile_pending:
            self.reconcile_pending.discard(chat_id)
            self.keeper.wake(chat_id)

    # ------------------------------------------------------------------ events

    def _open(self, session_key: str, run_id: str, *, start: bool, seen_ms: int | None = None) -> Run | None:
        if is_internal_run_id(run_id):
            return None  # the Gateway's own internal runs are shown on none of its chat surfaces: never here either
        known = self.ledger.get(session_key, run_id) is not None
        run = self.ledger.open(session_key, run_id, seen_ms=seen_ms)
        if run is not None and not known:
            self.keeper.cuts.adopt(run)  # a resume owc sent continues its cut's message
            run.standing.boot = self.conn.hello.boot_id
            chat = run.ref.chat_id
            run.standing.behind_pass = (
                self.hello is None or chat in self.reconcile_pending or chat in self.unsettled_chats
            )
            self.keeper.wake(chat)
        if run is not None and not known and not start:
            # Its start was not seen here: it began before this connection (or this process) did, or its first
            # events were lost. Whatever it showed meanwhile is in its transcript, which is read before a run
            # that ends "showing nothing" is given up (before, such a run seen first just before the hello's
            # list was abandoned at its terminal: found by the fuzzer).
            run.mark_missed("first seen mid-run")
        return run

    def retry_unsaved(self, why: str) -> None:
        """The database may take writes again: every run whose message it would not take tries once more
        (one writer each; a run whose retry is under way is left to it). The ledger keeps them apart: this is
        asked at every terminal and every write that went through."""
        for run in self.ledger.unsaved():
            if run.life.state is State.UNSAVED and not run.writer_live:
                log.info("runs.retry_unsaved run=%s chat=%s (%s)", run.run_id, run.ref.chat_id, why)
                self.apply(run, Retry())

    def on_event(self, event: Event) -> None:
        """Called by the connection's reader for every consumed event, in order; never blocks."""
        ts = getattr(event, "ts", None)
        self.ledger.saw_time(ts)
        self.keeper.status.on_event(event)  # an open status view of the chat it is about reads again
        if isinstance(event, Tick):
            self.keeper.ticks += 1
            self.keeper.wake()
            self.keeper.cuts.on_tick(self)
            self.retry_unsaved("a Gateway tick")
            self._retry_reconcile()
            self._retry_gap_passes()
            self._correct()
            return
        if isinstance(event, (QuestionRequested, QuestionResolved)):
            self.keeper.questions.on_event(event)  # a question to the chat's tabs: nothing about the run's life
            return
        if isinstance(event, SessionsChanged):
            self.keeper.cuts.on_row(self, event)
            if event.phase == "message" and event.session_key is not None:
                # A transcript message was rewritten: how a run's files arrive after its final (``owc.runs.media``).
                self.keeper.media.on_changed(event.session_key)
            if event.session_key is None or event.run_id is None or not event.is_lifecycle:
                return  # reason pushes and rows never end a run: only the run's own terminal does
            run = self._open(
                event.session_key,
                event.effective_run_id or event.run_id,
                start=event.phase == "start",
                seen_ms=event.ts,
            )
            if run is not None:
                self.ledger.heard(run, self.conn.hello.boot_id)
            if run is not None and event.phase in ("end", "error"):
                if not run.standing.heard and not run.life.missed:
                    # Not one event of its own reached this connection: the Gateway hides it from control UIs
                    # (a heartbeat runner's turn sends a sessions.subscribe connection only its start and end;
                    # measured). Its transcript decides, now, at its end, where a message keeps its place.
                    run.mark_missed("no event of its own (a run hidden from control UIs)")
                if run.renderer.holds_back:
                    # Its chat terminal (which would show a short answer held back as a possible sentinel
                    # prefix) has not come: the transcript decides whether the run showed something.
                    run.mark_missed("ended with its text held back")
                if run.life.terminal is None and (event.status in ("killed", "failed") or self.conn.notice is not None):
                    # Its chat terminal did not come first: the row this push carries says how it ended.
                    push = Row(event.status, False, event.last_run_id, event.last_run_error)
                    self.keeper.cuts.decide(
                        self, run, row_at_terminal(None, None, None, run.run_id, push), self._seen()
                    )
                self.apply(
                    run,
                    Terminal.from_row(
                        f"sessions.changed {event.phase}",
                        run.run_id,
                        event.status,
                        event.last_run_id or run.run_id,
                        event.last_run_error,
                    )
                    if run.life.terminal is None
                    else Terminal(f"sessions.changed {event.phase}"),
                )
            return
        if not isinstance(event, (ChatEvent, AgentEvent)) or event.session_key is None:
            return
        if isinstance(event, AgentEvent) and event.is_internal:
            return  # ``projectSessionLifecycle: false``: an internal run (measured: none reaches an operator today)
        start = _at_its_start(event)
        run = self._open(event.session_key, event.run_id, start=start, seen_ms=ts)
        if run is None:
            return
        run.standing.heard = True
        self.ledger.heard(run, self.conn.hello.boot_id)
        if not run.standing.timed and ts is not None:
            # Any time of the run's own places it rightly: a session runs one run at a time, so its events
            # fall after every earlier run's end and before every later run's start.
            run.standing.order, run.standing.timed = (ts, run.standing.order[1]), True
            self.keeper.wake(run.ref.chat_id)  # its place moved: a claim waiting on it looks again
        if run.renderer.feed(event):
            run.poke()
        if not run.life.showable and run.renderer.showable:
            self.apply(run, Showable())
        if isinstance(event, ChatEvent) and event.is_terminal:
            if event.state in ("aborted", "error") and run.life.terminal is None:
                row = row_at_terminal(event.state, event.stop_reason, event.error_message, run.run_id)
                self.keeper.cuts.decide(self, run, row, self._seen())
            self.apply(run, Terminal(f"chat {event.state}", event.state, event.stop_reason, event.error_message))

    def _seen(self, *, terminal: bool = True, notice: Shutdown | None = None) -> Seen:
        """What this connection saw of a cut: a ``shutdown`` notice before the run's terminal, and its kind."""
        notice = notice if notice is not None else self.conn.notice
        return Seen(
            terminal=terminal,
            notice_before_terminal=notice is not None,
            restart_expected=notice is not None and notice.restart_expected_ms is not None,
        )

    def on_gap(self) -> None:
        """Events were lost: any run still going may have lost some, so a run that then ends showing nothing
        gets its transcript read (the resync's list, on its way, tells which runs started or ended)."""
        for run in self.ledger.unsettled():
            if not run.life.ended:
                run.mark_missed("seq gap")
        if not self._gap_open:
            # Called before the event that showed the gap is delivered: this is the last time seen before it.
            self._gap_open = True
            self._gap_next = self.conn.last_ts or None

    # ------------------------------------------------------------------ hello and resync

    async def on_hello(self, info: HelloInfo, resync: Resync) -> None:
        """After the subscribe-and-list: account for every run the ledger carried from earlier connections,
        then act on the list, then (in the background) give runs that ended while owc was away their message."""
        self.hello = info
        # What waits at the Gateway now (its question events are not replayed), beside the rest of the hello.
        self._nursery.start_soon(self.keeper.questions.on_hello, self.conn.request)
        for row in resync.rows:
            self.ledger.saw_time(row.updated_at)
            ref = ids.parse_session_key(row.key)
            if ref is not None:
                self.reconcile_pending.add(ref.chat_id)  # before the list opens runs: they are behind the pass
        listed = {(row.key, run_id) for row in resync.rows for run_id in row.active_run_ids or ()}
        unknown = set(resync.active_unknown)
        ended = set(resync.ended)
        rows = {row.key: row for row in resync.rows}
        known = self.ledger.unsettled()
        for run in known:
            if run.key not in self.carried:
                continue
            # Back: a "connection lost" line its message shows is closed (by its writer's next write, or its request).
            run.status.apply(lines.Reconnected())
            self.apply(run, Hello(info.hello.boot_id, info.boot_changed))
            if run.writer.handover is HandoverState.PENDING and run.life.state is State.INLINE:
                run.writer.handover = HandoverState.DONE  # its request ended while no connection was up
                self.apply(run, Handover())
            if run.life.settled or run.life.ended:
                continue
            if info.boot_changed:
                # A run lives in its Gateway process: after a new boot it is over, whatever the list says (a
                # session active without run ids is the boot's recovery, a new run: 004, "a fresh run ID").
                later = next(
                    (
                        other
                        for other in known
                        if other.session_key == run.session_key
                        and ended_before(run.standing.heard_at, other.standing.heard_at)
                    ),
                    None,
                )
                if later is not None:
                    # A later run of its session ran after it under the old boot: it had ended on its own (its
                    # terminal fell in a gap, or the connection closed first), so the boot did not cut it. No owner,
                    # no cut-off note (fuzz seed 151800): its transcript says how it ended.
                    log.info("runs.ended_before run=%s later=%s (not the boot's cut)", run.run_id, later.run_id)
                    self.apply(run, Terminal("it ended before a later run of its session ran"))
                    continue
                # No terminal reached owc: the row says who continues it (a crash leaves it running: the
                # Gateway's recovery; a stop leaves it killed after the notice: owc's resume).
                self._decide_unterminated(run, rows.get(run.session_key), info)
                self.apply(run, Terminal("the Gateway restarted (a new boot): no run outlives its boot"))
            elif run.key in listed or run.session_key in unknown:
                self.apply(run, Listed())
            elif run.key in ended:
                row = rows.get(run.session_key)
                self._decide_unterminated(run, row, info)
                reason = "absent from the list at hello (it ended while the connection was down)"
                self.apply(run, _row_terminal(reason, run, row))
        for row in resync.rows:
            if info.boot_changed:
                # A cut made before the hello: its recovery.
                self.keeper.cuts.on_boot_row(row, info.hello.boot_id, info.hello.booted_at_ms)
            self.keeper.cuts.on_row(self, row)
        self.keeper.cuts.on_hello(self)
        self._resync(resync, carried=True)
        watermark = self.keeper.watermark_ms
        self.reconciling += 1
        self._start_soon(self._reconcile, resync, watermark, name="owc.reconcile")
        self.keeper.wake()  # claims held until the hello's list was in look again

    def _decide_unterminated(self, run: Run, row: SessionRow | None, info: HelloInfo) -> None:
        """The owner rule for a carried run whose terminal never reached owc, from the hello's list."""
        if row is None and not info.boot_changed:
            return  # not listed: it ended on its own, as far as anyone can tell
        listed = Row(row.status, False, row.last_run_id, row.last_run_error) if row is not None else Row(None)
        if row is not None and row.status == "running" and not info.boot_changed:
            return  # still running on the same boot: not cut
        if not info.boot_changed and row is not None and row.last_run_id not in (None, run.run_id):
            # The same boot, and a newer run on the session: this run ended on its own while the connection was down
            # (no restart, stop or crash cut it), and the row no longer says how. Not a cut: no owner, no cut-off
            # note; its transcript says how it ended (issue 24, item 3).
            return
        if (
            info.boot_changed
            and row is not None
            and row.last_run_id not in (None, run.run_id)
            and settled_before_boot(row.status, row.updated_at, info.hello.booted_at_ms)
        ):
            # A newer run on the session settled before this boot began: the boot did not recover this run (a
            # recovery starts after the boot), which ended before that run did, on its own while owc was away. As
            # the same boot's case above: not a cut (fuzz seed 141731: an announce that ran while owc was away was
            # taken for the recovery of a run that had ended aborted right after a tool call, and M was held for
            # a link that could never come).
            return
        if (
            info.boot_changed
            and row is not None
            and row.status in ("running", "done")
            and row.last_run_id not in (None, run.run_id)
            # M's own resume (another process sent it after the cut, or this one did before a restart) is not the
            # boot's recovery: the row goes to the owner rule as it is, which sees the cut being continued. Before,
            # the row was rewritten to name this run, the rule gave it to the Gateway, the transcript then said the
            # run had ended (its row failed), and the message was finished without the resume streaming into it
            # (fuzzer seed 128, 2 plays in 100 under load).
            and not resumes_message(row.last_run_id, run.message_id, (*run.cont.chain, run.run_id))
        ):
            # A newer run on the session since the boot, running or done: most likely the boot's recovery of this
            # very run (it starts at once, and may have ended before this hello). Link rule E tells, from the
            # transcript, when that run claims: it writes into this run's message, or (a run of its own) ends it
            # with a cut-off note. A row that failed or was killed under a newer run is not one the boot left
            # running for a recovery (a container stop fails every run: measured): that run decides.
            listed = Row("running", False, run.run_id)
            recovery = row.last_run_id
        else:
            recovery = None
        decision = self.keeper.cuts.decide(self, run, listed, self._seen(terminal=False, notice=info.notice))
        cut = self.keeper.cuts.by_key.get(run.session_key)
        if decision is Owner.GATEWAY and recovery is not None and cut is not None and cut.source == run.run_id:
            cut.recovery = recovery  # the run M waits for; ``Cuts.seen_chat`` ends M if it went elsewhere

    async def on_resync(self, resync: Resync) -> None:
        self._resync(resync)
        self._gap_reconcile(resync)

    def _gap_reconcile(self, resync: Resync) -> None:
        """A gap's list cannot show a run that started and ended inside the gap: it was never known here (so it
        did not end) and is not listed active (so it did not start). Its events were all droppable (a heartbeat's
        ``sessions.changed`` start and end are all a subscriber gets of it), and nothing else of it comes. The
        hello's reconcile pass is what finds runs that ended while owc was away; a gap is the same absence in
        the middle of a connection: the same pass, over the sessions whose row moved since the last event
        before the gap (an earlier run of a key whose newest is still going included), with that event's time
        as the watermark. Runs this
        connection knows are left to the live path (``retry``); a run settled already is not opened again."""
        if self._gap_open:
            # A list of the burst after a gap found while the previous one was on its way keeps the oldest mark.
            self._gap_open = False
            self._gap_mark = self._gap_next
        if self._hello_pass is None:
            return
        # No event before the gap: everything since the hello's list is in it, so the hello pass's watermark.
        mark = self._gap_mark if self._gap_mark is not None else self._hello_pass[1]
        rows = tuple(
            row
            for row in resync.rows
            if (mark is None or (row.updated_at is not None and row.updated_at >= mark))
            and row.last_run_id  # its listed active runs are the list's (``runs_owed`` leaves them alone)
            and ids.parse_session_key(row.key) is not None
        )
        if not rows:
            return
        owed = _GapPass(Resync(resync.reason, (), (), (), rows), mark)
        self.gaps_owed.append(owed)
        self._start_gap_pass(owed)
        self.keeper.wake()  # ``quiet`` reads what is owed

    def _start_gap_pass(self, owed: _GapPass) -> None:
        owed.running = True
        self.reconciling += 1
        self._gap_passes += 1
        self._start_soon(partial(self._gap_pass, owed), name="owc.gap_reconcile")

    def _retry_gap_passes(self) -> None:
        """A gap pass that fell short (a ``chat.history`` failed) goes again at the Gateway's tick, as the hello's
        pass does (fuzz seed 320809: the gap's heartbeat was never given its message)."""
        for owed in self.gaps_owed:
            if not owed.running:
                log.info("runs.gap_reconcile_again (a gap's pass did not cover everything)")
                self._start_gap_pass(owed)

    async def _gap_pass(self, owed: _GapPass) -> None:
        resync, watermark = owed.resync, owed.mark
        try:
            async with self._gap_lock:
                # The hello's pass first (or its pass again): it holds its own chats and lets each go when done
                # with it (``reconciled_chat``), which this pass would do early for the chats they share.
                await self.keeper.until(lambda: self.reconciling <= self._gap_passes)
                # Its chats' live claims wait for it as they do for the hello's pass (the gap's runs came first).
                added = {ref.chat_id for row in resync.rows if (ref := ids.parse_session_key(row.key))}
                added -= self.reconcile_pending
                self.reconcile_pending |= added
                try:
                    if await reconcile(
                        self, resync, watermark_ms=watermark, limit=self.keeper.reconcile_limit, retry=True
                    ):
                        self.gaps_owed.remove(owed)
                except (SessionClosed, NotConnected):
                    log.info("runs.gap_reconcile_cut (the connection closed; the next hello's pass looks)")
                finally:
                    for chat in added:
                        self.next_owed.pop(chat, None)
                    self.reconcile_pending -= added
        finally:
            owed.running = False
            self._gap_passes -= 1
            self.reconciling -= 1
            self.keeper.wake()

    def _resync(self, resync: Resync, *, carried: bool = False) -> None:
        """A list after a gap (or the hello's): runs it shows that this connection did not know were joined
        mid-run; runs it no longer shows have ended."""
        self._unknown |= set(resync.active_unknown)
        for key, run_id in resync.started:
            if carried and (key, run_id) in self.carried:
                continue  # a carried run was handled with its ledger entry
            run = self._open(key, run_id, start=False)
            if run is None or run.life.settled:
                continue
            run.mark_missed(f"joined mid-run ({resync.reason})")
            self.apply(run, Listed())
        for key, run_id in resync.ended:
            run = self.ledger.get(key, run_id)
            if run is not None and not (carried and run.key in self.carried):
                if not run.life.ended:
                    # Its own end never reached this connection, so at least that event was lost: whatever came
                    # between may have been too (a run that started after the gap showed, before its list's answer,
                    # is not marked by ``on_gap``: fuzz seed 302660, a heartbeat whose reply was in its lost end).
                    run.mark_missed(f"its end not seen ({resync.reason})")
                row = next((r for r in resync.rows if r.key == key), None)
                self.apply(run, _row_terminal(f"absent from the list ({resync.reason})", run, row))

    async def _reconcile(self, resync: Resync, watermark: int | None, *, retry: bool = False) -> None:
        self._hello_pass = (resync, watermark)
        connection_lost = False
        try:
            self.reconciled = await reconcile(
                self, resync, watermark_ms=watermark, limit=self.keeper.reconcile_limit, retry=retry
            )
        except (SessionClosed, NotConnected):
            # Cut short by this connection's close: the chats it had yet to give their runs stay pending, so no
            # live claim there goes first in the moment before the connection's writers are cancelled; they are
            # carried behind the next connection's pass (before, a claim slipped through that gap and a later
            # run took its message above four runs the pass owed: fuzzer seeds 3669 and 9652, 1 play in 10).
            connection_lost = True
            log.info("runs.reconcile_cut (the connection closed; the next hello's pass goes again)")
        finally:
            if not connection_lost:
                self.reconcile_pending.clear()
                self.next_owed.clear()
            self.reconciling -= 1
            self.keeper.wake()

    async def request(self, method: str, params: Any = None) -> Any:
        """The connection's RPC, with transcript reads (``chat.history``) bounded by ``history_reads``."""
        if method == "chat.history":
            async with self.history_reads:
                return await self.conn.request(method, params)
        return await self.conn.request(method, params)

    async def next_tick(self) -> None:
        seen = self.keeper.ticks
        self.keeper.wake()  # the caller may have changed what others wait on (``Reading.check_waits``)
        await self.keeper.until(lambda: self.keeper.ticks > seen)

    def _correct(self) -> None:
        """Messages finished while the transcript could not be read: read it again (``correct.py``)."""
        corrections = self.keeper.corrections
        if corrections.pending and not corrections.running:
            self._start_soon(self._correct_pass, name="owc.correct")

    async def _correct_pass(self) -> None:
        try:
            await self.keeper.corrections.run_pass(self.request, self.keeper.store, self.keeper.emitter)
        finally:
            self.keeper.wake()

    def _retry_reconcile(self) -> None:
        """The hello's pass did not cover everything (``chat.history`` failed, the bound was reached): the
        Gateway's tick runs it again, from the same list and watermark, until one pass does. Runs this
        connection has met since are left to it (the list is the hello's)."""
        if self.reconciled or self.reconciling or self._hello_pass is None:
            return
        resync, watermark = self._hello_pass
        log.info("runs.reconcile_again (the hello's pass did not cover everything)")
        self.reconciling += 1
        self._start_soon(partial(self._reconcile, resync, watermark, retry=True), name="owc.reconcile")

    # ------------------------------------------------------------------ commands

    def stop(self, chat_id: str) -> int:
        """The user pressed Stop in ``chat_id``: every run this process has there and has not settled is aborted,
        and the message of each it writes is finalized with what it has. Returns how many."""
        return sum(self.stop_run(run) for run in self.ledger.unsettled() if run.ref.chat_id == chat_id)

    def stop_run(self, run: Run) -> bool:
        """The user pressed Stop on ``run``'s message (its writer's Open WebUI task, or the request of a user turn,
        was cancelled): abort it and finalize its message with what it has, unless it has ended or is past
        streaming already. A user turn still inline notes it: its handover's writer aborts and finalizes."""
        if run.life.state in (State.OPEN, State.CLAIMING, State.STREAMING, State.INLINE) and not run.life.ended:
            self.apply(run, Stop())
            return True
        return False

    def on_closed(self) -> None:
        """The connection is gone and its writers have ended: every unsettled run hears so. A user turn still
        streaming through its request says why it stands still (the request delivers the line; a writer said it as
        it ended), unless owc itself is closing (the connection cancelled, not closed)."""
        for run in self.ledger.unsettled():
            if self.conn.closed and run.life.state is State.INLINE and not run.life.ended:
                run.status.apply(lines.Dropped())
            self.apply(run, ConnectionClosed())
        if self.reconciled and self.conn.last_ts:
            # Everything up to this connection's last event was seen live or reconciled: the next connection's
            # pass looks past it. A pass that did not finish leaves the watermark where it was; so does a gap whose
            # pass did not (or whose list never came): the next pass looks from the last event before it (fuzz seed
            # 320774: a slow consumer's close cut a gap's pass short, and the next hello's pass, looking only past
            # the closed connection's last event, never found the heartbeat the gap had swallowed).
            marks = [owed.mark for owed in self.gaps_owed] + ([self._gap_next] if self._gap_open else [])
            if None not in marks:  # None: a gap before this connection's first event, so its own watermark stands
                self.keeper.watermark_ms = min([self.conn.last_ts, *(m for m in marks if m is not None)])


class RunKeeper:
    """The ``ConnectionHandler`` that runs owc and keeps its runs across connections: a ``RunTable`` per
    connection; one ``Ledger``, the cut runs (``Cuts``) and the corrections across them. (Named ``Bridge`` until
    issue 26: the bridge between the two loops is the host's, ``owc/owui/trio_host.py``.)"""

    def __init__(
        self,
        store: TrioChatStore,
        emitter: Emitter,
        registry: WriterRegistry = WRITERS,
        *,
        ledger: Ledger | None = None,
        strict: bool = False,
        reconcile_limit: int = RECONCILE_LIMIT,
        questions: QuestionDesk | None = None,
        usage_line: bool = True,
        media: MediaDesk | None = None,
        status: StatusDesk | None = None,
    ) -> None:
        self.store = store
        self.emitter = emitter
        #: The usage line after a finished reply (``owc.render.usage``): on unless a valve or option says no.
        self.usage_line = usage_line
        #: The Gateway's questions to the tabs (``owc.runs.questions``); its pump is the runtime's to run.
        self.questions = questions if questions is not None else QuestionDesk()
        #: The files agents make, into their messages (``owc.runs.media``); its pump is the runtime's to run.
        self.media = media if media is not None else MediaDesk(store=store, emitter=emitter)
        #: The status view's reads and watchers (``owc.runs.status``).
        self.status = status if status is not None else StatusDesk()
        self.registry = registry
        self.ledger = ledger if ledger is not None else Ledger(strict=strict)
        self.stats = Stats()
        #: Finalizes in flight at once, across connections (``owc.runs.writer.FINALIZES_AT_ONCE``).
        self.finalizing = trio.CapacityLimiter(FINALIZES_AT_ONCE)
        #: Messages finished from a stream with gaps while the transcript could not be read (``correct.py``).
        self.corrections = Corrections()
        #: Cut runs whose continuation is owed (the owner rule, link rule E), across connections.
        self.cuts = Cuts(self)
        #: Gateway ticks seen on any connection: what a writer waiting to read a transcript again waits for.
        self.ticks = 0
        self.reconcile_limit = reconcile_limit
        self.table: RunTable | None = None
        #: The Gateway time of the last event a connection saw whose reconcile pass finished: runs that ended
        #: after it ended while owc was away from the Gateway. None until then: the chats' own times serve.
        self.watermark_ms: int | None = None
        #: Every chat's ``updated_at`` (ms) as this process found it, read before its first connection reads a
        #: frame: the chats' own times, taken before this process's claims move them.
        self.chat_times: dict[str, int] | None = None
        self._wakes = Wakes()

    @asynccontextmanager
    async def attach(self, conn: Connection) -> AsyncIterator[RunTable]:
        """The connection's table for exactly the connection's lifetime (entered by the connection)."""
        carried = self.ledger.unsettled()
        for run in carried:
            run.mark_missed("reconnect")  # its events while no connection was up are lost to the stream
        conn.active.carry(run.key for run in carried if not run.life.ended)
        if self.chat_times is None:
            try:
                self.chat_times = {chat: updated * 1000 for chat, updated in (await self.store.chat_times()).items()}
            except Exception:
                log.exception("runs.chat_times_failed (the reconcile falls back to each chat's current time)")
                self.chat_times = {}
        with self.registry.registered(self.registry.writer_id(conn.id)):
            table: RunTable | None = None
            try:
                async with trio.open_nursery() as nursery:
                    table = self.table = RunTable(self, conn, nursery)
                    await nursery.start(self._lifetime, table)
                    self.wake()
                    try:
                        yield table
                    finally:
                        # The connection is over: so are its writers, and from now on the table starts nothing
                        # (a request ending meanwhile waits for the next connection: ``request_ended``).
                        table.live = False
                        if self.table is table:
                            self.table = None
                        nursery.cancel_scope.cancel()
            finally:
                if table is not None:
                    table.on_closed()
                    if self.table is table:
                        self.table = None
                self.wake()

    async def _lifetime(
        self, table: RunTable, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The table's first task: whatever cancels the connection's nursery (its close, from inside or outside),
        this task's end lets go of the table before the nursery can close, so a request ending in that moment
        finds no table and waits for the next connection instead of starting a task the nursery refuses (CI,
        stop 21: "Nursery is closed to new arrivals")."""
        try:
            task_status.started()
            await trio.sleep_forever()  # timer-ok: no clock; waits only for the connection's cancel
        finally:
            table.live = False
            if self.table is table:
                self.table = None
            self.wake()

    def stop_run(self, run: Run) -> None:
        """A Stop for ``run`` from a tab, whenever it comes: the current connection's table acts on it (a writer's
        Open WebUI task outlives the connection it was opened on: a run carried to the next one keeps it)."""
        table = self.table
        if table is None:
            log.warning("runs.stop_unsent run=%s (no Gateway connection now: the run goes on)", run.run_id)
            return
        if not table.stop_run(run):
            log.info("runs.stop_too_late run=%s state=%s", run.run_id, run.life.state.value)

    def wake(self, chat_id: str | None = None) -> None:
        """Runs of ``chat_id`` changed (None: of every chat, or what every chat's waits read: ``owc/runs/wakes.py``)."""
        self._wakes.wake(chat_id)

    async def changed(self) -> None:
        """Return at the next change of any run or connection of this keeper."""
        await self._wakes.next().wait()

    def next_change(self) -> trio.Event:
        """The event the next change sets, taken now: a waiter that checks its condition and then waits in another
        task (one per keeper) must take it before it yields, or a change in between is missed."""
        return self._wakes.next()

    async def until(self, predicate: Callable[[], bool], chat_id: str | None = None) -> None:
        """Wait, without a clock, until ``predicate`` holds; re-checked at each change of ``chat_id``'s runs (None:
        whenever a run or a connection moves)."""
        await self._wakes.until(predicate, chat_id)

    def quiet(self) -> bool:
        """Nothing left to do until the Gateway says more: no writer at work, no reconcile running, and no
        run that has ended without being settled (such a run waits for a connection to finish it)."""
        if (
            self.table is None
            or self.table.hello is None
            or self.table.reconciling
            or not self.table.reconciled
            or self.table.gaps_owed
        ):
            # No connection (or its hello not handled yet): what it will say is still to come. A reconcile pass
            # that fell short runs again at the Gateway's next tick.
            return False
        if self.corrections.pending:
            return False  # a message to correct once the transcript answers: the next tick looks again
        if self.cuts.busy():
            return False  # a cut run's continuation is owed: its resume or its recovery is still to come
        return not any(run.writer_live or (run.life.ended and not run.life.settled) for run in self.ledger.unsettled())

    def totals(self) -> tuple[int, int]:
        """(messages claimed or taken over, messages finalized) over every connection so far."""
        return self.stats.claims, self.stats.finalized


@attrs.define(eq=False)
class _GapPass:
    """A gap's pass over the sessions whose rows moved since ``mark`` (the last event before the gap)."""

    resync: Resync
    mark: int | None
    running: bool = False


def _row_terminal(reason: str, run: Run, row: SessionRow | None) -> Terminal:
    """A run's end as a list tells it (absent from it): with the run's error when its row says it failed."""
    if row is None:
        return Terminal(reason)
    return Terminal.from_row(reason, run.run_id, row.status, row.last_run_id, row.last_run_error)
