"""Real Gateway tier, issue 31: one model per OpenClaw agent, on the real 2026.9.6 Gateway with two agents configured
offline (``main``, the default, and ``matcha`` with a name, an emoji and a data-URL avatar: the simulator's
``TWO_AGENTS``, written into the Gateway's ``openclaw.json`` ``agents.list``; a second model ``fake/fake-alt`` for the
per-agent model override).

* ``agents.list`` through owc's own connection: both agents, read as owc lists them (the second by its name, after
  "OpenClaw");
* a message on the second agent's model, sent the Pipe's way (``Runtime.user_turn`` on ``agent:matcha:...``, pinned
  to ``fake/fake-alt`` first, as ``openclaw.matcha~fake/fake-alt`` means): it runs on matcha's session with that
  model, and its reply lands in its chat, finished from matcha's transcript;
* an agent turn on a matcha key (another client's ``chat.send``): its message lands in that chat.
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
from owc.owui import models as mo
from owc.protocol import parse_chat_history
from owc.protocol.agents import GatewayAgent, read_agents
from owc.render import output_from_transcript, output_text
from owc.rules.lifecycle import State
from owc.runtime import RuntimeConfig, open_runtime
from owc.sim.agents import TEA_PNG, TWO_AGENTS
from owc.store import open_store

from rawclient import raw_client
from realgw.fake_model import ANSWER

pytestmark = pytest.mark.realgateway

ALT = {
    "id": "fake-alt",
    "name": "Fake Alt",
    "reasoning": False,
    "input": ["text"],
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
    "contextWindow": 64000,
    "maxTokens": 4096,
}


@pytest.fixture(scope="module")
def two_agents(real_gateway_install: Any) -> Any:
    """A real Gateway with ``main`` and ``matcha`` configured, and the models ``fake/fake-model``, ``fake/fake-alt``."""
    from conftest import SECRETS
    from realgw.gateway import _offline_config, start_cuttable

    base = _offline_config(Path("/"), 0, 0, "")["models"]["providers"]["fake"]["models"]
    config = {
        "agents": {"list": [dict(a) for a in TWO_AGENTS]},
        "models": {"providers": {"fake": {"models": [*base, ALT]}}},
    }
    gateway = start_cuttable(real_gateway_install, config=config)
    SECRETS.add(gateway.token)
    try:
        yield gateway
    finally:
        gateway.stop()


async def _chat(store: Any, user: str, text: str) -> tuple[str, str]:
    chat_id, m = str(uuid.uuid4()), str(uuid.uuid4())
    stub = {"id": m, "parentId": "u1", "childrenIds": [], "role": "assistant", "content": "", "done": False}
    stub["model"] = "openclaw.matcha~fake/fake-alt"
    asked = {"id": "u1", "parentId": None, "childrenIds": [m], "role": "user", "content": text}
    body = {"id": chat_id, "title": "t", "history": {"currentId": m, "messages": {"u1": asked, m: stub}}}
    await store.create_chat(chat_id, user, chat=body)
    return chat_id, m


async def test_the_second_agent_is_listed_by_its_name_and_a_message_on_it_runs_there(
    two_agents: Any, tmp_path: Path
) -> None:
    user = "u-agents"
    config = RuntimeConfig(url=two_agents.url, token=two_agents.token, gateway=GatewayConfig(instance_id="owc"))
    async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
        with trio.fail_after(300):
            async with open_runtime(config, store, RecordingEmitter()) as runtime:
                await runtime.connected()
                roster = read_agents(await runtime.client.request("agents.list", {}))
                assert roster.default_id == "main"
                assert roster.agents == (GatewayAgent("main"), GatewayAgent("matcha", "Matcha", "\U0001f375", TEA_PNG))
                entries = mo.manifold_entries("main", [], whitelist="", cap=30, reached=True, agents=roster.agents)
                assert entries == [
                    {"id": "main", "name": "OpenClaw"},
                    {"id": "matcha", "name": "\U0001f375 Matcha · OpenClaw"},
                ]
                picked = mo.resolve_agent("openclaw.matcha~fake/fake-alt", "main", roster.ids)
                assert (picked.agent, picked.model) == ("matcha", "fake/fake-alt")

                # 1. A message on matcha's model: the Pipe's key for it, pinned to the picked model, sent inline.
                chat_id, m = await _chat(store, user, "hello matcha")
                key = await runtime.chat_session_key(picked.agent, chat_id, user)
                assert key == f"agent:matcha:openwebui-{user}-{chat_id}"
                run_id = ids.input_run_id(chat_id, m, "t1")
                turn = await runtime.user_turn(key, run_id, "hello matcha", model=picked.model)
                shown: list[dict[str, Any]] = []
                while not (step := await turn.next_output(shown)).over:
                    shown = step.output
                shown = step.output
                await store.write(chat_id, m, content=output_text(shown), output=shown, done=True)
                turn.request_ended()
                await runtime.keeper.until(lambda: turn.run.life.state is State.DONE)
                history = parse_chat_history(await runtime.client.request("chat.history", {"sessionKey": key}))
                described = await runtime.client.request("sessions.describe", {"key": key})
                main_key = ids.session_key("main", user, chat_id)
                on_main = await runtime.client.request("sessions.describe", {"key": main_key})

                # 2. An agent turn on another chat's matcha key (another client sends it): it lands in that chat.
                other = str(uuid.uuid4())
                await store.create_chat(other, user)
                other_key = ids.session_key("matcha", user, other)
                agent_run = str(uuid.uuid4())
                async with raw_client(two_agents.url, two_agents.token, caps=(), instance_id="other-ui") as client:
                    sent = await client.request(
                        "chat.send", {"sessionKey": other_key, "message": "hi from cron", "idempotencyKey": agent_run}
                    )
                    assert sent.ok, sent.error
                    landed = ids.message_id(other_key, agent_run)

                    async def finished() -> bool:
                        chat = await store.read_chat(other)
                        message = chat["history"]["messages"].get(landed) if chat else None
                        return bool(message and message.get("done"))

                    while not await finished():
                        await runtime.keeper.changed()
        message = (await store.read_chat(chat_id))["history"]["messages"][m]
        agent_turn = (await store.read_chat(other))["history"]["messages"]
    session = described["session"]
    assert session["agentId"] == "matcha" and (session["modelProvider"], session["model"]) == ("fake", "fake-alt")
    assert on_main["session"] is None  # nothing ran on main's key for this chat
    expected = output_from_transcript(history, run_id)
    assert expected is not None and output_text(expected) == ANSWER
    assert message["done"] is True and message["content"] == ANSWER and output_text(shown) == ANSWER
    assert list(agent_turn) == [landed] and agent_turn[landed]["content"] == ANSWER
