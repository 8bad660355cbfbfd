"""Tier W smoke tests: the REAL Open WebUI 0.12.4 server (slim) boots on loopback, its REST API and Socket.IO answer
the harness, a headless Chromium logs in through the real form, and SIGTERM stops it. They prove the
infrastructure (``tests/owui/server.py``, ``tests/owui/browser.py``) only; owc scenarios build on it.

Sync tests on purpose: Playwright's sync API and the blocking harness calls do not belong in a Trio task.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import secret

# The first use builds a ~780 MB venv (minutes on a loaded 2-core box) and may apt-install chromium: the
# suite's 120 s per-test limit counts fixture set-up.
pytestmark = [pytest.mark.owuiserver, pytest.mark.timeout(1800)]

SMOKE_PIPE = '''"""
title: owc smoke pipe
"""


class Pipe:
    def pipe(self, body: dict) -> str:
        return "pong"
'''


@pytest.fixture
def owui_server(server_venv: Path, tmp_path: Path) -> Iterator:
    """A fresh server per test (its own DATA_DIR and SQLite DB in ``tmp_path``), stopped afterwards. Its log path
    is printed at set-up, so a failing test's report names the file (pytest keeps the last runs' tmp dirs)."""
    from owui.server import running_server

    with running_server(tmp_path) as server:
        print(f"open-webui serve on {server.base_url}, log {server.log_path}")
        yield server


def test_server_boots_and_answers_rest_and_socketio(owui_server, record_property) -> None:
    from owui.server import ADMIN_EMAIL, EventRecorder, add_assistant_turn, user_turn_chat

    boot = owui_server.boots[0]
    record_property("boot_s", boot.seconds)
    print(f"boot on a fresh DB: {boot.seconds} s (pid {boot.pid}, log {boot.log_path})")

    admin = owui_server.admin()
    secret(admin.token)
    assert admin.user["role"] == "admin" and admin.user["email"] == ADMIN_EMAIL
    assert admin.models() == []  # no Ollama / OpenAI connection, no Function yet

    function = admin.install_function("owc_smoke", "owc smoke", SMOKE_PIPE)
    assert function["is_active"] and function["type"] == "pipe"
    assert "owc_smoke" in [m["id"] for m in admin.models()]
    again = admin.install_function("owc_smoke", "owc smoke", SMOKE_PIPE.replace('"pong"', '"pong 2"'))
    assert again["is_active"] and '"pong 2"' in again["content"]  # the update path keeps it active

    chat = user_turn_chat("owc_smoke", "ping", title="smoke")
    reply = add_assistant_turn(chat, "half a reply", done=False)
    chat_id = admin.new_chat(chat)["id"]
    stored = admin.get_chat(chat_id)
    assert stored["chat"]["history"]["messages"][reply]["done"] is False
    assert admin.chat_tasks(chat_id) == []

    with EventRecorder(owui_server.base_url, admin.token).connect() as events:
        events.join_chat(chat_id)
        # With no task to cancel, Stop finalizes the caller's pending reply and tells the tabs.
        t = time.monotonic()
        result = admin.stop_chat(chat_id)
        record_property("stop_s", round(time.monotonic() - t, 3))
        assert result["status"] is True
        cancel = events.wait_for(lambda e: e.get("data", {}).get("type") == "chat:tasks:cancel")
        assert cancel["chat_id"] == chat_id and cancel["message_id"] == reply
        assert "chat:completion" in events.types(chat_id)
    assert admin.get_chat(chat_id)["chat"]["history"]["messages"][reply]["done"] is True


def test_browser_logs_in_and_reads_a_chat(owui_server, browser_install, tmp_path: Path, record_property) -> None:
    from owui.browser import running_browser
    from owui.server import ADMIN_EMAIL, ADMIN_PASSWORD, add_assistant_turn, user_turn_chat

    admin = owui_server.admin()
    secret(admin.token)
    chat = user_turn_chat("owc_smoke", "ping", title="browser smoke")
    add_assistant_turn(chat, "Hello from the tier-W smoke test.")
    chat_id = admin.new_chat(chat)["id"]

    with running_browser(tmp_path) as browser:
        record_property("browser_launch_s", browser.launch_s)
        page = browser.new_page(owui_server.base_url)
        t = time.monotonic()
        assert page.login(ADMIN_EMAIL, ADMIN_PASSWORD)  # an admin's first login shows "What's New" (dismissed)
        record_property("login_s", round(time.monotonic() - t, 2))
        home = page.screenshot("home")
        assert home.exists() and home.stat().st_size > 10_000

        page.open_chat(chat_id)
        page.wait_for_assistant_text("Hello from the tier-W smoke test.")
        assert page.assistant_texts() == ["Hello from the tier-W smoke test."]
        assert not page.stop_visible()
        shot = page.screenshot("chat")
        print(f"browser launch {browser.launch_s} s; screenshots {home}, {shot}")


def test_sigterm_on_an_idle_server_exits_quickly_and_restart_keeps_the_data(owui_server, record_property) -> None:
    admin = owui_server.admin()
    secret(admin.token)
    from owui.server import user_turn_chat

    chat_id = admin.new_chat(user_turn_chat("owc_smoke", "survive a restart", title="restart"))["id"]

    stop = owui_server.terminate()
    record_property("sigterm_exit_s", stop.seconds)
    record_property("sigterm_returncode", stop.returncode)
    print(f"SIGTERM on an idle server: exit {stop.returncode} after {stop.seconds} s (killed: {stop.killed})")
    assert not stop.killed and stop.seconds < 10
    assert stop.returncode in (0, -15)  # uvicorn re-raises SIGTERM after its graceful shutdown

    boot = owui_server.restart()
    record_property("reboot_s", boot.seconds)
    print(f"boot on the existing DB: {boot.seconds} s")
    again = owui_server.admin()
    secret(again.token)
    assert again.user_id == admin.user_id
    assert again.get_chat(chat_id)["chat"]["title"] == "restart"
