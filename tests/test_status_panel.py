"""The status Action (``owc/owui/status_action.py``, its Function file) and the panel's code it sends
(``owc/owui/status_panel.py`` / ``.js``), issue 29.

First the code as built (pure): what is filled is escaped and filled in one pass; the Action sends one ``execute``
to the clicking tab only (``__event_call__``), opens a drawer for the old Pipe's marked messages and returns nothing.
Then the panel's own code in Chromium on a page of the test's own, owc's routes stubbed with the JSON
``owc.owui.status`` answers: what a person sees of each part, hostile values shown as text, Compact's lines, the
drawer, Escape and the backdrop, one panel per page. The panel in the real Open WebUI is
``tests/test_owui_w_status_view.py``'s.
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from owc.owui import status_action, status_panel
from owc.owui.install import function_source
from owc.owui.status import PREFIX

CHAT = "0f0e0d0c-aaaa-4bbb-8ccc-dddddddddddd"
HOSTILE_TITLE = "<img src=x onerror=alert(1)>"
HOSTILE_MODEL = "glm-<b>5</b>"


# ---------------------------------------------------------------------------------------------- the code built


def _data_of(code: str) -> Any:
    line = next(line for line in code.splitlines() if line.startswith("const d = "))
    return orjson.loads(line.removeprefix("const d = ").removesuffix(";"))


def test_the_code_carries_the_chat_and_task_as_escaped_json_filled_in_one_pass() -> None:
    code = status_panel.open_code("c<1>&\u2028", "__BASE__</script>")
    assert "__DATA__" not in code and "__PREFIX__" not in code
    # A value naming a placeholder is not filled again, and nothing in it can end a script or a line of JS.
    line = next(line for line in code.splitlines() if line.startswith("const d = "))
    assert "<" not in line and ">" not in line and "&" not in line and "\u2028" not in line
    assert "\\u003c/script\\u003e" in line and "__BASE__" in line
    assert _data_of(code) == {"chat": "c<1>&\u2028", "task": "__BASE__</script>"}
    assert f"const base = {orjson.dumps(PREFIX).decode()} + encodeURIComponent(d.chat);" in code
    assert re.search(r"__[A-Z]+__", code.replace("__BASE__</script>", "").replace("__BASE__\\u003c", "")) is None


def test_the_panel_sets_every_value_as_text_never_as_markup() -> None:
    code = status_panel.open_code(CHAT)
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in code
    assert _data_of(code) == {"chat": CHAT, "task": None}


def _body(content: str, *, clicked: str = "m2") -> dict[str, Any]:
    return {
        "chat_id": CHAT,
        "id": clicked,
        "model": "openclaw.main",
        "session_id": "sid-1",
        "messages": [
            {"id": "m1", "role": "assistant", "content": "earlier <!-- openclaw:taskId=task-old -->"},
            {"id": "m2", "role": "assistant", "content": content},
        ],
    }


def test_a_marked_sub_agent_message_opens_its_drawer_and_only_the_clicked_one_counts() -> None:
    finished = "*↳ Sub-agent finished: Audit deps*\n\nAll good.\n<!-- openclaw:taskId=task-7f3a -->"
    assert status_action.clicked_task(_body(finished)) == "task-7f3a"
    assert status_action.clicked_task(_body("A plain reply.")) is None  # m1's marker is another message's
    assert status_action.clicked_task(_body("x <!-- openclaw:taskId=a/b -->")) is None  # not an id the routes take
    assert status_action.clicked_task({"id": "m2"}) is None


async def test_the_action_sends_one_execute_to_the_clicking_tab_and_returns_nothing() -> None:
    calls: list[dict[str, Any]] = []

    async def event_call(event: dict[str, Any]) -> Any:
        calls.append(event)
        return {"shown": True}

    assert await status_action.action(_body("Done."), {"id": "u1"}, event_call) is None
    (event,) = calls
    assert event["type"] == "execute" and _data_of(event["data"]["code"]) == {"chat": CHAT, "task": None}
    marked = _body("↳ Sub-agent finished <!-- openclaw:taskId=task-9 -->")
    assert await status_action.action(marked, {"id": "u1"}, event_call) is None
    assert _data_of(calls[1]["data"]["code"]) == {"chat": CHAT, "task": "task-9"}
    # No chat to show (a body without one, a hostile id): nothing is sent.
    assert await status_action.action({**_body("x"), "chat_id": "../x"}, None, event_call) is None
    assert await status_action.action({"id": "m"}, None, event_call) is None
    assert len(calls) == 2


async def test_a_tab_that_does_not_answer_is_logged_not_raised(caplog: Any) -> None:
    async def gone(event: dict[str, Any]) -> Any:
        raise TimeoutError

    assert await status_action.action(_body("x"), None, gone) is None
    assert "owui.status_action_unanswered" in caplog.text


async def test_the_function_file_is_an_action_with_its_icon_and_hands_the_click_on() -> None:
    source = function_source("openclaw_status.py")
    assert source.splitlines()[0] == '"""' and "title: OpenClaw status\n" in source
    module = types.ModuleType("function_openclaw_status")
    exec(compile(source, "openclaw_status.py", "exec"), module.__dict__)
    action = module.Action()
    # Open WebUI 0.12.4 reads the button's icon as getattr(<the Action>, "icon_url") (utils/models.py).
    assert action.icon_url.startswith("data:image/svg+xml;base64,") and action.valves.priority == 0
    sent: list[dict[str, Any]] = []

    async def event_call(event: dict[str, Any]) -> Any:
        sent.append(event)
        return {"shown": True}

    assert await action.action(_body("Done."), __user__={"id": "u1"}, __event_call__=event_call) is None
    assert [e["type"] for e in sent] == ["execute"]


