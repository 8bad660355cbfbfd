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

from owui.fake_surface import FakeOpenWebUI, FakeTab


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
                task_id = await emitter.open_task("c", "m", "u", lambda: cancels.append("m"))
                again = await emitter.open_task("c", "m", "u", lambda: cancels.append("again"))
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


class _Writers:
    """Writers of chat ``c`` on the Trio side: each records a Stop it hears (in Trio's context)."""

    def __init__(self) -> None:
        self.heard: list[str] = []
        self.changed = trio.Event()

    def on_cancel(self, message_id: str) -> Any:
        def heard() -> None:
            trio.lowlevel.current_task()  # raises outside Trio: the writer hears of it in Trio's context
            self.heard.append(message_id)
            self.changed.set()
            self.changed = trio.Event()

        return heard

    async def wait_heard(self, count: int) -> None:
        while len(self.heard) < count:
            await self.changed.wait()


async def _settled(emitter: OwuiEmitter) -> None:
    """Until every question the cancels raised has been decided (or has ended)."""
    while pending := [a for asks in emitter._asks.values() for a in asks if not a.done()]:
        await asyncio.wait(pending)


async def _writing(host: Any, emitter: OwuiEmitter, writers: _Writers, *messages: str) -> None:
    """Open each message's task and introduce it to the tabs, as a writer does at its claim."""

    async def open_all() -> None:
        for m in messages:
            await emitter.open_task("c", m, "u", writers.on_cancel(m))
            await emitter.emit("c", m, "u", {"type": "chat:messages", "data": {"messages": {m: {"done": False}}}})

    await host.run_in_trio(open_all)


def _reannounced(owui: FakeOpenWebUI, message_id: str) -> list[dict[str, Any]]:
    return [
        e
        for _, _, m, e in owui.emitted
        if m == message_id and e["type"] == "chat:messages" and e["data"]["messages"][m] == {"id": m, "done": False}
    ]


def test_a_stop_the_page_recorded_stops_every_writer_of_the_chat() -> None:
    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await guest.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            tab = owui.open_tab("s1", "u", "c", answers=[{"hook": True, "kinds": ["stop"]}])
            await _writing(host, emitter, writers, "m", "m2")
            assert await owui.stop_chat("c") == 2  # the page's Stop cancels every task of the chat
            await host.run_in_trio(writers.wait_heard, 2)
            await _settled(emitter)
            assert sorted(writers.heard) == ["m", "m2"]  # each writer hears it once, though two cancels asked
            assert tab.calls and all(c["type"] == "execute" for c in tab.calls)
            assert _reannounced(owui, "m") == [] and _reannounced(owui, "m2") == []
            for m in ("m", "m2"):  # the writers' own end after the Stop
                await host.run_in_trio(emitter.close_task, "c", m)
            await asyncio.sleep(0)
            assert owui.item_tasks["c"] == []
        finally:
            await host.aclose()

    _run(body)


def test_send_now_keeps_the_writer_writing_under_a_new_task() -> None:
    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await guest.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            owui.open_tab("s1", "u", "c", answers=[{"hook": True, "kinds": ["send_now"]}])
            await _writing(host, emitter, writers, "m")
            [before] = owui.item_tasks["c"]
            so_far = [{"type": "message", "content": "so far"}]
            await host.run_in_trio(emitter.save_stream, "c", "m", so_far)
            assert await owui.stop_chat("c") == 1
            await _settled(emitter)
            assert writers.heard == []  # not stopped
            [after] = owui.item_tasks["c"]
            assert after != before  # registered again: the chat keeps a task, its overlay and Stop button
            assert before not in owui.response_streams  # Open WebUI dropped it with the task...
            assert owui.response_streams[after]["output"] == so_far  # ...and it is there again, before any flush
            await host.run_in_trio(emitter.save_stream, "c", "m", [{"type": "message"}])
            assert owui.response_streams[after]["output"] == [{"type": "message"}]
            assert _reannounced(owui, "m") == []  # the page's own next turn is the generating state
            await host.run_in_trio(emitter.close_task, "c", "m")
        finally:
            await host.aclose()

    _run(body)


def test_a_cancel_nobody_explains_keeps_writing_and_tells_the_tabs_it_goes_on() -> None:
    """No tab on the chat (a stop through the API), or a tab without the hook: never stopped on a guess."""

    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await guest.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            await _writing(host, emitter, writers, "m")
            await owui.stop_chat("c")
            await _settled(emitter)
            assert writers.heard == [] and len(owui.item_tasks["c"]) == 1
            assert len(_reannounced(owui, "m")) == 1  # back to the generating state in every tab
            tab = owui.open_tab("s1", "u", "c", answers=[{"hook": False, "kinds": []}])
            await owui.stop_chat("c")
            await _settled(emitter)
            assert writers.heard == [] and len(tab.calls) == 1 and len(_reannounced(owui, "m")) == 2
            # Final: nothing puts it back to done: false any more.
            final = {"type": "chat:messages", "data": {"messages": {"m": {"done": True}}}}
            await host.run_in_trio(emitter.emit, "c", "m", "u", final)
            await owui.stop_chat("c")
            await _settled(emitter)
            assert len(_reannounced(owui, "m")) == 2
            await host.run_in_trio(emitter.close_task, "c", "m")
        finally:
            await host.aclose()

    _run(body)


