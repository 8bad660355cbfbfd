"""The run table of one connection session, and the bridge that gives every session its table.

``RunTable`` is keyed by (session key, run id). An entry is opened for a run on an Open WebUI chat's key on
the Gateway's start signal (``sessions.changed`` phase start), on a resync that lists it, or on the first
event that names it (a run whose start push was lost or reordered by the Gateway's debounce, and runs of
sessions the list reports active without ids). Runs on other keys, heartbeat runs and ``owui-action-`` runs
never get a message. Each entry holds its renderer and who writes its message: ``writer`` (a task of this
connection), ``inline`` (a live Pipe request, later issues), or ``none``.

A run's writer starts on its first showable item and its streaming phase ends only on the run's own end:
its chat terminal, ``sessions.changed`` end/error, or its absence from the list after a resync.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import attrs
import trio

from owc import ids
from owc.emit import Emitter
from owc.gateway import CloseInfo, GatewaySession, HelloInfo, Resync
from owc.protocol import AgentEvent, ChatEvent, Event, SessionsChanged
from owc.registry import WRITERS, WriterRegistry
from owc.render import TurnRenderer
from owc.runs.writer import RunWriter
from owc.store import TrioChatStore

log = logging.getLogger("owc.runs")


@attrs.define(eq=False)
class RunEntry:
    session_key: str
    run_id: str
    ref: ids.SessionRef
    message_id: str
    renderer: TurnRenderer
    owner: str = "writer"  # writer | standby (another connection writes; look again at the end) | inline | none
    ended: bool = False
    end_reason: str = ""
    stop_requested: bool = False
    writer_done: bool = False
    writer: Any = None  # the RunWriter writing this message, if any
    stream_scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    _changed: trio.Event = attrs.field(factory=trio.Event)

    @property
    def writer_started(self) -> bool:
        return self.writer is not None

    def poke(self) -> None:
        self._changed.set()

    async def wait_changed(self) -> None:
        await self._changed.wait()
        self._changed = trio.Event()

    def end(self, reason: str) -> None:
        """The run is over (or its writer must stop streaming): the writer goes on to finalize."""
        if not self.ended:
            self.ended, self.end_reason = True, reason
            self.stream_scope.cancel()
            self.poke()

    def request_stop(self) -> None:
        """The user pressed Stop: abort the run at the Gateway, then finalize with what there is."""
        self.stop_requested = True
        self.end("stop")


@attrs.define
class Stats:
    """Counts kept across a bridge's sessions."""

    claims: int = 0
    finalized: int = 0


