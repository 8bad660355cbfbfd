"""Link rule E (seed 000 section 2.7, case 5): which message a Gateway restart-recovery run writes into. Pure.

At boot the Gateway recovers every session whose row it left ``running`` with a new run R' (a fresh run id,
004: "a fresh run ID"). R''s user turn carries the restart-recovery provenance. R' continues the interrupted run
S, so it writes into S's message M, not a message of its own: one continuation, into the same message.

R' links to S when (1) the Gateway booted since S was sent (the caller checks the boot ids), (2) R':user carries
the restart-recovery provenance, and (3) S is the newest non-recovery ``<id>:user`` before R':user in the
transcript. S may itself be a continuation (an owc resume cut again): M then follows from S by the identity rule.

An agent turn (a cron job, a ``sessions_send``) has no ``<S>:user``: its user turn is keyed by an id of its own,
and an inter-session one is hidden from ``chat.history`` altogether. Such an S is not named by the transcript
(``RECOVERY``): the caller links R' to the cut it holds for the session (a session runs one run at a time, so the
run the boot recovers is the session's cut one), and a run owc never saw cut keeps a message of its own. A
``<id>:user`` with another run's messages after it is not S either (S's own turn is hidden).
"""

from __future__ import annotations

import enum

import attrs

from owc.protocol import ChatHistory, HistoryMessage
from owc.protocol.results import RESTART_RECOVERY_TOOL, USER_KEY_SUFFIX, Provenance

#: The stop reasons of a run's last stored message that say it ended (a final answer, an error, an abort's stored
#: partial: ``openclawAbort``, from a Stop, a stop command or a chat.abort). A Gateway restart, stop or crash
#: stores nothing of the turn it cuts (measured on 2026.9.6: the partial is lost), so a cut run's last stored
#: message is an earlier turn's (a tool call) or the restart's empty aborted message (no ``openclawAbort``).
ENDED = frozenset({"stop", "error", "openclawAbort"})


class Verdict(enum.Enum):
    LINKED = "linked"  # R' recovers ``source``
    RECOVERY = "recovery"  # R' is a restart recovery, of a run the transcript does not name
    #: R' is a run of its own: its user turn is no restart recovery, or it has none keyed by its id (the Gateway
    #: writes a recovery's ``<R'>:user`` as the run starts, before it shows anything: a run asked about once it
    #: has shown something and without one is an agent turn, whose user turn has an id of its own).
    NOT_RECOVERY = "not_recovery"


@attrs.frozen
class Link:
    verdict: Verdict
    source: str | None = None


