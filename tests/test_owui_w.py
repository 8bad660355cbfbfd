"""Tier W: owc inside the REAL Open WebUI 0.12.4 server, its Functions installed by ``owc owui install``, owc's
Gateway simulator as the Gateway, headless Chromium as the user (issue 12). Each scenario asserts on the database
(through Open WebUI's own API) and on what the page shows; screenshots of each key moment go to
``$OWC_SCREENSHOTS`` (else the test's tmp dir).

The server runs owc as a Trio guest on its uvloop; owc reaches the simulator (a thread of this test process) over
loopback. Waits are on the page (Playwright), on Socket.IO events (``EventRecorder``) or on the simulator's state,
each bounded as a harness (the real server is another process: there is no clock to mock).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import trio

from owc import ids

from conftest import secret
from owui.simthread import call, simulator_thread

pytestmark = [pytest.mark.owuiserver, pytest.mark.timeout(1800)]

TOKEN = "owc-w-tier-" + uuid.uuid4().hex
MODEL = "openclaw.main"
WAIT_S = 60.0  # a harness bound per wait: the server, the browser and owc all run on a loaded 2-core box


#: The simulator judges Open WebUI's owc as a client on another host (as in a deployment, where Open WebUI and the
#: Gateway run in different containers): owc signs in as its device, which the Gateway's owner approves (issue 15).
REMOTE_ADDRESS = "192.0.2.10"


@pytest.fixture(scope="module")
def sim() -> Iterator[tuple[Any, Any]]:
    secret(TOKEN)
    with simulator_thread(TOKEN) as pair:
        simulator, token = pair

        def remote() -> None:
            simulator.remote_address = REMOTE_ADDRESS

        call(token, remote)
        yield pair


def owc_env(sim_url: str) -> dict[str, str]:
    """What an operator sets in Open WebUI's environment for owc (README): the Gateway and its token."""
    return {"OWC_GATEWAY_URL": sim_url, "OWC_GATEWAY_TOKEN": TOKEN}


def install_owc(base_url: str, sim_url: str) -> str:
    """``owc owui install`` as a person following the README runs it; returns what it printed."""
    from owui.server import ADMIN_EMAIL, ADMIN_PASSWORD

    done = subprocess.run(
        [sys.executable, "-m", "owc", "owui", "install", "--url", base_url, "--admin-email", ADMIN_EMAIL],
        env={**os.environ, "OWC_OWUI_ADMIN_PASSWORD": ADMIN_PASSWORD},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert ADMIN_PASSWORD not in done.stdout + done.stderr
    return done.stdout


def wait_connected(sim: Any, token: Any, count: int = 1) -> None:
    """Until ``count`` owc runtimes are connected to the simulator (owc started inside the server), approving as
    the Gateway's owner each device that asks to pair (a server on a new DATA_DIR is a new device): the
    simulator's own wait, an event on its side, not a poll."""

    def connected() -> bool:
        return sum(1 for c in sim.conns.values() if c.subscribed and not c.closing) >= count

    async def approve_until_connected() -> None:
        while True:
            await sim.wait_for(lambda: connected() or bool(sim.devices.pending()))
            if connected():
                return
            for request in sim.devices.pending():
                sim.devices.approve(request.request_id)

    trio.from_thread.run(approve_until_connected, trio_token=token)


def subscribed(sim: Any, token: Any) -> int:
    return call(token, lambda: sum(1 for c in sim.conns.values() if c.subscribed and not c.closing))


def wait_until(check: Callable[[], Any], what: str) -> Any:
    """Poll Open WebUI's API (another process) until ``check`` gives a truthy value."""
    deadline = time.monotonic() + WAIT_S  # timer-ok: harness bound on another process's state
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)  # timer-ok: harness polls another process's state


def assistant_messages(admin: Any, chat_id: str) -> dict[str, dict[str, Any]]:
    messages = admin.get_chat(chat_id)["chat"]["history"]["messages"]
    return {mid: m for mid, m in messages.items() if m.get("role") == "assistant"}


def finished(admin: Any, chat_id: str, message_id: str) -> dict[str, Any] | None:
    message = assistant_messages(admin, chat_id).get(message_id)
    return message if message is not None and message.get("done") is True else None


