"""User turns streamed inline through the Pipe's request, and the handover (``owc/runs/inline.py``; seed 000
section 2.6): the simulator on loopback, a real SQLite file with Open WebUI's schema, the run table as in
production. Open WebUI's own part is played as Open WebUI does it: it makes the reply stub M before ``pipe()``
runs, and when its task ends it saves M ``done: true`` with the output the request streamed (the middleware's
end-of-stream save); ``request_ended`` is what owc's Pipe calls at that task's end.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio
import trio.testing

from owc import ids
from owc.render import output_text
from owc.rules.lifecycle import State
from owc.runs.inline import InlineTurn, UserTurnError
from owc.sim.script import Delay, End, Hold, Text, Tool

from harness import USER, Env, open_env


async def _user_turn_chat(env: Env, user_id: str = USER) -> tuple[str, str, str]:
    """A chat whose user just sent a message: Open WebUI's user message and its empty reply stub M."""
    chat_id, m = str(uuid.uuid4()), str(uuid.uuid4())
    user = {"id": "u1", "parentId": None, "childrenIds": [m], "role": "user", "content": "hi", "timestamp": 1}
    stub = {
        "id": m,
        "parentId": "u1",
        "childrenIds": [],
        "role": "assistant",
        "content": "",
        "model": "openclaw.main",
        "done": False,
        "timestamp": 2,
    }
    body = {
        "id": chat_id,
        "title": "t",
        "models": ["openclaw.main"],
        "history": {"currentId": m, "messages": {"u1": user, m: stub}},
        "messages": [],
    }
    await env.store.create_chat(chat_id, user_id, chat=body)
    return chat_id, ids.session_key("main", user_id, chat_id), m


async def _stream(turn: InlineTurn, until: str | None = None) -> list[dict[str, Any]]:
    """What the Pipe's request relays: the rendering step by step, until ``until`` shows or its part is over."""
    shown: list[dict[str, Any]] = []
    while True:
        step = await turn.next_output(shown)
        shown = step.output
        if step.over or (until is not None and until in output_text(shown)):
            return shown


async def _open_webui_ends_its_task(env: Env, turn: InlineTurn, output: list[dict[str, Any]]) -> None:
    """Open WebUI's middleware saves M done with what the request streamed (its own upsert: ``meta`` stays); then its
    task ends."""
    run = turn.run
    fields = {"content": output_text(output), "output": output, "done": True}
    await env.store.save_message(run.ref.chat_id, run.message_id, fields)
    turn.request_ended()


async def test_a_user_turn_streams_inline_and_its_message_is_finalized_from_the_transcript(tmp_path) -> None:
    async with open_env(tmp_path) as env:
        await env.connect()
        chat_id, key, m = await _user_turn_chat(env)
        env.sim.responder = lambda k, msg: [Text("Checking."), Tool("exec", {"cmd": "ls"}, "a b"), Text("Done."), End()]
        run_id = ids.input_run_id(chat_id, m, "t1")
        turn = await env.runtimes["A"].user_turn(key, run_id, "list the files")
        assert turn.run.life.state is State.INLINE and turn.run.message_id == m  # the identity rule: Open WebUI's M
        streamed = await _stream(turn)
        assert output_text(streamed) == "Checking.\nDone." and len(streamed) == 4  # text, call, result, text
        events_before = len(env.emitter.of(m))
        await _open_webui_ends_its_task(env, turn, streamed)
        await env.settled()
        messages = await env.messages(chat_id)
        assert [i for i, v in messages.items() if v["role"] == "assistant"] == [m]  # one message: Open WebUI's M
        assert messages[m]["done"] is True and messages[m]["content"] == "Checking.\nDone."
        assert messages[m]["meta"]["openclaw_run"] == run_id
        assert turn.run.life.state is State.DONE
        # The writer never streamed text the request had shown: only the final message went to the tabs.
        after = [e.type for e in env.emitter.of(m)[events_before:]]
        assert "response:completion" not in after and after.count("chat:messages") == 1
        assert env.sim.requests["chat.send"] == 1


