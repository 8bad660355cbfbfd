"""The host bridge (``owc/owui/trio_host.py``): Trio as a guest on an asyncio loop, as Open WebUI hosts it.

Plain asyncio: each test is a sync function that runs its own loop (``asyncio.Runner``; uvloop too when the venv
has it), so pytest-trio's ``trio_mode`` does not touch it. Nothing waits on a clock: every wait is on an event or a
future of the other side; ``asyncio.sleep(0)`` only makes a cleanup take several loop passes, so a bridge that did
not wait for it would be seen not to.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import outcome
import pytest
import sniffio
import trio

from owc.owui import trio_host
from owc.owui.trio_host import AsyncioCancelled, HostClosed, HostError, HostMismatch, TrioHost

HAVE_UVLOOP = importlib.util.find_spec("uvloop") is not None


@pytest.fixture(
    params=[
        "asyncio",
        pytest.param("uvloop", marks=pytest.mark.skipif(not HAVE_UVLOOP, reason="uvloop is not installed")),
    ]
)
def run(request) -> Callable[[Callable[[], Awaitable[Any]]], Any]:
    """Run an async test body on a fresh loop of the parametrized kind; afterwards no guest run may be left
    behind (a stranded guest would make every later test fail to start with a confusing error)."""
    factory = None
    if request.param == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop

    def runner(body: Callable[[], Awaitable[Any]]) -> Any:
        with asyncio.Runner(loop_factory=factory) as loop_runner:
            return loop_runner.run(body())

    yield runner
    host = trio_host._HOST
    assert host is None or host.ended, f"a test left the guest running: {host!r}"


async def idle_main(*, task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED) -> None:
    task_status.started("idle-ready")
    await trio.sleep_forever()


@asynccontextmanager
async def hosted(main: trio_host.MainFn = idle_main) -> AsyncIterator[TrioHost]:
    host = await trio_host.start(main)
    try:
        yield host
    finally:
        await host.aclose()


def records(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "owc.owui" and r.getMessage().startswith(event)]


# --- start, round trips ------------------------------------------------------------------------------------------


def test_start_and_round_trip_both_ways(run) -> None:
    async def body() -> None:
        async with hosted() as host:
            assert host.running and host.started_value == "idle-ready"
            assert trio_host.current_host() is host

            async def asyncio_side(x: int) -> tuple[int, str, bool]:
                # Open WebUI's coroutines must see asyncio, not the Trio task that awaits them (httpx / anyio
                # pick their backend with sniffio).
                await asyncio.sleep(0)
                return x * 2, sniffio.current_async_library(), asyncio.current_task() is not None

            async def trio_side(x: int) -> tuple[str, tuple[int, str, bool]]:
                await trio.lowlevel.checkpoint()
                library = sniffio.current_async_library()
                return library, await host.run_in_asyncio(asyncio_side, x)

            assert await host.run_in_trio(trio_side, 21) == ("trio", (42, "asyncio", True))
            # Many crossings in a row, both ways, keep their order and values.
            results = [await host.run_in_trio(trio_side, i) for i in range(50)]
            assert [r[1][0] for r in results] == [2 * i for i in range(50)]
        assert host.ended and not host.running and trio_host.current_host() is None

    run(body)


def test_spawn_and_one_way_calls_reach_trio(run, caplog) -> None:
    async def body() -> None:
        async with hosted() as host:
            loop = asyncio.get_running_loop()
            seen: asyncio.Future[str] = loop.create_future()

            async def fire(value: str) -> None:
                await trio.lowlevel.checkpoint()
                seen.set_result(value)  # Trio completes an asyncio future directly: same thread

            host.spawn(fire, "spawned")
            assert await seen == "spawned"

            # A fire-and-forget's error is logged and contained: the host (every chat's writer) keeps running.
            failed: asyncio.Future[None] = loop.create_future()

            async def broken() -> None:
                loop.call_soon(failed.set_result, None)
                raise ValueError("spawned task broke")

            host.spawn(broken)
            await failed
            assert await host.run_in_trio(_echo, "still up") == "still up"
            [record] = records(caplog, "owui.spawned_failed")
            assert record.exc_info and isinstance(record.exc_info[1], ValueError)

            # The one-way crossing: asyncio sets a Trio event through the token.
            event = trio.Event()
            host.run_sync_soon(event.set)
            await host.run_in_trio(event.wait)
            assert event.is_set()

    run(body)


async def _echo(value: Any) -> Any:
    await trio.lowlevel.checkpoint()
    return value


# --- errors ------------------------------------------------------------------------------------------------------


def test_exceptions_propagate_both_ways(run) -> None:
    async def body() -> None:
        async with hosted() as host:

            async def trio_raises() -> None:
                await trio.lowlevel.checkpoint()
                raise ValueError("from trio")

            with pytest.raises(ValueError, match="from trio"):
                await host.run_in_trio(trio_raises)

            async def asyncio_raises() -> None:
                await asyncio.sleep(0)
                raise KeyError("from asyncio")

            async def trio_catches() -> str:
                with pytest.raises(KeyError, match="from asyncio"):
                    await host.run_in_asyncio(asyncio_raises)
                return "caught in trio"

            assert await host.run_in_trio(trio_catches) == "caught in trio"

            # An error raised across the bridge is the call's, not the host's: it keeps serving.
            assert host.running
            assert await host.run_in_trio(_echo, 7) == 7

    run(body)


def test_a_callback_that_raises_costs_only_itself(run, caplog) -> None:
    """Issue 24 item 10: a token callback's error used to end the whole guest run (owc for every chat); each
    crossing is guarded: the error is logged with its traceback and the host goes on serving."""

    async def body() -> None:
        async with hosted() as host:
            calls: list[str] = []

            def request_ended(run_id: str) -> None:  # as a handover, a Stop or a writer's cancel might fail
                calls.append(run_id)
                raise KeyError("the ledger had no such run")

            host.run_sync_soon(request_ended, "run-1")
            # The token's callbacks run in order: this call crosses after the bad one has run.
            assert await host.run_in_trio(_echo, "still up") == "still up"
            assert calls == ["run-1"] and host.running
            [record] = records(caplog, "owui.callback_failed")
            assert record.levelno == logging.ERROR and "fn=" in record.getMessage()
            assert "request_ended" in record.getMessage() and "run-1" not in record.getMessage()
            assert record.exc_info and isinstance(record.exc_info[1], KeyError)

            # Later one-way crossings still work, and so does a second bad one.
            event = trio.Event()
            host.run_sync_soon(request_ended, "run-2")
            host.run_sync_soon(event.set)
            await host.run_in_trio(event.wait)
            assert len(records(caplog, "owui.callback_failed")) == 2
        assert host.run_outcome is not None and isinstance(host.run_outcome, outcome.Value)
        assert not records(caplog, "owui.guest_failed")

    run(body)


def test_a_spawned_task_that_fails_while_the_host_closes_ends_the_guest_cleanly(run, caplog) -> None:
    """A fire-and-forget whose cleanup raises while the host closes fails with a group of its error and Trio's
    Cancelled: the error is logged as the task's, and the guest still ends cleanly (not as a failed guest)."""

    async def body() -> None:
        loop = asyncio.get_running_loop()
        inside: asyncio.Future[None] = loop.create_future()

        async def writer() -> None:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.sleep_forever)
                try:
                    loop.call_soon(inside.set_result, None)
                    await trio.sleep_forever()
                finally:
                    raise ValueError("cleanup broke")

        host = await trio_host.start(idle_main)
        host.spawn(writer)
        await inside
        await host.aclose()
        [record] = records(caplog, "owui.spawned_failed")
        assert record.exc_info and isinstance(record.exc_info[1], BaseExceptionGroup)
        assert record.exc_info[1].subgroup(ValueError) is not None
        assert isinstance(host.run_outcome, outcome.Value), host.run_outcome
        assert not records(caplog, "owui.guest_failed")

    run(body)


