"""Tier W, issue 27: the agent asks, the person answers. The real Open WebUI 0.12.4 server with owc installed, the
simulator as the Gateway (speaking ``question.*`` as the real 2026.9.6 does, ``tests/test_sim_questions.py``),
headless Chromium as the person.

A run that calls ``ask_user`` opens a dialog in the person's tabs on the chat; they click an option (or type their
own) and press Send, or press Escape; the run goes on in the same reply. Each scenario asserts what the person
sees (the dialog in each tab, its closing in the others, the reply's words), the Gateway's own record of the
question (the simulator's: answered with what, by whom; cancelled) and the message in the database (one reply, its
Ask User card). Screenshots at each key moment go to ``$OWC_SCREENSHOTS`` (else the test's tmp dir).

| what | scenario |
|---|---|
| a person's turn asks; answered in a second tab opened meanwhile; closed in the first | ``test_a_question_in_a_...`` |
| an agent turn asks; the reloaded tab shows it again; Escape dismisses it | ``test_an_agent_turn_asks_...`` |
| Stop while a question waits stops the run and closes the dialog | ``test_stop_while_...`` |
| two instances on Redis, B with two workers, all connected: answered in B, closed in A | ``test_two_instances_...`` |
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
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
    subscribed,
    unfinished_replies,
    wait_connected,
    wait_until,
)

from owc import ids
from owc.render import ask_card
from owc.sim.script import ASK_QUESTIONS, ASK_REPLY_PREFIX

from oracle import cards
from owui.simthread import call

pytestmark = [pytest.mark.owuiserver, pytest.mark.timeout(1800)]

MS = WAIT_S * 1000
DIALOG = '[id^="owc-question-"]'


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[Any, Any]]:
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
    tmp = tmp_path_factory.mktemp("owui-w-questions")
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


def dialog(page: Any, state: str = "visible") -> Any:
    """The question's dialog in ``page``, once it is ``visible`` (or ``hidden``: gone)."""
    found = page.page.locator(DIALOG)
    found.first.wait_for(state=state, timeout=MS)
    return found


def pick(page: Any, *labels: str) -> None:
    for label in labels:
        page.page.locator(f'{DIALOG} input[value="{label}"]').check()


def press(page: Any, action: str) -> None:
    page.page.locator(f'{DIALOG} button[data-action="{action}"]').click()


def sim_question(sim: Any, token: Any, run_id: str) -> Any:
    """The simulator's record of the question run ``run_id`` asked (pending or settled)."""
    return call(token, lambda: next((q for q in sim.questions.records.values() if q.run_id == run_id), None))


def question_of(sim: Any, token: Any, run_id: str) -> Any:
    return wait_until(lambda: sim_question(sim, token, run_id), f"run {run_id} to ask")


def settled(sim: Any, token: Any, run_id: str) -> Any:
    return wait_until(
        lambda: (q := sim_question(sim, token, run_id)) is not None and q.status != "pending" and q,
        f"the question of run {run_id} to be settled",
    )


def the_reply(admin: Any, chat_id: str) -> dict[str, Any] | None:
    """The chat's one assistant reply once finished (None until then); two replies fail the test."""
    replies = assistant_messages(admin, chat_id)
    assert len(replies) <= 1, replies
    reply = next(iter(replies.values()), None)
    return reply if reply is not None and reply.get("done") is True else None


# ---------------------------------------------------------------------------------------------- one process


def test_a_question_in_a_persons_reply_is_answered_in_a_second_tab_and_closes_in_the_first(deployment, browser) -> None:
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    first = open_page(browser, deployment)
    chat_id = first.new_chat_with(MODEL, "ASK_USER please decide", timeout_ms=MS)
    shown = dialog(first)
    words = shown.inner_text()
    for q in ASK_QUESTIONS[:2]:  # what the agent asked, in the person's words: headers, questions, options
        assert q["header"].upper() in words.upper() and q["question"] in words
        for option in q["options"]:
            assert option["label"] in words
    assert "The safe default." in words  # an option's description
    key = ids.session_key("main", admin.user_id, chat_id)
    run = call(token, lambda: sim.active_run(key))
    question = question_of(sim, token, run.run_id)
    first.wait_for_text("Waiting for your answer...", timeout_ms=MS)  # the reply's status line says what holds it
    first.screenshot("q-asked-first-tab")
    # A second tab opened while the question waits shows it too.
    second = first.another_tab()
    second.open_chat(chat_id)
    dialog(second)
    second.screenshot("q-asked-second-tab")
    # Send with the multi select left empty: the dialog says what is missing and stays; nothing reaches the Gateway.
    pick(second, "Production")
    press(second, "send")
    second.page.locator(f"{DIALOG} [role=alert]").filter(has_text="Please answer").wait_for(timeout=MS)
    assert sim_question(sim, token, run.run_id).status == "pending"
    pick(second, "Metrics", "Logging")
    second.page.locator(f"{DIALOG} input[type=text]").nth(1).fill("Audit trail")
    press(second, "send")
    dialog(second, "hidden")
    dialog(first, "hidden")  # answered in one tab, closed in the other
    answered = settled(sim, token, run.run_id)
    assert answered.status == "answered" and answered.resolved_by == f"openwebui:{admin.user_id}"
    assert answered.answers == {"deploy_target": ["Production"], "features": ["Logging", "Metrics", "Audit trail"]}
    assert answered.id == question.id
    first.wait_for_assistant_text("Target: Production", timeout_ms=MS)
    second.wait_for_assistant_text("Target: Production", timeout_ms=MS)
    first.screenshot("q-answered-first-tab")
    reply = wait_until(lambda: the_reply(admin, chat_id), "the reply")
    assert reply["content"].startswith(ASK_REPLY_PREFIX + "Target: Production\nFeatures: Logging, Metrics, Audit trail")
    assert cards(reply.get("output")) == [
        (ask_card.NAME, "Answered:\nTarget: Production\nFeatures: Logging, Metrics, Audit trail")
    ]


