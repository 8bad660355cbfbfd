"""The thinking level on a user turn (issue 28): ``Runtime.user_turn(thinking=...)`` with the simulator on loopback
(which answers ``sessions.describe`` with the model's ``thinkingLevels`` and injects the Gateway's rejection of an
unsupported level, as 2026.9.6 does), a real SQLite file with Open WebUI's schema, the run table as in production.
The Pipe's part (``owc.owui.pipe.thinking_of``) is checked on the request body."""

from __future__ import annotations

import uuid
from typing import Any

from owc import ids
from owc.owui.pipe import _turn_from, thinking_of
from owc.render import output_text
from owc.rules.lifecycle import State
from owc.runs.inline import InlineTurn
from owc.runtime import thinking_retry_run_id
from owc.sim.script import End, Text

from harness import USER, Env, open_env

GLM = "openrouter/z-ai/glm-5.2"  # the simulator's reasoning model: off, minimal, low, medium, high


async def _chat(env: Env) -> tuple[str, str, str]:
    chat_id, m = str(uuid.uuid4()), str(uuid.uuid4())
    user = {"id": "u1", "parentId": None, "childrenIds": [m], "role": "user", "content": "hi", "timestamp": 1}
    stub = {"id": m, "parentId": "u1", "childrenIds": [], "role": "assistant", "content": "", "done": False}
    body = {"id": chat_id, "title": "t", "history": {"currentId": m, "messages": {"u1": user, m: stub}}}
    await env.store.create_chat(chat_id, USER, chat=body)
    return chat_id, ids.session_key("main", USER, chat_id), m


def _record_sends(env: Env) -> list[dict[str, Any]]:
    """Every ``chat.send``'s params as the simulator received them."""
    sent: list[dict[str, Any]] = []
    handler = env.sim.rpc._handlers["chat.send"]

    def spy(conn: Any, params: dict[str, Any]) -> Any:
        sent.append(dict(params))
        return handler(conn, params)

    env.sim.rpc._handlers["chat.send"] = spy
    return sent


async def _stream(turn: InlineTurn) -> tuple[list[dict[str, Any]], list[str]]:
    """What the Pipe's request relays, and the status lines it says."""
    shown: list[dict[str, Any]] = []
    said: list[str] = []
    while True:
        step = await turn.next_output(shown)
        said += [s["description"] for s in step.statuses]
        shown = step.output
        if step.over:
            return shown, said


async def _finish(env: Env, turn: InlineTurn, output: list[dict[str, Any]]) -> None:
    run = turn.run
    await env.store.save_message(
        run.ref.chat_id, run.message_id, {"content": output_text(output), "output": output, "done": True}
    )
    turn.request_ended()
    await env.settled()


async def test_a_supported_level_is_sent_as_asked_and_said_nothing_of(tmp_path) -> None:
    async with open_env(tmp_path) as env:
        await env.connect()
        sent = _record_sends(env)
        chat_id, key, m = await _chat(env)
        env.sim.responder = lambda k, msg: [Text("Thought about it."), End()]
        turn = await env.runtimes["A"].user_turn(
            key, ids.input_run_id(chat_id, m, "t1"), "q", model=GLM, thinking="med"
        )
        output, said = await _stream(turn)
        assert output_text(output) == "Thought about it." and said == []
        assert [s.get("thinking") for s in sent] == ["medium"]  # the synonym sent as the Gateway's id


async def test_an_unsupported_level_is_clamped_down_with_one_note_per_chat(tmp_path) -> None:
    async with open_env(tmp_path) as env:
        await env.connect()
        sent = _record_sends(env)
        chat_id, key, m = await _chat(env)
        env.sim.responder = lambda k, msg: [Text("Answer."), End()]
        runtime = env.runtimes["A"]
        turn = await runtime.user_turn(key, ids.input_run_id(chat_id, m, "t1"), "q", model=GLM, thinking="ultra")
        output, said = await _stream(turn)
        assert output_text(output) == "Answer."
        assert said == [f"{GLM} does not support thinking level 'ultra', so 'high' was used."]
        await _finish(env, turn, output)
        # The same chat, the same ask: clamped again, not said again.
        m2 = str(uuid.uuid4())
        turn = await runtime.user_turn(key, ids.input_run_id(chat_id, m2, "t2"), "q2", model=GLM, thinking="ultra")
        output, said = await _stream(turn)
        assert output_text(output) == "Answer." and said == []
        assert [s.get("thinking") for s in sent] == ["high", "high"]
        assert env.sim.requests["chat.send"] == 2


