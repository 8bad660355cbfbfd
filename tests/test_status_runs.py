"""The status lines of a run's message as the writer, the run table and the cut wiring say them (issue 25 item 2),
end to end against the simulator: what the message's ``statusHistory`` holds in the database (where Open WebUI reads
it, the chat JSON and its ``chat_message`` row) and what the tabs were told, on each path: a tool, a Gateway drop and
return, a crash and the Gateway's recovery, a Stop, a cut nobody continues, a writer that fails, and the store's
closing of a line another party left open."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from owc import ids
from owc.render import status
from owc.render.seam import RECOVERED, SEAM_TEXTS
from owc.sim.script import End, Hold, Text

from fuzzing import PLAY_BOUND_S, virtual_time
from harness import open_env


@pytest.fixture(autouse=True)
def _clock(mock_clock):
    mock_clock.autojump_threshold = 5  # a restart's downtime and the reconnect backoff cost no real time
    return mock_clock


def said(message: dict[str, Any]) -> list[tuple[str, bool]]:
    return [(e["description"], e["done"]) for e in message.get("statusHistory") or []]


def told(env: Any, m: str) -> list[tuple[str, bool]]:
    return [(e.event["data"]["description"], e.event["data"]["done"]) for e in env.emitter.of(m, "status")]


async def mirrored(env: Any, chat_id: str, m: str) -> Any:
    """The message's ``chat_message.status_history`` (what Open WebUI reads first)."""
    from sqlalchemy import text

    def read() -> Any:
        with env.store.sync.engine.connect() as conn:
            value = conn.execute(
                text("select status_history from chat_message where id = :id"), {"id": f"{chat_id}-{m}"}
            ).scalar()
        return json.loads(value) if isinstance(value, str) else value

    return await trio.to_thread.run_sync(read)


async def test_a_tool_says_it_runs_and_is_done_and_the_finished_message_keeps_no_open_line(tmp_path) -> None:
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        run = env.sim.start_run(key, "tools", user_text="Check the disks")
        run.text("Checking.")
        await keeper.until(lambda: keeper.totals()[0] == 1)
        call = run.tool_start("exec", {"cmd": "df -h"})
        m = ids.message_id(key, "tools")
        await env.emitter.until(lambda: ("Running exec...", False) in told(env, m))
        stored = (await env.messages(chat_id))[m]
        assert said(stored) == [("Running exec...", False)], "a reloaded tab sees the line spinning, as stored"
        assert [e["description"] for e in await mirrored(env, chat_id, m)] == ["Running exec..."]
        run.tool_result(call, "/dev/vda 252G")
        run.text("All fine.").end()
        await env.settled()
        final = (await env.messages(chat_id))[m]
        assert final["done"] is True
        assert said(final) == [("Running exec...", False), ("exec done", True)]
        assert told(env, m) == said(final)
        assert await mirrored(env, chat_id, m) == final["statusHistory"]
        # The status line goes to the tabs before the final ``chat:messages`` that carries the stored list.
        types = [e.type for e in env.emitter.of(m)]
        assert types.index("status") < len(types) - 1 - types[::-1].index("chat:messages")


async def test_a_run_that_ends_with_a_tool_still_running_has_its_line_closed_by_the_finalize(tmp_path) -> None:
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        run = env.sim.start_run(key, "cut-tool")
        run.text("Starting.")
        run.tool_start("exec", {"cmd": "sleep 100"})
        await keeper.until(lambda: keeper.totals()[0] == 1)
        run.end("final")
        await env.settled()
        final = (await env.messages(chat_id))[ids.message_id(key, "cut-tool")]
        assert final["done"] is True and said(final)[-1] == ("exec done", True)


@pytest.mark.parametrize("stop", ["the writer's task", "the table"])
async def test_a_stop_says_stopped_and_closes_the_tool_line(tmp_path, stop: str) -> None:
    """Open WebUI's own progress rows stay spinning after a Stop (its bug #21350): owc's end with "Stopped"."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        run = env.sim.start_run(key, "stoppable", steps=[Text("Partial answer"), Hold()])
        await keeper.until(lambda: keeper.totals()[0] == 1)
        run.tool_start("exec", {"cmd": "make"})
        m = ids.message_id(key, "stoppable")
        await env.emitter.until(lambda: ("Running exec...", False) in told(env, m))
        if stop == "the table":
            assert keeper.table is not None and keeper.table.stop(chat_id) == 1
        else:
            assert env.emitter.cancel_task(chat_id, m)
        await env.settled()
        final = (await env.messages(chat_id))[m]
        assert final["done"] is True and final["content"] == "Partial answer"
        assert said(final) == [("Running exec...", False), ("Stopped", True)]
        assert told(env, m)[-1] == ("Stopped", True)


async def test_a_gateway_drop_is_said_while_it_lasts_and_closed_by_the_next_hello(tmp_path, mock_clock) -> None:
    """The frozen spinner of issue 25 item 2: while the connection is down the message says so (stored, so a tab
    loading the chat then sees it too); the next hello closes it with "Reconnected"; the run streams on."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        run = env.sim.start_run(key, "survivor", steps=[Text("Before the drop."), Hold()])
        await keeper.until(lambda: keeper.totals()[0] == 1)
        m = ids.message_id(key, "survivor")
        env.sim.disconnect()
        await env.clients["A"].wait_backing_off()  # down: its writer ended, saying why
        stored = (await env.messages(chat_id))[m]
        assert stored["done"] is False and said(stored) == [(status.DROPPED, False)]
        assert told(env, m) == [(status.DROPPED, False)]
        await keeper.until(lambda: keeper.table is not None and keeper.totals()[0] == 2)  # back, M taken over
        run.release()
        env.sim.active_run(key).text(" After it.").end()
        await env.settled()
        final = (await env.messages(chat_id))[m]
        assert final["done"] is True and final["content"] == "Before the drop. After it."
        assert said(final) == [(status.DROPPED, False), (status.RECONNECTED, True)]
        assert told(env, m) == said(final)


