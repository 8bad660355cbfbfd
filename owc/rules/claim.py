"""Claim order: may a run claim its message at the chat's tail now, or what does it wait for. Pure.

A chat's messages follow its runs' start order (seed 000 section 2.3: one message per run, at the chat's true
tail). Claims run in worker threads under the row lock, whose waits are not first-come, first-served, so the order is
kept before the claim: a run claims only when no run that began before it is still on its way to a claim of its own,
and no reconcile pass still owes the chat a run that began before it (a run that ended while owc was away). The run
table gathers the facts (``RunTable.claim_turn``, ``Ledger.claim_blocker``); this module says what they mean, so each
combination is one cell of a table (``tests/test_claim_rule.py``).

No clock: every wait ends on an input (a hello's list, a pass's progress, an earlier run's claim or settle).
Nothing waits in a circle: a run first seen on this connection waits for the pass, a carried run never waits for
the whole pass (only for the runs it owes before it), and the pass's later runs wait for it in turn.
"""

from __future__ import annotations

import enum

import attrs


class Turn(enum.Enum):
    """What a run that would claim now does."""

    GO = "go"  # claim now
    AWAIT_HELLO = "await_hello"  # the hello's list (which says what the pass owes) is not in yet
    AWAIT_PASS = "await_pass"  # a reconcile pass owes the chat runs that may have begun before this one
    AWAIT_EARLIER = "await_earlier"  # an earlier run of the chat is still on its way to its claim


@attrs.frozen
class ClaimFacts:
    """What the run table knows of one run that would claim, and of its chat, at one moment."""

    #: The run is in ``CLAIMING`` (else it is past its claim: nothing to hold).
    claiming: bool
    #: A restart recovery waits for this cut run's message, written open for it (``Cuts.awaited``).
    awaited: bool = False
    #: A reconcile pass gave the run its message (it ended while owc was away).
    reconciled: bool = False
    #: The run was carried from an earlier connection (unsettled in the ledger when this one began).
    carried: bool = False
    #: Carried from a connection whose pass was cut short before it was done with the run's chat.
    behind_pass: bool = False
    #: This connection's hello has been handled (its list says what its pass owes).
    hello: bool = True
    #: This connection's pass is still due in the run's chat (``RunTable.reconcile_pending``).
    pass_due: bool = False
    #: The run has a place of its own: placed by the transcript (``Standing.rank == 0``) or by a Gateway time of its own
    #: (``Standing.timed``); else it stands at a stand-in time.
    placed: bool = False
    #: No run the pass still owes the chat began before this one (``RunTable._before_next_owed``).
    before_owed: bool = True
    #: An earlier run of the chat still holds claims up (``Ledger.claim_blocker``).
    earlier: bool = False


def claim_turn(facts: ClaimFacts) -> Turn:
    """May the run claim now (``Turn.GO``), or what it waits for. Why each cell holds:

    * past ``CLAIMING``: nothing to order.
    * awaited by a recovery: it goes first, whatever a pass still owes the chat (the recovery waits for this
      message, and the pass waits for the recovery: fuzz seeds 81, 161), after any earlier claiming run.
    * first seen on this connection: it waits for the hello's list, then, where the pass is due, until the pass
      has placed it and owes nothing earlier (fuzz seed 5648); a run with no place of its own (a stand-in time)
      waits for the pass to be done with the chat. A placed run goes once the pass has nothing earlier to give
      (fuzz seed 333762: holding a silent, unplaced-by-transcript run for the whole pass made a circle).
    * carried behind an earlier pass cut short: the runs that pass owed may have begun before it, so it waits
      until this connection's pass has no earlier run left there, never for the whole pass.
    * else (reconciled, or carried and not behind a pass): only earlier claiming runs hold it.
    """
    if not facts.claiming:
        return Turn.GO
    if facts.awaited:
        return Turn.AWAIT_EARLIER if facts.earlier else Turn.GO
    if not facts.reconciled and not facts.carried:
        if not facts.hello:
            return Turn.AWAIT_HELLO
        if facts.pass_due and not (facts.placed and facts.before_owed):
            return Turn.AWAIT_PASS
    elif not facts.reconciled and facts.behind_pass:
        if not facts.hello:
            return Turn.AWAIT_HELLO
        if not facts.before_owed:
            return Turn.AWAIT_PASS
    return Turn.AWAIT_EARLIER if facts.earlier else Turn.GO


@attrs.frozen
class Claimer:
    """One run of a chat as claim order sees it: another run that may hold ``run``'s claim up."""

    #: Its place in the chat's run-start order (``Run.place``).
    place: tuple[int, int, int]
    reconciled: bool = False
    #: Carried from an earlier connection (``RunTable.carried``).
    carried: bool = False
    #: Placed by a pass's reading of the transcript (``Standing.rank == 0``).
    by_transcript: bool = False
    #: In a state on the way to a claim (``CLAIMING``, ``CHECKING``) with a live writer.
    on_its_way: bool = True
    #: Its transcript check waits for a read that failed to be answered (the next tick).
    check_waits: bool = False
    #: Waiting, before its claim, for the message of the cut run it continues (``Cuts.link``).
    linking: bool = False
    #: Its session key (one session runs one run at a time).
    session_key: str = ""
    #: Not ended as far as this process knows, and no message claimed yet (``OPEN``): it may still claim one.
    running: bool = False


def holds_up(other: Claimer, run: Claimer) -> bool:
    """``other`` claims before ``run`` (``Ledger.claim_blocker``). Only a run with a live writer on its way to a
    claim holds anyone up (one without waits for a connection, and holds nobody). A run whose check waits for the
    next tick, or which waits for a cut run's message (it waits on that run), holds nobody up either: either could
    wait on ``run`` in turn. A reconciled run ended before any run first seen on this connection began, so only
    another reconciled run, a carried one, or one the pass placed by the transcript can come before it.

    A run of the same session that began before ``run`` and has not ended here, with no message yet, holds it up
    too: a session runs one run at a time, so that run has ended and its end is on its way (reordered by the
    Gateway's debounce, or lost in a gap, whose list then ends it): once it has, it claims (or shows nothing) in
    its place. Before, ``run`` claimed first, and the earlier run's message went after it (fuzz seed 375143: a
    heartbeat's end lost in a drop, a cron run after it claimed, and a crash left no transcript to put the two
    back in order)."""
    if other.running and other.session_key == run.session_key and other.place < run.place:
        return True
    if not other.on_its_way or other.check_waits or other.linking or not other.place < run.place:
        return False
    return not run.reconciled or other.reconciled or other.carried or other.by_transcript