def test_asyncio_cancelled_from_its_own_side_is_an_error_in_trio(run) -> None:
    async def body() -> None:
        async with hosted() as host:
            loop = asyncio.get_running_loop()
            asyncio_task: asyncio.Future[asyncio.Task[Any]] = loop.create_future()

            async def waits_forever() -> None:
                asyncio_task.set_result(asyncio.current_task())
                await loop.create_future()

            async def trio_side() -> str:
                with pytest.raises(AsyncioCancelled):
                    await host.run_in_asyncio(waits_forever)
                return "trio saw AsyncioCancelled"

            call = asyncio.ensure_future(host.run_in_trio(trio_side))
            (await asyncio_task).cancel()  # e.g. the loop's own teardown, not the awaiting Trio task
            assert await call == "trio saw AsyncioCancelled"

    run(body)


# --- cancellation ------------------------------------------------------------------------------------------------


def test_asyncio_cancel_runs_trio_cleanup_before_cancelled_error(run) -> None:
    """Open WebUI's Stop cancels the Pipe's asyncio task: the Trio work it awaited is cancelled, and its cleanup
    (which itself needs several Trio checkpoints) has run before ``CancelledError`` reaches the asyncio side."""

    async def body() -> None:
        async with hosted() as host:
            loop = asyncio.get_running_loop()
            trio_started: asyncio.Future[None] = loop.create_future()
            order: list[str] = []

            async def trio_work() -> None:
                trio_started.set_result(None)
                try:
                    await trio.sleep_forever()
                except trio.Cancelled:
                    order.append("trio cancelled")
                    raise
                finally:
                    with trio.CancelScope(shield=True):
                        for _ in range(5):
                            await trio.lowlevel.checkpoint()
                    order.append("trio cleanup done")

            async def pipe() -> None:
                try:
                    await host.run_in_trio(trio_work)
                except asyncio.CancelledError:
                    order.append("asyncio cancelled")
                    raise

            task = asyncio.ensure_future(pipe())
            await trio_started
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert order == ["trio cancelled", "trio cleanup done", "asyncio cancelled"]
            assert await host.run_in_trio(_echo, "after stop") == "after stop"

    run(body)


