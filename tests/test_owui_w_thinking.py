"""Tier W, issue 28: the thinking level. The real Open WebUI 0.12.4 server with owc installed as the README says
(``owc owui install``: the Pipe, the startup Event and the thinking Filter, attached to owc's models), the simulator
as the Gateway (``sessions.describe``'s ``thinkingLevels``, as 2026.9.6), headless Chromium as the person.

The person sets their level in the Filter's valve (through Open WebUI's user-valves route, the one its Valves
dialog saves with), opens the composer's Integrations menu, turns "OpenClaw thinking" on (its pill shows under the
composer), sends a message on the Gateway's reasoning model (``off`` .. ``high``) asking ``ultra``: the Gateway gets
``chat.send {thinking: "high"}``, the reply comes, and the one-line note says the level was lowered, shown with the
reply and stored in its status lines. Screenshots go to ``$OWC_SCREENSHOTS`` (else the test's tmp dir).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from test_owui_w import (
    WAIT_S,
    assistant_messages,
    one_server,
    open_page,
    simulated_gateway,
    wait_until,
)

from owc.owui.thinking_filter import FILTER_ID
from owc.sim.script import End, Text

from owui.simthread import call

pytestmark = [pytest.mark.owuiserver, pytest.mark.timeout(1800)]

MS = WAIT_S * 1000
REPLY = "Considered carefully."
NOTE = "openrouter/z-ai/glm-5.2 does not support thinking level 'ultra', so 'high' was used."


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[Any, Any]]:
    sent: list[dict[str, Any]] = []

    def prepare(simulator: Any) -> None:
        simulator.responder = lambda key, message: [Text(REPLY), End()]
        handler = simulator.rpc._handlers["chat.send"]

        def spy(conn: Any, params: dict[str, Any]) -> Any:
            sent.append(dict(params))
            return handler(conn, params)

        simulator.rpc._handlers["chat.send"] = spy
        simulator.sent = sent  # read through ``call`` only

    with simulated_gateway(prepare) as pair:
        yield pair


@pytest.fixture(scope="module")
def deployment(gateway, server_venv, browser_install, tmp_path_factory) -> Iterator[dict[str, Any]]:
    with one_server(gateway, tmp_path_factory.mktemp("owui-w-thinking"), install_twice=True) as deployed:
        yield deployed


@pytest.fixture
def browser(deployment, tmp_path) -> Iterator[Any]:
    from owui.browser import running_browser

    with running_browser(tmp_path) as b:
        yield b


def test_the_toggle_under_the_composer_sends_the_chosen_level_clamped_with_one_note(deployment, browser) -> None:
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    assert f"attached {FILTER_ID} to openclaw.main" in deployment["installed"]
    function = admin.get_function(FILTER_ID)
    assert function is not None and function["is_active"] and not function.get("is_global")
    glm = next(m["id"] for m in admin.models() if m["id"].startswith("openclaw.") and "glm" in m["id"])
    assert f"attached {FILTER_ID} to {glm}" in deployment["installed"]
    # The person's own valve: what the Valves dialog (the pill's click, Chat Controls > Valves) saves.
    admin.post(f"/api/v1/functions/id/{FILTER_ID}/valves/user/update", {"level": "ultra"})
    page = open_page(browser, deployment)
    page.goto(f"/?model={glm}")
    composer = page.page.locator("#chat-input")
    composer.wait_for(state="visible", timeout=MS)
    page._settle_changelog()
    page.page.locator("#integration-menu-button").click()
    toggle = page.page.get_by_role("menuitemcheckbox", name="OpenClaw thinking")
    toggle.wait_for(state="visible", timeout=MS)
    assert toggle.get_attribute("aria-checked") == "false"
    toggle.click()
    page.page.wait_for_function(
        "() => document.querySelector('[role=menuitemcheckbox][aria-checked=true]') !== null", timeout=MS
    )
    page.screenshot("thinking-toggle-on")
    page.page.keyboard.press("Escape")  # the menu closes; the pill stays under the composer
    pill = page.page.locator("button", has=page.page.locator('img[alt="OpenClaw thinking"]'))
    pill.first.wait_for(state="visible", timeout=MS)
    sends_before = call(token, lambda: len(sim.sent))
    page.send_message("think hard about this")
    page.page.wait_for_url(lambda url: "/c/" in url, timeout=MS)
    chat_id = page.page.url.rstrip("/").rsplit("/", 1)[-1]
    page.wait_for_assistant_text(REPLY, timeout_ms=MS)
    page.wait_for_text(NOTE, timeout_ms=MS)  # the note under the reply, as the person reads it
    page.screenshot("thinking-reply-with-note")
    sent = call(token, lambda: list(sim.sent[sends_before:]))
    assert [s.get("thinking") for s in sent] == ["high"]  # "ultra" clamped to the model's top
    reply = wait_until(
        lambda: next((v for v in assistant_messages(admin, chat_id).values() if v.get("done")), None), "the reply"
    )
    assert reply["content"] == REPLY
    assert [s["description"] for s in reply.get("statusHistory") or [] if "thinking level" in s["description"]] == [
        NOTE
    ]
