"""The run writer: one Trio task per run this connection writes, started with ``nursery.start``.

The task hands back a ``WriterHandle`` made inside it (its streaming phase's cancel scope) and then does what
the run's lifecycle state says, one step at a time, until the state needs no writer:

* ``CHECKING``: the run ended showing nothing but its stream may have missed content: read its transcript;
* ``CLAIMING``: claim the message at the chat's true tail (or adopt one: a dead writer's, Open WebUI's orphan
  stub) under the row lock, and tell the tabs;
* ``STREAMING``: flush the renderer's changes to the tabs and wait for the next, **with no timeout**: only the
  run's own terminal or a Stop (``RunTable.stop``) ends it, through the handle's cancel scope (``StreamEnd``). A
  handover never reaches a streaming writer: it ends the Pipe request's inline phase and starts this task;
* ``FINALIZING`` / ``FINISHING``: read the transcript once, write the finished message in one transaction
  (conditional, for a message another process held), tell the tabs.

The writer knows only a narrow ``WriterContext`` (store, emitter, the connection's request function, its
writer id, and how to report an input to the run's lifecycle), never the run table.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import trio

from owc.emit import Emitter
from owc.gateway import GatewayError, NotConnected, ReplyTooLarge, RequestTimeout, SessionClosed
from owc.protocol import ChatHistory, ProtocolError, older_page, parse_chat_history
from owc.registry import WriterRegistry
from owc.render import (
    Shown,
    finish,
    output_from_transcript,
    output_text,
    reaches_run_start,
    usage,
)
from owc.render import status as lines
from owc.render.items import count_cards
from owc.render.never_less import never_less
from owc.render.seam import joined, parts_joined
from owc.rules.finished import CORRECT_MARK
from owc.rules.lifecycle import (
    ClaimOutcome,
    ClaimResult,
    Input,
    State,
    Stop,
    TranscriptChecked,
    WriteOutcome,
    WriteResult,
    WriterFailed,
)
from owc.rules.link import ended_in, taken_over_first
from owc.rules.owner import EMPTY_FINISH_NOTES, Owner, empty_finish_note
from owc.rules.reconcile import run_order
from owc.runs.run import HandoverState, Run, WriterHandle
from owc.store import (
    Absent,
    AlreadyDone,
    AlreadyThere,
    Claimed,
    Locked,
    NotWritten,
    StoreError,
    TakenOver,
    TrioChatStore,
    Unavailable,
    Written,
)

log = logging.getLogger("owc.runs")

#: How many transcript messages one ``chat.history`` page holds: the run's own are near the end.
HISTORY_LIMIT = 200
#: How many pages a finalize reads back, at most, to reach a long run's start.
HISTORY_MAX_PAGES = 25
#: ``chat.history`` cuts every text part to 8,000 characters unless told otherwise (the Gateway's
#: DEFAULT_CHAT_HISTORY_TEXT_MAX_CHARS); a finalize must see the whole reply. 500,000 is the schema's maximum.
HISTORY_MAX_CHARS = 500_000
#: ``chat.history``'s ``maxBytes``: the page's messages (and, apart, its in-flight snapshot) stay within it, the
#: oldest dropped first and paged for with ``nextOffset``. 4 MiB keeps a whole reply near a third of the
#: 25 MiB frame limit (the real Gateway's own cap is 6 MiB; a Gateway without one must not reach the limit).
HISTORY_MAX_BYTES = 4 * 1024 * 1024


def history_reads(max_buffered_bytes: int) -> int:
    """How many transcript reads one connection has in flight at once, at most: a page's reply is up to
    ``HISTORY_MAX_BYTES``, and the replies in flight stay within half the Gateway's send buffer for a client
    (``policy.maxBufferedBytes``, 50 MiB on 2026.9.6: 6 reads), past which the Gateway drops a slow consumer."""
    return max(1, max_buffered_bytes // (2 * HISTORY_MAX_BYTES))


#: Finalizes in flight in one process at once, from the transcript read to the finished message's write (issue 32,
#: goal 5). Runs that end together (10,000 in a burst) each held their transcript, their finished output and its
#: serialised chat while they queued for the store's one write lane: ~110 MB above the open runs' own, which CPython's
#: allocator then kept (a few survivors pin each 1 MiB arena). Writes go one at a time anyway, and 32 keep the lane
#: fed and a chat's writes made together (``TrioChatStore.write``: at most 16 a transaction).
FINALIZES_AT_ONCE = 32
#: A claim that keeps meeting a locked database after the run has ended (no more events to wait for)
#: tries this many times, each paced by the busy wait, like a finalize.
CLAIM_ATTEMPTS_AFTER_END = 6
#: What the tabs are told when a finished message could not be written (yet).
NOT_SAVED = (
    "This reply could not be saved yet: the database would not take it ({why}). owc keeps it and saves it "
    "as soon as the database takes writes again; until then the text above is only in this tab."
)


#: The error a finished message gets when nothing of its run could be saved.


@attrs.define
class Stats:
    """Counts kept across a runtime's connections."""

    claims: int = 0
    finalized: int = 0


@attrs.frozen
class WriterContext:
    """What a writer may touch."""

    store: TrioChatStore
    emitter: Emitter
    request: Callable[..., Awaitable[Any]]  # the connection's RPC: request(method, params)
    writer_id: str
    registry: WriterRegistry
    apply: Callable[[Run, Input], None]  # report an input to the run's lifecycle (the table performs its actions)
    stats: Stats
    #: Returns when the run may claim: every earlier run of its chat has claimed (or will not), so the chain
    #: follows run-start order. Returns early if the run leaves ``CLAIMING`` meanwhile.
    claim_turn: Callable[[Run], Awaitable[None]]
    #: Keep a message finished from a stream, because the transcript could not be read, for a correction once it
    #: can (``owc/runs/correct.py``): its content (``content=True``: the stream had gaps) and its place.
    correct_later: Callable[..., None]
    #: Returns at the Gateway's next tick (on any connection): when a transcript that did not answer is read again.
    next_tick: Callable[[], Awaitable[None]]
    #: A tab's Stop for the run (its writer's Open WebUI task was cancelled), on whatever connection is current.
    stop: Callable[[Run], None]
    #: The transcript says a run held for the Gateway's recovery had ended on its own: no cut (``Cuts.uncut``).
    uncut: Callable[[Run], None] = lambda run: None
    #: A restart recovery's message is finished: another process's message of the same recovery goes
    #: (``Cuts.one_reply``, in a task of its own: one message per run, issue 24 item 4's shape D).
    one_reply: Callable[[Run], None] = lambda run: None
    #: ``Ledger.heard_before(session_key, earlier, later)``: this process heard ``earlier`` begin first.
    heard_before: Callable[[str, str, str], bool] = lambda key, earlier, later: False
    #: The connection closed under the writer (the Gateway went away, as opposed to owc shutting down): its message
    #: says so (``owc.render.status``).
    dropped: Callable[[], bool] = lambda: False
    #: The runs of a chat changed (``RunKeeper.wake``): said as the writer ends, which no lifecycle input says (a
    #: wait for a run's writer to be done looks again then).
    wake: Callable[[str], None] = lambda chat_id: None
    #: Whether a finished reply gets its usage line (``owc.render.usage``): read at each finalize (a valve saved
    #: meanwhile applies to the next reply).
    usage_line: Callable[[], bool] = lambda: False
    #: The message is finished, with the transcript its finalize read: its files are owed from now on
    #: (``MediaDesk.finished``: the files arrive in the transcript after the run's final).
    delivered: Callable[[Run, ChatHistory | None], None] = lambda run, history: None
    #: Finalizes in flight at once in this process (``FINALIZES_AT_ONCE``; ``RunKeeper.finalizing``).
    finalizing: trio.CapacityLimiter = attrs.field(factory=lambda: trio.CapacityLimiter(FINALIZES_AT_ONCE))


