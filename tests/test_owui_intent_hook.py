"""The page intent hook (``owc/owui/intent_hook.py``) in real Chromium, on a page built like Open WebUI 0.12.4's
where the hook looks: a queued message's "Send now" button (its arrow icon), the composer's Stop button, Escape,
each calling the page's stop endpoint the way ``Chat.svelte`` does (``stopResponse`` -> ``stopTasksByChatId`` ->
``fetch`` before any ``await``). The labels are German here: the hook must not depend on the page's language. The
hook is loaded as Open WebUI loads ``loader.js`` (a classic script before the app's), or installed as an
``execute`` event runs code (the body of an async function).

The real page and server, with owc's stop route reading the tag, are the W tier's (``tests/test_owui_w_stop.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from owc.owui.intent_hook import GLOBAL, LOADER_SCRIPT, VERSION, install_code
from owc.rules.intent import HEADER

pytestmark = [pytest.mark.owuiserver]

ORIGIN = "http://owc-hook.test"
CHAT = "0b7c2a8e-5d1f-4c6a-9e0b-hook-test"

PAGE = """<!doctype html><html><head><style>svg { width: 16px; height: 16px; display: block; }
button, textarea { display: block; margin: 8px; }</style></head><body>
%(loader)s
<div class="queue">
  <div class="flex items-center gap-2 px-2 py-1.5">
    <p>queued prompt</p>
    <button type="button" aria-label="Jetzt senden" id="send-now">
      <svg viewBox="0 0 24 24"><path stroke-linecap="round" d="M4.5 10.5 12 3m0 0 7.5 7.5M12 3v18"/></svg>
    </button>
    <button type="button" aria-label="Bearbeiten" id="edit"><svg><path d="M16.862 4.487"/></svg></button>
  </div>
</div>
<textarea id="prompt"></textarea>
<button aria-label="Stopp" id="stop">
  <svg viewBox="0 0 24 24"><path d="M2.25 12c0-5.385 4.365-9.75 9.75-9.75"/></svg>
</button>
<script>
  let chatId = %(chat)s;
  const stopTasksByChatId = async (token, id) => {
    const res = await fetch(`/api/tasks/chat/${encodeURIComponent(id)}/stop`, {
      method: 'POST',
      headers: {Accept: 'application/json', 'Content-Type': 'application/json', authorization: 'Bearer t0ken'}
    });
    return res.json();
  };
  const stopResponse = async (processQueue = true) => {
    window.dispatchEvent(new CustomEvent('voice:cancel_animation'));  // a nested dispatch, as the page's
    await stopTasksByChatId('token', chatId);
  };
  document.getElementById('stop').addEventListener('click', () => { stopResponse(); });
  document.getElementById('send-now').addEventListener('click', async () => {
    await stopResponse(false);
    await fetch('/api/chat/completions', {method: 'POST'});  // the queued prompt, sent after the stop
  });
  document.getElementById('edit').addEventListener('click', () => {});
  document.getElementById('prompt').addEventListener('keydown', (e) => { if (e.key === 'Escape') stopResponse(); });
  window.stopLater = async (id) => {  // a stop with no gesture behind it (a voice call's end, a bridge)
    await new Promise((r) => setTimeout(r, 0));
    await stopTasksByChatId('token', id);
  };
  window.stopWithRequest = () =>
    fetch(new Request(`/api/tasks/chat/${encodeURIComponent(chatId)}/stop`, {
      method: 'POST', headers: {authorization: 'Bearer t0ken'}
    }));
