"""The Open WebUI emitter (``owc/owui/emitter.py``) in guest mode, against a stand-in for Open WebUI's process.

``FakeOpenWebUI`` (``tests/owui/fake_surface.py``) behaves as Open WebUI 0.12.4's own objects do where owc touches
them. The real server is the W tier's. Plain asyncio, as
in ``test_owui_trio_host.py``: each test runs its own loop; nothing waits on a clock.
"""

from __future__ import annotations

import asyncio
from typing import Any

import trio

from owc.owui import trio_host
from owc.owui.emitter import OwuiEmitter
from owc.owui.intent_hook import install_code

from owui.fake_surface import FakeOpenWebUI


def _run(body: Any) -> Any:
    with asyncio.Runner() as runner:
        result = runner.run(body())
    host = trio_host._HOST
    assert host is None or host.ended, f"a test left the guest running: {host!r}"
    return result


async def _idle(*, task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED) -> None:
    task_status.started(None)
    await trio.sleep_forever()


def test_events_reach_open_webuis_emitter_one_per_message() -> None:
    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await trio_host.start(_idle)
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
        host = await trio_host.start(_idle)
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
    """Until every cancel has been handled (registered again, its records read, decided)."""
    while pending := [a for asks in emitter._asks.values() for a in asks if not a.done()]:
        for ask in pending:
            await ask.wait()


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


def test_a_stop_the_page_tagged_stops_every_writer_it_cancelled() -> None:
    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await trio_host.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            await _writing(host, emitter, writers, "m", "m2")
            assert await owui.stop_chat("c", "stop") == 2  # the page's Stop cancels every task of the chat
            await host.run_in_trio(writers.wait_heard, 2)
            await _settled(emitter)
            assert sorted(writers.heard) == ["m", "m2"]  # each writer reads the one record and hears it once
            assert _reannounced(owui, "m") == [] and _reannounced(owui, "m2") == []
            for m in ("m", "m2"):  # the writers' own end after the Stop
                await host.run_in_trio(emitter.close_task, "c", m)
            await asyncio.sleep(0)
            assert owui.item_tasks["c"] == []
        finally:
            await host.aclose()

    _run(body)


def test_a_stop_whose_writer_callback_raises_costs_only_that_writer(caplog) -> None:
    """The guarded crossing (``trio_host._soon``), on the emitter's own paths into Trio: a writer's Stop callback and
    a user turn's that raise are one ``owui.callback_failed`` line each (named, without arguments); the guest run
    goes on, the other writer of the same Stop still hears it, and a later Stop is heard too: nothing else lost."""

    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await trio_host.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()

            def broken_writer() -> None:
                raise KeyError("the ledger had no such run")

            async def open_broken() -> None:
                await emitter.open_task("c", "bad", "u", broken_writer)
                await emitter.emit("c", "bad", "u", {"type": "chat:messages", "data": {"messages": {"bad": {}}}})

            await host.run_in_trio(open_broken)
            await _writing(host, emitter, writers, "m")
            assert await owui.stop_chat("c", "stop") == 2
            await host.run_in_trio(writers.wait_heard, 1)
            await _settled(emitter)
            assert writers.heard == ["m"] and host.running
            [failed] = [r for r in caplog.records if r.getMessage().startswith("owui.callback_failed")]
            assert "broken_writer" in failed.getMessage() and "ledger" not in failed.getMessage()
            assert failed.exc_info and isinstance(failed.exc_info[1], KeyError)

            # A user turn's request cancelled by a Stop, whose stop callback raises: the same, one line.
            mark = await emitter.stop_mark("c2")
            owui.record_stop("c2", "stop")
            emitter.decide_after_request_cancel("c2", "m2", "u", mark, broken_writer)
            for asked in list(emitter._inline_asks):
                await asked.wait()
            await host.run_in_trio(_checkpoint)  # the token's callbacks run in order: the bad one has run
            assert len([r for r in caplog.records if r.getMessage().startswith("owui.callback_failed")]) == 2

            # Still serving: a new writer's Stop is heard.
            await _writing(host, emitter, writers, "m3")
            await owui.stop_chat("c", "stop")
            await host.run_in_trio(writers.wait_heard, 2)
            assert writers.heard == ["m", "m3"] and host.running
            assert not [r for r in caplog.records if r.getMessage().startswith("owui.guest_failed")]
        finally:
            await host.aclose()

    _run(body)


async def _checkpoint() -> None:
    await trio.lowlevel.checkpoint()


def test_send_now_keeps_the_writer_writing_under_a_new_task() -> None:
    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await trio_host.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            await _writing(host, emitter, writers, "m")
            [before] = owui.item_tasks["c"]
            so_far = [{"type": "message", "content": "so far"}]
            await host.run_in_trio(emitter.save_stream, "c", "m", so_far)
            assert await owui.stop_chat("c", "send_now") == 1
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


