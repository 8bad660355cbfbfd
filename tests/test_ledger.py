"""No run lost at the seams between connections and processes (seed 000 sections 2.1-2.6, cases 4 and 6; P20).

Each test is named after the seed's regression test it stands for and fails without its fix. Every one runs on a
SQLite file and on a real PostgreSQL server, through the simulator on loopback, under a clock that never moves by
itself: the only virtual seconds spent are the ones declared (a reconnect's backoff, or owc's downtime).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio
import trio.testing

from owc import ids
from owc.gateway import SessionClosed
from owc.registry import WriterRegistry
from owc.render import count_cards
from owc.rules.lifecycle import State
from owc.rules.reconcile import HOST_CLOCK_MARGIN_MS
from owc.runs import reconcile as reconcile_module
from owc.sim import End, Hold, Text, Tool

from harness import USER, Env, open_env

RECOVERY = {"kind": "internal_system", "sourceTool": "main_session_restart_recovery"}


async def _reconnect(env: Env, name: str = "A") -> None:
    """Cut owc's TCP stream and wait until owc has seen it close (it then waits its 1 s backoff: the test
    jumps the clock when it wants the next connection)."""
    keeper = env.keepers[name]
    env.sim.disconnect()
    await keeper.until(lambda: keeper.table is None)
    await env.clients[name].wait_backing_off()


async def _next_connection(env: Env, clock, name: str = "A") -> None:
    """Let owc's backoff (the transport's own timer) run out: the clock moves only by that much."""
    until = await env.clients[name].wait_backing_off()
    clock.jump(until - trio.current_time())


def _ended_then_live(env: Env, key: str) -> tuple[Any, trio.Event]:
    """A run that ended while owc was down, then one still going when owc connects; the hello's pass holds at
    its database read until the returned event is set (so a test can set a fault up on the new connection)."""
    env.sim.start_run(key, "ended-unseen").text("Ended while owc was down.").end()
    live = env.sim.start_run(key, "live-now").text("Live when owc starts.")
    real_facts, go_on = env.store.chat_facts, trio.Event()

    async def facts(chat_ids, present=None):
        await go_on.wait()
        return await real_facts(chat_ids, present)

    env.store.chat_facts = facts
    return live, go_on


async def _stub_chat(env: Env) -> tuple[str, str, str]:
    """A chat whose last turn is a user message and Open WebUI's own placeholder for the reply: ``done:
    false``, no ``openclaw_writer`` (what a request that died leaves). Returns (chat id, key, placeholder id)."""
    chat_id, stub = str(uuid.uuid4()), str(uuid.uuid4())
    messages: dict[str, Any] = {
        "u1": {
            "id": "u1",
            "parentId": None,
            "childrenIds": [stub],
            "role": "user",
            "content": "Deploy it",
            "models": ["openclaw.main"],
            "timestamp": 1,
        },
        stub: {
            "id": stub,
            "parentId": "u1",
            "childrenIds": [],
            "role": "assistant",
            "content": "",
            "done": False,
            "model": "openclaw.main",
            "timestamp": 1,
        },
    }
    body = {
        "id": chat_id,
        "title": "t",
        "models": ["openclaw.main"],
        "history": {"messages": messages, "currentId": stub},
        "messages": [],
    }
    await env.store.create_chat(chat_id, USER, chat=body)
    return chat_id, ids.session_key("main", USER, chat_id), stub


# ------------------------------------------------------------------------------------------ case 6


@pytest.mark.virtual_seconds(1)  # the reconnect's backoff
async def test_ended_during_drop(tmp_path, clock, db_url) -> None:
    """EndedDuringDropTest: a claimed run ends while owc's WebSocket is down; at the next hello the list no
    longer shows it, and its message is finalized from the transcript (what it did meanwhile included)."""
    async with open_env(tmp_path, db_url=db_url) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        run = env.sim.start_run(key, "through-a-drop").text("Before the drop.")
        await keeper.until(lambda: keeper.totals()[0] == 1)
        await _reconnect(env)
        run.tool("exec", {"cmd": "df"}, "80% used").text("After it, unseen live.").end()
        await _next_connection(env, clock)
        await env.settled()
        m = ids.message_id(key, "through-a-drop")
        messages = await env.messages(chat_id)
        assert set(messages) == {"u1", m}
        assert messages[m]["done"] is True
        assert messages[m]["content"] == "Before the drop.\nAfter it, unseen live."
        assert count_cards(messages[m]["output"]) == 1
        assert keeper.totals() == (2, 1)  # the claim, the take-back at the next connection; one finalize


@pytest.mark.virtual_seconds(1)
@pytest.mark.parametrize("cli_runtime", [False, True], ids=["run-ids-listed", "session-active-without-ids"])
async def test_only_sign_after_a_reconnect_is_the_terminal(tmp_path, clock, db_url, cli_runtime) -> None:
    """The run's tools ran and its text arrived while the socket was cut; after the reconnect the only event of
    it is its terminal. Its message is taken back (listed with its id, or its session listed active without
    ids) and finished from the transcript, with the cards no live event showed."""
    async with open_env(tmp_path, db_url=db_url, cli_runtime=cli_runtime) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        run = env.sim.start_run(
            key,
            "quiet-after",
            steps=[Text("Started."), Hold(), Tool("exec", {}, "ran in the dark"), Text("More."), Hold(), End()],
        )
        await keeper.until(lambda: keeper.totals()[0] == 1)
        await _reconnect(env)
        run.release()  # the tool and the text happen while owc is away
        await trio.testing.wait_all_tasks_blocked()  # the run holds again; owc sleeps in its backoff
        assert env.sim.runs["quiet-after"].text.endswith("More.")
        await _next_connection(env, clock)
        await keeper.until(lambda: keeper.table is not None and keeper.table.hello is not None)
        run.release()  # now only the terminal
        await env.settled()
        m = ids.message_id(key, "quiet-after")
        msg = (await env.messages(chat_id))[m]
        assert msg["done"] is True and msg["content"] == "Started.\nMore." and count_cards(msg["output"]) == 1


# ------------------------------------------------------------------------------------------ joined mid-run


@pytest.mark.parametrize("after_the_join", [False, True], ids=["content-before-only", "content-before-and-after"])
async def test_recovery_started_before_subscribe(tmp_path, clock, db_url, after_the_join) -> None:
    """RecoveryStartedBeforeSubscribeTest: a recovery run starts before owc subscribes (its start push never
    reaches owc) and the hello's list shows it active. If everything it shows came before the join, it still
    gets its message at its end, from the transcript; if more comes after, it streams and ends the same."""
    async with open_env(tmp_path, db_url=db_url) as env:
        chat_id, key = await env.chat()
        steps = [Text("Recovered: the deploy finished."), Hold()]
        if after_the_join:
            steps.append(Text(" Verified after the join."))
        steps.append(End())
        run = env.sim.start_run(
            key, "recovery-1", origin="recovery", user_text="The gateway restarted.", provenance=RECOVERY, steps=steps
        )
        keeper = await env.connect()
        await keeper.until(lambda: keeper.table is not None and keeper.table.hello is not None)
        run.release()
        await env.settled()
        m = ids.message_id(key, "recovery-1")
        messages = await env.messages(chat_id)
        assert set(messages) == {"u1", m}
        expected = "Recovered: the deploy finished." + (" Verified after the join." if after_the_join else "")
        assert messages[m]["done"] is True and messages[m]["content"] == expected


async def test_recovery_that_ended_before_subscribe(tmp_path, clock, db_url) -> None:
    """The recovery ended before owc's first hello: the ended-while-away rule gives it its message."""
    async with open_env(tmp_path, db_url=db_url) as env:
        # The chat was last written a minute before (this clock never moves: say so rather than race a second).
        chat_id, key = await env.chat(now=env.sim.now_ms() // 1000 - 60)
        env.sim.start_run(
            key, "recovery-2", origin="recovery", user_text="The gateway restarted.", provenance=RECOVERY
        ).text("Done while nobody listened.").end()
        await env.connect()
        await env.settled()
        m = ids.message_id(key, "recovery-2")
        messages = await env.messages(chat_id)
        assert messages[m]["done"] is True and messages[m]["content"] == "Done while nobody listened."
        assert messages[m]["parentId"] == "u1"


# ------------------------------------------------------------------------------------------ events lost while connected


async def test_all_deltas_lost_and_an_error_terminal_without_text(tmp_path, clock, db_url) -> None:
    """Every text event of the run is dropped (slow-consumer drops spend their seq numbers) and its terminal is
    an error with no text: the stream shows nothing, but it missed events, so the transcript decides, and it
    holds the text: one message with the text and the error."""
    async with open_env(tmp_path, db_url=db_url) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        run = env.sim.start_run(key, "muffled")
        await keeper.until(lambda: keeper.ledger.get(key, "muffled") is not None)
        env.sim.drop(3)  # the run's three text deltas
        run.text("Partial work before the failure.", chunks=["Partial ", "work before ", "the failure."])
        run.end("error", error="the model provider failed")
        await env.settled()
        m = ids.message_id(key, "muffled")
        msg = (await env.messages(chat_id))[m]
        assert msg["done"] is True and msg["content"] == "Partial work before the failure."
        assert msg["error"] == {"content": "the model provider failed"}


@pytest.mark.virtual_seconds(1)
async def test_stop_mode_cut_is_finalized_from_the_transcript(tmp_path, clock, db_url) -> None:
    """The Gateway's stop mode closes the connection right after the run's terminal, and a tool's result event
    had been lost: the message is not written from the stream (a card without its result) but finished at the
    next connection from the transcript."""
    async with open_env(tmp_path, db_url=db_url) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        run = env.sim.start_run(key, "cut-by-stop").text("Deploying.")
        call = run.tool_start("exec", {"cmd": "make deploy"})
        await keeper.until(lambda: keeper.totals()[0] == 1)
        env.sim.drop(1)  # the result's session.tool event
        run.tool_result(call, "deployed to 3 hosts")
        await env.sim.restart("stop")
        await _next_connection(env, clock)
        await env.settled()
        msg = (await env.messages(chat_id))[ids.message_id(key, "cut-by-stop")]
        assert msg["done"] is True
        (result,) = [i for i in msg["output"] if i["type"] == "function_call_output"]
        assert "deployed to 3 hosts" in str(result["output"])


# ------------------------------------------------------------------------------------------ case 4 and P20


@pytest.mark.virtual_seconds(30)  # owc is down for half a minute
async def test_ended_while_away(tmp_path, clock, db_url) -> None:
    """EndedWhileAwayTest: owc's process stops mid-run; the run ends, and another starts and ends, while no owc
    runs; owc starts again on the same database (a new process). The first one's message is finished from the
    transcript, the second gets its message, in run order at the tail, and nothing is duplicated."""
    async with open_env(tmp_path, db_url=db_url) as env:
        chat_id, key = await env.chat()
        a = await env.connect("A", registry=WriterRegistry())
        run = env.sim.start_run(key, "outlived-owc").text("Begun while owc ran.")
        await a.until(lambda: a.totals()[0] == 1)
        await env.kill("A")
        clock.jump(30)
        run.tool("exec", {}, "ok").text("Ended while owc was down.").end()
        env.sim.start_run(key, "entirely-away").text("Started and ended while owc was down.").end()
        b = await env.connect("B", registry=WriterRegistry())
        await env.settled()
        first, second = ids.message_id(key, "outlived-owc"), ids.message_id(key, "entirely-away")
        messages = await env.messages(chat_id)
        assert set(messages) == {"u1", first, second}
        assert (
            messages[first]["done"] and messages[first]["content"] == "Begun while owc ran.\nEnded while owc was down."
        )
        assert count_cards(messages[first]["output"]) == 1
        assert messages[second]["done"] and messages[second]["content"] == "Started and ended while owc was down."
        assert messages[second]["parentId"] == first  # chained in run order
        assert b.totals()[1] == 2


@pytest.mark.virtual_seconds(30)  # the correction waits for the Gateway's next tick
async def test_orphan_stub_adopted_without_history(tmp_path, clock, db_url) -> None:
    """OrphanStubAdoptedWithoutHistoryTest (2026-10-12 23:29Z): the chat holds Open WebUI's stub M, done:false,
    left by a request that died; the run msg-<chat>-<M>-<t> arrives on a connection with no consumer, and the
    transcript cannot be read. The run writes into M (its identity is in its id) and M ends done with the run's
    text and cards; no second message."""
    async with open_env(tmp_path, db_url=db_url) as env:
        chat_id, key, stub = await _stub_chat(env)
        keeper = await env.connect()
        env.sim.fail_requests("chat.history")
        run_id = ids.input_run_id(chat_id, stub, "1")
        env.sim.start_run(key, run_id, origin="chat.send", user_text="Deploy it").text("Deploying now.").tool(
            "exec", {"cmd": "make"}, "ok"
        ).text("Deployed.").end()
        await keeper.until(lambda: keeper.ledger.is_settled(key, run_id))
        for _ in range(2):  # finished from the stream; then, once the transcript answers, checked against it
            messages = await env.messages(chat_id)
            assert set(messages) == {"u1", stub}
            assert messages[stub]["done"] is True and messages[stub]["content"] == "Deploying now.\nDeployed."
            assert count_cards(messages[stub]["output"]) == 1
            env.sim.fail_requests()
            await env.settled()


@pytest.mark.virtual_seconds(30)
async def test_a_message_finished_while_the_transcript_failed_is_corrected_and_keeps_its_error(
    tmp_path, clock, db_url
) -> None:
    """A run calls a tool while owc's socket is cut, owc joins it mid-run, and it ends in an error while
    ``chat.history`` fails: the message is finished from the stream (no card: the stream missed it). Once the
    transcript answers, the next tick corrects it (the card comes) and the run's error note stays (fuzzer,
    ``history-fallback-gaps``)."""
    async with open_env(tmp_path, db_url=db_url) as env:
        chat_id, key, _ = await _stub_chat(env)
        keeper = await env.connect()
        run = env.sim.start_run(key, "cut", origin="cron")
        await _reconnect(env)
        run.tool("exec", {"cmd": "make"}, "ok")
        await _next_connection(env, clock)
        await keeper.until(lambda: keeper.table is not None and keeper.table.hello is not None)
        env.sim.fail_requests("chat.history")
        run.text("It broke.").end("error", error="boom")
        m = ids.message_id(key, "cut")
        await keeper.until(lambda: keeper.ledger.is_settled(key, "cut"))
        first = (await env.messages(chat_id))[m]
        assert first["done"] is True and count_cards(first["output"]) == 0 and first.get("error")
        env.sim.fail_requests()
        await env.settled()  # the next Gateway tick reads the transcript again
        fixed = (await env.messages(chat_id))[m]
        assert count_cards(fixed["output"]) == 1 and "It broke." in fixed["content"]
        assert fixed["error"] == first["error"]


@pytest.mark.virtual_seconds(30)
async def test_orphan_stub_reconcile(tmp_path, clock, db_url) -> None:
    """OrphanStubReconcile: the request died with Open WebUI, and the run ended while no owc ran; owc starts
    and its reconcile finishes the stub from the transcript."""
    async with open_env(tmp_path, db_url=db_url) as env:
        chat_id, key, stub = await _stub_chat(env)
        clock.jump(30)
        run_id = ids.input_run_id(chat_id, stub, "2")
        env.sim.start_run(key, run_id, origin="chat.send", user_text="Deploy it").text(
            "Deployed while you were away."
        ).tool("exec", {}, "ok").end()
        await env.connect()
        await env.settled()
        messages = await env.messages(chat_id)
        assert set(messages) == {"u1", stub}
        assert messages[stub]["done"] is True and messages[stub]["content"] == "Deployed while you were away."
        assert count_cards(messages[stub]["output"]) == 1


async def test_reconcile_leaves_history_from_before_owc_alone(tmp_path, clock, db_url) -> None:
    """Runs older than the chat's own last write (its history from before owc, or runs that rightly have no
    message) are never given a message by the reconcile."""
    async with open_env(tmp_path, db_url=db_url) as env:
        key_chat = str(uuid.uuid4())
        key = ids.session_key("main", USER, key_chat)
        env.sim.start_run(key, "ancient").text("From before owc.").end()
        env.sim.start_run(key, "silent").text("NO_REPLY").end()
        # The chat was written after those runs ended, by more than the margin for two hosts' clocks.
        await env.chat(key_chat, now=(env.sim.now_ms() + HOST_CLOCK_MARGIN_MS) // 1000 + 1)
        await env.connect()
        await env.settled()
        assert set(await env.messages(key_chat)) == {"u1"}


@pytest.mark.virtual_seconds(32)  # owc's downtime, a second of its life, then one reconnect's backoff
async def test_a_reconcile_cut_short_is_done_again_from_the_same_watermark(tmp_path, clock, db_url) -> None:
    """The first hello's reconcile does not finish (here its database read fails for as long as the connection
    lasts; a close mid-pass is the same): the next connection must look again from the same watermark, not
    from the events the first one saw, or the run that ended while owc was down is never given its message
    (found by a random fault schedule)."""
    async with open_env(tmp_path, db_url=db_url) as env:
        chat_id, key = await env.chat()
        clock.jump(30)
        env.sim.start_run(key, "ended-unseen").text("Ended before owc started.").end()
        real_facts, calls, failing = env.store.chat_facts, [], [True]

        async def fails_on_the_first_connection(chat_ids, present=None):
            calls.append(chat_ids)
            if failing[0]:
                raise RuntimeError("database went away")
            return await real_facts(chat_ids, present)

        env.store.chat_facts = fails_on_the_first_connection
        keeper = await env.connect()
        await keeper.until(lambda: keeper.table.hello is not None and not keeper.table.reconciling)
        assert not keeper.quiet()  # a pass that fell short is work left (the next tick runs it again)
        m = ids.message_id(key, "ended-unseen")
        assert m not in await env.messages(chat_id)  # the first pass failed
        clock.jump(1)
        env.sim.start_run(key, "seen-live").text("Seen live.").end()  # moves the connection's last event on
        await keeper.until(lambda: keeper.ledger.is_settled(key, "seen-live"))
        await _reconnect(env)
        failing[0] = False
        await _next_connection(env, clock)
        await env.settled()
        messages = await env.messages(chat_id)
        assert messages[m]["done"] is True and messages[m]["content"] == "Ended before owc started."
        assert len(calls) == 2


@pytest.mark.virtual_seconds(30)  # one Gateway tick
async def test_a_reconcile_that_fell_short_runs_again_at_the_next_tick(tmp_path, clock) -> None:
    """The hello's pass falls short (its database read fails once; a ``chat.history`` that fails is the same):
    the Gateway's next tick runs it again on the same connection (before, nothing did until some later
    reconnect: found by the fuzzer, ``reconcile-not-retried``)."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        env.sim.start_run(key, "ended-unseen").text("Ended before owc started.").end()
        real_facts, calls = env.store.chat_facts, []

        async def fails_once(chat_ids, present=None):
            calls.append(chat_ids)
            if len(calls) == 1:
                raise RuntimeError("database went away")
            return await real_facts(chat_ids, present)

        env.store.chat_facts = fails_once
        keeper = await env.connect()
        await keeper.until(lambda: keeper.table.hello is not None and not keeper.table.reconciling)
        m = ids.message_id(key, "ended-unseen")
        assert m not in await env.messages(chat_id) and not keeper.table.reconciled
        clock.jump(30)  # the Gateway's next tick
        await env.settled()
        assert (await env.messages(chat_id))[m]["content"] == "Ended before owc started."
        assert len(calls) == 2
        assert env.clients["A"].connections_opened == 1


@pytest.mark.virtual_seconds(30)
async def test_a_live_claim_does_not_hide_a_run_that_ended_while_away(tmp_path, clock, db_url) -> None:
    """A run ended while owc was down; when owc starts, another run in the same chat is live. The live run's
    claim waits for the hello's reconcile pass over its chat, so the run that ended while away gets its message
    first and the two chain in run-start order (found by a random fault schedule: before, the live claim moved
    the chat's ``updated_at`` first and hid the other run; later the live message sat above it). The chats'
    facts are read while the live claim waits, not after it."""
    async with open_env(tmp_path, db_url=db_url) as env:
        env.sim.skew(-120_000)  # the Gateway's clock is 2 minutes behind: the live claim's time is after the end
        chat_id, key = await env.chat(now=env.sim.now_ms() // 1000 - 60)
        clock.jump(30)
        env.sim.start_run(key, "ended-unseen").text("Ended while owc was down.").end()
        live = env.sim.start_run(key, "live-now").text("Live when owc starts.")
        real_facts = env.store.chat_facts
        claims_before_facts: list[int] = []

        async def facts(chat_ids, present=None):
            claims_before_facts.append(env.keepers["A"].totals()[0])
            return await real_facts(chat_ids, present)

        env.store.chat_facts = facts
        await env.connect()
        live.end()
        await env.settled()
        messages = await env.messages(chat_id)
        first, second = ids.message_id(key, "ended-unseen"), ids.message_id(key, "live-now")
        assert messages[first]["done"] and messages[first]["content"] == "Ended while owc was down."
        assert messages[second]["done"] and messages[second]["content"] == "Live when owc starts."
        assert messages[first]["parentId"] == "u1" and messages[second]["parentId"] == first
        assert claims_before_facts == [0]


async def test_a_gateway_clock_a_little_behind_hides_no_run_that_ended_just_before_the_chats_write(
    tmp_path, clock, db_url
) -> None:
    """The Gateway's clock is 1.5 s behind this host's: a run that ended while owc was down looks older than the
    chat's own last write (whole seconds, this host's clock), the chat holds no run's message yet, and the
    session's last run is live, so neither transcript order nor ``lastRunId`` (only the newest ended run) can
    tell. Two hosts' clocks are compared with a margin (``HOST_CLOCK_MARGIN_MS``): the run gets its message,
    before the live one (fuzzer seeds 3669 and 9652, 1 play in 10 under load, with the simulator's clock a few
    ms behind the wall's)."""
    async with open_env(tmp_path, db_url=db_url) as env:
        env.sim.skew(-1_500)
        chat_id, key = await env.chat()
        env.sim.start_run(key, "ended-first").text("Ended while owc was down.").end()
        env.sim.start_run(key, "ended-last").text("Also ended while owc was down.").end()  # the list's lastRunId
        live = env.sim.start_run(key, "live-now").text("Live when owc starts.")
        await env.connect()
        live.end()
        await env.settled()
        messages = await env.messages(chat_id)
        first, last, now = (ids.message_id(key, r) for r in ("ended-first", "ended-last", "live-now"))
        assert messages[first]["done"] and messages[first]["content"] == "Ended while owc was down."
        assert messages[last]["done"] and messages[last]["content"] == "Also ended while owc was down."
        assert messages[now]["done"] and messages[now]["content"] == "Live when owc starts."
        assert messages[first]["parentId"] == "u1"
        assert messages[last]["parentId"] == first and messages[now]["parentId"] == last


@pytest.mark.virtual_seconds(31)  # owc's downtime, then one reconnect's backoff
async def test_a_pass_cut_by_its_connections_close_lets_no_live_claim_go_first(
    tmp_path, clock, db_url, monkeypatch
) -> None:
    """The hello's pass sends its transcript read just as the Gateway closes the connection: the send fails
    (``SessionClosed``) while this side's reader is still working through the frames before the close. A live
    run there that has ended waits for the pass; the pass's end must not release it in that moment (before, it
    claimed then, above the run that ended while owc was down: fuzzer seeds 3669 and 9652, 1 play in 10). It is
    carried behind the next connection's pass, and the two chain in run order."""
    async with open_env(tmp_path, db_url=db_url) as env:
        chat_id, key = await env.chat()
        clock.jump(30)
        live, go_on = _ended_then_live(env, key)

        async def closed_under_it(request, params):
            raise SessionClosed("chat.history")

        monkeypatch.setattr(reconcile_module, "read_history_page", closed_under_it)
        keeper = await env.connect()
        run = keeper.ledger.get(key, "live-now")
        live.end()
        await keeper.until(lambda: run.life.ended and run.life.state is State.CLAIMING)
        go_on.set()
        await keeper.until(lambda: not keeper.table.reconciling)
        assert not run.life.claimed  # it still waits, until the close cancels it
        monkeypatch.undo()
        await _reconnect(env)
        await _next_connection(env, clock)
        await env.settled()
        messages = await env.messages(chat_id)
        first, second = ids.message_id(key, "ended-unseen"), ids.message_id(key, "live-now")
        assert messages[first]["content"] == "Ended while owc was down."
        assert messages[second]["content"] == "Live when owc starts."
        assert messages[first]["parentId"] == "u1" and messages[second]["parentId"] == first


@pytest.mark.virtual_seconds(60)  # owc's downtime, then the Gateway's tick that runs the pass again
async def test_a_run_found_after_chat_history_failed_takes_its_place_above_a_later_live_run(
    tmp_path, clock, db_url
) -> None:
    """``chat.history`` fails at the hello: the pass cannot learn which runs ended while owc was away, and a live
    run's claim does not wait for an outage of unknown length. When the transcript answers again (the pass again
    at a tick), the run found late goes above the live run's message: the chain keeps run-start order, by the
    transcript's order (before, it was chained below: the fuzzer's ``order-unreadable``, 33 of 10,000)."""
    async with open_env(tmp_path, db_url=db_url) as env:
        chat_id, key = await env.chat()
        clock.jump(30)
        live, go_on = _ended_then_live(env, key)

        keeper = await env.connect()
        env.sim.fail_requests("chat.history")  # the Gateway's transcript store fails
        go_on.set()
        await keeper.until(lambda: not keeper.table.reconciling)
        assert not keeper.table.reconciled
        live.end()
        first, second = ids.message_id(key, "ended-unseen"), ids.message_id(key, "live-now")
        await keeper.until(lambda: keeper.ledger.is_settled(key, "live-now"))
        assert first not in await env.messages(chat_id)
        env.sim.fail_requests()  # healed
        clock.jump(30)  # the Gateway's next tick: the pass again
        await env.settled()
        messages = await env.messages(chat_id)
        assert messages[first]["content"] == "Ended while owc was down."
        assert messages[second]["content"] == "Live when owc starts."
        assert messages[first]["parentId"] == "u1" and messages[second]["parentId"] == first
        assert messages["u1"]["childrenIds"] == [first] and messages[first]["childrenIds"] == [second]
        chat = await env.store.read_chat(chat_id)
        assert chat["history"]["currentId"] == second


class _HeldBack:
    """One process's view of the shared database whose claims of one message, and whose reconcile pass's first
    read, wait until the test lets them go: the order two processes act in is the test's to choose."""

    def __init__(self, store: Any, message_id: str | None = None) -> None:
        self._store = store
        self._message_id = message_id
        self.claims = trio.Event()
        self.facts = trio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def claim(self, chat_id: str, message_id: str, **kwargs: Any) -> Any:
        if message_id == self._message_id:
            await self.claims.wait()
        return await self._store.claim(chat_id, message_id, **kwargs)

    async def chat_facts(self, chat_ids: list[str], present: Any = None) -> Any:
        await self.facts.wait()
        return await self._store.chat_facts(chat_ids, present)


async def test_a_run_claimed_below_a_later_one_while_chat_history_failed_is_put_in_order_once_it_answers(
    tmp_path, mock_clock, db_url
) -> None:
    """Fuzz seed 150032, no restart at all: process A hears run E start and end, its claim slow (held here). B, a
    process that connects after E ended, cannot read the chat's transcript (``chat.history`` fails), so its pass
    cannot learn of E and lets B's live claim of the next run L go on (a failing read holds no live reply): L's
    message comes first. A then claims E, below L, and finalizes it from its stream: its transcript, the one
    thing that says E began first, does not answer. Once it answers (a Gateway tick), the line is put in start
    order (``owc/runs/correct.py``, ``ChatStore.put_in_order``); before, it stayed [L, E] for good ([order])."""
    from fuzzing import PLAY_BOUND_S, virtual_time

    async with virtual_time(mock_clock), open_env(tmp_path, db_url=db_url) as env:
        chat_id, key = await env.chat()
        first, second = ids.message_id(key, "E"), ids.message_id(key, "L")
        slow_a = _HeldBack(env.store, first)
        slow_a.facts.set()
        a = await env.connect("A", store=slow_a)
        await a.until(lambda: a.table is not None and a.table.reconciled)
        env.sim.start_run(key, "E", origin="cron").text("First.").end()
        await a.until(lambda: (run := a.ledger.get(key, "E")) is not None and run.life.ended)
        gated_b = _HeldBack(env.store)
        b = await env.connect("B", registry=WriterRegistry(), store=gated_b)
        env.sim.fail_requests("chat.history")  # the Gateway's transcript store fails, for both processes
        gated_b.facts.set()
        await b.until(lambda: b.table is not None and b.table.hello is not None and not b.table.reconciling)
        assert not b.table.reconciled
        env.sim.start_run(key, "L", origin="cron").text("Second.").end()
        with trio.fail_after(PLAY_BOUND_S):
            await env.until(lambda: b.ledger.is_settled(key, "L"))
        assert (await env.messages(chat_id))[second]["parentId"] == "u1"
        slow_a.claims.set()
        with trio.fail_after(PLAY_BOUND_S):
            await env.until(lambda: a.ledger.is_settled(key, "E") and a.ledger.is_settled(key, "L"))
        messages = await env.messages(chat_id)
        assert messages[first]["done"] is True and messages[first]["parentId"] == second  # the fault's shape
        env.sim.fail_requests()  # healed
        with trio.fail_after(PLAY_BOUND_S):
            await env.settled()  # the next Gateway tick reads the transcript again
        messages = await env.messages(chat_id)
        assert messages["u1"]["childrenIds"] == [first] and messages[first]["parentId"] == "u1"
        assert messages[first]["childrenIds"] == [second] and messages[second]["parentId"] == first
        assert messages[first]["content"] == "First." and messages[second]["content"] == "Second."
        assert (await env.store.read_chat(chat_id))["history"]["currentId"] == second
        told = [
            e.event["data"]
            for e in env.emitter.events
            if e.message_id == first and e.type == "chat:messages" and second in e.event["data"]["messages"]
        ]
        assert told and told[-1]["messages"][first]["parentId"] == "u1", "the tabs are told the new links"
        assert told[-1]["messages"][second]["parentId"] == first and told[-1]["currentId"] == second


@pytest.mark.parametrize("read_again", ["answered", "failed"])
async def test_a_run_whose_transcript_was_read_before_its_claim_is_put_in_order_with_a_read_after_it(
    tmp_path, mock_clock, db_url, read_again
) -> None:
    """Fuzz seed 305323: A and B both hear a heartbeat E begin and end, showing nothing live, so its transcript
    decides. A reads it (E spoke) and claims, slowly (held here); B's read fails, which holds no later run up, so B
    gives the next run L its message. A's claim then puts E's message at the tail, under L's, and its finalize
    reused the transcript read before the claim: that read does not name L (L began after it), and the line stops
    at a run the order does not name, so [L, E] stayed for good ([order]). The finalize reads the transcript again
    when the one it holds was read before the claim; if that read fails, the earlier one gives E's content and a
    correction puts the line in order once the transcript answers."""
    from fuzzing import PLAY_BOUND_S, virtual_time

    async with virtual_time(mock_clock), open_env(tmp_path, db_url=db_url) as env:
        chat_id, key = await env.chat()
        first, second = ids.message_id(key, "E"), ids.message_id(key, "L")
        slow_a = _HeldBack(env.store, first)
        slow_a.facts.set()
        a = await env.connect("A", store=slow_a)
        b = await env.connect("B", registry=WriterRegistry())
        await env.until(lambda: all(p.table is not None and p.table.reconciled for p in (a, b)))
        env.sim.fail_requests("chat.history", conn="B")  # B's transcript reads fail; A's are answered
        env.sim.start_run(key, "E", heartbeat=True, origin="heartbeat").text("The build is red.").end()
        with trio.fail_after(PLAY_BOUND_S):
            await env.until(
                lambda: (
                    (e := a.ledger.get(key, "E")) is not None
                    and e.life.state is State.CLAIMING
                    and (f := b.ledger.get(key, "E")) is not None
                    and f.read.check_waits
                )
            )
        assert a.ledger.get(key, "E").read.history is not None  # A read E's transcript before its claim
        env.sim.start_run(key, "L", origin="cron").text("Later.").end()
        with trio.fail_after(PLAY_BOUND_S):
            await env.until(lambda: b.ledger.is_settled(key, "L"))
        assert (await env.messages(chat_id))[second]["parentId"] == "u1"
        if read_again == "failed":
            env.sim.fail_requests("chat.history", conn="A")
        slow_a.claims.set()
        with trio.fail_after(PLAY_BOUND_S):
            await env.until(lambda: a.ledger.is_settled(key, "E"))
        messages = await env.messages(chat_id)
        assert messages[first]["content"] == "The build is red." and messages[first]["done"] is True
        if read_again == "answered":
            # Put in start order by A's finalize itself (before: E under L, for good).
            assert messages["u1"]["childrenIds"] == [first] and messages[first]["parentId"] == "u1"
            assert messages[first]["childrenIds"] == [second] and messages[second]["parentId"] == first
        else:
            assert messages[first]["parentId"] == second  # the content from the earlier read; the order waits
            env.sim.fail_requests(conn="A")
        env.sim.fail_requests(conn="B")  # healed: B's check reads E's transcript, and finds E's message finished
        with trio.fail_after(PLAY_BOUND_S):
            await env.settled()
        messages = await env.messages(chat_id)
        assert messages["u1"]["childrenIds"] == [first] and messages[first]["parentId"] == "u1"
        assert messages[first]["childrenIds"] == [second] and messages[second]["parentId"] == first
        assert messages[first]["content"] == "The build is red." and messages[second]["content"] == "Later."
        assert env.illegal() == []


async def test_a_run_the_transcript_does_not_show_claims_by_its_own_time_while_the_pass_owes_a_later_run(
    tmp_path, mock_clock, db_url
) -> None:
    """Fuzz seed 333762: events reach owc before its subscribe's reply (the hello's list). A cron run Q says only
    ``NO_REPLY`` (the transcript shows nothing of it), S then speaks, and a heartbeat B (its events go only to
    subscribers) speaks and ends before the list comes. owc heard Q and S end, so the hello's pass owes B. S is in
    the transcript: it claims once the pass has no earlier run to give; Q is not, so it waited for the whole pass,
    although its own Gateway time (its events) put it before S, and S's claim waited for Q's; B's claim waited for
    S's, and the pass for B: a circle, the play hung. A run with a Gateway time of its own is placed by it, as the
    transcript places a run: Q claims first (and finds nothing to write), then S, then B."""
    from fuzzing import PLAY_BOUND_S, virtual_time

    async with virtual_time(mock_clock), open_env(tmp_path, db_url=db_url) as env:
        chat_id, key = await env.chat()
        held: list[tuple[Any, Any]] = []
        answer = env.sim.rpc.answer

        def hold_the_subscribe(conn, frame) -> None:  # type: ignore[no-untyped-def]
            if frame.method == "sessions.subscribe" and not held:
                held.append((conn, frame))  # answered below: events reach owc before the list
            else:
                answer(conn, frame)

        env.sim.rpc.answer = hold_the_subscribe  # type: ignore[method-assign]
        quiet = env.sim.start_run(key, "Q", origin="cron")  # begun before owc connects: its transcript decides
        async with trio.open_nursery() as nursery:
            nursery.start_soon(env.connect)
            with trio.fail_after(PLAY_BOUND_S):
                await env.sim.wait_for(lambda: bool(held))
            keeper = env.keepers["A"]
            quiet.text("NO_REPLY").end()
            mock_clock.jump(1)  # S begins a second after Q's end (Q's place is strictly before S's)
            env.sim.start_run(key, "S", origin="cron").text("Said.").end()
            env.sim.start_run(key, "B", heartbeat=True, origin="heartbeat").text("The build is red.").end()

            def claiming(run_id: str) -> bool:
                run = keeper.ledger.get(key, run_id)
                return run is not None and run.life.state is State.CLAIMING

            with trio.fail_after(PLAY_BOUND_S):
                await keeper.until(lambda: claiming("Q") and claiming("S"))
            assert keeper.ledger.get(key, "B") is None  # owc heard nothing of the heartbeat
            assert keeper.ledger.get(key, "Q").standing.timed  # a Gateway time of its own (its agent events)
            answer(*held[0])  # the list: the session's last run is B, which the pass owes
        with trio.fail_after(PLAY_BOUND_S):
            await env.settled()
        messages = await env.messages(chat_id)
        said, beat = ids.message_id(key, "S"), ids.message_id(key, "B")
        assert set(messages) == {"u1", said, beat}  # Q said nothing: no message
        assert messages[said]["content"] == "Said." and messages[beat]["content"] == "The build is red."
        assert messages[said]["parentId"] == "u1" and messages[beat]["parentId"] == said
        assert all(keeper.ledger.is_settled(key, run) for run in ("Q", "S", "B"))


@pytest.mark.virtual_seconds(1)  # the reconnect's backoff after the crash
async def test_a_crash_cut_run_whose_writer_died_is_finished_not_left_open(tmp_path, clock) -> None:
    """Process A claims and streams a run; B (another process) joins after the text was said and stands by. A
    dies, then the Gateway crashes: the run is cut with nothing in its transcript. B's next hello (a new boot)
    ends it (no run outlives its boot) and, its row still running, leaves it to the Gateway's recovery, which
    writes into the dead writer's message: B adopts it and finishes it (before: ``done: false`` for good, found
    by the fuzzer: ``crash-cut-open``)."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        a = await env.connect("A", registry=WriterRegistry())
        env.sim.start_run(key, "cut", steps=[Text("Said live only."), Hold()])
        await a.until(lambda: a.totals()[0] == 1)
        b = await env.connect("B", registry=WriterRegistry())
        await b.until(
            lambda: b.ledger.get(key, "cut") is not None and b.ledger.get(key, "cut").life.state is State.STANDBY
        )
        await env.kill("A")
        await env.sim.restart("crash")
        await _next_connection(env, clock, "B")
        await env.settled()
        m = ids.message_id(key, "cut")
        message = (await env.messages(chat_id))[m]
        assert message["done"] is True
        # The boot's recovery continues it, into the same message (link rule E, issue 14): B adopts the dead
        # writer's message for it, and nothing is left open.
        assert message["content"].endswith("Recovered after the Gateway restart.")
        assert ids.message_id(key, "cut") == m and [
            k for k, v in (await env.messages(chat_id)).items() if v["role"] == "assistant"
        ] == [m]


def test_the_settled_keys_the_ledger_remembers_are_bounded() -> None:
    """Issue 16, "the finished-run set bounded": the ledger remembers at most ``SETTLED_MEMORY`` settled runs'
    keys (so a late event does not open one again), the oldest forgotten first."""
    from owc.runs.ledger import SETTLED_MEMORY, Ledger

    ledger = Ledger()
    key = ids.session_key("main", "u1", "6f1c1c1e-6a55-4d0e-9d0c-3f2b7a1d0b11")
    for i in range(SETTLED_MEMORY + 25):
        run = ledger.open(key, f"r{i}")
        assert run is not None
        ledger.retire(run)
    assert len(ledger) == 0
    assert not ledger.is_settled(key, "r24") and ledger.is_settled(key, "r25")
    assert ledger.is_settled(key, f"r{SETTLED_MEMORY + 24}")
    assert ledger.open(key, "r30") is None  # remembered: a late event does not open it again
    assert ledger.open(key, "r3") is not None  # forgotten: it opens (its claim then finds the message done)


def test_the_ledger_knows_which_run_it_heard_begin_first_after_either_settles() -> None:
    """``heard_before``: the first event of one run heard before the other's (a session runs one at a time, so it
    began first), remembered when the runs settle; unknown (False) for a run never heard. The finalize owes an order
    correction only when it cannot tell (fuzz seed 150032; ``scenarios/history-stall.jsonl`` hung without this)."""
    from owc.runs.ledger import Ledger

    ledger = Ledger()
    key = ids.session_key("main", "u1", "6f1c1c1e-6a55-4d0e-9d0c-3f2b7a1d0b11")
    a, b, quiet = ledger.open(key, "a"), ledger.open(key, "b"), ledger.open(key, "quiet")
    assert a is not None and b is not None and quiet is not None
    ledger.heard(a, "boot-1")
    ledger.heard(b, "boot-1")
    ledger.heard(a, "boot-1")  # a straggler of a's does not move its beginning
    assert ledger.heard_before(key, "a", "b") and not ledger.heard_before(key, "b", "a")
    assert not ledger.heard_before(key, "a", "quiet") and not ledger.heard_before(key, "quiet", "b")
    ledger.retire(a)
    assert ledger.heard_before(key, "a", "b")
    ledger.retire(b)
    assert ledger.heard_before(key, "a", "b") and not ledger.heard_before(key, "a", "never")


# ------------------------------------------------------------------------------------------ issue 24: what it says


@pytest.mark.virtual_seconds(1)
async def test_an_error_while_owc_is_away_shows_as_a_live_one_does(tmp_path, clock, db_url) -> None:
    """Issue 24, item 2: a claimed run ends in an error while owc's WebSocket is down. Its message shows the error
    (from the session row, ``lastRunError``), as it would have live, with what the run said."""
    async with open_env(tmp_path, db_url=db_url) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        run = env.sim.start_run(key, "fails-away").text("Half of it.")
        await keeper.until(lambda: keeper.totals()[0] == 1)
        await _reconnect(env)
        run.end("error", error="The model provider is overloaded.")
        await _next_connection(env, clock)
        await env.settled()
        msg = (await env.messages(chat_id))[ids.message_id(key, "fails-away")]
        assert msg["done"] is True and msg["content"] == "Half of it."
        assert msg.get("error") == {"content": "The model provider is overloaded."}


@pytest.mark.virtual_seconds(1)
async def test_a_run_away_but_never_cut_gets_no_cut_off_note(tmp_path, clock, db_url) -> None:
    """Issue 24, item 3: a plain connection drop (the same boot): the claimed run ends on its own while owc is away
    and a newer run runs on the session after it. Nothing was cut: neither message says "cut off"."""
    async with open_env(tmp_path, db_url=db_url) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        first = env.sim.start_run(key, "first").text("First answer.")
        await keeper.until(lambda: keeper.totals()[0] == 1)
        await _reconnect(env)
        first.end()
        env.sim.start_run(key, "second").text("Second answer.").end()
        await _next_connection(env, clock)
        await env.settled()
        messages = await env.messages(chat_id)
        for run_id, text in (("first", "First answer."), ("second", "Second answer.")):
            msg = messages[ids.message_id(key, run_id)]
            assert msg["done"] is True and msg["content"] == text
            assert "cut off" not in str(msg.get("error")), msg.get("error")