@pytest.fixture(scope="module")
def deployment(sim, server_venv, browser_install, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """One Open WebUI with owc installed, shared by the scenarios that do not restart it."""
    from owui.server import running_server

    simulator, token = sim
    tmp = tmp_path_factory.mktemp("owui-w")
    with running_server(tmp, env_extra=owc_env(simulator.url)) as server:
        printed = install_owc(server.base_url, simulator.url)
        admin = server.admin()
        pairing = _pairing_shown(server, admin, simulator, token, tmp)
        wait_connected(simulator, token)  # approves owc's device, as the Gateway's owner would
        assert MODEL in {m["id"] for m in admin.models()}
        yield {
            "server": server, "admin": admin, "sim": simulator, "token": token, "installed": printed, "tmp": tmp,
            "pairing": pairing,
        }  # fmt: skip
        # After every scenario on this server: no reply is left unfinished in the database.
        wait_until(lambda: not unfinished_replies(admin), "every reply finished")


@contextmanager
def simulated_gateway(prepare: Callable[[Any], None] | None = None) -> Iterator[tuple[Any, Any]]:
    """A module's simulator as the Gateway on its own thread, seen from a remote address (owc then pairs as a
    device, as on another host), ``prepare(simulator)`` run in the simulator's thread first (a responder, a spy):
    what each scenario module's ``gateway`` fixture is."""
    from conftest import secret
    from owui.simthread import call, simulator_thread

    secret(TOKEN)
    with simulator_thread(TOKEN) as pair:
        simulator, token = pair

        def setup() -> None:
            simulator.remote_address = REMOTE_ADDRESS
            if prepare is not None:
                prepare(simulator)

        call(token, setup)
        yield pair


@contextmanager
def one_server(gateway: tuple[Any, Any], tmp: Any, *, install_twice: bool = False) -> Iterator[dict[str, Any]]:
    """One Open WebUI (one process, no Redis) with owc installed as the README says and connected; after the
    module's scenarios, no reply left unfinished. ``install_twice``: install again once owc lists the Gateway's
    models, which the first install's Filter and Action attach to only from then (the README says so)."""
    from owui.server import running_server

    simulator, token = gateway
    with running_server(tmp, env_extra=owc_env(simulator.url)) as server:
        before = subscribed(simulator, token)
        installed = install_owc(server.base_url, simulator.url)
        admin = server.admin()
        wait_connected(simulator, token, before + 1)
        if install_twice:
            installed += install_owc(server.base_url, simulator.url)
        yield {"server": server, "admin": admin, "sim": simulator, "token": token, "tmp": tmp, "installed": installed}
        wait_until(lambda: not unfinished_replies(admin), "every reply finished")


def _pairing_shown(server: Any, admin: Any, sim: Any, token: Any, tmp: Any) -> dict[str, Any]:
    """Before owc's device is approved: what a person typing to the agent sees. The reply is the one actionable
    line, with the command to run on the Gateway host and the request id."""
    from owui.browser import running_browser

    trio.from_thread.run(sim.wait_for, lambda: bool(sim.devices.pending()), trio_token=token)
    (request,) = call(token, sim.devices.pending)
    line = f"openclaw devices approve {request.request_id}"
    with running_browser(tmp / "pairing-browser") as browser:
        page = open_page(browser, {"server": server, "admin": admin})
        chat_id = page.new_chat_with(MODEL, "Are you there?", timeout_ms=WAIT_S * 1000)
        page.wait_for_assistant_text(line, timeout_ms=WAIT_S * 1000)
        page.screenshot("w-pairing-needed")
    return {"request": request, "chat_id": chat_id, "line": line}


def unfinished_replies(admin: Any) -> list[tuple[str, str]]:
    """(chat, message) of every assistant message still ``done: false`` in the database (not the live overlay)."""
    return [
        (chat["id"], mid)
        for chat in admin.get("/api/v1/chats/all/db")
        for mid, m in ((chat.get("chat") or {}).get("history") or {}).get("messages", {}).items()
        if m.get("role") == "assistant" and m.get("done") is not True
    ]


@pytest.fixture
def browser(deployment, tmp_path) -> Iterator[Any]:
    from owui.browser import running_browser

    with running_browser(tmp_path) as b:
        yield b


def new_chat(admin: Any) -> tuple[str, str]:
    from owui.server import user_turn_chat

    chat_id = admin.new_chat(user_turn_chat(MODEL, "Watch the deploy for me."))["id"]
    return chat_id, ids.session_key("main", admin.user_id, chat_id)


def open_page(browser: Any, deployment: dict[str, Any], chat_id: str | None = None, *, form: bool = False) -> Any:
    """A tab signed in as the admin: through the real sign-in form when ``form`` (scenario 1 does; Open WebUI
    allows 15 form sign-ins per 3 minutes per email), else with the admin's session token."""
    from owui.server import ADMIN_EMAIL, ADMIN_PASSWORD

    page = browser.new_page(deployment["server"].base_url)
    admin = deployment.get("admin")
    if form or admin is None or not admin.token:
        page.login(ADMIN_EMAIL, ADMIN_PASSWORD)
    else:
        page.sign_in_with_token(admin.token)
    if chat_id is not None:
        page.open_chat(chat_id)
    return page


def test_install_reports_what_it_did(deployment) -> None:
    printed = deployment["installed"]
    assert "created openclaw (OpenClaw)" in printed and "activated openclaw_startup" in printed
    assert f"models: {MODEL}" in printed
    # Again, on a live server: updated in place, still active, owc not started twice.
    again = install_owc(deployment["server"].base_url, deployment["sim"].url)
    assert "updated openclaw (OpenClaw) in place; its valves are kept" in again and "activated" not in again
    assert "owui.host_started" in deployment["server"].log_tail(200_000)


def test_owc_in_open_webui_is_a_paired_device(deployment) -> None:
    """Issue 15: Open WebUI's owc signs in as its own device, kept in Open WebUI's DATA_DIR (mode 0600); while the
    Gateway's owner has not approved it, a message gets the one actionable line as its reply (saved, finished);
    once approved, owc connects with exactly read and write, and every other scenario here runs so."""
    import stat

    from owc import device

    sim, token, pairing = deployment["sim"], deployment["token"], deployment["pairing"]
    folder = deployment["tmp"] / "owui-server" / "data" / "owc"  # the server DATA_DIR (tests/owui/server.py)
    stored = device.load(folder)
    assert stored is not None and stored.device_id == pairing["request"].device_id
    assert stored.device_token is not None
    assert stat.S_IMODE((folder / "device.json").stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    paired = {p.device_id: p for p in call(token, sim.devices.paired)}
    assert set(paired[stored.device_id].access_scopes()) == {"operator.read", "operator.write", "operator.admin"}
    assert stored.device_id in {dev for dev, _ in call(token, lambda: list(sim.device_conns.values()))}
    reply = next(iter(assistant_messages(deployment["admin"], pairing["chat_id"]).values()))
    assert pairing["line"] in reply["content"] and reply.get("done") is True
    log = deployment["server"].log_tail(400_000)
    assert "gateway.pairing_required" in log and stored.device_token not in log


def test_an_agent_turn_streams_live_into_the_open_tab_with_tool_cards(deployment, browser) -> None:
    """Scenario 1: the chat is open; a cron-style agent turn (text, two tool calls, text) streams into it live,
    tool cards included, and ends as one finished message."""
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    chat_id, key = new_chat(admin)
    page = open_page(browser, deployment, chat_id, form=True)  # the real sign-in form, once per server
    run = call(token, lambda: sim.start_run(key, "w-live").text("Checking the deploy."))
    page.wait_for_assistant_text("Checking the deploy.", timeout_ms=WAIT_S * 1000)
    page.screenshot("w1-live-text")
    message_id = ids.message_id(key, "w-live")
    assert not finished(admin, chat_id, message_id)  # still running: the tab saw it live, not from a final write
    call(
        token, lambda: run.tool("exec", {"cmd": "kubectl get pods"}, "3 running").tool("exec", {"cmd": "uptime"}, "up")
    )
    call(token, lambda: run.text(" All green.").end())
    page.wait_for_assistant_text("All green.", timeout_ms=WAIT_S * 1000)
    page.screenshot("w1-finished")
    message = wait_until(lambda: finished(admin, chat_id, message_id), "the finished message")
    assert message["content"].startswith("Checking the deploy.") and "All green." in message["content"]
    assert sum(1 for item in message["output"] if item.get("type") == "function_call") == 2
    assert list(assistant_messages(admin, chat_id)) == [message_id]  # one message
    assert page.page.get_by_text("exec").count() >= 1  # the tool cards are on the page


def test_a_reload_mid_run_shows_the_live_copy_then_the_finished_message(deployment, browser) -> None:
    """Scenario 2: reloading the tab mid-run shows the message so far (the response-stream overlay,
    ``done: false``), then the finished message; never twice."""
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    chat_id, key = new_chat(admin)
    page = open_page(browser, deployment, chat_id)
    run = call(token, lambda: sim.start_run(key, "w-reload").text("First half,").tool("exec", {}, "ok"))
    page.wait_for_assistant_text("First half,", timeout_ms=WAIT_S * 1000)
    message_id = ids.message_id(key, "w-reload")
    overlaid = wait_until(lambda: assistant_messages(admin, chat_id).get(message_id), "the live copy")
    assert overlaid["done"] is False and "First half," in overlaid["content"]
    page.page.reload()
    page.wait_for_assistant_text("First half,", timeout_ms=WAIT_S * 1000)
    page.screenshot("w2-reloaded-mid-run")
    call(token, lambda: run.text(" second half.").end())
    page.wait_for_assistant_text("second half.", timeout_ms=WAIT_S * 1000)
    wait_until(lambda: finished(admin, chat_id, message_id), "the finished message")
    assert len(page.assistant_texts()) == 1 and list(assistant_messages(admin, chat_id)) == [message_id]


def test_a_chat_opened_mid_run_or_after_it_shows_the_message(deployment, browser) -> None:
    """Scenarios 3 and 4: the tab is on another chat when the run starts and opens this one mid-run; with no tab
    at all, the finished message is there when the chat is opened later."""
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    chat_id, key = new_chat(admin)
    other_id, _ = new_chat(admin)
    page = open_page(browser, deployment, other_id)
    run = call(token, lambda: sim.start_run(key, "w-elsewhere").text("Started while you were elsewhere."))
    message_id = ids.message_id(key, "w-elsewhere")
    wait_until(lambda: assistant_messages(admin, chat_id).get(message_id), "the claimed message")
    page.open_chat(chat_id)
    page.wait_for_assistant_text("Started while you were elsewhere.", timeout_ms=WAIT_S * 1000)
    call(token, lambda: run.text(" Finished here.").end())
    page.wait_for_assistant_text("Finished here.", timeout_ms=WAIT_S * 1000)
    page.screenshot("w3-opened-mid-run")
    # No tab: a whole run, then the chat is opened.
    quiet_id, quiet_key = new_chat(admin)
    call(token, lambda: sim.start_run(quiet_key, "w-no-tab").text("Nobody was watching.").end())
    quiet_message = ids.message_id(quiet_key, "w-no-tab")
    wait_until(lambda: finished(admin, quiet_id, quiet_message), "the finished message with no tab open")
    page.open_chat(quiet_id)
    page.wait_for_assistant_text("Nobody was watching.", timeout_ms=WAIT_S * 1000)
    page.screenshot("w4-no-tab-then-opened")


def test_two_tabs_on_the_chat_converge_on_one_message(deployment, browser) -> None:
    """Scenario 5: two tabs have the chat open; both show the same one message, finished."""
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    chat_id, key = new_chat(admin)
    first, second = open_page(browser, deployment, chat_id), open_page(browser, deployment, chat_id)
    call(
        token, lambda: sim.start_run(key, "w-two-tabs").text("Seen twice,").tool("exec", {}, "ok").text(" once.").end()
    )
    for page in (first, second):
        page.wait_for_assistant_text("once.", timeout_ms=WAIT_S * 1000)
        assert len(page.assistant_texts()) == 1
    second.screenshot("w5-second-tab")
    message_id = ids.message_id(key, "w-two-tabs")
    wait_until(lambda: finished(admin, chat_id, message_id), "the finished message")
    assert list(assistant_messages(admin, chat_id)) == [message_id]


def test_the_stop_button_aborts_the_agent_turn_and_keeps_what_it_had(deployment, browser) -> None:
    """Scenario 6 (Stop): the tab shows the generating state for the agent turn (owc's writer is a task of the
    chat); Stop aborts the run at the Gateway and the message is finalized with what it had."""
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    chat_id, key = new_chat(admin)
    page = open_page(browser, deployment, chat_id)
    call(token, lambda: sim.start_run(key, "w-stop").text("Working through the list"))
    page.wait_for_assistant_text("Working through the list", timeout_ms=WAIT_S * 1000)
    assert wait_until(lambda: admin.chat_tasks(chat_id), "owc's writer registered as a task of the chat")
    page.screenshot("w6-generating")
    page.click_stop(timeout_ms=WAIT_S * 1000)
    message_id = ids.message_id(key, "w-stop")
    message = wait_until(lambda: finished(admin, chat_id, message_id), "the stopped message")
    assert message["content"].startswith("Working through the list")
    assert call(token, lambda: sim.requests["chat.abort"]) >= 1
    assert call(token, lambda: sim.sessions[key].status) == "killed"
    page.screenshot("w6-stopped")


def test_send_now_during_an_agent_turn_keeps_it_streaming_to_its_end(deployment, browser) -> None:
    """Scenario 6 (Send now): a message typed during an agent turn is queued by the page; its "Send now" cancels
    the chat's tasks exactly as Stop does, but the page hook tells owc which control it was: the agent turn is
    not aborted and its one message streams on to the run's own end."""
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    chat_id, key = new_chat(admin)
    page = open_page(browser, deployment, chat_id)
    aborts = call(token, lambda: sim.requests["chat.abort"])
    run = call(token, lambda: sim.start_run(key, "w-send-now").text("Collecting the numbers"))
    page.wait_for_assistant_text("Collecting the numbers", timeout_ms=WAIT_S * 1000)
    page.wait_for_intent_hook(timeout_ms=WAIT_S * 1000)
    page.queue_message("And the totals, please.", timeout_ms=WAIT_S * 1000)
    page.screenshot("w6-queued")
    [before] = wait_until(lambda: admin.chat_tasks(chat_id), "owc's writer registered as a task of the chat")
    page.click_send_now(timeout_ms=WAIT_S * 1000)
    # The cancel reached owc, which asked the page and kept writing under a new task.
    wait_until(lambda: [t for t in admin.chat_tasks(chat_id) if t != before], "the writer registered again")
    call(token, lambda: run.tool("exec", {"cmd": "sum"}, "42").text(" Total: 42.").end())
    message_id = ids.message_id(key, "w-send-now")
    message = wait_until(lambda: finished(admin, chat_id, message_id), "the finished message")
    assert message["content"].startswith("Collecting the numbers") and "Total: 42." in message["content"]
    assert call(token, lambda: sim.requests["chat.abort"]) == aborts  # never aborted
    assert call(token, lambda: sim.sessions[key].status) != "killed"
    runs_messages = [m for m, v in assistant_messages(admin, chat_id).items() if "Collecting" in v.get("content", "")]
    assert runs_messages == [message_id]  # one message for the run (the queued prompt got its own reply)
    page.wait_for_assistant_text("Total: 42.", timeout_ms=WAIT_S * 1000)
    page.screenshot("w6-send-now-finished")


def test_a_stop_nobody_explains_keeps_the_agent_turn_and_a_reloaded_tab_can_still_stop_it(deployment, browser) -> None:
    """Scenario 6 (no answer, then a reload): a stop through the API with no tab open is explained by nobody, so
    the agent turn goes on (under a new task); a tab that then loads the chat gets the page hook at the run's next
    event, and its Stop button stops the run."""
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    chat_id, key = new_chat(admin)
    run = call(token, lambda: sim.start_run(key, "w-no-answer").text("Step one."))
    message_id = ids.message_id(key, "w-no-answer")
    [before] = wait_until(lambda: admin.chat_tasks(chat_id), "owc's writer registered as a task of the chat")
    aborts = call(token, lambda: sim.requests["chat.abort"])
    admin.stop_chat(chat_id)
    wait_until(lambda: [t for t in admin.chat_tasks(chat_id) if t != before], "the writer registered again")
    assert call(token, lambda: sim.requests["chat.abort"]) == aborts
    page = open_page(browser, deployment, chat_id)
    page.wait_for_assistant_text("Step one.", timeout_ms=WAIT_S * 1000)
    call(token, lambda: run.text(" Step two."))
    page.wait_for_assistant_text("Step two.", timeout_ms=WAIT_S * 1000)
    page.wait_for_intent_hook(timeout_ms=WAIT_S * 1000)  # sent at the flush after the tab joined the room
    page.click_stop(timeout_ms=WAIT_S * 1000)
    message = wait_until(lambda: finished(admin, chat_id, message_id), "the stopped message")
    assert "Step two." in message["content"]
    assert call(token, lambda: sim.requests["chat.abort"]) > aborts
    assert call(token, lambda: sim.sessions[key].status) == "killed"
    page.screenshot("w6-stopped-after-reload")


def _reply_of(admin: Any, chat_id: str, after_text: str) -> tuple[str, dict[str, Any]] | None:
    """The assistant reply (id, message) to the user message whose content is ``after_text``."""
    messages = admin.get_chat(chat_id)["chat"]["history"]["messages"]
    for mid, m in messages.items():
        parent = messages.get(m.get("parentId") or "")
        if m.get("role") == "assistant" and parent is not None and parent.get("content") == after_text:
            return mid, m
    return None


def owc_finished(message: dict[str, Any] | None) -> dict[str, Any] | None:
    """``message`` once owc has finished it: ``done`` and no longer owed its finish (``meta.openclaw_open``).

    A user turn's reply is also saved ``done: true`` by Open WebUI itself, with the output its request had, when the
    request ends (its end-of-stream save) or is cancelled ("Send now", Stop: ``save_cancelled_state``); owc's writer
    then takes it back and finishes it from the transcript. A read between the two sees the request's partial copy
    marked done; only owc's finishing write removes the open mark (NOTES: "a message is finished only when owc wrote
    it so")."""
    if message is None or message.get("done") is not True:
        return None
    return None if (message.get("meta") or {}).get("openclaw_open") else message


def _finished_reply(admin: Any, chat_id: str, after_text: str) -> dict[str, Any] | None:
    found = _reply_of(admin, chat_id, after_text)
    return owc_finished(found[1]) if found is not None else None


def test_a_typed_message_gets_the_agents_reply_live_with_tool_cards(deployment, browser) -> None:
    """Scenario 9: a person types to their agent; the reply streams through the request, tool card included,
    into Open WebUI's own reply message, finished once; Open WebUI's background tasks never reach the agent."""
    from owc.sim.script import CANNED_ANSWER

    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    page = open_page(browser, deployment)
    sends = call(token, lambda: sim.requests["chat.send"])
    chat_id = page.new_chat_with(MODEL, "USE_TOOL please", timeout_ms=WAIT_S * 1000)
    page.wait_for_assistant_text(CANNED_ANSWER, timeout_ms=WAIT_S * 1000)
    page.screenshot("w9-user-turn")
    reply = wait_until(lambda: _finished_reply(admin, chat_id, "USE_TOOL please"), "the finished reply")
    assert reply["content"].endswith(CANNED_ANSWER)
    assert [i["type"] for i in reply["output"]][:2] == ["function_call", "function_call_output"]
    assert page.page.get_by_text("read").count() >= 1  # the tool card
    assert len([m for m in assistant_messages(admin, chat_id).values()]) == 1
    assert call(token, lambda: sim.requests["chat.send"]) == sends + 1  # the title task did not reach the agent
    key = ids.session_key("main", admin.user_id, chat_id)
    assert call(token, lambda: len([r for r in sim.runs.values() if r.key == key])) == 1


def test_stop_mid_reply_aborts_the_agent_and_keeps_the_partial_reply(deployment, browser) -> None:
    """Scenario 10: Stop during a user turn: the run is aborted at the Gateway; the reply keeps what it had."""
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    page = open_page(browser, deployment)
    aborts = call(token, lambda: sim.requests["chat.abort"])
    chat_id = page.new_chat_with(MODEL, "SLOW answer", timeout_ms=WAIT_S * 1000)
    page.wait_for_assistant_text("Hello", timeout_ms=WAIT_S * 1000)
    page.wait_for_intent_hook(timeout_ms=WAIT_S * 1000)
    page.click_stop(timeout_ms=WAIT_S * 1000)
    reply = wait_until(lambda: _finished_reply(admin, chat_id, "SLOW answer"), "the stopped reply")
    assert reply["content"].startswith("Hello")
    wait_until(lambda: call(token, lambda: sim.requests["chat.abort"]) > aborts, "the abort at the Gateway")
    page.screenshot("w10-user-turn-stopped")


def test_send_now_during_a_reply_finishes_it_and_the_queued_message_gets_its_own(deployment, browser) -> None:
    """Scenario 11: a message queued during a reply and sent with "Send now": the first reply is not aborted and
    completes in its own message; the queued one is sent after the first run's end and gets its own reply."""
    from owc.sim.script import CANNED_ANSWER

    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    page = open_page(browser, deployment)
    aborts = call(token, lambda: sim.requests["chat.abort"])
    chat_id = page.new_chat_with(MODEL, "SLOW first", timeout_ms=WAIT_S * 1000)
    page.wait_for_assistant_text("Hello", timeout_ms=WAIT_S * 1000)
    page.wait_for_intent_hook(timeout_ms=WAIT_S * 1000)
    key = ids.session_key("main", admin.user_id, chat_id)
    first = call(token, lambda: sim.active_run(key))
    assert first is not None
    page.queue_message("then this", timeout_ms=WAIT_S * 1000)
    page.click_send_now(timeout_ms=WAIT_S * 1000)
    page.screenshot("w11-send-now")
    # The queued turn waits for the first run's own end (it never steers into it).
    call(token, lambda: first.text(" and the rest.").end())
    done_first = wait_until(lambda: _finished_reply(admin, chat_id, "SLOW first"), "the first reply")
    assert done_first["content"] == "Hello and the rest."
    second = wait_until(lambda: _finished_reply(admin, chat_id, "then this"), "the queued message's reply")
    assert second["content"] == CANNED_ANSWER
    assert call(token, lambda: sim.requests["chat.abort"]) == aborts
    page.wait_for_assistant_text(CANNED_ANSWER, timeout_ms=WAIT_S * 1000)
    page.screenshot("w11-both-replies")


def test_a_tab_closed_mid_reply_finds_it_complete_when_reopened(deployment, browser) -> None:
    """Scenario 12: the tab closes mid-reply; the reply completes anyway and is whole when the chat is opened."""
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    page = open_page(browser, deployment)
    chat_id = page.new_chat_with(MODEL, "SLOW then close", timeout_ms=WAIT_S * 1000)
    page.wait_for_assistant_text("Hello", timeout_ms=WAIT_S * 1000)
    key = ids.session_key("main", admin.user_id, chat_id)
    run = call(token, lambda: sim.active_run(key))
    again = page.another_tab()  # opened first: closing a context's last page would end the browser session
    page.page.close()
    call(token, lambda: run.text(" after the tab closed.").end())
    reply = wait_until(lambda: _finished_reply(admin, chat_id, "SLOW then close"), "the finished reply")
    assert reply["content"] == "Hello after the tab closed."
    again.open_chat(chat_id)
    again.wait_for_assistant_text("after the tab closed.", timeout_ms=WAIT_S * 1000)
    again.screenshot("w12-reopened")


def test_a_model_picked_in_the_picker_is_pinned_on_the_chats_session(deployment, browser) -> None:
    """Scenario 13: the picker lists the Gateway's models (``models.list``) after OpenClaw's own; a chat started on
    one pins the chat's session to it (``sessions.patch``) before the message is sent."""
    from owc.owui.models import entry_id
    from owc.sim.script import CANNED_ANSWER

    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    listed = {m["id"]: m["name"] for m in admin.models()}
    model = f"openclaw.{entry_id('main', 'ollama/qwen3:8b')}"
    assert model in listed and "OpenClaw" in listed[model], listed
    page = open_page(browser, deployment)
    chat_id = page.new_chat_with(model, "which model?", timeout_ms=WAIT_S * 1000)
    page.wait_for_assistant_text(CANNED_ANSWER, timeout_ms=WAIT_S * 1000)
    page.screenshot("w13-picked-model")
    key = ids.session_key("main", admin.user_id, chat_id)
    assert call(token, lambda: sim.sessions[key].model_override) == ("ollama", "qwen3:8b")
    wait_until(lambda: _finished_reply(admin, chat_id, "which model?"), "the finished reply")


def test_a_message_sent_while_an_agent_turn_streams_waits_and_chains_after_it(deployment, browser) -> None:
    """Scenario 14: an agent turn streams in the open chat; the person sends a message anyway (the queue is off,
    or it arrives from another tab): it is not steered into the agent turn; it is sent when that run ends, and its
    reply chains after the agent turn's message."""
    from owc.sim.script import CANNED_ANSWER

    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    chat_id, key = new_chat(admin)
    page = open_page(browser, deployment, chat_id)
    run = call(token, lambda: sim.start_run(key, "w-busy").text("Agent turn in progress"))
    page.wait_for_assistant_text("Agent turn in progress", timeout_ms=WAIT_S * 1000)
    sends = call(token, lambda: sim.requests["chat.send"])
    page.queue_message("a question meanwhile", timeout_ms=WAIT_S * 1000)
    page.click_send_now(timeout_ms=WAIT_S * 1000)  # sent at once, while the agent turn is still running
    agent_message = ids.message_id(key, "w-busy")
    wait_until(lambda: _reply_of(admin, chat_id, "a question meanwhile"), "Open WebUI's reply stub")
    assert call(token, lambda: sim.requests["chat.send"]) == sends  # waiting for the agent turn's end
    call(token, lambda: run.text(" and finished.").end())
    reply = wait_until(lambda: _finished_reply(admin, chat_id, "a question meanwhile"), "the reply")
    assert reply["content"] == CANNED_ANSWER
    agent = wait_until(lambda: finished(admin, chat_id, agent_message), "the agent turn's message")
    assert agent["content"] == "Agent turn in progress and finished."
    messages = admin.get_chat(chat_id)["chat"]["history"]["messages"]
    question = messages[reply["parentId"]]
    assert question["parentId"] == agent_message  # the user's message and its reply chain after the agent turn
    page.wait_for_assistant_text(CANNED_ANSWER, timeout_ms=WAIT_S * 1000)
    page.screenshot("w14-chained")


def test_an_image_sent_with_a_message_reaches_the_agent_as_an_attachment(deployment, browser, tmp_path) -> None:
    """An image attached in the composer goes to the agent with the message (a ``chat.send`` attachment, base64,
    its type sniffed), as the Gateway accepts it."""
    import base64

    from owc.sim.script import CANNED_ANSWER

    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    )
    image = tmp_path / "dot.png"
    image.write_bytes(png)
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    page = open_page(browser, deployment)
    page.goto(f"/?model={MODEL}")
    page.page.locator("input[type=file]").first.set_input_files(str(image))
    page.page.locator("img[alt]").first.wait_for(state="visible", timeout=WAIT_S * 1000)  # the upload's preview
    chat_id = page.new_chat_with(MODEL, "what is in this picture?", timeout_ms=WAIT_S * 1000, navigate=False)
    page.wait_for_assistant_text(CANNED_ANSWER, timeout_ms=WAIT_S * 1000)
    key = ids.session_key("main", admin.user_id, chat_id)
    [run_id] = call(token, lambda: [r.run_id for r in sim.runs.values() if r.key == key])
    [sent] = call(token, lambda: sim.rpc.attachments.get(run_id, []))
    assert sent["type"] == "image" and sent["mimeType"] == "image/png" and base64.b64decode(sent["content"]) == png
    page.screenshot("w-image-sent")


def test_sigterm_mid_run_closes_owc_cleanly_and_the_next_process_finishes_the_message(
    sim, server_venv, browser_install, tmp_path
) -> None:
    """Scenario 7: Open WebUI gets SIGTERM mid-run: owc closes with it (no traceback, quick exit); the run ends
    while Open WebUI is down; the next process finishes the message from the transcript (the reconcile)."""
    from owui.server import running_server

    simulator, token = sim
    before = subscribed(simulator, token)
    with running_server(tmp_path, env_extra=owc_env(simulator.url)) as server:
        install_owc(server.base_url, simulator.url)
        admin = server.admin()
        wait_connected(simulator, token, before + 1)
        chat_id, key = new_chat(admin)
        run = call(token, lambda: simulator.start_run(key, "w-sigterm").text("Half way"))
        message_id = ids.message_id(key, "w-sigterm")
        wait_until(lambda: assistant_messages(admin, chat_id).get(message_id), "the claimed message")
        stop = server.signal_and_wait()
        log = server.log_tail(400_000)
        assert stop.seconds < 5 and not stop.killed, stop
        assert "owui.shutdown" in log and "Traceback" not in log.split("owui.shutdown", 1)[1]
        call(token, lambda: run.text(" and done while Open WebUI was down.").end())
        server.restart()
        admin = server.admin()
        message = wait_until(lambda: finished(admin, chat_id, message_id), "the message finished by the next process")
        assert message["content"] == "Half way and done while Open WebUI was down."


def test_two_server_processes_on_one_database_make_one_message_per_run(sim, server_venv, tmp_path) -> None:
    """Scenario 8: two Open WebUI processes on one database (what several uvicorn workers are: one owc runtime
    each), both connected to the Gateway: every run gets exactly one message, in run order."""
    from owui.server import running_server

    simulator, token = sim
    before = subscribed(simulator, token)
    with running_server(tmp_path / "a", env_extra=owc_env(simulator.url)) as first:
        install_owc(first.base_url, simulator.url)
        shared_db = f"sqlite:///{tmp_path / 'a' / 'owui-server' / 'data' / 'webui.db'}"
        with running_server(tmp_path / "b", database_url=shared_db, env_extra=owc_env(simulator.url)) as second:
            # The second process starts owc from the startup Event (the Functions are already in the database).
            wait_connected(simulator, token, before + 2)  # the second from its startup Event
            admin = first.admin()
            chat_id, key = new_chat(admin)
            runs = [f"w-two-procs-{n}" for n in range(3)]
            for n, run_id in enumerate(runs):
                call(token, lambda n=n, run_id=run_id: simulator.start_run(key, run_id).text(f"Reply {n}.").end())
                wait_until(lambda run_id=run_id: finished(admin, chat_id, ids.message_id(key, run_id)), run_id)
            messages = assistant_messages(admin, chat_id)
            assert sorted(messages) == sorted(ids.message_id(key, r) for r in runs)  # one each, no duplicate
            chain = [ids.message_id(key, r) for r in runs]
            assert [messages[m]["parentId"] for m in chain[1:]] == chain[:-1]  # in run order
            assert "owui.host_started" in second.log_tail(400_000)


def test_two_workers_on_redis_stream_an_agent_turn_and_a_stop_reaches_the_worker_that_writes(
    sim, server_venv, browser_install, redis_url, tmp_path
) -> None:
    """Open WebUI as deployed with several uvicorn workers: ``WEBSOCKET_MANAGER=redis`` (rooms, the session pool
    and the task registry shared through Redis), one owc runtime per worker. An agent turn streams into a tab
    whichever worker writes it; the tab's Stop reaches the worker holding the writer's task, which asks the tab
    (an event call across workers) and stops the run; one message."""
    from owui.browser import running_browser
    from owui.server import running_server

    simulator, token = sim
    before = subscribed(simulator, token)
    env = {**owc_env(simulator.url), "WEBSOCKET_MANAGER": "redis", "REDIS_URL": redis_url}
    with running_server(tmp_path, workers=2, env_extra=env) as server:
        install_owc(server.base_url, simulator.url)  # reaches one worker; the restart starts owc in both
        server.restart()
        wait_connected(simulator, token, before + 2)
        admin = server.admin()
        deployment = {"server": server}
        with running_browser(tmp_path) as browser:
            chat_id, key = new_chat(admin)
            page = open_page(browser, deployment, chat_id)
            run = call(token, lambda: simulator.start_run(key, "w-redis").text("Across workers"))
            page.wait_for_assistant_text("Across workers", timeout_ms=WAIT_S * 1000)
            call(token, lambda: run.tool("exec", {"cmd": "hostname"}, "worker").text(" and still live."))
            page.wait_for_assistant_text("and still live.", timeout_ms=WAIT_S * 1000)
            page.wait_for_intent_hook(timeout_ms=WAIT_S * 1000)
            page.screenshot("w-redis-live")
            aborts = call(token, lambda: simulator.requests["chat.abort"])
            page.click_stop(timeout_ms=WAIT_S * 1000)
            message_id = ids.message_id(key, "w-redis")
            message = wait_until(lambda: finished(admin, chat_id, message_id), "the stopped message")
            assert message["content"].startswith("Across workers") and "and still live." in message["content"]
            assert call(token, lambda: simulator.requests["chat.abort"]) > aborts
            assert list(assistant_messages(admin, chat_id)) == [message_id]
            page.screenshot("w-redis-stopped")


def test_open_webui_on_postgresql_shows_an_agent_turn_written_by_owc(sim, server_venv, tmp_path) -> None:
    """Open WebUI on PostgreSQL (its ``DATABASE_URL``): owc writes through the same database, under Postgres's
    row lock; the agent turn is in the chat, finished, with its tool card."""
    from conftest import _postgres_database
    from owui.server import running_server

    simulator, token = sim
    database = _postgres_database("owc_w_tier").replace("postgresql+psycopg://", "postgresql://")
    with running_server(tmp_path, database_url=database, env_extra=owc_env(simulator.url)) as server:
        before = subscribed(simulator, token)
        install_owc(server.base_url, simulator.url)
        admin = server.admin()
        wait_connected(simulator, token, before + 1)
        chat_id, key = new_chat(admin)
        call(token, lambda: simulator.start_run(key, "w-pg").text("On Postgres.").tool("exec", {}, "ok").end())
        message_id = ids.message_id(key, "w-pg")
        message = wait_until(lambda: finished(admin, chat_id, message_id), "the finished message on PostgreSQL")
        assert message["content"] == "On Postgres." and message["output"][1]["type"] == "function_call"
        assert list(assistant_messages(admin, chat_id)) == [message_id]
        import psycopg

        with psycopg.connect(database) as conn:  # it is PostgreSQL that holds it, as Open WebUI and owc wrote it
            row = conn.execute("SELECT chat FROM chat WHERE id = %s", (chat_id,)).fetchone()
        assert row is not None and row[0]["history"]["messages"][message_id]["done"] is True


def _stored_chat(db: Any, chat_id: str) -> dict[str, Any]:
    """The chat JSON as Open WebUI's database holds it (no live overlay, no API): read from the SQLite file."""
    import json
    import sqlite3

    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        (raw,) = conn.execute("SELECT chat FROM chat WHERE id = ?", (chat_id,)).fetchone()
    return json.loads(raw)


def test_a_finished_agent_turn_sits_in_its_place_and_a_writer_registered_again_names_its_live_task(
    deployment, browser
) -> None:
    """Issue 24, item 11. A tab loaded the chat before owc claimed the message: the finished message's last
    ``chat:messages`` carries its parent's link and the chat's ``currentId`` (the tab shows the reply under the
    user's message, without a reload, and the Stop button goes). A stop no control of any tab made (the API's
    ``/stop``, as a shared chat's other user's) registers the writer again: the message's ``meta.task_id`` in the
    database names the new, live task (before, the cancelled one, which Open WebUI's ``/stop`` then cannot find)."""
    from owui.browser import SEL_STOP
    from owui.server import EventRecorder

    admin, sim, token, server = deployment["admin"], deployment["sim"], deployment["token"], deployment["server"]
    chat_id, key = new_chat(admin)
    user_id = admin.get_chat(chat_id)["chat"]["history"]["currentId"]
    page = open_page(browser, deployment, chat_id)  # loaded before the claim
    with EventRecorder(server.base_url, admin.token).connect() as events:
        events.join_chat(chat_id)
        run = call(token, lambda: sim.start_run(key, "w-place").text("In its place,"))
        message_id = ids.message_id(key, "w-place")
        page.wait_for_assistant_text("In its place,", timeout_ms=WAIT_S * 1000)
        page.wait_for_intent_hook(timeout_ms=WAIT_S * 1000)
        [before] = wait_until(lambda: admin.chat_tasks(chat_id), "owc's writer registered as a task of the chat")
        stored = _stored_chat(server.workdir / "data" / "webui.db", chat_id)["history"]["messages"][message_id]
        assert stored["meta"]["task_id"] == before
        aborts = call(token, lambda: sim.requests["chat.abort"])
        admin.stop_chat(chat_id)  # no tab pressed Stop: the writer goes on under a new task
        [after] = wait_until(
            lambda: [t for t in admin.chat_tasks(chat_id) if t != before], "the writer registered again"
        )
        meta = wait_until(
            lambda: (
                (
                    m := _stored_chat(server.workdir / "data" / "webui.db", chat_id)["history"]["messages"][message_id][
                        "meta"
                    ]
                ).get("task_id")
                == after
                and m
            ),
            "meta.task_id naming the live task",
        )
        assert after in admin.chat_tasks(chat_id)  # live: Open WebUI's /stop finds it
        assert meta["openclaw_run"] == "w-place" and meta["openclaw_open"] is True  # merged, owc's keys kept
        assert call(token, lambda: sim.requests["chat.abort"]) == aborts
        page.screenshot("w-item11-registered-again")
        call(token, lambda: run.text(" under your message.").end())
        page.wait_for_assistant_text("under your message.", timeout_ms=WAIT_S * 1000)
        final = events.wait_for(
            lambda e: (
                e.get("chat_id") == chat_id
                and (e.get("data") or {}).get("type") == "chat:messages"
                and ((e["data"].get("data") or {}).get("messages") or {}).get(message_id, {}).get("done") is True
            ),
            timeout_s=WAIT_S,
        )["data"]["data"]
    assert final["currentId"] == message_id
    assert message_id in final["messages"][user_id]["childrenIds"]
    page.page.locator(SEL_STOP).wait_for(state="hidden", timeout=WAIT_S * 1000)
    order = page.page.locator('[id^="message-"]').evaluate_all("els => els.map(e => e.id)")
    assert [i for i in order if i in (f"message-{user_id}", f"message-{message_id}")] == [
        f"message-{user_id}",
        f"message-{message_id}",
    ]
    page.screenshot("w-item11-in-its-place")
    chat = _stored_chat(server.workdir / "data" / "webui.db", chat_id)
    message = chat["history"]["messages"][message_id]
    assert message["done"] is True and message["content"] == "In its place, under your message."
    assert message["parentId"] == user_id and chat["history"]["currentId"] == message_id
    assert len(page.assistant_texts()) == 1


def test_open_webui_killed_after_its_cancel_save_the_next_process_shows_the_whole_reply(
    sim, server_venv, browser_install, tmp_path
) -> None:
    """Issue 24, item 1. A person's reply streams "Hello"; a stop cancels the request, Open WebUI's middleware
    saves the reply ``done: true`` with what it had (its cancel path), and the process is killed right after that
    save (SIGKILL: nothing more of it runs). The run goes on at the Gateway and ends while Open WebUI is down. The
    next process finishes the reply from the transcript: the tab shows the whole reply, no Stop button."""
    import signal

    from owui.browser import SEL_STOP, running_browser
    from owui.server import running_server

    simulator, token = sim
    before = subscribed(simulator, token)
    with running_server(tmp_path, env_extra=owc_env(simulator.url)) as server:
        install_owc(server.base_url, simulator.url)
        admin = server.admin()
        wait_connected(simulator, token, before + 1)
        db = server.workdir / "data" / "webui.db"
        with running_browser(tmp_path / "browser") as b:
            page = open_page(b, {"server": server, "admin": admin})
            chat_id = page.new_chat_with(MODEL, "SLOW then die", timeout_ms=WAIT_S * 1000)
            page.wait_for_assistant_text("Hello", timeout_ms=WAIT_S * 1000)
            page.wait_for_intent_hook(timeout_ms=WAIT_S * 1000)
            key = ids.session_key("main", admin.user_id, chat_id)
            run = call(token, lambda: simulator.active_run(key))
            assert run is not None
            found = _reply_of(admin, chat_id, "SLOW then die")
            assert found is not None
            reply_id = found[0]
            admin.stop_chat(chat_id)  # the request's task is cancelled: Open WebUI's cancel path saves the reply
            # The save (``done: true``, "Hello") stands only until owc's handover takes M back (``done: false``, the
            # same text: 8-36 ms measured), so a poll may see either; the kill follows at once. Whichever it lands
            # after, the reply must come back whole: from the save, the next process owes M (``openclaw_open``);
            # from the take-back, M is open anyway. The first is the window of item 1, the second its neighbour.
            cut = wait_until(
                lambda: (
                    str(
                        (m := _stored_chat(db, chat_id)["history"]["messages"][reply_id]).get("content") or ""
                    ).startswith("Hello")
                    and m
                ),
                "Open WebUI's cancel-path save (or owc's take-back after it)",
            )
            stop = server.signal_and_wait(signal.SIGKILL)
            assert "the rest" not in cut["content"]
            assert (cut.get("meta") or {}).get("openclaw_open") is True, "owc still owed the reply"
            assert stop.seconds < 5, stop
            call(token, lambda: run.text(" and the rest, said while Open WebUI was down.").end())
            server.restart()
            admin = server.admin()
            whole = "Hello and the rest, said while Open WebUI was down."
            message = wait_until(
                lambda: (
                    (m := _stored_chat(db, chat_id)["history"]["messages"][reply_id]).get("content") == whole
                    and m.get("done") is True
                    and m
                ),
                "the next process finishing the reply",
            )
            assert "openclaw_open" not in (message.get("meta") or {})
            page = open_page(b, {"server": server, "admin": admin}, chat_id)
            page.wait_for_assistant_text("said while Open WebUI was down.", timeout_ms=WAIT_S * 1000)
            assert page.assistant_texts() == [whole]
            assert not page.page.locator(SEL_STOP).is_visible()
            page.screenshot("w-item1-whole-after-kill")


def test_a_recovery_the_gateway_gives_up_ends_the_message_with_its_note_in_the_tab(deployment, browser) -> None:
    """Issue 24, item 7 (seed 004): an agent turn streams into the open tab; the Gateway crashes under it and, back,
    leaves the run's recovery pending (its row ``running``); owc reconnects and holds the message open for it; then
    the Gateway's three recovery attempts fail and the session is tombstoned. The tab shows what the run had said
    and the cut-off line naming the Gateway's error, the Stop button goes, and the database holds the message
    finished (before, it stayed ``done: false``: the row named the last attempt's fresh run id, not the cut run)."""
    from owui.browser import SEL_STOP

    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    chat_id, key = new_chat(admin)
    page = open_page(browser, deployment, chat_id)
    call(token, lambda: sim.start_run(key, "w-given-up").text("Working on the first half."))
    message_id = ids.message_id(key, "w-given-up")
    page.wait_for_assistant_text("Working on the first half.", timeout_ms=WAIT_S * 1000)
    before = subscribed(sim, token)
    call(token, lambda: sim.hold_recovery(key))
    trio.from_thread.run(sim.restart, "crash", trio_token=token)
    wait_connected(sim, token, before)  # owc is back on the new boot, the recovery still pending
    assert (assistant_messages(admin, chat_id).get(message_id) or {}).get("done") is not True
    page.screenshot("w-item7-held-for-the-recovery")
    call(token, lambda: sim.give_up_recovery(key))
    message = wait_until(lambda: finished(admin, chat_id, message_id), "the message ended after the give-up")
    error = str((message.get("error") or {}).get("content"))
    assert message["content"] == "Working on the first half."
    assert error.startswith("This reply was cut off") and "could not recover" in error, error
    page.wait_for_text("could not recover", timeout_ms=WAIT_S * 1000)
    page.page.locator(SEL_STOP).wait_for(state="hidden", timeout=WAIT_S * 1000)
    assert page.assistant_texts()[0].startswith("Working on the first half.")
    page.screenshot("w-item7-given-up")
