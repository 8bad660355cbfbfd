"""Corrections: a message finished from a stream because the transcript could not be read is made whole, and put in
its place, once it can.

A writer finishes a run from its transcript. While ``chat.history`` fails (the Gateway's store does not answer),
it finishes from what it streamed instead, rather than leave the message open; if that stream had gaps (events
dropped, a writer that joined mid-run or took a dead one's message over), the message lacks what the gaps held
(fuzzer, ``history-fallback-gaps``). Such a message is kept here, process-wide, and at each Gateway tick the
transcript is read again: once it answers and holds the run, the message is written from it and the tabs are
told; if the transcript does not hold the run, the stream's copy stands. Such a message also carries a mark in its
``meta`` (``CORRECT_MARK``) until then: a process that exits before its correction ran leaves the mark, and a later
process's reconcile pass finds the message by it and corrects it (``Corrections.add_marked``; fuzz seed 212956: a
deploy killed two seconds after such a finish left the run's tool card out for good). Never on a clock: the
tick is the Gateway's own heartbeat, the same that retries a message the database refused.

The same read puts the message in its place. A finalize puts the line of its session's messages around M in the
transcript's (start) order (``tree.reorder_run_line``): a claim lands at the chat's tail, and another process that
never saw an earlier run begin may have given a later run its message first. Without the transcript it cannot;
so a message finished so right under another run's message (the only way such a line can be out of order from
M's side) is kept too, for its order alone when its stream had no gap (fuzz seed 150032: two deploys while
``chat.history`` failed; one, back after the earlier run had ended, was let claim the later run at once, the other
claimed the earlier run below it, and neither finalize could read the transcript that says which began first).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs

from owc.emit import Emitter
from owc.gateway import GatewayError, NotConnected, SessionClosed
from owc.ids import SessionRef
from owc.protocol import ProtocolError
from owc.render import output_from_transcript, output_text
from owc.render.transcript import oversized_reply_in_run, transcript_error
from owc.rules.owner import EMPTY_FINISH_NOTES
from owc.rules.reconcile import run_order
from owc.runs.run import Run, RunKey
from owc.runs.writer import read_run_window
from owc.store import MessageMissing, NotWritten, StoreError, TrioChatStore, Written

log = logging.getLogger("owc.runs")


@attrs.frozen
class Correction:
    session_key: str
    run_id: str
    chat_id: str
    message_id: str
    user_id: str | None
    #: The finished message's error note (a run that ended in an error keeps it when corrected).
    error: str | None = None
    #: The stream had gaps: the message is written again from the transcript. Else only its place is put right.
    content: bool = True
    #: The run's own terminal reached owc live: it alone says whether the run failed (``render.run_error``). Else a
    #: failure the transcript records shows once it is read (fuzz seed 428467).
    terminal_seen: bool = False

    @classmethod
    def of(cls, run: Run, error: str | None = None, *, content: bool = True) -> Correction:
        seen = run.renderer.terminal is not None
        return cls(run.session_key, run.run_id, run.ref.chat_id, run.message_id, run.ref.user_id, error, content, seen)

    @classmethod
    def of_marked(
        cls, session_key: str, ref: SessionRef, run_id: str, message_id: str, message: Mapping[str, Any]
    ) -> Correction:
        """The correction a message marked ``CORRECT_MARK`` still owes, as its writer would have kept it: its error
        note stays unless it is an empty finish's (the correction's fill drops that)."""
        error = message.get("error")
        note = error.get("content") if isinstance(error, Mapping) else None
        kept = note if isinstance(note, str) and not note.startswith(EMPTY_FINISH_NOTES) else None
        meta = message.get("meta")
        chain = meta.get("openclaw_chain") if isinstance(meta, Mapping) else None
        if isinstance(chain, list) and len(chain) > 1 and isinstance(chain[-1], str):
            # A continuation's message: the run its finish left short is the chain's last (the claim's run is its
            # first): its own part is corrected, the earlier runs' part kept (``ChatStore.write(own_part=...)``).
            run_id = chain[-1]
        return cls(session_key, run_id, ref.chat_id, message_id, ref.user_id, kept)


@attrs.define
class Corrections:
    """The messages still to correct (process-wide, like the ledger), and whether a pass over them is running."""

    pending: dict[RunKey, Correction] = attrs.field(factory=dict)
    running: bool = False

    def add(self, run: Run, error: str | None = None, *, content: bool = True) -> None:
        log.info(
            "runs.correct_later run=%s message=%s (finished from a stream%s, without its transcript)",
            run.run_id,
            run.message_id,
            " with gaps" if content else "",
        )
        self.pending[run.key] = Correction.of(run, error, content=content)

    def add_marked(self, item: Correction) -> None:
        """A message a process finished short and exited before correcting (``CORRECT_MARK``), found by a
        reconcile pass: corrected like one of this process's own (fuzz seed 212956)."""
        key = (item.session_key, item.run_id)
        if key not in self.pending:
            log.info(
                "runs.correct_marked run=%s message=%s (finished short by a process gone)", item.run_id, item.message_id
            )
            self.pending[key] = item

    async def run_pass(self, request: Callable[..., Awaitable[Any]], store: TrioChatStore, emitter: Emitter) -> None:
        """One pass over the pending corrections, one at a time (a tick starts it; only one runs at once)."""
        if self.running:
            return
        self.running = True
        try:
            for key, item in list(self.pending.items()):
                if await _correct(item, request, store, emitter):
                    self.pending.pop(key, None)
        finally:
            self.running = False


