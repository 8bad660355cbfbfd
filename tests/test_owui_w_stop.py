"""Tier W, issue 25 item 1: Stop from any tab. The real Open WebUI 0.12.4 server with owc installed, the simulator
as the Gateway, headless Chromium as the person.

Open WebUI's page sends the same ``POST /api/tasks/chat/{id}/stop`` for Stop, Escape and "Send now"; owc's page
hook, in every tab from page load (``/static/loader.js``, ``owc/owui/page.py``), tags it with the control, and owc's
stop route records the tag before Open WebUI cancels anything. So a Stop pressed in any tab showing the chat stops
the run: a reloaded tab, a second tab opened mid-run, a tab loaded before owc was installed, a tab on another
worker or another Open WebUI instance; for an agent turn and for a person's own turn. Each scenario asserts the
Gateway's own record of the run (the simulator's: the run aborted, or not), the message in the database and the
tab's Stop button; screenshots at each key moment go to ``$OWC_SCREENSHOTS`` (else the test's tmp dir).

Which scenario covers which mechanism (each once; the set is chosen to keep the tier within minutes):

| mechanism | scenario |
|---|---|
| the hook served with the page (``loader.js``) | every tab here; asserted in the reloaded and second tabs |
| the versioned ``loader.js`` URL over a browser's cached empty file | ``test_a_tab_loaded_before_owc_...`` (tab B) |
| the ``execute`` at a page's first ``last_read_at`` (a page loaded before owc) | the same test (tab A) |
| the record in the process (no Redis) | reloaded tab, second tab, user turns, Send now |
| the record in Redis, read by another process | ``test_a_stop_in_a_tab_of_another_instance_...`` (both turns) |
| "Send now" still keeps writing | ``test_send_now_in_a_reloaded_tab_...`` |
| the Stop button across an Open WebUI restart | ``test_a_tab_kept_open_across_a_restart_...`` |
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from test_owui_w import (
    MODEL,
    REMOTE_ADDRESS,
    TOKEN,
    WAIT_S,
    assistant_messages,
    finished,
    install_owc,
    new_chat,
    open_page,
    owc_env,
    owc_finished,
    subscribed,
    unfinished_replies,
    wait_connected,
    wait_until,
)

from owc import ids
from owc.owui.intent_hook import GLOBAL

from owui.simthread import call

pytestmark = [pytest.mark.owuiserver, pytest.mark.timeout(1800)]

MS = WAIT_S * 1000


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[Any, Any]]:
    """The simulator as the Gateway, judging owc as a client on another host (a paired device), as tier W does."""
    from conftest import secret
    from owui.simthread import simulator_thread

    secret(TOKEN)
    with simulator_thread(TOKEN) as pair:
        simulator, token = pair

        def remote() -> None:
            simulator.remote_address = REMOTE_ADDRESS

        call(token, remote)
        yield pair


@pytest.fixture(scope="module")
def deployment(gateway, server_venv, browser_install, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """One Open WebUI (one process, no Redis) with owc installed as the README says."""
    from owui.server import running_server

    simulator, token = gateway
    tmp = tmp_path_factory.mktemp("owui-w-stop")
    with running_server(tmp, env_extra=owc_env(simulator.url)) as server:
        before = subscribed(simulator, token)
        install_owc(server.base_url, simulator.url)
        admin = server.admin()
        wait_connected(simulator, token, before + 1)
        yield {"server": server, "admin": admin, "sim": simulator, "token": token, "tmp": tmp}
        wait_until(lambda: not unfinished_replies(admin), "every reply finished")


@pytest.fixture
def browser(deployment, tmp_path) -> Iterator[Any]:
    from owui.browser import running_browser

    with running_browser(tmp_path) as b:
        yield b


# ---------------------------------------------------------------------------------------------- helpers


def hook_of(page: Any) -> str | None:
    """How the tab got owc's page hook ("loader": with the page; "execute": sent later), None: it has none."""
    return page.page.evaluate(f"() => window[{GLOBAL!r}] ? window[{GLOBAL!r}].via : null")


