"""The run writer end to end: simulator over loopback, a real SQLite file, MockClock (no autojump unless a
test waits on purpose), recording emitter."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from owc import ids
from owc.emit import RecordingEmitter
from owc.registry import WriterRegistry
from owc.render import count_cards
from owc.rules.lifecycle import State
from owc.sim import Hold, Text, Tool
from owc.store import NotWritten

from harness import open_env


def chain_ok(messages: dict) -> bool:
    return all(len(m["childrenIds"]) <= 1 for m in messages.values())


async def test_agent_turn_renders_normally(tmp_path, clock) -> None:
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        start = trio.current_time()
        run = env.sim.start_run(key, "cron-wake-1", user_text="Nightly check")
        run.text("Checking the disks.")
        await keeper.until(lambda: keeper.totals()[0] == 1)
        await trio.testing.wait_all_tasks_blocked()  # the writer has streamed what there is and waits for more
        run.tool("exec", {"cmd": "df -h"}, "/dev/vda 252G").tool("exec", {"cmd": "uptime"}, "up 3 days")
        run.text("All disks are fine.").end()
        await env.settled()
        assert trio.current_time() - start == 0  # the whole turn takes 0 virtual seconds
        messages = await env.messages(chat_id)
        m = ids.message_id(key, "cron-wake-1")
        assert m == ids.agent_turn_message_id(key, "cron-wake-1")
        assert set(messages) == {"u1", m}
        msg = messages[m]
        assert msg["parentId"] == "u1" and msg["done"] is True and msg["role"] == "assistant"
        assert msg["content"] == "Checking the disks.\nAll disks are fine."  # no header text
        assert count_cards(msg["output"]) == 2
        assert [i["type"] for i in msg["output"]] == [
            "message",
            "function_call",
            "function_call_output",
            "function_call",
            "function_call_output",
            "message",
        ]
        told = [e.type for e in env.emitter.of(m)]
        assert told[0] == "chat:messages" and told[-2:] == ["chat:completion", "chat:active"]
        intro = env.emitter.of(m, "chat:messages")[0].event["data"]
        assert intro["currentId"] == m and intro["messages"]["u1"]["childrenIds"] == [m]
        assert env.emitter.of(m, "response:completion"), "the run streamed live"
        assert env.emitter.streams == {} and env.emitter.streams_saved > 0  # live copy kept, then dropped


async def test_two_connections_one_message(tmp_path, clock) -> None:
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        a = await env.connect("A")
        b = await env.connect("B")
        env.sim.start_run(key, "r1").text("Hello from one run.").tool("ls", {}, "x").end()
        await env.settled()
        messages = await env.messages(chat_id)
        assert len(messages) == 2 and messages[ids.message_id(key, "r1")]["done"] is True
        assert sum(keeper.totals()[0] for keeper in (a, b)) == 1  # exactly one claim won


async def test_no_mid_run_close(tmp_path, clock) -> None:
    """A row or describe reading done while the run is active ends nothing: only the run's terminal does."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        run = env.sim.start_run(key, "long").text("Working on it")
        await keeper.until(lambda: keeper.totals()[0] == 1)  # claimed
        conn = env.sim.connection("A")
        done_row = {
            "sessionKey": key,
            "reason": "agent.input.settled",
            "ts": 1,
            "status": "done",
            "hasActiveRun": True,
            "lastRunId": "long",
        }
        env.sim._emit("sessions.changed", done_row, audience=lambda c: c is conn, drop_if_slow=False)
        other_end = {
            "sessionKey": key,
            "phase": "end",
            "runId": "another-run",
            "ts": 1,
            "status": "done",
            "hasActiveRun": False,
        }
        env.sim._emit("sessions.changed", other_end, audience=lambda c: c is conn, drop_if_slow=False)
        described = await env.clients["A"].request("sessions.describe", {"key": key})
        assert described["session"]["hasActiveRun"] is True
        run.text(" still").tool("exec", {}, "ok")
        await env.clients["A"].request("sessions.list", {})  # a round trip: everything sent before is read
        m = ids.message_id(key, "long")
        # (the other run, first seen by its end, may have a writer of its own: one reading its transcript)
        assert keeper.ledger.get(key, "long").writer_live and (await env.messages(chat_id))[m]["done"] is False
        run.end()
        await env.settled()
        assert (await env.messages(chat_id))[m]["done"] is True


async def test_seq_gap_recovery(tmp_path, clock) -> None:
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        env.sim.drop(4)  # the run's start push is among them
        run = env.sim.start_run(key, "during-gap", steps=[Text("Started in the gap."), Hold()])
        await env.sim.wait_for(lambda: env.sim.requests["sessions.list"] >= 1)
        run.end()
        await env.settled()
        messages = await env.messages(chat_id)
        msg = messages[ids.message_id(key, "during-gap")]
        assert msg["done"] and msg["content"] == "Started in the gap."


async def test_run_active_before_subscribe_without_ids(tmp_path, clock) -> None:
    async with open_env(tmp_path, cli_runtime=True) as env:
        chat_id, key = await env.chat()
        run = env.sim.start_run(key, "before-owc")
        run.text("Early words, unseen.")
        keeper = await env.connect()
        run.text(" And more.").end()
        await env.settled()
        msg = (await env.messages(chat_id))[ids.message_id(key, "before-owc")]
        # The stream joined late, but the finalize reads the transcript: the whole text is there.
        assert msg["done"] and msg["content"] == "Early words, unseen. And more."
        assert keeper.totals() == (1, 1)  # one claim, one finalize


async def test_yield_and_back_to_back_turns_chain(tmp_path, clock) -> None:
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        env.sim.start_run(key, "parent").text("Spawned a helper; waiting.").end(yielded=True)
        env.sim.start_run(key, "resume").text("The helper says 42.").end()
        env.sim.start_run(key, "third").text("And one more.").end()
        await env.settled()
        messages = await env.messages(chat_id)
        first, second, third = (ids.message_id(key, r) for r in ("parent", "resume", "third"))
        assert (
            messages[first]["parentId"] == "u1"
            and messages[second]["parentId"] == first
            and messages[third]["parentId"] == second
        )
        assert all(messages[m]["done"] for m in (first, second, third)) and chain_ok(messages)


