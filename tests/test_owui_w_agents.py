"""Tier W, issue 31: one model per OpenClaw agent. The real Open WebUI 0.12.4 server with owc installed as the README
says, the simulator as the Gateway with two agents configured (``main`` and ``matcha``, ``owc.sim.agents.TWO_AGENTS``:
``agents.list`` in the measured shape), headless Chromium as the person.

The second agent is a model of its own in Open WebUI's list (``openclaw.matcha``, named "🍵 Matcha · OpenClaw" after
"OpenClaw"); a chat started on it shows that name in the chat's model selector, runs on
``agent:matcha:openwebui-<user>-<chat>`` and gets its reply. Screenshots go to ``$OWC_SCREENSHOTS`` (else the test's
tmp dir).
"""

from __future__ import annotations

import base64
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from test_owui_w import WAIT_S, one_server, open_page, simulated_gateway, wait_until

from owc import ids
from owc.sim.agents import TEA_PNG, TWO_AGENTS
from owc.sim.script import End, Text

from owui.simthread import call

pytestmark = [pytest.mark.owuiserver, pytest.mark.timeout(1800)]

MS = WAIT_S * 1000
REPLY = "Matcha here, whisking."
NAME = "\U0001f375 Matcha · OpenClaw"


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[Any, Any]]:
    def prepare(simulator: Any) -> None:
        simulator.rpc.agents.configured = [dict(a) for a in TWO_AGENTS]
        simulator.responder = lambda key, message: [Text(REPLY), End()]

    with simulated_gateway(prepare) as pair:
        yield pair


@pytest.fixture(scope="module")
def deployment(gateway, server_venv, browser_install, tmp_path_factory) -> Iterator[dict[str, Any]]:
    # Installed again once owc is connected (its device approved), as the README says: the agents are listed then.
    with one_server(gateway, tmp_path_factory.mktemp("owui-w-agents"), install_twice=True) as deployed:
        yield deployed


@pytest.fixture
def browser(deployment, tmp_path) -> Iterator[Any]:
    from owui.browser import running_browser

    with running_browser(tmp_path) as b:
        yield b


def test_the_second_agent_is_a_model_of_its_own_and_a_chat_on_it_gets_its_reply(deployment, browser) -> None:
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    listed = [(m["id"], m["name"]) for m in admin.models() if m["id"].startswith("openclaw.")]
    ids_listed = [model_id for model_id, _ in listed]
    assert ("openclaw.matcha", NAME) in listed, listed
    assert ids_listed.index("openclaw.main") < ids_listed.index("openclaw.matcha")  # after "OpenClaw"
    # Its avatar: the install put the Gateway's avatar on the model's row; Open WebUI serves it as the model's image
    # (the picker's and the reply's icon), byte for byte.
    assert "gave openclaw.matcha its agent's avatar" in deployment["installed"], deployment["installed"]
    request = urllib.request.Request(
        deployment["server"].base_url + "/api/v1/models/model/profile/image?id=openclaw.matcha",
        headers={"Authorization": f"Bearer {admin.token}"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.headers["Content-Type"] == "image/png"
        assert answer.read() == base64.b64decode(TEA_PNG.split(",", 1)[1])
    page = open_page(browser, deployment)
    chat_id = page.new_chat_with("openclaw.matcha", "hello matcha", timeout_ms=MS)
    page.wait_for_assistant_text(REPLY, timeout_ms=MS)
    page.wait_for_text("Matcha · OpenClaw", timeout_ms=MS)  # the chat's model selector names the agent
    shot = page.screenshot("w-agents-matcha")
    assert shot.exists() and shot.stat().st_size > 0
    key = ids.session_key("matcha", admin.user_id, chat_id)
    runs = call(token, lambda: [r.key for r in sim.runs.values()])
    assert key in runs and ids.session_key("main", admin.user_id, chat_id) not in runs

    def reply() -> dict[str, Any] | None:
        messages = admin.get_chat(chat_id)["chat"]["history"]["messages"]
        done = [m for m in messages.values() if m.get("role") == "assistant" and m.get("done") is True]
        return done[0] if done and done[0].get("content") == REPLY else None

    finished = wait_until(reply, "matcha's reply, finished")
    assert finished["model"] == "openclaw.matcha"
