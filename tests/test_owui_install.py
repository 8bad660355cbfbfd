"""``owc owui install`` (``owc/owui/install.py``) against a stand-in for Open WebUI 0.12.4's admin routes.

``FakeOpenWebUI`` answers as ``open_webui/routers/functions.py`` does where the installer touches it: a Function it
does not have is HTTP 401 (``get_function_by_id``), a created Function is inactive, ``toggle`` flips it, ``update``
replaces the content and leaves the valves, ``GET /api/models`` lists an active manifold Pipe's models. The real
server is the W tier's."""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import threading
import urllib.error
from collections.abc import Iterator
from typing import Any

import pytest

from owc.owui.install import Api, InstallError, function_source, install


class FakeOpenWebUI:
    def __init__(self, *, role: str = "admin") -> None:
        self.functions: dict[str, dict[str, Any]] = {}
        #: Model rows (``/api/v1/models``): ``meta.filterIds`` attaches a non-global Filter to a model.
        self.models: dict[str, dict[str, Any]] = {}
        self.role = role
        self.calls: list[tuple[str, str]] = []
        #: What the Pipe's ``pipes()`` names its entry right now (a refusal adds its gist, as a wrong token does).
        self.listed_name = "OpenClaw"

    def __call__(self, request: Any, timeout: float) -> Any:
        method, path = request.get_method(), request.full_url.split("://", 1)[1].split("/", 1)[1]
        path = "/" + path
        self.calls.append((method, path))
        body = json.loads(request.data) if request.data else None
        answer = self._answer(method, path, body, request.get_header("Authorization"))
        return _Response(answer)

    def _answer(self, method: str, path: str, body: Any, auth: str | None) -> Any:
        if path == "/api/v1/auths/signin":
            ok = body == {"email": "admin@example.com", "password": "pw"}
            return {"token": "jwt", "role": self.role} if ok else _error(400, "wrong password")
        if auth != "Bearer jwt":
            return _error(401, "not signed in")
        if path == "/api/models":
            return {
                "data": [
                    {"id": f"{fid}.main", "name": self.listed_name}
                    for fid, f in self.functions.items()
                    if f["is_active"] and "class Pipe" in f["content"]
                ]
            }
        if path.startswith("/api/v1/models/model?id="):
            return self.models.get(path.split("=", 1)[1])  # Open WebUI answers null for a model with no row
        if path in ("/api/v1/models/create", "/api/v1/models/model/update"):
            self.models[body["id"]] = body
            return body
        parts = path.removeprefix("/api/v1/functions/").split("/")
        if parts == ["create"]:
            if body["id"] in self.functions:
                return _error(400, "Uh-oh! This id is already registered")
            self.functions[body["id"]] = {**body, "is_active": False, "valves": None}
            return self.functions[body["id"]]
        function = self.functions.get(parts[1]) if len(parts) > 1 else None
        if function is None:
            return _error(401, "We could not find what you're looking for :/")
        if len(parts) == 2:
            return function
        if parts[2] == "update":
            function.update(name=body["name"], content=body["content"], meta=body["meta"])
            return function
        if parts[2] == "toggle":
            function["is_active"] = not function["is_active"]
            return function
        if parts[2:] == ["valves"]:
            return function["valves"]
        if parts[2:] == ["valves", "update"]:
            function["valves"] = body
            return body
        return _error(404, "no such route")


class _Response(io.BytesIO):
    def __init__(self, answer: Any) -> None:
        if isinstance(answer, urllib.error.HTTPError):
            raise answer
        super().__init__(json.dumps(answer).encode())


def _error(code: int, detail: str) -> urllib.error.HTTPError:
    return urllib.error.HTTPError("http://owui", code, detail, {}, io.BytesIO(json.dumps({"detail": detail}).encode()))


def _api(fake: FakeOpenWebUI) -> Api:
    api = Api("http://owui:8080", opener=fake)
    api.sign_in("admin@example.com", "pw")
    return api


def test_a_fresh_install_creates_activates_configures_and_lists_the_model() -> None:
    fake, lines = FakeOpenWebUI(), []
    models = install(_api(fake), valves={"GATEWAY_URL": "ws://gw:18789"}, report=lines.append)
    assert models == ["openclaw.main"]
    assert set(fake.functions) == {"openclaw", "openclaw_startup", "openclaw_thinking", "openclaw_status"}
    assert fake.models["openclaw.main"]["meta"]["filterIds"] == ["openclaw_thinking"]
    assert fake.models["openclaw.main"]["meta"]["actionIds"] == ["openclaw_status"]
    assert all(f["is_active"] for f in fake.functions.values())
    assert fake.functions["openclaw"]["content"] == function_source("openclaw_pipe.py")
    assert fake.functions["openclaw"]["valves"] == {"GATEWAY_URL": "ws://gw:18789"}
    assert lines[0] == "created openclaw (OpenClaw)" and "activated openclaw" in lines
    assert lines[-1] == "models: openclaw.main"