@pytest.mark.parametrize(
    ("kind", "expect"),
    [
        ("heartbeat", None),
        ("heartbeat_tools", "cards"),
        ("sentinel", None),
        ("tools_then_sentinel", "cards"),
        ("action", None),
        ("subagent", None),
    ],
)
async def test_runs_without_a_normal_message(tmp_path, clock, kind, expect) -> None:
    """Runs that show no reply text. A heartbeat that only acknowledges (``HEARTBEAT_OK``, hidden by the Gateway's
    chat.history) has no message; one that called a tool has its card, as its transcript shows it (issue 24 item
    6: a heartbeat's run is shown as the Gateway's own chat shows it)."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        if kind == "heartbeat":
            env.sim.start_run(key, "hb", heartbeat=True, origin="heartbeat").text("HEARTBEAT_OK").end()
        elif kind == "heartbeat_tools":
            beat = env.sim.start_run(key, "tq", heartbeat=True, origin="heartbeat")
            beat.tool("exec", {}, "ok").text("HEARTBEAT_OK").end()
        elif kind == "sentinel":
            env.sim.start_run(key, "quiet").text("NO_REPLY").end()
        elif kind == "tools_then_sentinel":
            env.sim.start_run(key, "tq").tool("exec", {}, "ok").text("NO_REPLY").end()
        elif kind == "action":
            env.sim.start_run(key, ids.action_run_id("compact", chat_id, "1")).text("Compacted.").end()
        else:
            env.sim.start_run(f"{key}:subagent:abc", "child").text("Child result").end()
            env.sim.start_run("agent:main:subagent:xyz", "child2").text("Child result").end()
        await env.settled()
        messages = await env.messages(chat_id)
        # Nothing of these runs stays in memory once they end (no renderer kept for the connection's life).
        assert len(env.keepers["A"].ledger) == 0
        if expect is None:
            assert set(messages) == {"u1"}
        else:
            msg = messages[ids.message_id(key, "tq")]
            assert msg["done"] and msg["content"] == "" and count_cards(msg["output"]) == 1
            assert "NO_REPLY" not in str(msg) and "HEARTBEAT_OK" not in str(msg)
            assert "[OpenClaw heartbeat poll]" not in str(msg)


@pytest.mark.parametrize(("text", "state"), [("NO", "final"), ("ANNOUNCE", "final"), ("A", "aborted")])
async def test_a_short_answer_that_starts_like_a_sentinel_gets_its_message(tmp_path, clock, text, state) -> None:
    """A reply that is only a prefix of a silent sentinel is held back while the run streams, and shown once the
    run's terminal says it will not grow. Before, the run ended "showing nothing" and got no message."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        env.sim.start_run(key, "short").text(text).end(state)
        await env.settled()
        messages = await env.messages(chat_id)
        msg = messages[ids.message_id(key, "short")]
        assert msg["done"] is True and msg["content"] == text and chain_ok(messages)
        assert keeper.totals()[1] == 1


