"""A user turn streamed through the Pipe's own request, and its handover to a writer (seed 000 section 2.6).

The Pipe's ``pipe()`` (``owc/owui/pipe.py``) sends the user's message with ``chat.send`` under a run id that carries
Open WebUI's own reply stub M (``msg-<chat>-<M>-input-<t>``; the run id is the idempotency key, so a retried send
never starts a second run). Before it sends, the run is opened here in ``INLINE``: no writer of this process streams
it (the request does), and M is recorded as held by this process's writer id, so other processes back off from it.
The request then pulls the run's rendering (``InlineTurn.next_output``) and relays it as Responses items.

**Every way the request ends is the same handover**: the run's own end, a Stop, "Send now", a closed tab, Open
WebUI's shutdown. When Open WebUI's task for the request has ended (its end-of-stream save has written M with the
output it had), ``request_ended`` hands the run to a writer for the same M: it takes M back (``reopen``), streams
on if the run is still going, and on the run's own terminal finalizes M from the transcript, as for any run. One
finalize path for agent turns and user turns alike.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

from owc.gateway import GatewayError
from owc.render.status import Started, StatusLines, Told, Tools
from owc.rules.lifecycle import Handover, Inline, State, Terminal, WriteOutcome, WriteResult
from owc.rules.thinking import Rejection, rejection_in_final
from owc.runs.run import HandoverState, Run
from owc.store import AlreadyThere, StoreError, TakenOver

if TYPE_CHECKING:
    from owc.runs.ports import InlineKeeper, Table

log = logging.getLogger("owc.runs")


class UserTurnError(Exception):
    """The turn could not be sent; ``str()`` is the one line the user sees (never a traceback, never a token)."""


@attrs.frozen
class Step:
    """What the request shows next: the run's output so far, and whether the request's part is over (the run
    ended or was stopped, or its rendering needs a rewrite the request cannot stream: the writer takes it on)."""

    output: list[dict[str, Any]]
    over: bool
    #: Status lines for the request to say (``owc.render.status``): through its own event emitter, which appends them
    #: to M's ``statusHistory`` (Open WebUI's own write) and tells the tabs.
    statuses: tuple[dict[str, Any], ...] = ()


#: Sends the turn again after the Gateway refused its thinking level (issue 28): given the refused run and what the
#: refusal said, the new run's inline side (same message, another run id), or None when it could not be sent.
Retry = Callable[[Run, Rejection], Awaitable["InlineTurn | None"]]


class InlineTurn:
    """One user turn's inline side: the request pulls from it, and tells it when Open WebUI's task has ended.

    ``retry``: the turn asked for a thinking level the Pipe could not check (the session had never run), so a
    ``final`` that is the Gateway's rejection of it is not the reply: the turn is sent again once (``retry``), and
    ``run`` becomes the new run, which fills the same message."""

    def __init__(
        self, keeper: InlineKeeper, run: Run, retry: Retry | None = None, notes: list[str] | None = None
    ) -> None:
        self.keeper = keeper
        self.run = run
        self.retry = retry
        #: Lines to say with the turn once nothing is open above them (the thinking level's note): a done line
        #: behind an open one ("Queued ...") would hide it (``owc.render.status``).
        self.notes: list[str] = list(notes or ())

    async def next_output(self, shown: list[dict[str, Any]]) -> Step:
        """Until the run's rendering differs from ``shown``, its status lines have something to say, or the request's
        part is over."""
        run = self.run
        carried: tuple[dict[str, Any], ...] = ()  # lines said before a retry took the run's place
        while True:
            over = run.life.state is not State.INLINE or run.life.ended
            output = run.renderer.output()
            statuses: tuple[dict[str, Any], ...] = ()
            if run.life.state is State.INLINE:
                # While the request streams the run, it says the run's lines (a writer says them after a handover).
                if run.standing.heard or output:
                    run.status.apply(Started())  # a turn queued behind the reply before it has begun
                if self.notes and run.status.open is None:
                    run.status.apply(Told(tuple(self.notes)))
                    self.notes = []
                if not run.life.ended:
                    run.status.apply(Tools(run.renderer.running_tool))
                statuses = tuple(run.status.take())
            if over and self.retry is not None and run.life.state is State.INLINE:
                again = await self._retried(run)
                if again is not None:
                    run = self.run = again
                    carried += statuses
                    continue
            statuses = carried + statuses
            if over or output != shown or statuses:
                return Step(output, over, statuses)
            await run.wait_changed()

    async def _retried(self, run: Run) -> Run | None:
        """The run ended: if its ``final`` is the Gateway's rejection of the thinking level, it is settled here
        without a word of it in the message (the request has not shown it), and the turn goes again once, clamped
        to the levels the rejection named. None: not a rejection, or it could not go again (the rejection is then
        the reply: the Gateway's own words, which say what the model supports)."""
        retry, self.retry = self.retry, None
        terminal = run.renderer.terminal
        if retry is None or terminal is None or terminal.state != "final":
            return None
        rejection = rejection_in_final(terminal.message, terminal.text)
        table = self.keeper.table
        if rejection is None or table is None:
            return None
        log.info("runs.thinking_rejected run=%s level=%s (sent again)", run.run_id, rejection.level)
        again = await retry(run, rejection)
        if again is None:
            return None
        self.notes.extend(again.notes)
        # Settled as written: its message is the new run's, which the request streams and its writer finalizes.
        table.apply(run, WriteResult(WriteOutcome.WRITTEN))
        return again.run

    def request_ended(self) -> None:
        """Open WebUI's task for the request has ended (whatever ended it): the run goes to a writer."""
        run = self.run
        if run.life.state is not State.INLINE:
            return
        table = self.keeper.table
        run.writer.handover = HandoverState.DONE if table is not None else HandoverState.PENDING
        if table is None:
            # No connection now: the next connection's hello hands it over (``RunTable.on_hello``).
            log.info("runs.handover_waits run=%s (no Gateway connection now)", run.run_id)
            return
        log.info("runs.handover run=%s chat=%s message=%s", run.run_id, run.ref.chat_id, run.message_id)
        table.apply(run, Handover())


async def start_user_turn(
    keeper: InlineKeeper,
    table: Table,
    session_key: str,
    run_id: str,
    message: str,
    *,
    status: StatusLines | None = None,
    note: str | None = None,
    retry: Retry | None = None,
    **send: Any,
) -> InlineTurn:
    """Open the run ``INLINE``, hold its message for this process, send it. Raises ``UserTurnError``. ``status``: the
    turn's status lines as the request began them (a turn that waited for the reply before it). ``note``: one line
    said with the turn, once (the thinking level was clamped). ``retry``: see ``InlineTurn``."""
    ledger = keeper.ledger
    if ledger.get(session_key, run_id) is not None:
        raise UserTurnError("This message is already being answered.")
    run = ledger.open(session_key, run_id)
    if run is None:
        raise UserTurnError("This chat cannot be sent to the agent (its session key is not an Open WebUI chat's).")
    if status is not None:
        run.status = status
    table.apply(run, Inline())
    await _hold(keeper, table, run)
    params = {"sessionKey": session_key, "message": message, "idempotencyKey": run_id, **send}
    try:
        reply = await table.conn.request("chat.send", params)
    except GatewayError as exc:
        log.error("runs.send_failed run=%s error=%s", run_id, exc)
        # Nothing was started: the request writes its error line into M, and the run is done here.
        table.apply(run, WriteResult(WriteOutcome.WRITTEN))
        raise UserTurnError(f"The agent did not take the message: {exc}") from exc
    if isinstance(reply, dict) and "aborted" in reply and "status" not in reply:
        # The text was a stop command ("/stop", "stop" ...: the Gateway's own list): it aborted the session's runs
        # and started none (measured, tests/test_realgw_stop_command.py). Nothing will stream: say so.
        log.info("runs.sent_stop_command run=%s aborted=%s", run_id, reply.get("runIds"))
        table.apply(run, WriteResult(WriteOutcome.WRITTEN))
        raise UserTurnError("Stopped the agent's run." if reply.get("aborted") else "Nothing was running to stop.")
    status = reply.get("status") if isinstance(reply, dict) else None
    log.info("runs.sent run=%s status=%s", run_id, status)
    if status not in ("started", "in_flight", None):
        # The Gateway had already run it (a retried request): its end will not be streamed again; the
        # handover's writer finalizes M from the transcript.
        run.mark_missed(f"chat.send answered {status!r}: the run ran before")
        table.apply(run, Terminal(f"chat.send {status}"))
    return InlineTurn(keeper, run, retry, [note] if note else [])


async def _hold(keeper: InlineKeeper, table: Table, run: Run) -> None:
    """Record this process's writer as M's holder (Open WebUI made M with no writer): other processes then back
    off, and if this one dies the next one's reconcile finishes M. A database that refuses is logged: the turn is
    sent all the same (Open WebUI's request writes M; the handover tries the database again)."""
    try:
        result = await keeper.store.claim(
            run.ref.chat_id,
            run.message_id,
            run_id=run.run_id,
            writer=table.writer_id,
            alive=keeper.registry.may_be_alive,
            user_id=run.ref.user_id,
            create=False,
            adopt_writerless=True,
        )
    except StoreError as exc:
        log.error("runs.inline_hold_failed run=%s chat=%s error=%s", run.run_id, run.ref.chat_id, exc)
        return
    if isinstance(result, TakenOver) or (isinstance(result, AlreadyThere) and result.writer == table.writer_id):
        return
    log.warning("runs.inline_hold run=%s chat=%s result=%s", run.run_id, run.ref.chat_id, type(result).__name__)
