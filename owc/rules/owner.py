"""The owner rule: who continues a run that a Gateway restart, stop, container stop or crash cut (seed 000
section 2.7; issue 14). Pure: the run's persisted session row and what this connection saw in, a decision out.

Exactly one party continues a cut run, into the same message M: the Gateway (its restart recovery, for rows still
``running``), owc (a resume run ``msg-<chat>-<M>-resume-<t>``, for rows the Gateway persisted as cut from outside),
or nobody (a Stop, a real error). There is never a double continuation: owc resumes only rows the Gateway has
persisted as terminal, and the Gateway recovers only rows that are ``running``; a row cannot be both.

The rows (2.7, "The rule"), in the order they are tested:

1. ``lastRunId`` names a newer run: that run decides; M ends (with a cut-off note on an outside kill).
2. the row is still ``running`` (a restart-mode abort, a crash), or neither a row nor a terminal says how the run
   ended: the Gateway owns it (recovery); M stays open for the recovery run (link rule E).
3. the session has an active run (``hasActiveRun``): never resume into a busy session; decide again on that run's
   settle (a follow-up queued behind a recovery fails on the real Gateway: 04351f67).
4. ``failed`` with an outside-kill exit text (``process exited with code 143|137`` or ``signal SIG*``): owc resumes.
5. ``killed`` after a ``shutdown`` notice without ``restartExpectedMs`` on this connection, before R's terminal
   (or before the close, when no terminal came): a Gateway stop, nobody recovers: owc resumes.
6. ``killed`` with no such notice: a Stop; M is finalized with what it has.
7. ``failed`` with any other error: a real error, shown in M (a CLI exit 1 is one: not an outside kill).

A resume is bounded by a count, not a clock: at most ``MAX_RESUMES`` per M (counted on M itself).

The row comes from the settled push after R's terminal, from the first ``sessions.list`` after a reconnect, or,
before either, from R's terminal itself (``row_at_terminal``: what the Gateway persists for that terminal). The
run table applies the rule (``owc/runs/cuts.py``); this module is the rule alone.
"""

from __future__ import annotations

import enum
import re

import attrs

#: Resumes per message, counted on the message (a restart of owc does not reset it).
MAX_RESUMES = 3

#: The exit text of a child killed from outside (the Gateway's CLI transport builds "... process exited with code
#: N"; seed 000 F3: "Claude Code process exited with code 143"). 143 = SIGTERM, 137 = SIGKILL (an OOM kill too).
OUTSIDE_KILL = re.compile(r"process exited with (?:code (?:143|137)\b|signal SIG[A-Z0-9]+)")


class Owner(enum.Enum):
    GATEWAY = "gateway"  # the Gateway recovers it: keep M open, link the recovery run (rule E)
    RESUME = "resume"  # owc sends a resume run into M
    STOP = "stop"  # nobody: finalize M with what it has
    ERROR = "error"  # nobody: a real error, shown in M
    NEWER_RUN = "newer_run"  # a newer run is the session's: M ends, that run decides
    WAIT = "wait"  # the session is busy: decide again on that run's settle
    DONE = "done"  # the run simply finished: nothing to continue


@attrs.frozen
class Row:
    """The run's session row as the Gateway persisted it (a settled ``sessions.changed`` push, or the first
    ``sessions.list`` after a reconnect)."""

    status: str | None
    has_active_run: bool = False
    last_run_id: str | None = None
    last_run_error: str | None = None


@attrs.frozen
class Seen:
    """What this connection saw of the run's cut: whether its terminal reached it, and whether a ``shutdown``
    notice came before that terminal (and if the notice said a restart was expected)."""

    terminal: bool
    notice_before_terminal: bool = False
    restart_expected: bool = False


def outside_kill(error: str | None) -> bool:
    """The run's error is a child killed from outside (SIGTERM from a container stop, SIGKILL, an OOM kill)."""
    return bool(error) and OUTSIDE_KILL.search(error or "") is not None