async def test_a_short_answer_whose_chat_terminal_never_comes_is_read_from_the_transcript(tmp_path, clock) -> None:
    """The run says only "NO" (held back: it may become ``NO_REPLY``) and its ``chat`` terminal never reaches owc;
    the ``sessions.changed`` end does. Only the transcript can tell a short answer from a sentinel, so it is
    read (before, the run counted as having shown nothing and got no message)."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        fanout = env.sim.fanout
        real_chat = fanout.chat

        def without_the_chat_final(run, state, **kwargs):
            if not (run.run_id == "terse" and state == "final"):
                real_chat(run, state, **kwargs)

        fanout.chat = without_the_chat_final
        env.sim.start_run(key, "terse").text("NO").end()
        await env.settled()
        msg = (await env.messages(chat_id))[ids.message_id(key, "terse")]
        assert msg["done"] is True and msg["content"] == "NO"


async def test_a_run_first_seen_mid_run_reads_its_transcript_before_it_is_given_up(tmp_path, clock) -> None:
    """owc never sees the run's start nor its tool call (they came before this connection could see them), only
    its error terminal: what the run showed is in its transcript, which is read instead of giving the run up
    as one that showed nothing (found by the fuzzer: ``lost-at-hello``, a run first seen just before the
    hello's list was applied)."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        fanout = env.sim.fanout
        real_agent, real_tool, real_chat = fanout.agent, fanout.tool_event, fanout.chat

        def unseen_start(run, stream, data, **kwargs):
            if run.run_id == "late" and (stream == "run_status" or data.get("phase") == "start"):
                return None  # lost to owc without a gap, as events before a connection's subscribe are
            return real_agent(run, stream, data, **kwargs)

        def unseen_tool(run, data):
            if run.run_id != "late":
                real_tool(run, data)

        def unseen_status(run, state, **kwargs):
            if not (run.run_id == "late" and state == "status"):
                real_chat(run, state, **kwargs)

        real_changed = fanout.sessions_changed

        def unseen_changed_start(session, **kwargs):
            if not (kwargs.get("run_id") == "late" and kwargs.get("phase") == "start"):
                real_changed(session, **kwargs)

        fanout.agent, fanout.tool_event, fanout.chat = unseen_start, unseen_tool, unseen_status
        fanout.sessions_changed = unseen_changed_start
        env.sim.start_run(key, "late").tool("exec", {"cmd": "ls"}, "a b").end("error", error="boom")
        await env.settled()
        msg = (await env.messages(chat_id))[ids.message_id(key, "late")]
        assert msg["done"] is True and count_cards(msg["output"]) == 1


async def test_malformed_event_does_not_disturb_another_run(tmp_path, clock) -> None:
    async with open_env(tmp_path) as env:
        chat_a, key_a = await env.chat()
        chat_b, key_b = await env.chat()
        await env.connect()
        good = env.sim.start_run(key_b, "good").text("Fine.")
        env.sim.start_run(key_a, "bad").text("Also started.")
        env.sim.inject('{"type": "event", "event": "chat", "payload": {"runId": "bad", "state": "delta"}}')
        env.sim.inject(
            '{"type": "event", "event": "agent", "payload": {"runId": "bad", "sessionKey": "'
            + key_a
            + '", "stream": "tool", "data": {"phase": "start"}}}'
        )
        good.end()
        env.sim.active_run(key_a).end()
        await env.settled()
        assert (await env.messages(chat_b))[ids.message_id(key_b, "good")]["content"] == "Fine."
        assert (await env.messages(chat_a))[ids.message_id(key_a, "bad")]["content"] == "Also started."


async def test_stop_aborts_and_finalizes_with_what_it_has(tmp_path, clock) -> None:
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        env.sim.start_run(key, "stoppable", steps=[Text("Partial answer"), Hold()])
        await keeper.until(lambda: keeper.totals()[0] == 1)  # claimed
        assert keeper.table.stop(chat_id) == 1
        await env.settled()
        msg = (await env.messages(chat_id))[ids.message_id(key, "stoppable")]
        assert msg["done"] and msg["content"] == "Partial answer"
        assert env.sim.requests["chat.abort"] == 1 and env.sim.sessions[key].status == "killed"


async def test_a_writer_is_a_task_of_its_chat_and_the_tabs_stop_reaches_it(tmp_path, clock) -> None:
    """The writer registers as a task of its chat before it claims (the message carries ``meta.task_id``, as
    Open WebUI's own replies do); the tab's Stop cancels that task, which aborts the run at the Gateway and
    finalizes the message with what it had; the task is gone after. A run that ends by itself closes its task."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        env.sim.start_run(key, "stoppable", steps=[Text("Partial answer"), Hold()])
        await keeper.until(lambda: keeper.totals()[0] == 1)  # claimed
        m = ids.message_id(key, "stoppable")
        task_id, _ = env.emitter.tasks[(chat_id, m)]
        assert (await env.messages(chat_id))[m]["meta"]["task_id"] == task_id
        assert env.emitter.cancel_task(chat_id, m)  # the Stop button
        await env.settled()
        msg = (await env.messages(chat_id))[m]
        assert msg["done"] and msg["content"] == "Partial answer"
        assert env.sim.requests["chat.abort"] == 1 and env.sim.sessions[key].status == "killed"
        env.sim.start_run(key, "finishes").text("Done by itself.").end()
        await env.settled()
        assert (await env.messages(chat_id))[ids.message_id(key, "finishes")]["done"]
        assert env.emitter.tasks == {} and env.emitter.tasks_opened == 2


async def test_a_writer_registered_again_after_a_cancel_names_its_new_task_in_the_message(
    tmp_path, clock, db_url
) -> None:
    """Issue 24, item 11: a cancel that was not a Stop ("Send now", or no tab said) registers the writer again
    under a new task id; M's ``meta.task_id`` names the new one (Open WebUI's ``/stop`` for a shared chat's reply
    looks the task up by it), merged into ``meta`` (owc's own keys stay). A cancel before the claim is named by the
    claim's check. Once M is finished, nothing is renamed."""
    async with open_env(tmp_path, db_url=db_url) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        run = env.sim.start_run(key, "goes-on", steps=[Text("Partial answer"), Hold()])
        await keeper.until(lambda: keeper.totals()[0] == 1)  # claimed
        m = ids.message_id(key, "goes-on")
        first, _ = env.emitter.tasks[(chat_id, m)]
        assert (await env.messages(chat_id))[m]["meta"]["task_id"] == first
        second = await env.emitter.reregister_task(chat_id, m)
        meta = (await env.messages(chat_id))[m]["meta"]
        assert second != first and meta["task_id"] == second
        assert meta["openclaw_run"] == "goes-on" and meta["openclaw_open"] is True and meta["openclaw_writer"]
        run.release()
        env.sim.active_run(key).text(" and the rest.").end()
        await env.settled()
        msg = (await env.messages(chat_id))[m]
        assert msg["done"] and msg["content"] == "Partial answer and the rest." and msg["meta"]["task_id"] == second
        # Finished: a late rename of it writes nothing.
        assert not await env.store.set_task_id(chat_id, m, "late", holds=lambda _w: True)
        assert (await env.messages(chat_id))[m]["meta"]["task_id"] == second


async def test_a_stopped_item_that_starts_with_an_earlier_items_text_is_kept_whole(tmp_path, clock) -> None:
    """The run says "Hello", calls a tool, then "Hello from" and is stopped. The real Gateway's aborted partial is
    its run-wide buffer ("Hello\n\nHello from", measured by the conformance tier); the finalizer keeps what no
    earlier message holds. Before, the simulator stored only the item being written ("Hello from"), and the
    finalizer cut the earlier text off its start: the message read "Hello\n from", a repeated word dropped."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        steps = [Text("Hello"), Tool("read", {}, "ok", call_id="c1"), Text("Hello from"), Hold()]
        env.sim.start_run(key, "echo", steps=steps)
        await keeper.until(lambda: keeper.totals()[0] == 1)  # claimed
        await trio.testing.wait_all_tasks_blocked()  # the run holds after "Hello from"; the writer waits
        assert env.sim.runs["echo"].text == "Hello\n\nHello from"
        assert keeper.table.stop(chat_id) == 1
        await env.settled()
        (partial,) = [msg for msg in env.sim.sessions[key].transcript if msg.get("openclawAbort")]
        assert partial["content"] == [{"type": "text", "text": "Hello\n\nHello from"}]
        msg = (await env.messages(chat_id))[ids.message_id(key, "echo")]
        assert msg["done"] and msg["content"] == "Hello\nHello from" and count_cards(msg["output"]) == 1
        assert [i["type"] for i in msg["output"]] == ["message", "function_call", "function_call_output", "message"]


@pytest.mark.virtual_seconds(1)  # the reconnect's backoff, the transport's own timer
async def test_settled_never_returns_between_a_drop_and_the_next_hello(tmp_path, clock) -> None:
    """Issue 24, item 13: ``Runtime.settled()`` returned while its deploy was reconnecting, and ``owc scenario run``
    reported a run "missing" that the reconnect's reconcile gives a message (1 play in 4 of a drop, a run ending
    while away, then ``wait``). The socket was cut; settled's round trip failed on its send (the transport knew)
    before owc's reader had read the close, so the run table still stood for the dead connection and looked quiet,
    twice. Here the cut comes exactly then: settled must wait for the next hello and its reconcile, on state."""
    from trio_websocket import CloseReason, ConnectionClosed

    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        runtime = env.runtimes["A"]
        (sim_conn,) = env.sim.conns.values()
        sim_conn.muted = True  # the network drops everything from here: owc sees nothing of the run below
        env.sim.start_run(key, "while-away").text("Said while owc was away.").end()
        await env.sim.wait_for(env.sim.quiescent)
        conn = runtime.client.connection
        assert conn is not None and keeper.quiet()  # owc cannot know yet: its connection looks alive and idle

        async def send_on_a_cut_socket(data: object) -> None:
            env.sim.disconnect()  # the TCP stream is cut now: owc's reader reads the close later
            raise ConnectionClosed(CloseReason(1006, None))

        conn.ws.send_message = send_on_a_cut_socket  # type: ignore[method-assign]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(runtime.settled)
            await runtime.client.wait_backing_off()  # settled was asked; owc saw the close and backs off
            await trio.testing.wait_all_tasks_blocked()
            clock.jump(1)  # the backoff (a transport timer) is the only wait
        assert runtime.client.connections_opened == 2  # it returned after the next hello, not before
        msg = (await env.messages(chat_id)).get(ids.message_id(key, "while-away"))
        assert msg is not None and msg["done"] and msg["content"] == "Said while owc was away."


@pytest.mark.virtual_seconds(1)  # the reconnect's backoff, the transport's own timer
async def test_connection_closing_cancels_writers_and_next_claim_takes_over(tmp_path, clock) -> None:
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        run = env.sim.start_run(key, "survivor", steps=[Text("Before the drop."), Hold()])
        await keeper.until(lambda: keeper.totals()[0] == 1)
        m = ids.message_id(key, "survivor")
        first_writer = (await env.messages(chat_id))[m]["meta"]["openclaw_writer"]
        env.sim.disconnect()
        await keeper.until(lambda: keeper.table is None)  # owc saw the close and its connection ended
        # ... its writer told the tabs (a status line, written to M) and it is asleep in its reconnect backoff.
        await env.clients["A"].wait_backing_off()
        clock.jump(1)  # the backoff (a transport timer) is the only wait
        # The new connection's resync lists the run: its writer adopts the message at once.
        await keeper.until(
            lambda: keeper.table is not None and keeper.totals()[0] == 2
        )  # the claim, then the take-over
        (entry,) = keeper.ledger.unsettled()
        assert "reconnect" in entry.renderer.gaps  # its stream missed what the run did while no connection was up
        assert (await env.messages(chat_id))[m]["meta"]["openclaw_writer"] == keeper.table.writer_id != first_writer
        run.release()
        env.sim.active_run(key).text(" After it.").end()
        await env.settled()
        messages = await env.messages(chat_id)
        assert set(messages) == {"u1", m}
        assert messages[m]["done"] and messages[m]["meta"]["openclaw_writer"] != first_writer
        assert messages[m]["content"] == "Before the drop. After it."
        # After the take-over the tabs hold the first writer's items: the new writer's first word is the
        # whole output (a snapshot), not a diff from nothing that would show the text twice.
        taken_over = [i for i, e in enumerate(env.emitter.of(m)) if e.type == "chat:messages"][1]
        after = [e for e in env.emitter.of(m)[taken_over + 1 :] if e.type not in ("chat:active", "status")]
        assert after[0].type == "chat:completion" and "output" in after[0].event["data"]


async def test_a_failing_writer_does_not_close_the_connection(tmp_path, clock) -> None:
    """An unexpected database error in one run's writer is logged; the connection and other runs go on."""
    async with open_env(tmp_path) as env:
        chat_a, key_a = await env.chat()
        chat_b, key_b = await env.chat()
        keeper = await env.connect()
        session = env.clients["A"].connection
        real_claim = env.store.claim

        async def flaky_claim(chat_id, message_id, **kwargs):
            if chat_id == chat_a:
                raise RuntimeError("disk on fire")
            return await real_claim(chat_id, message_id, **kwargs)

        env.store.claim = flaky_claim
        env.sim.start_run(key_a, "doomed").text("This one fails.").end()
        env.sim.start_run(key_b, "fine").text("This one is written.").end()
        await env.settled()
        assert not session.closed and env.clients["A"].connections_opened == 1
        assert (await env.messages(chat_b))[ids.message_id(key_b, "fine")]["done"] is True
        assert set(await env.messages(chat_a)) == {"u1"}
        assert keeper.totals() == (1, 1)


