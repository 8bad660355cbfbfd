"""The question dialog's own code (``owc/owui/question_dialog.js``) in Chromium, on a page of the test's own with
the answer route stubbed: what the panel does with each answer the route gives, and with the page's navigation
(review h13's findings 1 and 2). The dialog in the real Open WebUI is ``tests/test_owui_w_questions.py``'s."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from owc import ids
from owc.owui.question_dialog import open_code
from owc.protocol.questions import Option, Question, QuestionRecord

pytestmark = [pytest.mark.owuiserver, pytest.mark.timeout(300)]

CHAT = "0f0e0d0c-aaaa-4bbb-8ccc-dddddddddddd"
OTHER = "1f0e0d0c-aaaa-4bbb-8ccc-dddddddddddd"
PANEL = '[id^="owc-question-"]'


def record(qid: str = "ask_1", multi: bool = False) -> QuestionRecord:
    q = Question("target", "Target", "Where should it deploy?", (Option("Staging"), Option("Production")), multi, True)
    return QuestionRecord(id=qid, questions=(q,), session_key=ids.session_key("main", "u1", CHAT))


@pytest.fixture
def page(browser_install: Any, tmp_path: Any) -> Iterator[Any]:
    from owui.browser import running_browser

    with running_browser(tmp_path) as browser:
        page = browser.blank_page(timeout_ms=10_000)
        page.route("http://owui.test/**", lambda r: r.fulfill(status=200, body="<html><body></body></html>"))
        page.goto(f"http://owui.test/c/{CHAT}")
        yield page


def answering(page: Any, status: int, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Stub the answer route with ``status`` / ``body``; returns the bodies the page posted."""
    posted: list[dict[str, Any]] = []

    def handle(route: Any) -> None:
        posted.append(orjson.loads(route.request.post_data or "{}"))
        route.fulfill(status=status, content_type="application/json", body=orjson.dumps(body).decode())

    page.route("**/api/owc/questions/**", handle)
    return posted


def show(page: Any, rec: QuestionRecord, chat: str = CHAT) -> Any:
    return page.evaluate("code => new Function(`return (async () => { ${code} })()`)()", open_code(rec, chat))


def test_an_accepted_answer_closes_the_panel(page: Any) -> None:
    posted = answering(page, 200, {"status": "answered"})
    assert show(page, record()) == {"shown": True}
    assert show(page, record()) == {"shown": False}  # the same question again: still one panel
    page.locator(f'{PANEL} input[value="Production"]').check()
    page.locator(f'{PANEL} [data-action="send"]').click()
    page.locator(PANEL).wait_for(state="detached")
    assert posted == [{"answers": {"target": ["Production"]}}]


def test_a_question_that_ended_elsewhere_closes_the_panel_with_the_servers_line(page: Any) -> None:
    answering(page, 409, {"detail": "This question was already answered, dismissed or expired.", "status": "ended"})
    show(page, record())
    page.locator(f'{PANEL} [data-action="dismiss"]').click()
    page.get_by_text("This question was already answered, dismissed or expired.").wait_for()
    assert page.locator(f"{PANEL} [data-action]").count() == 0  # nothing left to press that could only fail
    page.locator(PANEL).wait_for(state="detached")


def test_a_refused_answer_keeps_the_panel_open_with_the_line(page: Any) -> None:
    answering(page, 503, {"detail": "The Gateway is not reachable right now: your answer was not sent."})
    show(page, record())
    page.locator(f'{PANEL} input[value="Staging"]').check()
    page.locator(f'{PANEL} [data-action="send"]').click()
    page.locator(f"{PANEL} [role=alert]").filter(has_text="not reachable").wait_for()
    assert page.locator(f'{PANEL} [data-action="send"]').is_enabled()  # the person can try again


def test_the_panel_belongs_to_its_chat(page: Any) -> None:
    show(page, record())
    page.evaluate(f"() => history.pushState({{}}, '', '/c/{OTHER}')")  # Open WebUI's router moving to another chat
    page.locator(PANEL).wait_for(state="detached")
    assert show(page, record("ask_2")) == {"shown": False}  # not shown over another chat
    assert show(page, record("ask_3"), chat=OTHER)["shown"] is True


def test_escape_in_the_panel_dismisses_and_a_multi_select_takes_several(page: Any) -> None:
    posted = answering(page, 200, {"status": "cancelled"})
    show(page, record(multi=True))
    page.locator(f'{PANEL} input[value="Staging"]').check()
    page.locator(f'{PANEL} input[value="Production"]').check()
    assert page.locator(f"{PANEL} input:checked").count() == 2
    page.locator(f"{PANEL} input").first.focus()
    page.keyboard.press("Escape")
    page.locator(PANEL).wait_for(state="detached")
    assert posted == [{"cancel": True}]