# ---------------------------------------------------------------------------------------------- in Chromium


def view(**parts: Any) -> dict[str, Any]:
    """A view as ``owc.render.status_view.view`` answers it (each part may be replaced)."""
    return {
        "context": {
            "provider": "openrouter",
            "model": "z-ai/glm-5.2",
            "used": 115_000,
            "window": 1_000_000,
            "percent": 11.5,
            "running": False,
            "compactions": 0,
        },
        "goal": None,
        "limits": {"windows": [], "summary": None, "atMs": 1},
        "subagents": [],
        **parts,
    }


def drawer_view(**parts: Any) -> dict[str, Any]:
    return {
        "id": "task-1",
        "title": "Audit deps",
        "status": "running",
        "state": "running",
        "doing": "Running exec",
        "agent": "main",
        "toolUses": 2,
        "startedAtMs": 1,
        "endedAtMs": None,
        "summary": None,
        "error": None,
        "prompt": "Audit the dependencies",
        "result": None,
        "context": {"provider": "openrouter", "model": "z-ai/glm-5.2", "used": 2000, "window": 100000, "percent": 2.0},
        "messages": [{"role": "user", "text": "Audit the dependencies"}, {"role": "assistant", "text": "Looking."}],
        "tools": [
            {"id": "c1", "name": "exec", "arguments": '{"command":"ls"}', "result": "a b", "error": False},
            {"id": "c2", "name": "read", "arguments": '{"path":"x"}', "result": "ENOENT", "error": True},
        ],
        "childKey": "agent:main:subagent:1",
        **parts,
    }


def ndjson(*views: dict[str, Any]) -> str:
    return "".join(orjson.dumps(v).decode() + "\n" for v in views)


@pytest.fixture
def page(browser_install: Any, tmp_path: Any) -> Iterator[Any]:
    from owui.browser import running_browser

    with running_browser(tmp_path) as browser:
        page = browser.blank_page(timeout_ms=10_000)
        page.route("http://owui.test/**", lambda r: r.fulfill(status=200, body="<html><body></body></html>"))
        page.goto(f"http://owui.test/c/{CHAT}")
        page.evaluate("() => localStorage.setItem('token', 'tok-1')")
        yield page


def serve(page: Any, path: str, status: int, body: str, content_type: str = "application/x-ndjson") -> list[Any]:
    """Stub owc's route ``path`` (after the chat's prefix); returns the requests it got."""
    got: list[Any] = []

    def handle(route: Any) -> None:
        got.append(route.request)
        route.fulfill(status=status, content_type=content_type, body=body)

    page.route(f"**{PREFIX}{CHAT}{path}", handle)
    return got


def show(page: Any, task: str | None = None) -> Any:
    code = status_panel.open_code(CHAT, task)
    return page.evaluate("code => new Function(`return (async () => { ${code} })()`)()", code)


DIALOG = "[data-owc-status=dialog]"