class RunTable:
    """One per connection session (its writers live in that session's nursery)."""

    def __init__(
        self,
        session: GatewaySession,
        store: TrioChatStore,
        emitter: Emitter,
        registry: WriterRegistry,
        on_change: Callable[[], None] | None = None,
        stats: Stats | None = None,
    ) -> None:
        self.session = session
        self._on_change = on_change
        self.stats = stats or Stats()
        self.store = store
        self.emitter = emitter
        self.registry = registry
        self.writer_id = registry.writer_id(session.id)
        self.entries: dict[tuple[str, str], RunEntry] = {}
        #: Runs whose message is finished: their renderer is dropped (its text and tool results can be large);
        #: the key stays so a late event of the run does not open it again.
        self.finished: set[tuple[str, str]] = set()
        self._changed = trio.Event()

    def changed(self) -> None:
        self._changed.set()
        self._changed = trio.Event()
        if self._on_change is not None:
            self._on_change()

    async def wait_changed(self) -> None:
        await self._changed.wait()

    # ------------------------------------------------------------------ entries

    def entry(self, session_key: str, run_id: str) -> RunEntry | None:
        """The entry of a run, opened if the run belongs to an Open WebUI chat and may have a message."""
        key = (session_key, run_id)
        existing = self.entries.get(key)
        if existing is not None:
            return existing
        if key in self.finished:
            return None
        ref = ids.parse_session_key(session_key)
        message_id = ids.message_id(session_key, run_id) if ref is not None else None
        if ref is None or message_id is None:
            return None
        entry = self.entries[key] = RunEntry(session_key, run_id, ref, message_id, TurnRenderer(run_id, session_key))
        log.debug("runs.opened run=%s chat=%s message=%s", run_id, ref.chat_id, message_id)
        return entry

    def dispatch(self, event: Event) -> None:
        if isinstance(event, SessionsChanged):
            if event.session_key is None or event.run_id is None or not event.is_lifecycle:
                return  # reason pushes and rows never end a run: only the run's own terminal does
            entry = self.entry(event.session_key, event.effective_run_id or event.run_id)
            if entry is not None and event.phase in ("end", "error"):
                entry.end(f"sessions.changed {event.phase}")
                self._standby_check(entry)
                self.retire_if_idle(entry)
            return
        if isinstance(event, (ChatEvent, AgentEvent)):
            if event.session_key is None:
                return
            entry = self.entry(event.session_key, event.run_id)
            if entry is None or entry.writer_done:
                return
            entry.renderer.feed(event)
            if isinstance(event, ChatEvent) and event.is_terminal:
                entry.end(f"chat {event.state}")
            self._standby_check(entry)
            self.maybe_start(entry)
            entry.poke()
            self.retire_if_idle(entry)

    def retire(self, entry: RunEntry) -> None:
        """Forget a run whose writer has finished it."""
        key = (entry.session_key, entry.run_id)
        if self.entries.get(key) is entry:
            del self.entries[key]
            self.finished.add(key)

    def retire_if_idle(self, entry: RunEntry) -> None:
        """Forget a run that has ended with no writer on it (a heartbeat, a sentinel-only run, one another
        live connection writes): its renderer would otherwise live as long as the connection."""
        if entry.ended and entry.writer is None:
            self.retire(entry)

    def _standby_check(self, entry: RunEntry) -> None:
        """At the run's end, a standby connection looks once more: if the writing connection died, it
        adopts the message and finalizes it; if that one is alive, it leaves the message to it."""
        if entry.ended and entry.owner == "standby" and entry.writer is None:
            entry.owner = "writer"
            self.maybe_start(entry, adopt=True)

    def maybe_start(self, entry: RunEntry, *, adopt: bool = False) -> None:
        """Start the run's writer on its first showable item, or (``adopt``) at once to take over a message
        an earlier connection was writing."""
        if entry.writer_started or entry.owner != "writer" or not (adopt or entry.renderer.showable):
            return
        entry.writer = RunWriter(self, entry, adopt=adopt and not entry.renderer.showable)
        self.session.nursery.start_soon(entry.writer.run, name=f"owc.writer:{entry.run_id}")
        self.changed()

    def resync(self, resync: Resync) -> None:
        for key, run_id in resync.started:
            known = (key, run_id) in self.entries
            entry = self.entry(key, run_id)
            if entry is not None:
                if not known:  # joined mid-run: the run's earlier events never reached this renderer
                    entry.renderer.mark_gap(f"joined mid-run ({resync.reason})")
                self.maybe_start(entry, adopt=True)
        for key, run_id in resync.ended:
            entry = self.entries.get((key, run_id))
            if entry is not None:
                entry.end(f"resync ({resync.reason}): no longer active")
                self.retire_if_idle(entry)
        if resync.reason == "gap":
            for entry in self.entries.values():
                if not entry.ended:
                    entry.renderer.mark_gap("seq gap")

    def stop(self, chat_id: str) -> int:
        """Stop every run this connection writes into ``chat_id``; returns how many."""
        stopped = 0
        for entry in self.entries.values():
            if entry.ref.chat_id == chat_id and entry.writer_started and not entry.ended:
                entry.request_stop()
                stopped += 1
        return stopped

    def open_writers(self) -> int:
        return sum(1 for e in self.entries.values() if e.writer_started and not e.writer_done)


class Bridge:
    """The ``ConnectionHandler`` that runs owc: a ``RunTable`` per session, writers in the session nursery."""

    def __init__(self, store: TrioChatStore, emitter: Emitter, registry: WriterRegistry = WRITERS) -> None:
        self.store = store
        self.emitter = emitter
        self.registry = registry
        self.tables: dict[str, RunTable] = {}
        self.stats = Stats()
        self._registrations: dict[str, Any] = {}
        self._changed = trio.Event()

    @property
    def table(self) -> RunTable | None:
        """The live session's table (the newest)."""
        return next(reversed(self.tables.values()), None) if self.tables else None

    def _table_of(self, session: GatewaySession) -> RunTable:
        table = self.tables.get(session.id)
        if table is None:
            table = self.tables[session.id] = RunTable(session, self.store, self.emitter, self.registry, self._wake, self.stats)
        return table

    def _register(self, session: GatewaySession) -> None:
        """The session's writer id is alive while the session is: its messages are not taken over."""
        if session.id not in self._registrations:
            registration = self.registry.registered(self.registry.writer_id(session.id))
            registration.__enter__()
            self._registrations[session.id] = registration

    def on_event(self, session: GatewaySession, event: Event) -> None:
        self._register(session)  # events may precede on_hello (the reader runs before the subscribe returns)
        self._table_of(session).dispatch(event)

    async def on_hello(self, session: GatewaySession, info: HelloInfo) -> None:
        self._register(session)
        self._table_of(session)
        self._wake()

    async def on_resync(self, session: GatewaySession, resync: Resync) -> None:
        self._table_of(session).resync(resync)
        self._wake()

    async def on_closed(self, info: CloseInfo) -> None:
        """Forget every closed session (also one that closed before its hello completed)."""
        for session_id, table in list(self.tables.items()):
            if table.session.closed:
                del self.tables[session_id]
        for session_id in [s for s in self._registrations if s not in self.tables]:
            self._registrations.pop(session_id).__exit__(None, None, None)
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Wait, without a clock, until ``predicate`` holds; re-checked whenever a table or session changes."""
        while not predicate():
            await self._changed.wait()

    def open_writers(self) -> int:
        return sum(t.open_writers() for t in self.tables.values())

    def totals(self) -> tuple[int, int]:
        """(messages claimed or taken over, messages finalized) over every session so far."""
        return self.stats.claims, self.stats.finalized