def test_a_second_asyncio_cancel_still_waits_for_trio_cleanup(run) -> None:
    async def body() -> None:
        async with hosted() as host:
            loop = asyncio.get_running_loop()
            trio_started: asyncio.Future[None] = loop.create_future()
            in_cleanup: asyncio.Future[None] = loop.create_future()
            release = trio.Event()
            order: list[str] = []

            async def trio_work() -> None:
                trio_started.set_result(None)
                try:
                    await trio.sleep_forever()
                finally:
                    in_cleanup.set_result(None)
                    with trio.CancelScope(shield=True):
                        await release.wait()
                    order.append("trio cleanup done")

            task = asyncio.ensure_future(host.run_in_trio(trio_work))
            await trio_started
            task.cancel()
            await in_cleanup
            task.cancel()  # cancelled again while Trio's cleanup runs: still waits for it
            for _ in range(3):  # loop passes in which a bridge that gave up waiting would have ended the task
                await asyncio.sleep(0)
            assert not task.done()
            host.run_sync_soon(release.set)
            with pytest.raises(asyncio.CancelledError):
                await task
            assert order == ["trio cleanup done"]

    run(body)


def test_trio_cancel_cancels_the_asyncio_task_and_waits_for_it(run) -> None:
    async def body() -> None:
        async with hosted() as host:
            loop = asyncio.get_running_loop()
            order: list[str] = []
            asyncio_task: list[asyncio.Task[Any]] = []

            async def open_webui_call(started: trio.Event) -> None:
                asyncio_task.append(asyncio.current_task())  # type: ignore[arg-type]
                host.run_sync_soon(started.set)
                try:
                    await loop.create_future()
                except asyncio.CancelledError:
                    for _ in range(5):  # a cleanup that takes several loop passes
                        await asyncio.sleep(0)
                    order.append("asyncio cleanup done")
                    raise

            async def trio_side() -> bool:
                started = trio.Event()
                with trio.CancelScope() as scope:
                    async with trio.open_nursery() as nursery:

                        async def call() -> None:
                            try:
                                await host.run_in_asyncio(open_webui_call, started)
                            except trio.Cancelled:
                                order.append("trio cancelled")
                                raise

                        nursery.start_soon(call)
                        await started.wait()
                        scope.cancel()
                return scope.cancelled_caught

            assert await host.run_in_trio(trio_side) is True
            # One asyncio cancel, as Open WebUI's coroutines expect: the cleanup's five awaits all ran (an anyio cancel
            # scope would have cancelled the first of them again). The task is the host's group's: it ended, not
            # cancelled (a child ending cancelled would cancel the whole group).
            assert order == ["asyncio cleanup done", "trio cancelled"]
            assert asyncio_task[0].done() and not asyncio_task[0].cancelled()

    run(body)