def recovery_source(history: ChatHistory, run_id: str) -> Link:
    """Whether run ``run_id`` is a restart recovery, and of which run (conditions 2 and 3 above)."""
    messages = history.messages
    at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].user_run_id == run_id), None)
    if at is None:
        return Link(Verdict.NOT_RECOVERY)
    if not messages[at].is_restart_recovery_turn:
        return Link(Verdict.NOT_RECOVERY)
    recoveries = {m.user_run_id for m in messages if m.is_restart_recovery_turn and m.user_run_id}
    others: set[str] = set()  # runs with messages after the candidate's user turn (walking back)
    stops: list[tuple[str, str | None]] = []  # (run, stop reason) of the messages after the candidate, newest first
    #: Runs passed over: each ended on its own after the run the boot recovered (admitted between the boot and its
    #: delayed recovery, which queues behind them), so none of them is the one recovered (``_passed``).
    passed: set[str] = set()
    hidden_turn = messages[at].turn_boundary
    #: The mark (``turnBoundary``) of the message walked last: a hidden heartbeat prompt lies right before it. It is
    #: folded into ``hidden_turn`` only once the walk is past that message, so ``_own_hidden_turn`` judges the
    #: hidden message before ``first`` without taking that message's own mark for another hidden one (a heartbeat
    #: that spoke is cut: its first message is marked by its own prompt, and it is the run the boot recovered).
    marked = False
    #: Every message walked so far is numbered (``__openclaw.seq``): a hidden message among them would show as a gap.
    numbered = messages[at].seq is not None

    def last_stop(run: str) -> str | None:
        return next((stop for owner, stop in stops if owner == run or owner in recoveries), None)

    for index in range(at - 1, -1, -1):
        message = messages[index]
        after = messages[index + 1]
        numbered = numbered and message.seq is not None
        if message.seq is not None and after.seq is not None and after.seq - message.seq > 1:
            # A message chat.history hides lies between (``__openclaw.seq`` numbers the stored transcript): it may
            # be the hidden user turn of the run the boot recovered (an announce: fuzzer, seed 1569), or the hidden
            # user turn of the one run whose messages follow it (``_own_hidden_turn``).
            own = _own_hidden_turn(after, others - recoveries - passed, numbered and not hidden_turn)
            if own is not None and last_stop(own) not in ENDED:
                return Link(Verdict.LINKED, own)
            if own is not None:
                passed.add(own)  # its own turn, and it ended: an earlier run is the one recovered
            else:
                hidden_turn = True
        hidden_turn, marked = hidden_turn or marked, False  # a hidden message lies between this one and the next
        if message.role == "user":
            if message.is_restart_recovery_turn:
                hidden_turn = hidden_turn or message.turn_boundary
                continue  # an earlier recovery of the same source: look further back
            source = message.user_run_id
            if source is None:
                # An agent turn's user turn (keyed by an id of its own): its run is named by its assistant messages
                # after it. One run stored messages there and none of them ended it: that run was running when the
                # boot came, so it is the one recovered (issue 24, item 4: a process that saw it begin but died
                # before the cut holds its message, and the recovery belongs in it). Else not named here.
                candidates = others - recoveries - passed
                if len(candidates) == 1 and not hidden_turn:
                    (only,) = candidates
                    if last_stop(only) not in ENDED:
                        return Link(Verdict.LINKED, only)
                    if _passed(numbered):
                        passed.add(only)
                        continue
                return Link(Verdict.RECOVERY)
            if others - {source} - recoveries - passed:
                # Another run stored messages after it: the run the boot recovered began later, and its own
                # user turn is hidden from the transcript (an inter-session message): not named here.
                return Link(Verdict.RECOVERY)
            if hidden_turn:
                # A hidden message came after it (a heartbeat's prompt, marked ``turnBoundary`` on the next shown
                # message, or any other a ``seq`` gap shows): the run the boot recovered may be that one's.
                return Link(Verdict.RECOVERY)
            if last_stop(source) in ENDED:
                # The source's last message (or its earlier recovery's) ended it before the boot (a final answer,
                # an error): the Gateway recovers runs still running, so the recovered run is one the transcript
                # does not show (an inter-session turn or a heartbeat's, hidden from chat.history), or, on a
                # numbered page with nothing hidden, an earlier one (``_passed``).
                if _passed(numbered):
                    passed.add(source)
                    continue
                return Link(Verdict.RECOVERY)
            return Link(Verdict.LINKED, source)
        marked = message.turn_boundary
        owner = message.assistant_run_id
        if owner is not None:
            others.add(owner)
            stops.append((owner, "openclawAbort" if message.aborted else message.stop_reason))
    if at > 0:
        # The page begins with the messages of the runs after it (the transcript's start, or the window's).
        own = _own_hidden_turn(messages[0], others - recoveries - passed, numbered and not hidden_turn)
        if own is not None and last_stop(own) not in ENDED:
            return Link(Verdict.LINKED, own)
    return Link(Verdict.RECOVERY)


def _passed(numbered: bool) -> bool:
    """A run that ended on its own, walking back from a recovery, is passed over (the walk goes on to an earlier run)
    only on a numbered page with nothing hidden since it: then no other run can have been running at the boot
    unseen, and the run the boot recovered is an earlier one, the Gateway having admitted the later ones between its
    boot and the delayed recovery, which queues behind them (seed 004: "a few seconds after startup"; fuzz seeds 48,
    135, 241, 40536). Without ``seq`` a hidden turn could not be told: unnamed, as before."""
    return numbered