async def test_a_request_that_ends_mid_run_hands_the_same_message_to_a_writer(tmp_path) -> None:
    """HandoverTests: the request is cut (a closed tab, Send now, Open WebUI's shutdown); the writer takes M back
    (``done: false`` with the full output), streams the rest, finalizes at the run's own end: no duplicate text."""
    async with open_env(tmp_path) as env:
        await env.connect()
        chat_id, key, m = await _user_turn_chat(env)
        env.sim.responder = lambda k, msg: [Text("First part,"), Hold()]
        run_id = ids.input_run_id(chat_id, m, "t1")
        turn = await env.runtimes["A"].user_turn(key, run_id, "go")
        cut = await _stream(turn, until="First part,")
        writes: list[tuple[bool, str]] = []
        write = env.store.write

        async def spy(chat: str, message: str, **kwargs: Any) -> Any:
            if message == m:
                writes.append((kwargs["done"], output_text(kwargs["output"])))
            return await write(chat, message, **kwargs)

        env.store.write = spy  # type: ignore[method-assign]
        await _open_webui_ends_its_task(env, turn, cut)  # Open WebUI's save (done, cut), then the handover
        await env.until(lambda: turn.run.life.state is State.STREAMING)
        env.sim.handle(run_id).text(" second part.").end()
        await env.settled()
        # The writer taking M back (not done, the full output so far), then the final.
        assert writes[0] == (False, "First part,") and writes[-1][0] is True
        told = [e.event for e in env.emitter.of(m, "chat:messages")]
        assert told[0]["data"]["messages"][m] == {"id": m, "done": False}  # the tabs: still being written
        final = (await env.messages(chat_id))[m]
        assert final["done"] is True and final["content"] == "First part, second part."
        assert [i for i, v in (await env.messages(chat_id)).items() if v["role"] == "assistant"] == [m]
        # The writer's first flush was the whole output (the tabs held the request's), then only what was new.
        completions = [e.event for e in env.emitter.of(m) if e.type in ("chat:completion", "response:completion")]
        assert completions and completions[0]["type"] == "chat:completion"


async def test_a_stop_during_a_user_turn_aborts_it_and_keeps_what_it_had(tmp_path) -> None:
    async with open_env(tmp_path) as env:
        await env.connect()
        chat_id, key, m = await _user_turn_chat(env)
        env.sim.responder = lambda k, msg: [Text("Working on it"), Hold()]
        run_id = ids.input_run_id(chat_id, m, "t1")
        turn = await env.runtimes["A"].user_turn(key, run_id, "go")
        cut = await _stream(turn, until="Working on it")
        env.keepers["A"].stop_run(turn.run)  # the page said Stop (owc.rules.intent)
        await _open_webui_ends_its_task(env, turn, cut)
        await env.settled()
        final = (await env.messages(chat_id))[m]
        assert final["done"] is True and final["content"].startswith("Working on it")
        assert env.sim.requests["chat.abort"] == 1


async def test_a_retried_request_never_starts_a_second_run(tmp_path) -> None:
    async with open_env(tmp_path) as env:
        await env.connect()
        chat_id, key, m = await _user_turn_chat(env)
        run_id = ids.input_run_id(chat_id, m, "t1")
        turn = await env.runtimes["A"].user_turn(key, run_id, "hello")
        with pytest.raises(UserTurnError):
            await env.runtimes["A"].user_turn(key, run_id, "hello")
        streamed = await _stream(turn)
        await _open_webui_ends_its_task(env, turn, streamed)
        await env.settled()
        assert env.sim.requests["chat.send"] == 1


async def test_a_send_the_gateway_refuses_is_one_clear_line_and_leaves_nothing_running(tmp_path) -> None:
    async with open_env(tmp_path) as env:
        await env.connect()
        chat_id, key, m = await _user_turn_chat(env)
        env.sim.fail_requests("chat.send")
        run_id = ids.input_run_id(chat_id, m, "t1")
        with pytest.raises(UserTurnError, match="did not take the message") as caught:
            await env.runtimes["A"].user_turn(key, run_id, "hello")
        assert "Traceback" not in str(caught.value) and "\n" not in str(caught.value)
        run = env.keepers["A"].ledger.get(key, run_id)
        assert run is None or run.life.state is State.DONE  # settled: nothing waits for a run that never began
        await env.settled()