async def test_owc_shutting_down_says_nothing_of_a_drop(tmp_path) -> None:
    """A process that stops (its connection cancelled, not closed) writes nothing on the way out: the next process
    takes the message up (``owc/runtime.py``); no "connection lost" line for a Gateway that did not go away."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        env.sim.start_run(key, "held", steps=[Text("Working."), Hold()])
        await keeper.until(lambda: keeper.totals()[0] == 1)
        await env.kill("A")
        stored = (await env.messages(chat_id))[ids.message_id(key, "held")]
        assert stored["done"] is False and "statusHistory" not in stored


async def test_a_crash_and_the_gateways_recovery_are_said_and_the_seam_marks_the_continuation(tmp_path) -> None:
    """A crash cuts the run (the connection drops), the new boot's hello gives it to the Gateway (the owner rule, no
    timer): M waits for the recovery, saying so; the recovery links in, says it resumed, and its part begins with the
    seam (item 3). Every line is closed at the end."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        env.sim.plan_recovery(key, "R1", [Hold(), Text("Picked up after the crash."), End()])
        env.sim.start_run(key, "S", user_text="Do the long job").text("Working on the first half.")
        keeper = env.keepers["A"]
        await keeper.until(lambda: keeper.totals()[0] >= 1)
        m = ids.message_id(key, "S")
        await env.sim.restart("crash")
        await env.emitter.until(lambda: (status.WAIT_RECOVERY, False) in told(env, m))
        held = (await env.messages(chat_id))[m]
        assert held["done"] is False
        assert said(held) == [
            (status.DROPPED, False),
            (status.RECONNECTED, True),
            (status.WAIT_RECOVERY, False),
        ], "the tab is told: connection lost, back, waiting for the Gateway to resume it"
        env.sim.handle("R1").release()
        await env.settled()
        final = (await env.messages(chat_id))[m]
        assert final["done"] is True
        assert final["content"] == f"Working on the first half.\n{SEAM_TEXTS[RECOVERED]}\nPicked up after the crash."
        assert said(final) == [
            (status.DROPPED, False),
            (status.RECONNECTED, True),
            (status.WAIT_RECOVERY, False),
            (status.RESUMED_RECOVERY, True),
        ]
        assert told(env, m) == said(final)


async def test_a_cut_nobody_continues_closes_its_wait_line_with_the_note(tmp_path, mock_clock) -> None:
    """The Gateway was to recover the cut run and gives the recovery up (issue 24 item 7): M ends with the cut-off note
    (``Cuts._end_message``) and its wait line is closed, not left spinning on a finished message."""
    async with virtual_time(mock_clock), open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        env.sim.start_run(key, "S", user_text="Do the long job").text("Working on the first half.")
        await keeper.until(lambda: keeper.totals()[0] >= 1)
        m = ids.message_id(key, "S")
        env.sim.hold_recovery(key)
        await env.sim.restart("crash")
        await env.emitter.until(lambda: (status.WAIT_RECOVERY, False) in told(env, m))
        assert (await env.messages(chat_id))[m]["done"] is False
        env.sim.give_up_recovery(key)
        with trio.fail_after(PLAY_BOUND_S):
            await env.settled()
        final = (await env.messages(chat_id))[m]
        assert final["done"] is True and "could not recover" in final["error"]["content"]
        assert said(final)[-2:] == [(status.WAIT_RECOVERY, False), (status.NOT_RESUMED, True)]
        assert told(env, m)[-1] == (status.NOT_RESUMED, True)


