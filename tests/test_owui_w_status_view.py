"""Tier W, issue 29: the status Action. The real Open WebUI 0.12.4 server with owc installed as the README says
(``owc owui install``: the Pipe, the startup Event, the thinking Filter and the status Action, the Action attached to
owc's models), the simulator as the Gateway (``sessions.describe`` from its session rows plus the usage a test sets,
``usage.status``), headless Chromium as the person.

A person's reply finishes; they click "OpenClaw status" under it; the dialog shows the chat's context with the
simulator's numbers and its rate-limit window, live: a run that starts while it is open shows as running. Compact
shows "Compacting…" while its request is out (held by the simulator), is refused while that run goes on and done
after it (the context then the compacted one). After a reload the button opens the panel again; Escape closes it.

A person's message makes the agent spawn a sub-agent (the simulator's ``Spawn``, ``tests/test_sim_status.py``) whose
title holds markup and whose run holds in its ``exec``: the dialog lists it (the title as text, what it runs, the
elapsed time), its drawer follows it live while the test releases the tool (the result, then the child's answer),
the row leaves when it completes, the chat's messages say its lines, Compact is refused while the announce reply
runs and done after. Screenshots go to ``$OWC_SCREENSHOTS`` (else the test's tmp dir).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from test_owui_w import (
    MODEL,
    WAIT_S,
    assistant_messages,
    one_server,
    open_page,
    simulated_gateway,
    wait_until,
)

from owc import ids
from owc.owui.status_action import ACTION_ID, NAME
from owc.owui.status_panel import DRAWER_ID, ELEMENT_ID
from owc.runs.status import BUSY_LINE
from owc.sim.model import MODEL as SIM_MODEL
from owc.sim.model import PROVIDER
from owc.sim.script import End, Hold, Spawn, Step, Text, Tool

from owui.simthread import call

pytestmark = [pytest.mark.owuiserver, pytest.mark.timeout(1800)]

MS = WAIT_S * 1000
REPLY = "The deploy is green."
DIALOG = "[data-owc-status=dialog]"
#: 115k tokens compacted: the simulator keeps 70 % (measured 1050 to 732), 80.5k, shown rounded.
COMPACTED_CONTEXT = "81k / 1.0m tokens · 8.1%"

#: The sub-agent scenario: a person's words with ``SPAWN`` make the agent spawn a sub-agent titled ``TITLE`` (markup
#: a page must show as text) whose run holds in ``exec`` until the test releases it, answers ``CHILD_DONE``; the
#: parent says ``SPAWNED``; the announce run (the sub-agent's result back on the chat's key) says ``ANNOUNCED`` and
#: holds until the test ends it.
SPAWN_WORDS = "Please SPAWN a sub-agent to audit the dependencies."
TITLE = 'Audit <img src=x onerror="window.__pwned=1"> deps'
TASK = "Audit the dependencies: run the audit and report."
EXEC_ARGS = {"command": "npm audit --omit=dev"}
CHILD_OK = "found 0 vulnerabilities"
CHILD_DONE = "CHILD DONE: no vulnerable dependency."
SPAWNED = "A sub-agent is auditing the dependencies."
ANNOUNCED = "The audit found no vulnerable dependency."


def responder(key: str, message: str) -> list[Step]:
    if "SPAWN" in message:
        child = (Tool("exec", EXEC_ARGS, CHILD_OK, hold=True), Text(CHILD_DONE), End())
        return [Spawn(TASK, TITLE, child, (Text(ANNOUNCED), Hold())), Text(SPAWNED), End()]
    return [Text(REPLY), End()]


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[Any, Any]]:
    def prepare(simulator: Any) -> None:
        simulator.responder = responder

    with simulated_gateway(prepare) as pair:
        yield pair


@pytest.fixture(scope="module")
def deployment(gateway, server_venv, browser_install, tmp_path_factory) -> Iterator[dict[str, Any]]:
    with one_server(gateway, tmp_path_factory.mktemp("owui-w-status"), install_twice=True) as deployed:
        yield deployed


@pytest.fixture
def browser(deployment, tmp_path) -> Iterator[Any]:
    from owui.browser import running_browser

    with running_browser(tmp_path) as b:
        yield b


def click_status(page: Any) -> Any:
    """Click the Action's button under the chat's last reply (shown there without a hover); the dialog."""
    button = page.page.get_by_role("button", name=NAME).last
    button.wait_for(state="visible", timeout=MS)
    button.click()
    dialog = page.page.locator(DIALOG)
    dialog.wait_for(state="visible", timeout=MS)
    return dialog


def subagent_lines(admin: Any, chat_id: str) -> dict[str, list[str]]:
    """Each assistant message's sub-agent lines (owc's ``openclaw_subagent`` status entries), as stored."""
    return {
        mid: said
        for mid, m in assistant_messages(admin, chat_id).items()
        if (said := [e["description"] for e in m.get("statusHistory") or [] if e.get("action") == "openclaw_subagent"])
    }


def sum_lines(lines: dict[str, list[str]]) -> list[str]:
    return [said for each in lines.values() for said in each]


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
    assert dialog.locator("[data-part=subagents]").count() == 0  # no sub-agent running: no section
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
    assert line.inner_text() == BUSY_LINE and line.get_attribute("data-code") == "409"
    page.screenshot("status-compact-refused")
    call(token, lambda: run.text(" ... all green.").end())
    dialog.get_by_text("A reply is running").wait_for(state="detached", timeout=MS)
    compact.click()
    line.get_by_text("Compacted.").wait_for(timeout=MS)
    assert line.inner_text() == "Compacted. 115k → 81k tokens" and line.get_attribute("data-code") == "200"
    dialog.get_by_text(COMPACTED_CONTEXT).wait_for(timeout=MS)  # the Gateway's sessions.changed, live
    page.screenshot("status-compacted")
    # Escape closes it (and is not Open WebUI's own: the reply is untouched); after a reload the button opens it again.
    page.page.keyboard.press("Escape")
    page.page.locator(f"#{ELEMENT_ID}").wait_for(state="detached", timeout=MS)
    page.page.reload(wait_until="load")
    page.wait_for_assistant_text("all green.", timeout_ms=MS)
    dialog = click_status(page)
    dialog.get_by_text(COMPACTED_CONTEXT).wait_for(timeout=MS)
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


def test_a_running_sub_agent_shows_in_the_list_and_its_drawer_updates_live(deployment, browser) -> None:
    """A person asks for a sub-agent; the agent spawns one titled with markup, held in its ``exec``. The status
    dialog lists it (the title as text, "Running exec", the elapsed time counting); its drawer shows the task and the
    tool running, then, when the test releases the tool, the tool's result and the child's answer in the same drawer
    (no reload); the row leaves when it completes. The announce reply streams into the chat: Compact is refused while
    it runs and done after. The chat's messages hold the sub-agent's lines, each once, and the tab shows them."""
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    page = open_page(browser, deployment)
    chat_id = page.new_chat_with(MODEL, SPAWN_WORDS, timeout_ms=MS)
    page.wait_for_assistant_text(SPAWNED, timeout_ms=MS)
    key = ids.session_key("main", admin.user_id, chat_id)
    dialog = click_status(page)
    section = dialog.locator("[data-part=subagents]")
    row = section.locator("[data-task]")
    row.filter(has_text="Running exec").wait_for(timeout=MS)
    ((task_id, title),) = call(token, lambda: [(t.task_id, t.title) for t in sim.tasks.of(key)])
    assert title == TITLE
    assert row.count() == 1 and row.get_attribute("data-task") == task_id
    assert "Sub-agents (1)" in (section.text_content() or "")
    assert row.locator(".flex-1 > div").all_inner_texts() == [TITLE, "Running exec"]  # the title as text
    assert row.locator("img").count() == 0
    elapsed = row.locator("[data-elapsed]")
    counted = elapsed.inner_text()
    assert re.fullmatch(r"\d+s", counted), counted
    page.page.wait_for_function(  # the page counts it: a second later it says more
        "(t) => document.querySelector('[data-part=subagents] [data-elapsed]').textContent !== t",
        arg=counted,
        timeout=MS,
    )
    page.screenshot("status-subagent-listed")

    # Its drawer: the task and the tool running, then (released) the tool's result and the child's answer, live.
    row.click()
    drawer = page.page.locator(f"#{DRAWER_ID}")
    drawer.wait_for(state="visible", timeout=MS)
    drawer.locator("[data-part=title]", has_text=TITLE).wait_for(timeout=MS)
    assert drawer.locator("[data-part=title]").inner_text() == TITLE
    overview = drawer.locator("[data-pane=overview]")
    assert "Running exec" in overview.inner_text() and TASK in overview.inner_text()
    drawer.locator("[data-tab=transcript]").click()
    transcript = drawer.locator("[data-pane=transcript]")
    transcript.locator("[data-role=user]", has_text=TASK).wait_for(timeout=MS)
    assert transcript.locator("[data-role=assistant]").count() == 0  # its only step so far is the tool call
    drawer.locator("[data-tab=tools]").click()
    tools = drawer.locator("[data-pane=tools]")
    tool = tools.locator("[data-tool=exec]")
    tool.get_by_text("running…").wait_for(timeout=MS)
    assert drawer.locator("[data-tab=tools]").inner_text() == "Tools (1)"
    assert '"command": "npm audit --omit=dev"' in tool.inner_text()
    page.screenshot("status-subagent-drawer-running")
    drawer.evaluate("e => { e.__owcSame = true; }")  # the same drawer, the same page, after the updates
    page.page.evaluate("() => { window.__owcNoReload = true; }")
    call(token, lambda: sim.tasks.child(task_id).release())
    tool.locator("pre", has_text=CHILD_OK).wait_for(timeout=MS)
    assert tool.get_by_text("running…").count() == 0 and tool.get_attribute("data-failed") is None
    drawer.locator("[data-tab=transcript]").click()
    transcript.locator("[data-role=assistant]", has_text=CHILD_DONE).wait_for(timeout=MS)
    page.screenshot("status-subagent-drawer-transcript")
    drawer.locator("[data-tab=overview]").click()
    overview.get_by_text("completed", exact=True).wait_for(timeout=MS)
    assert CHILD_DONE in overview.inner_text()
    assert drawer.evaluate("e => e.__owcSame === true") and page.page.evaluate("() => window.__owcNoReload === true")
    section.wait_for(state="detached", timeout=MS)  # the dialog's list: the row left when it completed
    drawer.locator("[data-tab=tools]").click()
    page.screenshot("status-subagent-drawer-done")

    # The announce reply (the sub-agent's result back on the chat's key) streams in and holds: Compact is refused.
    page.wait_for_assistant_text(ANNOUNCED, timeout_ms=MS)
    page.page.keyboard.press("Escape")  # the drawer first; the dialog stays
    drawer.wait_for(state="detached", timeout=MS)
    dialog.get_by_text("A reply is running").wait_for(timeout=MS)
    compact = dialog.locator("[data-action=compact]")
    line = dialog.locator("[data-part=compact-line]")
    compact.click()
    page.page.wait_for_function("() => !!document.querySelector('[data-part=compact-line]').dataset.code", timeout=MS)
    assert line.inner_text() == BUSY_LINE and line.get_attribute("data-code") == "409"
    page.screenshot("status-subagent-compact-refused")
    announce = call(token, lambda: sim.active_run(key))
    assert announce is not None and announce.run_id.startswith("announce:v1:agent:main:subagent:")
    call(token, announce.end)
    dialog.get_by_text("A reply is running").wait_for(state="detached", timeout=MS)
    compact.click()
    line.get_by_text("Compacted.").wait_for(timeout=MS)
    assert line.get_attribute("data-code") == "200"
    page.page.keyboard.press("Escape")
    page.page.locator(f"#{ELEMENT_ID}").wait_for(state="detached", timeout=MS)

    # The chat's messages said what the sub-agent did, each line once; the tab shows them in the status history.
    expected = [f"Sub-agent {TITLE} is working", f"Sub-agent {TITLE}: running exec", f"Sub-agent {TITLE} finished"]
    wait_until(lambda: expected[-1] in sum_lines(subagent_lines(admin, chat_id)), "the sub-agent's last line")
    stored = subagent_lines(admin, chat_id)
    assert sum_lines(stored) == expected, stored
    for message_id, said in stored.items():
        message = page.page.locator(f'[id="message-{message_id}"]')
        toggle = message.get_by_role("button", name="Toggle status history")
        if toggle.get_attribute("aria-expanded") != "true":
            toggle.click()
        for description in said:
            message.locator(".status-description", has_text=description).first.wait_for(timeout=MS)
        shown = [t.strip() for t in message.locator(".status-description").all_inner_texts()]
        assert all(d in shown for d in said), shown
    page.page.mouse.move(0, 0)  # no tooltip over the lines in the screenshot
    page.screenshot("status-subagent-lines")
    assert page.page.evaluate("() => window.__pwned") is None and page.page.locator('img[src="x"]').count() == 0