@pytest.mark.owuiserver
@pytest.mark.timeout(300)
def test_the_dialog_shows_each_part_and_hostile_values_as_text(page: Any) -> None:
    hostile = view(
        context={**view()["context"], "model": HOSTILE_MODEL},
        goal={"objective": "Ship <i>it</i>", "tokensUsed": 5000, "tokenBudget": 10000},
        limits={
            "windows": [
                {"label": "5h", "usedPercent": 24, "resetAtMs": 4_000_000_000_000},
                {"label": "week", "usedPercent": 70, "resetAtMs": None},
                {"label": "day", "usedPercent": 90, "resetAtMs": None},
            ],
            "summary": None,
            "atMs": 1,
        },
        subagents=[
            {"id": "task-1", "title": HOSTILE_TITLE, "status": "running", "state": "running", "doing": "Running exec",
             "agent": "main", "toolUses": 1, "startedAtMs": 1, "endedAtMs": None},
        ],
    )  # fmt: skip
    requests = serve(page, "/live", 200, ndjson(view(), hostile))
    assert show(page) == {"shown": True}
    dialog = page.locator(DIALOG)
    dialog.get_by_text(HOSTILE_TITLE).wait_for()  # the second line of the stream
    assert requests[0].headers["authorization"] == "Bearer tok-1"
    text = dialog.inner_text()
    assert "OpenClaw status" in text and "openrouter · glm-<b>5</b>" in text
    assert "115k / 1.0m tokens · 11.5%" in text
    assert "Ship <i>it</i>" in text and "5k / 10k tokens of its budget" in text
    assert "24% used" in text and re.search(r"resets in \d+(d|h|m)", text)
    assert "Sub-agents (1)" in text and "Running exec" in text
    assert page.locator("img").count() == 0 and page.locator("b, i").count() == 0  # nothing the Gateway said ran
    colours = dialog.locator("[data-part=limits] [data-colour]").evaluate_all("els => els.map(e => e.dataset.colour)")
    assert colours == ["green", "amber", "red"]
    assert re.search(r"Updated \d\d:\d\d:\d\d", text)
    dialog.get_by_text("live updates ended").wait_for()  # the stub's stream ended: said, not hidden


@pytest.mark.owuiserver
@pytest.mark.timeout(300)
def test_a_part_that_failed_says_so_alone_and_a_stale_count_says_why(page: Any) -> None:
    stale = view(context={**view()["context"], "used": None, "percent": None}, limits=None, subagents=None)
    serve(page, "/live", 200, ndjson(stale))
    show(page)
    dialog = page.locator(DIALOG)
    dialog.get_by_text("Not fresh until the next reply").wait_for()
    assert dialog.locator("[data-part=limits] [data-state=unread]").inner_text() == "Could not read"
    assert dialog.locator("[data-part=subagents] [data-state=unread]").inner_text() == "Could not read"
    assert "openrouter · z-ai/glm-5.2" in dialog.inner_text()


@pytest.mark.owuiserver
@pytest.mark.timeout(300)
def test_no_limits_no_sub_agents_and_a_refused_view(page: Any) -> None:
    serve(page, "/live", 200, ndjson(view()))
    show(page)
    dialog = page.locator(DIALOG)
    dialog.get_by_text("No rate-limit data from the Gateway").wait_for()
    assert dialog.locator("[data-part=subagents]").count() == 0  # none running: no section
    page.keyboard.press("Escape")
    dialog.wait_for(state="detached")
    page.unroute(f"**{PREFIX}{CHAT}/live")
    serve(page, "/live", 403, orjson.dumps({"detail": "This chat is not yours."}).decode(), "application/json")
    show(page)
    page.locator(f"{DIALOG} [role=alert]").get_by_text("This chat is not yours.").wait_for()
    assert page.locator(f"{DIALOG} [data-action=compact]").is_disabled()


@pytest.mark.owuiserver
@pytest.mark.timeout(300)
def test_compact_says_the_servers_line_busy_while_it_runs(page: Any) -> None:
    serve(page, "/live", 200, ndjson(view()))
    held: list[Any] = []
    page.route(f"**{PREFIX}{CHAT}/compact", lambda route: held.append(route))
    show(page)
    button = page.locator(f"{DIALOG} [data-action=compact]")
    button.click()
    page.wait_for_function("() => document.querySelector('[data-action=compact]').textContent === 'Compacting…'")
    assert button.is_disabled()
    assert held and held[0].request.method == "POST"
    held[0].fulfill(
        status=409,
        content_type="application/json",
        body=orjson.dumps({"ok": False, "detail": "A reply is in progress: <wait>.", "tokensBefore": None}).decode(),
    )
    line = page.locator(f"{DIALOG} [data-part=compact-line]")
    line.get_by_text("A reply is in progress: <wait>.").wait_for()
    assert line.get_attribute("data-code") == "409" and not button.is_disabled() and button.inner_text() == "Compact"
    page.unroute(f"**{PREFIX}{CHAT}/compact")
    done = {"ok": True, "detail": "Compacted.", "tokensBefore": 1050, "tokensAfter": 732}
    serve(page, "/compact", 200, orjson.dumps(done).decode(), "application/json")
    button.click()
    line.get_by_text("Compacted. 1.1k → 732 tokens").wait_for()


