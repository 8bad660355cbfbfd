"""The owner rule: who continues a run that a Gateway restart, stop, container stop or crash cut (seed 000
section 2.7; issue 14). Pure: the run's persisted session row and what this connection saw in, a decision out.

Exactly one party continues a cut run, into the same message M: the Gateway (its restart recovery, for rows still
``running``), owc (a resume run ``msg-<chat>-<M>-resume-<t>``, for rows the Gateway persisted as cut from outside),
or nobody (a Stop, a real error). There is never a double continuation: owc resumes only rows the Gateway has
persisted as terminal, and the Gateway recovers only rows that are ``running``; a row cannot be both.

The rows (2.7, "The rule"), in the order they are tested:

1. ``lastRunId`` names a newer run: that run decides; M ends (with a cut-off note on an outside kill).
2. no terminal reached this connection, or the row is still ``running``: the Gateway owns it (recovery); M stays
   open for the recovery run (link rule E).
3. the session has an active run (``hasActiveRun``): never resume into a busy session; decide again on that run's
   settle (a follow-up queued behind a recovery fails on the real Gateway: 04351f67).
4. ``failed`` with an outside-kill exit text (``process exited with code 143|137`` or ``signal SIG*``): owc resumes.
5. ``killed`` after a ``shutdown`` notice without ``restartExpectedMs`` on this connection, before R's terminal
   (a Gateway stop: nobody recovers): owc resumes.
6. ``killed`` with no such notice: a Stop; M is finalized with what it has.
7. ``failed`` with any other error: a real error, shown in M (a CLI exit 1 is one: not an outside kill).

A resume is bounded by a count, not a clock: at most ``MAX_RESUMES`` per M (counted on M itself).

Not wired yet: the run table applies it in issue 14's next step; this module and its tests are the rule alone.
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
    if not seen.terminal or row.status == "running":
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


def may_resume(resumes_so_far: int) -> bool:
    """Another resume into the same message is allowed (the budget is a count, never a clock)."""
    return resumes_so_far < MAX_RESUMES