def test_a_stop_before_the_task_began_is_not_its_own() -> None:
    """A Stop recorded for the chat before the writer's task existed (an earlier reply's) is not read by it: a
    later "Send now" keeps writing."""

    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await trio_host.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            owui.record_stop("c", "stop")  # a Stop pressed in this chat before (its task long gone)
            await _writing(host, emitter, writers, "m")
            await owui.stop_chat("c", "send_now")
            await _settled(emitter)
            assert writers.heard == [] and _reannounced(owui, "m") == []
            await host.run_in_trio(emitter.close_task, "c", "m")
        finally:
            await host.aclose()

    _run(body)


def test_a_stop_close_behind_a_send_now_wins() -> None:
    """Send now in one tab, Stop in another at once: the Stop's record lands after the first cancel and before
    its reading (its request found the writer's task cancelled, not yet registered again): the run is stopped."""

    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await trio_host.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            await _writing(host, emitter, writers, "m")
            await owui.stop_chat("c", "send_now")
            owui.record_stop("c", "stop")  # before the cancel's handling has run a step
            await host.run_in_trio(writers.wait_heard, 1)
            await _settled(emitter)
            assert writers.heard == ["m"]
            await host.run_in_trio(emitter.close_task, "c", "m")
        finally:
            await host.aclose()

    _run(body)


def test_a_cancel_nobody_explains_keeps_writing_and_tells_the_tabs_it_goes_on() -> None:
    """A stop request nobody tagged (the API's, a tab without the hook), another user's stop, or a stop owc could
    not tie to a user: never stopped on a guess; the tabs are told the message goes on, and get the hook."""

    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await trio_host.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            await _writing(host, emitter, writers, "m")
            hooks = len(owui.executed())
            await owui.stop_chat("c")  # no tag
            await _settled(emitter)
            assert writers.heard == [] and len(owui.item_tasks["c"]) == 1
            assert len(_reannounced(owui, "m")) == 1  # back to the generating state in every tab
            assert len(owui.executed()) == hooks + 1  # and the hook again: the tab's next Stop is told
            await owui.stop_chat("c", "stop", user_id="bea")  # bea's Stop is not about ann's task
            await _settled(emitter)
            await owui.stop_chat("c", "stop", user_id=None)  # nobody's: not even recorded
            await _settled(emitter)
            assert writers.heard == [] and len(_reannounced(owui, "m")) == 3
            # Final: nothing puts it back to done: false any more.
            final = {"type": "chat:messages", "data": {"messages": {"m": {"done": True}}}}
            await host.run_in_trio(emitter.emit, "c", "m", "u", final)
            await owui.stop_chat("c")
            await _settled(emitter)
            assert len(_reannounced(owui, "m")) == 3
            await host.run_in_trio(emitter.close_task, "c", "m")
        finally:
            await host.aclose()

    _run(body)


def test_records_that_cannot_be_read_make_a_cancel_unknown() -> None:
    """Open WebUI's Redis went away: a cancel is unknown (the run goes on), when the records cannot be read at the
    cancel, and when they could not be read when the task began (which of them are its own is unknown then)."""

    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await trio_host.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            await _writing(host, emitter, writers, "m")
            owui.records_fail = True
            await owui.stop_chat("c", "stop")
            await _settled(emitter)
            assert writers.heard == [] and len(_reannounced(owui, "m")) == 1
            await _writing(host, emitter, writers, "m2")  # began while the records were unreadable
            owui.records_fail = False
            await owui.stop_chat("c", "stop")
            await host.run_in_trio(writers.wait_heard, 1)
            await _settled(emitter)
            assert writers.heard == ["m"] and len(_reannounced(owui, "m2")) == 1  # m2's first cancel: unknown
            await owui.stop_chat("c", "stop")
            await host.run_in_trio(writers.wait_heard, 2)
            assert writers.heard == ["m", "m2"]  # its mark taken at that cancel: the next Stop is read
            for m in ("m", "m2"):
                await host.run_in_trio(emitter.close_task, "c", m)
        finally:
            await host.aclose()

    _run(body)