def owner(run_id: str, row: Row, seen: Seen) -> Owner:
    """Who continues run ``run_id``, from its persisted row and what this connection saw (rows 1-7 above)."""
    if row.last_run_id is not None and row.last_run_id != run_id:
        return Owner.NEWER_RUN
    if row.status == "running" or (row.status is None and not seen.terminal):
        return Owner.GATEWAY
    if row.has_active_run:
        return Owner.WAIT
    if row.status == "failed":
        return Owner.RESUME if outside_kill(row.last_run_error) else Owner.ERROR
    if row.status == "killed":
        if seen.notice_before_terminal and not seen.restart_expected:
            return Owner.RESUME
        return Owner.STOP
    return Owner.DONE


def settled_before_boot(status: str | None, updated_at: int | None, booted_at: int | None) -> bool:
    """A session row that settled (not ``running``) before the Gateway's current boot began, both times on the
    Gateway's clock (``updatedAt``; ``owc.protocol.handshake.boot_started_at``). Its last run is then not that
    boot's restart recovery, which starts after the boot: a row that names a newer run than a carried one says
    the carried run ended before that run, before the boot, on its own (fuzz seed 141731: an announce ran and
    ended while owc was away, and was held for as the recovery of a run that had ended before it). False when a
    time is unknown: the caller then judges as it would without one."""
    if status in ("running", None) or updated_at is None or booted_at is None:
        return False
    return updated_at < booted_at


@attrs.frozen
class Heard:
    """What one process heard of a run from one Gateway: the boot its first event came under, and the numbers of its
    first and last events among all the events of that Gateway the process heard, in the order they came (a count
    kept across connections: the Gateway sends its events in the order it makes them)."""

    boot: str | None
    first: int
    last: int


def ended_before(run: Heard | None, other: Heard | None) -> bool:
    """Run ``run`` had ended by the time another run of its session, ``other``, ran: ``other``'s first event came
    after ``run``'s last one, under the same boot. A run whose terminal never reached owc (it fell in a seq gap, or
    the connection closed first) and that a new boot finds so is then not one the boot cut: the boot cut the run
    running when it came, and ``run`` was not (fuzz seed 151800: a heartbeat's ``NO_REPLY`` final lost in a drop, a
    ``sessions_send`` queued behind it running when a crash came; the owner rule gave both to the Gateway, the later
    cut ended the earlier one's message with "a newer run took over", on a run nothing cut).

    Why it holds: a session runs one run at a time, so each run's events lie between its start and its end, and two
    runs' spans never overlap; ``other`` heard after ``run``'s last event began after ``run`` ended (had it run
    before, every event of it would have come before any of ``run``'s). The same boot, because a run first heard
    under a later boot (its recovery, one the boot admitted) says nothing of how the earlier boot ended ``run``.
    False when either was never heard (opened by a hand-over, a list or a transcript), or no boot id names them."""
    return (
        run is not None
        and other is not None
        and run.boot is not None
        and run.boot == other.boot
        and other.first > run.last
    )


def row_at_terminal(
    state: str | None, stop_reason: str | None, error: str | None, run_id: str, push: Row | None = None
) -> Row:
    """The row the Gateway persists for R's chat terminal, before a push or a list says it: ``aborted`` with
    ``stopReason: "restart"`` stays ``running`` (the restart keeps it for recovery, ``abortedLastRun``), any other
    abort is ``killed``, ``error`` is ``failed`` with the terminal's error, ``final`` is ``done``. A row pushed
    with the terminal (``sessions.changed`` end/error) fills in what it says: its ``lastRunError`` and
    ``lastRunId``; its ``status`` only where the terminal leaves it open (the end push is built with the
    active-run overlay and may still say ``running`` for a run that has ended: F5)."""
    if state == "aborted":
        status: str | None = "running" if stop_reason == "restart" else "killed"
    elif state == "error":
        status = "failed"
    elif state == "final":
        status = "done"
    else:
        status = push.status if push is not None else None
    return Row(
        status=status,
        has_active_run=False,
        last_run_id=(push.last_run_id if push is not None and push.last_run_id else run_id),
        last_run_error=(push.last_run_error if push is not None and push.last_run_error else error),
    )