@attrs.define
class Turn:
    """A writer's turn among the process's finalizes (``FINALIZES_AT_ONCE``): taken for a finalize, let go when it
    ends and while it waits for the Gateway's next tick to read a transcript again (a wait that is the Gateway's:
    finalizes parked there must not stall the ones that can go on), taken again after. ``held`` says whether this
    writer holds one, so a cancel at any point leaves the count right."""

    limiter: trio.CapacityLimiter
    held: bool = False

    async def take(self) -> None:
        if not self.held:
            await self.limiter.acquire()  # a cancel here takes nothing
            self.held = True

    def let_go(self) -> None:
        if self.held:
            self.limiter.release()
            self.held = False


async def abort_run(request: Callable[..., Awaitable[Any]], run: Run) -> None:
    """Ask the Gateway to abort the run (a Stop). A failure is logged: the run's own terminal still ends it."""
    try:
        await request("chat.abort", {"sessionKey": run.session_key, "runId": run.run_id})
    except (GatewayError, ProtocolError) as exc:
        log.warning("runs.abort_failed run=%s error=%s", run.run_id, exc)


async def read_run_window(request: Callable[..., Awaitable[Any]], session_key: str, run_id: str) -> ChatHistory | None:
    """The newest page of run R's transcript, with older pages joined in front until it reaches back to R's
    start (a long run can outgrow one page). None if it never does within the page bound: a window without the
    run's beginning would finalize it without its opening text and cards."""
    params = history_params(session_key)
    window = await read_history_page(request, params)
    pages = 1
    while not reaches_run_start(window, run_id):
        if window.next_offset is None or pages >= HISTORY_MAX_PAGES:
            log.warning("runs.history_too_long run=%s pages=%d (finalizing from the stream)", run_id, pages)
            return None
        older = await read_history_page(request, {**params, "offset": window.next_offset})
        window, pages = older_page(older, window), pages + 1
    return window


def history_params(session_key: str) -> dict[str, Any]:
    """The params of a run's newest ``chat.history`` page (one schema, shared by the writer and the reconcile)."""
    return {
        "sessionKey": session_key,
        "limit": HISTORY_LIMIT,
        "maxChars": HISTORY_MAX_CHARS,
        "maxBytes": HISTORY_MAX_BYTES,
    }