def test_the_page_hook_goes_to_the_tabs_when_the_message_is_introduced_and_to_tabs_that_join_later() -> None:
    """For a page loaded before owc patched Open WebUI (every later page has the hook from its load)."""

    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await trio_host.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            owui.open_tab("s1", "u", "c")
            await host.run_in_trio(emitter.open_task, "c", "m", "u", writers.on_cancel("m"))
            assert owui.executed() == []  # no tab holds the message yet: an execute would be dropped
            await _writing(host, emitter, writers, "m")
            assert owui.executed() == [("u", "c", "m")]
            [(_, _, _, install)] = [x for x in owui.emitted if x[3]["type"] == "execute"]
            assert install["data"]["code"] == install_code()
            output = [{"type": "message"}]
            await host.run_in_trio(emitter.save_stream, "c", "m", output)
            assert len(owui.executed()) == 1  # the same room: nothing to send
            owui.room_only["c"] = {"s-reloaded"}  # a reload: a new session joined the chat's room
            await host.run_in_trio(emitter.save_stream, "c", "m", output)
            await host.run_in_trio(emitter.save_stream, "c", "m", output)
            assert len(owui.executed()) == 2
            await _writing(host, emitter, writers, "m2")  # a second writer of the chat is introduced
            assert len(owui.executed()) == 3
            # The final message introduces nothing.
            final = {"type": "chat:messages", "data": {"messages": {"m": {"done": True}}}}
            await host.run_in_trio(emitter.emit, "c", "m", "u", final)
            assert len(owui.executed()) == 3
            for m in ("m", "m2"):
                await host.run_in_trio(emitter.close_task, "c", m)
        finally:
            await host.aclose()

    _run(body)


def test_a_writer_that_closes_while_its_cancel_is_handled_leaves_no_task_behind() -> None:
    """Review finding: a cancel, then the writer's own close before the cancel's handling began, registered a
    new task nobody would ever release (the chat stayed "generating")."""

    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await trio_host.start(_idle)
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


def test_a_stop_before_the_message_is_introduced_stops_at_once() -> None:
    """Cancelled before the claim (the tabs do not hold the message yet): the record decides, nothing waits for the
    tabs, and no hook goes to a tab that would drop it."""

    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await trio_host.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            owui.open_tab("s1", "u", "c")
            await host.run_in_trio(emitter.open_task, "c", "m", "u", writers.on_cancel("m"))
            await owui.stop_chat("c", "stop")
            await host.run_in_trio(writers.wait_heard, 1)
            assert writers.heard == ["m"] and owui.executed() == []
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
        host = await trio_host.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
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
            assert await owui.stop_chat("c", "send_now") == 1
            await _settled(emitter)
            for naming in [n for ns in emitter._namings.values() for n in ns]:
                await naming.wait()
            [after] = owui.item_tasks["c"]
            assert after != before and told == [after] and writers.heard == []
            await owui.stop_chat("c", "send_now")
            await owui.stop_chat("c", "send_now")
            await _settled(emitter)
            for naming in [n for ns in emitter._namings.values() for n in ns]:
                await naming.wait()
            [newest] = owui.item_tasks["c"]
            assert told[-1] == newest and newest not in told[:-1]
            await host.run_in_trio(emitter.close_task, "c", "m")
            assert emitter._namings == {}
        finally:
            await host.aclose()

    _run(body)


def test_a_stop_of_a_reply_in_a_chat_shared_with_its_sender_is_read_as_the_senders() -> None:
    """Issue 24, item 13: in a chat shared in ``continue`` mode, the reply of the user who continued it carries that
    user's ``user_id`` and Open WebUI's Stop reaches its task by it, while owc's writer (the chat's session key) is
    the owner's. The sender's Stop stops it; the owner's record is not about it (Open WebUI's stop cancels only
    the caller's own tasks)."""

    async def body() -> None:
        owui = FakeOpenWebUI()
        owui.authors[("c", "m")] = "bea"  # Open WebUI's reply stub, made by insert_chat_turn for the sender
        host = await trio_host.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            await _writing(host, emitter, writers, "m")  # the writer runs under the owner's key ("u")
            await owui.stop_chat("c", "stop", user_id="u")
            await _settled(emitter)
            assert writers.heard == [] and len(_reannounced(owui, "m")) == 1
            await owui.stop_chat("c", "stop", user_id="bea")
            await host.run_in_trio(writers.wait_heard, 1)
            assert writers.heard == ["m"]
            await host.run_in_trio(emitter.close_task, "c", "m")
        finally:
            await host.aclose()

    _run(body)


def test_a_user_turns_cancelled_request_is_stopped_only_by_a_stop_made_for_it() -> None:
    """A user turn's request (Open WebUI's own task) is cancelled: the stop request behind it decides, read from
    the mark taken when the turn began; ``on_stop`` is called on the Trio side for a Stop only."""

    async def body() -> None:
        owui = FakeOpenWebUI()
        host = await trio_host.start(_idle)
        try:
            emitter = OwuiEmitter(host, owui)
            writers = _Writers()
            owui.record_stop("c", "stop")  # an earlier reply's Stop
            for said, stopped in (("send_now", False), (None, False), ("stop", True)):
                mark = await emitter.stop_mark("c")
                owui.record_stop("c", said)
                emitter.decide_after_request_cancel("c", "m", "u", mark, writers.on_cancel(f"m-{said}"))
                for asked in list(emitter._inline_asks):
                    await asked.wait()
                if stopped:
                    await host.run_in_trio(writers.wait_heard, 1)
            assert writers.heard == ["m-stop"]
        finally:
            await host.aclose()

    _run(body)
