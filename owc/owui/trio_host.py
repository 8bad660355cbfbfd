"""Trio as a guest on Open WebUI's asyncio loop: owc's host bridge (issue 12).

Open WebUI serves from one asyncio loop per process (uvicorn's; uvloop when installed). owc is written on Trio, so
inside Open WebUI it runs as a Trio *guest* on that loop (``trio.lowlevel.start_guest_run``): Trio's scheduler
ticks are loop callbacks and only its I/O wait sits in a helper thread. owc's tasks and Open WebUI's coroutines
therefore share the loop thread, and owc may call Open WebUI's in-process objects (its emitters, ``Chats``,
``tasks``) without locks. (Reference: ``pipe-runtime-0.12.4.md`` sections 9 and 10.)

What this module keeps, and why:

* **One guest run per process** (``start``): Trio refuses a second run in a thread while one is active, and Open
  WebUI re-executes a Function's file on every save, so the singleton lives here, in the installed package, and
  never in a Function file.
* **The loop thread never blocks waiting for Trio**: both sides share it, so a blocking wait (``trio.from_thread``
  on the loop thread) would deadlock. Every crossing here is an ``await`` on one side and a callback on the other.
* **asyncio wakes Trio only through the Trio token** (``TrioToken.run_sync_soon``): ``Event.set``, ``start_soon``
  and ``CancelScope.cancel`` need Trio's run context. The other way, Trio code runs on the loop thread, so it may
  complete an asyncio future directly; it starts asyncio work only through the host's task group (below).
* **No asyncio task without an owner** (issue 26, item 4): the host's asyncio side is an anyio task group entered
  for the host's whole life (``_asyncio_side``), opened before the guest run starts and closed only after it has
  ended, so every Trio call into asyncio is served to the end. Every asyncio task owc starts in Open WebUI's
  process is a task of that group (``start_asyncio``): a ``run_in_asyncio`` call, and the tasks the emitter and the
  page start for a chat or a session, which their owner holds (``OwnedTask``) and cancels when the chat's writers
  are done. ``aclose`` returns once the group has ended, so nothing owc started outlives owc. The group's task is
  the one task owc makes outside a group: it is the group's host, and nothing on Open WebUI's side lives as long
  as owc does to hold it (the lifespan is Open WebUI's own, and owc may start later, from a ``pipe()`` call).
* **An owner's cancel is one asyncio cancel** (``OwnedTask.cancel``), not an anyio cancel scope's: the tasks run
  Open WebUI's coroutines (its emitter, Redis), written for asyncio's one-shot cancel, and a cancelled anyio scope
  cancels its task again at every await until it leaves (measured: a cleanup's second await was cancelled), which
  would cut their cleanup short (a Redis connection's release). The group's own scope is anyio's, at the host's end.
* **Every owned task is started by the group's own task** (``start_asyncio`` hands it over on a memory object
  stream, whose ``send_nowait`` needs no backend): anyio picks its backend by asking sniffio, which says "trio"
  inside Trio's tick and nothing in a loop callback (a Stop's done callback). Measured on anyio 4.16: a task started
  from a Trio task got a Trio cancel scope and failed at its first step, which cancelled the whole group; one
  started from a loop callback raised ``NoEventLoopError``.
* **Cancellation crosses both ways and waits for the other side's cleanup**: a Stop in Open WebUI (an asyncio
  cancel of the awaiting task) cancels the Trio work and returns only once its ``finally`` blocks ran; a Trio cancel
  of an awaited Open WebUI coroutine cancels its asyncio task and waits (shielded) until it has finished.
* **The guest's end is observed**: an error outcome is logged with its traceback when it happens, never dropped.
* **Every crossing into Trio is guarded, here and only here** (``_soon``): Trio runs a token callback outside any
  task and treats its error as an internal error that ends the whole guest run, i.e. owc for every chat of the
  process. So each callback (the host's own and every caller's ``run_sync_soon``: a request's handover, a Stop, a
  writer's cancel) runs inside ``_guarded``, which logs an ``Exception`` with its traceback
  (``owui.callback_failed fn=...``) and returns: it costs at most the run the callback was for. Tasks that cross
  (``run_in_trio``, ``spawn``) keep their errors out of the host's nursery the same way (the caller's future, or
  ``owui.spawned_failed``); an owned asyncio task's error is logged (``owui.asyncio_task_failed``), never the
  group's.

No timer here: every wait ends on an event of the other side.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar, TypeVarTuple, Unpack

import anyio
import attrs
import outcome
import trio
from anyio.streams.memory import MemoryObjectSendStream

log = logging.getLogger("owc.owui")

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

#: owc's Trio main: called as ``main(task_status=...)`` in the host's nursery (``nursery.start``); it reports
#: ``task_status.started(value)`` once it is ready to serve, then runs until the host closes.
MainFn = Callable[..., Awaitable[object]]


class HostError(RuntimeError):
    """The host cannot do what was asked (a base for the errors below, and for a start that failed)."""


class HostClosed(HostError):
    """The host is closing or has ended: no new call crosses, and a call that was running when it closed ends."""


class HostMismatch(HostError):
    """``start`` asked for another main than the one the process's host runs."""