def _own_hidden_turn(first: HistoryMessage, candidates: set[str], unbroken: bool) -> str | None:
    """The run whose hidden user turn lies right before ``first`` (a hidden message, or the page's start): exactly
    one run stored the messages from ``first`` to the recovery's user turn, beginning with ``first``. It is that
    run's own user turn (an announce's or a ``sessions_send``'s, hidden from chat.history), and any later run's turn
    would show, or leave a gap of its own (issue 24 item 4: an agent turn whose cut no living process holds).
    ``unbroken``: every message from ``first`` on is numbered and no other hidden message or heartbeat mark lies
    among them (else the recovered run may be a hidden one: unnamed, as before)."""
    if not unbroken or len(candidates) != 1:
        return None
    (only,) = candidates
    return only if first.assistant_run_id == only else None


#: The run id of the recovery ``recovery_owed`` pictures coming next (no run has it: not a UUID).
_PROBE = "owc-probe:recovery"


def recovery_owed(history: ChatHistory) -> str | None:
    """The run a restart recovery arriving now would continue, by this rule: the page with such a recovery's user
    turn pictured after its newest message. A run named so was not ended by its transcript and nothing ran after it
    but runs that ended on their own: if the Gateway recovers the session (a boot's recovery not come yet, delayed
    behind runs it admitted first), that is its source. A reconcile pass that finds one has a run on the session
    checked against the rule before it claims (issue 24 item 4: a process back after the cut, which never saw it,
    gave the delayed recovery a message of its own; fuzz seeds 241, 40536)."""
    if not history.messages:
        return None
    last = history.messages[-1]
    turn = HistoryMessage(
        role="user",
        idempotency_key=f"{_PROBE}{USER_KEY_SUFFIX}",
        provenance=Provenance(kind="internal_system", source_tool=RESTART_RECOVERY_TOOL),
        seq=last.seq + 1 if last.seq is not None else None,
    )
    link = recovery_source(attrs.evolve(history, messages=(*history.messages, turn)), _PROBE)
    return link.source if link.verdict is Verdict.LINKED else None


def heartbeat_recovered(history: ChatHistory, run_id: str, recovery: str) -> bool:
    """Restart recovery ``recovery`` continues a heartbeat that began after run ``run_id`` and stored nothing but its
    hidden prompt, not ``run_id``: ``run_id`` stored something on the page before the recovery's user turn, and that
    turn comes right after exactly one hidden message, a heartbeat's prompt (the turn carries chat.history's
    ``turnBoundary`` mark, and ``__openclaw.seq`` skips exactly one number).

    Why: a session runs one run at a time, so the heartbeat began after ``run_id`` had ended (an abort after a tool
    call stores no ending message, so ``ended_in`` cannot tell). A heartbeat that ends on its own stores its reply (a
    text, or a bare acknowledgement chat.history hides, which would leave a second hidden number) or its error
    record; a Gateway restart, stop or crash stores nothing of the turn it cuts (measured on 2026.9.6). Nothing
    after the prompt: the heartbeat was the run still running at the boot, and its recovery is this one. Fuzz seed
    150240: the heartbeat's turn hid it, rule E left the recovery unnamed, and owc linked it into the held cut run's
    message, which showed the heartbeat's recovered reply. The one page this misreads: a heartbeat admitted after the
    boot ahead of the delayed recovery (its admission skips the recovery's dispatch) and aborted before it stored
    anything; a heartbeat is seldom aborted, and never in that window on purpose."""
    messages = history.messages
    at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].user_run_id == recovery), None)
    if at is None or at == 0:
        return False
    turn, last = messages[at], messages[at - 1]
    if not (turn.is_restart_recovery_turn and turn.turn_boundary) or turn.seq is None or last.seq is None:
        return False
    return turn.seq - last.seq == 2 and any(_of(m, run_id) for m in messages[:at])


def ended_in(history: ChatHistory, run_id: str) -> bool:
    """Run ``run_id``'s last stored message ended it (a final answer, an error): it was not running when it was
    last written, so a boot's recovery is not of it."""
    last = next((m for m in reversed(history.messages) if m.assistant_run_id == run_id), None)
    return last is not None and (last.aborted or last.stop_reason in ENDED)