async def test_standby_connection_finishes_when_the_writer_dies(tmp_path, clock) -> None:
    """Two deploys see one run; the one that claimed it dies mid-run; the other finalizes the message."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        a = await env.connect("A")
        b = await env.connect("B")
        run = env.sim.start_run(key, "failover", steps=[Text("Begun by one deploy."), Hold()])
        await env.until(lambda: a.totals()[0] + b.totals()[0] == 1)
        await env.until(
            lambda: all(r.life.state in (State.STREAMING, State.STANDBY) for x in (a, b) for r in x.ledger.unsettled())
        )
        winner, other = ("A", "B") if a.totals()[0] else ("B", "A")
        await env.kill(winner)  # its connection closes: its writer id is no longer alive
        await env.keepers[winner].until(lambda: env.keepers[winner].table is None)
        run.release()
        env.sim.active_run(key).text(" Finished by the other.").end()
        await env.settled()
        m = ids.message_id(key, "failover")
        msg = (await env.messages(chat_id))[m]
        assert msg["done"] and msg["content"] == "Begun by one deploy. Finished by the other."
        assert env.keepers[other].totals() == (1, 1)


async def test_two_processes_one_writer_streams(tmp_path, clock) -> None:
    """Two processes (each its own writer registry) see one run: one claims and streams, the other cannot see
    whether that one lives, so it stands by instead of taking the message over; one message, one stream."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        emitters = {"A": RecordingEmitter(), "B": RecordingEmitter()}
        a = await env.connect("A", emitters["A"], WriterRegistry())
        b = await env.connect("B", emitters["B"], WriterRegistry())
        run = env.sim.start_run(key, "shared", steps=[Text("Streamed by one process."), Hold()])
        await env.until(lambda: a.totals()[0] + b.totals()[0] == 1)
        run.release()
        env.sim.active_run(key).text(" Still one.").tool("ls", {}, "x").end()
        await env.settled()
        m = ids.message_id(key, "shared")
        messages = await env.messages(chat_id)
        assert set(messages) == {"u1", m} and messages[m]["done"] is True
        assert messages[m]["content"] == "Streamed by one process. Still one."
        claimed = [name for name in emitters if env.keepers[name].totals()[0]]
        assert len(claimed) == 1
        winner, other = claimed[0], "B" if claimed == ["A"] else "A"
        assert env.keepers[winner].totals() == (1, 1)

        def streaming(event) -> bool:  # anything but what finishing a message sends (a status line it closes too)
            data = event.event.get("data") or {}
            return not (
                event.type in ("chat:messages", "chat:active")
                or (event.type in ("chat:completion", "status") and data.get("done"))
            )

        assert [e for e in emitters[winner].of(m) if streaming(e)]  # the winner streamed the run live
        assert [e for e in emitters[other].of(m) if streaming(e)] == []  # the other never did
        assert env.keepers[other].totals()[0] == 0  # and never claimed the message (at most finished it)


async def test_other_process_dies_mid_run_standby_finishes(tmp_path, clock) -> None:
    """The process that streams a run dies mid-run; another process, standing by, finishes the message at
    the run's own terminal (no timer, no lease)."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        a = await env.connect("A", registry=WriterRegistry())
        run = env.sim.start_run(key, "orphan", steps=[Text("Begun by the first process."), Hold()])
        await a.until(lambda: a.totals()[0] == 1)
        b = await env.connect("B", registry=WriterRegistry())
        await b.until(lambda: any(r.life.state is State.STANDBY for r in b.ledger.unsettled()))
        await env.kill("A")
        await a.until(lambda: a.table is None)
        run.release()
        env.sim.active_run(key).text(" Finished by the second.").end()
        await env.settled()
        m = ids.message_id(key, "orphan")
        msg = (await env.messages(chat_id))[m]
        assert msg["done"] and msg["content"] == "Begun by the first process. Finished by the second."
        # Finished, not taken over: the second process never claimed it, so it never streamed it either.
        assert not b.registry.is_local(msg["meta"]["openclaw_writer"])
        assert b.totals() == (0, 1)
        assert [e.type for e in env.emitter.of(m) if e.type == "chat:messages"] == [
            "chat:messages"
        ] * 2  # A's claim, B's finish


def refuse_writes(env, chat_id: str, times: int) -> None:
    """The chat's next ``times`` finalizes find the database locked through every attempt."""
    real_write = env.store.write
    left = [times]

    async def locked_write(chat, message_id, **kwargs):
        if chat == chat_id and left[0] > 0:
            left[0] -= 1
            return NotWritten(detail="database is locked", attempts=6)
        return await real_write(chat, message_id, **kwargs)

    env.store.write = locked_write


@pytest.mark.virtual_seconds(30)  # one Gateway tick: the retry's only trigger while nothing else happens
async def test_a_finalize_that_cannot_be_written_is_kept_and_written_on_the_next_tick(tmp_path, clock, caplog) -> None:
    """The database stays locked through every finalize attempt: the writer logs NOT WRITTEN and tells the
    chat's open tabs (once), and the message is kept: the Gateway's next tick tries again and writes it
    (before, it was left ``done: false`` for good)."""
    async with open_env(tmp_path) as env:
        chat_a, key_a = await env.chat()
        keeper = await env.connect()
        refuse_writes(env, chat_a, 1)
        env.sim.start_run(key_a, "unlucky").text("Saved at last.").end()
        m = ids.message_id(key_a, "unlucky")
        await keeper.until(lambda: env.emitter.of(m, "chat:message:error"))
        assert any(
            "runs.NOT_WRITTEN run=unlucky" in r.getMessage() and "attempts=6" in r.getMessage() for r in caplog.records
        )
        (notice,) = env.emitter.of(m, "chat:message:error")
        assert notice.chat_id == chat_a and "could not be saved yet" in notice.event["data"]["error"]["content"]
        assert not any(e.event["data"].get("done") for e in env.emitter.of(m, "chat:completion"))
        assert (await env.messages(chat_a))[m]["done"] is False
        run = keeper.ledger.get(key_a, "unlucky")
        await keeper.until(lambda: run.life.state is State.UNSAVED and not run.writer_live)
        clock.jump(30)  # the Gateway's next tick
        await env.settled()
        assert (await env.messages(chat_a))[m]["done"] is True
        assert (await env.messages(chat_a))[m]["content"] == "Saved at last."
        assert any(e.event["data"].get("done") for e in env.emitter.of(m, "chat:completion"))
        assert len(env.emitter.of(m, "chat:message:error")) == 1
        assert keeper.totals() == (1, 1)


async def test_a_message_kept_unsaved_is_written_when_another_write_goes_through(tmp_path, clock) -> None:
    """Another run's terminal, or its write that goes through, says the database may take writes again: the
    kept message is tried then, not at the next tick (the test's clock never reaches one). The connection and
    the other run go on meanwhile."""
    async with open_env(tmp_path) as env:
        chat_a, key_a = await env.chat()
        chat_b, key_b = await env.chat()
        keeper = await env.connect()
        refuse_writes(env, chat_a, 1)
        env.sim.start_run(key_a, "unlucky").text("Kept.").end()
        m = ids.message_id(key_a, "unlucky")
        await keeper.until(lambda: env.emitter.of(m, "chat:message:error"))
        env.sim.start_run(key_b, "lucky").text("Saved.").end()
        await env.settled()
        assert (await env.messages(chat_a))[m]["done"] is True
        assert (await env.messages(chat_b))[ids.message_id(key_b, "lucky")]["done"] is True
        assert keeper.totals() == (2, 2) and env.clients["A"].connections_opened == 1