async def test_an_off_only_model_drops_the_level(tmp_path) -> None:
    async with open_env(tmp_path) as env:
        await env.connect()
        sent = _record_sends(env)
        chat_id, key, m = await _chat(env)
        env.sim.responder = lambda k, msg: [Text("Plain."), End()]
        # ``model=None``: the agent's default (the simulator's sim/sim-model: ``off`` only), pinned first.
        turn = await env.runtimes["A"].user_turn(
            key, ids.input_run_id(chat_id, m, "t1"), "q", model=None, thinking="high"
        )
        output, said = await _stream(turn)
        assert output_text(output) == "Plain."
        assert len(said) == 1 and "only supports thinking level 'off', so 'high' was not sent" in said[0]
        assert ["thinking" in s for s in sent] == [False]


async def test_a_rejected_level_is_learned_and_the_turn_sent_again_into_the_same_message(tmp_path) -> None:
    """A session that has never run and was not pinned (``KEEP_MODEL``): its ladder is unknown, the level goes
    unchecked, the Gateway injects its rejection as the run's ``final``. The request never shows it: the turn
    goes again at once without the level, under another run id for the same message, and that reply finishes M."""
    async with open_env(tmp_path) as env:
        await env.connect()
        sent = _record_sends(env)
        chat_id, key, m = await _chat(env)
        env.sim.responder = lambda k, msg: [Text("The real reply."), End()]
        run_id = ids.input_run_id(chat_id, m, "t1")
        runtime = env.runtimes["A"]
        turn = await runtime.user_turn(key, run_id, "q", thinking="low")
        first = turn.run
        output, said = await _stream(turn)
        assert output_text(output) == "The real reply."
        assert said == ["sim/sim-model only supports thinking level 'off', so 'low' was not sent."]
        assert [(s["idempotencyKey"], s.get("thinking")) for s in sent] == [
            (run_id, "low"),
            (thinking_retry_run_id(run_id), None),
        ]
        assert turn.run.run_id == thinking_retry_run_id(run_id) and turn.run.message_id == m
        assert first.life.state is State.DONE  # the rejected run settled without a word in M
        await _finish(env, turn, output)
        messages = await env.messages(chat_id)
        assistants = [v for v in messages.values() if v["role"] == "assistant"]
        assert len(assistants) == 1 and assistants[0]["content"] == "The real reply." and assistants[0]["done"]
        assert "not supported" not in str(messages)
        # Learned for the model: a new chat of it asking the same is dropped before the send, said once there.
        chat2, key2, m2 = await _chat(env)
        turn = await runtime.user_turn(key2, ids.input_run_id(chat2, m2, "t1"), "q", thinking="low")
        output, said = await _stream(turn)
        assert output_text(output) == "The real reply." and len(said) == 1
        assert len(sent) == 3 and "thinking" not in sent[2]


async def test_a_turn_without_a_level_reads_nothing(tmp_path) -> None:
    async with open_env(tmp_path) as env:
        await env.connect()
        sent = _record_sends(env)
        chat_id, key, m = await _chat(env)
        env.sim.responder = lambda k, msg: [Text("Hi."), End()]
        before = env.sim.requests["sessions.describe"]
        turn = await env.runtimes["A"].user_turn(key, ids.input_run_id(chat_id, m, "t1"), "q", model=GLM)
        await _stream(turn)
        assert env.sim.requests["sessions.describe"] == before and "thinking" not in sent[0]


def test_the_pipe_reads_the_level_from_the_request_body() -> None:
    assert thinking_of({"reasoning_effort": "high"}) == "high"
    assert thinking_of({"params": {"reasoning_effort": " low "}}) == "low"
    assert thinking_of({"reasoning_effort": "", "params": "x"}) is None
    assert thinking_of({}) is None
    body = {"model": "openclaw.main", "messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "xhigh"}
    meta = {"chat_id": str(uuid.uuid4()), "message_id": str(uuid.uuid4())}
    turn = _turn_from(None, body, {"id": "u"}, meta)
    assert not isinstance(turn, str) and turn.thinking == "xhigh"