def stop_button(page: Any, state: str) -> None:
    """Until the tab's Stop button is ``visible`` or ``hidden``."""
    from owui.browser import SEL_STOP

    page.page.locator(SEL_STOP).wait_for(state=state, timeout=MS)


def sim_until(sim: Any, token: Any, predicate: Any, what: str) -> None:
    """Until ``predicate`` holds in the simulator (its own wait, re-checked at every change), bounded."""

    async def wait() -> None:
        with trio.fail_after(WAIT_S):  # timer-ok: a harness bound on another thread's state
            await sim.wait_for(predicate)

    try:
        trio.from_thread.run(wait, trio_token=token)
    except trio.TooSlowError:
        raise AssertionError(f"timed out waiting for {what}") from None


def terminal(sim: Any, token: Any, run: Any) -> str | None:
    """The Gateway's own record of how the run ended (the simulator's): "final", "aborted", ...; None: going on."""
    return call(token, lambda: run.run.terminal)


def wait_aborted(sim: Any, token: Any, run: Any) -> None:
    sim_until(sim, token, lambda: run.run.terminal == "aborted", f"the Gateway to abort run {run.run_id}")


def reply_to(admin: Any, chat_id: str, text: str) -> tuple[str, dict[str, Any]] | None:
    """The assistant reply (id, message) under the user message whose content is ``text``."""
    messages = admin.get_chat(chat_id)["chat"]["history"]["messages"]
    for mid, m in messages.items():
        parent = messages.get(m.get("parentId") or "")
        if m.get("role") == "assistant" and parent is not None and parent.get("content") == text:
            return mid, m
    return None


def finished_reply(admin: Any, chat_id: str, text: str) -> dict[str, Any] | None:
    """The reply once owc has finished it (not Open WebUI's own ``done`` save of the request's copy:
    ``test_owui_w.owc_finished``)."""
    found = reply_to(admin, chat_id, text)
    return owc_finished(found[1]) if found is not None else None


def user_turn(page: Any, sim: Any, token: Any, admin: Any, text: str) -> tuple[str, Any]:
    """A person sends ``text`` (the simulator's model says "Hello" and holds): the chat id and the run's handle."""
    chat_id = page.new_chat_with(MODEL, text, timeout_ms=MS)
    page.wait_for_assistant_text("Hello", timeout_ms=MS)
    key = ids.session_key("main", admin.user_id, chat_id)
    run = call(token, lambda: sim.active_run(key))
    assert run is not None
    return chat_id, run


def log_lines(server: Any, marker: str) -> list[str]:
    """The server's log lines holding ``marker`` (every boot's: a restart starts a new log file)."""
    lines = []
    for path in sorted(server.logs_dir.glob("serve-*.log")):
        lines += [line for line in path.read_text(errors="replace").splitlines() if marker in line]
    return lines


def pids(lines: list[str]) -> set[str]:
    return {m.group(1) for line in lines if (m := re.search(r"\bpid=(\d+)", line))}


# ---------------------------------------------------------------------------------------------- one process


def test_a_stop_in_a_reloaded_tab_stops_the_agent_turn(deployment, browser) -> None:
    """An agent turn streams into the open tab; the person reloads the tab (before, the reloaded tab lacked owc's
    hook until the run's next event, so its Stop was "unknown" and the run went on for 24-37 s). The reloaded tab
    has the hook from its load, shows the Stop button, and its Stop aborts the run at the Gateway; the message
    keeps what it had; the button goes."""
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    chat_id, key = new_chat(admin)
    page = open_page(browser, deployment, chat_id)
    run = call(token, lambda: sim.start_run(key, "s-reload").text("Checking the logs."))
    page.wait_for_assistant_text("Checking the logs.", timeout_ms=MS)
    page.page.reload(wait_until="load")
    page.wait_for_assistant_text("Checking the logs.", timeout_ms=MS)
    assert hook_of(page) == "loader"  # in the tab from its load, before any press
    stop_button(page, "visible")
    page.screenshot("s-reloaded-generating")
    page.click_stop(timeout_ms=MS)
    wait_aborted(sim, token, run)
    message_id = ids.message_id(key, "s-reload")
    message = wait_until(lambda: finished(admin, chat_id, message_id), "the stopped message")
    assert message["content"] == "Checking the logs."
    stop_button(page, "hidden")
    assert page.assistant_texts() == ["Checking the logs."]
    page.screenshot("s-reloaded-stopped")


