"""The page intent hook (``owc/owui/intent_hook.py``) in real Chromium, on a page built like Open WebUI 0.12.4's
where the hook looks: a queued message's "Send now" button (its arrow icon), the composer's Stop button, Escape,
each calling the page's stop endpoint the way ``Chat.svelte`` does (``stopResponse`` -> ``stopTasksByChatId`` ->
``fetch`` before any ``await``). The labels are German here: the hook must not depend on the page's language.

The real page, with owc asking it through Open WebUI's event call, is the W tier's (``tests/test_owui_w.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from owc.owui.intent_hook import KEEP, ask_code, install_code

pytestmark = [pytest.mark.owuiserver]

ORIGIN = "http://owc-hook.test"
CHAT = "0b7c2a8e-5d1f-4c6a-9e0b-hook-test"

PAGE = """<!doctype html><html><head><style>svg { width: 16px; height: 16px; display: block; }
button, textarea { display: block; margin: 8px; }</style></head><body>
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
    const res = await fetch(`/api/tasks/chat/${encodeURIComponent(id)}/stop`, {method: 'POST'});
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
    fetch(new Request(`/api/tasks/chat/${encodeURIComponent(chatId)}/stop`, {method: 'POST'}));
</script></body></html>"""


@pytest.fixture
def page(browser_install: Any, tmp_path: Any) -> Iterator[Any]:
    from owui.browser import running_browser

    with running_browser(tmp_path) as browser:
        page = browser.blank_page(timeout_ms=30_000)
        stops: list[str] = []

        def serve(route: Any) -> None:
            url = route.request.url
            if "/api/tasks/chat/" in url:
                stops.append(url)
                route.fulfill(status=200, content_type="application/json", body='{"status": true}')
            elif url.startswith(ORIGIN + "/api/"):
                route.fulfill(status=200, content_type="application/json", body="{}")
            else:
                route.fulfill(status=200, content_type="text/html", body=PAGE % {"chat": f'"{CHAT}"'})

        page.route(ORIGIN + "/**", serve)
        page.goto(ORIGIN + "/")
        page.stops = stops
        yield page


def run(page: Any, code: str) -> Any:
    """What Open WebUI's ``execute`` does with ``data.code``: the body of an async function, its result returned."""
    return page.evaluate(f"async () => {{ {code} }}")


def ask(page: Any, asker: str = "A", chat: str = CHAT) -> Any:
    return run(page, ask_code(asker, chat))


def stopped(page: Any, count: int) -> None:
    page.wait_for_function(
        f"() => performance.getEntriesByType('resource').filter(e => e.name.includes('/stop')).length >= {count}"
    )


def test_a_page_without_the_hook_says_so_and_the_question_installs_it(page: Any) -> None:
    assert ask(page) == {"hook": False, "kinds": []}
    assert ask(page) == {"hook": True, "kinds": []}
    page.click("#stop")
    stopped(page, 1)
    assert ask(page) == {"hook": True, "kinds": ["stop"]}


def test_each_control_is_recorded_by_what_it_is_not_by_its_label(page: Any) -> None:
    assert run(page, install_code("A", CHAT, fresh=True)) == {"hook": True}
    page.click("#stop")
    stopped(page, 1)
    assert ask(page) == {"hook": True, "kinds": ["stop"]}
    assert ask(page) == {"hook": True, "kinds": []}  # read once per asker
    page.click("#send-now path")  # the click lands on the icon inside the button
    stopped(page, 2)
    assert ask(page) == {"hook": True, "kinds": ["send_now"]}
    page.click("#prompt")
    page.keyboard.press("Escape")
    stopped(page, 3)
    page.click("#edit")  # no stop call: nothing recorded
    page.evaluate("() => window.stopLater(chatId)")
    stopped(page, 4)
    page.evaluate("() => window.stopWithRequest()")
    stopped(page, 5)
    assert ask(page) == {"hook": True, "kinds": ["stop", "stop", "stop"]}
    assert len(page.stops) == 5  # the page's own calls all went through, once each


def test_every_asker_reads_each_stop_once_and_a_fresh_one_reads_only_later_stops(page: Any) -> None:
    run(page, install_code("A", CHAT, fresh=True))
    run(page, install_code("A", CHAT, fresh=False))  # installed again: still one record per stop call
    page.click("#send-now")
    stopped(page, 1)
    assert ask(page, "B") == {"hook": True, "kinds": ["send_now"]}  # another Open WebUI process asks too
    assert ask(page, "A") == {"hook": True, "kinds": ["send_now"]}
    run(page, install_code("C", CHAT, fresh=True))  # C's first writer on the chat: earlier stops are not its
    run(page, install_code("D", CHAT, fresh=False))  # D's first sight of this tab: from now on too
    assert ask(page, "C") == {"hook": True, "kinds": []}
    assert ask(page, "D") == {"hook": True, "kinds": []}
    page.click("#stop")
    page.click("#send-now")
    stopped(page, 3)
    # E never installed here (the tab reached it only through the question): only the newest stop can be its
    # cancel's; older ones were other stops (before, they were all read, and a stale Stop won over Send now).
    assert ask(page, "E") == {"hook": True, "kinds": ["send_now"]}
    assert ask(page, "D") == {"hook": True, "kinds": ["stop", "send_now"]}


def test_stops_are_kept_per_chat_and_bounded(page: Any) -> None:
    run(page, install_code("A", CHAT, fresh=True))
    other = "chat/with spaces?"  # encoded in the URL as the page encodes it
    page.evaluate("(id) => window.stopLater(id)", other)
    stopped(page, 1)
    assert ask(page) == {"hook": True, "kinds": []}
    assert ask(page, chat=other) == {"hook": True, "kinds": ["stop"]}
    for _ in range(KEEP + 4):
        page.click("#stop")
    stopped(page, KEEP + 5)
    assert ask(page) == {"hook": True, "kinds": ["stop"] * KEEP}


def test_prototype_names_are_plain_ids(page: Any) -> None:
    for name in ("__proto__", "constructor", "toString", "hasOwnProperty"):
        assert run(page, install_code(name, name, fresh=True)) == {"hook": True}
        assert ask(page, name, name) == {"hook": True, "kinds": []}  # answered: a thrown error would hang the ask
    page.evaluate("(id) => window.stopLater(id)", "__proto__")
    stopped(page, 1)
    assert ask(page, "__proto__", "__proto__") == {"hook": True, "kinds": ["stop"]}


def test_the_code_is_safe_for_any_ids(page: Any) -> None:
    hostile = "'; window.pwned = true; '\"`${1}`</script>"
    assert run(page, install_code(hostile, hostile, fresh=True)) == {"hook": True}
    assert ask(page, hostile, hostile) == {"hook": True, "kinds": []}
    assert page.evaluate("() => window.pwned === undefined")