# --- the asyncio side: every task owned (issue 26, item 4) ------------------------------------------------------


def test_every_asyncio_task_the_host_starts_is_its_groups(run) -> None:
    """A ``run_in_asyncio`` call and an owned task, started from a Trio task, from an asyncio task and from a loop
    callback (a done callback: where a Stop is heard), all run as children of the host's task group (anyio's own
    account of the parent); none is a bare task. Started from Trio's tick or a loop callback directly, anyio would
    have picked the wrong backend or none (module doc)."""

    async def body() -> None:
        async with hosted() as host:
            loop = asyncio.get_running_loop()
            parents: list[tuple[str, int | None, str]] = []

            async def note(where: str) -> str:
                parents.append((where, anyio.get_current_task().parent_id, sniffio.current_async_library()))
                return where

            async def from_trio() -> trio_host.OwnedTask:
                assert await host.run_in_asyncio(note, "run_in_asyncio") == "run_in_asyncio"
                return host.start_asyncio(note, "started from trio")

            from_a_trio_task = await host.run_in_trio(from_trio)
            assert from_a_trio_task.name.endswith("note")
            callback_started: asyncio.Future[trio_host.OwnedTask] = loop.create_future()
            done = loop.create_future()
            done.add_done_callback(lambda _: callback_started.set_result(host.start_asyncio(note, "from a callback")))
            done.set_result(None)
            owner: set[trio_host.OwnedTask] = set()
            started = host.start_asyncio(note, "from asyncio", owner=owner)
            assert owner == {started}
            for owned in (from_a_trio_task, started, await callback_started):
                await owned.wait()
            assert owner == set()  # an ended task leaves its owner's set
        assert {where for where, _, _ in parents} == {
            "run_in_asyncio",
            "started from trio",
            "from a callback",
            "from asyncio",
        }
        assert {(parent, library) for _, parent, library in parents} == {(id(host._life), "asyncio")}

    run(body)


def test_owned_tasks_end_with_their_owner_and_with_the_host(run, caplog) -> None:
    """An owner's cancel is one asyncio cancel (a cleanup that awaits runs whole), before its start the body never
    runs; a failing task is one line and costs nothing else; what is left running when the host closes is cancelled
    by the group (anyio's cancel: the shutdown's bound) and has finished before ``aclose`` returns; after that
    nothing starts."""

    async def body() -> None:
        loop = asyncio.get_running_loop()
        host = await trio_host.start(idle_main)
        order: list[str] = []
        owner: set[trio_host.OwnedTask] = set()
        inside: dict[str, asyncio.Future[None]] = {label: loop.create_future() for label in ("cancelled", "left")}

        async def forever(label: str) -> None:
            order.append(f"{label} started")
            inside[label].set_result(None)
            try:
                await loop.create_future()
            except asyncio.CancelledError:
                order.append(f"{label} cancelled")
                for _ in range(5):  # a cleanup of several loop passes, as Open WebUI's (a Redis release) may be
                    await asyncio.sleep(0)
                order.append(f"{label} cleaned up")
                raise

        never: list[str] = []
        unstarted = host.start_asyncio(forever, "unstarted", owner=owner, never_ran=lambda: never.append("told"))
        unstarted.cancel()  # before the group's task has started it
        cancelled = host.start_asyncio(forever, "cancelled", owner=owner)
        await inside["cancelled"]
        cancelled.cancel()
        await cancelled.wait()
        await unstarted.wait()
        assert order == ["cancelled started", "cancelled cancelled", "cancelled cleaned up"]
        assert never == ["told"] and owner == set()

        async def broken() -> None:
            raise ValueError("an owned task broke")

        await host.start_asyncio(broken).wait()
        [record] = records(caplog, "owui.asyncio_task_failed")
        assert "broken" in record.getMessage() and record.exc_info and isinstance(record.exc_info[1], ValueError)
        assert await host.run_in_trio(_echo, "still up") == "still up"

        left = host.start_asyncio(forever, "left", owner=owner)
        await inside["left"]
        await host.aclose()
        assert order[3:5] == ["left started", "left cancelled"] and left.done() and owner == set()
        assert host._life is not None and host._life.done()
        with pytest.raises(HostClosed):
            host.start_asyncio(forever, "too late")

    run(body)


