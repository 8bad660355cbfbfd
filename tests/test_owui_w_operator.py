"""Tier W, issue 31: the operator's view inside the real Open WebUI 0.12.4, owc installed as the README says and
connected to the simulator.

``GET /api/owc/status`` (JSON) and ``GET /api/owc/metrics`` (Prometheus text) say what this worker's owc is doing:
connected, the Gateway's version and boot, a run in flight under its chat while it streams and gone once it ended.
They are for admins only: no credential 401, a user who is not an admin 403, an admin's session token or API key
(once Open WebUI's "API keys" setting is on) 200. Every owc line in Open WebUI's log carries the pid and the worker
that the status names.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from test_owui_w import new_chat, one_server, simulated_gateway, wait_until

from owc.sim.script import End, Text

from owui.simthread import call

pytestmark = [pytest.mark.owuiserver, pytest.mark.timeout(1800)]

USER_EMAIL = "viewer@example.com"
USER_PASSWORD = "viewer-password-31"


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[Any, Any]]:
    def prepare(simulator: Any) -> None:
        simulator.responder = lambda key, message: [Text("ok"), End()]

    with simulated_gateway(prepare) as pair:
        yield pair


@pytest.fixture(scope="module")
def deployment(gateway, server_venv, browser_install, tmp_path_factory) -> Iterator[dict[str, Any]]:
    with one_server(gateway, tmp_path_factory.mktemp("owui-w-operator")) as deployed:
        yield deployed


def _get(base: str, path: str, bearer: str | None) -> tuple[int, str, str]:
    request = urllib.request.Request(base + path)
    if bearer is not None:
        request.add_header("Authorization", f"Bearer {bearer}")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.headers["Content-Type"], answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def _metric(text: str, name: str) -> float:
    (value,) = [float(line.split()[-1]) for line in text.splitlines() if line.split(" ", 1)[0] == name]
    return value


def test_the_status_and_metrics_routes_say_what_this_workers_owc_does(deployment) -> None:
    admin, sim, token = deployment["admin"], deployment["sim"], deployment["token"]
    base = deployment["server"].base_url
    code, kind, body = _get(base, "/api/owc/status", admin.token)
    assert (code, kind) == (200, "application/json"), body
    status = json.loads(body)
    boot = call(token, lambda: sim.boot_id)
    assert status["running"] is True and status["connected"] is True and status["state"] == "connected"
    assert (status["server_version"], status["boot_id"], status["protocol"]) == ("2026.9.6", boot, 4)
    assert status["gateway"].rstrip("/") == sim.url.rstrip("/")
    assert status["runs"]["in_flight"] == 0 and status["writers"]["live"]

    # A run in flight is shown under its chat while it streams, and gone once its terminal came.
    chat_id, key = new_chat(admin)
    run = call(token, lambda: sim.start_run(key, "w-operator").text("Counting the pods."))

    def in_flight() -> dict[str, Any] | None:
        now = json.loads(_get(base, "/api/owc/status", admin.token)[2])
        chats = {chat["chat_id"]: chat for chat in now["runs"]["chats"]}
        return now if chat_id in chats and chats[chat_id]["in_flight"] == 1 else None

    during = wait_until(in_flight, "the run under its chat in /api/owc/status")
    assert during["runs"]["in_flight"] >= 1
    code, kind, metrics = _get(base, "/api/owc/metrics", admin.token)
    assert code == 200 and kind.startswith("text/plain; version=0.0.4"), metrics
    assert _metric(metrics, "owc_connected") == 1 and _metric(metrics, "owc_runs_in_flight") >= 1
    assert f'owc_chat_runs_in_flight{{chat="{chat_id}"}} 1' in metrics.splitlines()
    info = [line for line in metrics.splitlines() if line.startswith("owc_info{")]
    assert info == [
        f'owc_info{{version="{status["owc_version"]}",pid="{status["pid"]}",worker="{status["worker"]}"}} 1'
    ]

    call(token, lambda: run.text(" Done.").end())
    wait_until(lambda: in_flight() is None, "the run gone from /api/owc/status")
    after = json.loads(_get(base, "/api/owc/status", admin.token)[2])
    assert chat_id not in {chat["chat_id"] for chat in after["runs"]["chats"]}

    # Every owc line in Open WebUI's log names the pid and the worker the status names.
    log = deployment["server"].log_tail(2_000_000)
    stamped = re.findall(r"(?:runs|gateway)\.\w+[^\n]* pid=(\d+) worker=(\S+)$", log, re.M)
    assert stamped and set(stamped) == {(str(status["pid"]), status["worker"])}, set(stamped)


def test_the_operator_routes_are_for_admins_only(deployment) -> None:
    admin = deployment["admin"]
    base = deployment["server"].base_url
    for path in ("/api/owc/status", "/api/owc/metrics"):
        code, _, body = _get(base, path, None)
        assert code == 401 and "Sign in to Open WebUI as an admin" in body, (path, body)
        code, _, body = _get(base, path, "not-a-session-token")
        assert code == 401, (path, body)

    # A user who is not an admin.
    try:
        admin.post(
            "/api/v1/auths/add",
            {"name": "Viewer", "email": USER_EMAIL, "password": USER_PASSWORD, "role": "user"},
        )
    except Exception as exc:  # the module ran before on this server: the user is there
        assert "already" in str(exc).lower() or "taken" in str(exc).lower(), exc
    user = type(admin)(base)
    user.signin(USER_EMAIL, USER_PASSWORD)
    for path in ("/api/owc/status", "/api/owc/metrics"):
        code, _, body = _get(base, path, user.token)
        assert code == 403 and "for Open WebUI's admins" in body, (path, body)

    # An admin's API key, once Open WebUI lets keys in (its own setting, off by default): a scraper needs no session.
    config = admin.get("/api/v1/auths/admin/config")
    admin.post("/api/v1/auths/admin/config", {**config, "ENABLE_API_KEYS": True})
    key = admin.post("/api/v1/auths/api_key")["api_key"]
    assert key.startswith("sk-")
    code, kind, body = _get(base, "/api/owc/metrics", key)
    assert code == 200 and kind.startswith("text/plain") and "owc_connected 1" in body.splitlines(), body
    code, _, body = _get(base, "/api/owc/status", key)
    assert code == 200 and json.loads(body)["connected"] is True
    # Keys turned off again: Open WebUI's refusal stands (owc never lets a key in that Open WebUI would not).
    admin.post("/api/v1/auths/admin/config", {**config, "ENABLE_API_KEYS": False})
    code, _, body = _get(base, "/api/owc/metrics", key)
    assert code == 403, body
