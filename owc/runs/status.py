"""The status desk (issue 29): a chat's session as the status view shows it, read through owc's one connection,
kept live by the Gateway's own events, and its Compact.

Reads (each on its own, side by side, bounded by the transport's RPC timeout; a failed read is that part's ``None``,
never a stale value): ``sessions.describe`` (context, model, goal), ``usage.status`` (rate limits), ``tasks.list
{sessionKey, status: running|queued}`` (the chat's sub-agents). A sub-agent's drawer: ``tasks.get`` (only a task of
this chat: its ``sessionKey`` must be the chat's key), the child session's ``sessions.describe`` and ``chat.history``.

Live, without a poll timer (measured on 2026.9.6, ``docs/measured/status-subagents-2026.9.6.md``): every change of a
task comes as a ``task`` event; a sub-agent's tools come as ``session.tool`` on its own key to every subscribed
connection (owc's is), its text as ``agent``/``chat`` events, its row as ``sessions.changed``; a compaction ends with
``session.operation phase:"end"`` and ``sessions.changed reason:"compact"``. The desk maps each to the chat it is
about (a child key to its parent through the tasks it has seen) and pokes that chat's watchers (an open status view,
an open drawer); a watcher reads again once per poke, so a burst of events costs one read, not one per event.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from owc import ids
from owc.gateway.errors import GatewayError, NotConnected, RequestError, SessionClosed
from owc.protocol import AgentEvent, ChatEvent, SessionsChanged, parse_chat_history
from owc.protocol.errors import ProtocolError
from owc.protocol.events import OtherEvent
from owc.protocol.tasks import LIVE, Task, is_subagent_key, parse_task, parse_task_event, parse_tasks
from owc.render import status_view, subagents

log = logging.getLogger("owc.runs")

Request = Callable[[str, dict[str, Any]], Awaitable[Any]]

#: The drawer's transcript read: the newest messages of the child session, bounded like the writer's reads.
DRAWER_HISTORY = {"limit": 100, "maxChars": 4000}
#: Children remembered per chat (a count, not a timer: the oldest entries go first).
MAX_CHILDREN = 512


@attrs.frozen
class CompactOutcome:
    """What a Compact did: ``ok``; ``line`` for the person; ``code`` the HTTP status the route answers with."""

    ok: bool
    line: str
    code: int = 200
    before: int | None = None
    after: int | None = None


#: The lines a Compact may get (the Gateway's refusals in a reader's words).
BUSY_LINE = "A reply is in progress: wait for it to finish before compacting."
NO_ADMIN_LINE = (
    "The Gateway refuses owc's connection the compaction: it needs the operator.admin scope"
    " (approve owc's device with it, or use the Gateway's token)."
)
NOT_CONNECTED_LINE = "owc is not connected to the Gateway right now: try again once it is."
NO_SESSION_LINE = "This chat has no session on the Gateway yet: nothing to compact."
NOTHING_LINE = "There is nothing to compact in this chat yet."
#: The Gateway's reasons for a compaction it did not do (measured and read: ``sessions-compact-*.mjs``).
NOT_COMPACTED = {
    "no sessionId": NO_SESSION_LINE,
    "Already compacted": "This chat was just compacted: there is nothing more to compact.",
    "Nothing to compact (session too small)": "This chat is still too short to compact.",
}


class Watcher:
    """One open view's wait: ``changed()`` returns after the next poke (or at once if one came since the last)."""

    def __init__(self) -> None:
        self._poked = False
        self._event = trio.Event()

    def poke(self) -> None:
        self._poked = True
        self._event.set()

    async def changed(self) -> None:
        if not self._poked:
            await self._event.wait()
        self._poked = False
        self._event = trio.Event()


