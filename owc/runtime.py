"""owc's one assembly: a connection to one Gateway, the keeper that turns its runs into messages, and the
ledger that carries runs across its connections. ``owc run``, the scenario player, the tests' harness, the
benches and the Open WebUI host all open it the same way::

    async with open_store(url) as store, open_runtime(config, store, emitter) as runtime:
        ...

Leaving the block closes the connection and cancels every writer. Nothing is written on the way out: a run that
has ended but is not finished is finished from its transcript by the next process's reconcile (its message is
``done: false`` in the database, which is what that pass looks for), never from a stream that may lack part of
it. (Inside Open WebUI, after the block, the messages held for runs still going are let go, ``release_held``, so
the next process streams them at once.)
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import trio

from owc import __version__, device, ids
from owc.emit import Emitter
from owc.emit.asker import Asker, NoAsker
from owc.emit.files import FileSink, NoFiles
from owc.gateway import GatewayClient, GatewayConfig, GatewayError, SessionClosed
from owc.gateway.connection import Connection
from owc.gateway.url import redact_url
from owc.logs import ErrorRing, collecting_errors, worker_name
from owc.registry import WRITERS, WriterRegistry
from owc.render import operator
from owc.render.status import StatusLines
from owc.rules import thinking as levels
from owc.runs import Ledger, RunKeeper
from owc.runs.inline import InlineTurn, UserTurnError, start_user_turn
from owc.runs.media import GatewayMedia, MediaDesk
from owc.runs.questions import QuestionDesk
from owc.runs.run import Run
from owc.runs.table import RECONCILE_LIMIT
from owc.store import TrioChatStore
from owc.store.store import REFUSALS, refusal_text


@attrs.frozen
class RuntimeConfig:
    """Where the Gateway is and how to talk to it. ``registry``: the process-wide writer registry unless a test
    stands for another process with its own. ``strict``: an illegal lifecycle input raises (tests)."""

    url: str = attrs.field(repr=lambda url: repr(redact_url(url)))  # a repr may be logged: no credentials
    token: str = attrs.field(repr=False)
    gateway: GatewayConfig = attrs.field(factory=GatewayConfig)
    registry: WriterRegistry = WRITERS
    strict: bool = False
    reconcile_limit: int = RECONCILE_LIMIT
    #: The usage line after each finished reply (``owc.render.usage``).
    usage_line: bool = True


log = logging.getLogger("owc.runs")


class RuntimeEnded(RuntimeError):
    """The runtime's block was ended under it, with no error to show: a ``trio.Cancelled`` reached the runtime's
    nursery from code that was not inside the cancel scope that had been cancelled (the block itself, or one of the
    runtime's tasks). The nursery then cancels itself, so the block is cancelled, and takes every ``Cancelled`` in
    it: left alone, ``async with open_runtime(...)`` would end as if the block had finished (``owc run`` exiting 0
    mid-service, the Open WebUI guest's runtime gone quiet). Trio's rule leaves a nursery no way to tell that
    ``Cancelled`` from its own, so the runtime says it: the block's ``Cancelled`` is the cause, and its text (Trio
    0.31 and later) names the task whose exception cancelled the nursery."""

    def __init__(self, cancelled: BaseException) -> None:
        why = str(cancelled) or type(cancelled).__name__
        super().__init__(f"owc's runtime ended before its block did, with no error to show ({why})")


#: ``Runtime.user_turn(model=...)``: leave the session's model as it is.
KEEP_MODEL = object()


class _Watch:
    """The run keeper as the client's connection handler, also keeping the last connection it attached to: when
    owc is not connected, that connection's close code and reason are the operator's first clue
    (``Runtime.snapshot``). Only a reference is kept; nothing is decided from it."""

    def __init__(self, keeper: RunKeeper) -> None:
        self.keeper = keeper
        self.last: Connection | None = None
        #: ``ErrorRing.total`` when the last connection closed: a connect failure logged after it is newer news.
        self.errors_at_close = 0
        self.ring: ErrorRing | None = None

    @asynccontextmanager
    async def attach(self, conn: Connection) -> AsyncIterator[Any]:
        self.last = conn
        try:
            async with self.keeper.attach(conn) as runs:
                yield runs
        finally:
            self.errors_at_close = self.ring.total if self.ring is not None else 0


class Runtime:
    def __init__(self, client: GatewayClient, keeper: RunKeeper, *, errors: ErrorRing | None = None) -> None:
        self.client = client
        self.keeper = keeper
        #: The last warnings and errors of owc's loggers while this runtime is open (the operator's view).
        self.errors = errors if errors is not None else ErrorRing()
        #: The worker name the operator's view and the log lines give this process (``owc.logs.worker_name``;
        #: ``owc run`` names it by its ``--instance``).
        self.worker = worker_name()
        #: The model each session was pinned to by this process (``sessions.patch``), so it is sent once.
        self._models: dict[str, object] = {}
        #: The Gateway's models as last listed (``owc.owui.models.GatewayModel``), shown when it cannot answer.
        self.gateway_models: list[Any] = []
        #: The agent whose chats this runtime shows (the Pipe's ``AGENT_ID``; ``owc run --agent``): what a chat's
        #: session key is made of where no request names it (the status view's routes).
        self.agent_id = "main"
        #: Thinking-level ladders learned from the Gateway's rejections, and the notes each chat has had (issue 28).
        self.thinking = levels.ThinkingMemory()

    @property
    def ledger(self) -> Ledger:
        return self.keeper.ledger

    async def release_held(self) -> int:
        """owc is closing for good inside Open WebUI (its shutdown), after this runtime closed: every message this
        process's writers held for a run still going is let go (``ChatStore.release``), so the next process (or
        another worker) takes it at once and streams the run, with its Stop, instead of standing by until the
        run's end for a writer that cannot answer. A message written by nobody is what a crash leaves anyway;
        this only says so sooner. Returns how many were let go."""
        released = 0
        for run in self.ledger.unsettled():
            if not run.life.claimed:
                continue
            try:
                if await self.keeper.store.release(
                    run.ref.chat_id, run.message_id, holds=self.keeper.registry.is_local
                ):
                    released += 1
            except Exception as exc:  # one message kept held is the crash case: the next process stands by
                log.warning("runs.release_failed run=%s: %s: %s", run.run_id, type(exc).__name__, exc)
        if released:
            log.info("runs.released messages=%d (the next process takes them at once)", released)
        return released

    async def snapshot(self) -> operator.Snapshot:
        """The operator's view of this runtime now (``owc.render.operator``): reads of its parts, and of the device
        file in a thread (its id and whether a device token is stored; never the token or the key)."""
        client, ledger = self.client, self.keeper.ledger
        conn = client.connection
        connected = conn is not None and not conn.closed
        watch = client.handler if isinstance(client.handler, _Watch) else None
        last = conn if connected else (watch.last if watch is not None else None)
        hello = last.hello if last is not None else None
        device_id, pairing, pairing_line = await self._pairing(connected)
        busy, waiting, threads_busy, threads_total = self.keeper.store.lane_figures()
        runs = [
            (
                run.ref.chat_id,
                operator.RunFigure(run.run_id, run.life.state.name, run.life.ended, run.writer_live),
            )
            for run in ledger.unsettled()
        ]
        return operator.Snapshot(
            owc_version=__version__,
            pid=os.getpid(),
            worker=self.worker,
            gateway=client.url,
            state=self._state(connected),
            why=None if connected else self._why(watch),
            server_version=hello.server_version if hello is not None else None,
            boot_id=hello.boot_id if hello is not None else None,
            protocol=hello.protocol if hello is not None else None,
            connections_opened=client.connections_opened,
            attempts=client.attempts,
            device_id=device_id,
            pairing=pairing,
            pairing_line=pairing_line,
            process_id=self.keeper.registry.process_id,
            writers=self.keeper.registry.live(),
            chats=operator.chats_of(runs),
            errors=tuple(line.line() for line in self.errors.lines()),
            errors_total=self.errors.total,
            lane_busy=busy,
            lane_waiting=waiting,
            threads_busy=threads_busy,
            threads_total=threads_total,
        )

    def _state(self, connected: bool) -> str:
        if connected:
            return "connected"
        if self.client.held:
            return "held"
        if self.client.backoff_until is not None:
            return "waiting"
        return "connecting"

    def _why(self, watch: _Watch | None) -> str:
        """Not connected: the refusal's line (it names the fix), else a connect failure logged since the last close,
        else that close's code and reason, else the attempt under way."""
        client = self.client
        if client.refusal is not None:
            return client.refusal.line
        if client.pairing is not None:
            return client.pairing
        since = self.errors.total - (watch.errors_at_close if watch is not None else 0)
        failures = [line for line in self.errors.lines()[-since:] if line.logger == "owc.gateway"] if since else []
        if failures:
            return failures[-1].message
        last = watch.last if watch is not None else None
        if last is not None:
            return f"the connection closed (code {last.close_code}): {last.close_reason or 'no reason given'}"
        return f"connecting to the Gateway (attempt {client.attempts})"

    async def _pairing(self, connected: bool) -> tuple[str | None, str, str]:
        """The device id, its pairing in one word (``owc.render.operator.Snapshot``) and in words."""
        client = self.client
        folder = client.config.device_dir
        if folder is None:
            return None, "off", "no device (the shared token alone: enough only on the Gateway's own loopback)"
        try:
            identity = await trio.to_thread.run_sync(device.load, folder)
        except (device.DeviceIdentityError, OSError) as exc:
            return None, "unknown", f"the device file cannot be read: {exc}"
        if identity is None:
            return None, "unpaired", "no device identity stored yet"
        if client.pairing is not None:
            return identity.device_id, "pending", f"waiting for approval: {client.pairing}"
        if identity.device_token is not None:
            return identity.device_id, "paired", "paired (its device token is stored)"
        if connected:
            return identity.device_id, "local", "let in without pairing (the Gateway's own loopback)"
        return identity.device_id, "unpaired", "not paired yet (no device token stored)"

    async def connected(self) -> None:
        """Until a connection has said hello-ok (an event, not a clock)."""
        await self.client.wait_connection()

    async def chat_session_key(self, agent_id: str, chat_id: str, sender_id: str) -> str:
        """The session key a message sent in chat ``chat_id`` goes to: the one its **owner's** id names, whoever
        sends it (issue 24, item 13). Open WebUI 0.12.4 lets another user write into a chat (a chat shared in
        ``continue`` mode to them, a folder shared so): the request then carries the owner's chat id and the
        sender as ``__user__``, and the reply is saved in the owner's row. One chat is one session, so the agent
        remembers the chat whoever writes in it, and the key's user is always one who sees the chat: the
        store's check (a key's user owns the chat it writes) holds for every turn, and a key naming anyone else
        never writes there. A chat the database cannot name an owner for (gone, unreadable) is sent under
        the sender's key, as before: the claim then finds what there is."""
        try:
            owner = await self.keeper.store.chat_owner(chat_id)
        except REFUSALS as exc:
            log.warning(
                "runs.chat_owner_unread chat=%s error=%s (sent under the sender's key)", chat_id, refusal_text(exc)
            )
            owner = None
        if owner is not None and owner != sender_id:
            log.info("runs.turn_in_anothers_chat chat=%s (the owner's session key)", chat_id)
        return ids.session_key(agent_id, owner or sender_id, chat_id)

    async def busy(self, session_key: str) -> bool:
        """A run this process knows is still going on the session: a user turn sent now waits for it
        (``user_turn``), and its tab says so ("Queued behind the current reply")."""
        return self.keeper.ledger.running_on(session_key)

    async def user_turn(
        self,
        session_key: str,
        run_id: str,
        message: str,
        *,
        model: str | object | None = KEEP_MODEL,
        status: StatusLines | None = None,
        thinking: str | None = None,
        **send: Any,
    ) -> InlineTurn:
        """Send a user's message as run ``run_id`` and stream it inline (``owc/runs/inline.py``). Waits for the
        connection's hello while the client is connecting; while it backs off after a failure, the Gateway is
        unreachable now and the turn is refused (``UserTurnError``) rather than held on a clock.

        A run still going on the session (an agent turn, the previous reply handed to a writer by "Send now") is
        waited for, on its own end, never steered into: the new run starts after it (case 7). ``model``: the
        Gateway model key to pin the session to first (None: the agent's default), unless it is pinned so.
        ``status``: the turn's status lines as its request began them (``owc.render.status``). ``thinking``: the
        thinking level the person asked for this turn (``owc.rules.thinking``: checked against the session's model,
        clamped down, sent as ``chat.send``'s ``thinking``; see ``_thinking_level``)."""
        ref = ids.parse_session_key(session_key)
        await self.keeper.until(
            lambda: not self.keeper.ledger.running_on(session_key), ref.chat_id if ref is not None else None
        )
        retried = False
        while True:
            table = self.keeper.table
            if table is not None and table.hello is not None and not table.conn.closed:
                if self.client.limited is not None:
                    raise UserTurnError(f"Your message was not sent: {self.client.limited}")
                if model is not KEEP_MODEL and self._models.get(session_key, KEEP_MODEL) != model:
                    await self._pin_model(table, session_key, model)
                if thinking is None:
                    return await start_user_turn(
                        self.keeper, table, session_key, run_id, message, status=status, **send
                    )
                clamped, model_key, known, has_row = await self._thinking_level(table, session_key, thinking, model)
                chat_id = ref.chat_id if ref is not None else session_key
                retry = None
                if not known and clamped.level is not None:
                    retry = partial(self._thinking_retry, session_key, run_id, message, thinking, send, has_row)
                return await start_user_turn(
                    self.keeper,
                    table,
                    session_key,
                    run_id,
                    message,
                    status=status,
                    note=self.thinking.note_once(chat_id, model_key, clamped),
                    retry=retry,
                    **_with_level(send, clamped.level),
                )
            refusal = self.client.refusal
            if self.client.held:
                # A refusal retrying cannot fix (a wrong token), held since: this message is a person's new
                # attempt (the Gateway's side may have been fixed meanwhile); refused again, it gets the line.
                if not retried:
                    retried = self.client.retry()
                    continue
                raise UserTurnError(refusal.reply if refusal is not None else "Your message was not sent.")
            if self.client.backoff_until is not None and refusal is not None:
                raise UserTurnError(refusal.reply)  # pairing, too many sign-ins, a Gateway still starting
            if self.client.backoff_until is not None:
                raise UserTurnError(
                    f"The OpenClaw Gateway ({self.client.url}) is not reachable right now: your message was not sent."
                )
            async with trio.open_nursery() as nursery:  # the first of: a connection moved, the client backs off

                async def first(wait: Callable[[], Awaitable[object]]) -> None:
                    await wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(first, self.keeper.changed)
                nursery.start_soon(first, self.client.wait_backing_off)
                nursery.start_soon(first, self.client.wait_held)

    async def _thinking_level(
        self, table: Any, session_key: str, asked: str, model: Any
    ) -> tuple[levels.Clamp, str | None, bool, bool]:
        """The level to send for ``asked``, the model it was checked for, whether its ladder was known, and whether
        the session had a row.

        One ``sessions.describe`` of the chat's session, at each turn that asks for a level (no cache: the session's
        model may change between turns, from any client; a read per turn is the only staleness-free rule without a
        clock). A session that has never run has no row (``{"session": null}``, measured): the ladder learned from an
        earlier rejection for the pinned model is used if there is one, else the level is sent unchecked and a
        rejection sends the turn again (``_thinking_retry``). owc pins every chat's model before its first turn
        (``_pin_model``, a ``sessions.patch`` that creates the session), so a chat of owc's own models has a row by
        now; the unchecked send is left for a chat of another agent's model and a read that failed."""
        row = None
        try:
            payload = await table.conn.request("sessions.describe", {"key": session_key})
            row = payload.get("session") if isinstance(payload, dict) else None
        except GatewayError as exc:
            log.warning("runs.thinking_unread key=%s error=%s (the level is sent unchecked)", session_key, exc)
        model_key = levels.model_of(row) or (model if isinstance(model, str) else None)
        if row is None and model_key is None:
            ref = ids.parse_session_key(session_key)
            model_key = self.thinking.agent_models.get(ref.agent_id) if ref is not None else None
        ladder = levels.ladder_of(row) or self.thinking.ladder(model_key)
        clamped = levels.clamp(asked, ladder, model_key)
        log.info(
            "runs.thinking key=%s asked=%s sent=%s model=%s ladder=%s",
            session_key,
            clamped.asked or "(not a level)",
            clamped.level or "(none)",
            model_key,
            ",".join(ladder.ids) if ladder is not None else "(unknown)",
        )
        return clamped, model_key, ladder is not None, row is not None

    async def _thinking_retry(
        self,
        session_key: str,
        run_id: str,
        message: str,
        asked: str,
        send: dict[str, Any],
        known_row: bool,
        rejected: Run,
        rejection: levels.Rejection,
    ) -> InlineTurn | None:
        """The Gateway refused the turn's level (its injected ``final``): learn the model's ladder from it, and
        send the same message again once, clamped to it, as a new run for the same reply message (the run id
        carries the same message id with another token). None: it could not be sent (the rejection stays the
        reply)."""
        ref = ids.parse_session_key(session_key)
        self.thinking.learn(rejection, new_session_of=ref.agent_id if ref is not None and not known_row else None)
        again = levels.clamp(asked, rejection.ladder, rejection.model)
        if again.level is not None and again.level == rejection.level:
            again = levels.Clamp(None, again.note, again.asked)  # never the refused level twice
        table = self.keeper.table
        if table is None or table.hello is None or table.conn.closed:
            log.warning("runs.thinking_retry_unsent run=%s (no connection)", run_id)
            return None
        retry_id = thinking_retry_run_id(run_id)
        log.info("runs.thinking_retry run=%s retry=%s sent=%s", run_id, retry_id, again.level or "(none)")
        try:
            return await start_user_turn(
                self.keeper,
                table,
                session_key,
                retry_id,
                message,
                status=rejected.status,
                note=self.thinking.note_once(ref.chat_id if ref else session_key, rejection.model, again),
                **_with_level(send, again.level),
            )
        except UserTurnError as exc:
            log.warning("runs.thinking_retry_failed run=%s: %s", run_id, exc)
            return None

    async def _pin_model(self, table: Any, session_key: str, model: Any) -> None:
        try:
            await table.conn.request("sessions.patch", {"key": session_key, "model": model})
        except GatewayError as exc:
            raise UserTurnError(f"The agent could not switch to the model {model or 'default'}: {exc}") from exc
        self._models[session_key] = model

    def reconfigure(self, url: str, token: str, gateway: GatewayConfig | None = None) -> None:
        """New connection settings (a valve saved in Open WebUI): the connection closes and the next opens with
        them at once (``GatewayClient.reconfigure``). Runs in flight are carried by the ledger, as across any
        reconnect; the store and the emitter stay."""
        self.client.reconfigure(url, token, gateway)

    def stop_chat(self, chat_id: str) -> int:
        """The user's Stop for ``chat_id``: the runs this process streams there are aborted and finalized."""
        table = self.keeper.table
        return table.stop(chat_id) if table is not None else 0

    async def drain(self) -> None:
        """Until every run whose end has arrived is settled or has no writer left (its connection closed): a
        graceful stop lets them finish over the open connection. Bounded by the transport's timers and the
        database's busy wait, never by a clock of its own."""
        await self.keeper.until(lambda: not any(run.writer_live and run.life.ended for run in self.ledger.unsettled()))

    async def settled(self) -> None:
        """Until the connection has read everything sent before this call (a request's reply comes after every
        event sent before it) and nothing is left to do: no writer at work, no ended run unfinished.

        A connection that drops is not settled until its successor's hello and reconcile are (a reconnect owes a
        reconcile: a run that ended meanwhile gets its message there). Its close may reach owc's reader after the
        round trip has already failed on the dead socket, so the run table can still stand for it and look quiet:
        a round trip the connection closed under (``SessionClosed``), or a connection gone by the time the table
        is quiet, counts for nothing, and the next hello is waited for (the transport's backoff is the only timer)."""
        rounds = 0
        while rounds < 2:  # a resync or a writer's own requests may follow the first round trip
            conn = await self.client.wait_connection()
            try:
                await conn.request("sessions.list", {"limit": 1})
            except SessionClosed:
                await self.client.wait_connection(newer_than=conn)
                continue
            except GatewayError:
                pass  # answered with an error, or not in time: the connection is still up, ``quiet`` judges
            await self.keeper.until(self.keeper.quiet)
            if conn.closed or self.client.connection is not conn:
                continue  # it dropped meanwhile: its successor owes a reconcile
            rounds += 1


