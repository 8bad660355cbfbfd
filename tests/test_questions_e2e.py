"""owc end to end with the simulator speaking the Gateway's questions (issue 27): a run on a chat's key asks, the
chat's tabs are shown it (a recording ``Asker``), the person's answer goes back through owc and the run goes on in
the same message, whose Ask User card says what became of the question. Also what only the simulator can cut
deterministically: owc reconnecting while a question waits (the hello's ``question.list`` shows it again), a
Gateway restart losing it (closed), the answer from another owc process than the one whose writer streams the
run, and a question the Gateway expires on its own clock (virtual time)."""

from __future__ import annotations

import uuid

import pytest
import trio

from owc import ids
from owc.registry import WriterRegistry
from owc.render import ask_card, output_text
from owc.rules.lifecycle import State
from owc.sim.script import ASK_QUESTIONS, ASK_REPLY_PREFIX

from harness import USER, open_env
from oracle import cards


async def test_an_agent_turn_asks_is_answered_and_goes_on_in_its_one_message(tmp_path, clock, caplog) -> None:
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        run = env.sim.start_run(key, "ask-1").text("One question first.")
        qid = run.ask(ASK_QUESTIONS[:2])
        await env.asker.until(lambda: bool(env.asker.shown()))
        shown = env.asker.shown()[0]
        assert (shown.chat_id, shown.user_id, shown.question_id, shown.session) == (chat_id, USER, qid, None)
        assert [q.question for q in shown.record.questions] == [q["question"] for q in ASK_QUESTIONS[:2]]
        outcome = await keeper.questions.answer(USER, qid, {"deploy_target": ["Production"], "features": ["Metrics"]})
        assert outcome.ok
        await env.asker.until(lambda: bool(env.asker.closed()))
        assert env.asker.closed()[0].status == "answered"
        assert env.sim.questions.records[qid].answers == {"deploy_target": ["Production"], "features": ["Metrics"]}
        run.text("Deploying to production.").end()
        await env.settled()
        messages = await env.messages(chat_id)
        m = ids.message_id(key, "ask-1")
        assert set(messages) == {"u1", m}  # one message for the run, question and all
        assert messages[m]["content"] == "One question first.\nDeploying to production."
        assert cards(messages[m]["output"]) == [(ask_card.NAME, "Answered:\nTarget: Production\nFeatures: Metrics")]
    # The person's answer is theirs: no owc log line carries it (ids and statuses only).
    owc_lines = [r.getMessage() for r in caplog.records if r.name.startswith("owc")]
    assert any("questions.answered" in line for line in owc_lines)
    assert not any("Production" in line or "Metrics" in line for line in owc_lines)


async def test_a_persons_reply_that_asks_shows_the_card_live_and_after(tmp_path, clock) -> None:
    """The default model answers ``ASK_USER`` by asking and then quoting what it was told. The reply streamed live
    holds the card, dismissed; after Open WebUI's end-of-stream save and the handover, the finalized message holds
    the same card and the model's words after it."""
    async with open_env(tmp_path) as env:
        chat_id, m = str(uuid.uuid4()), "m-reply"
        key = ids.session_key("main", USER, chat_id)
        stub = {"id": m, "parentId": "u1", "childrenIds": [], "role": "assistant", "content": "", "done": False}
        asked = {"id": "u1", "parentId": None, "childrenIds": [m], "role": "user", "content": "ASK_USER_1 where?"}
        body = {"id": chat_id, "title": "t", "history": {"currentId": m, "messages": {"u1": asked, m: stub}}}
        await env.store.create_chat(chat_id, USER, chat=body)
        keeper = await env.connect()
        run_id = ids.input_run_id(chat_id, m, "t1")
        turn = await env.runtimes["A"].user_turn(key, run_id, "ASK_USER_1 where?")
        async with trio.open_nursery() as nursery:

            async def person() -> None:
                await env.asker.until(lambda: bool(env.asker.shown()))
                outcome = await keeper.questions.answer(USER, env.asker.shown()[0].question_id, None)  # dismissed
                assert outcome.ok and outcome.status == "cancelled"

            nursery.start_soon(person)
            shown: list = []
            while not (step := await turn.next_output(shown)).over:
                shown = step.output
            shown = step.output
        live = cards(shown)
        assert live == [(ask_card.NAME, ask_card.DISMISSED)]
        await env.store.write(chat_id, m, content=output_text(shown), output=shown, done=True)
        turn.request_ended()
        await keeper.until(lambda: turn.run.life.state is State.DONE)
        await env.settled()
        saved = (await env.messages(chat_id))[m]
        assert cards(saved["output"]) == live  # the card the tab was shown is the one kept
        assert saved["content"].startswith(ASK_REPLY_PREFIX + "The question was cancelled")


