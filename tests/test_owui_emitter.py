"""The Open WebUI emitter (``owc/owui/emitter.py``) in guest mode, against a stand-in for Open WebUI's process.

``FakeOpenWebUI`` (``tests/owui/fake_surface.py``) behaves as Open WebUI 0.12.4's own objects do where owc touches
them. The real server is the W tier's. Plain asyncio, as
in ``test_owui_guest.py``: each test runs its own loop; nothing waits on a clock.
"""

from __future__ import annotations

import asyncio
from typing import Any

import trio

from owc.owui import guest
from owc.owui.emitter import OwuiEmitter

from owui.fake_surface import FakeOpenWebUI


def _run(body: Any) -> Any:
    with asyncio.Runner() as runner:
        result = runner.run(body())
    host = guest._HOST
    assert host is None or host.ended, f"a test left the guest running: {host!r}"
    return result


async def _idle(*, task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED) -> None:
    task_status.started(None)
    await trio.sleep_forever()


def test_events_reach_open_webuis_emitter_one_per_message() -> None:
    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await guest.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)

            async def writer() -> None:
                await emitter.emit("c", "m", "u", {"type": "chat:messages", "data": {}})
                await emitter.emit("c", "m", "u", {"type": "chat:completion", "data": {"output": []}})
                await emitter.emit("c", "m2", "u", {"type": "chat:active", "data": {"active": False}})

            await host.run_in_trio(writer)
            assert [(c, m, e["type"]) for _, c, m, e in owui.emitted] == [
                ("c", "m", "chat:messages"),
                ("c", "m", "chat:completion"),
                ("c", "m2", "chat:active"),
            ]
            assert owui.emitters_made == 2  # kept per message: Open WebUI's throttle state lives in it
        finally:
            await host.aclose()

    _run(body)


def test_a_writer_is_a_task_of_its_chat_with_a_live_copy_until_it_closes() -> None:
    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await guest.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            cancels: list[str] = []

            async def open_and_stream() -> str | None:
                task_id = await emitter.open_task("c", "m", lambda: cancels.append("m"))
                again = await emitter.open_task("c", "m", lambda: cancels.append("again"))
                assert again == task_id  # asked again (a carried run's next writer): the same task
                await emitter.save_stream("c", "m", [{"type": "message", "content": "so far"}])
                return task_id

            task_id = await host.run_in_trio(open_and_stream)
            assert task_id is not None and owui.item_tasks["c"] == [task_id]  # the tab's generating state
            assert owui.response_streams[task_id]["message_id"] == "m"  # the overlay a mid-run load applies
            await host.run_in_trio(emitter.clear_stream, "c", "m")
            assert task_id not in owui.response_streams
            held = list(owui.tasks.values())
            await host.run_in_trio(emitter.close_task, "c", "m")
            await asyncio.gather(*held)  # the held coroutine returns: the task ends normally
            assert owui.item_tasks["c"] == [] and cancels == []  # ended by its writer, not cancelled
            # A message with no task has no overlay to keep (Open WebUI looks only at the chat's tasks).
            await host.run_in_trio(emitter.save_stream, "c", "other", [])
            assert owui.response_streams == {}
        finally:
            await host.aclose()

    _run(body)


def test_stop_in_open_webui_reaches_the_writer_on_the_trio_side() -> None:
    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await guest.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            stopped = trio.Event()
            heard: list[str] = []

            def on_cancel() -> None:
                trio.lowlevel.current_task()  # raises outside Trio: the writer hears of it in Trio's context
                heard.append("stop")
                stopped.set()

            async def open_then_wait() -> None:
                await emitter.open_task("c", "m", on_cancel)
                await emitter.open_task("c", "m2", on_cancel)

            await host.run_in_trio(open_then_wait)
            assert await owui.stop_chat("c") == 2  # one Stop cancels every task of the chat
            await host.run_in_trio(stopped.wait)
            assert heard == ["stop", "stop"] and owui.item_tasks["c"] == []
            await host.run_in_trio(emitter.close_task, "c", "m")  # the writer's own end after a Stop: harmless
        finally:
            await host.aclose()

    _run(body)