async def test_a_long_run_is_finalized_whole_across_history_pages(tmp_path, clock, caplog) -> None:
    """A run whose transcript outgrows one ``chat.history`` page (120 tool calls: 240 messages) is finalized
    from older pages joined in front, with its opening text and every card."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        run = env.sim.start_run(key, "long").text("Opening words.")
        for i in range(120):
            run.tool("exec", {"i": i}, f"out {i}")
        run.text("Done.").end()
        await env.settled()
        msg = (await env.messages(chat_id))[ids.message_id(key, "long")]
        assert msg["done"] and msg["content"].startswith("Opening words.") and msg["content"].endswith("Done.")
        assert count_cards(msg["output"]) == 120
        assert any(
            "runs.finalized run=long" in r.getMessage() and "source=transcript" in r.getMessage()
            for r in caplog.records
        )
        assert env.sim.requests["chat.history"] == 2  # the newest page, then the one before it


async def _held_run_with_writer(env, key: str, run_id: str):
    """A run that has shown text and holds (so the Gateway sends no terminal of its own), with its writer
    streaming on connection A."""
    keeper = await env.connect()
    run = env.sim.start_run(key, run_id, steps=[Text("Partial answer."), Hold()])
    await keeper.until(lambda: keeper.totals()[0] == 1)  # claimed
    return keeper, run, env.sim.connection("A")


@pytest.mark.parametrize("signal", ["chat final", "sessions.changed end"])
async def test_one_end_signal_alone_ends_the_run(tmp_path, clock, signal: str) -> None:
    """The run's chat terminal alone, or its sessions.changed end push alone (no resync either), ends it."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper, run, conn = await _held_run_with_writer(env, key, "ending")
        if signal == "chat final":
            text = {"role": "assistant", "content": [{"type": "text", "text": "Partial answer."}]}
            event, payload = (
                "chat",
                {"runId": "ending", "sessionKey": key, "state": "final", "seq": 99, "message": text},
            )
        else:
            event, payload = (
                "sessions.changed",
                {
                    "sessionKey": key,
                    "phase": "end",
                    "runId": "ending",
                    "ts": 1,
                    "status": "done",
                    "hasActiveRun": False,
                    "activeRunIds": [],
                },
            )
        env.sim._emit(event, payload, audience=lambda c: c is conn, drop_if_slow=False)
        with trio.fail_after(600):  # virtual: ends a hang as a failure
            await keeper.until(lambda: keeper.totals()[1] == 1)
        assert (await env.messages(chat_id))[ids.message_id(key, "ending")]["done"] is True
        assert env.sim.requests["sessions.list"] == 0
        run.release()
        env.sim.active_run(key).end()  # the real terminal, late: it changes nothing
        await env.settled()
        assert keeper.totals() == (1, 1)


async def test_absence_from_a_resync_alone_ends_the_run(tmp_path, clock) -> None:
    """The run's terminal and end push are lost; the gap's resync lists the session without the run."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper, run, conn = await _held_run_with_writer(env, key, "by-resync")
        conn.muted = True  # everything the run's end sends is lost ...
        run.release()
        env.sim.active_run(key).end()
        await env.sim.wait_for(env.sim.quiescent)
        conn.muted = False
        _chat_b, key_b = await env.chat()
        env.sim.drop(1)  # ... and a later dropped event shows owc the gap
        env.sim.start_run(key_b, "later").text("Another run.").end()
        with trio.fail_after(600):  # virtual: ends a hang as a failure
            await keeper.until(lambda: keeper.totals()[1] == 2)
        assert env.sim.requests["sessions.list"] == 1
        msg = (await env.messages(chat_id))[ids.message_id(key, "by-resync")]
        assert msg["done"] is True and msg["content"] == "Partial answer."
        await env.settled()


def _heartbeats(env: Any, key: str) -> None:
    """A cron turn, H1 (speaks, one hidden message before its reply: its prompt), H2 (only ``HEARTBEAT_OK``), H3
    (speaks after the silent H2: three hidden before it), a cron turn: the real tier's flow
    (``tests/test_realgw_heartbeat.py``)."""
    env.sim.start_run(key, "first", origin="cron").text("First.").end()
    env.sim.start_run(key, "talk", heartbeat=True, origin="heartbeat").text("The build is red.").end()
    env.sim.start_run(key, "quiet", heartbeat=True, origin="heartbeat").text("HEARTBEAT_OK").end()
    env.sim.start_run(key, "after", heartbeat=True, origin="heartbeat").text("Still red.").end()
    env.sim.start_run(key, "last", origin="cron").text("Last.").end()


async def _check_heartbeats(env: Any, chat_id: str, key: str) -> None:
    messages = await env.messages(chat_id)
    mid = {run: ids.message_id(key, run) for run in ("first", "talk", "quiet", "after", "last")}
    # Each heartbeat that spoke has one message with its reply, in its place; the one that only acknowledged none;
    # the hidden prompt shows nowhere.
    assert set(messages) == {"u1", mid["first"], mid["talk"], mid["after"], mid["last"]}
    assert messages[mid["talk"]]["content"] == "The build is red." and messages[mid["talk"]]["done"] is True
    assert messages[mid["after"]]["content"] == "Still red." and messages[mid["after"]]["done"] is True
    chain = [messages[mid[r]]["parentId"] for r in ("talk", "after", "last")]
    assert chain == [mid["first"], mid["talk"], mid["after"]]
    assert not [m for m in messages.values() if "[OpenClaw" in str(m.get("content"))]


async def test_heartbeat_runs_seen_live_are_decided_by_their_transcript_at_their_end(tmp_path, clock) -> None:
    """Issue 24 item 6: a connection that only asked ``sessions.subscribe`` sees a heartbeat run as its start and
    end alone (measured on the real Gateway; the simulator does the same), so owc reads its transcript at its end.
    The Gateway's own chat shows a speaking heartbeat's reply and hides only its prompt and a bare
    ``HEARTBEAT_OK``; owc follows it: H1 and H3 each get their message, H2 none. Before, H1 (its prompt alone
    hidden before it) got no message while H3 (after a silent heartbeat) got one."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        _heartbeats(env, key)
        await env.settled()
        await _check_heartbeats(env, chat_id, key)
        assert keeper.ledger.is_settled(key, "talk") and keeper.ledger.is_settled(key, "quiet")


