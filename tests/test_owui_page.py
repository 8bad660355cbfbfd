"""owc's patches of Open WebUI (``owc/owui/page.py``) on the REAL Open WebUI 0.12.4 app, in process, without a
server: the hook served with every page (``/static/loader.js``, Open WebUI's own content first, never cached), the
versioned loader URL in ``index.html`` (never a 304 for a page, still one for an asset), the stop route's record
before Open WebUI's own handler answers (the tag, the sender from the session token; nothing for a caller with no
session), the socket handler wrapped; all of it undone at shutdown, installed once however often owc starts, and,
for an Open WebUI shaped otherwise, one line per part naming what changed while the rest still works. The page
and Stop in a real browser are ``tests/test_owui_w_stop.py``'s."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.owuiserver, pytest.mark.timeout(600)]

DRIVER = Path(__file__).parent / "owui" / "page_driver.py"


@pytest.fixture(scope="module")
def seen(server_venv: Path, tmp_path_factory: Any) -> dict[str, Any]:
    from owui.server import server_env

    workdir = tmp_path_factory.mktemp("owui-page")
    done = subprocess.run(
        [str(server_venv / "bin" / "python"), str(DRIVER)],
        env={**server_env(workdir, 0), "FROM_INIT_PY": "true"},  # as `open-webui serve` sets it
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-6000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_page_loads_the_hook_at_a_url_no_cache_holds(seen: dict[str, Any]) -> None:
    before, after, hook = seen["before"], seen["after"], seen["hook"]
    assert before["loader"] == {"status": 200, "body": "", "cache": None}  # 0.12.4's own: empty, heuristic cache
    assert before["index_not_modified"] == 304  # Open WebUI's page revalidates to "not modified"
    assert after["loader"] == {"status": 200, "body": hook["script"], "cache": "no-cache"}
    tag = f'src="/static/loader.js?owc={hook["version"]}"'
    for page in (after["home"], after["chat_page"]):  # "/" reaches the SPA as ".", a chat page falls back to it
        assert page["status"] == 200 and page["cache"] == "no-cache"  # never 304 with the old tag
        assert tag in page["body"] and 'src="/static/loader.js"' not in page["body"]
    assert after["asset"] == 200 and after["favicon_not_modified"] == 304  # assets are Open WebUI's, untouched
    assert seen["same_book"] and seen["routes_named_loader"] == 1  # a second start patches nothing twice


def test_the_stop_route_records_what_the_tab_said_before_open_webui_answers(seen: dict[str, Any]) -> None:
    assert seen["stop_wrapped"] and seen["socket_wrapped"]
    assert all(status in (401, 403, 404) for status in seen["stop_answers"])  # Open WebUI's own answer, each time
    assert seen["records"] == [
        ["send_now", "user-1"],
        ["stop", "user-1"],
        ["untold", "user-1"],  # no tag
        ["stop", "user-1"],  # the page's session cookie names its user too
    ]  # a caller with no session left no record


def test_the_question_route_answers_each_bad_request_with_one_line(seen: dict[str, Any]) -> None:
    assert seen["question_answers"] == [
        [401, "Sign in to Open WebUI to answer."],
        [400, "The answer is not JSON."],
        [400, "Each question takes a list of 1-16 answers."],
        # A well-signed token naming no user Open WebUI knows: checked as Open WebUI's own API checks it (review h13:
        # the signature alone let a signed-out or revoked session answer).
        [401, "Sign in to Open WebUI to answer."],
        [401, "Sign in to Open WebUI to answer."],  # the same by the page's cookie
        [400, "The answer is too large."],
    ]


def test_the_status_routes_refuse_who_is_not_signed_in_with_one_line(seen: dict[str, Any]) -> None:
    sign_in = "Sign in to Open WebUI to see this chat's status."
    assert seen["status_answers"] == [
        [401, sign_in],
        [401, sign_in],  # a well-signed token naming no user Open WebUI knows
        [401, sign_in],  # the same by the page's cookie
        [401, sign_in],
        [404, "No such chat."],
    ]


def test_shutdown_gives_open_webui_its_own_page_and_stop_back(seen: dict[str, Any]) -> None:
    undone = seen["undone"]
    assert undone["question_route"] in (404, 405)  # Open WebUI's own answer: owc's route is gone
    assert undone["loader"]["body"] == "" and undone["stop_route"] and undone["socket"]
    assert 'src="/static/loader.js"' in undone["index"]["body"] and "owc=" not in undone["index"]["body"]


def test_an_open_webui_shaped_otherwise_gets_one_line_per_part_and_the_rest(seen: dict[str, Any]) -> None:
    log = seen["changed"]["log"]
    failed = [line for line in log if "owui.page_patch_failed" in line]
    assert len(failed) == 2, log
    assert any("part=index" in line and "spa-static-files" in line for line in failed)
    assert any(
        "part=stop_route" in line and "no route POST /api/tasks/chat/{chat_id:path}/stop" in line for line in failed
    )
    assert not any("Traceback" in line for line in log)
    assert any("owui.page_patched parts=loader,socket,questions,status,health " in line for line in log)
    assert seen["changed"]["loader"]["cache"] == "no-cache"  # what could be installed, was
