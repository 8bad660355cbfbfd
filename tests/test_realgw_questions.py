"""Real Gateway tier: owc shows OpenClaw 2026.9.6's own ``ask_user`` questions and passes the answers back (issue 27).

owc runs against the real Gateway (its default config: Tool Search on, the model reaches ``ask_user`` through
``tool_call``) with a recording ``Asker`` standing for the tabs. A user turn sent the Pipe's way asks (the fake
model's ``ASK_USER_1``); the test answers, dismisses or stops it through owc, and checks what a person would see:
the dialog shown once for the chat's owner and closed on the Gateway's ``question.resolved``, the run continued
**in the same message** with what the person said, and the message's Ask User card saying what was asked and what
became of it, equal live and after the finalize from the transcript.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from owc import ids
from owc.emit import RecordingEmitter
from owc.emit.asker import RecordingAsker
from owc.gateway import GatewayConfig
from owc.render import ask_card, output_text
from owc.rules.lifecycle import State
from owc.runtime import Runtime, RuntimeConfig, open_runtime
from owc.store import open_store

from oracle import cards
from rawclient import raw_client
from realgw.fake_model import ASK_REPLY_PREFIX, QUESTIONS

pytestmark = pytest.mark.realgateway

WAIT_S = 180  # the first run on a fresh Gateway prepares its workspace for 10-20 s on this machine


async def _ask(
    real_gateway: Any, tmp_path: Path, act: str
) -> tuple[dict[str, Any], list[dict[str, Any]], RecordingAsker, str]:
    """A user turn that asks one question; ``act`` (answer / dismiss / stop) is what the person does. Returns the
    message as saved, the output the request streamed, the asker, and the question's id."""
    user, chat_id, m = "u-ask", str(uuid.uuid4()), str(uuid.uuid4())
    key = ids.session_key("main", user, chat_id)
    run_id = ids.input_run_id(chat_id, m, "t1")
    stub = {"id": m, "parentId": "u1", "childrenIds": [], "role": "assistant", "content": "", "done": False}
    asked = {"id": "u1", "parentId": None, "childrenIds": [m], "role": "user", "content": "ASK_USER_1 please decide"}
    body = {"id": chat_id, "title": "t", "history": {"currentId": m, "messages": {"u1": asked, m: stub}}}
    config = RuntimeConfig(url=real_gateway.url, token=real_gateway.token, gateway=GatewayConfig(instance_id="owc"))
    asker = RecordingAsker()
    async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
        await store.create_chat(chat_id, user, chat=body)
        with trio.fail_after(WAIT_S):
            async with open_runtime(config, store, RecordingEmitter(), asker) as runtime:
                await runtime.connected()
                turn = await runtime.user_turn(key, run_id, "ASK_USER_1 please decide")
                shown: list[dict[str, Any]] = []
                async with trio.open_nursery() as nursery:

                    async def person() -> None:
                        await asker.until(lambda: bool(asker.shown()))
                        qid = asker.shown()[0].question_id
                        if act == "answer":
                            outcome = await runtime.keeper.questions.answer(
                                user, qid, {"deploy_target": ["Production"]}
                            )
                            assert outcome.ok and outcome.status == "answered"
                        elif act == "dismiss":
                            outcome = await runtime.keeper.questions.answer(user, qid, None)
                            assert outcome.ok and outcome.status == "cancelled"
                        else:
                            assert runtime.stop_chat(chat_id) == 1

                    nursery.start_soon(person)
                    while not (step := await turn.next_output(shown)).over:
                        shown = step.output
                    shown = step.output
                await store.write(chat_id, m, content=output_text(shown), output=shown, done=True)
                turn.request_ended()
                await runtime.keeper.until(lambda: turn.run.life.state is State.DONE)
                # question.resolved is not ordered against the run's end (measured): it is waited for, not assumed.
                await asker.until(lambda: bool(asker.closed()))
                await _no_second_question(runtime, asker)
        message = (await store.read_chat(chat_id))["history"]["messages"][m]
    return message, shown, asker, asker.shown()[0].question_id


async def _no_second_question(runtime: Runtime, asker: RecordingAsker) -> None:
    await runtime.settled()
    assert len(asker.shown()) == 1 and len(asker.closed()) == 1


