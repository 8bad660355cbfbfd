"""Tier W, issue 25 items 2 and 3: what the tab says while the Gateway goes away and comes back, on the REAL Open
WebUI 0.12.4 server in headless Chromium, owc's simulator as the Gateway (``tests/test_owui_w.py``'s deployment).

Each scenario asserts on what the page shows (the status line above the reply: Open WebUI shows the last entry of the
message's ``statusHistory``, with a spinner while it is not done; the seam line in the reply) and on what Open WebUI's
database holds (the chat JSON and the ``chat_message.status_history`` column, read from its SQLite file: no overlay),
and takes a screenshot at each moment a person would look: the Gateway gone, the reply held for its recovery, the
reply resumed, the tab reloaded.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
import test_owui_w as tier_w
import trio
from test_owui_w import (
    MODEL,
    WAIT_S,
    _finished_reply,
    _reply_of,
    assistant_messages,
    finished,
    new_chat,
    open_page,
    subscribed,
    wait_connected,
    wait_until,
)

from owc import ids
from owc.render import status
from owc.render.seam import RECOVERED

from owui.simthread import call

#: Tier W's fixtures (one Open WebUI with owc installed, the simulator in a thread, a browser), for this module too.
sim, deployment, browser = tier_w.sim, tier_w.deployment, tier_w.browser

pytestmark = [pytest.mark.owuiserver, pytest.mark.timeout(1800)]

#: How long the Gateway stays down in these scenarios (the simulator refuses connects meanwhile, as a booting
#: Gateway does): long enough for a person (and a screenshot) to see the tab say so.
DOWN_S = 8.0
#: How long after its boot the Gateway starts the recovery (the real one: 2-4 s after ready): the tab says meanwhile.
RECOVERY_DELAY_S = 12.0
#: The seam line as the page renders it (Markdown: the asterisks make it italic).
SEAM_ON_PAGE = f"↻ {RECOVERED}"
#: Open WebUI's status row (StatusItem.svelte): the last ``statusHistory`` entry, shimmering while not done.
SEL_STATUS = ".status-description"


def _db(deployment: dict[str, Any]) -> Path:
    return deployment["server"].workdir / "data" / "webui.db"


def stored(deployment: dict[str, Any], chat_id: str, message_id: str) -> tuple[dict[str, Any], Any]:
    """The message as Open WebUI's database holds it: from the chat JSON, and its ``chat_message`` row's
    ``status_history`` (what Open WebUI reads first)."""
    with sqlite3.connect(f"file:{_db(deployment)}?mode=ro", uri=True) as conn:
        (raw,) = conn.execute("SELECT chat FROM chat WHERE id = ?", (chat_id,)).fetchone()
        row = conn.execute(
            "SELECT status_history FROM chat_message WHERE id = ?", (f"{chat_id}-{message_id}",)
        ).fetchone()
    message = json.loads(raw)["history"]["messages"][message_id]
    column = json.loads(row[0]) if row is not None and isinstance(row[0], str) else None
    return message, column


def lines(message: dict[str, Any]) -> list[tuple[str, bool]]:
    return [(e["description"], e["done"]) for e in message.get("statusHistory") or []]


def status_row(page: Any) -> str:
    """The status line the tab shows above the (first) reply."""
    return page.page.locator(SEL_STATUS).first.inner_text().strip()


def wait_status(page: Any, text: str) -> None:
    page.page.locator(SEL_STATUS).filter(has_text=text).first.wait_for(state="visible", timeout=WAIT_S * 1000)


def spinning(page: Any) -> bool:
    """The status row shimmers (its line is not done)."""
    return page.page.locator(f"{SEL_STATUS} .shimmer").count() > 0


def crash(deployment: dict[str, Any], recovery_delay: float = 0.0) -> tuple[int, threading.Thread]:
    """The Gateway crashes (no notice: the connection just drops) and stays down ``DOWN_S``, then boots again and
    starts its recoveries ``recovery_delay`` later (the real Gateway: 2-4 s after ready, measured); returns how many
    owc connections were up before, and the thread that waits for the boot (the restart returns once the new boot
    listens: the test looks at the tab meanwhile)."""
    gateway, token = deployment["sim"], deployment["token"]
    before = subscribed(gateway, token)

    async def restart() -> None:
        await gateway.restart("crash", down_seconds=DOWN_S, recovery_delay=recovery_delay)

    down = threading.Thread(target=lambda: trio.from_thread.run(restart, trio_token=token), name="gateway-down")
    down.start()
    return before, down


def test_an_agent_turn_cut_by_a_gateway_crash_says_why_it_waits_and_marks_where_the_recovery_resumed(
    deployment, browser
) -> None:
    """Item 2: the Gateway crashes under an agent turn streaming into the open tab. The tab says "Gateway connection
    lost, reconnecting" (spinning) while the Gateway is down, not a frozen partial and a bare spinner; back, the new
    boot's hello settles the cut run by the owner rule (the Gateway recovers it: no timer) and the tab says it waits
    for that; the recovery resumes the reply, the line says so (done), and item 3's seam line sits between the cut
    run's text and the recovery's. The stored ``statusHistory`` holds the same lines, the last one done; a reload
    shows them and the seam again."""
    from owc.sim.script import End, Text

    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    chat_id, key = new_chat(admin)
    page = open_page(browser, deployment, chat_id)
    call(token, lambda: sim.plan_recovery(key, "w25-recovery", [Text("Picked up where it stopped."), End()]))
    call(token, lambda: sim.start_run(key, "w25-cut").text("Working on the first half."))
    message_id = ids.message_id(key, "w25-cut")
    page.wait_for_assistant_text("Working on the first half.", timeout_ms=WAIT_S * 1000)
    before, down = crash(deployment, recovery_delay=RECOVERY_DELAY_S)
    wait_status(page, status.DROPPED)
    assert spinning(page), "the line spins while the Gateway is away"
    page.screenshot("w25-gateway-gone")
    message, column = stored(deployment, chat_id, message_id)
    assert lines(message)[-1] == (status.DROPPED, False) and message["done"] is False
    assert column == message["statusHistory"]
    down.join(WAIT_S)
    wait_connected(sim, token, before)
    wait_status(page, status.WAIT_RECOVERY)
    page.screenshot("w25-held-for-the-recovery")
    message, _ = stored(deployment, chat_id, message_id)
    assert lines(message) == [(status.DROPPED, False), (status.RECONNECTED, True), (status.WAIT_RECOVERY, False)]
    assert message["content"] == "Working on the first half."
    assert spinning(page), "it waits: the line spins"
    reply = wait_until(lambda: finished(admin, chat_id, message_id), "the resumed reply")
    assert reply["content"] == f"Working on the first half.\n*{SEAM_ON_PAGE}*\nPicked up where it stopped."
    page.wait_for_assistant_text("Picked up where it stopped.", timeout_ms=WAIT_S * 1000)
    wait_status(page, status.RESUMED_RECOVERY)
    assert not spinning(page), "a finished reply keeps no spinning line"
    text = page.assistant_texts()[0]
    assert text.index("Working on the first half.") < text.index(SEAM_ON_PAGE) < text.index("Picked up")
    page.screenshot("w25-resumed")
    message, column = stored(deployment, chat_id, message_id)
    assert lines(message) == [
        (status.DROPPED, False),
        (status.RECONNECTED, True),
        (status.WAIT_RECOVERY, False),
        (status.RESUMED_RECOVERY, True),
    ]
    assert column == message["statusHistory"]
    assert list(assistant_messages(admin, chat_id)) == [message_id], "one reply: the recovery has none of its own"
    page.page.reload()
    page.wait_for_assistant_text("Picked up where it stopped.", timeout_ms=WAIT_S * 1000)
    assert status_row(page) == status.RESUMED_RECOVERY and not spinning(page)
    assert SEAM_ON_PAGE in page.assistant_texts()[0]
    page.page.locator(SEL_STATUS).first.click()  # unfold the history: every line, as stored
    for description, _ in lines(message):
        page.wait_for_text(description, timeout_ms=WAIT_S * 1000)
    page.screenshot("w25-reloaded-history-unfolded")


def test_a_typed_reply_cut_by_a_gateway_crash_says_so_through_its_request(deployment, browser) -> None:
    """The same for a user turn: while the Pipe's request streams the reply, its status lines go through the
    request's own ``__event_emitter__`` (Open WebUI stores them with the reply); after the crash the request ends,
    owc's writer takes the reply over, holds it for the Gateway's recovery and finishes it with the seam."""
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    page = open_page(browser, deployment)
    chat_id = page.new_chat_with(MODEL, "SLOW please", timeout_ms=WAIT_S * 1000)
    page.wait_for_assistant_text("Hello", timeout_ms=WAIT_S * 1000)
    message_id, _ = wait_until(lambda: _reply_of(admin, chat_id, "SLOW please"), "the reply")
    before, down = crash(deployment)
    wait_status(page, status.DROPPED)
    page.screenshot("w25-typed-gateway-gone")
    message, _ = stored(deployment, chat_id, message_id)
    assert (status.DROPPED, False) in lines(message), "Open WebUI stored the request's line"
    down.join(WAIT_S)
    wait_connected(sim, token, before)

    # ``_finished_reply`` waits for owc's finish (Open WebUI's own end-of-request save says ``done`` too).
    reply = wait_until(lambda: _finished_reply(admin, chat_id, "SLOW please"), "the resumed reply")
    assert reply["content"] == f"Hello\n*{SEAM_ON_PAGE}*\nRecovered after the Gateway restart."
    page.wait_for_assistant_text("Recovered after the Gateway restart.", timeout_ms=WAIT_S * 1000)
    wait_status(page, status.RESUMED_RECOVERY)
    assert not spinning(page)
    page.screenshot("w25-typed-resumed")
    message, column = stored(deployment, chat_id, message_id)
    said = lines(message)
    assert said[0] == (status.DROPPED, False) and said[-1] == (status.RESUMED_RECOVERY, True), said
    assert column == message["statusHistory"]
    key = ids.session_key("main", admin.user_id, chat_id)
    assert call(token, lambda: len([r for r in sim.runs.values() if r.key == key])) == 2  # the turn, its recovery
    assert len(assistant_messages(admin, chat_id)) == 1


def test_a_message_sent_while_the_agent_is_busy_says_it_is_queued_until_its_turn_starts(deployment, browser) -> None:
    """Item 2's "Queued behind the current reply": an agent turn streams; the person sends a message anyway ("Send
    now" on a queued one); owc sends it once the agent turn has ended (never steered into it), and meanwhile its reply
    says why nothing comes (spinning), through the request's own emitter (Open WebUI stores it); the line closes when
    its turn starts."""
    from owc.sim.script import CANNED_ANSWER

    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    chat_id, key = new_chat(admin)
    page = open_page(browser, deployment, chat_id)
    run = call(token, lambda: sim.start_run(key, "w25-busy").text("Agent turn in progress"))
    page.wait_for_assistant_text("Agent turn in progress", timeout_ms=WAIT_S * 1000)
    page.queue_message("a question meanwhile", timeout_ms=WAIT_S * 1000)
    page.click_send_now(timeout_ms=WAIT_S * 1000)
    wait_status(page, status.QUEUED)
    assert spinning(page)
    page.screenshot("w25-queued")
    reply_id, _ = wait_until(lambda: _reply_of(admin, chat_id, "a question meanwhile"), "Open WebUI's reply stub")
    waiting, _ = stored(deployment, chat_id, reply_id)
    assert lines(waiting) == [(status.QUEUED, False)]
    call(token, lambda: run.text(" and finished.").end())
    reply = wait_until(lambda: _finished_reply(admin, chat_id, "a question meanwhile"), "the reply")
    assert reply["content"] == CANNED_ANSWER
    page.wait_for_assistant_text(CANNED_ANSWER, timeout_ms=WAIT_S * 1000)
    wait_status(page, status.STARTED)
    assert not spinning(page)
    page.screenshot("w25-queued-then-started")
    message, column = wait_until(
        lambda: (m := stored(deployment, chat_id, reply_id)) and lines(m[0])[-1][1] and m, "the closed line"
    )
    assert lines(message) == [(status.QUEUED, False), (status.STARTED, True)]
    assert column == message["statusHistory"]