async def test_an_unreachable_gateway_refuses_the_turn_with_one_clear_line(tmp_path) -> None:
    from owc.gateway import GatewayConfig
    from owc.runtime import RuntimeConfig, open_runtime

    from conftest import TOKEN

    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with open_env(tmp_path) as env:
        chat_id, key, m = await _user_turn_chat(env)
        config = RuntimeConfig(url=f"ws://127.0.0.1:{port}", token=TOKEN, gateway=GatewayConfig(backoff_jitter=0))
        async with open_runtime(config, env.store, env.emitter) as runtime:
            with pytest.raises(UserTurnError, match="not reachable right now: your message was not sent"):
                await runtime.user_turn(key, ids.input_run_id(chat_id, m, "t1"), "hello")
            assert TOKEN not in str(runtime.client)


async def test_without_the_write_scope_a_turn_is_refused_with_what_is_off(tmp_path, monkeypatch) -> None:
    import owc.gateway.connection as connection

    original = connection.ConnectParams
    monkeypatch.setattr(connection, "ConnectParams", lambda **kw: original(**kw, scopes=("operator.read",)))
    async with open_env(tmp_path) as env:
        await env.connect()
        chat_id, key, m = await _user_turn_chat(env)
        with pytest.raises(UserTurnError, match=r"not sent: the Gateway did not grant operator\.write") as caught:
            await env.runtimes["A"].user_turn(key, ids.input_run_id(chat_id, m, "t1"), "hello")
        assert "chat.send" in str(caught.value)
        assert env.sim.requests["chat.send"] == 0  # refused before the Gateway is asked


async def test_simultaneous_turns_of_two_users_in_two_chats_do_not_bleed(tmp_path) -> None:
    """EventConsumerMatchingTests: each request streams its own run only."""
    async with open_env(tmp_path) as env:
        await env.connect()
        env.sim.responder = lambda k, msg: [Text(f"Reply to {msg}."), Hold()]
        turns = []
        for n in range(2):
            chat_id, key, m = await _user_turn_chat(env, f"user-{n}")
            turns.append(await env.runtimes["A"].user_turn(key, ids.input_run_id(chat_id, m, "t"), f"q{n}"))
        for n, turn in enumerate(turns):
            assert output_text(await _stream(turn, until=f"q{n}.")) == f"Reply to q{n}."
        for turn in turns:
            env.sim.handle(turn.run.run_id).end()
        for n, turn in enumerate(turns):
            assert output_text(await _stream(turn)) == f"Reply to q{n}."
            await _open_webui_ends_its_task(env, turn, turn.run.renderer.output())
        await env.settled()


async def test_a_message_sent_while_a_run_is_going_waits_for_its_end_and_chains_after_it(tmp_path) -> None:
    """Case 7 / NoDroppedMessagesTests: an agent turn streams in the chat; a user turn sent meanwhile is not sent
    into it (no steering): it is sent when the running run ends, and both messages exist, in order."""
    async with open_env(tmp_path) as env:
        await env.connect()
        chat_id, key, m = await _user_turn_chat(env)
        agent = env.sim.start_run(key, "agent-turn").text("Cron report so far")
        agent_message = ids.message_id(key, "agent-turn")
        await env.until(lambda: any(r.life.state is State.STREAMING for r in env.keepers["A"].ledger.unsettled()))
        sending: list[InlineTurn] = []

        async def send() -> None:
            sending.append(await env.runtimes["A"].user_turn(key, ids.input_run_id(chat_id, m, "t"), "hello"))

        env.nursery.start_soon(send)
        await trio.testing.wait_all_tasks_blocked()  # every task waits on something: the send waits for the run
        await env.clients["A"].request("sessions.list", {"limit": 1})  # after anything sent before on the socket
        assert env.sim.requests["chat.send"] == 0 and not sending  # waiting, not steering
        agent.text(" and done.").end()
        await env.until(lambda: bool(sending))
        turn = sending[0]
        await _open_webui_ends_its_task(env, turn, await _stream(turn))
        await env.settled()
        messages = await env.messages(chat_id)
        assert env.sim.requests["chat.send"] == 1
        assert messages[agent_message]["done"] is True and messages[m]["done"] is True
        assert messages[agent_message]["content"] == "Cron report so far and done."