def taken_over_first(history: ChatHistory, run_id: str) -> bool:
    """Another run began after run ``run_id``'s last stored message, before any restart-recovery turn: the session
    went on to that run with nothing continuing ``run_id`` first, so no Gateway cut of ``run_id`` came before it.
    What a "newer run took over" cut-off note needs the transcript not to say (issue 24 item 3, fuzz seeds 80221,
    80211): a run whose end the transcript hides (a final ``NO_REPLY``, hidden by chat.history; an abort right
    after a tool call, which stores no ending message) is not ``ended_in``, yet it ended on its own before the
    later run began.

    Why it holds: a session runs one run at a time, and a Gateway cut leaves a trace before anything runs next on
    the session: a restart, a stop past its drain or a crash leaves the row ``running`` and the boot's recovery turn
    comes before any turn admitted after the boot (measured on 2026.9.6: the admission dispatches the pending
    recovery first); a container stop fails the run, which stores its error record (``ended_in``). A run begins with
    a user turn with an idempotency key (``<id>:user``, or an agent turn's id of its own) that is no recovery's, or
    shows in another run's assistant message; a keyless user turn is an input steered into a running run and is
    passed over. A heartbeat's run counts too (its first message carries the ``turnBoundary`` mark of its hidden
    prompt): its admission may skip a pending recovery's dispatch, but then the recovery still comes after it and
    continues the cut run, so nothing is cut-off there either. False when the page does not hold ``run_id`` or a
    recovery turn comes first (rule E decides whose it is)."""
    return _began_after(history, run_id, heartbeats=True)


def followed(history: ChatHistory, run_id: str) -> bool:
    """Another run began after run ``run_id``'s last stored message and did not end there: a user turn that is no
    restart recovery's, or another run's assistant message, comes after it, of a run whose own last stored message
    does not end it. The boot then recovered that later run, not this one (a session runs one run at a time, and
    the Gateway recovers a run still running). A later run that ended on its own (a final answer, an error: a run
    admitted between the boot and its delayed recovery, which queues behind it) is no such run: the recovery is
    still this one's (issue 24, item 4). False when the page holds nothing of ``run_id``."""
    messages = history.messages
    last = next((i for i in range(len(messages) - 1, -1, -1) if _of(messages[i], run_id)), None)
    if last is None:
        return False
    after = messages[last + 1 :]
    later: list[str | None] = []
    for index, message in enumerate(after):
        if message.role == "user" and not message.is_restart_recovery_turn:
            turn = message.user_run_id
            if turn is None:
                # An agent turn's user turn, keyed by no run: its run is the one whose messages follow it.
                nxt = next((m for m in after[index + 1 :] if m.role == "user" or m.assistant_run_id), None)
                turn = nxt.assistant_run_id if nxt is not None and nxt.role != "user" else None
            later.append(turn)
        owner = message.assistant_run_id
        if owner is not None and owner != run_id and not _recovery_run(history, owner):
            later.append(owner)
    # A turn whose run stored nothing after it (None) may be the one cut, as may a run whose last message did not
    # end it.
    return any(other is None or not ended_in(history, other) for other in later)


def _of(message: object, run_id: str) -> bool:
    return getattr(message, "user_run_id", None) == run_id or getattr(message, "assistant_run_id", None) == run_id


def _recovery_run(history: ChatHistory, run_id: str) -> bool:
    return any(m.user_run_id == run_id and m.is_restart_recovery_turn for m in history.messages)


def before(history: ChatHistory, run_id: str, later: str) -> bool:
    """Run ``run_id`` stored something before ``later``'s user turn (``<later>:user``) on this page."""
    messages = history.messages
    at = next((i for i, m in enumerate(messages) if m.user_run_id == later), None)
    return at is not None and any(_of(m, run_id) for m in messages[:at])


def began_before(history: ChatHistory, run_id: str, other: str) -> bool:
    """Run ``run_id``'s first stored message on this page (its user turn, or its first assistant message when its
    turn is hidden) comes before run ``other``'s first: it began first (a session runs one run at a time). False when
    the page holds nothing of either."""

    def first(run: str) -> int | None:
        return next((i for i, m in enumerate(history.messages) if _of(m, run)), None)

    a, b = first(run_id), first(other)
    return a is not None and b is not None and a < b