def test_bad_answers_count_for_nothing_and_other_users_tabs_are_not_asked() -> None:
    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await guest.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            owui.open_tab("s1", "u", "c", answers=[{"error": "Client session disconnected."}])
            owui.open_tab("s2", "u", "c", answers=["not an answer"])
            owui.open_tab("s3", "u", "c", answers=[{"hook": True, "kinds": ["explode", "stop"]}])
            owui.open_tab("s4", "u", "c", answers=[RuntimeError("socket closed")])
            other = owui.open_tab("other", "someone-else", "c", answers=[{"hook": True, "kinds": ["stop"]}])
            await _writing(host, emitter, writers, "m")
            await owui.stop_chat("c")
            await _settled(emitter)
            assert writers.heard == [] and other.calls == []
            assert len(_reannounced(owui, "m")) == 1  # as good as no answer at all
            await host.run_in_trio(emitter.close_task, "c", "m")
        finally:
            await host.aclose()

    _run(body)


def test_one_stop_decides_though_another_tab_never_answers() -> None:
    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await guest.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            silent = owui.open_tab("s0", "u", "c", answers=[FakeTab.HANG])
            owui.open_tab("s1", "u", "c", answers=[{"hook": True, "kinds": ["send_now", "stop"]}])
            await _writing(host, emitter, writers, "m")
            await owui.stop_chat("c")
            await host.run_in_trio(writers.wait_heard, 1)
            await _settled(emitter)  # the Stop decided: the question to the silent tab ended with it
            assert writers.heard == ["m"] and silent.hung and silent.hung[0].cancelled()
            await host.run_in_trio(emitter.close_task, "c", "m")
        finally:
            await host.aclose()

    _run(body)


def test_a_question_still_open_ends_with_the_chats_last_writer() -> None:
    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await guest.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            silent = owui.open_tab("s0", "u", "c", answers=[FakeTab.HANG])
            await _writing(host, emitter, writers, "m")
            await owui.stop_chat("c")
            await silent.hanging.wait()
            [asked] = emitter._asks["c"]
            await host.run_in_trio(emitter.close_task, "c", "m")  # the run ended: the question goes with it
            await asyncio.wait([asked])
            assert asked.cancelled() and silent.hung[0].cancelled() and writers.heard == []
            await asyncio.sleep(0)
            assert owui.item_tasks["c"] == []  # the task registered again after the cancel ended too
        finally:
            await host.aclose()

    _run(body)


def test_the_page_hook_goes_to_the_tabs_when_the_message_is_introduced_and_to_tabs_that_join_later() -> None:
    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await guest.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            owui.open_tab("s1", "u", "c")
            await host.run_in_trio(emitter.open_task, "c", "m", "u", writers.on_cancel("m"))
            assert owui.executed() == []  # no tab holds the message yet: an execute would be dropped
            await _writing(host, emitter, writers, "m")
            assert owui.executed() == [("u", "c", "m")]
            [(_, _, _, install)] = [x for x in owui.emitted if x[3]["type"] == "execute"]
            assert emitter.asker in install["data"]["code"] and "const FRESH = true" in install["data"]["code"]
            output = [{"type": "message"}]
            await host.run_in_trio(emitter.save_stream, "c", "m", output)
            assert len(owui.executed()) == 1  # the same room: nothing to send
            owui.room_only["c"] = {"s-reloaded"}  # a reload: a new session joined the chat's room
            await host.run_in_trio(emitter.save_stream, "c", "m", output)
            await host.run_in_trio(emitter.save_stream, "c", "m", output)
            assert len(owui.executed()) == 2
            later = [x for x in owui.emitted if x[3]["type"] == "execute"][-1][3]
            assert "const FRESH = false" in later["data"]["code"]  # a Stop recorded before must still count
            # A second writer of the chat is introduced: the chat had the hook, so not fresh.
            await _writing(host, emitter, writers, "m2")
            assert (
                "const FRESH = false" in [x for x in owui.emitted if x[3]["type"] == "execute"][-1][3]["data"]["code"]
            )
            # The final message introduces nothing.
            final = {"type": "chat:messages", "data": {"messages": {"m": {"done": True}}}}
            await host.run_in_trio(emitter.emit, "c", "m", "u", final)
            assert len(owui.executed()) == 3
            for m in ("m", "m2"):
                await host.run_in_trio(emitter.close_task, "c", m)
            await _writing(host, emitter, writers, "m3")  # the chat had no writer left: fresh again
            assert "const FRESH = true" in [x for x in owui.emitted if x[3]["type"] == "execute"][-1][3]["data"]["code"]
            await host.run_in_trio(emitter.close_task, "c", "m3")
        finally:
            await host.aclose()

    _run(body)


