"""The run writer: one Trio task per shown run, in its connection's nursery.

It claims the run's message at the chat's tail, tells the open tabs, streams the renderer's changes, and waits
for the end **with no timeout**: its streaming phase is a cancel scope that only the run's own terminal, a Stop
or a handover cancels. Then it reads the run's transcript once, writes the finished message in one
transaction, tells the tabs, and ends. A connection that closes cancels its writers; the next connection's
claim takes their messages over (their recorded writer is no longer alive).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from owc.gateway import GatewayError
from owc.protocol import ChatHistory, ProtocolError, older_page, parse_chat_history
from owc.render import diff, finish, output_text, reaches_run_start, snapshot_event
from owc.store import Absent, AlreadyDone, AlreadyThere, Claimed, Locked, NotWritten, StoreError, TakenOver, Written

if TYPE_CHECKING:
    from owc.runs.table import RunEntry, RunTable

log = logging.getLogger("owc.runs")

#: How many transcript messages one ``chat.history`` page holds: the run's own are near the end.
HISTORY_LIMIT = 200
#: How many pages a finalize reads back, at most, to reach a long run's start.
HISTORY_MAX_PAGES = 25
#: ``chat.history`` cuts every text part to 8,000 characters unless told otherwise (the Gateway's
#: DEFAULT_CHAT_HISTORY_TEXT_MAX_CHARS); a finalize must see the whole reply. 500,000 is the schema's maximum.
HISTORY_MAX_CHARS = 500_000
#: A claim that keeps meeting a locked database after the run has ended (no more events to wait for)
#: tries this many times, each paced by the busy wait, like a finalize.
CLAIM_ATTEMPTS_AFTER_END = 6


class RunWriter:
    def __init__(self, table: RunTable, entry: RunEntry, *, adopt: bool = False) -> None:
        self.table = table
        self.entry = entry
        self.adopt = adopt  # only take over an existing message (a run found active after a reconnect)
        self.shown: list[dict[str, Any]] = []
        #: The tabs may hold another writer's items (a take-over): the first flush sends the whole output
        #: as a snapshot instead of a diff from nothing, which would show their text twice.
        self.snapshot_first = False
        self.claimed = False
        self.finalized = False
        #: The run ended while another process's writer held its message: finish it only if that process
        #: has not (it may have died mid-run), without streaming or claiming it (owc/registry.py).
        self.finish_only = False

    async def _emit(self, event: dict[str, Any]) -> None:
        e = self.entry
        try:
            await self.table.emitter.emit(e.ref.chat_id, e.message_id, e.ref.user_id, event)
        except Exception:  # a tab that cannot be told must not stop the message being written
            log.exception("runs.emit_failed run=%s event=%s", e.run_id, event.get("type"))

    async def run(self) -> None:
        e = self.entry
        try:
            if not await self._claim():
                if not e.writer_started:  # adoption found nothing; the entry may still show later
                    self.table.maybe_start(e)
                return
            if self.finish_only:
                await self._finalize()
                return
            await self._emit({"type": "chat:active", "data": {"active": True}})
            with e.stream_scope:
                while True:
                    await self._flush()
                    await e.wait_changed()
            if e.stop_requested:
                await self._abort()
            await self._finalize()
        except Exception:
            # A failure of this run's writer (an unexpected database error, a bug) is this run's alone: it
            # must not close the connection, which would cancel every other run's writer with it.
            log.exception("runs.writer_failed run=%s chat=%s message=%s", e.run_id, e.ref.chat_id, e.message_id)
            e.owner = "none"
        except trio.Cancelled:
            # The connection is closing. A run that has ended must not stay unfinished because of that:
            # finalize from the stream, shielded (one short transaction), then let the cancel through.
            # A run still going is left to the next connection, whose claim takes the message over.
            if self.claimed and e.ended and not self.finalized:
                await self._write_final(None)  # its store write is shielded; telling the tabs is not
            raise
        finally:
            if e.writer is self:
                e.writer_done = True
                if e.ended and self.finalized:
                    self.table.retire(e)
            self.table.retire_if_idle(e)
            self.table.changed()

    # ------------------------------------------------------------------ claim

    async def _claim(self) -> bool:
        e = self.entry
        store = self.table.store
        attempts_after_end = 0
        while True:
            try:
                result = await store.claim(
                    e.ref.chat_id,
                    e.message_id,
                    run_id=e.run_id,
                    writer=self.table.writer_id,
                    # Another process's writer may be alive: never taken over (owc/registry.py).
                    alive=self.table.registry.may_be_alive,
                    user_id=e.ref.user_id,
                    create=not self.adopt,
                )
            except StoreError as exc:
                log.error("runs.claim_failed run=%s chat=%s error=%s", e.run_id, e.ref.chat_id, exc)
                e.owner = "none"
                return False
            if isinstance(result, (Claimed, TakenOver)):
                self.claimed = True  # before any await: a cancel from here on must still finalize an ended run
            if isinstance(result, Claimed):
                parent = {"id": result.parent_id, "childrenIds": list(result.parent_children)} if result.parent_id else None
                messages = {e.message_id: result.message}
                if parent is not None:
                    messages[result.parent_id] = parent
                await self._emit({"type": "chat:messages", "data": {"messages": messages, "currentId": result.current_id}})
                self.claimed = True
                self.table.stats.claims += 1
                self.table.changed()
                log.info("runs.claimed run=%s chat=%s message=%s", e.run_id, e.ref.chat_id, e.message_id)
                return True
            if isinstance(result, TakenOver):
                await self._emit({"type": "chat:messages", "data": {"messages": {e.message_id: result.message}, "currentId": e.message_id}})
                e.renderer.mark_gap("taken over from a closed connection")
                self.snapshot_first = True
                self.claimed = True
                self.table.stats.claims += 1
                self.table.changed()
                log.info("runs.taken_over run=%s from=%s", e.run_id, result.previous_writer)
                return True
            if isinstance(result, Absent):
                e.writer = None  # nothing to adopt: a showable event starts a writer
                return False
            if isinstance(result, AlreadyThere):
                if result.writer == self.table.writer_id:
                    self.claimed = True
                    return True
                log.info("runs.backing_off run=%s writer=%s done=%s", e.run_id, result.writer, result.done)
                other_process = result.writer is not None and not self.table.registry.is_local(result.writer)
                if not result.done and e.ended and other_process:
                    # The run is over and this process cannot see whether that one lives: finish the
                    # message unless it is finished by then (one conditional write, same transcript).
                    self.finish_only = self.claimed = True
                    return True
                if not result.done and not e.ended and result.writer is not None:
                    # Another live connection writes it. Stand by: keep rendering, and at the run's end
                    # look again, in case that connection died meanwhile (a deploy killed mid-run).
                    e.owner, e.writer = "standby", None
                else:
                    e.owner = "none"
                return False
            assert isinstance(result, Locked)
            if e.ended:
                attempts_after_end += 1
                if attempts_after_end >= CLAIM_ATTEMPTS_AFTER_END:
                    log.error("runs.NOT_WRITTEN run=%s chat=%s: the database stayed locked", e.run_id, e.ref.chat_id)
                    e.owner = "none"
                    return False
                continue  # each attempt already waited the busy timeout
            await e.wait_changed()  # try again on the run's next event

    # ------------------------------------------------------------------ streaming

    async def _flush(self) -> None:
        e = self.entry
        now = e.renderer.output()
        if now == self.shown and not self.snapshot_first:
            return
        if self.snapshot_first:
            self.snapshot_first = False
            await self._emit(snapshot_event(now))
        else:
            d = diff(self.shown, now)
            for event in d.events:
                await self._emit(event)
            if d.needs_snapshot:
                await self._emit(snapshot_event(now))
        self.shown = now
        try:
            await self.table.emitter.save_stream(e.ref.chat_id, e.message_id, now)
        except Exception:
            log.exception("runs.save_stream_failed run=%s", e.run_id)

    async def _abort(self) -> None:
        e = self.entry
        try:
            await self.table.session.request("chat.abort", {"sessionKey": e.session_key, "runId": e.run_id})
        except (GatewayError, ProtocolError) as exc:
            log.warning("runs.abort_failed run=%s error=%s", e.run_id, exc)

    # ------------------------------------------------------------------ finalize

    async def _finalize(self) -> None:
        e = self.entry
        history = None
        try:
            history = await self._read_history()
        except (GatewayError, ProtocolError) as exc:
            log.warning("runs.history_failed run=%s error=%s (finalizing from the stream)", e.run_id, exc)
        await self._write_final(history)

    async def _read_history(self) -> ChatHistory | None:
        """The newest page of the run's transcript, with older pages joined in front until it reaches back to
        the run's start (a long run can outgrow one page). None if it never does within the page bound: a
        window without the run's beginning would finalize it without its opening text and cards."""
        e = self.entry
        params = {"sessionKey": e.session_key, "limit": HISTORY_LIMIT, "maxChars": HISTORY_MAX_CHARS}
        window = parse_chat_history(await self.table.session.request("chat.history", params))
        pages = 1
        while not reaches_run_start(window, e.run_id):
            if window.next_offset is None or pages >= HISTORY_MAX_PAGES:
                log.warning("runs.history_too_long run=%s pages=%d (finalizing from the stream)", e.run_id, pages)
                return None
            older = parse_chat_history(await self.table.session.request("chat.history", {**params, "offset": window.next_offset}))
            window, pages = older_page(older, window), pages + 1
        return window

    async def _write_final(self, history: Any) -> None:
        e = self.entry
        self.finalized = True
        finished = finish(e.renderer, history)
        if not finished.complete:
            log.warning("runs.incomplete run=%s gaps=%s (no transcript for the run)", e.run_id, e.renderer.gaps)
        # Shielded: a started final write completes even if the connection closes meanwhile (one short
        # transaction, bounded by the busy wait). Telling the tabs afterwards is not shielded: an emitter
        # that blocks must not hold a closing connection open forever.
        with trio.CancelScope(shield=True):
            result = await self.table.store.write(
                e.ref.chat_id,
                e.message_id,
                content=finished.content,
                output=finished.output,
                done=True,
                error=finished.error["content"] if finished.error else None,
                unless_done=self.finish_only,
            )
        if isinstance(result, AlreadyDone):
            log.info("runs.finished_elsewhere run=%s message=%s", e.run_id, e.message_id)
            return
        if isinstance(result, NotWritten):
            log.error("runs.NOT_WRITTEN run=%s chat=%s attempts=%d: %s", e.run_id, e.ref.chat_id, result.attempts, result.detail)
            await self._emit({"type": "chat:message:error", "data": {"error": {"content": "This reply could not be saved: the database stayed locked (another writer held it). The text above is only in this tab."}}})
            return
        assert isinstance(result, Written)
        self.table.stats.finalized += 1
        if self.finish_only:  # this process's tabs never heard of the message: give them all of it
            await self._emit({"type": "chat:messages", "data": {"messages": {e.message_id: result.message}}})
        data: dict[str, Any] = {"done": True, "output": finished.output, "content": output_text(finished.output)}
        if finished.error:
            data["error"] = finished.error
        await self._emit({"type": "chat:completion", "data": data})
        await self._emit({"type": "chat:active", "data": {"active": False}})
        try:
            await self.table.emitter.clear_stream(e.ref.chat_id, e.message_id)
        except Exception:
            log.exception("runs.clear_stream_failed run=%s", e.run_id)
        log.info("runs.finalized run=%s message=%s source=%s cards=%d", e.run_id, e.message_id, finished.source, finished.cards)