@pytest.mark.virtual_seconds(95)
async def test_a_long_silence_mid_reply_never_closes_the_inline_reply(tmp_path, clock) -> None:
    """NoMidRunCloseTest for the inline path: a silence longer than any idle timer the old Pipe had (a long
    tool, a slow model) ends nothing; the reply goes on when the run does and ends on its own terminal. The
    clock check (exactly the run's 95 virtual seconds; MockClock jumps only after 5 s of real idleness) shows
    nothing of owc's waited on a clock meanwhile."""
    async with open_env(tmp_path) as env:
        await env.connect()
        chat_id, key, m = await _user_turn_chat(env)
        env.sim.responder = lambda k, msg: [Text("Started,"), Delay(95), Text(" and finished."), End()]
        turn = await env.runtimes["A"].user_turn(key, ids.input_run_id(chat_id, m, "t"), "take your time")
        streamed = await _stream(turn)
        assert output_text(streamed) == "Started, and finished." and turn.run.life.terminal is not None
        await _open_webui_ends_its_task(env, turn, streamed)
        await env.settled()
        assert (await env.messages(chat_id))[m]["content"] == "Started, and finished."


async def test_a_message_that_is_the_gateways_stop_command_stops_and_says_so(tmp_path) -> None:
    """ "stop" typed as a message is a command on the Gateway (measured on 2026.9.6): it aborts the session's runs
    and starts none, so the turn must not wait for a run that never comes."""
    async with open_env(tmp_path) as env:
        await env.connect()
        chat_id, key, m = await _user_turn_chat(env)
        agent = env.sim.start_run(key, "agent-turn").text("Working")
        await env.until(lambda: any(r.life.state is State.STREAMING for r in env.keepers["A"].ledger.unsettled()))
        agent.end()  # (the running-run wait is case 7's; here the session is idle when "stop" is sent)
        await env.settled()
        with pytest.raises(UserTurnError, match="Nothing was running to stop"):
            await env.runtimes["A"].user_turn(key, ids.input_run_id(chat_id, m, "t"), "stop")
        run = env.keepers["A"].ledger.get(key, ids.input_run_id(chat_id, m, "t"))
        assert run is None or run.life.state is State.DONE
        await env.settled()


@pytest.mark.parametrize("mode", ["stop", "crash"])
async def test_a_gateway_restart_mid_reply_ends_the_request_and_the_writer_finishes_the_message(
    tmp_path, mode: str
) -> None:
    """The inline side never resumes a run: a Gateway stop (the run aborted after a shutdown notice) or a crash (a
    new boot: no run outlives its boot) ends the request's part, and the writer finishes M from the transcript
    (which continuation follows, if any, is the owner rule's: issue 14)."""
    async with open_env(tmp_path) as env:
        await env.connect()
        chat_id, key, m = await _user_turn_chat(env)
        env.sim.responder = lambda k, msg: [Text("Half of it"), Hold()]
        turn = await env.runtimes["A"].user_turn(key, ids.input_run_id(chat_id, m, "t"), "go")
        await _stream(turn, until="Half of it")
        await env.sim.restart(mode)
        streamed = await _stream(turn)  # returns: the request's part is over
        assert turn.run.life.ended
        await _open_webui_ends_its_task(env, turn, streamed)
        await env.settled()
        final = (await env.messages(chat_id))[m]
        assert final["done"] is True and final["content"].startswith("Half of it")
        assert turn.run.life.state is State.DONE


