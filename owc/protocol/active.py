"""Which runs a connection believes active, and what a ``sessions.list`` resync changes about that. Pure.

After a seq gap or a reconnect, events may have been lost: a run may have started (its start push dropped)
or ended (its terminal dropped). The list is the Gateway's own answer: ``activeRunIds`` per session, or
``hasActiveRun`` without ids (a CLI runtime), in which case the run is opened on its first event.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from owc.protocol.events import CHAT_TERMINAL_STATES, AgentEvent, ChatEvent, Event, SessionsChanged
from owc.protocol.results import SessionRow

RunKey = tuple[str, str]  # (session_key, run_id)

#: How many finished runs a connection remembers at most (oldest forgotten first). A list that no longer shows a
#: finished run forgets it sooner; the cap bounds a connection that never lists (no gap, no reconnect) for days.
FINISHED_CAP = 10_000


@attrs.frozen
class Resync:
    """What a ``sessions.list`` says that the connection did not know.

    ``started``: listed active, not known; ``ended``: known active, no longer listed; ``active_unknown``:
    sessions with an active run whose id the list does not give; ``rows``: every listed row, for the owner
    rule and the ended-while-away pass.
    """

    reason: str
    started: tuple[RunKey, ...]
    ended: tuple[RunKey, ...]
    active_unknown: tuple[str, ...]
    rows: tuple[SessionRow, ...]


@attrs.define
class ActiveRuns:
    #: run -> the frame position at which the connection learned it started (insertion-ordered)
    known: dict[RunKey, int] = attrs.field(factory=dict)
    #: runs heard of only by their events (no start push): a list that does not show them ends them too
    heard: dict[RunKey, int] = attrs.field(factory=dict)
    #: runs whose end this connection saw -> the frame position of that end (oldest first): their late events do
    #: not make them heard again, and a list built before the Gateway's row caught up with the end does not start
    #: them again. Forgotten once a later list no longer shows them, and past ``FINISHED_CAP`` (oldest first), so
    #: it is bounded by what is running, not by the connection's age (issue 16: it used to grow for good).
    finished: dict[RunKey, int] = attrs.field(factory=dict)

    def observe(self, event: Event, position: int = 0) -> None:
        """Track the start signal (``sessions.changed`` phase start, the Gateway's own) and terminals. A run's
        other events make it known as well (at their position), so a list that no longer shows it ends it."""
        kind = type(event)
        if kind is AgentEvent or (kind is ChatEvent and event.state not in CHAT_TERMINAL_STATES):
            # A run's ordinary event (nearly every frame: tested first, by ``type``). A run heard of by its events
            # only (its start push lost, or a run the Gateway never listed): a later list that does not show it ends
            # it (before, such a run stayed open for good). A run whose end was seen is not heard again by its late
            # events (a lifecycle end after the chat final).
            if event.session_key and event.run_id:
                key = (event.session_key, event.run_id)
                if key not in self.known and key not in self.finished:
                    self.heard.setdefault(key, position)
        elif kind is ChatEvent:  # a terminal
            self._finish((event.session_key, event.run_id), position)
        elif isinstance(event, SessionsChanged) and event.session_key and event.run_id:
            key = (event.session_key, event.effective_run_id or event.run_id)
            if event.phase == "start":
                self.known.setdefault(key, position)
                self.heard.pop(key, None)
                self.finished.pop(key, None)  # the Gateway's own start signal outweighs what was seen before
            elif event.phase in ("end", "error"):
                self._finish(key, position)

    def _finish(self, key: RunKey, position: int) -> None:
        self.known.pop(key, None)
        self.heard.pop(key, None)
        finished = self.finished
        finished.pop(key, None)
        finished[key] = position  # newest last
        if len(finished) > FINISHED_CAP:
            del finished[next(iter(finished))]

    def resync(
        self,
        rows: Iterable[SessionRow],
        reason: str,
        *,
        complete: bool = True,
        position: int | None = None,
        unreadable_keys: Iterable[str] = (),
    ) -> Resync:
        """Diff the list against what is known and adopt the list's view.

        ``complete`` says the list covers every session; a run on a session absent from an incomplete
        (paged) list is not reported ended. ``position`` is where the list's response sat in the frame
        stream: a run learned after it started after the list was built, so its absence means nothing.
        ``unreadable_keys``: sessions whose rows could not be read: their runs are neither listed nor ended.
        """
        rows = tuple(rows)
        unreadable = frozenset(unreadable_keys)  # sessions whose row could not be read: nothing is known of them
        listed: dict[RunKey, None] = {}
        unknown: list[str] = []
        by_key = {row.key: row for row in rows}
        for row in rows:
            if row.active_run_ids:
                for run_id in row.active_run_ids:
                    listed[(row.key, run_id)] = None
            elif row.has_active_run:
                unknown.append(row.key)
        started = tuple(k for k in listed if k not in self.known and k not in self.finished)
        ended = []
        for key, learned_at in [*self.known.items(), *self.heard.items()]:
            row = by_key.get(key[0])
            if key in listed:
                self.heard.pop(key, None)
                continue
            if position is not None and learned_at > position:
                continue
            if row is None and (not complete or key[0] in unreadable):
                continue
            if row is not None and row.has_active_run and row.active_run_ids is None:
                continue  # active without ids: cannot tell, keep it
            ended.append(key)
            self.known.pop(key, None)
            self.heard.pop(key, None)
        for key in started:
            self.known[key] = position or 0
        for key, ended_at in list(self.finished.items()):
            if key in listed or (position is not None and ended_at > position):
                continue  # still shown (the row lags the end), or the list was built before the end
            row = by_key.get(key[0])
            if row is None and (not complete or key[0] in unreadable):
                continue  # the list says nothing about its session
            if row is not None and row.has_active_run and row.active_run_ids is None:
                continue  # active without ids: cannot tell
            del self.finished[key]  # the Gateway's list agrees it is over: nothing more to guard against
        return Resync(reason=reason, started=started, ended=tuple(ended), active_unknown=tuple(unknown), rows=rows)

    def carry(self, keys: Iterable[RunKey]) -> None:
        """Runs an earlier connection knew active: the hello's list says whether they still are (a carried run
        the list no longer shows is reported ended)."""
        for key in keys:
            self.known.setdefault(key, 0)