def test_a_stop_in_a_second_tab_opened_mid_run_stops_the_agent_turn(deployment, browser) -> None:
    """Two tabs: the first had the chat open when the agent turn began, the second opens it mid-run and presses
    Stop. The run is aborted at the Gateway; both tabs show the stopped message and no Stop button."""
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    chat_id, key = new_chat(admin)
    first = open_page(browser, deployment, chat_id)
    run = call(token, lambda: sim.start_run(key, "s-second-tab").text("Scanning the disks,"))
    first.wait_for_assistant_text("Scanning the disks,", timeout_ms=MS)
    second = first.another_tab()
    second.open_chat(chat_id)
    second.wait_for_assistant_text("Scanning the disks,", timeout_ms=MS)
    call(token, lambda: run.tool("exec", {"cmd": "df -h"}, "ok").text(" one left."))
    for page in (first, second):
        page.wait_for_assistant_text("one left.", timeout_ms=MS)
        stop_button(page, "visible")
    assert hook_of(second) == "loader"
    second.screenshot("s-second-tab-generating")
    second.click_stop(timeout_ms=MS)
    wait_aborted(sim, token, run)
    message_id = ids.message_id(key, "s-second-tab")
    message = wait_until(lambda: finished(admin, chat_id, message_id), "the stopped message")
    assert message["content"].startswith("Scanning the disks,") and message["content"].endswith("one left.")
    for page in (first, second):
        stop_button(page, "hidden")
    first.screenshot("s-second-tab-first-after-stop")


def test_a_stop_in_a_second_tab_stops_a_persons_reply(deployment, browser) -> None:
    """A person's own turn: the tab that sent it streams the reply; a second tab opens the chat mid-reply and
    presses Stop (before, only the sending tab could stop it). The agent's run is aborted; the reply keeps what it
    had; no tab shows a Stop button."""
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    first = open_page(browser, deployment)
    chat_id, run = user_turn(first, sim, token, admin, "SLOW, stopped from another tab")
    second = first.another_tab()
    second.open_chat(chat_id)
    second.wait_for_assistant_text("Hello", timeout_ms=MS)
    stop_button(second, "visible")
    second.click_stop(timeout_ms=MS)
    wait_aborted(sim, token, run)
    reply = wait_until(lambda: finished_reply(admin, chat_id, "SLOW, stopped from another tab"), "the stopped reply")
    assert reply["content"] == "Hello"
    for page in (first, second):
        stop_button(page, "hidden")
    second.screenshot("s-user-turn-second-tab-stopped")


def test_a_stop_in_the_sending_tab_after_a_reload_stops_a_persons_reply(deployment, browser) -> None:
    """The tab that sent the message is reloaded mid-reply, then its Stop (Escape here, as a person may) aborts
    the run."""
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    page = open_page(browser, deployment)
    chat_id, run = user_turn(page, sim, token, admin, "SLOW, then reloaded")
    page.page.reload(wait_until="load")
    page.wait_for_assistant_text("Hello", timeout_ms=MS)
    stop_button(page, "visible")
    assert hook_of(page) == "loader"
    page.page.locator("#chat-input").click()
    page.page.keyboard.press("Escape")
    wait_aborted(sim, token, run)
    reply = wait_until(lambda: finished_reply(admin, chat_id, "SLOW, then reloaded"), "the stopped reply")
    assert reply["content"] == "Hello"
    stop_button(page, "hidden")
    page.screenshot("s-user-turn-reloaded-escaped")


