"""Cut runs and their one continuation (seed 000 section 2.7; issue 14): the driver of the cut machine.

When a Gateway restart, stop, container stop or crash cuts a run S, exactly one party continues it, into S's
message M: the Gateway (its restart recovery R', linked to M by rule E), owc (a resume run
``msg-<chat>-<M>-resume-<t>``, which the identity rule maps to M), or nobody (a Stop, a real error: M is finalized
as always). Which, and what happens next, is the cut machine's (``owc/rules/cut.py``, calling the owner rule of
``owc/rules/owner.py``; issue 26, item 1): a cut's states and transitions, as data. This module holds the cuts across
connections, computes the facts the machine reads (a row, a hello, a tick after a notice, a send's result, what a
transcript or a chat says: link rule E's reading, ``owc/rules/link.py``, is such a fact) and performs its actions
(write M open, send the resume, end M with its note, add what was shown, wake the waiters). It decides nothing of its
own beyond those facts:

* ``decide`` at S's terminal (or, for a run no terminal reached, at the first hello after it) feeds the owner rule's
  row (``Classify``). A continuing decision registers a ``Cut`` on S's session and marks S: its writer writes M
  *open* (``done: false``, with the chain of runs M holds) instead of finalizing it.
* when S is settled here (``settled``), the machine holds M for the Gateway, waits for a busy session, or asks how
  the session is (``LOOK``): a resume is sent at once, unless the Gateway is going down (its ``shutdown`` notice came
  on this connection) or the session is busy. A refused ``chat.send`` is held on the cut and sent again, under the
  same run id (the idempotency key: never two runs), at the next hello-ok. At most ``MAX_RESUMES`` per M, counted on
  M (``meta.openclaw_resumes``); after that M ends with a cut-off note.
* a run that may be a recovery (its session has a cut the Gateway owns, or its row says ``abortedLastRun``)
  waits, before it claims, for the transcript to say (``link``): a recovery writes into M, after what M holds.

No clock decides anything here: every wait ends on a Gateway input (a hello, a row, a run's own event or end).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs

from owc import ids
from owc.gateway import GatewayError, NotConnected, SessionClosed
from owc.protocol import ChatHistory, ProtocolError, SessionRow, SessionsChanged
from owc.render import output_text
from owc.rules.cut import (
    Action,
    Classify,
    ContinuedElsewhere,
    CutMachine,
    CutState,
    IllegalTransition,
    Input,
    Linked,
    NobodyContinues,
    Reserved,
    SendAbandoned,
    SendOutcome,
    Sent,
    Session,
    Settled,
    SettleOutcome,
    Tick,
    Uncut,
    Why,
)
from owc.rules.cut import Hello as HelloIn
from owc.rules.cut import SessionRow as RowIn
from owc.rules.finished import message_finished
from owc.rules.lifecycle import State
from owc.rules.link import (
    Verdict,
    before,
    began_before,
    followed,
    heartbeat_recovered,
    next_run_began,
    recovery_before,
    recovery_owed,
    recovery_source,
)
from owc.rules.owner import (
    CUT_OFF,
    MAX_RESUMES,
    RESUME_DIRECTIVE,
    Owner,
    Row,
    Seen,
    settled_before_boot,
)
from owc.rules.reconcile import run_order
from owc.runs.run import Run
from owc.runs.writer import history_params, read_history_page
from owc.store import Absorbed, AlreadyDone, StoreError, Written

if TYPE_CHECKING:
    from owc.runs.ports import Keeper, Table

log = logging.getLogger("owc.runs")


@attrs.define(eq=False)
class Cut:
    """A message whose run was cut and whose continuation is owed: its data, and its state in the cut machine
    (``machine``, ``owc/rules/cut.py``), which alone says what happens next."""

    session_key: str
    ref: ids.SessionRef
    message_id: str
    #: The runs M holds, in order; the cut one is last.
    chain: tuple[str, ...]
    #: The owner rule's decision at the cut (the machine starts from it: ``owner`` is the machine's from then on).
    decided: Owner = attrs.field(alias="owner")
    seen: Seen
    #: The boot the cut run was sent under (a recovery comes from a later one).
    boot_id: str | None
    resumes: int = 0
    #: M's output as the cut run left it (what a continuation shows before its own), once the cut run is settled.
    output: list[dict[str, Any]] | None = None
    #: The resume run id reserved for this cut (its n-th on M): a ``chat.send`` that did not go through is sent again
    #: under it (``CutState.SEND_HELD``).
    held: str | None = None
    #: The ledger's open count when the cut was decided: a run opened after it is newer than the cut run.
    opened: int = 0
    #: A recovery waits for M to be written open (``link``): the cut run claims without waiting for a reconcile
    #: pass that owes the recovery its message (each would wait on the other).
    awaited: bool = False
    #: That recovery, while it waits (``link``): the runs placed before the cut run began before it too
    #: (``owed_after``).
    waiting: Run | None = None
    #: The run a hello's row named as the session's last since the boot, taken for the boot's recovery of the cut
    #: run (``RunTable._decide_unterminated``): M waits for it to link. If another process has already given it a
    #: message of its own (a finished message of that run, read by a reconcile pass: ``seen_chat``), it will never
    #: link here, and M ends instead of waiting for ever (fuzz seeds 30151, 40434).
    recovery: str | None = None
    #: That recovery's own message, as a reconcile pass found it finished (``seen_chat``): when M ends it takes the
    #: recovery's part and the recovery's message goes (``ChatStore.absorb_recovery``): one reply for the cut run and
    #: its continuation (issue 24, item 4's shape D).
    absorb: str | None = None
    machine: CutMachine = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.machine = CutMachine(self.source, self.seen, state=CutState.OPENING, owner=self.decided)

    @property
    def source(self) -> str:
        return self.chain[-1]

    @property
    def owner(self) -> Owner | None:
        return self.machine.owner

    @property
    def settled(self) -> bool:
        """The cut run is settled here, whatever became of M (what a recovery waiting in ``link`` waits for)."""
        return self.machine.settled

    @property
    def dropped(self) -> bool:
        """Nothing to continue, nothing to link to: the cut run has no message, or was not cut."""
        return self.machine.gone

    @property
    def ending(self) -> bool:
        return self.machine.ending

    @property
    def note(self) -> str | None:
        return self.machine.note


def resumes_message(run_id: str | None, message_id: str, chain: tuple[str, ...]) -> bool:
    """``run_id`` (a session's last run) is a resume of message ``message_id`` that is not one of the runs of
    ``chain`` (M's runs so far): a continuation of M someone has sent."""
    resume = ids.parse_run_id(run_id or "")
    return resume is not None and resume.kind == "resume" and resume.message_id == message_id and run_id not in chain


#: The ``raw`` of a row kept in ``Cuts.rows``: what is read of a row is its parsed fields.
_NO_RAW: Mapping[str, Any] = MappingProxyType({})


def _row(source: SessionRow | SessionsChanged) -> Row:
    return Row(
        status=source.status,
        has_active_run=bool(source.has_active_run),
        last_run_id=source.last_run_id,
        last_run_error=source.last_run_error,
    )


class Cuts:
    """The keeper's cut runs (one per session at most: a session runs one run at a time), across connections."""

    def __init__(self, keeper: Keeper) -> None:
        self.keeper = keeper
        self.by_key: dict[str, Cut] = {}
        #: The newest row seen per session key (a push with the row, or a list): busy or not, aborted last run.
        #: Kept without its ``raw`` payload (``on_row``): a row is kept per session for good, and the whole push
        #: was about 3 KB of it (issue 32, goal 5: 29 MB held after 10,000 runs on 10,000 chats).
        self.rows: dict[str, SessionRow | SessionsChanged] = {}
        #: Resumes sent, for tests and the CLI's summary.
        self.resumes_sent: list[str] = []
        #: Cuts nobody continues whose run is not settled yet (cut run id -> cut): M ends when it is.
        self._ending: dict[str, Cut] = {}
        #: Messages being ended (a cut nobody continues): written in a task of their own.
        self._writing = 0
        #: Resume run id -> the cut it continues (its chain, M's output, the count), taken when the run claims.
        self._expected: dict[str, Cut] = {}
        #: Session key -> the run a restart recovery arriving there would continue, as a reconcile pass read the
        #: transcript (``recovery_owed``): a run on the session is checked against link rule E before it claims,
        #: until a recovery was (``may_link``). This process may never have seen that run cut (it came back after
        #: the cut), so no cut of its own says a recovery may come.
        self.owed: dict[str, str] = {}

    def uncut(self, run: Run) -> None:
        """``run`` was not cut after all (its transcript says it ended): its cut goes, and a recovery waiting for its
        message takes one of its own."""
        cut = self.by_key.get(run.session_key)
        if cut is not None and cut.source == run.run_id:
            self._feed(None, cut, Uncut())

    def awaited(self, run: Run) -> bool:
        """A recovery waits for ``run``'s message, written open for it (``link``)."""
        cut = self.by_key.get(run.session_key)
        return cut is not None and cut.awaited and cut.source == run.run_id

    def owed_after(self, run: Run, owed: tuple[int, int, int]) -> bool:
        """Every run a reconcile pass still owes ``run``'s chat (the next at ``owed``, ``Run.place``) began after
        ``run``: the pass is at a restart recovery that waits (``link``) for the message of a cut run placed after
        ``run``, and a recovery begins after the run it recovers. The pass's order is the transcript's (the recovery
        was placed by it), so what the pass gives after the recovery began later still.

        Said by the link, not by the places: at an equal Gateway time (the recovery's first message in the same
        millisecond as the runs before its cut run began: a crash with no downtime in the simulator) the tie-break
        puts a run placed by the transcript first, so ``run`` (carried, behind an earlier pass) waited for the pass to
        give the recovery its message, the recovery waited for its cut run, and the cut run claimed after ``run``: a
        circle, the play hung (fuzz seed 80324; seed 20686's circle had a recovery linked to the wrong cut)."""
        cut = self.by_key.get(run.session_key)
        if cut is None or not cut.awaited or cut.waiting is None or cut.waiting.standing.rank != 0:
            return False
        held = self.keeper.ledger.get(cut.session_key, cut.source)
        return held is not None and held is not run and run.place < held.place and not owed < cut.waiting.place

    def busy(self) -> bool:
        """A continuation is owed or being sent (for ``RunKeeper.quiet``)."""
        return bool(self.by_key or self._ending or self._writing)

    # ------------------------------------------------------------------ the owner rule

    def decide(self, table: Table, run: Run, row: Row, seen: Seen) -> Owner | None:
        """The owner rule for ``run``, cut (an abnormal terminal, or none before a new boot). Returns the decision,
        or None for a run the rule does not cover (a run already decided)."""
        if run.cont.cut is not None or run.life.settled:
            return None
        self.adopt(run)
        machine = CutMachine(run.run_id, seen)
        resume_of_m = resumes_message(row.last_run_id, run.message_id, (*run.cont.chain, run.run_id))
        actions = machine.apply(Classify(row, resume_of_m))
        decision = machine.owner
        assert decision is not None
        if resume_of_m:
            log.info("runs.cut_continued run=%s chat=%s by=%s", run.run_id, run.ref.chat_id, row.last_run_id)
        else:
            log.info(
                "runs.cut run=%s chat=%s owner=%s status=%s error=%s notice=%s",
                run.run_id,
                run.ref.chat_id,
                decision.value,
                row.status,
                (row.last_run_error or "")[:120],
                seen.notice_before_terminal,
            )
        for action in actions:
            if action is Action.NOTE:
                run.cont.note = machine.note
            elif action is Action.KEEP_OPEN:
                run.cont.cut = decision
            elif action is Action.REGISTER:
                older = self.by_key.get(run.session_key)
                if older is not None and older.source not in run.cont.chain:
                    # A newer run took the session before the older cut's continuation came, and was cut in turn.
                    self._feed(table, older, NobodyContinues(Why.SUPERSEDED))
                cut = Cut(
                    session_key=run.session_key,
                    ref=run.ref,
                    message_id=run.message_id,
                    chain=(*run.cont.chain, run.run_id),
                    owner=decision,
                    seen=seen,
                    boot_id=run.life.boot_id or (table.hello.hello.boot_id if table.hello else None),
                    resumes=run.cont.resumes,
                    opened=self.keeper.ledger.opened,
                )
                cut.machine = machine
                self.by_key[run.session_key] = cut
        return decision

    def on_settled(self, table: Table, run: Run) -> None:
        """``run`` is settled here. If it was cut, M is written open: its continuation may go (or, if nobody
        continues it after all, M ends now)."""
        cut = self.by_key.get(run.session_key)
        if cut is None or cut.source != run.run_id:
            cut = self._ending.pop(run.run_id, None)
        if cut is None or cut.settled:
            return
        if run.life.state is State.ABANDONED:
            outcome = SettleOutcome.NO_MESSAGE  # nothing was streamed and its transcript shows nothing of it
        elif run.cont.kept_output is None and run.life.state is State.DONE:
            outcome = SettleOutcome.FINISHED_ELSEWHERE  # another process finished M (``_keep_open`` met it done)
        else:
            outcome = SettleOutcome.OPEN
            cut.output = run.cont.kept_output if run.cont.kept_output is not None else []
        self._feed(table, cut, Settled(outcome))

    # ------------------------------------------------------------------ the machine

    def _feed(self, table: Table | None, cut: Cut, event: Input) -> tuple[Action, ...]:
        """Feed one fact to ``cut``'s machine and do what it answers. An illegal input is a bug: logged and recorded
        (``Ledger.illegal``: tests fail on it, ``strict`` raises), never a crash of the connection."""
        machine = cut.machine
        before = machine.state
        try:
            actions = machine.apply(event)
        except IllegalTransition as exc:
            ledger = self.keeper.ledger
            ledger.illegal.append(f"cut {cut.source}: {exc}")
            log.error("runs.cut_illegal_input run=%s %s", cut.source, exc)
            if ledger.strict:
                raise
            return ()
        log.log(
            logging.INFO if machine.state is not before or actions else logging.DEBUG,
            "runs.cut_step run=%s chat=%s %s -> %s on %s%s",
            cut.source,
            cut.ref.chat_id,
            before.value,
            machine.state.value,
            event,
            f" do={','.join(a.value for a in actions)}" if actions else "",
        )
        if not machine.live and self.by_key.get(cut.session_key) is cut:
            del self.by_key[cut.session_key]
        if machine.state is CutState.ENDING:
            self._ending[cut.source] = cut  # M is being written open: it ends once that is done
        for action in actions:
            if action is Action.LOOK:
                assert table is not None
                self._feed(table, cut, self._session(table, cut))
            elif action is Action.SEND:
                assert table is not None
                table.spawn(self._resume, table, cut)
            elif action is Action.END:
                assert table is not None
                self._spawn_end(table, cut, machine.note)
            elif action is Action.ADD_SHOWN:
                assert table is not None
                self._writing += 1
                table.spawn(self._write_shown, cut)
            elif action is Action.WAKE:
                self.keeper.wake(cut.ref.chat_id)
        return actions

    def _session(self, table: Table, cut: Cut) -> Session:
        """The session now, for a resume owed (``LOOK``): the connection's ``shutdown`` notice, and the newest row."""
        notice = table.conn.notice
        row = self.rows.get(cut.session_key)
        newer = row is not None and row.last_run_id not in (None, *cut.chain, cut.held)
        return Session(
            stopping=notice is not None and notice.restart_expected_ms is None,
            busy=row is not None and bool(row.has_active_run),
            newer=newer,
            resume_of_m=newer and row is not None and resumes_message(row.last_run_id, cut.message_id, cut.chain),
        )

    # ------------------------------------------------------------------ rows and hellos

    def on_row(self, table: Table, source: SessionRow | SessionsChanged) -> None:
        """A row of a session (a push that carries it, or a list's): a cut waiting on the session looks again."""
        key = source.session_key if isinstance(source, SessionsChanged) else source.key
        if key is None or source.has_active_run is None:
            return
        self.rows[key] = attrs.evolve(source, raw=_NO_RAW) if source.raw else source
        cut = self.by_key.get(key)
        if cut is None:
            return
        row = _row(source)
        self._feed(
            table,
            cut,
            RowIn(
                row,
                resume_of_m=resumes_message(row.last_run_id, cut.message_id, cut.chain),
                unseen=row.last_run_id not in (None, *cut.chain) and not self._seen_run(key, row.last_run_id),
            ),
        )

    def _seen_run(self, key: str, run_id: str | None) -> bool:
        """A run this process has heard of (open, or settled here): its own path decides what it did to a cut."""
        ledger = self.keeper.ledger
        return run_id is not None and (ledger.get(key, run_id) is not None or ledger.is_settled(key, run_id))

    def on_boot_row(self, row: SessionRow, boot_id: str | None, booted_at: int | None = None) -> None:
        """A later boot's hello listed ``row``: a cut the Gateway owns there (one a boot before this one made), whose
        row names a newer run as the session's last, running or done, expects that run to be the boot's recovery
        (``Cut.recovery``), as ``RunTable._decide_unterminated`` records it for a run the hello finds unterminated.
        A cut made before the hello (at a ``shutdown`` notice, then the close) was never given one, so a recovery
        another process had settled with a message of its own left M waiting for ever (fuzz seed 41332: a stop with
        a notice under a run of one deploy, the other deploy back first). ``seen_chat`` still decides from the
        transcript and the chat whether that run went elsewhere."""
        cut = self.by_key.get(row.key)
        if (
            cut is not None
            and cut.owner is Owner.GATEWAY
            and cut.recovery is None
            and boot_id is not None
            and cut.boot_id not in (None, boot_id)
            and row.status in ("running", "done")
            and row.last_run_id not in (None, *cut.chain)
            and not resumes_message(row.last_run_id, cut.message_id, cut.chain)
            # A run that settled before this boot began is not its recovery (fuzz seed 141731).
            and not settled_before_boot(row.status, row.updated_at, booted_at)
        ):
            cut.recovery = row.last_run_id

    def seen_history(self, row: SessionRow, history: ChatHistory) -> None:
        """A reconcile pass read the session's transcript: the run a restart recovery arriving now would continue, if
        any (not one the row says is running), is remembered so that the session's next runs are link-checked (issue
        24 item 4: a recovery delayed behind runs the Gateway admitted after its boot, seen by a process that came
        back after the cut, got a message of its own; fuzz seeds 241, 40536)."""
        source = recovery_owed(history)
        if source is not None and source not in (row.active_run_ids or ()):
            self.owed[row.key] = source
        else:
            self.owed.pop(row.key, None)

    def seen_chat(
        self, table: Table, chat_id: str, messages: dict[str, Any], history: ChatHistory | None = None
    ) -> None:
        """A chat's messages as a reconcile pass read them: a cut whose message another process has continued (its
        chain goes on past the cut run) or ended (with a cut-off note) is no longer this process's to continue; one
        whose expected recovery already has a finished message of its own (``_recovered_elsewhere``) ends."""
        for cut in list(self.by_key.values()):
            if cut.ref.chat_id != chat_id:
                continue
            if cut.owner is Owner.GATEWAY and (elsewhere := self._recovered_elsewhere(cut, messages, history)):
                cut.recovery, found = elsewhere
                # The run the Gateway continued the cut run with ended, and another process gave it a message of its
                # own (it could not know this process held the cut: M did not exist when it settled the recovery).
                # It will never claim here, so nothing would ever link it to M: M ends now (before, M waited for it
                # and stayed ``done: false``, and the play hung). Issue 24, item 4's remainder decides the link.
                log.info(
                    "runs.recovered_elsewhere chat=%s run=%s recovery=%s (a message of its own: M ends)",
                    chat_id,
                    cut.source,
                    cut.recovery,
                )
                meta = messages[found].get("meta")
                if meta.get("openclaw_run") == cut.recovery:
                    cut.absorb = found  # its own message: M takes its part when it ends (``_absorb``)
                self._feed(table, cut, NobodyContinues(Why.RECOVERED_ELSEWHERE))
                continue
            if cut.owner is Owner.GATEWAY and history is not None and self._not_recovered(table, cut, history):
                continue
            message = messages.get(cut.message_id)
            meta = message.get("meta") if isinstance(message, dict) else None
            chain = meta.get("openclaw_chain") if isinstance(meta, dict) else None
            error = message.get("error") if isinstance(message, dict) else None
            ended = isinstance(error, dict) and str(error.get("content") or "").startswith(CUT_OFF)
            # ``done`` alone says nothing: Open WebUI's own end-of-request save marks a user turn's M done, and may
            # land after M was written open (CI, a container stop under a user turn: the resume was dropped).
            if isinstance(message, dict) and (
                (message.get("done") is True and ended) or (isinstance(chain, list) and len(chain) > len(cut.chain))
            ):
                # (M not written open yet: its writer finds it continued, ``unless_continued``.)
                self._feed(table, cut, ContinuedElsewhere(shown=bool(cut.output)))

    def _not_recovered(self, table: Table, cut: Cut, history: ChatHistory) -> bool:
        """The transcript shows another run begun after the held cut run's last message with no recovery turn
        before it (``next_run_began``): the boot did not recover the cut run before that run, and the Gateway
        recovers a session before any turn admitted after the boot, so no recovery of it will come. It was not cut:
        it ended on its own (an abort after a tool call stores no ending message, so the finalize's ``ended_in``
        could not tell), and M ends with what it holds, no note. Before, a hello's row that named that later run was
        taken for the boot's recovery and M waited for a link that could never come: the cut stayed, ``busy()`` for
        ever, and the play hung (fuzz seed 30151)."""
        if not next_run_began(history, cut.source):
            return False
        log.info(
            "runs.not_recovered run=%s chat=%s (a later run began before any recovery)", cut.source, cut.ref.chat_id
        )
        self._feed(table, cut, NobodyContinues(Why.NOT_RECOVERED))
        return True

    def _recovered_elsewhere(
        self, cut: Cut, messages: dict[str, Any], history: ChatHistory | None
    ) -> tuple[str, str] | None:
        """The cut's expected recovery (``Cut.recovery``) is one this process never had (another process settled
        it: it will never link-check here), the transcript says it is a restart recovery of the cut run (unnamed, or
        named as one of M's runs), and it has a finished message other than M (its own, or one that holds it). Only
        then: a run the transcript says is no recovery may be a run admitted before a delayed recovery, which then
        still comes and links here (fuzz seed 15: ending M on it lost the later recovery's link). Returns that
        message's id (None: not so).

        The run the row named (``Cut.recovery``: the session's last) is not always the recovery: with the boot's
        recovery R first (the Gateway's order) and a run admitted after the boot next, the row names the later run,
        which the transcript says is no recovery. The recovery is then the one the transcript shows right before that
        run began (``recovery_before``), and it is checked in its stead (fuzz seed 41332, shrunk: M waited for ever
        for the later run). Returns the recovery and that message's id."""
        if cut.recovery is None or cut.recovery in cut.chain or history is None:
            return None
        recovery = cut.recovery
        link = recovery_source(history, recovery)
        if link.verdict is Verdict.NOT_RECOVERY and not self._seen_run(cut.session_key, recovery):
            earlier = recovery_before(history, recovery)
            if earlier is None or earlier in cut.chain:
                return None
            recovery, link = earlier, recovery_source(history, earlier)
        if self._seen_run(cut.session_key, recovery):
            return None
        if link.verdict is Verdict.NOT_RECOVERY or (link.source is not None and link.source not in cut.chain):
            return None
        for message_id, message in messages.items():
            if message_id == cut.message_id or not isinstance(message, dict) or not message_finished(message):
                continue
            meta = message.get("meta")
            if not isinstance(meta, dict):
                continue
            chain = meta.get("openclaw_chain") if isinstance(meta.get("openclaw_chain"), list) else []
            if meta.get("openclaw_run") == recovery or recovery in chain:
                return recovery, message_id
        return None

    def on_tick(self, table: Table) -> None:
        """A Gateway tick. After a ``shutdown`` notice on this connection it says the Gateway is still serving: a resume
        held for the next hello is tried now (``CutState.AFTER_HELLO``, ``SEND_HELD``; issue 24, item 13)."""
        if table.conn.notice is None:
            return
        for cut in list(self.by_key.values()):
            self._feed(table, cut, Tick())

    def on_hello(self, table: Table) -> None:
        """A new connection said hello-ok (its list is in): held resumes go now."""
        for cut in list(self.by_key.values()):
            self._feed(table, cut, HelloIn())

    # ------------------------------------------------------------------ resume

    def _resume_id(self, cut: Cut) -> str:
        """The n-th resume of M has one run id in every process (n counted on M): two deploys that both resume the
        same cut send the same idempotency key, and the Gateway starts one run."""
        return ids.resume_run_id(cut.ref.chat_id, cut.message_id, str(cut.resumes))

    async def _resume(self, table: Table, cut: Cut) -> None:
        answered = False
        try:
            answered = await self._send_resume(table, cut)
        finally:
            if not answered:
                # Its connection closed before the Gateway answered: the next hello sends it (under the run id
                # reserved, if one was).
                self._feed(table, cut, SendAbandoned(reserved=cut.held is not None))

    async def _send_resume(self, table: Table, cut: Cut) -> bool:
        """Reserve the resume's number on M (unless a run id is held) and send it; True once the machine was told
        how it went."""
        if cut.held is None:
            counted = max(cut.resumes, await self._counted(cut))
            try:
                # On M before the send (a crash after it must not reset the budget), and once per cut run: a cut
                # another process resumed already gets that resume's number, so both send one run id.
                n, new = await self.keeper.store.reserve_resume(
                    cut.ref.chat_id,
                    cut.message_id,
                    source=cut.source,
                    chain=list(cut.chain),
                    content=output_text(cut.output or []),
                    output=cut.output or [],
                    limit=MAX_RESUMES,
                )
            except StoreError as exc:  # M not there (the cut run showed nothing): the count lives on the cut alone
                log.info("runs.resume_count_unsaved chat=%s message=%s (%s)", cut.ref.chat_id, cut.message_id, exc)
                n, new = counted + 1, True
            self._feed(table, cut, Reserved(n))
            if not cut.machine.held:
                return True  # the budget is spent: M ends with its note
            if not new:
                log.info(
                    "runs.resume_shared chat=%s message=%s n=%d (another process resumed this cut)",
                    cut.ref.chat_id,
                    cut.message_id,
                    n,
                )
            cut.resumes = n
            cut.held = self._resume_id(cut)
        run_id = cut.held
        # The resume run takes the chain when it claims (``adopt``): its events may come before the send's reply.
        self._expected[run_id] = cut
        params = {"sessionKey": cut.session_key, "message": RESUME_DIRECTIVE, "idempotencyKey": run_id}
        try:
            await table.conn.request("chat.send", params)
        except (NotConnected, SessionClosed) as exc:
            log.info("runs.resume_held run=%s (%s; sent at the next hello)", run_id, exc)
            self._feed(table, cut, Sent(SendOutcome.HELD))
            return True
        except (GatewayError, ProtocolError) as exc:
            if getattr(exc, "retryable", False) or getattr(exc, "code", None) == "UNAVAILABLE":
                # The Gateway is draining or starting (or its store did not answer): the next hello sends it.
                log.info("runs.resume_held run=%s (%s; sent at the next hello)", run_id, exc)
                self._feed(table, cut, Sent(SendOutcome.HELD))
                return True
            log.error("runs.resume_refused run=%s error=%s", run_id, exc)
            self.by_key.pop(cut.session_key, None)
            self._expected.pop(run_id, None)
            self._feed(table, cut, Sent(SendOutcome.REFUSED, str(exc)))
            return True
        log.info(
            "runs.resumed run=%s chat=%s message=%s count=%d", run_id, cut.ref.chat_id, cut.message_id, cut.resumes
        )
        known = self.keeper.ledger.get(cut.session_key, run_id)
        if known is not None:
            self.adopt(known)  # its events came first (another process sent it too)
        elif self.keeper.ledger.is_settled(cut.session_key, run_id):
            self._expected.pop(run_id, None)
        self.resumes_sent.append(run_id)
        self._feed(table, cut, Sent(SendOutcome.SENT))  # the resume run carries the chain now
        return True

    async def _kept_open(self, run: Run, history: ChatHistory) -> tuple[str, tuple[str, ...]] | None:
        """The message of the chat a cut run left for the recovery ``run`` (its id, and the runs it holds), if there is
        one: the newest message a cut run wrote open for its continuation (``done: false`` with a chain), else the
        newest message owc still owes (``message_finished`` false) of a run that stored nothing on this transcript
        page (a run a crash cut before it stored anything, whose process died before it could see the cut: it is the
        session's run the boot recovers, issue 24 item 4)."""
        try:
            chat = await self.keeper.store.read_chat(run.ref.chat_id)
        except StoreError:
            return None
        messages = ((chat or {}).get("history") or {}).get("messages") or {}
        stored = set(run_order(history))
        kept: list[tuple[int, str, tuple[str, ...]]] = []
        owed: list[tuple[int, str, tuple[str, ...]]] = []
        for mid, m in messages.items():
            if not isinstance(m, dict) or m.get("role") != "assistant" or not isinstance(m.get("meta"), dict):
                continue
            meta = m["meta"]
            chain = meta.get("openclaw_chain")
            source = meta.get("openclaw_run")
            if m.get("done") is False and chain:
                if next_run_began(history, str(chain[-1])) or heartbeat_recovered(history, str(chain[-1]), run.run_id):
                    # Its run was followed by another before any recovery (or by a heartbeat cut before it stored
                    # anything but its hidden prompt, the run this recovery continues): it ended on its own, and this
                    # recovery is of a later run (a cut this process ends: ``_not_recovered``, its write may not be in
                    # yet).
                    continue
                kept.append((m.get("timestamp") or 0, mid, tuple(str(x) for x in chain)))
            elif (
                not message_finished(m)
                and isinstance(source, str)
                and source != run.run_id
                and source not in stored
                and ids.message_id(run.session_key, source) == mid
            ):
                owed.append((m.get("timestamp") or 0, mid, (source,)))
        for found in (kept, owed):
            if found:
                _, mid, chain = max(found)
                return mid, chain
        return None

    async def _stored(self, cut: Cut) -> list[dict[str, Any]] | None:
        """M's output as stored (None: M is not there)."""
        try:
            chat = await self.keeper.store.read_chat(cut.ref.chat_id)
        except StoreError:
            return cut.output or []
        message = ((chat or {}).get("history") or {}).get("messages", {}).get(cut.message_id)
        if not isinstance(message, dict):
            return None
        output = message.get("output")
        return list(output) if isinstance(output, list) else []

    async def _counted(self, cut: Cut) -> int:
        """The resumes M already had (its meta): a restart of owc does not reset the budget."""
        try:
            chat = await self.keeper.store.read_chat(cut.ref.chat_id)
        except StoreError:
            return 0
        message = ((chat or {}).get("history") or {}).get("messages", {}).get(cut.message_id)
        meta = message.get("meta") if isinstance(message, dict) else None
        count = meta.get("openclaw_resumes") if isinstance(meta, dict) else None
        return count if isinstance(count, int) else 0

    # ------------------------------------------------------------------ ending M without a continuation

    def _spawn_end(self, table: Table, cut: Cut, note: str | None) -> None:
        self._writing += 1
        table.spawn(self._write_end, cut, note)

    async def _write_end(self, cut: Cut, note: str | None) -> None:
        try:
            await self._end_message(cut, note)
        finally:
            self._writing -= 1
            self.keeper.wake(cut.ref.chat_id)

    async def _end_message(self, cut: Cut, note: str | None) -> None:
        """M ends with what it holds (and a cut-off note): nobody continues its run. Or, when another process gave
        the run's recovery a message of its own (``Cut.absorb``), M takes that message's part (``_absorb``)."""
        keeper = self.keeper
        if cut.absorb is not None and await self._absorb(cut):
            return
        output = await self._stored(cut)
        if output is None:
            log.info("runs.cut_end_nothing chat=%s message=%s (no message to end)", cut.ref.chat_id, cut.message_id)
            return
        try:
            result = await keeper.store.write(
                cut.ref.chat_id,
                cut.message_id,
                content=output_text(output),
                output=output,
                done=True,
                error=note,
                # M's chain goes on past the cut run: a continuation wrote it after the read above (it holds the
                # cut run's part too), and ending M now would write over it.
                unless_continued=cut.source,
            )
        except StoreError as exc:
            log.info("runs.cut_end_unwritten chat=%s message=%s (%s)", cut.ref.chat_id, cut.message_id, exc)
            return
        if isinstance(result, AlreadyDone):
            log.info("runs.cut_continued_elsewhere chat=%s message=%s", cut.ref.chat_id, cut.message_id)
            await self._add_shown(cut)
            return
        if not isinstance(result, Written):
            log.warning("runs.cut_end_unwritten chat=%s result=%s", cut.ref.chat_id, type(result).__name__)
            return
        log.info("runs.cut_ended chat=%s message=%s note=%s", cut.ref.chat_id, cut.message_id, bool(note))
        data: dict[str, Any] = {"done": True, "output": output, "content": output_text(output)}
        if note:
            data["error"] = {"content": note}
        for event in (
            # The line M waited under ("Waiting for the Gateway to resume this reply"), closed by this write.
            *({"type": "status", "data": entry} for entry in result.statuses),
            {"type": "chat:messages", "data": {"messages": {cut.message_id: result.message}}},
            {"type": "chat:completion", "data": data},
        ):
            try:
                await keeper.emitter.emit(cut.ref.chat_id, cut.message_id, cut.ref.user_id, event)
            except Exception:
                log.exception("runs.emit_failed chat=%s", cut.ref.chat_id)

    async def _write_shown(self, cut: Cut) -> None:
        try:
            await self._add_shown(cut)
        finally:
            self._writing -= 1
            self.keeper.wake(cut.ref.chat_id)

    async def _absorb(self, cut: Cut) -> bool:
        """Make M and the recovery's own message one reply (``ChatStore.absorb_recovery``: M's part, then the
        recovery's, chain ``[..., cut run, recovery]``; the recovery's message goes), and tell the tabs: M, the links
        that changed and the chat's view in one ``chat:messages``, then M's completion. False: nothing was written
        (the recovery's message changed or went, or M was continued), and M ends as before."""
        assert cut.absorb is not None and cut.recovery is not None
        return await self._make_one(cut.ref, cut.message_id, cut.source, cut.recovery, cut.absorb)

    def finished_recovery(self, table: Table, run: Run) -> None:
        """``run``, a restart recovery, has finished its message: ``one_reply`` looks for a double, in a task of its
        own (counted in ``busy``, so a settle waits for it; it wakes the keeper when done: the writer's own end
        wakes nobody)."""
        self._writing += 1
        table.spawn(self._one_reply_task, run)

    async def _one_reply_task(self, run: Run) -> None:
        try:
            await self.one_reply(run)
        finally:
            self._writing -= 1
            self.keeper.wake(run.ref.chat_id)

    async def _add_shown(self, cut: Cut) -> None:
        """M was continued by another process after this one wrote it open with what the cut run showed here
        (``cut.output``): a continuation that finished M while it was held here, from the transcript and without M's
        open output (a crash stores nothing of the text it cuts after a tool call), lacks what the tabs here showed.
        It goes in front of the continuation's part, in one conditional write (``ChatStore.add_shown``; the writer's
        ``_add_shown`` is the same for a cut run this process finds finished at its claim; issue 24, item 5: a
        message never ends with less than it showed). Nothing is added twice: M's part before the continuation's is
        compared under the row lock."""
        if not cut.output:
            return
        keeper = self.keeper
        try:
            result = await keeper.store.add_shown(
                cut.ref.chat_id, cut.message_id, shown_through={cut.source: cut.output}, user_id=cut.ref.user_id
            )
        except StoreError as exc:
            log.info("runs.shown_not_added chat=%s message=%s (%s)", cut.ref.chat_id, cut.message_id, exc)
            return
        if not isinstance(result, Written):
            if result is not None:
                log.error("runs.NOT_WRITTEN chat=%s (what was shown, in front): %s", cut.ref.chat_id, result)
            return
        log.info("runs.shown_added run=%s message=%s (M lacked what was streamed here)", cut.source, cut.message_id)
        event = {"type": "chat:messages", "data": {"messages": {cut.message_id: result.message}}}
        try:
            await keeper.emitter.emit(cut.ref.chat_id, cut.message_id, cut.ref.user_id, event)
        except Exception:
            log.exception("runs.emit_failed chat=%s", cut.ref.chat_id)

    async def one_reply(self, run: Run) -> None:
        """``run``, a restart recovery, has just finished its message: if the chat holds another message of it (one
        of its own beside the cut run's message that names it in its chain: two processes settled it at once, one
        linking it to the cut it held, the other, which could not name the run recovered, giving it a message of
        its own), the one of its own goes (``ChatStore.absorb_recovery``). Each process checks after its own
        finish, so the later of the two finishes sees both (issue 24, item 4's shape D, its race form)."""
        try:
            chat = await self.keeper.store.read_chat(run.ref.chat_id)
        except StoreError:
            return
        messages = ((chat or {}).get("history") or {}).get("messages") or {}
        own = ids.message_id(run.session_key, run.run_id)
        mine = messages.get(own) if own is not None else None
        if not isinstance(mine, dict) or not isinstance(mine.get("meta"), dict):
            return
        if mine["meta"].get("openclaw_run") != run.run_id or not message_finished(mine):
            return
        for message_id, message in messages.items():
            meta = message.get("meta") if isinstance(message, dict) else None
            chain = meta.get("openclaw_chain") if isinstance(meta, dict) else None
            if message_id != own and isinstance(chain, list) and run.run_id in chain:
                await self._make_one(run.ref, message_id, None, run.run_id, own)
                return

    async def _make_one(
        self, ref: ids.SessionRef, message_id: str, source: str | None, recovery: str, double: str
    ) -> bool:
        try:
            result = await self.keeper.store.absorb_recovery(
                ref.chat_id,
                message_id,
                source=source,
                recovery=recovery,
                recovery_message_id=double,
                user_id=ref.user_id,
            )
        except StoreError as exc:
            log.info("runs.absorb_unwritten chat=%s message=%s (%s)", ref.chat_id, message_id, exc)
            return False
        if not isinstance(result, Absorbed):
            log.info("runs.absorb_refused chat=%s message=%s (%s)", ref.chat_id, message_id, result.why)
            return False
        log.info(
            "runs.absorbed chat=%s message=%s recovery=%s removed=%s (one reply for the cut run and its recovery)",
            ref.chat_id,
            message_id,
            recovery,
            result.removed,
        )
        messages: dict[str, Any] = {message_id: result.message}
        for other in result.changed:
            messages[other["id"]] = {
                "id": other["id"],
                "parentId": other.get("parentId"),
                "childrenIds": other.get("childrenIds", []),
            }
        listing: dict[str, Any] = {"messages": messages}
        if result.current_id is not None:
            listing["currentId"] = result.current_id
        output = result.message.get("output") or []
        data: dict[str, Any] = {"done": True, "output": output, "content": output_text(output)}
        if isinstance(result.message.get("error"), dict):
            data["error"] = result.message["error"]
        for event in ({"type": "chat:messages", "data": listing}, {"type": "chat:completion", "data": data}):
            try:
                await self.keeper.emitter.emit(ref.chat_id, message_id, ref.user_id, event)
            except Exception:
                log.exception("runs.emit_failed chat=%s", ref.chat_id)
        return True

    # ------------------------------------------------------------------ link rule E

    def adopt(self, run: Run) -> None:
        """A resume owc sent: it continues its cut's message, after what M holds."""
        cut = self._expected.pop(run.run_id, None)
        if cut is not None and not run.cont.chain:
            run.cont.chain, run.cont.prefix, run.cont.resumes = cut.chain, cut.output, cut.resumes

    async def adopt_stored(self, run: Run) -> None:
        """A resume of M that another process sent (or this one, before it restarted): its chain is M's, as stored
        (``meta.openclaw_chain``, without the resume itself); M's output so far is read at the claim."""
        ref = ids.parse_run_id(run.run_id)
        if run.cont.chain or ref is None or ref.kind != "resume":
            return
        try:
            chat = await self.keeper.store.read_chat(run.ref.chat_id)
        except StoreError as exc:
            log.warning("runs.chain_unread run=%s error=%s (M's output is read at the claim)", run.run_id, exc)
            return
        message = ((chat or {}).get("history") or {}).get("messages", {}).get(run.message_id)
        meta = message.get("meta") if isinstance(message, dict) else None
        chain = meta.get("openclaw_chain") if isinstance(meta, dict) else None
        if ref.token.isdigit():
            run.cont.resumes = max(run.cont.resumes, int(ref.token))  # the n-th resume: M had n resumes when it began
        if isinstance(chain, list) and not run.cont.chain:
            run.cont.chain = tuple(str(x) for x in chain if x != run.run_id)
            log.info("runs.chain_adopted run=%s chain=%d", run.run_id, len(run.cont.chain))

    def may_link(self, run: Run) -> bool:
        """``run`` may be a restart recovery: not a run owc sent, and its session has a cut the Gateway owns (or
        its row says the Gateway recovered it: ``abortedLastRun``, which also covers a cut this process never
        saw, such as one before owc started)."""
        if (
            run.cont.link_checked
            or run.cont.chain
            or run.cont.cut is not None
            or ids.parse_run_id(run.run_id) is not None
        ):
            return False
        cut = self.by_key.get(run.session_key)
        if cut is not None and cut.owner is Owner.GATEWAY and cut.source != run.run_id:
            return True
        if run.read.history is not None and any(
            m.user_run_id == run.run_id and m.is_restart_recovery_turn for m in run.read.history.messages
        ):
            return True  # a recovery that ended while owc was away: the reconcile's transcript says so
        if self.owed.get(run.session_key) not in (None, run.run_id):
            return True  # a pass read a transcript a coming recovery would continue (``seen_history``)
        row = self.rows.get(run.session_key)
        return bool(row is not None and row.aborted_last_run and row.status == "running")

    async def link(self, table: Table, run: Run) -> None:
        """Before ``run`` claims: if the transcript says it recovers a cut run, it writes into that run's message
        (after what M holds). The newest transcript page holds the run's user turn (written as it starts); a read
        that fails is tried again at the Gateway's next tick."""

        def told_of(page: ChatHistory) -> bool:
            return any(m.user_run_id == run.run_id for m in page.messages)

        def told(page: ChatHistory | None) -> bool:
            # A page read before the run wrote its user turn says nothing of it: the real Gateway lists a boot's
            # recovery as active before it stores ``<R'>:user`` (measured on 2026.9.6, tests/test_realgw_cuts.py).
            # Once the run has shown something (or ended), its user turn is stored, if it has one.
            return page is not None and (told_of(page) or shown)

        # The reconcile's page, if it holds the run's user turn or the run had ended (read after its end).
        history = (
            run.read.history if run.read.history is not None and (run.life.ended or told_of(run.read.history)) else None
        )
        shown = bool(run.renderer.output()) or run.life.ended
        while not told(history):
            if history is not None:
                log.info("runs.link_waits run=%s (its user turn is not stored yet: read again as it shows)", run.run_id)
                await run.wait_changed()
                if run.life.settled:
                    return
            shown = bool(run.renderer.output()) or run.life.ended
            try:
                history = await read_history_page(table.request, history_params(run.session_key))
            except (GatewayError, ProtocolError) as exc:
                log.warning("runs.link_unread run=%s error=%s (read again at the next tick)", run.run_id, exc)
                history = None
                await table.next_tick()
                if run.life.settled:
                    return
        link = recovery_source(history, run.run_id)
        run.cont.link_checked = True
        log.info("runs.link_checked run=%s verdict=%s source=%s", run.run_id, link.verdict.value, link.source)
        cut = self.by_key.get(run.session_key)
        kept_chain: tuple[str, ...] = ()
        held = self.keeper.ledger.get(cut.session_key, cut.source) if cut is not None else None
        if link.verdict is Verdict.NOT_RECOVERY:
            if cut is None or cut.owner is not Owner.GATEWAY or self._not_recovered(table, cut, history):
                return  # (or the transcript says the cut run ended on its own before a later run: no note)
            if (
                run.standing.order[1] > cut.opened
                and not cut.seen.notice_before_terminal
                and (followed(history, cut.source) or recovery_owed(history) != cut.source)
                and not (
                    held is not None
                    and run.standing.timed
                    and held.standing.timed
                    and run.standing.order[0] < held.standing.order[0]
                )
            ):
                # A run of its own took the session after the cut: the Gateway did not recover the cut run. Not so
                # when the Gateway said it was going down while the cut run ran (its row was left running, so the
                # boot recovers it), or when the transcript says the cut run is still the one a recovery would
                # continue (this run ended on its own after it): a run admitted between the boot and the delayed
                # recovery runs first, and the recovery, queued behind it, still comes for M (issue 24 item 4:
                # ending M here gave it a message of its own; fuzz seeds 48, 135). Nor one that began before the
                # cut run did (Gateway times, strictly): a reconcile pass opens a run that ran while owc was away
                # after the cut it finds on the session, and before, such a run ended the held cut, so the boot's
                # recovery found no cut to wait for and read M before the cut run wrote it open (fuzz seed 40958:
                # M lost the streamed tail the transcript lacks).
                log.info("runs.link_newer run=%s held=%s (a run of its own after the cut)", run.run_id, cut.source)
                self._feed(table, cut, NobodyContinues(Why.NEWER_RUN))
            elif run.standing.order[1] > cut.opened:
                log.info(
                    "runs.link_admitted run=%s held=%s (admitted before the recovery: M waits)", run.run_id, cut.source
                )
            return
        self.owed.pop(run.session_key, None)  # the recovery came: its check decides
        run.cont.recovery = True
        if (
            cut is not None
            and cut.owner is Owner.GATEWAY
            and held is not None
            and run.standing.timed
            and held.standing.timed
            and run.standing.order[0] < held.standing.order[0]
        ):
            # It began before the held cut's run did (Gateway times, strictly: at an equal time the place's tie-break
            # says nothing of which began first): a recovery starts at a boot after the run it recovers, so it
            # recovers an earlier cut (one a boot before this one made). Taking the held cut's message for it was
            # wrong, and it hung: it waited for the held run, which claims after the runs between the two, which
            # wait for the pass to give this recovery its message first (fuzzer, seed 20686).
            log.info(
                "runs.link_older run=%s held=%s began=%d held_began=%d (it began before the held cut's run)",
                run.run_id,
                cut.source,
                run.standing.order[0],
                held.standing.order[0],
            )
            if link.source is None:
                return  # a recovery of a cut this process did not hold: a message of its own
            cut = None
        if (
            cut is not None
            and cut.owner is Owner.GATEWAY
            and link.source not in (None, *cut.chain)
            and began_before(history, link.source, cut.source)
        ):
            # The transcript names a run that began before the held cut's run (its first message comes first): the
            # boot recovers a run still running, and the held run began after the named one, so the named one was
            # cut by an earlier boot, whose recovery this is. It writes into the named run's message, and the held cut
            # waits for its own recovery. The Gateway times above say the same when they differ; at an equal
            # millisecond they say nothing, and the recovery went into the held run's message (fuzz seed 399767: a
            # crash cut a sent run while no owc was up, a second crash cut an announce owc2 held, and the first
            # boot's recovery, which the transcript names, was linked into the announce's message).
            log.info("runs.link_named_earlier run=%s source=%s held=%s", run.run_id, link.source, cut.source)
            cut = None
        if (
            cut is not None
            and cut.owner is Owner.GATEWAY
            and link.source not in (None, *cut.chain)
            and before(history, cut.source, link.source)
        ):
            # The transcript names a run that began after the cut this process holds (the held run's messages
            # come before the named run's user turn): that run is the one the boot recovered, and the held cut's
            # run was followed by it (it decides: M ends with the note). A held run the transcript does not place
            # (it stored nothing) is the newer one: owc saw it begin (fuzzer, seed 1211).
            log.info("runs.link_named_elsewhere run=%s source=%s held=%s", run.run_id, link.source, cut.source)
            # No note when a run began after the held one's last message before any recovery (``next_run_began``):
            # the held run had ended on its own (an abort after a tool call stores no ending message), nothing cut it.
            ended_first = next_run_began(history, cut.source)
            self._feed(table, cut, NobodyContinues(Why.ENDED_FIRST if ended_first else Why.RECOVERED_OTHER))
            cut = None
        beat = cut is not None and heartbeat_recovered(history, cut.source, run.run_id)
        if (
            cut is not None
            and cut.owner is Owner.GATEWAY
            and link.source is None
            and (beat or followed(history, cut.source))
        ):
            # Unnamed, and another run began after the held cut's run (fuzzer, seed 1081: it had ended while owc was
            # away, and a later agent turn was the one the boot recovered): not this cut's recovery. So too a
            # heartbeat whose hidden prompt alone lies before the recovery's turn (``heartbeat_recovered``, seed
            # 150240: the recovery showed its reply in the held run's message).
            log.info("runs.link_followed run=%s held=%s (a later run was the one recovered)", run.run_id, cut.source)
            # No note when that later run began before any recovery (``next_run_began``, or the heartbeat): the held
            # run had ended on its own before it, nothing cut it (fuzz seed 77089: the note on a run that ended
            # ``aborted``).
            ended_first = beat or next_run_began(history, cut.source)
            self._feed(table, cut, NobodyContinues(Why.ENDED_FIRST if ended_first else Why.RECOVERED_OTHER))
            self.keeper.wake(run.ref.chat_id)
            return  # a message of its own (the recovered run's was never one owc saw begin)
        if cut is not None and cut.owner is Owner.GATEWAY:
            # The cut this process saw on the session is the run the boot recovers (one run at a time), named or not.
            message_id = cut.message_id
        elif link.source is not None:
            message_id = ids.message_id(run.session_key, link.source)
        elif (kept := await self._kept_open(run, history)) is not None:
            # Another process saw the run cut and wrote its message open for this recovery, or held it and died.
            message_id, kept_chain = kept
        else:
            log.warning(
                "runs.link_unnamed run=%s (a recovery of a run owc cannot name: a message of its own)", run.run_id
            )
            return
        if message_id is None:
            return
        run.message_id = message_id
        if cut is not None and cut.message_id == message_id:
            # M is written open first (the cut run's writer may still be at it): the recovery then takes it over.
            run.cont.linking = cut.awaited = True
            cut.waiting = run
            self.keeper.wake(run.ref.chat_id)
            try:
                # Until the cut run is settled here, however (before, only "written open" or "dropped" ended this
                # wait: a cut run whose M another process had finished left its recovery claiming for ever).
                await self.keeper.until(lambda: cut.settled or cut.dropped, cut.ref.chat_id)
            finally:
                run.cont.linking = False
                cut.waiting = None
            if cut.dropped:
                if link.source is not None:
                    # Named by the transcript: the recovery makes the message the cut run never had.
                    run.message_id = ids.message_id(run.session_key, link.source) or run.message_id
                    run.cont.chain = (link.source,)
                    log.info("runs.linked run=%s recovers=%s message=%s", run.run_id, link.source, run.message_id)
                else:
                    log.info("runs.link_dropped run=%s (the cut run has no message: one of its own)", run.run_id)
                    run.message_id = ids.message_id(run.session_key, run.run_id) or run.message_id
                self.keeper.wake(run.ref.chat_id)
                return
            # ``cut.output`` is None when another process finished M: M's output is then read at the claim.
            run.cont.chain, run.cont.prefix, run.cont.resumes = cut.chain, cut.output, cut.resumes
            self._feed(table, cut, Linked())
        else:
            # A cut this process did not see: M's output is read at the claim.
            run.cont.chain = (link.source,) if link.source else kept_chain
        log.info("runs.linked run=%s recovers=%s message=%s", run.run_id, link.source, message_id)
        self.keeper.wake(run.ref.chat_id)
