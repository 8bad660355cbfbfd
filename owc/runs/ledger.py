"""The run ledger: every run this process has heard of on one Gateway and not yet settled, across connections.

A connection's run table dies with its socket; the ledger does not. It holds each unsettled run (lifecycle,
renderer, message id) by (session key, run id), so on the next connection's hello every run is accounted for
(NOTES.md, "Ledger"):

* a run the hello's list still shows active is adopted: its writer takes its message back and streams on;
* a run the list no longer shows ended during the drop: it is finalized from the transcript (seed case 6), or,
  if it never showed anything here, its transcript is read to see whether it showed something meanwhile;
* a run that had ended but was not finished when the connection closed is finished now, from the transcript.

Settled runs leave the ledger; their keys are remembered (bounded) so a late event does not open them again.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterator

from owc import ids
from owc.render import TurnRenderer
from owc.rules.claim import Claimer, holds_up
from owc.rules.lifecycle import State
from owc.rules.owner import Heard
from owc.runs.run import Run, RunKey

log = logging.getLogger("owc.runs")

#: How many settled runs' keys are remembered (a late event of a forgotten one reopens it: its claim then finds
#: the message finished and backs off, so forgetting costs a read, never a second message).
SETTLED_MEMORY = 10_000

#: The lifecycle states in which a run holds later claims of its chat up (``Ledger.claim_blocker``).
_HOLDS_CLAIMS = frozenset({State.CLAIMING, State.CHECKING})


class Ledger:
    def __init__(self, *, strict: bool = False) -> None:
        self.runs: dict[RunKey, Run] = {}
        #: Per chat, its runs whose lifecycle is CLAIMING or CHECKING, or OPEN and not ended (``moved``): the only
        #: ones that can hold a claim up, so ``claim_blocker`` looks at these, not at every run (it is asked by every
        #: waiting claim at every wake: scanning all runs made 1,000 runs starting together on one chat take minutes
        #: to claim).
        self._claiming: dict[str, dict[RunKey, Run]] = {}
        #: The runs whose message the database would not take (lifecycle ``UNSAVED``), kept by ``moved``: what a
        #: write that went through, a terminal or a tick retries (``unsaved``). Before, each of those scanned every
        #: unsettled run: 10,000 runs ending together made 30,000 scans of 10,000 runs (issue 32, goal 5: minutes
        #: of CPU in the finalize burst).
        self._unsaved: dict[RunKey, Run] = {}
        #: Settled runs, each with the number of its first event heard here (``heard``), or None.
        self._settled: OrderedDict[RunKey, int | None] = OrderedDict()
        #: Raise an illegal lifecycle input instead of logging it (tests).
        self.strict = strict
        #: Illegal lifecycle inputs seen (bugs): logged, and kept here so a test can fail on them.
        self.illegal: list[str] = []
        self._opened = 0
        #: The newest Gateway time seen (``saw_time``, and any run's first time): the stand-in for a run first
        #: known without one.
        self._latest_ms = 0
        #: The Gateway's events of a run heard so far, on every connection (``heard``).
        self._events = 0

    def __iter__(self) -> Iterator[Run]:
        return iter(list(self.runs.values()))

    def __len__(self) -> int:
        return len(self.runs)

    def get(self, session_key: str, run_id: str) -> Run | None:
        return self.runs.get((session_key, run_id))

    def is_settled(self, session_key: str, run_id: str) -> bool:
        return (session_key, run_id) in self._settled

    def heard_before(self, session_key: str, earlier: str, later: str) -> bool:
        """This process heard run ``earlier``'s first event before run ``later``'s, both of one session: it began
        first (a session runs one run at a time). False when either was never heard here (opened by a hand-over,
        a list, a transcript), open or settled."""

        def first(run_id: str) -> int | None:
            key = (session_key, run_id)
            run = self.runs.get(key)
            if run is not None:
                return run.standing.heard_at.first if run.standing.heard_at is not None else None
            return self._settled.get(key)

        a, b = first(earlier), first(later)
        return a is not None and b is not None and a < b

    def saw_time(self, ms: int | None) -> None:
        """A Gateway time seen on any connection (an event's ``ts``, a tick, a listed row's ``updatedAt``): a run
        first known without a time of its own (a ``chat`` event carries none) began no earlier than the runs
        that ended before it was known, so it is placed at the newest such time (before, a fresh process
        placed it at 0, before runs its hello's pass found: fuzzer, ``order-failover``)."""
        if ms is not None and ms > self._latest_ms:
            self._latest_ms = ms

    def open(self, session_key: str, run_id: str, *, seen_ms: int | None = None) -> Run | None:
        """The run, opened if it belongs to an Open WebUI chat and may have a message (not an action's run,
        not settled already). ``seen_ms``: the Gateway time of the earliest thing known of the run (its first
        event's ``ts``, its first transcript message's timestamp), which places it in its chat's run order."""
        key = (session_key, run_id)
        run = self.runs.get(key)
        if run is not None:
            return run
        if key in self._settled:
            return None
        ref = ids.parse_session_key(session_key)
        message_id = ids.message_id(session_key, run_id) if ref is not None else None
        if ref is None or message_id is None:
            return None
        run = self.runs[key] = Run(session_key, run_id, ref, message_id, TurnRenderer(run_id, session_key))
        if seen_ms is not None:
            self._latest_ms = max(self._latest_ms, seen_ms)
        self._opened += 1
        run.standing.order = (seen_ms if seen_ms is not None else self._latest_ms, self._opened)
        run.standing.number = self._opened
        run.standing.timed = seen_ms is not None
        self.moved(run)  # OPEN and not ended: it may hold a later run's claim up (``owc.rules.claim.holds_up``)
        log.debug("runs.opened run=%s chat=%s message=%s", run_id, ref.chat_id, message_id)
        return run

    def heard(self, run: Run, boot: str | None) -> None:
        """An event of ``run``'s own came from the Gateway (under ``boot``): it ran then, after every run of its
        session whose events all came before (``owc.rules.owner.ended_before``)."""
        self._events += 1
        at = run.standing.heard_at
        # Made anew, not ``attrs.evolve``d: this runs for every streamed event (issue 16's throughput).
        run.standing.heard_at = (
            Heard(boot, self._events, self._events) if at is None else Heard(at.boot, at.first, self._events)
        )

    @property
    def opened(self) -> int:
        """How many runs were opened so far (a run's ``order[1]`` is its number)."""
        return self._opened

    def running_on(self, session_key: str) -> bool:
        """A run of the session has not ended yet (as far as this process knows)."""
        return any(run.session_key == session_key and not run.life.ended for run in self.runs.values())

    def retire(self, run: Run) -> None:
        """The run is settled: drop its renderer (its text and tool results can be large), keep its key."""
        if self.runs.get(run.key) is run:
            del self.runs[run.key]
        self._drop_claiming(run)
        self._unsaved.pop(run.key, None)
        self._settled[run.key] = run.standing.heard_at.first if run.standing.heard_at is not None else None
        while len(self._settled) > SETTLED_MEMORY:
            self._settled.popitem(last=False)

    def moved(self, run: Run) -> None:
        """``run``'s lifecycle state may have changed (the run table calls this after every input it feeds, and
        only its inputs change a lifecycle)."""
        mine = self.runs.get(run.key) is run
        if (run.life.state in _HOLDS_CLAIMS or _may_claim_later(run)) and mine:
            self._claiming.setdefault(run.ref.chat_id, {})[run.key] = run
        else:
            self._drop_claiming(run)
        if run.life.state is State.UNSAVED and mine:
            self._unsaved[run.key] = run
        else:
            self._unsaved.pop(run.key, None)

    def unsaved(self) -> list[Run]:
        """The unsettled runs whose message the database would not take (``State.UNSAVED``), in the order they
        were opened (the order a scan of every run gave them)."""
        return sorted(self._unsaved.values(), key=lambda run: run.standing.number)

    def _drop_claiming(self, run: Run) -> None:
        chat = self._claiming.get(run.ref.chat_id)
        if chat is not None and chat.pop(run.key, None) is not None and not chat:
            del self._claiming[run.ref.chat_id]

    def unsettled(self) -> list[Run]:
        return list(self.runs.values())

    def claim_blocker(self, run: Run, carried: frozenset[RunKey] | set[RunKey] = frozenset()) -> Run | None:
        """An earlier run of the same chat whose claim (or the transcript check that may lead to one) is still
        under way: ``run`` claims after it, so the chain follows run-start order, not the database lock's luck
        (claims run in worker threads, and SQLite's busy wait is not first-come, first-served). Which run holds
        which up is the rule's (``owc.rules.claim.holds_up``); this gathers the chat's claiming runs."""
        me = _claimer(run, carried)
        for other in self._claiming.get(run.ref.chat_id, {}).values():
            if other is not run and holds_up(_claimer(other, carried), me):
                return other
        return None


def _claimer(run: Run, carried: frozenset[RunKey] | set[RunKey]) -> Claimer:
    """``run`` as claim order sees it (``owc.rules.claim``)."""
    return Claimer(
        place=run.place,
        reconciled=run.standing.reconciled,
        carried=run.key in carried,
        by_transcript=run.standing.rank == 0,
        on_its_way=run.life.state in _HOLDS_CLAIMS and run.writer_live,
        check_waits=run.read.check_waits,
        linking=run.cont.linking,
        session_key=run.session_key,
        running=_may_claim_later(run),
    )


def _may_claim_later(run: Run) -> bool:
    """``run`` has not ended here and holds no message yet: it may still claim one (``owc.rules.claim``)."""
    return run.life.state is State.OPEN and not run.life.ended
