"""``owc owui install`` (``owc/owui/install.py``) against a stand-in for Open WebUI 0.12.4's admin routes.

``FakeOpenWebUI`` answers as ``open_webui/routers/functions.py`` does where the installer touches it: a Function it
does not have is HTTP 401 (``get_function_by_id``), a created Function is inactive, ``toggle`` flips it, ``update``
replaces the content and leaves the valves, ``GET /api/models`` lists an active manifold Pipe's models. The real
server is the W tier's."""

from __future__ import annotations

import io
import json
import urllib.error
from typing import Any

import pytest

from owc.owui.install import Api, InstallError, function_source, install


class FakeOpenWebUI:
    def __init__(self, *, role: str = "admin") -> None:
        self.functions: dict[str, dict[str, Any]] = {}
        self.role = role
        self.calls: list[tuple[str, str]] = []

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
                    {"id": f"{fid}.main"}
                    for fid, f in self.functions.items()
                    if f["is_active"] and "class Pipe" in f["content"]
                ]
            }
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
    assert set(fake.functions) == {"openclaw", "openclaw_startup"}
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
