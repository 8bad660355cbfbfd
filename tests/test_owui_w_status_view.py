"""Tier W, issue 29: the status Action. The real Open WebUI 0.12.4 server with owc installed as the README says
(``owc owui install``: the Pipe, the startup Event, the thinking Filter and the status Action, the Action attached to
owc's models), the simulator as the Gateway (``sessions.describe`` from its session rows plus the usage a test sets,
``usage.status``), headless Chromium as the person.

A person's reply finishes; they click "OpenClaw status" under it; the dialog shows the chat's context with the
simulator's numbers and its rate-limit window, live: a run that starts while it is open shows as running. Compact
shows "Compacting…" while its request is out (held by the simulator) and then the route's line. After a reload the
button opens the panel again; Escape closes it. Screenshots go to ``$OWC_SCREENSHOTS`` (else the test's tmp dir).

The simulator answers ``sessions.compact``, ``tasks.list`` / ``tasks.get`` and the ``task`` events only once they are
added to ``owc/sim`` (another change): until then Compact's line is the route's answer to the simulator's "unknown
method", and the sub-agent scenarios skip, saying so.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from test_owui_w import (
    MODEL,
    REMOTE_ADDRESS,
    TOKEN,
    WAIT_S,
    install_owc,
    open_page,
    owc_env,
    subscribed,
    unfinished_replies,
    wait_connected,
    wait_until,
)

from owc import ids
from owc.owui.status_action import ACTION_ID, NAME
from owc.owui.status_panel import DRAWER_ID, ELEMENT_ID
from owc.runs.status import BUSY_LINE
from owc.sim.model import MODEL as SIM_MODEL
from owc.sim.model import PROVIDER
from owc.sim.script import End, Text

from owui.simthread import call

pytestmark = [pytest.mark.owuiserver, pytest.mark.timeout(1800)]

MS = WAIT_S * 1000
REPLY = "The deploy is green."
DIALOG = "[data-owc-status=dialog]"


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[Any, Any]]:
    from conftest import secret
    from owui.simthread import simulator_thread

    secret(TOKEN)
    with simulator_thread(TOKEN) as pair:
        simulator, token = pair

        def prepare() -> None:
            simulator.remote_address = REMOTE_ADDRESS
            simulator.responder = lambda key, message: [Text(REPLY), End()]

        call(token, prepare)
        yield pair


@pytest.fixture(scope="module")
def deployment(gateway, server_venv, browser_install, tmp_path_factory) -> Iterator[dict[str, Any]]:
    from owui.server import running_server

    simulator, token = gateway
    tmp = tmp_path_factory.mktemp("owui-w-status")
    with running_server(tmp, env_extra=owc_env(simulator.url)) as server:
        before = subscribed(simulator, token)
        installed = install_owc(server.base_url, simulator.url)
        admin = server.admin()
        wait_connected(simulator, token, before + 1)
        installed += install_owc(server.base_url, simulator.url)  # the Gateway's models listed now get it too
        yield {"server": server, "admin": admin, "sim": simulator, "token": token, "tmp": tmp, "installed": installed}
        wait_until(lambda: not unfinished_replies(admin), "every reply finished")


@pytest.fixture
def browser(deployment, tmp_path) -> Iterator[Any]:
    from owui.browser import running_browser

    with running_browser(tmp_path) as b:
        yield b


def has(sim: Any, token: Any, method: str) -> bool:
    """Whether the simulator answers ``method`` yet (``owc/sim`` grows them in another change)."""
    return call(token, lambda: method in sim.rpc._handlers)


def click_status(page: Any) -> Any:
    """Click the Action's button under the chat's last reply (shown there without a hover); the dialog."""
    button = page.page.get_by_role("button", name=NAME).last
    button.wait_for(state="visible", timeout=MS)
    button.click()
    dialog = page.page.locator(DIALOG)
    dialog.wait_for(state="visible", timeout=MS)
    return dialog


def test_the_status_button_under_a_reply_shows_the_chats_context_live_and_compact(deployment, browser) -> None:
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    assert f"attached {ACTION_ID} to {MODEL}" in deployment["installed"]
    function = admin.get_function(ACTION_ID)
    assert function is not None and function["is_active"] and not function.get("is_global")
    listed = next(m for m in admin.models() if m["id"] == MODEL)
    assert [a["id"] for a in listed.get("actions") or []] == [ACTION_ID]  # the model's button, from its row
    assert (listed["actions"][0].get("icon") or "").startswith("data:image/svg+xml;base64,")
    page = open_page(browser, deployment)
    chat_id = page.new_chat_with(MODEL, "How is the deploy?", timeout_ms=MS)
    page.wait_for_assistant_text(REPLY, timeout_ms=MS)
    key = ids.session_key("main", admin.user_id, chat_id)

    def usage() -> None:
        sim.rpc.session_usage[key] = {"totalTokens": 115_000, "totalTokensFresh": True, "contextTokens": 1_000_000}
        sim.rpc.usage_providers[:] = [
            {"provider": PROVIDER, "windows": [{"label": "5h", "usedPercent": 72, "resetAt": sim.now_ms() + 1_320_000}]}
        ]

    call(token, usage)
    dialog = click_status(page)
    dialog.get_by_text("115k / 1.0m tokens · 11.5%").wait_for(timeout=MS)
    text = dialog.inner_text()
    assert "OpenClaw status" in text and f"{PROVIDER} · {SIM_MODEL}" in text
    assert "72% used" in text and re.search(r"resets in 2[12]m · \d\d:\d\d", text)
    assert dialog.locator("[data-part=limits] [data-colour]").get_attribute("data-colour") == "amber"
    assert re.search(r"Updated \d\d:\d\d:\d\d", text)
    subagents = dialog.locator("[data-part=subagents]")
    if has(sim, token, "tasks.list"):
        assert subagents.count() == 0  # none running: no section
    else:  # the simulator's "unknown method": that read failed, and that part alone says so
        assert subagents.locator("[data-state=unread]").inner_text() == "Could not read"
    assert page.page.locator(DIALOG).count() == 1
    page.screenshot("status-dialog")
    page.page.evaluate("() => document.documentElement.classList.add('dark')")  # Open WebUI's dark theme
    page.screenshot("status-dialog-dark")
    page.page.evaluate("() => document.documentElement.classList.remove('dark')")
    # Live: a run that starts while the dialog is open shows as running (the Gateway's sessions.changed, no poll).
    run = call(token, lambda: sim.start_run(key, "s-held").text("Checking the canary"))
    dialog.get_by_text("A reply is running").wait_for(timeout=MS)
    # Compact while that run streams: "Compacting…" while the request is out (the simulator holds it), then the line.
    call(token, lambda: sim.faults.stall_requests("sessions.compact"))
    compact = dialog.locator("[data-action=compact]")
    compact.click()
    page.page.wait_for_function(
        "() => document.querySelector('[data-action=compact]').textContent === 'Compacting…'", timeout=MS
    )
    assert compact.is_disabled()
    call(token, lambda: sim.faults.fail_requests())  # released: answered as if it had just arrived
    line = dialog.locator("[data-part=compact-line]")
    page.page.wait_for_function("() => !!document.querySelector('[data-part=compact-line]').dataset.code", timeout=MS)
    assert not compact.is_disabled() and compact.inner_text() == "Compact"
    if has(sim, token, "sessions.compact"):
        assert line.inner_text() == BUSY_LINE and line.get_attribute("data-code") == "409"
    else:
        assert line.get_attribute("data-code") == "502" and "unknown method: sessions.compact" in line.inner_text()
    page.screenshot("status-compact-refused")
    call(token, lambda: run.text(" ... all green.").end())
    dialog.get_by_text("A reply is running").wait_for(state="detached", timeout=MS)
    if has(sim, token, "sessions.compact"):
        compact.click()
        line.get_by_text("Compacted.").wait_for(timeout=MS)
        page.screenshot("status-compacted")
    # Escape closes it (and is not Open WebUI's own: the reply is untouched); after a reload the button opens it again.
    page.page.keyboard.press("Escape")
    page.page.locator(f"#{ELEMENT_ID}").wait_for(state="detached", timeout=MS)
    page.page.reload(wait_until="load")
    page.wait_for_assistant_text("all green.", timeout_ms=MS)
    dialog = click_status(page)
    dialog.get_by_text("115k / 1.0m tokens · 11.5%").wait_for(timeout=MS)
    page.page.locator(f"#{ELEMENT_ID}").click(position={"x": 5, "y": 5})  # the backdrop closes it too
    page.page.locator(f"#{ELEMENT_ID}").wait_for(state="detached", timeout=MS)
    call(token, lambda: sim.rpc.usage_providers.clear())


def test_an_old_sub_agent_finished_message_opens_its_drawer_alone(deployment, browser) -> None:
    """The old Pipe's "↳ Sub-agent finished" message (inventory E2: its hidden task marker) opens that sub-agent's
    drawer, not the dialog. The Gateway no longer has that task (the old Pipe's, long gone): the drawer says so."""
    from owui.server import add_assistant_turn, user_turn_chat

    admin = deployment["admin"]
    chat = user_turn_chat(MODEL, "Audit the dependencies with a sub-agent.")
    add_assistant_turn(chat, "*↳ Sub-agent finished: Audit deps*\n\nAll good.\n<!-- openclaw:taskId=task-old-1 -->")
    chat_id = admin.new_chat(chat)["id"]
    page = open_page(browser, deployment, chat_id)
    page.wait_for_assistant_text("All good.", timeout_ms=MS)
    page.page.get_by_role("button", name=NAME).last.click()
    drawer = page.page.locator(f"#{DRAWER_ID}")
    drawer.wait_for(state="visible", timeout=MS)
    drawer.locator("[role=alert]").get_by_text("no such sub-agent of this chat").wait_for(timeout=MS)
    assert page.page.locator(DIALOG).count() == 0  # the drawer alone
    page.screenshot("status-marker-drawer")
    page.page.keyboard.press("Escape")
    page.page.locator(f"#{ELEMENT_ID}").wait_for(state="detached", timeout=MS)


def test_a_running_sub_agent_shows_in_the_list_and_its_drawer_updates_live(deployment) -> None:
    """To be written when the simulator speaks ``tasks.list`` / ``tasks.get`` and the ``task`` events (owc/sim, another
    change): the list's row (title, doing, elapsed), its drawer live (transcript, tools with arguments and results,
    a failed one marked), a hostile task title as text."""
    if not has(deployment["sim"], deployment["token"], "tasks.list"):
        pytest.skip("the simulator has no tasks.list / task events yet (owc/sim grows them in another change)")
    pytest.skip("the simulator has tasks.*: this scenario is to be written against it")