class AsyncioCancelled(HostError):
    """An asyncio coroutine awaited from Trio was cancelled from the asyncio side (not by the awaiting Trio task),
    e.g. by the loop's own teardown. An ``Exception``, because ``asyncio.CancelledError`` inside Trio would look
    like a crash of the Trio task rather than an error of the call."""


def _name(fn: object) -> str:
    """A callable's name for a log line. A ``functools.partial`` is named by its function: its arguments (a
    user's turn text, a session key) never reach the log."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__qualname__", None) or type(fn).__qualname__


def _guarded(fn: Callable[..., object], args: tuple) -> None:
    """(In Trio, via the token.) Call ``fn(*args)``; its ``Exception`` is logged with its traceback and goes no
    further, because Trio would end the whole guest run for it (every chat of the process). A ``BaseException``
    (``KeyboardInterrupt``, ``SystemExit``) still goes on: it is meant to end the process."""
    try:
        fn(*args)
    except Exception:
        log.exception("owui.callback_failed fn=%s", _name(fn))


def _soon(token: trio.lowlevel.TrioToken, fn: Callable[[Unpack[Ts]], object], *args: *Ts) -> None:
    """The one way this module crosses into Trio: ``fn(*args)`` soon, guarded (``_guarded``). Raises
    ``trio.RunFinishedError`` once the guest run has ended, as ``TrioToken.run_sync_soon`` does."""
    token.run_sync_soon(_guarded, fn, args)


def _only_cancelled(exc: BaseException) -> bool:
    """``trio.Cancelled``, alone or as the only kind in an exception group (a nursery inside the call)."""
    if isinstance(exc, trio.Cancelled):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(trio.Cancelled)[1] is None
    return False


@attrs.define(eq=False, repr=False)
class OwnedTask:
    """An asyncio task of the host's task group, started for an owner (``TrioHost.start_asyncio``): a chat's
    handling of a cancel, a session's hook, a Trio task's call into asyncio. The owner holds it to end it early."""

    name: str
    #: Set once the task has ended (or will never run): ``done`` / ``wait``.
    _ended_fut: asyncio.Future[None]
    #: The owner's set of its running tasks: the task is in it from its start until it has ended.
    owner: set[OwnedTask] | None = None
    #: Called when the body never ran (cancelled before it started, or the host ended first).
    never_ran: Callable[[], object] | None = None
    cancel_requested: bool = attrs.field(init=False, default=False)
    _task: asyncio.Task[Any] | None = attrs.field(init=False, default=None)

    def __repr__(self) -> str:
        return f"<OwnedTask {self.name}{' cancelled' if self.cancel_requested else ''}>"

    def cancel(self) -> None:
        """End the task: one asyncio cancel, as Open WebUI's coroutines expect (see the module doc); before its body
        started, the body never runs. From the loop thread (asyncio side or a Trio task of the host)."""
        self.cancel_requested = True
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def done(self) -> bool:
        """The task has ended (or never ran)."""
        return self._ended_fut.done()

    async def wait(self) -> None:
        """(asyncio side) Until the task has ended; a cancel of the waiter leaves the task alone."""
        await asyncio.wait((self._ended_fut,))

    def _ended(self) -> None:
        if self.owner is not None:
            self.owner.discard(self)
        if not self._ended_fut.done():
            self._ended_fut.set_result(None)


@attrs.define(eq=False, repr=False)
class TrioHost:
    """owc's Trio run hosted on one asyncio loop. Made by ``start`` (one per process), closed by ``aclose``.

    The host owns one Trio nursery for the guest run's whole life: ``main`` runs in it, and so does every call
    that crosses from asyncio (``run_in_trio``, ``spawn``), so closing the host cancels them all and the guest run
    ends only once each has finished. On the asyncio side it owns one anyio task group, for longer: from before the
    guest run starts until after it has ended; every asyncio task owc starts is in it (``start_asyncio``).
    """

    loop: asyncio.AbstractEventLoop
    main: MainFn
    #: What ``main`` reported with ``task_status.started(value)``.
    started_value: object = attrs.field(init=False, default=None)
    #: The guest run's outcome once it has ended (``None`` while it runs).
    run_outcome: outcome.Outcome[None] | None = attrs.field(init=False, default=None)
    _ready: asyncio.Future[object] = attrs.field(init=False)
    _finished: asyncio.Future[None] = attrs.field(init=False)
    _token: trio.lowlevel.TrioToken | None = attrs.field(init=False, default=None)
    _nursery: trio.Nursery | None = attrs.field(init=False, default=None)
    _closing: bool = attrs.field(init=False, default=False)
    #: The asyncio side's waits on ``run_in_trio`` calls, failed by the guest's end should any be left over.
    _calls: set[asyncio.Future[Any]] = attrs.field(init=False, factory=set)
    _started_at: float = attrs.field(init=False, default=0.0)
    #: Where ``start_asyncio`` hands a task to the asyncio side's task group (None before it opened; closed once
    #: the guest run has ended: no task starts then).
    _starts: MemoryObjectSendStream[tuple[OwnedTask, Callable[..., Awaitable[object]], tuple]] | None = attrs.field(
        init=False, default=None
    )
    #: The task the group lives in (``_asyncio_side``), from ``_launch`` until after the guest run has ended.
    _life: asyncio.Task[None] | None = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        self._ready = self.loop.create_future()
        self._finished = self.loop.create_future()

    def __repr__(self) -> str:
        state = "ended" if self.ended else "closing" if self._closing else "running" if self.running else "starting"
        return f"<TrioHost main={_name(self.main)} {state}>"

    # --- state ------------------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Started (``main`` reported ready), not closing, not ended: calls may cross."""
        return (
            self._ready.done()
            and not self._ready.cancelled()
            and self._ready.exception() is None
            and not self._closing
            and not self._finished.done()
        )

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def ended(self) -> bool:
        """The guest run has finished (its done callback ran)."""
        return self._finished.done()

    @property
    def token(self) -> trio.lowlevel.TrioToken:
        """The guest run's Trio token: the only way asyncio code may wake Trio (``run_sync_soon``)."""
        if self._token is None:
            raise HostError("the Trio guest has not been started")
        return self._token

    # --- life -------------------------------------------------------------------------------------------------

    def _launch(self) -> None:
        """Start the host on ``self.loop`` (from a coroutine running on it): its asyncio side, which opens the task
        group and then starts the guest run in it. ``main`` starts at Trio's first tick; ``_ready`` resolves when it
        reported started, or fails when the run ended before (or could not start)."""
        self._started_at = time.perf_counter()
        # The one task owc makes outside a task group: the group's own host (module doc). Owned by this host:
        # ``aclose`` waits for it, and its end is observed (``_asyncio_side_ended``).
        name = f"owc-host {_name(self.main)}"
        self._life = self.loop.create_task(self._asyncio_side(), name=name)  # task-ok: this host (aclose awaits it)
        self._life.add_done_callback(self._asyncio_side_ended)

    async def _asyncio_side(self) -> None:
        """The host's asyncio side for its whole life: the task group every asyncio task owc starts belongs to, and
        the task that starts them (``start_asyncio`` hands each over through a memory object stream, so each starts
        from this task, where anyio sees asyncio: module doc). Open before the guest run starts and until it has
        ended (a closing guest's cleanup still awaits Open WebUI's coroutines through it); then what owners left
        running is cancelled and waited for."""
        cancelled: asyncio.CancelledError | None = None
        send, receive = anyio.create_memory_object_stream(math.inf)  # bounded by the callers: one entry per start
        async with anyio.create_task_group() as group, receive:
            self._starts = send
            try:
                self._launch_guest()
            except HostError:
                pass  # reported by _guest_done (logged, and start() raises it), which also closed ``send``
            while True:
                try:
                    owned, afn, args = await receive.receive()
                except anyio.EndOfStream:  # the guest run has ended (_guest_done): nothing more can be asked
                    break
                except asyncio.CancelledError as exc:
                    # The loop is tearing the host down without aclose: the guest closes first, served to its end.
                    cancelled = cancelled or exc
                    self._close_guest()
                    continue
                group.start_soon(self._run_owned, owned, afn, args, name=owned.name)
            group.cancel_scope.cancel()
        if cancelled is not None:
            raise cancelled

    def _asyncio_side_ended(self, life: asyncio.Task[None]) -> None:
        """The host's asyncio side ended. If it ended before the guest run started (cancelled before its first
        step: a loop closing right after ``start``), nothing else would ever end the host: its end is reported here."""
        self._close_starts()
        error = None if life.cancelled() else life.exception()
        if error is not None:
            log.error("owui.host_asyncio_failed main=%s", _name(self.main), exc_info=error)
        if not self._finished.done() and self._token is None:
            ended = HostClosed("owc's host ended before its guest run started")
            if error is not None:
                ended.__cause__ = error
            self._guest_done(outcome.Error(ended))

    def _launch_guest(self) -> None:
        """(In the host's asyncio side, its group open.) Start the guest run on ``self.loop``."""
        try:
            trio.lowlevel.start_guest_run(
                self._guest,
                run_sync_soon_threadsafe=self.loop.call_soon_threadsafe,
                run_sync_soon_not_threadsafe=self.loop.call_soon,
                done_callback=self._guest_done,
                # asyncio / uvloop (and uvicorn's handlers) own the signal wakeup fd: Trio must leave it alone.
                host_uses_signal_set_wakeup_fd=True,
            )
        except RuntimeError as exc:  # "Attempted to call run() from inside a run()"
            error = HostError(f"cannot start owc's Trio guest: a Trio run is already active in this thread ({exc})")
            error.__cause__ = exc
            self._guest_done(outcome.Error(error))  # logged; a waiter (aclose) does not hang on a run never started
            raise error from exc
        # Trio's documented contract: once start_guest_run returns, sync Trio calls such as current_trio_token work
        # from the host. Taking the token now means aclose always has a way in, even before Trio's first tick.
        self._token = trio.lowlevel.current_trio_token()
        log.debug("owui.guest_launched main=%s", _name(self.main))

    async def _guest(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            if self._closing:  # aclose came before Trio's first tick
                nursery.cancel_scope.cancel()
            value = await nursery.start(self._run_main)
            self.started_value = value
            if not self._closing:  # (main may report started without a checkpoint after aclose: not ready then)
                self._ready.set_result(value)  # completing an asyncio future from Trio: same thread
                log.info(
                    "owui.host_started main=%s start_ms=%.2f",
                    _name(self.main),
                    (time.perf_counter() - self._started_at) * 1000,
                )
            # The nursery stays open until aclose cancels it: calls and spawned tasks run in it even if main returns.
            await trio.sleep_forever()  # timer-ok: no clock; parks the nursery's body until aclose cancels it

    async def _run_main(self, *, task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED) -> None:
        await self.main(task_status=task_status)
        if not self._closing:
            # owc's main is meant to run until shutdown; its early end is worth a line, not the host's end.
            log.warning("owui.main_returned main=%s (the host keeps serving until it is closed)", _name(self.main))

    def _close_guest(self) -> None:
        """Ask the guest run to end (from the loop's asyncio side). Before it started, ``_guest`` sees ``_closing``
        at its first tick."""
        self._closing = True
        if self._token is None:
            return
        try:
            _soon(self._token, self._cancel_guest)
        except trio.RunFinishedError:
            pass  # ended meanwhile: its done callback is queued on the loop

    def _cancel_guest(self) -> None:
        """(In Trio, via the token.) Cancel everything the host runs; the guest run then ends."""
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
        # Else _guest has not run yet and will see _closing.

    def _guest_done(self, result: outcome.Outcome[None]) -> None:
        """Trio's done callback, on the loop thread once the guest run has finished."""
        self.run_outcome = result
        main = _name(self.main)
        if isinstance(result, outcome.Error):
            log.error(
                "owui.guest_failed main=%s closing=%s error=%s",
                main,
                self._closing,
                type(result.error).__name__,
                exc_info=result.error,
            )
            ended: HostError = HostClosed(f"owc's Trio guest ended with an error ({type(result.error).__name__})")
            ended.__cause__ = result.error
        else:
            log.info("owui.guest_ended main=%s closing=%s", main, self._closing)
            ended = HostClosed("owc's Trio host has closed")
        if not self._ready.done():
            failed = HostError(f"owc's Trio guest ended before main {main} reported started")
            failed.__cause__ = result.error if isinstance(result, outcome.Error) else ended
            self._ready.set_exception(failed)
            self._ready.exception()  # retrieved: the failure is logged above, and start() raises it if awaited
        for fut in self._calls:
            if not fut.done():
                fut.set_exception(ended)
        self._finished.set_result(None)
        self._close_starts()  # the asyncio side starts what was asked, then cancels what is left and ends

    def _close_starts(self) -> None:
        if self._starts is not None:
            self._starts.close()

    async def aclose(self) -> None:
        """Cancel everything the host runs (main, calls, spawned tasks), wait until the guest run has ended, then
        until the asyncio side's task group has (every asyncio task owc started has finished).

        Idempotent; any number of callers may wait (never a task the host owns: it would wait for itself). The wait
        is shielded: a cancel of the caller (a shutdown cancelling leftover tasks) does not cut it short; it is
        re-raised once the host has ended. The guest's error outcome, if any, was logged when it ended; it is not
        raised here, so a shutdown always proceeds.
        """
        if not self._closing and not self._finished.done():
            log.info("owui.host_closing main=%s", _name(self.main))
            self._close_guest()
        self._closing = True
        await _wait_shielded(self._finished)
        if self._life is not None:
            await _wait_shielded(self._life)

    async def wait_ended(self) -> None:
        """Wait, shielded like ``aclose``, until the guest run ends, without asking it to."""
        await _wait_shielded(self._finished)

    # --- asyncio -> Trio -------------------------------------------------------------------------------------

    def _check_open(self) -> trio.lowlevel.TrioToken:
        if self._closing or self._finished.done() or self._token is None:
            raise HostClosed("owc's Trio host is closed" if self._token else "owc's Trio host has not started")
        return self._token

    async def run_in_trio(self, afn: Callable[[Unpack[Ts]], Awaitable[T]], *args: *Ts) -> T:
        """From asyncio: run ``afn(*args)`` as a Trio task in the host's nursery and return its result.

        Its exception propagates to the caller (the host keeps running). A cancel of the awaiting asyncio task
        (Open WebUI's Stop) cancels the Trio call and waits for its cleanup before ``CancelledError`` goes on, so
        nothing the call did outlives the caller. If the host closes meanwhile, the call raises ``HostClosed``.
        """
        token = self._check_open()
        fut: asyncio.Future[T] = self.loop.create_future()
        scope = trio.CancelScope()
        try:
            _soon(token, self._begin_call, fut, scope, afn, args)
        except trio.RunFinishedError:
            raise HostClosed("owc's Trio host has ended") from None
        self._calls.add(fut)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            # The caller was cancelled (fut itself is cancelled only after our own scope.cancel below).
            if not fut.done():
                try:
                    _soon(token, scope.cancel)
                except trio.RunFinishedError:
                    pass  # the guest ended: its done callback settles fut
                await _wait_shielded(fut)
            if not fut.cancelled() and fut.exception() is not None:
                log.warning(
                    "owui.trio_call_failed_after_cancel fn=%s error=%s",
                    _name(afn),
                    type(fut.exception()).__name__,
                    exc_info=fut.exception(),
                )
            raise
        finally:
            self._calls.discard(fut)

    def _begin_call(
        self, fut: asyncio.Future[Any], scope: trio.CancelScope, afn: Callable[..., Awaitable[Any]], args: tuple
    ) -> None:
        """(In Trio, via the token, guarded.) Whatever fails here settles the caller's future, so no caller waits
        for a call that never started."""
        try:
            if self._nursery is None:
                raise RuntimeError("no nursery yet")
            self._nursery.start_soon(self._call, fut, scope, afn, args, name=_name(afn))
        except RuntimeError:  # the nursery is closed: the host is closing
            if not fut.done():
                fut.set_exception(HostClosed("owc's Trio host closed before the call started"))
        except Exception as exc:
            if not fut.done():
                fut.set_exception(exc)

    async def _call(
        self, fut: asyncio.Future[Any], scope: trio.CancelScope, afn: Callable[..., Awaitable[Any]], args: tuple
    ) -> None:
        try:
            with scope:
                result = await afn(*args)
        except Exception as exc:
            # The call's own error belongs to its asyncio caller, not to the host's nursery.
            if not fut.done():
                fut.set_exception(exc)
            return
        except BaseException as exc:
            # Trio's own: the host is closing (Cancelled from its nursery) or the run is being torn down. The
            # caller learns the host closed; the exception goes on so Trio can unwind.
            if not fut.done():
                error = HostClosed("owc's Trio host closed while the call ran")
                if not _only_cancelled(exc):
                    error.__cause__ = exc
                fut.set_exception(error)
            raise
        if fut.done():
            return
        if scope.cancelled_caught:
            fut.cancel()  # the caller cancelled and is only waiting for this cleanup
        else:
            fut.set_result(result)

    def spawn(self, afn: Callable[[Unpack[Ts]], Awaitable[object]], *args: *Ts) -> None:
        """From asyncio: start ``afn(*args)`` as a Trio task in the host's nursery; fire and forget.

        A fire-and-forget has no caller to hand its error to. The error is logged with its traceback and stays
        there: in the host's nursery it would cancel everything owc runs in this process (every chat's writer) for
        one failed task. Use ``run_in_trio`` when the caller needs the outcome.
        """
        token = self._check_open()
        try:
            _soon(token, self._begin_spawn, afn, args)
        except trio.RunFinishedError:
            raise HostClosed("owc's Trio host has ended") from None

    def _begin_spawn(self, afn: Callable[..., Awaitable[object]], args: tuple) -> None:
        try:
            if self._nursery is None:
                raise RuntimeError("no nursery yet")
            self._nursery.start_soon(self._spawned, afn, args, name=_name(afn))
        except RuntimeError:
            log.warning("owui.spawn_dropped fn=%s reason=host_closing", _name(afn))

    async def _spawned(self, afn: Callable[..., Awaitable[object]], args: tuple) -> None:
        """A fire-and-forget in the host's nursery: its ``Exception`` is logged here. Only Trio's own unwinding
        (``Cancelled`` while the host closes, alone or left over from a group) goes on into the nursery."""
        try:
            await afn(*args)
        except Exception:
            log.exception("owui.spawned_failed fn=%s", _name(afn))
        except BaseExceptionGroup as group:  # errors beside Cancelled: the task failed as the host closed
            failed, rest = group.split(Exception)
            if failed is not None:
                log.error("owui.spawned_failed fn=%s", _name(afn), exc_info=failed)
            if rest is not None:
                raise rest from None

    def run_sync_soon(self, fn: Callable[[Unpack[Ts]], object], *args: *Ts) -> None:
        """From asyncio (or any thread): call ``fn(*args)`` soon inside Trio: the one-way crossing (set a
        ``trio.Event``, ``send_nowait`` into a memory channel, a request's handover, a Stop). Guarded (``_soon``):
        an error of ``fn`` is logged with its traceback (``owui.callback_failed``) and ends nothing else; the
        caller does not learn of it (the crossing is one-way), so ``fn`` should settle its own run's state."""
        token = self._check_open()
        try:
            _soon(token, fn, *args)
        except trio.RunFinishedError:
            raise HostClosed("owc's Trio host has ended") from None

    # --- the asyncio side: owned tasks ---------------------------------------------------------------------

    def start_asyncio(
        self,
        afn: Callable[[Unpack[Ts]], Awaitable[object]],
        *args: *Ts,
        owner: set[OwnedTask] | None = None,
        never_ran: Callable[[], object] | None = None,
    ) -> OwnedTask:
        """Start ``afn(*args)`` as an asyncio task of the host's task group, for ``owner`` (a set the task is kept
        in while it runs, so the owner can cancel what it started: ``OwnedTask.cancel``). From the loop thread: the
        asyncio side or a Trio task of this host.

        The task is started by the group's own task, never from inside Trio's tick nor a loop callback (module doc).
        Its ``Exception`` is logged (``owui.asyncio_task_failed``) and goes no further: in the group it would cancel
        every task owc runs on the asyncio side. Raises ``HostClosed`` once the guest run has ended (the group then
        winds down)."""
        owned = OwnedTask(_name(afn), self.loop.create_future(), owner=owner, never_ran=never_ran)
        try:
            if self._starts is None:
                raise anyio.ClosedResourceError
            self._starts.send_nowait((owned, afn, args))  # no backend needed: it sets the waiting receiver's event
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise HostClosed("owc's host has ended on the asyncio side") from None
        if owner is not None:
            owner.add(owned)
        return owned

    async def _run_owned(self, owned: OwnedTask, afn: Callable[..., Awaitable[object]], args: tuple) -> None:
        """An owned task's body. Nothing leaves it but a ``BaseException`` meant to end the process: anyio reads a
        child that ends with an error, or cancelled, as a reason to cancel the whole group."""
        owned._task = asyncio.current_task()
        try:
            if owned.cancel_requested:
                _never_ran(owned)
                return
            await afn(*args)
        except asyncio.CancelledError:
            pass  # its owner's cancel, or the group's at the host's end: either way this task is done
        except Exception:
            log.exception("owui.asyncio_task_failed fn=%s", owned.name)
        except BaseExceptionGroup as group:  # an error beside a cancel, or KeyboardInterrupt / SystemExit inside
            failed, rest = group.split(Exception)
            if failed is not None:
                log.error("owui.asyncio_task_failed fn=%s", owned.name, exc_info=failed)
            if rest is not None and rest.split(asyncio.CancelledError)[1] is not None:
                raise rest from None
        finally:
            owned._ended()

    # --- Trio -> asyncio -------------------------------------------------------------------------------------

    async def run_in_asyncio(self, coro_fn: Callable[[Unpack[Ts]], Coroutine[Any, Any, T]], *args: *Ts) -> T:
        """From a Trio task of this host: run ``coro_fn(*args)`` as an asyncio task of the host's task group and
        return its result (how owc awaits Open WebUI's emitter, ``Chats`` and ``tasks``).

        Its exception propagates into Trio. A Trio cancel of the awaiting task cancels the asyncio task (once, as
        asyncio code expects) and waits, shielded, until it has finished, then the cancel goes on; an asyncio-side
        cancel of the task (not ours: the loop's teardown) raises ``AsyncioCancelled``.
        """
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not self.loop:
            raise HostError("run_in_asyncio is for Trio tasks of the host's guest run, on its loop")
        token = self.token
        # The call's outcome, set by its task; a future, which the Trio caller awaits through ``done``.
        fut: asyncio.Future[T] = self.loop.create_future()

        async def call() -> None:
            try:
                result = await coro_fn(*args)
            except asyncio.CancelledError:
                if not fut.done():
                    if owned.cancel_requested:
                        fut.cancel()  # ours: the Trio caller was cancelled and waits only for this cleanup
                    else:
                        fut.set_exception(
                            AsyncioCancelled(
                                f"the asyncio task of {_name(coro_fn)} was cancelled from the asyncio side"
                            )
                        )
                raise
            except BaseException as exc:
                if not fut.done():
                    fut.set_exception(exc)  # the call's error is its Trio caller's, not the group's
                if not isinstance(exc, Exception):
                    raise
            else:
                if not fut.done():
                    fut.set_result(result)

        def never_ran() -> None:
            if not fut.done():
                fut.cancel()  # cancelled before it started (the host's end cannot come first: Trio runs inside it)

        call.__qualname__ = _name(coro_fn)  # the task's name and any log line name the call, not this wrapper
        owned = self.start_asyncio(call, never_ran=never_ran)
        done = trio.Event()

        def wake(_fut: asyncio.Future[T]) -> None:
            try:
                _soon(token, done.set)  # Event.set needs Trio's run context
            except trio.RunFinishedError:
                pass  # nothing waits any more

        fut.add_done_callback(wake)
        try:
            await done.wait()
        except BaseException:
            owned.cancel()
            with trio.CancelScope(shield=True):
                await done.wait()
            _drop_after_cancel(fut, coro_fn)
            raise
        return fut.result()


def _never_ran(owned: OwnedTask) -> None:
    owned._ended()
    if owned.never_ran is not None:
        try:
            owned.never_ran()
        except Exception:
            log.exception("owui.asyncio_task_failed fn=%s", owned.name)


def _drop_after_cancel(fut: asyncio.Future[Any], coro_fn: object) -> None:
    """An asyncio call cancelled by Trio has finished: its outcome is not wanted, but an error it raised instead of
    ending cancelled is logged (and marked retrieved, so asyncio does not report it again at collection)."""
    if fut.cancelled():
        return
    error = fut.exception()
    if error is not None:
        log.warning(
            "owui.asyncio_call_failed_after_cancel fn=%s error=%s",
            _name(coro_fn),
            type(error).__name__,
            exc_info=error,
        )


async def _wait_shielded(fut: asyncio.Future[Any]) -> None:
    """Wait until ``fut`` is done, whatever cancels the waiting task meanwhile; a cancel is re-raised after.

    Used only where the other side is already ending (a cancelled call's cleanup, the guest's end), so the wait is
    bounded by that cleanup and by nothing else."""
    cancelled: asyncio.CancelledError | None = None
    while not fut.done():
        try:
            # asyncio.wait neither cancels fut nor raises its outcome: a CancelledError here is the caller's.
            await asyncio.wait((fut,))
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        raise cancelled


# --- the process's host ----------------------------------------------------------------------------------------

#: The process's host: the one process-wide object in owc besides the writer registry (``owc/registry.py``).
#: It has to be process-wide because Trio allows one run per thread and Open WebUI runs one loop per process:
#: the startup Event Function, every ``pipe()`` call and the shutdown hook must all find the same guest run, and
#: the Function files themselves are re-executed on every save, so they cannot hold it. One host per loop: once
#: closed, ``start`` on the same loop refuses (a ``pipe()`` call during shutdown must not start owc again); a new
#: loop (a test's next ``asyncio.run``) may start a new one once the old guest run has ended.
_HOST: TrioHost | None = None
#: The lock around ``start`` and the loop it serves: an ``asyncio.Lock`` belongs to the loop it is first contended
#: on, so a new loop gets a new lock. (A plain pair, not a weak mapping: uvloop's loops need not be weak-referable.)
_START_LOCK: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None


async def start(main: MainFn) -> TrioHost:
    """Start owc's Trio guest on the running loop with ``main`` in the host's nursery (``nursery.start``), and
    return the host once ``main`` reported started.

    Once per process: a later call returns the same host (after it has started), so the startup Event Function and
    the first ``pipe()`` may both call it; asking for another ``main`` raises ``HostMismatch``; a call after the
    host was closed on this loop raises ``HostClosed``. If ``main`` fails before it started, this raises
    ``HostError`` (the guest run has ended; a later call tries again, as it does after a guest that failed later).
    A cancel of the caller leaves the start going on for the next caller.
    """
    global _HOST, _START_LOCK
    loop = asyncio.get_running_loop()
    if _START_LOCK is None or _START_LOCK[0] is not loop:
        _START_LOCK = (loop, asyncio.Lock())
    async with _START_LOCK[1]:
        host = _HOST
        if host is not None and host.loop is loop and host.closing:
            raise HostClosed("owc's Trio host was closed on this loop")
        if host is not None and not host.ended:
            if host.loop is not loop:
                raise HostError("owc's Trio host is still running on another event loop: close it there first")
            if host.main is not main:
                raise HostMismatch(f"owc's Trio host runs {_name(host.main)}, not {_name(main)}")
        else:
            if host is not None and host.loop is loop:
                # It ended by itself (main failed; logged when it did): the startup hook or a pipe() call that
                # comes after tries again, rather than leaving the process without owc until a restart.
                log.warning("owui.host_restart main=%s previous=ended_with_error", _name(main))
            host = _HOST = TrioHost(loop, main)
            host._launch()
        await asyncio.shield(host._ready)  # shielded: a cancel of this caller leaves the start to the next one
        return host


def process_host() -> TrioHost | None:
    """The process's host in any state, also while its ``main`` is starting (``main`` itself may need it: the
    Open WebUI emitter crosses back to asyncio through it)."""
    return _HOST


def current_host() -> TrioHost | None:
    """The process's host if it runs (started, not closing), else ``None``."""
    host = _HOST
    return host if host is not None and host.running else None