def continues(decision: Owner) -> bool:
    """The message stays open for a continuation (the Gateway's recovery, owc's resume, or one after the busy
    session's run)."""
    return decision in (Owner.GATEWAY, Owner.RESUME, Owner.WAIT)


#: What a resume run says to the agent (sent as the user turn of ``msg-<chat>-<M>-resume-<t>``).
RESUME_DIRECTIVE = (
    "[owc] Your previous turn was cut off from outside (the Gateway or its runtime was stopped) before it "
    "finished. Continue the interrupted turn where it stopped; do not repeat what you already said or did."
)

#: The notes a message ends with when nobody continues its cut run.
#: How each of them begins (a reader of a stored message tells such an ending by it).
CUT_OFF = "This reply was cut off"
#: How the note of a message finished empty begins (nothing of its run reached its transcript or the process that
#: finished it): a later write that fills the message from the transcript drops it (``tree.update_message``).
NOTHING_SAVED_PREFIX = f"{CUT_OFF} before any of it was saved"
#: The note of a message finished empty for a run that ended on its own (``final``) whose transcript could not be
#: read (and whose stream this process did not hear): nothing cut it, so no cut-off wording; the correction that
#: reads the transcript later fills the message and drops the note.
NOT_READ_NOTE = (
    "This reply could not be read yet: the run ended, but the Gateway did not give owc its transcript."
    " It is filled in once the transcript can be read."
)
#: How the notes of an empty finish begin: a later write that fills the message drops them (``tree.update_message``).
EMPTY_FINISH_NOTES = (NOTHING_SAVED_PREFIX, NOT_READ_NOTE)


#: Why a run ended with nothing saved, in a reader's words, by how owc's ``Terminal.reason`` begins (the reasons are
#: log lines, in protocol terms: "absent from the list (gap)" is no sentence for a chat). First match wins.
EMPTY_CAUSES: tuple[tuple[str, str], ...] = (
    ("the Gateway restarted", "the Gateway restarted"),
    ("absent from the list at hello", "it ended while owc was not connected to the Gateway"),
    ("ended while owc was away", "it ended while owc was not connected to the Gateway"),
    ("absent from the list", "its end was lost on the way from the Gateway"),
    ("it ended before a later run", "a later run of the conversation went on without it"),
    ("chat.send", "the Gateway had already run it"),
)


def empty_cause(state: str | None, reason: str | None) -> str | None:
    """The reader's words for why nothing of a run was saved (``None``: no words better than none)."""
    if reason is None or state == "aborted":
        return "it was stopped"
    return next((words for prefix, words in EMPTY_CAUSES if reason.startswith(prefix)), None)


def empty_finish_note(state: str | None, reason: str | None, transcript_failed: bool) -> str:
    """The note of a message finished with nothing of its run in it. A run that ended on its own (``final``) whose
    transcript could not be read was not cut: it says so, without cut-off wording (the campaign's oracle keeps that
    for a cut, issue 24 item 3; before, "cut off before any of it was saved (chat final)"). Otherwise nothing of the
    run was saved anywhere owc could read (a crash cut it, the writer that streamed it died), with why in a reader's
    words (``empty_cause``), never the protocol's."""
    if state == "final" and transcript_failed:
        return NOT_READ_NOTE
    cause = empty_cause(state, reason)
    return f"{NOTHING_SAVED_PREFIX} ({cause})." if cause else f"{NOTHING_SAVED_PREFIX}."


NEWER_RUN_NOTE = f"{CUT_OFF}: the Gateway stopped under it, and a newer run took over the session."
BUDGET_NOTE = CUT_OFF + ": the Gateway stopped under it {n} times, and owc does not resume it again."
RECOVERY_FAILED_NOTE = CUT_OFF + ": the Gateway stopped under it and could not recover it ({error})."


def may_resume(resumes_so_far: int) -> bool:
    """Another resume into the same message is allowed (the budget is a count, never a clock)."""
    return resumes_so_far < MAX_RESUMES