async def test_a_writer_that_fails_closes_its_open_line(tmp_path) -> None:
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        run = env.sim.start_run(key, "doomed", steps=[Text("Partial."), Hold()])
        await keeper.until(lambda: keeper.totals()[0] == 1)
        run.tool_start("exec", {"cmd": "make"})
        m = ids.message_id(key, "doomed")
        await env.emitter.until(lambda: ("Running exec...", False) in told(env, m))
        real = env.store.write

        async def broken(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("disk on fire")

        env.store.write = broken  # the finalize fails with a bug-like error: the run is this writer's loss
        run.release()
        env.sim.active_run(key).end()
        await env.settled()
        env.store.write = real
        stored = (await env.messages(chat_id))[m]
        assert said(stored) == [("Running exec...", False), ("exec done", True)]


async def test_a_finishing_write_closes_a_line_another_party_left_open(tmp_path) -> None:
    """A line owc's machine did not open (another process's drop line, whose process died; a request's tool line)
    is closed by whatever write finishes the message (the store's ``settle``)."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        run = env.sim.start_run(key, "r", steps=[Text("Hello."), Hold()])
        await keeper.until(lambda: keeper.totals()[0] == 1)
        m = ids.message_id(key, "r")
        stored = (await env.messages(chat_id))[m]
        other = {"description": "Gateway connection lost, reconnecting", "done": False, "owc": "drop"}
        await env.store.save_message(chat_id, m, {"statusHistory": [other]})
        assert stored["done"] is False
        run.release()
        env.sim.active_run(key).end()
        await env.settled()
        final = (await env.messages(chat_id))[m]
        assert said(final) == [(status.DROPPED, False), (status.DROP_ENDED, True)]


async def test_a_user_turns_lines_go_through_its_request_and_a_drop_is_said_there(tmp_path) -> None:
    """While a user turn streams through the Pipe's request, the request says its lines (``Step.statuses``: the Pipe
    sends them through the request's own ``__event_emitter__``, which stores them with the reply); a drop under it is
    said at once (the table's ``on_closed``), "Reconnected" at the next hello; after the handover the writer says the
    rest and closes them with the message."""
    from test_inline import _open_webui_ends_its_task, _user_turn_chat

    async with open_env(tmp_path) as env:
        await env.connect()
        chat_id, key, m = await _user_turn_chat(env)
        env.sim.responder = lambda k, msg: [Text("First part,"), Hold()]
        run_id = ids.input_run_id(chat_id, m, "t1")
        turn = await env.runtimes["A"].user_turn(key, run_id, "go")
        shown: list[Any] = []
        said_by_request: list[tuple[str, bool]] = []
        while "First part," not in json.dumps(shown):
            step = await turn.next_output(shown)
            shown, said_by_request = (
                step.output,
                said_by_request + [(e["description"], e["done"]) for e in step.statuses],
            )
        env.sim.disconnect()
        step = await turn.next_output(shown)
        said_by_request += [(e["description"], e["done"]) for e in step.statuses]
        assert said_by_request == [(status.DROPPED, False)] and not step.over
        await env.clients["A"].wait_backing_off()
        keeper = env.keepers["A"]
        await keeper.until(lambda: keeper.table is not None and keeper.table.hello is not None)
        step = await turn.next_output(shown)
        assert [(e["description"], e["done"]) for e in step.statuses] == [(status.RECONNECTED, True)]
        assert told(env, m) == [], "the request said them, not owc's emitter"
        env.sim.handle(run_id).release()
        env.sim.active_run(key).text(" and the rest.").end()
        await _open_webui_ends_its_task(env, turn, shown)
        await env.settled()
        final = (await env.messages(chat_id))[m]
        assert final["done"] is True and final["content"] == "First part, and the rest."


async def test_a_user_turn_queued_behind_a_running_reply_says_so_until_it_starts(tmp_path) -> None:
    from test_inline import _user_turn_chat

    from owc.render.status import Queued, StatusLines

    async with open_env(tmp_path) as env:
        await env.connect()
        chat_id, key, m = await _user_turn_chat(env)
        runtime = env.runtimes["A"]
        agent = env.sim.start_run(key, "agent-turn", steps=[Text("Busy."), Hold()])
        keeper = env.keepers["A"]
        await keeper.until(lambda: keeper.totals()[0] == 1)
        assert await runtime.busy(key)
        lines = StatusLines()
        assert [e["description"] for e in lines.apply(Queued())] == [status.QUEUED]  # what the Pipe says first
        lines.take()
        env.sim.responder = lambda k, msg: [Text("My answer."), End()]
        async with trio.open_nursery() as nursery:
            turns: list[Any] = []

            async def send() -> None:
                turns.append(await runtime.user_turn(key, ids.input_run_id(chat_id, m, "t2"), "next", status=lines))

            nursery.start_soon(send)
            await trio.testing.wait_all_tasks_blocked()
            assert not turns, "owc waits for the run before it (its own end, no clock)"
            agent.release()
            env.sim.active_run(key).end()
        (turn,) = turns
        shown: list[Any] = []
        statuses: list[tuple[str, bool]] = []
        while True:
            step = await turn.next_output(shown)
            shown = step.output
            statuses += [(e["description"], e["done"]) for e in step.statuses]
            if step.over:
                break
        assert statuses == [(status.STARTED, True)]
        assert not await runtime.busy(key)