@pytest.mark.owuiserver
@pytest.mark.timeout(300)
def test_the_drawer_shows_overview_transcript_and_tools_and_escape_closes_it_first(page: Any) -> None:
    listed = view(subagents=[{"id": "task-1", "title": "Audit deps", "status": "running", "state": "running",
                              "doing": "Running exec", "agent": "main", "toolUses": 2, "startedAtMs": 1,
                              "endedAtMs": None}])  # fmt: skip
    serve(page, "/live", 200, ndjson(listed))
    hostile = drawer_view(title=HOSTILE_TITLE, messages=[{"role": "assistant", "text": "<script>x()</script>"}])
    serve(page, "/subagents/task-1/live", 200, ndjson(drawer_view(), hostile))
    show(page)
    page.locator(f"{DIALOG} [data-task=task-1]").click()
    drawer = page.locator(f"#{status_panel.DRAWER_ID}")
    drawer.get_by_text(HOSTILE_TITLE).wait_for()
    overview = drawer.locator("[data-pane=overview]").inner_text()
    assert "running" in overview and "openrouter · z-ai/glm-5.2" in overview and "Audit the dependencies" in overview
    assert re.search(r"Started .* · ran \d+", overview)
    drawer.locator("[data-tab=transcript]").click()
    assert "<script>x()</script>" in drawer.locator("[data-pane=transcript]").inner_text()
    drawer.locator("[data-tab=tools]").click()
    tools = drawer.locator("[data-pane=tools]")
    assert tools.locator("[data-tool]").count() == 2
    assert tools.locator("[data-failed=true]").inner_text().startswith("❌ read (failed)")
    assert '"command": "ls"' in tools.inner_text()  # the arguments pretty-printed
    assert page.locator(f"#{status_panel.ELEMENT_ID} script, #{status_panel.ELEMENT_ID} img").count() == 0
    page.keyboard.press("Escape")
    drawer.wait_for(state="detached")
    assert page.locator(DIALOG).is_visible()  # the drawer went first
    page.keyboard.press("Escape")
    page.locator(f"#{status_panel.ELEMENT_ID}").wait_for(state="detached")


@pytest.mark.owuiserver
@pytest.mark.timeout(300)
def test_one_panel_per_page_the_stream_aborted_on_close_and_a_marker_opens_the_drawer_alone(page: Any) -> None:
    pending: list[Any] = []
    page.route(f"**{PREFIX}{CHAT}/live", lambda route: pending.append(route))  # held open: a live stream
    failed: list[str] = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    assert show(page) == {"shown": True}
    page.wait_for_function("() => document.querySelector('[data-owc-status=dialog]') !== null")
    assert show(page) == {"shown": False}  # a second click: the same panel, focused
    assert page.locator(DIALOG).count() == 1
    assert page.evaluate("() => document.activeElement.dataset.owcStatus") == "dialog"
    page.locator(f"#{status_panel.ELEMENT_ID}").click(position={"x": 5, "y": 5})  # the backdrop
    page.locator(f"#{status_panel.ELEMENT_ID}").wait_for(state="detached")
    page.wait_for_function("() => true")  # one round trip: the page's abort has reached Playwright
    assert pending and [url for url in failed if url.endswith("/live")] == [pending[0].request.url]  # aborted
    # An old Pipe's "Sub-agent finished" message: its drawer alone; closing it closes the panel.
    serve(page, "/subagents/task-9/live", 404, orjson.dumps({"detail": "No such sub-agent."}).decode(), "text/json")
    assert show(page, "task-9") == {"shown": True}
    drawer = page.locator(f"#{status_panel.DRAWER_ID}")
    drawer.locator("[role=alert]").get_by_text("No such sub-agent.").wait_for()
    assert page.locator(DIALOG).count() == 0
    drawer.locator("[data-action=close-drawer]").click()
    page.locator(f"#{status_panel.ELEMENT_ID}").wait_for(state="detached")