def recovery_before(history: ChatHistory, run_id: str) -> str | None:
    """The restart recovery the Gateway ran right before run ``run_id`` began, if the page shows it: the nearest
    restart-recovery turn before ``run_id``'s first message (or its own agent turn, keyed by no run), with nothing
    between but that recovery's own messages. None when anything else lies between (another run's turn or message, a
    steered input, a hidden message shown by a ``seq`` gap or a ``turnBoundary`` mark), or the page lacks either.

    Why it names the boot's recovery of a cut run S, for ``run_id`` a run that began after S was cut (a newer run a
    later boot's row names as the session's last, which the transcript says is no recovery): the Gateway runs a
    boot's recovery of a session before any turn admitted there after the boot (2026.9.6, ``tests/test_realgw_cuts.
    py``), and S was running at the boot (the row left ``running``), so the boot's recovery is S's and comes right
    before ``run_id``. Were the turn found an earlier boot's recovery, S's own turn (or a trace of it) would lie
    between, and the strict "nothing between" gives None. Fuzz seed 41332 (shrunk): the row named the run admitted
    after the boot, not the recovery another process had settled, and M waited for ever."""
    messages = history.messages
    first = next((i for i, m in enumerate(messages) if _of(m, run_id)), None)
    if first is None:
        return None
    start = first
    if messages[first].role != "user" and first > 0:
        turn = messages[first - 1]
        if turn.role == "user" and not turn.is_restart_recovery_turn and turn.user_run_id is None:
            start = first - 1  # its own agent turn (an id of its own)
    between: list[HistoryMessage] = []
    for index in range(start - 1, -1, -1):
        message, after = messages[index], messages[index + 1]
        if after.turn_boundary or (message.seq is not None and after.seq is not None and after.seq - message.seq > 1):
            return None  # a hidden message lies between
        if message.role == "user":
            recovery = message.user_run_id if message.is_restart_recovery_turn else None
            if recovery is None or any(m.assistant_run_id != recovery for m in between if m.role == "assistant"):
                return None
            return recovery
        between.append(message)
    return None


def next_run_began(history: ChatHistory, run_id: str) -> bool:
    """Another run began after run ``run_id``'s last stored message, before any restart-recovery turn: then the
    boot did not recover ``run_id`` before that run, and so never will, and ``run_id`` ended on its own (fuzz seeds
    30151, 77089: an abort after a tool call stores no ending message, so ``ended_in`` cannot tell).

    Why: the Gateway runs a boot's recovery of a session before any turn admitted there after the boot (2026.9.6:
    the admission of a turn on a row the boot marked ``running`` + ``abortedLastRun`` dispatches the pending
    recovery and waits for it, ``get-reply.types-*.mjs``; ``tests/test_realgw_cuts.py``), and a session runs one run
    at a time: the later run either began before the boot, after ``run_id`` had ended, or after the boot, which then
    had nothing of this session to recover.

    A run begins with a user turn that has an idempotency key (``<id>:user``, or an agent turn's id of its own) and
    is no restart recovery's, or shows in another run's assistant message. A user turn with no key is an input
    steered into a running run (it starts none) and is passed over. False when the page does not hold ``run_id``,
    when a recovery turn comes first (rule E decides whose it is), and when the first later message follows a
    hidden heartbeat prompt (``turnBoundary``: a heartbeat may run before a pending recovery, whose dispatch its
    admission skips)."""
    return _began_after(history, run_id, heartbeats=False)


def _began_after(history: ChatHistory, run_id: str, *, heartbeats: bool) -> bool:
    """The walk ``taken_over_first`` and ``next_run_began`` share: the first run begun after ``run_id``'s last
    stored message, before any restart-recovery turn; ``heartbeats``: a heartbeat's run (its first message marked
    ``turnBoundary``) counts too."""
    messages = history.messages
    last = next((i for i in range(len(messages) - 1, -1, -1) if _of(messages[i], run_id)), None)
    if last is None:
        return False
    for message in messages[last + 1 :]:
        if message.role == "user" and message.is_restart_recovery_turn:
            return False
        began = (message.role == "user" and message.idempotency_key is not None) or (
            message.assistant_run_id not in (None, run_id)
        )
        if began:
            return heartbeats or not message.turn_boundary
    return False