async def _correct(
    item: Correction, request: Callable[..., Awaitable[Any]], store: TrioChatStore, emitter: Emitter
) -> bool:
    """Correct one message; True when nothing is left to do for it (corrected, or nothing better exists)."""
    try:
        history = await read_run_window(request, item.session_key, item.run_id)
    except (SessionClosed, NotConnected):
        return False  # the next connection's tick tries again
    except (GatewayError, ProtocolError) as exc:
        log.info("runs.correct_waits run=%s error=%s", item.run_id, exc)
        return False
    if history is None:
        return await _unmark(item, store)  # the transcript cannot do better than the stream's copy
    order = run_order(history)
    output: list[Any] = []
    if item.content and not oversized_reply_in_run(history, item.run_id):
        try:
            output = output_from_transcript(history, item.run_id)
        except Exception:
            log.exception("runs.transcript_unreadable run=%s", item.run_id)
    if not output:
        return await _put_in_order(item, order, store, emitter) and await _unmark(item, store)
    content = output_text(output)
    error = item.error
    if error is None and not item.terminal_seen:
        # The run's end was missed and the transcript could not be read at its finalize (the row named a later run):
        # its failure, recorded in the transcript, shows as a live one does (issue 24, item 2; fuzz seed 428467).
        error = transcript_error(history, item.run_id)
    try:
        result = await store.write(
            item.chat_id,
            item.message_id,
            content=content,
            output=output,
            done=True,
            error=error,
            fills=True,
            run_order=order,
            # A continuation's message keeps its earlier runs' part and the seam before this run's (issue 25 item 3).
            own_part=item.run_id,
        )
    except MessageMissing:
        return True  # deleted meanwhile
    except StoreError as exc:  # the chat itself stands in the way: a later try would meet it again
        log.error("runs.correct_failed run=%s error=%s", item.run_id, exc)
        return True
    if isinstance(result, NotWritten):
        return False  # the database refuses writes: the next tick tries again
    assert isinstance(result, Written)
    log.info("runs.corrected run=%s message=%s (from its transcript)", item.run_id, item.message_id)
    await _emit_moved(item, result, emitter)
    try:
        await emitter.emit(
            item.chat_id,
            item.message_id,
            item.user_id,
            {
                "type": "chat:completion",
                "data": {
                    "done": True,
                    "output": output,
                    "content": content,
                    **({"error": {"content": error}} if error else {}),
                },
            },
        )
    except Exception:
        log.exception("runs.emit_failed run=%s event=chat:completion", item.run_id)
    return True


async def _unmark(item: Correction, store: TrioChatStore) -> bool:
    """Nothing better than the stream's copy exists: the message's mark goes, so no later process looks again."""
    if not item.content:
        return True
    try:
        await store.drop_correct_mark(item.chat_id, item.message_id)
    except Exception:  # a mark left costs a later pass one more transcript read, nothing else
        log.exception("runs.unmark_failed run=%s message=%s", item.run_id, item.message_id)
    return True


async def _put_in_order(item: Correction, order: tuple[str, ...], store: TrioChatStore, emitter: Emitter) -> bool:
    """Only M's place: the line of its session's messages around it in the transcript's order."""
    try:
        result = await store.put_in_order(item.chat_id, item.message_id, run_order=order, user_id=item.user_id)
    except StoreError as exc:
        log.error("runs.correct_failed run=%s error=%s", item.run_id, exc)
        return True
    if isinstance(result, NotWritten):
        return False
    if isinstance(result, Written):
        log.info("runs.put_in_order run=%s message=%s moved=%d", item.run_id, item.message_id, len(result.moved))
        await _emit_moved(item, result, emitter)
    return True


async def _emit_moved(item: Correction, result: Written, emitter: Emitter) -> None:
    """The links the write changed (and the chat's view, if it moved with them), to the chat's tabs."""
    if not result.moved:
        return
    data: dict[str, Any] = {
        "messages": {
            m["id"]: {"id": m["id"], "parentId": m.get("parentId"), "childrenIds": m.get("childrenIds", [])}
            for m in (result.message, *result.moved)
        }
    }
    if result.current_id is not None:
        data["currentId"] = result.current_id
    try:
        await emitter.emit(item.chat_id, item.message_id, item.user_id, {"type": "chat:messages", "data": data})
    except Exception:
        log.exception("runs.emit_failed run=%s event=chat:messages", item.run_id)