def test_a_writer_that_closes_while_its_cancel_is_handled_leaves_no_task_behind() -> None:
    """Review finding: a cancel, then the writer's own close before the cancel's handling began, registered a
    new task nobody would ever release (the chat stayed "generating")."""

    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await guest.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            await _writing(host, emitter, writers, "m", "m2")
            [first, second] = owui.item_tasks["c"]
            held = owui.tasks[first]

            def writer_closes(_: Any) -> None:
                # Runs right after owc's own done callback scheduled the cancel's handling, before its first step:
                # the writer's close (it awaits nothing) comes in between.
                closing = emitter.close_task("c", "m")
                try:
                    closing.send(None)
                except StopIteration:
                    pass

            held.add_done_callback(writer_closes)
            held.cancel()
            await asyncio.wait([held])
            await _settled(emitter)
            assert owui.item_tasks["c"] == [second] and writers.heard == []
            await host.run_in_trio(emitter.close_task, "c", "m2")
        finally:
            await host.aclose()

    _run(body)


def test_a_cancel_before_the_message_is_introduced_is_asked_about_once_the_tabs_hold_it() -> None:
    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await guest.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            tab = owui.open_tab("s1", "u", "c", answers=[{"hook": True, "kinds": ["stop"]}])
            await host.run_in_trio(emitter.open_task, "c", "m", "u", writers.on_cancel("m"))
            await owui.stop_chat("c")  # before the claim: the tab does not hold the message yet
            for _ in range(5):
                await asyncio.sleep(0)
            assert tab.calls == []  # an execute about a message the tab lacks would be dropped: not sent yet
            intro = {"type": "chat:messages", "data": {"messages": {"m": {"done": False}}}}
            await host.run_in_trio(emitter.emit, "c", "m", "u", intro)
            await host.run_in_trio(writers.wait_heard, 1)
            assert writers.heard == ["m"] and len(tab.calls) == 1
            assert owui.executed() == []  # no install over the pending question (its mark would skip the stop)
            await host.run_in_trio(emitter.close_task, "c", "m")
        finally:
            await host.aclose()

    _run(body)


def test_a_writer_registered_again_is_told_its_new_task_id_in_trio() -> None:
    """Issue 24, item 11: after a cancel that was not a Stop ("Send now"), the writer is registered under a new
    task id and its ``on_task_id`` is awaited with that id, on the Trio side (so M's ``meta.task_id`` can name
    a live task); two cancels in a row end with the newest id told last. A writer that closes meanwhile is told
    nothing (no write outlives its task)."""

    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await guest.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            owui.open_tab("s1", "u", "c", answers=[{"hook": True, "kinds": ["send_now"]}] * 3)
            told: list[str] = []
            changed = trio.Event()

            async def on_task_id(task_id: str) -> None:
                trio.lowlevel.current_task()  # raises outside Trio
                await trio.lowlevel.checkpoint()
                told.append(task_id)
                changed.set()

            async def open_it() -> None:
                await emitter.open_task("c", "m", "u", writers.on_cancel("m"), on_task_id)
                await emitter.emit("c", "m", "u", {"type": "chat:messages", "data": {"messages": {"m": {}}}})

            await host.run_in_trio(open_it)
            [before] = owui.item_tasks["c"]
            assert await owui.stop_chat("c") == 1
            await _settled(emitter)
            await asyncio.gather(*[n for ns in emitter._namings.values() for n in ns])
            [after] = owui.item_tasks["c"]
            assert after != before and told == [after] and writers.heard == []
            await owui.stop_chat("c")
            await owui.stop_chat("c")
            await _settled(emitter)
            await asyncio.gather(*[n for ns in emitter._namings.values() for n in ns])
            [newest] = owui.item_tasks["c"]
            assert told[-1] == newest and newest not in told[:-1]
            await host.run_in_trio(emitter.close_task, "c", "m")
            assert emitter._namings == {}
        finally:
            await host.aclose()

    _run(body)


def test_a_stop_of_a_reply_in_a_chat_shared_with_its_sender_is_asked_of_the_senders_tabs() -> None:
    """Issue 24, item 13: in a chat shared in ``continue`` mode, the reply of the user who continued it carries that
    user's ``user_id`` and Open WebUI's Stop reaches its task by it, while owc's writer (the chat's session key) is
    the owner's. The question after the cancel goes to the tabs of the message's own user: its sender's Stop stops
    it (asked of the owner's tabs, it was taken for "Send now" and the run went on)."""

    async def body() -> None:
        owui = FakeOpenWebUI()
        owui.authors[("c", "m")] = "bea"  # Open WebUI's reply stub, made by insert_chat_turn for the sender
        host = await guest.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            sender = owui.open_tab("s-bea", "bea", "c", answers=[{"hook": True, "kinds": ["stop"]}])
            owner = owui.open_tab("s-ann", "u", "c")  # the owner has the chat open too, and did nothing
            await _writing(host, emitter, writers, "m")  # the writer runs under the owner's key ("u")
            await owui.stop_chat("c")
            await _settled(emitter)
            assert sender.calls and owner.calls == [] and _reannounced(owui, "m") == []
            await host.run_in_trio(writers.wait_heard, 1)
            assert writers.heard == ["m"]
            await host.run_in_trio(emitter.close_task, "c", "m")
        finally:
            await host.aclose()

    _run(body)