def test_send_now_in_a_reloaded_tab_keeps_the_reply_streaming(deployment, browser) -> None:
    """The reloaded tab queues a message during the reply and presses "Send now": the same stop request as Stop,
    tagged "send_now", so the run is not aborted and the first reply streams on to its end; the queued message
    gets its own reply after it."""
    from owc.sim.script import CANNED_ANSWER

    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    page = open_page(browser, deployment)
    chat_id, run = user_turn(page, sim, token, admin, "SLOW, then send now")
    page.page.reload(wait_until="load")
    page.wait_for_assistant_text("Hello", timeout_ms=MS)
    stop_button(page, "visible")
    page.queue_message("and this one now", timeout_ms=MS)
    page.screenshot("s-send-now-queued")
    page.click_send_now(timeout_ms=MS)
    wait_until(lambda: reply_to(admin, chat_id, "and this one now"), "Open WebUI's reply stub for the queued one")
    call(token, lambda: run.text(" and the rest of it.").end())
    first = wait_until(lambda: finished_reply(admin, chat_id, "SLOW, then send now"), "the first reply")
    assert first["content"] == "Hello and the rest of it."
    assert terminal(sim, token, run) == "final"  # the Gateway's record: never aborted
    second = wait_until(lambda: finished_reply(admin, chat_id, "and this one now"), "the queued message's reply")
    assert second["content"] == CANNED_ANSWER
    page.wait_for_assistant_text(CANNED_ANSWER, timeout_ms=MS)
    page.wait_for_assistant_text("and the rest of it.", timeout_ms=MS)
    stop_button(page, "hidden")
    page.screenshot("s-send-now-both-replies")


def test_a_tab_kept_open_across_a_restart_shows_stop_while_the_run_streams_and_not_after_it_ends(
    deployment, browser
) -> None:
    """Open WebUI restarts (SIGTERM) while an agent turn streams into an open tab, and the run goes on at the
    Gateway. owc let go of the message on the way out, so the restarted Open WebUI's owc takes it at once: the tab
    (reconnected, not reloaded) shows the run streaming again with the Stop button, and no Stop button once the
    run has ended. Before, the restarted owc stood by for the old writer until the run's end: the tab showed an
    empty reply, no Stop button and nothing of the run until it was over."""
    admin, sim, token, server = deployment["admin"], deployment["sim"], deployment["token"], deployment["server"]
    chat_id, key = new_chat(admin)
    page = open_page(browser, deployment, chat_id)
    run = call(token, lambda: sim.start_run(key, "s-restart").text("Before the restart."))
    page.wait_for_assistant_text("Before the restart.", timeout_ms=MS)
    stop_button(page, "visible")
    connected = subscribed(sim, token)
    # The tab asks for the chat's tasks when its socket is back (``handleSocketConnect``): from then on events reach
    # it (Open WebUI's own reconnect does not replay what went out while it was away).
    tasks_asked = f"{server.base_url}/api/tasks/chat/{chat_id}"
    with page.page.expect_request(lambda r: r.url == tasks_asked and r.method == "GET", timeout=3 * MS):
        server.restart()
        wait_connected(sim, token, connected)
    message_id = ids.message_id(key, "s-restart")
    wait_until(lambda: admin.chat_tasks(chat_id), "the restarted owc's writer registered as a task of the chat")
    call(token, lambda: run.text(" After the restart."))
    page.wait_for_assistant_text("After the restart.", timeout_ms=MS)
    stop_button(page, "visible")
    assert not finished(admin, chat_id, message_id)
    page.screenshot("s-restart-streaming-again")
    call(token, lambda: run.text(" Done.").end())
    page.wait_for_assistant_text("Done.", timeout_ms=MS)
    message = wait_until(lambda: finished(admin, chat_id, message_id), "the finished message")
    assert message["content"] == "Before the restart. After the restart. Done."
    stop_button(page, "hidden")
    assert len(page.assistant_texts()) == 1
    page.screenshot("s-restart-finished")


# ---------------------------------------------------------------------------------------------- owc installed later