def _with_level(send: dict[str, Any], level: str | None) -> dict[str, Any]:
    """``chat.send``'s extra params with the thinking level (none: the session's own default)."""
    return {**send, "thinking": level} if level is not None else dict(send)


def thinking_retry_run_id(run_id: str) -> str:
    """The run id of a turn sent again after its thinking level was refused: the same chat and reply message (the
    identity rule maps it to the same message), another token (the Gateway would answer the old key "in flight")."""
    ref = ids.parse_run_id(run_id)
    token = hashlib.sha256(f"{run_id}:thinking".encode()).hexdigest()[:12]
    if ref is None:
        return f"{run_id}-thinking-{token}"
    return ids.input_run_id(ref.chat_id, ref.message_id, token)


@asynccontextmanager
async def open_runtime(
    config: RuntimeConfig,
    store: TrioChatStore,
    emitter: Emitter,
    asker: Asker | None = None,
    files: FileSink | None = None,
) -> AsyncIterator[Runtime]:
    """``asker``: where the Gateway's questions are shown (``owc.owui.questions`` in Open WebUI; none: nowhere).
    ``files``: where the files agents make are kept (``owc.owui.files`` in Open WebUI; none: named as not kept).

    Raises ``RuntimeEnded`` when the runtime's own nursery ended the block under it (see there): never a silent end."""
    ended: BaseException | None = None  # what the block ended with, if it did not finish
    async with trio.open_nursery() as nursery:
        questions = QuestionDesk(asker if asker is not None else NoAsker())
        media = MediaDesk(store=store, emitter=emitter, files=files if files is not None else NoFiles())
        keeper = RunKeeper(
            store,
            emitter,
            config.registry,
            strict=config.strict,
            reconcile_limit=config.reconcile_limit,
            questions=questions,
            usage_line=config.usage_line,
            media=media,
        )
        watch = _Watch(keeper)
        client = GatewayClient(config.url, config.token, watch, config.gateway)
        questions.request = client.request
        media.request = client.request
        media.correct = keeper.corrections.add_marked
        keeper.status.request = client.request
        keeper.status.store, keeper.status.emitter = store, emitter
        await nursery.start(keeper.status.run)
        media.fetch = GatewayMedia(client.request, config.url, config.gateway).fetch
        await nursery.start(questions.run)
        await nursery.start(media.run)
        with collecting_errors() as ring:
            watch.ring = ring
            await nursery.start(client.run)
            try:
                yield Runtime(client, keeper, errors=ring)
            except BaseException as exc:
                ended = exc
                raise
            finally:
                nursery.cancel_scope.cancel()
    if ended is not None:
        # The block raised and the nursery let it go. A nursery ends only a Cancelled, and only when its own scope
        # was cancelled while no cancelled scope outside it shows; before the block ends, nothing here cancels that
        # scope but an error reaching the nursery (a task's, or the block's own). So this was no cancel from outside
        # the runtime: a Cancelled that no cancelled scope owned reached the nursery (``RuntimeEnded``).
        raise RuntimeEnded(ended) from ended