@pytest.mark.virtual_seconds(1)  # the reconnect's backoff, the transport's own timer
async def test_a_reconnect_while_it_waits_shows_it_again_and_a_restart_closes_it(tmp_path, clock) -> None:
    async with open_env(tmp_path) as env:
        _chat_id, key = await env.chat()
        await env.connect()
        run = env.sim.start_run(key, "ask-2").text("Hm.")
        qid = run.ask(ASK_QUESTIONS[:1])
        await env.asker.until(lambda: len(env.asker.shown()) == 1)
        # The connection drops and comes back: the question was not replayed, the hello's list shows it again (the
        # page keeps one dialog per question id).
        env.sim.faults.disconnect()
        await env.asker.until(lambda: len(env.asker.shown()) == 2)
        assert env.asker.shown()[1].question_id == qid and not env.asker.closed()
        # The Gateway restarts: its questions are gone (process-local), and the next hello's list says so.
        await env.sim.restarts.restart("crash")
        await env.asker.until(lambda: bool(env.asker.closed()))
        assert [(c.question_id, c.status) for c in env.asker.closed()] == [(qid, "gone")]
        await env.settled()


async def test_another_owc_process_answers_a_question_whose_run_it_does_not_write(tmp_path, clock) -> None:
    """Two owc processes (two Open WebUI workers): each shows the question to its own tabs; the answer reaches B,
    whose connection resolves it while A's writer streams the run."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect("A")
        b = await env.connect("B", registry=WriterRegistry())
        run = env.sim.start_run(key, "ask-3").text("Which one?")
        qid = run.ask(ASK_QUESTIONS[:1])
        await env.asker.until(lambda: len(env.asker.shown()) == 2)  # one show per process, each to its own tabs
        outcome = await b.questions.answer(USER, qid, {"deploy_target": ["Staging (Recommended)"]})
        assert outcome.ok
        await env.asker.until(lambda: len(env.asker.closed()) == 2)
        run.text(" Staging it is.").end()
        await env.settled()
        messages = await env.messages(chat_id)
        m = ids.message_id(key, "ask-3")
        assert set(messages) == {"u1", m}
        assert cards(messages[m]["output"]) == [(ask_card.NAME, "Answered:\nTarget: Staging (Recommended)")]


@pytest.mark.virtual_seconds(30)  # the Gateway's expiry (its clock, the simulator's), nothing of owc's
async def test_a_question_nobody_answers_expires_on_the_gateways_clock_only(tmp_path, clock) -> None:
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        run = env.sim.start_run(key, "ask-4").text("Waiting.")
        qid = run.ask(ASK_QUESTIONS[:1], timeout_s=30)
        await env.asker.until(lambda: bool(env.asker.shown()))
        start = trio.current_time()
        await env.asker.until(lambda: bool(env.asker.closed()))
        assert trio.current_time() - start == 30  # closed when the Gateway expired it, not before, not by owc
        assert env.asker.closed()[0].status == "expired"
        assert env.sim.questions.records[qid].status == "expired"
        run.text(" Went on.").end()
        await env.settled()
        m = ids.message_id(key, "ask-4")
        assert cards((await env.messages(chat_id))[m]["output"]) == [(ask_card.NAME, ask_card.EXPIRED)]


async def test_a_question_on_another_users_chat_is_not_answered_by_this_user(tmp_path, clock) -> None:
    async with open_env(tmp_path) as env:
        _chat_id, key = await env.chat()
        keeper = await env.connect()
        run = env.sim.start_run(key, "ask-5").text("Hm.")
        qid = run.ask(ASK_QUESTIONS[:1])
        await env.asker.until(lambda: bool(env.asker.shown()))
        refused = await keeper.questions.answer("user-2", qid, {"deploy_target": ["Production"]})
        assert not refused.ok and refused.code == 403
        assert env.sim.questions.records[qid].status == "pending"
        run.end()
        await env.settled()
