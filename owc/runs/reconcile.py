"""The reconcile pass at a hello: runs that ended while owc was away get their message (seed 000 case 4), and
Open WebUI's orphan stubs and dead writers' messages are finished (P20).

Bounded: one query for the listed chats' facts, then for at most ``limit`` sessions (newest first) one
``chat.history`` page and one chat read each; every owed run is then handed to an ordinary writer (a claim at
the tail, a finalize from the transcript already read), one after another so a chat's runs chain in run order.
What it did is logged (``runs.reconciled``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from owc import ids
from owc.gateway import GatewayError, NotConnected, Resync, SessionClosed
from owc.protocol import ChatHistory, ProtocolError, SessionRow
from owc.rules.finished import awaits_correction
from owc.rules.lifecycle import State, Terminal
from owc.rules.reconcile import host_watermark, runs_owed, transcript_places
from owc.runs.correct import Correction
from owc.runs.writer import history_params, read_history_page
from owc.store import StoreError

if TYPE_CHECKING:
    from owc.runs.ports import PassTable

log = logging.getLogger("owc.runs")


async def reconcile(
    table: PassTable, resync: Resync, *, watermark_ms: int | None, limit: int, retry: bool = False
) -> bool:
    """Returns whether the pass covered every candidate (none left for a later hello, none cut short). Raises
    ``SessionClosed`` / ``NotConnected`` when its connection closed under it (``RunTable._reconcile``).
    ``retry``: a pass again on the same connection (from the hello's list): runs the ledger knows by now
    are the live path's."""
    store = table.keeper.store
    rows: list[tuple[SessionRow, ids.SessionRef]] = []
    for row in resync.rows:
        ref = ids.parse_session_key(row.key)
        if ref is not None:
            rows.append((row, ref))
    if not rows:
        return True
    # A process's first pass compares this host's time with the Gateway's: it also asks whether each chat holds
    # its session's last run's message, which needs no clock (a chat that lacks it is looked at).
    last_runs = (
        {
            ref.chat_id: message_id
            for row, ref in rows
            if row.last_run_id
            and row.last_run_id not in (row.active_run_ids or ())
            and (message_id := ids.message_id(row.key, row.last_run_id)) is not None
        }
        if watermark_ms is None
        else {}
    )
    try:
        facts = await store.chat_facts(sorted({ref.chat_id for _, ref in rows}), last_runs)
    except Exception:
        log.exception("runs.reconcile_failed (reading the chats' facts)")
        return False
    candidates = []
    for row, ref in rows:
        chat = facts.get(ref.chat_id)
        if chat is None:
            continue  # not (or no longer) an Open WebUI chat of this database
        if watermark_ms is not None:
            watermark = watermark_ms
        else:  # no pass has finished yet in this process: the chat's own time from before this process wrote it
            watermark = host_watermark((table.keeper.chat_times or {}).get(ref.chat_id, chat.updated_at * 1000))
        changed = row.updated_at is not None and row.updated_at >= watermark
        missing_last = ref.chat_id in last_runs and last_runs[ref.chat_id] not in chat.present
        if changed or chat.unfinished or missing_last or chat.uncorrected:
            candidates.append((row, ref, watermark))
    candidates.sort(key=lambda c: c[0].updated_at or 0, reverse=True)
    looked_at = {ref.chat_id for _, ref, _ in candidates[:limit]}
    owing = {ref.chat_id for _, ref, _ in candidates}
    for _, ref in rows:
        if ref.chat_id not in looked_at:
            # Nothing owed there, or not looked at this pass (over the bound): its live claims go on now.
            table.reconciled_chat(ref.chat_id, settled=ref.chat_id not in owing)
    complete = len(candidates) <= limit
    if not complete:
        log.warning("runs.reconcile_bounded sessions=%d limit=%d (the rest at a later hello)", len(candidates), limit)
    done = 0
    for row, ref, watermark in candidates[:limit]:
        try:
            done += await _session(table, row, ref, watermark, retry=retry, host_time=watermark_ms is None)
            table.reconciled_chat(ref.chat_id)
        except (SessionClosed, NotConnected):
            raise  # the connection is gone: the next one's hello reconciles again, from the same watermark
        except (GatewayError, ProtocolError, StoreError) as exc:
            complete = False
            table.reconciled_chat(ref.chat_id, settled=False)
            log.warning("runs.reconcile_skipped session=%s error=%s", row.key, exc)
    log.info("runs.reconciled sessions=%d runs=%d", min(len(candidates), limit), done)
    return complete


async def _session(
    table: PassTable, row: SessionRow, ref: ids.SessionRef, watermark: int, *, retry: bool, host_time: bool
) -> int:
    history: ChatHistory = await read_history_page(table.request, history_params(row.key))
    chat = await table.keeper.store.read_chat(ref.chat_id)
    messages = chat.get("history", {}).get("messages", {}) if isinstance(chat, dict) else {}
    messages = messages if isinstance(messages, dict) else {}
    table.keeper.cuts.seen_chat(table, ref.chat_id, messages, history)
    table.keeper.cuts.seen_history(row, history)
    # A continuation (a recovery linked by rule E, a resume) writes into the message of the run it continues:
    # the message names it in its chain, so it is not owed a message of its own (issue 14).
    chained = {
        run_id: message_id
        for message_id, message in messages.items()
        if isinstance(message, dict) and isinstance(message.get("meta"), dict)
        for run_id in message["meta"].get("openclaw_chain") or ()
        if isinstance(run_id, str)
    }
    owed = runs_owed(
        history,
        messages=messages,
        active=frozenset(row.active_run_ids or ()),
        active_unknown=bool(row.has_active_run) and row.active_run_ids is None,
        watermark_ms=watermark,
        message_id_of=lambda run_id: chained.get(run_id) or ids.message_id(row.key, run_id),
        after_last_message=host_time,
        last_run=row.last_run_id,
    )
    for message_id, message in messages.items():
        # A message finished short by a process that exited before its correction ran (``CORRECT_MARK``).
        meta = message.get("meta") if isinstance(message, dict) else None
        run_id = meta.get("openclaw_run") if isinstance(meta, dict) else None
        if (
            isinstance(run_id, str)
            and awaits_correction(message)
            and run_id not in (row.active_run_ids or ())
            and ids.message_id(row.key, run_id) == message_id
            and table.ledger.get(row.key, run_id) is None
        ):
            table.keeper.corrections.add_marked(Correction.of_marked(row.key, ref, run_id, message_id, message))
    places = transcript_places(history)
    for known in table.ledger.unsettled():
        if known.session_key == row.key and known.run_id in places:
            known.place_in_transcript(*places[known.run_id])  # exact order against the runs the pass owes
    table.keeper.wake(ref.chat_id)  # places moved: claims waiting there look again
    count = 0
    for item in owed:
        where = places.get(item.run_id)
        # Runs a carried run may claim before (``RunTable.claim_turn``): those before this one. An unfinished
        # message beyond the window already has its place in the chain: it holds nobody up.
        table.owes_next(ref.chat_id, None if where is None else (where[0] or 0, 0, where[1]))
        known = table.ledger.get(row.key, item.run_id)
        if known is not None and (retry or not known.life.ended):
            # A pass again on this connection leaves the runs met since its hello to the live path. Any pass
            # leaves one the live path knows and has seen no end of: it began after the hello's list (so the
            # list could not show it active) and may still be running; taking it for ended gave up a live run
            # whose transcript held only its user turn so far (fuzzer, seed 6190).
            continue
        run = table.ledger.open(row.key, item.run_id, seen_ms=item.first_ms)
        if run is None or run.life.state is not State.OPEN or run.life.ended or run.writer_live:
            continue  # settled, or the live path has it
        if where is not None:
            run.place_in_transcript(*where)
        run.standing.reconciled = True
        run.read.history = history
        run.life.owed = item.unfinished
        run.mark_missed("ended while owc was away")
        log.info(
            "runs.reconciling run=%s chat=%s message=%s unfinished=%s",
            item.run_id,
            ref.chat_id,
            item.message_id,
            item.unfinished,
        )
        # The session's row says how its last run ended: a failed one's error shows as a live one would (item 2).
        reason = "ended while owc was away"
        table.apply(run, Terminal.from_row(reason, run.run_id, row.status, row.last_run_id, row.last_run_error))
        await table.keeper.until(
            lambda run=run: not run.writer_live, run.ref.chat_id
        )  # one at a time: they chain in run order
        count += 1
    return count