def test_a_second_install_updates_in_place_and_keeps_the_valves() -> None:
    fake = FakeOpenWebUI()
    install(_api(fake), valves={"GATEWAY_URL": "ws://gw:18789", "GATEWAY_TOKEN": "secret"}, report=lambda _: None)
    fake.functions["openclaw"]["content"] = "old content"
    lines: list[str] = []
    install(_api(fake), valves={"AGENT_ID": "ops"}, report=lines.append)
    pipe = fake.functions["openclaw"]
    assert pipe["content"] == function_source("openclaw_pipe.py") and pipe["is_active"]
    assert pipe["valves"] == {"GATEWAY_URL": "ws://gw:18789", "GATEWAY_TOKEN": "secret", "AGENT_ID": "ops"}
    assert "updated openclaw (OpenClaw) in place; its valves are kept" in lines
    assert not any("secret" in line for line in lines)  # a valve's value is never reported
    assert not any(line.startswith("activated") for line in lines)  # already on: not toggled off


def test_a_user_who_is_not_an_admin_or_a_wrong_password_is_refused_clearly() -> None:
    with pytest.raises(InstallError, match="not an admin"):
        _api(FakeOpenWebUI(role="user"))
    with pytest.raises(InstallError, match="HTTP 400"):
        Api("http://owui:8080", opener=FakeOpenWebUI()).sign_in("admin@example.com", "wrong")


def test_the_function_files_are_open_webui_functions_of_the_right_type() -> None:
    """Open WebUI takes the frontmatter only when line 1 is exactly three quotes, and the type from the class."""
    pipe, event = function_source("openclaw_pipe.py"), function_source("openclaw_startup.py")
    assert pipe.splitlines()[0] == '"""' and "\nclass Pipe:" in pipe and "title: OpenClaw\n" in pipe
    assert event.splitlines()[0] == '"""' and "\nclass Event:" in event
    status = function_source("openclaw_status.py")
    assert status.splitlines()[0] == '"""' and "\nclass Action:" in status and "title: OpenClaw status\n" in status


# --- the status Action (issue 29): installed with the others, attached to owc's models, never global -------------


def test_install_adds_the_status_action_attached_to_owcs_models_and_never_global() -> None:
    fake, lines = FakeOpenWebUI(), []
    install(_api(fake), report=lines.append)
    action = fake.functions["openclaw_status"]
    assert action["is_active"] and action["content"] == function_source("openclaw_status.py")
    assert action["name"] == "OpenClaw status" and not action.get("is_global")
    row = fake.models["openclaw.main"]
    assert row["meta"] == {"filterIds": ["openclaw_thinking"], "actionIds": ["openclaw_status"]}
    assert row["base_model_id"] is None and row["name"] == "OpenClaw"
    assert "created openclaw_status (OpenClaw status)" in lines and "activated openclaw_status" in lines
    assert "attached openclaw_status to openclaw.main" in lines
    writes = [c for c in fake.calls if c[1] in ("/api/v1/models/create", "/api/v1/models/model/update")]
    assert writes == [("POST", "/api/v1/models/create")]  # the Filter and the Action in one row write


@pytest.mark.parametrize(
    "listed", ["OpenClaw (wrong token: see GATEWAY_TOKEN valve)", "OpenClaw (Gateway not reached)"]
)
def test_a_row_made_while_the_gateway_refuses_gets_the_lasting_name(listed: str) -> None:
    """Open WebUI shows a model row's name over the Pipe's live one: the row must not keep what only held at the
    install (W tier: the picker kept "(wrong token ...)" after the right token was saved)."""
    fake = FakeOpenWebUI()
    fake.listed_name = listed
    install(_api(fake), report=lambda line: None)
    assert fake.models["openclaw.main"]["name"] == "OpenClaw"


