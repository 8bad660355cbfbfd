"""Real Gateway tier: the thinking level (issue 28) on the real 2026.9.6 Gateway.

A Gateway of its own whose fake model declares ``reasoning: true`` and ``compat.supportsReasoningEffort`` (the
measured ``reasoning`` phase of ``tests/realgw/probe_usage.py``: ladder ``off, minimal, low, medium, high``, default
``medium``), served by the probe's recording model, which keeps what each model request asked (``reasoning_effort``).
owc's user turns go through ``Runtime.user_turn(thinking=...)`` as the Pipe sends them:

* a supported level reaches ``chat.send`` and the model as ``reasoning_effort``;
* an unsupported one is clamped down before the send, said once;
* a chat whose session has never run and is not pinned (no row, ladder unknown): the Gateway's injected rejection is
  never the reply; the turn goes again, clamped, into the same message.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from owc import ids
from owc.emit import RecordingEmitter
from owc.gateway import GatewayConfig
from owc.render import output_text
from owc.runs.inline import InlineTurn
from owc.runtime import KEEP_MODEL, RuntimeConfig, open_runtime, thinking_retry_run_id
from owc.store import open_store

from rawclient import raw_client

pytestmark = pytest.mark.realgateway

CANNED = "Hello from the fake model. This is a canned answer."


@pytest.fixture(scope="module")
def reasoning_gateway(real_gateway_install: Any) -> Any:
    """A real Gateway whose fake model reasons (the probe's ``reasoning`` phase), and its recording model server."""
    from realgw.gateway import start_cuttable
    from realgw.probe_usage import PHASES, RecordingModel

    declared = next(d for name, _, d in PHASES if name == "reasoning")
    model = RecordingModel()
    try:
        gateway = start_cuttable(
            real_gateway_install,
            config={"models": {"providers": {"fake": {"baseUrl": model.base_url, "models": [declared]}}}},
        )
    except BaseException:
        model.close()
        raise
    try:
        yield gateway, model
    finally:
        gateway.stop()
        model.close()


async def _chat(store: Any, user: str) -> tuple[str, str, str]:
    """An Open WebUI chat whose user just sent a message: the user message and Open WebUI's empty reply stub M."""
    chat_id, m = str(uuid.uuid4()), str(uuid.uuid4())
    stub = {"id": m, "parentId": "u1", "childrenIds": [], "role": "assistant", "content": "", "done": False}
    user_message = {"id": "u1", "parentId": None, "childrenIds": [m], "role": "user", "content": "hi"}
    body = {"id": chat_id, "title": "t", "history": {"currentId": m, "messages": {"u1": user_message, m: stub}}}
    await store.create_chat(chat_id, user, chat=body)
    return chat_id, ids.session_key("main", user, chat_id), m


async def _stream(turn: InlineTurn) -> tuple[list[dict[str, Any]], list[str]]:
    shown: list[dict[str, Any]] = []
    said: list[str] = []
    while True:
        step = await turn.next_output(shown)
        said += [s["description"] for s in step.statuses]
        shown = step.output
        if step.over:
            return shown, said


def _efforts(model: Any, since: int) -> list[Any]:
    """``reasoning_effort`` of each model request since ``since`` (absent: None)."""
    return [r["fields"].get("reasoning_effort") for r in model.requests[since:]]


async def test_the_level_reaches_the_model_is_clamped_and_a_rejection_is_sent_again(
    reasoning_gateway: Any, tmp_path: Path
) -> None:
    gateway, model = reasoning_gateway
    user = "u-think"
    config = RuntimeConfig(url=gateway.url, token=gateway.token, gateway=GatewayConfig(instance_id="owc"))
    async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
        with trio.fail_after(300):
            async with open_runtime(config, store, RecordingEmitter()) as runtime:
                await runtime.connected()

                # 1. A supported level: sent as asked, the model gets it as reasoning_effort. (``model=None``: the
                # agent's default, pinned first: that ``sessions.patch`` makes the session, so it has a row.)
                chat_id, key, m = await _chat(store, user)
                since = len(model.requests)
                turn = await runtime.user_turn(
                    key, ids.input_run_id(chat_id, m, "t1"), "hi", model=None, thinking="low"
                )
                output, said = await _stream(turn)
                assert output_text(output) == CANNED and said == []
                assert _efforts(model, since) == ["low"]

                # 2. Above the ladder: clamped down to its top before the send, said once in the chat.
                m2 = str(uuid.uuid4())
                since = len(model.requests)
                turn = await runtime.user_turn(
                    key, ids.input_run_id(chat_id, m2, "t2"), "hi", model=None, thinking="ultra"
                )
                output, said = await _stream(turn)
                assert output_text(output) == CANNED
                assert said == ["fake/fake-model does not support thinking level 'ultra', so 'high' was used."]
                assert _efforts(model, since) == ["high"]

                # 3. A chat that has never run and is not pinned: no row, the level goes unchecked, the Gateway
                # injects its rejection; owc learns the ladder and sends the turn again, clamped, for the same M.
                chat3, key3, m3 = await _chat(store, user)
                run_id = ids.input_run_id(chat3, m3, "t1")
                since = len(model.requests)
                turn = await runtime.user_turn(key3, run_id, "hi", model=KEEP_MODEL, thinking="xhigh")
                output, said = await _stream(turn)
                assert output_text(output) == CANNED  # the real reply, never the Gateway's rejection
                assert said == ["fake/fake-model does not support thinking level 'xhigh', so 'high' was used."]
                assert turn.run.run_id == thinking_retry_run_id(run_id) and turn.run.message_id == m3
                assert _efforts(model, since) == ["high"]  # the rejected send never called the model

                # The Gateway's transcript keeps both sends (measured here): what the retry leaves the agent.
                async with raw_client(gateway.url, gateway.token, caps=(), instance_id="reader") as reader:
                    history = (await reader.request("chat.history", {"sessionKey": key3})).payload
                roles = [(msg.get("role"), msg.get("model")) for msg in history["messages"]]
                assert ("assistant", "gateway-injected") in roles
                assert [r for r, _ in roles].count("user") == 2, roles