async def test_heartbeat_runs_that_ended_while_owc_was_down_are_shown_as_live(tmp_path, clock) -> None:
    """The same flow while no owc process is up (the first one killed after its first turn): the next process's
    pass finds the heartbeats in the transcript and gives the same messages as live, through the reconcile (which
    skipped a "heartbeat turn" before)."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect("A")
        env.sim.start_run(key, "first", origin="cron").text("First.").end()
        await env.settled()
        await env.kill("A")
        env.sim.start_run(key, "talk", heartbeat=True, origin="heartbeat").text("The build is red.").end()
        env.sim.start_run(key, "quiet", heartbeat=True, origin="heartbeat").text("HEARTBEAT_OK").end()
        env.sim.start_run(key, "after", heartbeat=True, origin="heartbeat").text("Still red.").end()
        env.sim.start_run(key, "last", origin="cron").text("Last.").end()
        await env.connect("B")
        await env.settled()
        await _check_heartbeats(env, chat_id, key)


@pytest.mark.parametrize("before", [False, True], ids=["gap-first", "after-a-live-run"])
async def test_a_speaking_heartbeat_lost_whole_in_a_seq_gap_gets_its_message_once(tmp_path, clock, before) -> None:
    """A ``sessions.subscribe`` connection sees a heartbeat run only as its ``sessions.changed`` start and end
    (and the global ``heartbeat`` event), all ``dropIfSlow``: a slow connection may lose every one of them, and
    the gap shows only at the next seq'd frame (the tick). The gap's list cannot show that run (not active, never
    known here), so it was lost on that connection: no message although the Gateway's own chat shows its reply
    (fuzzer seed 100552). The gap's resync now runs the ended-while-away pass over the sessions whose row moved
    since the last event before the gap (or, when none came, from the hello's watermark): one message, once, and
    a later gap does not give it again. ``before``: a live run first, so the gap has an event before it."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        if before:
            env.sim.start_run(key, "first", origin="cron").text("First.").end()
            await env.settled()
        env.sim.drop(100)  # every droppable event of the heartbeat: its start and end, the global ``heartbeat``
        env.sim.start_run(key, "beat", heartbeat=True, origin="heartbeat").tool("exec", {"i": 4}, "ok").text(
            "The build is red."
        ).end()
        left = [conn.drop_next for conn in env.sim.conns.values()]
        assert left and all(0 < n < 100 for n in left)  # some were dropped, and not more than the run had
        for conn in env.sim.conns.values():
            conn.drop_next = 0
        env.sim.tick_now()  # the next seq'd frame shows the gap
        await env.settled()
        env.sim.drop(1)  # a later gap: its pass must not give the heartbeat a second message
        env.sim.start_run(key, "later", origin="cron").text("Later.").end()
        env.sim.tick_now()
        await env.settled()
        messages = await env.messages(chat_id)
        beat = ids.message_id(key, "beat")
        expected = {"u1", beat, ids.message_id(key, "later")} | ({ids.message_id(key, "first")} if before else set())
        assert set(messages) == expected
        assert messages[beat]["done"] is True and messages[beat]["content"] == "The build is red."
        assert count_cards(messages[beat]["output"]) == 1
        assert keeper.stats.claims == len(expected) - 1
        assert keeper.ledger.is_settled(key, "beat")


async def test_a_heartbeat_that_starts_after_a_gap_and_ends_in_another_is_read_from_its_transcript(
    tmp_path, clock
) -> None:
    """Fuzz seed 302660: a gap shows (its list is asked for), a heartbeat's start reaches owc before the list's
    answer, and every later event of that heartbeat is dropped (its ``session.message``, its end). The list then
    no longer shows the run, so it ends "absent from the list"; owc saw nothing of it but its start, and it was
    not running when the gap showed, so nothing marked its stream as incomplete: it was abandoned, and the
    speaking heartbeat got no message. A run whose end owc did not see itself lost that end at least: its
    transcript decides."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        env.sim.drop(1)  # the heartbeat's first droppable event: the next one, its start, shows the gap
        beat = env.sim.start_run(key, "beat", heartbeat=True, origin="heartbeat")
        env.sim.drop(3)  # everything after its start: the list the gap asked for answers after its end
        beat.text("All checks passed.").end()
        # The list's answer, not a later gap, ends the run here (the next seq'd frame would show that gap).
        await env.until(
            lambda: (
                keeper.ledger.is_settled(key, "beat")
                or ((run := keeper.ledger.get(key, "beat")) is not None and run.life.ended)
            )
        )
        env.sim.tick_now()
        await env.settled()
        messages = await env.messages(chat_id)
        m = ids.message_id(key, "beat")
        assert set(messages) == {"u1", m}
        assert messages[m]["done"] is True and messages[m]["content"] == "All checks passed."
        assert keeper.ledger.is_settled(key, "beat")


@pytest.mark.virtual_seconds(2)  # a second between the heartbeat's end and the tick, and the reconnect's backoff
async def test_a_gap_whose_pass_a_close_cut_short_is_looked_at_again_by_the_next_hellos_pass(tmp_path, clock) -> None:
    """Fuzz seed 320774: a slow connection lost every event of a speaking heartbeat (a gap), the gap's pass began,
    and the connection closed before the pass was done. The close moved the next pass's watermark to the closed
    connection's last event, past the heartbeat's end, so the next hello's pass never looked at it: no message.
    A gap whose pass is not done keeps the watermark at the last event before the gap."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        env.sim.start_run(key, "first", origin="cron").text("First.").end()
        await env.settled()
        env.sim.drop(100)  # every droppable event of the heartbeat
        env.sim.start_run(key, "beat", heartbeat=True, origin="heartbeat").text("The build is red.").end()
        for conn in env.sim.conns.values():
            conn.drop_next = 0
        env.sim.stall_requests("chat.history")  # the gap's pass reads the transcript: held
        clock.jump(1)
        env.sim.tick_now()  # the gap shows; this tick's time is past the heartbeat's end (the connection's last)
        await env.until(lambda: bool(keeper.table is not None and keeper.table.gaps_owed))
        env.sim.disconnect()  # the pass is cut short
        env.sim.fail_requests()  # heals, and lets what the stall holds go
        await env.settled()
        messages = await env.messages(chat_id)
        beat = ids.message_id(key, "beat")
        assert set(messages) == {"u1", ids.message_id(key, "first"), beat}
        assert messages[beat]["done"] is True and messages[beat]["content"] == "The build is red."


async def test_a_gap_whose_pass_could_not_read_the_transcript_is_looked_at_again_at_the_next_tick(
    tmp_path, clock
) -> None:
    """Fuzz seed 320809: the gap's pass met a failing ``chat.history`` and fell short, and nothing ran it again (the
    hello's pass goes again at each tick until it is done; a gap's did not): the heartbeat the gap swallowed never
    got its message, and the runtime called itself settled. A gap's pass that falls short goes again at the next
    tick, and the runtime is not settled until it is done."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        env.sim.start_run(key, "first", origin="cron").text("First.").end()
        await env.settled()
        env.sim.drop(100)
        env.sim.start_run(key, "beat", heartbeat=True, origin="heartbeat").tool("exec", {"i": 1}, "ok").text(
            "Two checks failed."
        ).end()
        for conn in env.sim.conns.values():
            conn.drop_next = 0
        env.sim.fail_requests("chat.history")
        env.sim.tick_now()  # the gap shows; its pass fails to read
        await env.until(
            lambda: (
                bool(keeper.table is not None and keeper.table.gaps_owed)
                and not any(owed.running for owed in keeper.table.gaps_owed)
            )
        )
        assert not keeper.quiet()
        env.sim.fail_requests()  # the transcript answers again
        env.sim.tick_now()
        await env.settled()
        messages = await env.messages(chat_id)
        beat = ids.message_id(key, "beat")
        assert set(messages) == {"u1", ids.message_id(key, "first"), beat}
        assert messages[beat]["done"] is True and messages[beat]["content"] == "Two checks failed."
        assert count_cards(messages[beat]["output"]) == 1


async def test_the_finished_message_reaches_the_tabs_with_its_place(tmp_path) -> None:
    """Issue 24, item 11 (seed 003, ELI-230): the final ``chat:messages`` of a message the writer made carries its
    parent's link and the chat's ``currentId``, so a tab whose load began before the claim shows it in its place;
    a message taken over from a dead writer is sent alone."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        env.sim.start_run(key, "placed").text("Here it is.").end()
        await env.settled()
        m = ids.message_id(key, "placed")
        final = [e.event for e in env.emitter.of(m, "chat:messages")][-1]["data"]
        assert final["messages"][m]["done"] is True
        assert final["messages"]["u1"] == {"id": "u1", "childrenIds": [m]}
        assert final["currentId"] == m
        assert (await env.store.read_chat(chat_id))["history"]["currentId"] == m


def _hold_the_first_transcript_read(env: Any) -> list[object]:
    """The Gateway never answers the first ``chat.history`` (the client's RPC bound runs out), answers the others:
    the held frame is in the list returned."""
    held: list[object] = []
    answer = env.sim.rpc.answer

    def hold_the_first(conn, frame) -> None:  # type: ignore[no-untyped-def]
        if not held:
            held.append(frame)
        else:
            answer(conn, frame)

    env.sim.rpc.hold = hold_the_first
    env.sim.stall_requests("chat.history")
    return held


async def test_a_transcript_read_that_times_out_is_read_again_and_the_transcript_decides(tmp_path, mock_clock) -> None:
    """Issue 24, item 9: a finalize's ``chat.history`` gets no answer within the RPC bound (a loaded Gateway). The
    timeout must not pick the message's content: the read goes again at the next tick, and the message is finished
    from the transcript (before: from the stream, which joined the run mid-way and lacked its start)."""
    from fuzzing import PLAY_BOUND_S, virtual_time

    async with virtual_time(mock_clock), open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        run = env.sim.start_run(key, "slow-read").text("Before owc came.")
        keeper = await env.connect()
        run.text(" After.")

        def streaming_and_reconciled() -> bool:
            live = keeper.ledger.get(key, "slow-read")
            table = keeper.table
            return (
                live is not None and live.life.state is State.STREAMING and table is not None and not table.reconciling
            )

        await keeper.until(streaming_and_reconciled)
        held = _hold_the_first_transcript_read(env)
        writes: list[tuple[bool, str]] = []
        write = env.store.write

        async def spy(chat: str, message: str, **kwargs):  # type: ignore[no-untyped-def]
            writes.append((kwargs["done"], kwargs["content"]))
            return await write(chat, message, **kwargs)

        env.store.write = spy  # type: ignore[method-assign]
        run.end()
        with trio.fail_after(PLAY_BOUND_S):
            await env.settled()
        assert held, "the first transcript read was held past its bound"
        assert [w for w in writes if w[0]] == [(True, "Before owc came. After.")]
        assert (await env.messages(chat_id))[ids.message_id(key, "slow-read")]["content"] == "Before owc came. After."


def _hold_transcript_reads(env: Any) -> list[tuple[object, object]]:
    """Every ``chat.history`` request from now on is held unanswered, in the list returned."""
    held: list[tuple[object, object]] = []
    env.sim.rpc.hold = lambda conn, frame: held.append((conn, frame))
    env.sim.stall_requests("chat.history")
    return held


def _answer_held(env: Any, held: list[tuple[object, object]]) -> None:
    """The held requests answered, and the next ones answered at once."""
    env.sim.rpc.hold = env.sim.rpc.answer
    env.sim.fail_requests()  # heals: the queued requests go
    for conn, frame in held:
        env.sim.rpc.answer(conn, frame)  # type: ignore[arg-type]


def _all_finalizing(keeper: Any, keys: list[str]) -> bool:
    """Run ``r<n>`` of each ``keys[n]`` is finalizing."""
    return all(
        (run := keeper.ledger.get(key, f"r{n}")) is not None and run.life.state is State.FINALIZING
        for n, key in enumerate(keys)
    )


async def _each_answered(env: Any, keys: list[str]) -> None:
    """Run ``r<n>`` of each ``keys[n]`` has its finished message saying ``Answer <n>.``."""
    for n, key in enumerate(keys):
        ref = ids.parse_session_key(key)
        assert ref is not None
        message = (await env.messages(ref.chat_id))[ids.message_id(key, f"r{n}")]
        assert message["done"] is True and message["content"] == f"Answer {n}."


async def test_transcript_reads_in_flight_are_bounded_by_the_gateways_buffer(tmp_path, mock_clock) -> None:
    """Issue 24, item 9: runs ending together read their transcripts a few at a time (the replies in flight stay
    within half the Gateway's per-client buffer, ``policy.maxBufferedBytes``: 6 on 2026.9.6), not all at once (10,000
    reads at once ran 401 into the RPC bound). Nothing times out here: Trio's clock does not move."""
    from owc.runs.writer import history_reads
    from owc.sim.server import MAX_BUFFERED_BYTES

    limit = history_reads(MAX_BUFFERED_BYTES)
    assert limit == 6
    mock_clock.autojump_threshold = float("inf")
    async with open_env(tmp_path) as env:
        keeper = await env.connect()
        await keeper.until(lambda: keeper.table is not None and not keeper.table.reconciling)
        keys = [(await env.chat())[1] for _ in range(limit + 4)]
        held = _hold_transcript_reads(env)
        for n, key in enumerate(keys):
            env.sim.start_run(key, f"r{n}").text(f"Answer {n}.").end()
        await keeper.until(lambda: _all_finalizing(keeper, keys))
        await env.sim.wait_for(lambda: len(held) >= limit)
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert len(held) == limit, "more transcript reads in flight than the bound"
        _answer_held(env, held)
        await env.settled()
        await _each_answered(env, keys)


async def test_finalizes_in_flight_are_bounded_in_the_process(tmp_path, mock_clock, monkeypatch) -> None:
    """Issue 32, goal 5: runs that end together finalize a bounded number at a time (``FINALIZES_AT_ONCE``), each
    from its transcript read to its write, so what a finalize holds is held by that many, not by every run that
    ended (10,000 in a burst kept ~110 MB that CPython's allocator then kept). Here the bound is 2 and the
    connection's own bound on transcript reads 6: exactly 2 reads go out while all 7 runs wait to finalize, and
    every message is finished with its text once the reads are answered. Nothing times out: Trio's clock does not
    move."""
    monkeypatch.setattr("owc.runs.table.FINALIZES_AT_ONCE", 2)
    mock_clock.autojump_threshold = float("inf")
    async with open_env(tmp_path) as env:
        keeper = await env.connect()
        await keeper.until(lambda: keeper.table is not None and not keeper.table.reconciling)
        keys = [(await env.chat())[1] for _ in range(7)]
        held = _hold_transcript_reads(env)
        for n, key in enumerate(keys):
            env.sim.start_run(key, f"r{n}").text(f"Answer {n}.").end()
        await keeper.until(lambda: _all_finalizing(keeper, keys))
        await env.sim.wait_for(lambda: len(held) >= 2)
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert len(held) == 2, f"{len(held)} finalizes read their transcripts at once, past the bound of 2"
        assert keeper.finalizing.borrowed_tokens == 2
        _answer_held(env, held)
        await env.settled()
        assert keeper.finalizing.borrowed_tokens == 0
        await _each_answered(env, keys)


async def test_a_stop_reaches_the_gateway_while_other_finalizes_hold_every_turn(
    tmp_path, mock_clock, monkeypatch
) -> None:
    """The bound on finalizes never delays a Stop: the run is aborted at the Gateway at once (the agent stops acting
    now), and only its finalize waits for a turn. Here the one turn is held by another run's finalize whose
    transcript read goes unanswered."""
    monkeypatch.setattr("owc.runs.table.FINALIZES_AT_ONCE", 1)
    mock_clock.autojump_threshold = float("inf")
    async with open_env(tmp_path) as env:
        chat_a, key_a = await env.chat()
        chat_b, key_b = await env.chat()
        keeper = await env.connect()
        await keeper.until(lambda: keeper.table is not None and not keeper.table.reconciling)
        env.sim.start_run(key_b, "b", steps=[Text("Partial answer"), Hold()])
        await keeper.until(lambda: keeper.totals()[0] == 1)  # b claimed and streaming
        held = _hold_transcript_reads(env)
        env.sim.start_run(key_a, "a").text("A.").end()
        await env.sim.wait_for(lambda: len(held) == 1)  # a's finalize holds the one turn, its read unanswered
        assert keeper.table.stop(chat_b) == 1
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert env.sim.requests["chat.abort"] == 1, "the Stop waited for a finalize's turn"
        assert keeper.finalizing.borrowed_tokens == 1
        _answer_held(env, held)
        await env.settled()
        b = (await env.messages(chat_b))[ids.message_id(key_b, "b")]
        a = (await env.messages(chat_a))[ids.message_id(key_a, "a")]
        assert b["done"] and b["content"] == "Partial answer" and a["done"] and a["content"] == "A."


async def test_a_finalize_waiting_for_the_next_tick_lets_the_others_go_first(tmp_path, mock_clock, monkeypatch) -> None:
    """A finalize whose transcript read timed out waits for the Gateway's next tick to read again (issue 24, item
    9): that wait is the Gateway's, so it lets go of its turn meanwhile. With one turn, the run that ended after it
    is finished first, at once, instead of after the tick."""
    from fuzzing import PLAY_BOUND_S, virtual_time

    monkeypatch.setattr("owc.runs.table.FINALIZES_AT_ONCE", 1)
    async with virtual_time(mock_clock), open_env(tmp_path) as env:
        chat_a, key_a = await env.chat()
        chat_b, key_b = await env.chat()
        keeper = await env.connect()
        await keeper.until(lambda: keeper.table is not None and not keeper.table.reconciling)
        held = _hold_the_first_transcript_read(env)
        done: list[str] = []
        write = env.store.write

        async def spy(chat: str, message: str, **kwargs):  # type: ignore[no-untyped-def]
            result = await write(chat, message, **kwargs)
            if kwargs["done"]:
                done.append(chat)
            return result

        env.store.write = spy  # type: ignore[method-assign]
        env.sim.start_run(key_a, "a").text("A.").end()
        await env.sim.wait_for(lambda: held)  # a's read went out first: a holds the one turn
        env.sim.start_run(key_b, "b").text("B.").end()
        with trio.fail_after(PLAY_BOUND_S):
            await env.settled()
        assert done == [chat_b, chat_a], "the run that waited for a tick kept its turn"
        assert (await env.messages(chat_a))[ids.message_id(key_a, "a")]["content"] == "A."
        assert (await env.messages(chat_b))[ids.message_id(key_b, "b")]["content"] == "B."


async def test_the_gateways_internal_runs_never_get_a_message(tmp_path) -> None:
    """Issue 24, item 8: the Gateway's internal runs (a progress card refresh on the chat's own key, measured:
    ``progress-card-refresh:<sha256>``; a memory flush or a skill workshop review, flagged
    ``projectSessionLifecycle: false``) show on none of its own chat surfaces, so never in the chat either, whatever
    reaches owc of them."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        env.sim.start_run(key, "progress-card-refresh:" + "a" * 64).text("Card refreshed.").end()
        await env.settled()
        assert set(await env.messages(chat_id)) == {"u1"}


def _edit_chat_row(db: object, chat_id: str, edit: object) -> None:
    """Change a chat's row as another writer would (Open WebUI, an admin, a broken migration): ``edit(chat_json,
    user_id) -> (chat_json, user_id)``, straight in SQLite."""
    import json
    import sqlite3

    with sqlite3.connect(str(db)) as conn:
        raw, user = conn.execute("SELECT chat, user_id FROM chat WHERE id = ?", (chat_id,)).fetchone()
        chat, user = edit(json.loads(raw), user)  # type: ignore[operator]
        conn.execute("UPDATE chat SET chat = ?, user_id = ? WHERE id = ?", (json.dumps(chat), user, chat_id))


@pytest.mark.parametrize("change", ["reply deleted", "chat moved", "chat corrupted", "chat deleted"])
async def test_a_chat_changed_under_a_streaming_reply_ends_that_writer_with_one_line(
    tmp_path, caplog, change: str
) -> None:
    """Issue 24, item 13: mid-run the user deletes the streaming reply or the chat, the chat moves to another user,
    or its row stops being a message tree. That run's writer ends with one line (no traceback), writes nothing into
    the chat, and the connection and other chats go on."""
    import sqlite3

    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        _, other_key = await env.chat()
        keeper = await env.connect()
        run = env.sim.start_run(key, "changed").text("Half of it.")
        m = ids.message_id(key, "changed")
        await keeper.until(
            lambda: (r := keeper.ledger.get(key, "changed")) is not None and r.life.state is State.STREAMING
        )
        db = tmp_path / "webui.db"
        if change == "reply deleted":
            _edit_chat_row(
                db,
                chat_id,
                lambda c, u: (
                    {
                        **c,
                        "history": {
                            **c["history"],
                            "messages": {k: v for k, v in c["history"]["messages"].items() if k != m},
                        },
                    },
                    u,
                ),
            )
        elif change == "chat moved":
            _edit_chat_row(db, chat_id, lambda c, u: (c, "someone-else"))
        elif change == "chat corrupted":
            _edit_chat_row(db, chat_id, lambda c, u: ({**c, "history": {"messages": ["not", "a", "tree"]}}, u))
        else:
            with sqlite3.connect(str(db)) as conn:
                conn.execute("DELETE FROM chat WHERE id = ?", (chat_id,))
        before = sqlite3.connect(str(db)).execute("SELECT chat FROM chat WHERE id = ?", (chat_id,)).fetchone()
        run.text(" The rest.").end()
        env.sim.start_run(other_key, "other").text("Unharmed.").end()
        await env.settled()
        after = sqlite3.connect(str(db)).execute("SELECT chat FROM chat WHERE id = ?", (chat_id,)).fetchone()
        assert after == before, "nothing written into the changed chat"
        lines = [r.getMessage() for r in caplog.records if "run=changed" in r.getMessage()]
        assert any(line.startswith("runs.writer_ended run=changed") for line in lines), lines
        assert not any(r.exc_info for r in caplog.records if "run=changed" in r.getMessage())
        ref = ids.parse_session_key(other_key)
        assert ref is not None
        assert (await env.messages(ref.chat_id))[ids.message_id(other_key, "other")]["content"] == "Unharmed."


async def test_a_run_id_naming_a_users_message_never_writes_over_it(tmp_path, caplog) -> None:
    """Issue 24, item 13: a run id ``msg-<chat>-<M>-...`` whose M is the user's own message (a hostile or broken
    sender): the claim only ever writes an assistant message, so the user's words stay as they are."""
    async with open_env(tmp_path) as env:
        import uuid

        chat_id, key = await env.chat()
        mine = str(uuid.uuid4())
        await env.store.add_message(chat_id, {"id": mine, "role": "user", "content": "my words"}, current=True)
        await env.connect()
        run_id = f"msg-{chat_id}-{mine}-hostile"
        assert ids.message_id(key, run_id) == mine
        env.sim.start_run(key, run_id).text("Overwritten?").end()
        await env.settled()
        messages = await env.messages(chat_id)
        assert set(messages) == {"u1", mine}
        assert messages[mine]["content"] == "my words" and messages[mine]["role"] == "user"
        assert any("is a 'user' message, not a reply" in r.getMessage() for r in caplog.records)