def test_a_row_the_admin_edited_keeps_its_settings_and_actions_and_gets_the_action_once() -> None:
    fake = FakeOpenWebUI()
    install(_api(fake), report=lambda _: None)
    fake.models["openclaw.main"] = {
        "id": "openclaw.main",
        "base_model_id": None,
        "name": "My agent",
        "meta": {"description": "kept", "filterIds": ["openclaw_thinking"], "actionIds": ["their_action"]},
        "params": {"system": "kept"},
        "is_active": False,
    }
    again: list[str] = []
    install(_api(fake), report=again.append)
    row = fake.models["openclaw.main"]
    assert row["meta"] == {
        "description": "kept",
        "filterIds": ["openclaw_thinking"],
        "actionIds": ["their_action", "openclaw_status"],
    }
    assert row["name"] == "My agent" and row["params"] == {"system": "kept"} and row["is_active"] is False
    assert "attached openclaw_status to openclaw.main (its other settings kept)" in again
    assert not any("openclaw_thinking to" in line for line in again)  # already there: not added again
    third: list[str] = []
    install(_api(fake), report=third.append)
    assert not any(line.startswith("attached") for line in third)
    assert fake.models["openclaw.main"]["meta"]["actionIds"] == ["their_action", "openclaw_status"]


def test_an_action_made_global_by_an_admin_is_said_and_left() -> None:
    fake = FakeOpenWebUI()
    install(_api(fake), report=lambda _: None)
    fake.functions["openclaw_status"]["is_global"] = True
    lines: list[str] = []
    install(_api(fake), report=lines.append)
    assert fake.functions["openclaw_status"]["is_global"] is True  # the admin's choice: not undone
    assert any(line.startswith("warning: openclaw_status is global") for line in lines)
    assert not any(c[1].endswith("/openclaw_status/toggle/global") for c in fake.calls)


# --- redirects (issue 24 item 13): a real HTTP server on 127.0.0.1 ---------------------------------------------


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every request per ``server.answer(handler)``; records (method, path, Authorization) of each."""

    def _any(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append((self.command, self.path, self.headers.get("Authorization"), body))  # type: ignore[attr-defined]
        code, headers, payload = self.server.answer(self)  # type: ignore[attr-defined]
        self.send_response(code)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _any

    def log_message(self, *args: Any) -> None:  # quiet
        pass


@contextlib.contextmanager
def _server(answer: Any) -> Iterator[http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.seen = []  # type: ignore[attr-defined]
    server.answer = answer  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _json(value: Any) -> tuple[int, dict[str, str], bytes]:
    return 200, {"Content-Type": "application/json"}, json.dumps(value).encode()


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_no_redirect_is_followed_with_the_admins_token(code: int) -> None:
    """``owc owui install`` signs in, then calls with the admin's token. A server that redirects a call to
    another origin (another port) never sees the token: the install stops with one line naming the address."""

    def elsewhere(handler: Any) -> tuple[int, dict[str, str], bytes]:
        return _json({"token": "stolen?", "role": "admin"})

    with _server(elsewhere) as other:
        target = f"http://127.0.0.1:{other.server_address[1]}/owui"

        def owui(handler: Any) -> tuple[int, dict[str, str], bytes]:
            if handler.path == "/api/v1/auths/signin":
                return _json({"token": "jwt-secret", "role": "admin"})
            return code, {"Location": target + handler.path}, b""

        with _server(owui) as first:
            api = Api(f"http://127.0.0.1:{first.server_address[1]}")
            api.sign_in("admin@example.com", "pw")
            with pytest.raises(InstallError) as info:
                install(api, report=lambda line: None)
        assert [(m, p) for m, p, _, _ in first.seen] == [
            ("POST", "/api/v1/auths/signin"),
            ("GET", "/api/v1/functions/id/openclaw"),
        ]
        assert first.seen[1][2] == "Bearer jwt-secret"
        assert other.seen == []  # neither the token nor anything else reached the other origin
    line = str(info.value)
    assert f"HTTP {code}" in line and f"pass --url {target} " in line and "jwt-secret" not in line
    assert "\n" not in line


def test_the_sign_in_is_not_redirected_either() -> None:
    """The sign-in's password goes nowhere but ``--url`` (a same-origin redirect is refused too: one rule), and
    the line names the address to pass: ``http`` to ``https`` is the usual case."""

    def owui(handler: Any) -> tuple[int, dict[str, str], bytes]:
        return 307, {"Location": "/webui" + handler.path + "?next=%2F\r"}, b""

    with _server(owui) as server:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(InstallError) as info:
            Api(base).sign_in("admin@example.com", "pw")
    assert len(server.seen) == 1 and server.seen[0][:2] == ("POST", "/api/v1/auths/signin")
    assert f"pass --url {base}/webui " in str(info.value)