async def test_an_answered_question_continues_the_run_in_the_same_message(real_gateway, tmp_path: Path) -> None:
    message, shown, asker, qid = await _ask(real_gateway, tmp_path, "answer")
    shown_to = asker.shown()[0]
    assert shown_to.user_id == "u-ask" and shown_to.record.questions[0].question == QUESTIONS[0]["question"]
    assert [o.label for o in shown_to.record.questions[0].options] == [o["label"] for o in QUESTIONS[0]["options"]]
    assert asker.closed()[0].question_id == qid and asker.closed()[0].status == "answered"
    # The run went on with the answer, in the same message: the model's next words quote what it was told.
    assert message["done"] is True
    # (Tool Search wraps the tool's result in JSON: the model quotes the wrapper, with the tool's own text inside.)
    assert message["content"].startswith(ASK_REPLY_PREFIX) and "Target: Production" in message["content"]
    assert cards(message["output"]) == [(ask_card.NAME, "Answered:\nTarget: Production")]
    assert cards(shown) == cards(message["output"])  # the card the tab was shown is the one kept


async def test_a_dismissed_question_says_so_in_the_message(real_gateway, tmp_path: Path) -> None:
    message, _shown, asker, _qid = await _ask(real_gateway, tmp_path, "dismiss")
    assert asker.closed()[0].status == "cancelled"
    assert message["done"] is True
    assert message["content"].startswith(ASK_REPLY_PREFIX) and "The question was cancelled" in message["content"]
    assert cards(message["output"]) == [(ask_card.NAME, ask_card.DISMISSED)]


async def test_stop_while_a_question_waits_stops_the_run_and_closes_the_dialog(real_gateway, tmp_path: Path) -> None:
    message, _shown, asker, _qid = await _ask(real_gateway, tmp_path, "stop")
    assert asker.closed()[0].status == "cancelled"  # the Gateway cancels the question of an aborted run
    assert message["done"] is True
    assert ASK_REPLY_PREFIX not in message["content"]  # the run did not go on
    # The transcript keeps the call without a result (measured); the tab was shown the run's "Aborted", which
    # the card says in words, and the finalize keeps it (never less than was shown).
    assert cards(message["output"]) == [(ask_card.NAME, ask_card.STOPPED)]


async def test_an_agent_turn_that_asks_is_shown_and_answered_in_its_chat(real_gateway, tmp_path: Path) -> None:
    """A run owc did not send (another client's ``chat.send`` on the chat's key: an agent turn) asks: its question
    is shown in the chat, the answer through owc continues it, and its one message keeps the card."""
    user, chat_id, run_id = "u-agent", str(uuid.uuid4()), str(uuid.uuid4())
    key = ids.session_key("main", user, chat_id)
    config = RuntimeConfig(url=real_gateway.url, token=real_gateway.token, gateway=GatewayConfig(instance_id="owc"))
    asker = RecordingAsker()
    async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
        await store.create_chat(chat_id, user)
        with trio.fail_after(WAIT_S):
            async with open_runtime(config, store, RecordingEmitter(), asker) as runtime:
                await runtime.connected()
                async with raw_client(real_gateway.url, real_gateway.token, caps=(), instance_id="cron-ish") as other:
                    sent = await other.request(
                        "chat.send", {"sessionKey": key, "message": "ASK_USER_1 nightly", "idempotencyKey": run_id}
                    )
                    assert sent.ok, sent.error
                    await asker.until(lambda: bool(asker.shown()))
                    shown = asker.shown()[0]
                    assert (shown.chat_id, shown.user_id, shown.record.run_id) == (chat_id, user, run_id)
                    # Someone else (not the chat's owner) cannot answer it.
                    refused = await runtime.keeper.questions.answer("intruder", shown.question_id, {"x": ["y"]})
                    assert not refused.ok and refused.code == 403
                    outcome = await runtime.keeper.questions.answer(
                        user, shown.question_id, {"deploy_target": ["Staging (Recommended)"]}
                    )
                    assert outcome.ok
                    await runtime.keeper.until(lambda: runtime.keeper.totals()[1] >= 1)
                    await asker.until(lambda: bool(asker.closed()))
        messages = (await store.read_chat(chat_id))["history"]["messages"]
    m = ids.message_id(key, run_id)
    assert list(messages) == [m]  # one message for the run, question and all
    message = messages[m]
    assert message["done"] is True and "Target: Staging (Recommended)" in message["content"]
    assert cards(message["output"]) == [(ask_card.NAME, "Answered:\nTarget: Staging (Recommended)")]