async def read_history_page(request: Callable[..., Awaitable[Any]], params: dict[str, Any]) -> ChatHistory:
    """One ``chat.history`` page. A reply over the frame limit (a Gateway that ignores ``maxBytes``) is
    refused unparsed without closing the connection; the page is then asked again for fewer messages, down to
    one, before giving up."""
    limit = int(params.get("limit", HISTORY_LIMIT))
    while True:
        try:
            return parse_chat_history(await request("chat.history", {**params, "limit": limit}))
        except ReplyTooLarge as exc:
            if limit <= 1:
                raise
            log.warning("runs.history_page_too_large limit=%d error=%s (asking for fewer)", limit, exc)
            limit = max(1, limit // 4)


@contextmanager
def _given_back_on_failure(run: Run, entries: list[dict[str, Any]]) -> Iterator[None]:
    """Status entries taken for a write go back to the run's lines if the write raises (a writer that fails closes its
    open line with them: ``write_run``)."""
    try:
        yield
    except BaseException:
        run.status.give_back(entries)
        raise


class _Gone(Exception):
    """The connection closed under the writer: stop here; the next connection carries the run on."""


async def write_run(
    ctx: WriterContext, run: Run, *, task_status: trio.TaskStatus[WriterHandle] = trio.TASK_STATUS_IGNORED
) -> None:
    handle = WriterHandle()  # its cancel scope is made here, inside the task that owns the streaming phase
    task_status.started(handle)
    writer = _Writer(ctx, run, handle)
    try:
        await writer.run()
    except _Gone:
        pass
    except StoreError as exc:
        # The chat cannot take this run's message (deleted, its reply deleted, moved to another user, its row no
        # longer a message tree, the id naming a user's message): this run's writer ends with one line, nothing of
        # anyone's written (issue 24, item 13).
        log.error("runs.writer_ended run=%s chat=%s message=%s (%s)", run.run_id, run.ref.chat_id, run.message_id, exc)
        ctx.apply(run, WriterFailed())
    except Exception:
        # A failure of this run's writer (an unexpected database error, a bug) is this run's alone: it must not
        # close the connection, which would cancel every other run's writer with it.
        log.exception("runs.writer_failed run=%s chat=%s message=%s", run.run_id, run.ref.chat_id, run.message_id)
        if run.life.claimed:
            # No line of its message keeps spinning for a writer that gave up; said before the run is settled (a
            # settled run is out of the ledger's sight, so nothing waiting for quiet would wait for this write).
            with trio.CancelScope(shield=True):
                await writer.say(lines.Ended())
        ctx.apply(run, WriterFailed())
    finally:
        if run.life.claimed and not run.life.settled and ctx.dropped():
            # The Gateway connection closed under the message this writer holds: the tabs are told why it stands
            # still (a frozen partial and a spinner said nothing, issue 25 item 2). Not when owc itself is shutting
            # down (the connection is then cancelled from outside, not closed): the next process takes it up.
            with trio.CancelScope(shield=True):
                await writer.say(lines.Dropped())
        if run.life.settled or not run.life.claimed:
            # Done with the message, or never held it: its Open WebUI task ends (tabs leave the generating
            # state). A run carried to the next connection keeps its task for the writer that goes on with it.
            with trio.CancelScope(shield=True):
                try:
                    await ctx.emitter.close_task(run.ref.chat_id, run.message_id)
                except Exception:
                    log.exception("runs.close_task_failed run=%s", run.run_id)
        handle.finished.set()
        ctx.wake(run.ref.chat_id)


class _Writer:
    def __init__(self, ctx: WriterContext, run: Run, handle: WriterHandle) -> None:
        self.ctx = ctx
        self.run_ = run
        self.handle = handle
        #: What the tabs were shown: a flush diffs only what changed since (``owc.render.diff.Shown``).
        self.shown = Shown()
        #: The tabs may hold another writer's items (a take-over): the first flush sends the whole output
        #: as a snapshot instead of a diff from nothing, which would show their text twice.
        self.snapshot_first = False
        self.claim_attempts_after_end = 0
        #: This writer made M (a claim that inserted it): its final event carries M's place (seed 003, ELI-230).
        self.inserted = False
        self.aborted = False
        #: The last transcript read failed (the Gateway did not answer), as opposed to not holding the run.
        self.history_failed = False
        #: The finalize's transcript was read before the claim, and reading it again failed: the line's order is
        #: still the transcript's to put right (``_maybe_out_of_order``).
        self.order_unread = False
        #: The task id this writer's claim wrote into M's ``meta.task_id`` (None: no claim wrote one yet).
        self.claimed_task_id: str | None = None
        #: The newest id the writer's Open WebUI task is registered under (``_task_moved``).
        self.task_id: str | None = None

    async def _not_saved(self, why: str) -> None:
        """Tell the tabs, once per run, that its message is not saved yet (it is kept and tried again)."""
        r = self.run_
        if r.writer.told_unsaved:
            return
        r.writer.told_unsaved = True
        await self._emit({"type": "chat:message:error", "data": {"error": {"content": NOT_SAVED.format(why=why)}}})

    @functools.cached_property
    def turn(self) -> Turn:
        """Its turn among the process's finalizes (``Turn``), held only while it finalizes (made on first use: a
        writer built without a context, as a unit test builds one, never needs it)."""
        return Turn(self.ctx.finalizing)

    async def run(self) -> None:
        life = self.run_.life
        while True:
            state = life.state
            if state is State.CHECKING:
                await self._check()
            elif state is State.CLAIMING:
                await self._claim()
            elif state is State.STREAMING:
                await self._stream()
            elif state in (State.FINALIZING, State.FINISHING):
                # A Stop reaches the Gateway at once, not after a turn: the agent stops acting now.
                await self._abort_if_stopped()
                # A turn among the process's finalizes: what one holds (its transcript, its output, the chat it
                # writes) is held by a bounded number at once, however many runs end together.
                await self.turn.take()
                try:
                    await self._finalize(unless_done=state is State.FINISHING)
                finally:
                    self.turn.let_go()
            else:
                return  # OPEN, STANDBY, DETACHED, INLINE, DONE, ABANDONED: nothing for a writer to do now

    async def _open_task(self) -> str | None:
        """Register this writer as an Open WebUI task of the chat before the claim, so the message is made with
        its ``meta.task_id`` (as Open WebUI's own requests do) and the tabs' Stop reaches the run."""
        r, ctx = self.run_, self.ctx
        try:
            self.task_id = await ctx.emitter.open_task(
                r.ref.chat_id, r.message_id, r.ref.user_id, lambda: ctx.stop(r), self._task_moved
            )
        except Exception:  # no Stop button is better than no message
            log.exception("runs.open_task_failed run=%s", r.run_id)
            self.task_id = None
        return self.task_id

    async def _claimed_with(self, stored: str | None) -> None:
        """M is this writer's, naming ``stored`` as its task: if the task was registered again meanwhile (or M was
        taken over from a writer whose task is gone), M is made to name the live one."""
        self.claimed_task_id = stored or ""
        if self.task_id is not None and self.task_id != stored:
            await self._task_moved(self.task_id)

    async def _task_moved(self, task_id: str) -> None:
        """Open WebUI cancelled the writer's task and the emitter registered it again (not a Stop): M's
        ``meta.task_id`` names the new id, so Open WebUI's ``/stop`` for the message (a shared chat's other user)
        finds a live task (issue 24, item 11). Before the claim there is no M yet: the claim, or the check right
        after it, writes it."""
        r, ctx = self.run_, self.ctx
        self.task_id = task_id
        if self.claimed_task_id is None:
            return
        try:
            named = await ctx.store.set_task_id(r.ref.chat_id, r.message_id, task_id, holds=ctx.registry.is_local)
        except Exception:  # a stale task id costs a shared chat's Stop, never the message
            log.exception("runs.task_id_not_saved run=%s", r.run_id)
            return
        log.info("runs.task_renamed run=%s message=%s named=%s", r.run_id, r.message_id, named)

    async def say(self, *inputs: lines.Input) -> None:
        """Feed the run's status lines, and deliver what they append (and anything still pending) now: to M's
        ``statusHistory`` (one short transaction) and to the tabs. For a message this writer holds; a message that is
        finished or gone takes none (its lines were closed when it was finished). Never raises: a status line must not
        cost the message."""
        r = self.run_
        for event in inputs:
            r.status.apply(event)
        entries = r.status.take()
        if not entries:
            return
        try:
            with trio.CancelScope(shield=True):  # taken from the machine: written, or given back, never lost
                added = await self.ctx.store.add_status(r.ref.chat_id, r.message_id, entries)
        except StoreError as exc:
            log.info("runs.status_unsaid run=%s (%s)", r.run_id, exc)
            return
        except Exception as exc:  # the database refused: said with the message's next write
            log.warning("runs.status_held run=%s error=%s", r.run_id, type(exc).__name__)
            r.status.give_back(entries)
            return
        await self._tell_status(added or ())

    async def _tell_status(self, entries: Any) -> None:
        """Status entries written to M, to the tabs (before the write's ``chat:messages``: a tab that merges M takes
        the stored list, one that holds M as its own active reply appends these)."""
        for entry in entries:
            await self._emit({"type": "status", "data": entry})

    async def _emit(self, event: dict[str, Any]) -> None:
        r = self.run_
        try:
            await self.ctx.emitter.emit(r.ref.chat_id, r.message_id, r.ref.user_id, event)
        except Exception:  # a tab that cannot be told must not stop the message being written
            log.exception("runs.emit_failed run=%s event=%s", r.run_id, event.get("type"))

    # ------------------------------------------------------------------ check

    async def _check(self) -> None:
        """The run ended showing nothing here, but its stream may have missed what it showed: its transcript
        decides. A heartbeat runner's turn is such a run (the Gateway sends a ``sessions.subscribe`` connection
        only its start and end): its reply gets a message as any turn's does, since the Gateway's own chat shows
        it; an acknowledgement (``HEARTBEAT_OK``) is hidden from ``chat.history``, so it shows nothing here
        either (measured on 2026.9.6, docs/reference/gateway-errors-heartbeats-internal.md)."""
        r = self.run_
        history = await self._history()
        while history is None and self.history_failed:
            # Whether the run showed anything is the transcript's to say: not knowing is not "nothing" (before,
            # a failed read gave the run up; found by the fuzzer, seed 15165). Read again at the Gateway's next
            # tick; meanwhile later runs of the chat do not wait for this one (``Ledger.claim_blocker``).
            r.read.check_waits = True
            await self.ctx.next_tick()
            history = await self._history()
        r.read.check_waits = False
        shows = False
        if history is not None:
            try:
                # As live: a run that said nothing has no message, also when it failed (the transcript's record of
                # the failure is its error, not text: ``output_from_transcript`` leaves it out).
                shows = bool(output_from_transcript(history, r.run_id))
            except Exception:
                log.exception("runs.transcript_unreadable run=%s", r.run_id)
        log.info("runs.checked run=%s shows=%s", r.run_id, shows)
        self.ctx.apply(r, TranscriptChecked(shows))

    # ------------------------------------------------------------------ claim

    async def _claim(self) -> None:
        r, ctx = self.run_, self.ctx
        await ctx.claim_turn(r)
        if r.life.state is not State.CLAIMING:
            return  # something else happened to the run while it waited (a Stop, the connection closed)
        create = r.life.may_create
        task_id = await self._open_task()
        try:
            result = await ctx.store.claim(
                r.ref.chat_id,
                r.message_id,
                run_id=r.run_id,
                writer=ctx.writer_id,
                # Another process's writer may be alive: never taken over (owc/registry.py).
                alive=ctx.registry.may_be_alive,
                user_id=r.ref.user_id,
                task_id=task_id,
                create=create,
                adopt_writerless=True,
                # A handover, or a continuation of a cut run (its message may have been finished meanwhile).
                reopen=self.takes_back,
            )
        except StoreError as exc:
            log.error("runs.claim_failed run=%s chat=%s error=%s", r.run_id, r.ref.chat_id, exc)
            ctx.apply(r, ClaimResult(ClaimOutcome.FAILED))
            return
        # Reported before any await: a cancel from here on must find the claim recorded.
        if isinstance(result, (Claimed, TakenOver)):
            ctx.stats.claims += 1
            if isinstance(result, TakenOver):
                self._adopt_longer_chain(result.message)
            if r.cont.chain and r.cont.prefix is None:
                # A continuation this process did not see cut: M's output so far is what it shows first.
                r.cont.prefix = self._before_own(result.message) if isinstance(result, TakenOver) else []
            ctx.apply(r, ClaimResult(ClaimOutcome.WON))
            if isinstance(result, TakenOver):
                r.status.adopt(result.message.get("statusHistory"))  # a line the last holder left open
            self._resumes()
            if self.takes_back:
                await self._reopen()
            elif isinstance(result, Claimed):
                parent = (
                    {"id": result.parent_id, "childrenIds": list(result.parent_children)} if result.parent_id else None
                )
                self.inserted = True
                # M is at the chat's tail now, under whatever claimed before it: a transcript read before (a check's,
                # a reconcile pass's) does not name the runs that began since, so it cannot order that line.
                r.read.before_claim = r.read.history is not None
                messages = {r.message_id: result.message}
                if parent is not None:
                    messages[result.parent_id] = parent
                log.info("runs.claimed run=%s chat=%s message=%s", r.run_id, r.ref.chat_id, r.message_id)
                await self._emit(
                    {"type": "chat:messages", "data": {"messages": messages, "currentId": result.current_id}}
                )
            else:
                r.mark_missed("taken over from a closed connection")
                self.snapshot_first = True
                log.info("runs.taken_over run=%s from=%s", r.run_id, result.previous_writer)
                await self._emit(
                    {
                        "type": "chat:messages",
                        "data": {"messages": {r.message_id: result.message}, "currentId": r.message_id},
                    }
                )
            meta = result.message.get("meta") if isinstance(result, TakenOver) else None
            await self._claimed_with(
                task_id if isinstance(result, Claimed) else (meta.get("task_id") if isinstance(meta, dict) else None)
            )
            return
        if isinstance(result, AlreadyThere):
            if result.writer == ctx.writer_id and (not result.done or self.takes_back):
                if r.cont.chain:
                    stored = await self._stored_message()
                    if stored is not None:
                        self._adopt_longer_chain(stored)
                        r.status.adopt(stored.get("statusHistory"))
                if r.cont.chain and r.cont.prefix is None:
                    r.cont.prefix = await self._stored_output()
                ctx.apply(r, ClaimResult(ClaimOutcome.WON))
                self._resumes()
                if self.takes_back:
                    await self._reopen()
                await self._claimed_with(task_id)
                return
            log.info("runs.backing_off run=%s writer=%s done=%s", r.run_id, result.writer, result.done)
            if result.done:
                # Finished by another process: by a continuation that never saw what this run showed here, that goes
                # in front of its part. Before the outcome is reported: the run stays unsettled until it is written.
                # The stream as it came: one that had a gap or joined mid-run is lined up at the transcript's end.
                shown, _ = joined(r.cont.prefix or [], r.run_id, r.renderer.output(done=True))
                await self._add_shown(shown, stream=True)
                outcome = ClaimOutcome.FINISHED
            elif result.writer is not None and not ctx.registry.is_local(result.writer):
                outcome = ClaimOutcome.HELD_ELSEWHERE  # this process cannot see whether that one lives
            else:
                outcome = ClaimOutcome.HELD
            ctx.apply(r, ClaimResult(outcome))
            return
        if isinstance(result, Absent):
            ctx.apply(r, ClaimResult(ClaimOutcome.ABSENT))
            return
        if isinstance(result, Unavailable):
            if r.life.ended:
                log.error(
                    "runs.NOT_WRITTEN run=%s chat=%s (kept for a retry): %s", r.run_id, r.ref.chat_id, result.detail
                )
                ctx.apply(r, ClaimResult(ClaimOutcome.UNAVAILABLE))
                await self._not_saved("it refused the write")
                return
            ctx.apply(r, ClaimResult(ClaimOutcome.UNAVAILABLE))
            await r.wait_changed()  # try again on the run's next event
            return
        assert isinstance(result, Locked)
        if r.life.ended:
            self.claim_attempts_after_end += 1  # each attempt already waited the busy timeout
            if self.claim_attempts_after_end >= CLAIM_ATTEMPTS_AFTER_END:
                self.claim_attempts_after_end = 0
                log.error(
                    "runs.NOT_WRITTEN run=%s chat=%s (kept for a retry): the database stayed locked",
                    r.run_id,
                    r.ref.chat_id,
                )
                ctx.apply(r, ClaimResult(ClaimOutcome.UNAVAILABLE))
                await self._not_saved("it stayed locked")
            return
        ctx.apply(r, ClaimResult(ClaimOutcome.LOCKED))
        await r.wait_changed()  # try again on the run's next event

    def _resumes(self) -> None:
        """A continuation holds M now: its line says M goes on ("Resumed after the Gateway restarted", or owc's
        resume), once per run, closing the line M waited under (``_keep_open``)."""
        r = self.run_
        if r.cont.chain:
            r.status.apply(lines.Resumed(r.run_id))  # said once per run (``StatusLines.resumed``)

    @property
    def takes_back(self) -> bool:
        """Its claim takes M back even if M was marked done: a handover, or a continuation of a cut run."""
        return self.run_.writer.handover is not HandoverState.NONE or bool(self.run_.cont.chain)

    async def _stored_message(self) -> dict[str, Any] | None:
        r = self.run_
        try:
            chat = await self.ctx.store.read_chat(r.ref.chat_id)
        except StoreError:
            return None
        message = ((chat or {}).get("history") or {}).get("messages", {}).get(r.message_id)
        return message if isinstance(message, dict) else None

    async def _stored_output(self) -> list[dict[str, Any]]:
        message = await self._stored_message()
        return self._before_own(message) if message is not None else []

    def _before_own(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """What M shows before this continuation's part: its output, or, when M holds this run's part already (its
        chain ends with this run: another process's copy of the same continuation finished M), the part before it
        (``meta.openclaw_own_at``, at the seam). Before, that M's whole output was taken for the earlier runs' part,
        and the finalize put this run's part (and its seam) in twice (found by the seam's oracle, fuzz seed 153)."""
        output = message.get("output")
        output = list(output) if isinstance(output, list) else []
        meta = message.get("meta") if isinstance(message.get("meta"), dict) else {}
        chain, own_at = meta.get("openclaw_chain"), meta.get("openclaw_own_at")
        if isinstance(chain, list) and chain and str(chain[-1]) == self.run_.run_id and isinstance(own_at, int):
            return output[: max(0, min(own_at, len(output)))]
        return output

    def _adopt_longer_chain(self, message: dict[str, Any]) -> None:
        """A continuation claiming M finds M holding more runs than it knows (``meta.openclaw_chain`` goes on past its
        own chain): another process linked an earlier continuation into M (a recovery the next restart cut in turn).
        This run goes after all of them: it takes M's chain, and M's output is what it shows first (issue 24, item
        13: two deploys, a crash, then a stop; the second recovery's message had lost the first one's part)."""
        r = self.run_
        meta = message.get("meta") if isinstance(message.get("meta"), dict) else {}
        chain = meta.get("openclaw_chain")
        if (
            not isinstance(chain, list)
            or len(chain) <= len(r.cont.chain)
            or tuple(str(x) for x in chain[: len(r.cont.chain)]) != r.cont.chain
            or r.run_id in chain
        ):
            return
        log.info("runs.chain_extended run=%s chain=%d->%d", r.run_id, len(r.cont.chain), len(chain))
        output = message.get("output")
        r.cont.chain = tuple(str(x) for x in chain)
        r.cont.prefix = list(output) if isinstance(output, list) else []

    async def _add_shown(self, through_own: list[dict[str, Any]], *, stream: bool = False) -> None:
        """M was finished by another process's continuation (a claim or a conditional write found it so) that never
        saw what this process showed of M: a run a crash cut streamed here and stored nothing of (issue 24, items 5
        and 14: the tabs here showed it, and a message never ends with less than it showed). What M lacks goes in
        front of the continuation's part, in one conditional write (``ChatStore.add_shown``); ``through_own`` is what
        this process showed of M up to and including this run's part, and its chain's earlier part (``prefix``) is
        what it showed up to the chain's last run. ``stream``: ``through_own`` ends with this run's stream as it came
        (not a finalize's reading, which lined it up with the transcript already): a stream with a gap or joined
        mid-run lacks some of the run's items and is lined up at the transcript's end (fuzz seeds 211298, 150408:
        this deploy joined the cut run after its tool call, streamed its tail, and found M finished by the deploy
        that missed the tail)."""
        r, ctx = self.run_, self.ctx
        shown_through: dict[str, list[dict[str, Any]]] = {}
        missed: dict[str, str] = {}
        if through_own:
            shown_through[r.run_id] = through_own
            if stream and (r.life.missed or r.renderer.gaps):
                missed[r.run_id] = r.renderer.text
        if r.cont.chain and r.cont.prefix:
            shown_through[r.cont.chain[-1]] = list(r.cont.prefix)
        if not shown_through:
            return
        with trio.CancelScope(shield=True):
            try:
                result = await ctx.store.add_shown(
                    r.ref.chat_id, r.message_id, shown_through=shown_through, missed=missed, user_id=r.ref.user_id
                )
            except StoreError as exc:
                log.info("runs.shown_not_added run=%s message=%s (%s)", r.run_id, r.message_id, exc)
                return
        if result is None:
            return
        if not isinstance(result, Written):
            log.error("runs.NOT_WRITTEN run=%s chat=%s (what was shown, in front): %s", r.run_id, r.ref.chat_id, result)
            return
        log.info("runs.shown_added run=%s message=%s (M lacked what was streamed here)", r.run_id, r.message_id)
        message = result.message
        await self._emit({"type": "chat:messages", "data": {"messages": {r.message_id: message}}})

    async def _reopen(self) -> None:
        """A handover of a user turn whose run goes on: Open WebUI's request saved M ``done`` with the output it
        had and its tabs marked it done. M is put back ``done: false`` with the full output (a crash from here on
        leaves it for the next process to finish), the tabs are told it is still being written, and the first
        flush sends the whole output (the tabs hold the request's)."""
        r = self.run_
        self.snapshot_first = True
        if r.life.ended:
            return  # finalized next, from the transcript
        output = r.output()
        try:
            result = await self.ctx.store.write(
                r.ref.chat_id, r.message_id, content=output_text(output), output=output, done=False
            )
        except StoreError as exc:  # the finalize writes it all the same (or reports why it cannot)
            log.warning("runs.reopen_not_written run=%s error=%s", r.run_id, exc)
        else:
            if not isinstance(result, Written):
                log.warning("runs.reopen_not_written run=%s result=%s", r.run_id, type(result).__name__)
        await self._emit(
            {"type": "chat:messages", "data": {"messages": {r.message_id: {"id": r.message_id, "done": False}}}}
        )
        log.info("runs.reopened run=%s chat=%s message=%s", r.run_id, r.ref.chat_id, r.message_id)

    # ------------------------------------------------------------------ streaming

    async def _stream(self) -> None:
        r = self.run_
        await self._emit({"type": "chat:active", "data": {"active": True}})
        with self.handle.scope:  # only the run's terminal or a Stop cancels it (``WriterHandle.end``)
            while True:
                await self._flush()
                await r.wait_changed()

    async def _flush(self) -> None:
        """Whatever changed since the last flush (coalesced: however many events arrived meanwhile), to the tabs
        and to the live copy. Costs what changed, not the run's length: the output is frozen and shared, never
        copied or compared whole."""
        r = self.run_
        r.status.apply(lines.Tools(r.renderer.running_tool))  # "Running <tool>..." while a call has no result
        flush = self.shown.flush(r.renderer, r.shown_prefix(), snapshot=self.snapshot_first)
        if flush is None:
            if r.status.pending:
                await self.say()  # after a claim: "Reconnected", "Resumed ..."
            return
        self.snapshot_first = False
        for event in flush.events:
            await self._emit(event)
        if r.status.pending:
            await self.say()
        try:
            await self.ctx.emitter.save_stream(r.ref.chat_id, r.message_id, flush.output)
        except Exception:
            log.exception("runs.save_stream_failed run=%s", r.run_id)

    async def _abort(self) -> None:
        """A Stop: the run is aborted at the Gateway before its message is finalized (the abort's terminal
        then reaches the transcript the finalize reads)."""
        self.aborted = True
        await abort_run(self.ctx.request, self.run_)

    # ------------------------------------------------------------------ finalize

    async def _history(self) -> ChatHistory | None:
        """The run's transcript, read once after its end (kept on the run for the finalize). None when the
        Gateway did not answer; ``_Gone`` when the connection closed (the next one reads it).

        One read before the claim that put M at the chat's tail (``Reading.before_claim``) is read again: it
        holds the run whole, but the finalize also puts the line of the session's messages around M in the
        transcript's order, and that read does not name the runs that began after it, whose messages M may have
        landed under (``tree.reorder_run_line`` stops at a run the order does not name). Fuzz seed 305323: a pass
        found a heartbeat that had ended while this process was away and read its window; its claim waited for an
        earlier run's, and meanwhile another process, whose own read of the heartbeat had failed (a failing read
        holds no later run up), gave a later run its message; the heartbeat's message landed under it and stayed
        there. If that read fails, the earlier one still gives the content, and the order is left to a correction."""
        r = self.run_
        usable = r.read.history is not None and reaches_run_start(r.read.history, r.run_id)
        if usable and not r.read.before_claim:
            return r.read.history
        while True:
            try:
                history = await self._read_history()
                if history is None and usable:
                    self.order_unread = True  # it outgrew the page bound since: the earlier read holds the run whole
                    return r.read.history
                r.read.history, r.read.before_claim, self.order_unread = history, False, False
                break
            except (SessionClosed, NotConnected):
                raise _Gone from None
            except RequestTimeout as exc:
                # The Gateway did not answer within the RPC bound (a loaded Gateway, many runs ending together): a
                # clock must not pick the message's content (issue 24, item 9: the stream's copy, before). Read
                # again at its next tick: the connection's liveness ends a Gateway that has stopped answering.
                log.warning("runs.history_timed_out run=%s error=%s (read again at the next tick)", r.run_id, exc)
                had_turn = self.turn.held
                self.turn.let_go()  # the wait is the Gateway's: the other finalizes go on meanwhile
                await self.ctx.next_tick()
                if had_turn:
                    await self.turn.take()
            except (GatewayError, ProtocolError) as exc:
                log.warning("runs.history_failed run=%s error=%s", r.run_id, exc)
                if usable:
                    self.order_unread = True  # the run's content is in hand; only the order waits (a correction)
                    return r.read.history
                self.history_failed = True
                return None
        self.history_failed = False
        return r.read.history

    async def _read_history(self) -> ChatHistory | None:
        return await read_run_window(self.ctx.request, self.run_.session_key, self.run_.run_id)

    def _chain_output(self, history: ChatHistory | None) -> list[dict[str, Any]]:
        """The earlier runs of a continuation's message, as the finalize shows them: each from the transcript when
        every one of them is there, else what the message showed before this run (a run a crash cut stored
        nothing of what it streamed)."""
        r = self.run_
        if history is not None:
            parts = [output_from_transcript(history, run_id) for run_id in r.cont.chain]
            if all(parts):
                # Never less than M showed (issue 24, item 5): a cut run's transcript lacks what a stop or a crash
                # cut of its text after a tool call; M, written open by the cut run, kept it. The seams between the
                # runs' parts as M shows them (``owc.render.seam``).
                return never_less(r.cont.prefix or [], parts_joined(list(zip(r.cont.chain, parts))))
        return list(r.cont.prefix or [])

    def _maybe_out_of_order(self, parent_run: str | None) -> bool:
        """M hangs right under another run's message, and this process cannot tell that run began first: only the
        transcript can put the line in order (fuzz seed 150032). One this process heard begin before this run is
        in order already (a session runs one run at a time): no correction is owed, so a transcript that never
        answers again leaves nothing waiting (``scenarios/history-stall.jsonl``: ``settled()`` hung on a
        correction for a line that was right)."""
        r = self.run_
        return parent_run is not None and not self.ctx.heard_before(r.session_key, parent_run, r.run_id)

    async def _keep_open(self, output: list[dict[str, Any]], own_at: int) -> None:
        """The owner rule keeps M open for a continuation (``owc/runs/cuts.py``): M is written ``done: false`` with
        what the run left (its error is not shown: the run goes on), and the continuation shows it first."""
        r, ctx = self.run_, self.ctx
        r.cont.kept_output = output
        # Its line says M waits for a continuation (the Gateway's recovery, or owc's resume), until one claims M.
        r.status.apply(lines.Waiting(by_owc=r.cont.cut is not Owner.GATEWAY))
        status = r.status.take()
        with trio.CancelScope(shield=True):
            try:
                result: object = await ctx.store.write(
                    r.ref.chat_id,
                    r.message_id,
                    content=output_text(output),
                    output=output,
                    done=False,
                    # The resume count is written by the resume itself (``Cuts``): never lowered here.
                    meta={"openclaw_chain": [*r.cont.chain, r.run_id], "openclaw_own_at": own_at},
                    # The continuation (another process's, or a Gateway recovery it linked) wrote M already.
                    unless_continued=r.run_id,
                    status=status,
                )
            except StoreError as exc:
                result = exc
        if isinstance(result, Written):
            await self._tell_status(result.statuses)
        if isinstance(result, AlreadyDone):
            log.info("runs.continued_elsewhere run=%s message=%s", r.run_id, r.message_id)
            await self._add_shown(output)
            r.cont.kept_output = None  # ``Cuts.on_settled``: nothing for this process to continue
            ctx.apply(r, WriteResult(WriteOutcome.FINISHED_ELSEWHERE))
            return
        if not isinstance(result, Written):
            log.error(
                "runs.NOT_WRITTEN run=%s chat=%s (kept open for its continuation): %s", r.run_id, r.ref.chat_id, result
            )
        log.info(
            "runs.kept_open run=%s message=%s owner=%s",
            r.run_id,
            r.message_id,
            r.cont.cut.value if r.cont.cut else None,
        )
        # Reported as written either way: the continuation writes M (and makes it, if this write could not).
        ctx.apply(r, WriteResult(WriteOutcome.WRITTEN))
        # The tabs get M as written open, with what it shows: a take-over on a new connection told them M as stored
        # (empty: a live copy is never saved before the finalize), so ``done: false`` alone left an empty bubble for
        # as long as the continuation took (seen in the browser, issue 24 item 7).
        shown: dict[str, Any] = (
            result.message
            if isinstance(result, Written)
            else {"id": r.message_id, "done": False, "content": output_text(output), "output": output}
        )
        await self._emit({"type": "chat:messages", "data": {"messages": {r.message_id: shown}}})

    async def _usage(self) -> tuple[str, ...]:
        """The usage line for the finished reply (``owc.render.usage``): ``sessions.describe`` and ``usage.status``
        read once, side by side, bounded by the transport's RPC timeout; a read that fails shows nothing of its
        part (never something stale). No text of a person's is in it."""
        r = self.run_
        got: dict[str, Any] = {}

        async def read(name: str, method: str, params: dict[str, Any]) -> None:
            try:
                got[name] = await self.ctx.request(method, params)
            except (GatewayError, ProtocolError) as exc:
                log.info("runs.usage_unread run=%s method=%s: %s", r.run_id, method, exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read, "describe", "sessions.describe", {"key": r.session_key})
            nursery.start_soon(read, "status", "usage.status", {})
        return usage.lines(usage.usage_of(got.get("describe"), got.get("status"), r.run_id))

    async def _abort_if_stopped(self) -> None:
        """A run a Stop ended, whose terminal has not come: aborted at the Gateway, once."""
        r = self.run_
        if (r.life.stop or isinstance(self.handle.ended_by, Stop)) and r.life.terminal is None and not self.aborted:
            await self._abort()

    async def _finalize(self, *, unless_done: bool) -> None:
        r, ctx = self.run_, self.ctx
        history = await self._history()
        terminal = r.life.terminal
        # The session row's ``lastRunError`` for a run whose error terminal owc did not see (``Terminal.from_row``):
        # the live words (measured equal to the first live ``errorMessage``), before the transcript's own wording.
        row_error = terminal.error if terminal is not None and terminal.state == "error" else None
        finished = finish(r.renderer, history, row_error=row_error)
        if finished.source == "transcript":
            # Never less than the tabs were shown (issue 24, item 5): a stop or a crash stores nothing of the text it
            # cuts, so the transcript can end where the stream went on.
            # A stream with a gap or joined mid-run lacks some of the run's items: aligned at the transcript's end.
            missed = r.life.missed or bool(r.renderer.gaps)
            output = never_less(
                r.renderer.output(done=True),
                finished.output,
                missed=missed,
                run_text=r.renderer.text if missed else None,
            )
            if len(output) != len(finished.output) or any(a is not b for a, b in zip(output, finished.output)):
                log.info("runs.kept_shown run=%s (the transcript lacks what was streamed)", r.run_id)
                finished = attrs.evolve(finished, output=output, content=output_text(output), cards=count_cards(output))
        own_at = 0  # where this run's own part begins in M's output (``meta.openclaw_own_at``): at its seam
        if r.cont.chain:
            # The earlier runs' part, the seam that says the reply was continued here, then this run's own part
            # (``owc.render.seam``: rebuilt from the parts at every finalize, so never a seam twice).
            output, own_at = joined(self._chain_output(history), r.run_id, finished.output)
            finished = attrs.evolve(finished, output=output, content=output_text(output))
        if r.cont.cut is Owner.GATEWAY and history is not None and ended_in(history, r.run_id):
            # Held for a recovery because no terminal reached owc before a new boot, but its last stored message
            # ended it (a final answer, an error): the boot recovers runs still running, not this one.
            log.info("runs.ended_before_the_boot run=%s (not the boot's to recover)", r.run_id)
            r.cont.cut = None
            ctx.uncut(r)
        if r.cont.cut is not None:
            await self._keep_open(finished.output, own_at)
            return
        error = finished.error
        if error is None and terminal is not None and terminal.state == "error":
            # An error terminal owc did not see live (it ended while owc was away, or in a seq gap): its session row
            # said it (``Terminal.from_row``), and it shows as a live one does (issue 24, item 2).
            error = {"content": terminal.error or "The run failed."}
        if (
            r.cont.note is not None
            and history is not None
            and (ended_in(history, r.run_id) or taken_over_first(history, r.run_id))
        ):
            # Its transcript says it ended on its own (a final answer, its own error) before the newer run, or shows
            # the next run begun after it with no recovery between (its end hidden: a final NO_REPLY, an abort right
            # after a tool call; fuzz seeds 80221, 80211): nothing cut it, so no cut-off note (issue 24, item 3).
            log.info("runs.not_cut run=%s (its transcript says it ended)", r.run_id)
            r.cont.note = None
        if r.cont.note is not None and error is None:
            # The note belongs to a run that was cut and that nobody continues; never over the run's own error.
            error = {"content": r.cont.note}
        if not finished.output and error is None and r.renderer.media_announced and not r.life.stop:
            # The reply is files alone (a bare final after ``mediaUrls``, measured): they reach the transcript after
            # the final and the media desk adds them; no "nothing was saved" note.
            log.info("runs.files_only run=%s (its files follow)", r.run_id)
        elif not finished.output and error is None:
            # Nothing of the run reached its transcript or this process (a crash cut it, and the writer that
            # streamed it died): the message is finished with a word on why it is empty, not left open.
            # The correction fills it once the transcript can be read, and drops the note.
            state, reason = (terminal.state, terminal.reason) if terminal is not None else (None, None)
            error = {"content": empty_finish_note(state, reason, self.history_failed)}
        if not finished.complete:
            log.warning("runs.incomplete run=%s gaps=%s (no transcript for the run)", r.run_id, r.renderer.gaps)
        # Short of what the gaps held until a correction reads the transcript: marked in M, so that a later process
        # corrects it if this one exits first (``CORRECT_MARK``; fuzz seed 212956).
        short = finished.source == "stream" and self.history_failed and not finished.complete
        meta: dict[str, Any] = (
            {"openclaw_chain": [*r.cont.chain, r.run_id], "openclaw_own_at": own_at} if r.cont.chain else {}
        )
        if short:
            meta[CORRECT_MARK] = True
        # Its status lines end with M: "Stopped" for a Stop, else the open line (a tool, a wait) is closed. The store
        # closes a line another party left open too: a finished message never keeps a spinning line.
        stopped = r.life.stop or isinstance(self.handle.ended_by, Stop)
        if not r.status.ended:  # a finalize tried again after the database refused says its end once
            r.status.apply(lines.Stopped() if stopped else lines.Ended())
            if not stopped and ctx.usage_line():
                told = await self._usage()
                if told:
                    r.status.apply(lines.Told(told))
        status = r.status.take()
        # Shielded: a started final write completes even if the connection closes meanwhile (one short
        # transaction, bounded by the busy wait), and its result is reported before anything can cancel.
        with trio.CancelScope(shield=True), _given_back_on_failure(r, status):
            result = await ctx.store.write(
                r.ref.chat_id,
                r.message_id,
                content=finished.content,
                output=finished.output,
                done=True,
                error=error["content"] if error else None,
                unless_done=unless_done,
                unless_continued=r.run_id,  # a continuation wrote M after this run: it holds this run's part too
                user_id=r.ref.user_id,
                # ``openclaw_own_at``: a process that streamed an earlier run of the chain, which this one never saw,
                # puts what it showed in front of this run's part (``_add_shown``).
                meta=meta or None,
                continues=bool(r.cont.chain),  # a continuation: a cut-off note an earlier finish left goes
                # Another process's copy of this continuation finished M after this one's claim: its finish stands
                # (this write is from M as it was at the claim; fuzz seed 40164 under load).
                unless_holds=r.run_id if r.cont.chain else None,
                # A message is claimed at the tail; later runs of its session may have claimed first (this run was
                # found late, or another process never saw it begin). The transcript read for this finalize gives
                # the session's runs in start order, and the write puts the line of their messages in it.
                run_order=run_order(history),
                status=status,
            )
        if isinstance(result, AlreadyDone):
            log.info("runs.finished_elsewhere run=%s message=%s", r.run_id, r.message_id)
            await self._add_shown(finished.output)
            ctx.apply(r, WriteResult(WriteOutcome.FINISHED_ELSEWHERE))
            return
        if isinstance(result, NotWritten):
            log.error(
                "runs.NOT_WRITTEN run=%s chat=%s attempts=%d (kept for a retry): %s",
                r.run_id,
                r.ref.chat_id,
                result.attempts,
                result.detail,
            )
            ctx.apply(r, WriteResult(WriteOutcome.NOT_WRITTEN))
            r.status.give_back(status)  # written with the retry's finalize
            await self._not_saved("it stayed locked" if result.locked else "it refused the write")
            return
        assert isinstance(result, Written)
        ctx.stats.finalized += 1
        ctx.apply(r, WriteResult(WriteOutcome.WRITTEN))
        ctx.delivered(r, history)
        log.info(
            "runs.finalized run=%s message=%s source=%s cards=%d",
            r.run_id,
            r.message_id,
            finished.source,
            finished.cards,
        )
        if short or (
            ((finished.source == "stream" and self.history_failed) or self.order_unread)
            and self._maybe_out_of_order(result.parent_run)
        ):
            # The transcript could not be read: what the stream missed comes later (the error note stays).
            # The note of an empty finish is no error of the run's: the correction, which reads the transcript, fills
            # the message and drops it (fuzz seed 141646: a run that ended final, its stream joined after its tool
            # call and its transcript unreadable, kept "cut off before any of it was saved" under its card).
            # M right under another run's message may be out of start order, which only the transcript can tell
            # (``run_order`` above): the correction puts the line right too (fuzz seed 150032).
            kept = error["content"] if error and not error["content"].startswith(EMPTY_FINISH_NOTES) else None
            ctx.correct_later(r, kept, content=short)
        # The finished message to the chat's room, alone (seed 003, ELI-340): a tab whose load began before the
        # write keeps this over what its load fetched, one that shows the message merges the same content, and
        # tabs of a process that never streamed the message get all of it.
        finished_messages = {r.message_id: result.message}
        finished_data: dict[str, Any] = {"messages": finished_messages}
        if self.inserted and result.parent is not None:
            # A message this writer made: the event also carries its parent's link and the chat's view (seed 003,
            # ELI-230: a tab that loaded the chat before the claim learns where M hangs and moves to it). A
            # taken-over message is sent alone: later messages can sit under it.
            finished_messages[result.parent["id"]] = result.parent
        if self.inserted and result.current_id is not None:
            finished_data["currentId"] = result.current_id
        await self._tell_status(result.statuses)
        for moved in result.moved:  # links changed by putting the session's line in run order
            finished_messages[moved["id"]] = {
                "id": moved["id"],
                "parentId": moved.get("parentId"),
                "childrenIds": moved.get("childrenIds", []),
            }
        await self._emit({"type": "chat:messages", "data": finished_data})
        data: dict[str, Any] = {"done": True, "output": finished.output, "content": output_text(finished.output)}
        if error:
            data["error"] = error
        await self._emit({"type": "chat:completion", "data": data})
        await self._emit({"type": "chat:active", "data": {"active": False}})
        try:
            await ctx.emitter.clear_stream(r.ref.chat_id, r.message_id)
        except Exception:
            log.exception("runs.clear_stream_failed run=%s", r.run_id)
        if r.cont.recovery:
            ctx.one_reply(r)