async def test_a_request_ending_while_its_connection_closes_waits_for_the_next_connection(tmp_path) -> None:
    """Open WebUI's task can end in the moment a Gateway restart is closing the connection (CI, stop 21: the
    handover's writer was started in the closing connection's nursery, and the request's end crashed with
    "Nursery is closed to new arrivals"). The request's end is never refused: the next connection hands M over."""
    async with open_env(tmp_path) as env:
        await env.connect()
        chat_id, key, m = await _user_turn_chat(env)
        env.sim.responder = lambda k, msg: [Text("Half of it"), Hold()]
        turn = await env.runtimes["A"].user_turn(key, ids.input_run_id(chat_id, m, "t"), "go")
        streamed = await _stream(turn, until="Half of it")
        keeper = env.keepers["A"]
        table = keeper.table
        assert table is not None
        ended_in_the_close: list[bool] = []

        async def ends_as_the_connection_closes() -> None:
            try:
                await trio.sleep_forever()
            finally:
                turn.request_ended()  # while the closing connection's nursery ends its tasks: the window CI hit
                ended_in_the_close.append(True)

        table._nursery.start_soon(ends_as_the_connection_closes)
        await env.sim.restart("stop")
        await env.until(lambda: bool(ended_in_the_close))
        assert not table.live and keeper.table is not table
        assert table._start_soon(trio.sleep, 0, name="late") is False  # a stale holder of the table: logged, no raise
        await env.store.write(chat_id, m, content=output_text(streamed), output=streamed, done=True)
        await env.settled()
        final = (await env.messages(chat_id))[m]
        assert final["done"] is True and final["content"].startswith("Half of it")
        assert not env.illegal()


@pytest.mark.parametrize("b_starts", ["mid_run", "after_the_end"])
async def test_open_webui_dying_in_its_teardown_loses_no_part_of_the_reply(tmp_path, db_url, b_starts: str) -> None:
    """Issue 24, item 1 (seed 000 case 4, 003's crash row "Open WebUI dies right after a handover"): the request
    streams "First part,", Open WebUI's cancel path saves M ``done: true`` with it, and the process dies before the
    handover reaches owc. The run goes on. The next process (joining the run mid-way, or after its end) finishes
    M from the transcript: M was saved done while owc still owed it, so it is not finished."""
    from owc.registry import WriterRegistry

    async with open_env(tmp_path, db_url=db_url) as env:
        await env.connect("A")
        chat_id, key, m = await _user_turn_chat(env)
        env.sim.responder = lambda k, msg: [Text("First part,"), Hold()]
        run_id = ids.input_run_id(chat_id, m, "t1")
        turn = await env.runtimes["A"].user_turn(key, run_id, "go")
        cut = await _stream(turn, until="First part,")
        fields = {"content": output_text(cut), "output": cut, "done": True}
        await env.store.save_message(chat_id, m, fields)  # the middleware's save on the cancel; then the death
        await env.kill("A")
        if b_starts == "after_the_end":
            env.sim.handle(run_id).text(" second part.").end()
            await env.sim.wait_for(env.sim.quiescent)
        await env.connect("B", registry=WriterRegistry())
        if b_starts == "mid_run":
            env.sim.handle(run_id).text(" second part.").end()
        await env.settled()
        final = (await env.messages(chat_id))[m]
        assert final["done"] is True and final["content"] == "First part, second part."
        assert "openclaw_open" not in final["meta"]
        assert [i for i, v in (await env.messages(chat_id)).items() if v["role"] == "assistant"] == [m]