def test_a_loop_torn_down_without_aclose_closes_the_guest_first(run, caplog) -> None:
    """The host's asyncio side cancelled by the loop (no shutdown hook ran): the guest is closed, and its cleanup's
    calls into asyncio are still served, because the group stays open until the guest run has ended."""

    async def body() -> None:
        loop = asyncio.get_running_loop()
        served: list[str] = []

        async def open_webui_cleanup() -> str:
            await asyncio.sleep(0)
            return "served"

        async def main(*, task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED) -> None:
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                with trio.CancelScope(shield=True):
                    served.append(await trio_host.process_host().run_in_asyncio(open_webui_cleanup))

        host = await trio_host.start(main)
        assert host._life is not None
        host._life.cancel()  # as asyncio.Runner's close, or uvicorn's, cancels what is left
        await host.wait_ended()
        await asyncio.wait((host._life,))
        assert served == ["served"] and host.ended and host._life.cancelled()
        assert isinstance(host.run_outcome, outcome.Value) and not records(caplog, "owui.guest_failed")
        assert loop.is_running()

    run(body)


# --- once per process, closing ------------------------------------------------------------------------------------


def test_once_per_process(run) -> None:
    async def body() -> None:
        starts: list[int] = []

        async def main(*, task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED) -> None:
            starts.append(1)
            await trio.lowlevel.checkpoint()
            task_status.started(len(starts))
            await trio.sleep_forever()

        # The startup Event Function and the first pipe() race to start: one guest run, one main.
        first, second = await asyncio.gather(trio_host.start(main), trio_host.start(main))
        try:
            assert first is second and starts == [1] and first.started_value == 1
            assert await trio_host.start(main) is first
            with pytest.raises(HostMismatch, match="idle_main"):
                await trio_host.start(idle_main)
            # A second guest run in this thread is what Trio refuses; the singleton never tries one.
            assert first.running
        finally:
            await first.aclose()
        # After the close, the process's host stays closed on this loop (a pipe() during shutdown).
        with pytest.raises(HostClosed):
            await trio_host.start(main)
        assert starts == [1]

    run(body)


def test_a_new_loop_gets_a_new_host(run) -> None:
    hosts = []

    async def body() -> None:
        async with hosted() as host:
            hosts.append(host)

    run(body)
    run(body)
    assert hosts[0] is not hosts[1] and all(h.ended for h in hosts)


def test_aclose_is_idempotent_and_closes_the_bridge(run) -> None:
    async def body() -> None:
        host = await trio_host.start(idle_main)
        await asyncio.gather(host.aclose(), host.aclose())
        await host.aclose()
        assert host.ended and host.closing and not host.running
        assert repr(host) == "<TrioHost main=idle_main ended>"
        with pytest.raises(HostClosed):
            await host.run_in_trio(_echo, 1)
        with pytest.raises(HostClosed):
            host.spawn(_echo, 1)
        with pytest.raises(HostClosed):
            host.run_sync_soon(print)

    run(body)