def test_an_agent_turn_asks_the_reloaded_tab_shows_it_and_escape_dismisses_it(deployment, browser) -> None:
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    chat_id, key = new_chat(admin)
    page = open_page(browser, deployment, chat_id)
    run = call(token, lambda: sim.start_run(key, "q-agent").text("Before I go on:"))
    page.wait_for_assistant_text("Before I go on:", timeout_ms=MS)
    qid = call(token, lambda: run.ask(ASK_QUESTIONS[:1]))
    assert qid is not None
    dialog(page)
    page.page.reload(wait_until="load")
    page.wait_for_assistant_text("Before I go on:", timeout_ms=MS)
    dialog(page)  # shown again after the reload: the question still waits
    assert page.page.locator(DIALOG).count() == 1
    page.screenshot("q-agent-after-reload")
    page.page.locator(f"{DIALOG} input").first.focus()  # in the question, Escape dismisses it (outside, it is Stop)
    page.page.keyboard.press("Escape")
    dialog(page, "hidden")
    cancelled = settled(sim, token, "q-agent")
    assert cancelled.status == "cancelled" and cancelled.resolved_by == f"openwebui:{admin.user_id}"
    call(token, lambda: run.text(" going on without an answer.").end())
    message_id = ids.message_id(key, "q-agent")
    message = wait_until(lambda: finished(admin, chat_id, message_id), "the agent turn's message")
    assert list(assistant_messages(admin, chat_id)) == [message_id]  # one message for the run, question and all
    assert message["content"].startswith("Before I go on:")
    assert message["content"].rstrip().endswith("going on without an answer.")
    assert cards(message.get("output")) == [(ask_card.NAME, ask_card.DISMISSED)]
    card = page.page.locator("text=Ask User >> visible=true").first  # the card, as the tab shows it
    card.click()  # unfolded, it says what became of the question
    page.page.locator("text=Dismissed: nobody answered >> visible=true").first.wait_for(timeout=MS)
    page.screenshot("q-agent-dismissed")


def test_stop_while_the_agent_asks_stops_the_run_and_closes_the_dialog(deployment, browser) -> None:
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    page = open_page(browser, deployment)
    chat_id = page.new_chat_with(MODEL, "ASK_USER_1 before deploying", timeout_ms=MS)
    dialog(page)
    key = ids.session_key("main", admin.user_id, chat_id)
    run = call(token, lambda: sim.active_run(key))
    page.click_stop(timeout_ms=MS)  # the question is a panel above the composer: Stop stays in reach
    dialog(page, "hidden")
    cancelled = settled(sim, token, run.run_id)
    assert cancelled.status == "cancelled" and cancelled.resolved_by == "requester-inactive"
    assert call(token, lambda: run.run.terminal) == "aborted"
    reply = wait_until(lambda: the_reply(admin, chat_id), "the stopped reply")
    assert ASK_REPLY_PREFIX not in (reply.get("content") or "")
    page.screenshot("q-stopped")


# ---------------------------------------------------------------------------------------------- two instances