</script></body></html>"""


def _page(browser: Any, *, loader: bool) -> Any:
    page = browser.blank_page(timeout_ms=30_000)
    requests: list[tuple[str, dict[str, str]]] = []
    tag = f'<script src="/static/loader.js?owc={VERSION}"></script>' if loader else ""

    def serve(route: Any) -> None:
        url = route.request.url
        if "/static/loader.js" in url:
            route.fulfill(status=200, content_type="text/javascript", body=LOADER_SCRIPT)
        elif url.startswith(ORIGIN + "/api/"):
            requests.append((url.removeprefix(ORIGIN), dict(route.request.headers)))
            route.fulfill(status=200, content_type="application/json", body='{"status": true}')
        else:
            route.fulfill(status=200, content_type="text/html", body=PAGE % {"chat": f'"{CHAT}"', "loader": tag})

    page.route(ORIGIN + "/**", serve)
    page.goto(ORIGIN + "/")
    page.api = requests
    return page


@pytest.fixture
def page(browser_install: Any, tmp_path: Any) -> Iterator[Any]:
    """The page with the hook loaded as Open WebUI loads ``loader.js``."""
    from owui.browser import running_browser

    with running_browser(tmp_path) as browser:
        yield _page(browser, loader=True)


@pytest.fixture
def bare_page(browser_install: Any, tmp_path: Any) -> Iterator[Any]:
    """The page as a tab loaded before owc was installed: no hook until an ``execute`` brings it."""
    from owui.browser import running_browser

    with running_browser(tmp_path) as browser:
        yield _page(browser, loader=False)


def run(page: Any, code: str) -> Any:
    """What Open WebUI's ``execute`` does with ``data.code``: the body of an async function, its result returned."""
    return page.evaluate(f"async () => {{ {code} }}")


def requested(page: Any, count: int) -> list[tuple[str, str | None]]:
    """Once the page has made ``count`` API requests: each one's path and the hook's tag on it (None: untagged)."""
    page.wait_for_function(
        f"() => performance.getEntriesByType('resource').filter(e => e.name.includes('/api/')).length >= {count}"
    )
    return [(path, headers.get(HEADER)) for path, headers in page.api]


STOP_PATH = f"/api/tasks/chat/{CHAT}/stop"


def test_each_stop_request_is_tagged_with_the_control_that_made_it_not_by_its_label(page: Any) -> None:
    assert page.evaluate(f"() => window[{GLOBAL!r}].via") == "loader"  # in the tab before the app ran
    page.click("#stop")
    page.click("#send-now path")  # the click lands on the icon inside the button
    assert requested(page, 3) == [
        (STOP_PATH, "stop"),
        (STOP_PATH, "send_now"),
        ("/api/chat/completions", None),  # the queued prompt after the stop: untouched
    ]
    page.click("#prompt")
    page.keyboard.press("Escape")
    page.click("#edit")  # no stop call: nothing sent
    page.evaluate("() => window.stopLater(chatId)")  # no gesture behind it
    page.evaluate("() => window.stopWithRequest()")  # a Request object: tagged, its own headers kept
    got = requested(page, 6)
    assert got[3:] == [(STOP_PATH, "stop")] * 3
    assert [h.get("authorization") for _, h in page.api if _ == STOP_PATH] == ["Bearer t0ken"] * 5
    assert page.api[0][1]["content-type"] == "application/json"  # the page's own headers go along
    assert page.evaluate(f"() => window[{GLOBAL!r}].tagged") == 5


def test_a_page_without_the_hook_gets_it_from_an_execute_once(bare_page: Any) -> None:
    bare_page.click("#stop")
    assert requested(bare_page, 1) == [(STOP_PATH, None)]  # a hookless tab: its stop says nothing
    assert run(bare_page, install_code()) == {"hook": False}
    assert run(bare_page, install_code()) == {"hook": True}  # installed once: one tag per request
    bare_page.click("#send-now")
    got = requested(bare_page, 3)
    assert got[1] == (STOP_PATH, "send_now")
    assert bare_page.evaluate(f"() => window[{GLOBAL!r}].via") == "execute"


def test_a_stop_of_any_chat_is_tagged_however_its_id_is_encoded(page: Any) -> None:
    for chat in ("chat/with spaces?", "__proto__", "'; window.pwned = true; '\"`${1}`</script>"):
        page.evaluate("(id) => window.stopLater(id)", chat)
    got = requested(page, 3)
    assert [tag for _, tag in got] == ["stop"] * 3
    assert page.evaluate("() => window.pwned === undefined")