def test_aclose_with_work_still_running(run) -> None:
    """Closing cancels main, a running ``run_in_trio`` call, a spawned task and a Trio task awaiting an asyncio
    coroutine; it returns only once all of them finished, and the pending asyncio caller learns the host closed."""

    async def body() -> None:
        loop = asyncio.get_running_loop()
        order: list[str] = []

        async def main(*, task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED) -> None:
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                order.append("main ended")

        host = await trio_host.start(main)
        started = [loop.create_future() for _ in range(3)]

        def trio_forever(index: int, label: str) -> Callable[[], Awaitable[None]]:
            async def forever() -> None:
                started[index].set_result(None)
                try:
                    await trio.sleep_forever()
                finally:
                    order.append(f"{label} ended")

            return forever

        call_forever, spawned_forever = trio_forever(0, "call"), trio_forever(1, "spawned")

        async def open_webui_forever() -> None:
            started[2].set_result(None)
            try:
                await loop.create_future()
            finally:
                await asyncio.sleep(0)
                order.append("asyncio ended")

        async def trio_awaits_asyncio() -> None:
            await host.run_in_asyncio(open_webui_forever)

        call = asyncio.ensure_future(host.run_in_trio(call_forever))
        host.spawn(spawned_forever)
        host.spawn(trio_awaits_asyncio)
        await asyncio.gather(*started)

        await host.aclose()
        assert sorted(order) == ["asyncio ended", "call ended", "main ended", "spawned ended"]
        assert host.ended and host.run_outcome is not None and host.run_outcome.unwrap() is None
        with pytest.raises(HostClosed):
            await call

    run(body)


def test_aclose_while_the_host_starts(run) -> None:
    """The shutdown hook may run while the startup hook's ``start`` still waits for main: the start fails (the
    host never reports ready once closing), and nothing hangs."""

    async def body() -> None:
        host = TrioHost(asyncio.get_running_loop(), idle_main)
        host._launch()
        await host.aclose()
        assert host.ended
        with pytest.raises(HostError, match="before main"):
            await host._ready

    run(body)


# --- the guest's end is reported ----------------------------------------------------------------------------------


def test_a_guest_that_ends_with_an_error_is_logged(run, caplog) -> None:
    async def body() -> None:
        async def main(*, task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED) -> None:
            crash = trio.Event()
            task_status.started(crash)
            await crash.wait()
            raise RuntimeError("main broke")

        host = await trio_host.start(main)
        host.run_sync_soon(host.started_value.set)  # type: ignore[attr-defined]
        await host.wait_ended()  # not closed: the error is reported when it happens
        [record] = records(caplog, "owui.guest_failed")
        assert record.levelno == logging.ERROR
        error = record.exc_info[1] if record.exc_info else None
        assert isinstance(error, BaseExceptionGroup) and error.subgroup(RuntimeError) is not None
        assert host.ended and not host.running and trio_host.current_host() is None
        with pytest.raises(HostClosed):
            await host.run_in_trio(_echo, 1)

        # Not closed by anyone: the startup hook or a later pipe() call starts owc again rather than leaving the
        # process without it until a restart.
        async with hosted() as again:
            assert again is not host and again.running
        assert records(caplog, "owui.host_restart")

        await host.aclose()  # still fine on the ended host, and reports nothing twice
        assert len(records(caplog, "owui.guest_failed")) == 1
        # Closed (the shutdown hook's aclose): a later start on this loop is refused, as for a clean close.
        with pytest.raises(HostClosed):
            await trio_host.start(idle_main)

    run(body)


def test_a_main_that_fails_before_it_started(run, caplog) -> None:
    async def body() -> None:
        async def main(*, task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED) -> None:
            await trio.lowlevel.checkpoint()
            raise ValueError("bad configuration")

        with pytest.raises(HostError, match="before main") as info:
            await trio_host.start(main)
        cause = info.value.__cause__
        assert isinstance(cause, BaseExceptionGroup) and cause.subgroup(ValueError) is not None
        assert records(caplog, "owui.guest_failed")
        async with hosted() as host:
            assert host.running

    run(body)


def test_run_in_asyncio_outside_the_guest_is_refused(run) -> None:
    async def body() -> None:
        async with hosted() as host:
            pass

        async def noop() -> None:
            pass

        def in_plain_trio() -> None:
            async def trio_main() -> None:
                with pytest.raises(HostError, match="guest run"):
                    await host.run_in_asyncio(noop)

            trio.run(trio_main)

        # A plain trio.run in another thread (as the other tests do with MockClock): no loop of the host there.
        await asyncio.to_thread(in_plain_trio)

    run(body)