@pytest.fixture(scope="module")
def instances(gateway, server_venv, browser_install, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """Two Open WebUI instances on one database and one Redis (``WEBSOCKET_MANAGER=redis``): A, one process; B, two
    uvicorn workers; every owc connected to the Gateway (each gets every question)."""
    from redisserver import RedisUnavailable, running_redis

    from owui.server import running_server

    simulator, token = gateway
    tmp = tmp_path_factory.mktemp("owui-w-q-instances")
    try:
        redis = running_redis(tmp / "redis")
        redis_server = redis.__enter__()
    except RedisUnavailable as exc:
        pytest.skip(f"no Redis server: {exc}")
    try:
        env = {**owc_env(simulator.url), "WEBSOCKET_MANAGER": "redis", "REDIS_URL": redis_server.url}
        with running_server(tmp / "a", env_extra=env) as first:
            before = subscribed(simulator, token)
            install_owc(first.base_url, simulator.url)
            wait_connected(simulator, token, before + 1)
            shared_db = f"sqlite:///{tmp / 'a' / 'owui-server' / 'data' / 'webui.db'}"
            before = subscribed(simulator, token)
            with running_server(tmp / "b", database_url=shared_db, workers=2, env_extra=env) as second:
                wait_connected(simulator, token, before + 2)
                yield {"a": first, "b": second, "admin": first.admin(), "sim": simulator, "token": token}
    finally:
        redis.__exit__(None, None, None)


def test_two_instances_show_the_question_in_each_tab_and_an_answer_in_b_closes_it_in_a(instances, tmp_path) -> None:
    from test_owui_w_stop import log_lines, pids

    from owui.browser import running_browser

    first, second, admin = instances["a"], instances["b"], instances["admin"]
    sim, token = instances["sim"], instances["token"]
    with running_browser(tmp_path) as browser:
        chat_id, key = new_chat(admin)
        tab_a = open_page(browser, {"server": first, "admin": admin}, chat_id)
        tab_b = open_page(browser, {"server": second, "admin": admin}, chat_id)
        run = call(token, lambda: sim.start_run(key, "q-instances").text("One thing first."))
        for tab in (tab_a, tab_b):
            tab.wait_for_assistant_text("One thing first.", timeout_ms=MS)
        call(token, lambda: run.ask(ASK_QUESTIONS[:1]))
        dialog(tab_a)
        dialog(tab_b)
        for tab in (tab_a, tab_b):
            assert tab.page.locator(DIALOG).count() == 1  # one dialog a tab, however many processes saw the question
        tab_b.screenshot("q-instance-b-asked")
        tab_b.page.locator(f"{DIALOG} input[type=text]").first.fill("Canary first")
        press(tab_b, "send")
        dialog(tab_b, "hidden")
        dialog(tab_a, "hidden")
        tab_a.screenshot("q-instance-a-closed")
        answered = settled(sim, token, "q-instances")
        assert answered.status == "answered" and answered.answers == {"deploy_target": ["Canary first"]}
        call(token, lambda: run.text(" Done.").end())
        message = wait_until(lambda: finished(admin, chat_id, ids.message_id(key, "q-instances")), "the message")
        assert cards(message.get("output")) == [(ask_card.NAME, "Answered:\nTarget: Canary first")]
    answered_by = pids(log_lines(second, "owui.question_answer ") + log_lines(first, "owui.question_answer "))
    b_pids = pids(log_lines(second, "owui.page_patched"))
    assert answered_by and answered_by <= b_pids, (answered_by, b_pids)  # the answer went through B's own owc


# ---------------------------------------------------------------------------------------------- the usage line
# (issue 28, here to share this module's server: one more Open WebUI boot would cost the tier half a minute)


def test_the_usage_line_shows_under_a_finished_reply_and_stays_after_a_reload(deployment, browser) -> None:
    from owc.sim.model import PROVIDER

    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    chat_id, key = new_chat(admin)
    page = open_page(browser, deployment, chat_id)

    def usage() -> None:
        sim.rpc.session_usage[key] = {"totalTokens": 115_000, "totalTokensFresh": True, "contextTokens": 1_000_000}
        sim.rpc.usage_providers[:] = [
            {"provider": PROVIDER, "windows": [{"label": "5h", "usedPercent": 24, "resetAt": sim.now_ms() + 1_320_000}]}
        ]

    call(token, usage)
    call(token, lambda: sim.start_run(key, "u-usage").text("All checks passed.").end())
    combined = "115k / 1.0m (11.5%) context · 5h 76% left"
    page.wait_for_text(combined, timeout_ms=MS)  # the line a person sees under the reply, live
    page.screenshot("u-usage-line")
    page.page.reload(wait_until="load")
    page.wait_for_text(combined, timeout_ms=MS)  # stored with the message
    message = wait_until(lambda: finished(admin, chat_id, ids.message_id(key, "u-usage")), "the message")
    assert [e["description"] for e in message["statusHistory"]][-3:] == [
        "Context 115k / 1.0m (11.5%)",
        "5h 76% left, resets in 22m",
        combined,
    ]
    call(token, lambda: sim.rpc.usage_providers.clear())