@pytest.fixture(scope="module")
def late(gateway, server_venv, browser_install, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """An Open WebUI that has run a long while WITHOUT owc: its ``loader.js`` is old (a 10-day-old copy, as after
    ten days of uptime: the file's date is the process start), so a browser caches the empty file for about a
    day (heuristic freshness: a tenth of its age). owc is installed into it later, by the test."""
    from owui.server import running_server

    simulator, token = gateway
    tmp = tmp_path_factory.mktemp("owui-w-late")
    with running_server(tmp, env_extra=owc_env(simulator.url)) as server:
        loader = server.workdir / "static" / "loader.js"
        old = time.time() - 10 * 86400
        os.utime(loader, (old, old))
        yield {"server": server, "admin": server.admin(), "sim": simulator, "token": token, "tmp": tmp}


def test_a_tab_loaded_before_owc_was_installed_gets_the_hook_and_its_stop_stops_the_run(late, tmp_path) -> None:
    """Tab A was loaded before owc was installed (it holds no hook, and its browser cached the empty
    ``loader.js``); owc is installed into the running server. A opens the chat within the app (no reload): it gets
    the hook at its first ``last_read_at`` (an ``execute``), and its Stop aborts the run. Tab B, a new tab in the
    same browser, loads the chat: it gets the hook with the page (the versioned ``loader.js`` URL, never the
    cached empty file)."""
    from owui.browser import running_browser

    server, admin, sim, token = late["server"], late["admin"], late["sim"], late["token"]
    with running_browser(tmp_path) as browser:
        tab_a = open_page(browser, {"server": server, "admin": admin})
        assert hook_of(tab_a) is None
        cached = tab_a.page.evaluate(
            "() => performance.getEntriesByType('resource').filter(e => e.name.includes('loader.js')).map(e => e.name)"
        )
        assert cached and all("owc=" not in url for url in cached)  # Open WebUI's own, empty file
        before = subscribed(sim, token)
        install_owc(server.base_url, sim.url)
        wait_connected(sim, token, before + 1)
        chat_id, key = new_chat(admin)
        run = call(token, lambda: sim.start_run(key, "s-late").text("Rotating the keys."))
        wait_until(lambda: assistant_messages(admin, chat_id).get(ids.message_id(key, "s-late")), "the claim")
        # Within the app, as a click on the chat in the sidebar does: no page load.
        tab_a.page.evaluate(
            "(href) => { const a = document.createElement('a'); a.href = href; document.body.appendChild(a);"
            " a.click(); }",
            f"/c/{chat_id}",
        )
        tab_a.page.wait_for_url(re.compile(f".*/c/{chat_id}"), timeout=MS)
        tab_a.wait_for_assistant_text("Rotating the keys.", timeout_ms=MS)
        tab_a.page.wait_for_function(f"() => !!window[{GLOBAL!r}]", timeout=MS)
        assert hook_of(tab_a) == "execute"
        tab_b = tab_a.another_tab()
        tab_b.open_chat(chat_id)
        assert hook_of(tab_b) == "loader"
        loaded = tab_b.page.evaluate(
            "() => performance.getEntriesByType('resource').filter(e => e.name.includes('loader.js')).map(e => e.name)"
        )
        assert any("owc=" in url for url in loaded), loaded
        stop_button(tab_a, "visible")
        tab_a.screenshot("s-late-tab-generating")
        tab_a.click_stop(timeout_ms=MS)
        wait_aborted(sim, token, run)
        message = wait_until(lambda: finished(admin, chat_id, ids.message_id(key, "s-late")), "the stopped message")
        assert message["content"] == "Rotating the keys."
        for page in (tab_a, tab_b):
            stop_button(page, "hidden")
        tab_b.screenshot("s-late-tab-b-stopped")


# ---------------------------------------------------------------------------------------------- another instance


@pytest.fixture(scope="module")
def instances(gateway, server_venv, browser_install, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """Two Open WebUI instances on one database and one Redis (``WEBSOCKET_MANAGER=redis``): A, one process, with
    owc connected to the Gateway; B, two uvicorn workers, whose owc cannot reach the Gateway (so every run is
    written by A, and every stop pressed in a tab of B is recorded by another process than the one whose task
    it cancels: deterministically across instances and workers)."""
    from redisserver import RedisUnavailable, running_redis

    from owui.server import running_server

    simulator, token = gateway
    tmp = tmp_path_factory.mktemp("owui-w-instances")
    try:
        redis = running_redis(tmp / "redis")
        redis_server = redis.__enter__()
    except RedisUnavailable as exc:
        pytest.skip(f"no Redis server: {exc}")
    try:
        env = {"WEBSOCKET_MANAGER": "redis", "REDIS_URL": redis_server.url}
        with running_server(tmp / "a", env_extra={**owc_env(simulator.url), **env}) as first:
            before = subscribed(simulator, token)
            install_owc(first.base_url, simulator.url)
            wait_connected(simulator, token, before + 1)
            shared_db = f"sqlite:///{tmp / 'a' / 'owui-server' / 'data' / 'webui.db'}"
            unreachable = {**owc_env("ws://127.0.0.1:9/"), **env}  # port 9 (discard): refused at once
            with running_server(tmp / "b", database_url=shared_db, workers=2, env_extra=unreachable) as second:
                yield {"a": first, "b": second, "admin": first.admin(), "sim": simulator, "token": token}
    finally:
        redis.__exit__(None, None, None)


def test_a_stop_in_a_tab_of_another_instance_stops_an_agent_turn_and_a_persons_reply(instances, tmp_path) -> None:
    """The tab is served by instance B (two workers); the run's writer (an agent turn) and the person's request (a
    turn sent from a tab of A) live in A. B's stop route records the tab's tag in Redis before Open WebUI publishes
    the cancel; A reads it and aborts the run. The server logs say which process recorded and which decided."""
    from owui.browser import running_browser

    first, second, admin = instances["a"], instances["b"], instances["admin"]
    sim, token = instances["sim"], instances["token"]
    with running_browser(tmp_path) as browser:
        # An agent turn, written by A; Stop in a tab of B.
        chat_id, key = new_chat(admin)
        tab_b = open_page(browser, {"server": second, "admin": admin}, chat_id)
        run = call(token, lambda: sim.start_run(key, "s-instances").text("Draining the queue."))
        tab_b.wait_for_assistant_text("Draining the queue.", timeout_ms=MS)
        assert hook_of(tab_b) == "loader"
        stop_button(tab_b, "visible")
        tab_b.screenshot("s-instance-b-generating")
        tab_b.click_stop(timeout_ms=MS)
        wait_aborted(sim, token, run)
        message = wait_until(lambda: finished(admin, chat_id, ids.message_id(key, "s-instances")), "the message")
        assert message["content"] == "Draining the queue."
        stop_button(tab_b, "hidden")
        tab_b.screenshot("s-instance-b-stopped")
        # A person's turn sent from a tab of A; Stop in a tab of B.
        tab_a = open_page(browser, {"server": first, "admin": admin})
        chat_id, run = user_turn(tab_a, sim, token, admin, "SLOW, across instances")
        tab_b.open_chat(chat_id)
        tab_b.wait_for_assistant_text("Hello", timeout_ms=MS)
        stop_button(tab_b, "visible")
        tab_b.click_stop(timeout_ms=MS)
        wait_aborted(sim, token, run)
        reply = wait_until(lambda: finished_reply(admin, chat_id, "SLOW, across instances"), "the stopped reply")
        assert reply["content"] == "Hello"
        for page in (tab_a, tab_b):
            stop_button(page, "hidden")
        tab_a.screenshot("s-instance-a-after-b-stopped")
    recorded = pids(log_lines(second, "owui.stop_sign chat=") + log_lines(first, "owui.stop_sign chat="))
    decided = pids([line for line in log_lines(first, "owui.intent ") if "intent=stop" in line])
    b_pids = pids(log_lines(second, "owui.page_patched"))
    assert recorded and recorded <= b_pids, (recorded, b_pids)  # recorded by B's workers only
    assert decided and not decided & b_pids  # decided in A