async def _continued_by_another_user(env: Env, owner: str, sender: str) -> tuple[str, str, str]:
    """A chat of ``owner`` that ``sender`` continues, as Open WebUI 0.12.4 writes it for a chat shared with them in
    ``continue`` mode (``Chats.insert_chat_turn``): the owner's turn and reply, then the sender's message and its
    reply stub M, both with the sender's ``user_id``, in the owner's row."""
    chat_id, m = str(uuid.uuid4()), str(uuid.uuid4())

    def msg(mid: str, parent: str | None, role: str, user: str, content: str, **more: Any) -> dict[str, Any]:
        return {"id": mid, "parentId": parent, "childrenIds": [], "role": role, "content": content, "user_id": user,
                "timestamp": 1, **more}  # fmt: skip

    messages = {
        "u1": msg("u1", None, "user", owner, "Plan the trip.", childrenIds=["a1"]),
        "a1": msg("a1", "u1", "assistant", owner, "Day one: Lisbon.", childrenIds=["u2"], done=True),
        "u2": msg("u2", "a1", "user", sender, "And day two?", childrenIds=[m]),
        m: msg(m, "u2", "assistant", sender, "", model="openclaw.main", done=False),
    }
    body = {"id": chat_id, "title": "t", "models": ["openclaw.main"], "messages": [],
            "history": {"currentId": m, "messages": messages}}  # fmt: skip
    await env.store.create_chat(chat_id, owner, chat=body)
    return chat_id, m, sender


async def test_a_user_continuing_a_chat_shared_with_them_gets_the_whole_reply_in_it(tmp_path, db_url, clock) -> None:
    """Issue 24, item 13: in Open WebUI 0.12.4 another user may write into a chat (shared in ``continue`` mode, or a
    folder shared so): the request names the owner's chat and the sender as ``__user__``. The Pipe keyed the run
    by the sender, and the store refuses a key whose user does not own the chat, so once the request ended early
    the writer could not take M back: the reply kept only what the request had streamed. The chat's session key
    is its owner's (one chat, one session); the sender's reply is written whole, and stays the sender's."""
    async with open_env(tmp_path, db_url=db_url) as env:
        await env.connect()
        chat_id, m, sender = await _continued_by_another_user(env, USER, "bea")
        runtime = env.runtimes["A"]
        key = await runtime.chat_session_key("main", chat_id, sender)
        assert key == ids.session_key("main", USER, chat_id)  # the owner's: the session that holds the chat
        nowhere = str(uuid.uuid4())  # a chat the database has no row for: the sender's key, as before
        assert await runtime.chat_session_key("main", nowhere, sender) == ids.session_key("main", sender, nowhere)
        env.sim.responder = lambda k, msg: [Text("Day two: Porto,"), Hold()]
        run_id = ids.input_run_id(chat_id, m, "t1")
        turn = await runtime.user_turn(key, run_id, "And day two?")
        cut = await _stream(turn, until="Day two: Porto,")
        await _open_webui_ends_its_task(env, turn, cut)  # the tab closed: the request ends before the run
        with trio.fail_after(600):  # virtual: a writer that cannot take M back fails here
            await env.until(lambda: turn.run.life.state is State.STREAMING)  # the writer took M back
        env.sim.handle(run_id).text(" by train.").end()
        await env.settled()
        messages = await env.messages(chat_id)
        assert messages[m]["done"] is True and messages[m]["content"] == "Day two: Porto, by train."
        assert messages[m]["user_id"] == sender  # still the sender's reply (Open WebUI's Stop finds it by this)
        assert [i for i, v in messages.items() if v["role"] == "assistant"] == ["a1", m]
        assert messages["a1"]["content"] == "Day one: Lisbon." and list(env.sim.sessions) == [key]
        assert not env.illegal()


async def test_a_key_naming_someone_else_than_the_chats_owner_never_writes_there(tmp_path, db_url, clock) -> None:
    """The other half of the rule: a run on a key that names another user than the chat's owner (the sender's
    key the Pipe made before, any client's session named so) writes nothing into the chat, one line."""
    async with open_env(tmp_path, db_url=db_url) as env:
        await env.connect()
        chat_id, m, sender = await _continued_by_another_user(env, USER, "bea")
        before = await env.messages(chat_id)
        foreign = ids.session_key("main", sender, chat_id)
        env.sim.start_run(foreign, "agent-turn").text("Not for this chat.").end()
        run_id = ids.input_run_id(chat_id, m, "t2")
        env.sim.start_run(foreign, run_id).text("Nor this.").end()
        await env.settled()
        assert await env.messages(chat_id) == before