@attrs.define
class StatusDesk:
    #: The runtime's ``GatewayClient.request`` (the current connection), set at assembly.
    request: Request | None = None
    #: Where the chat's current message gets its sub-agents' lines (set at assembly; none: no lines).
    store: Any = None
    emitter: Any = None
    #: The lines owed, in order: (chat key, entry); the pump writes them (``run``).
    _lines: list[tuple[str, dict[str, Any]]] = attrs.field(factory=list)
    #: The lines this process has queued (their marks; bounded, oldest out): a repeated event queues nothing.
    _queued: dict[str, None] = attrs.field(factory=dict)
    _wake: trio.Event = attrs.field(factory=trio.Event)
    _watchers: dict[str, set[Watcher]] = attrs.field(factory=dict)
    #: A sub-agent's key -> the chat key it was spawned in (from the tasks seen).
    _parent: dict[str, str] = attrs.field(factory=dict)

    # ------------------------------------------------------------------ events (from the connection)

    def on_event(self, event: Any) -> None:
        """Every event the connection decodes: cheap for those about no watched chat."""
        if isinstance(event, OtherEvent) and event.kind == "task" and self.store is not None:
            change = parse_task_event(event.raw)
            task = change.task if change is not None else None
            said = subagents.line(task) if task is not None and task.session_key else None
            mark = said.get(subagents.LINE_MARK) if said is not None else None
            if (
                task is not None
                and said is not None
                and mark not in self._queued
                and ids.parse_session_key(task.session_key or "") is not None
            ):
                # The chat's current message says what its sub-agents do (issue 29), written by the pump.
                self._queued[mark] = None
                while len(self._queued) > MAX_CHILDREN:
                    self._queued.pop(next(iter(self._queued)))
                self._lines.append((task.session_key or "", said))
                self._wake.set()
        if not self._watchers:
            return
        if isinstance(event, OtherEvent):
            if event.kind == "task":
                change = parse_task_event(event.raw)
                if change is not None and change.task is not None:
                    self._learn(change.task)
                    self._poke(change.task.session_key)
                else:
                    self._poke_all()  # a deletion names no chat: the open views read again
            elif event.kind == "session.operation" and isinstance(event.raw, Mapping):
                self._poke(_key_of(event.raw))
            return
        if isinstance(event, (SessionsChanged, AgentEvent, ChatEvent)):
            key = event.session_key
            if is_subagent_key(key):
                self._poke(self._parent.get(key or ""))
                self._poke(key)  # an open drawer of that sub-agent, watched under its own key
            elif isinstance(event, SessionsChanged):
                self._poke(key)

    def _learn(self, task: Task) -> None:
        if task.child_key and task.session_key:
            self._parent[task.child_key] = task.session_key
            while len(self._parent) > MAX_CHILDREN:
                self._parent.pop(next(iter(self._parent)))

    def _poke(self, key: str | None) -> None:
        for watcher in self._watchers.get(key or "", ()):
            watcher.poke()

    def _poke_all(self) -> None:
        for watchers in self._watchers.values():
            for watcher in watchers:
                watcher.poke()

    # ------------------------------------------------------------------ the sub-agents' lines

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The pump: each sub-agent line to the message at its chat's tail (``ChatStore.add_lines_at_tail``: once,
        whichever worker says it first), then to the chat's tabs. A database that refuses costs that line."""
        task_status.started()
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            lines, self._lines = self._lines, []
            for key, entry in lines:
                ref = ids.parse_session_key(key)
                if ref is None:
                    continue
                try:
                    added = await self.store.add_lines_at_tail(ref.chat_id, [entry], mark=subagents.LINE_MARK)
                except Exception as exc:  # a refusing database, a chat gone: this line is lost, the next one tries
                    log.warning("status.subagent_line_lost chat=%s error=%s", ref.chat_id, type(exc).__name__)
                    continue
                if added is None or self.emitter is None:
                    continue
                message_id, said = added
                for item in said:
                    try:
                        await self.emitter.emit(ref.chat_id, message_id, ref.user_id, {"type": "status", "data": item})
                    except Exception:
                        log.exception("status.emit_failed chat=%s", ref.chat_id)

    # ------------------------------------------------------------------ watching

    def open_watch(self, *keys: str) -> Watcher:
        """A watcher of ``keys`` (a chat's key; a sub-agent's too for its drawer), poked by each change of any."""
        watcher = Watcher()
        for key in keys:
            self._watchers.setdefault(key, set()).add(watcher)
        return watcher

    def close_watch(self, watcher: Watcher) -> None:
        for key in [k for k, ws in self._watchers.items() if watcher in ws]:
            self._watchers[key].discard(watcher)
            if not self._watchers[key]:
                del self._watchers[key]

    @asynccontextmanager
    async def watching(self, *keys: str) -> AsyncIterator[Watcher]:
        """``open_watch`` for the block."""
        watcher = self.open_watch(*keys)
        try:
            yield watcher
        finally:
            self.close_watch(watcher)

    # ------------------------------------------------------------------ reads

    async def _read(self, method: str, params: dict[str, Any]) -> Any:
        if self.request is None:
            return None
        try:
            return await self.request(method, params)
        except (GatewayError, ProtocolError) as exc:
            log.info("status.unread method=%s error=%s", method, type(exc).__name__)
            return None

    async def snapshot(self, key: str) -> dict[str, Any]:
        """The status view of the chat whose session key is ``key``."""
        got: dict[str, Any] = {}

        async def read(name: str, method: str, params: dict[str, Any]) -> None:
            got[name] = await self._read(method, params)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read, "describe", "sessions.describe", {"key": key})
            nursery.start_soon(read, "status", "usage.status", {})
            nursery.start_soon(read, "tasks", "tasks.list", {"sessionKey": key, "status": list(LIVE), "limit": 50})
        tasks = parse_tasks(got["tasks"]) if got.get("tasks") is not None else None
        for task in tasks or ():
            self._learn(task)
        return status_view.view(
            got.get("describe"), got.get("status"), subagents.listed(tasks) if tasks is not None else None
        )

    async def drawer(self, key: str, task_id: str) -> dict[str, Any] | None:
        """Sub-agent ``task_id`` of the chat whose key is ``key``; None when the Gateway has no such task of this chat
        (gone, or another chat's: a person sees only their own chat's sub-agents)."""
        answer = await self._read("tasks.get", {"taskId": task_id})
        # The record itself, or under ``task`` (read both: the schema's ``TasksGetResult`` wraps it).
        task = parse_task(answer.get("task") if isinstance(answer, Mapping) and "task" in answer else answer)
        if task is None or key not in (task.session_key,):
            return None
        self._learn(task)
        describe: Any = None
        history = None
        if task.child_key:
            got: dict[str, Any] = {}

            async def read(name: str, method: str, params: dict[str, Any]) -> None:
                got[name] = await self._read(method, params)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(read, "describe", "sessions.describe", {"key": task.child_key})
                nursery.start_soon(read, "history", "chat.history", {"sessionKey": task.child_key, **DRAWER_HISTORY})
            describe = got.get("describe")
            if got.get("history") is not None:
                try:
                    history = parse_chat_history(got["history"])
                except ProtocolError:
                    history = None
        return {**subagents.drawer(task, describe, history), "childKey": task.child_key}

    # ------------------------------------------------------------------ compact

    async def compact(self, key: str) -> CompactOutcome:
        """``sessions.compact {key}`` (admin scope; measured: no chat turn, the transcript's messages stay). The
        Gateway itself refuses while a run is going on the session: its refusal is said in a person's words."""
        if self.request is None:
            return CompactOutcome(False, NOT_CONNECTED_LINE, 503)
        try:
            answer = await self.request("sessions.compact", {"key": key})
        except (NotConnected, SessionClosed):
            return CompactOutcome(False, NOT_CONNECTED_LINE, 503)
        except RequestError as exc:
            message = exc.error.message or ""
            if "active run" in message:
                return CompactOutcome(False, BUSY_LINE, 409)
            if exc.code == "FORBIDDEN" or "missing scope" in message:
                return CompactOutcome(False, NO_ADMIN_LINE, 403)
            if "not found" in message.lower() or "no session" in message.lower():
                return CompactOutcome(False, NO_SESSION_LINE, 404)
            log.warning("status.compact_refused code=%s", exc.code)
            return CompactOutcome(False, f"The Gateway did not compact this chat: {message[:200]}", 502)
        except GatewayError as exc:
            log.warning("status.compact_failed error=%s", type(exc).__name__)
            return CompactOutcome(False, NOT_CONNECTED_LINE, 503)
        result = answer.get("result") if isinstance(answer, Mapping) else None
        result = result if isinstance(result, Mapping) else {}
        before, after = _int(result.get("tokensBefore")), _int(result.get("tokensAfter"))
        compacted = isinstance(answer, Mapping) and answer.get("compacted") is True
        reason = answer.get("reason") if isinstance(answer, Mapping) else None
        log.info("status.compacted compacted=%s before=%s after=%s", compacted, before, after)
        if not compacted:
            return CompactOutcome(False, NOT_COMPACTED.get(str(reason), NOTHING_LINE), 409)
        self._poke(key)
        return CompactOutcome(True, "Compacted.", 200, before, after)


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def _key_of(payload: Mapping[str, Any]) -> str | None:
    key = payload.get("sessionKey") or payload.get("key")
    return key if isinstance(key, str) else None
