"""Run inside the Open WebUI server venv (``tests/test_owui_page.py``): owc's patches (``owc/owui/page.py``) on the
REAL Open WebUI 0.12.4 app, in process, through Starlette's test client (no server, no lifespan: no Redis, so the
stop records stay in the process). Prints one JSON object of what it saw; the test judges it."""

from __future__ import annotations

import asyncio
import io
import json
import logging

out: dict = {}
lines = io.StringIO()
handler = logging.StreamHandler(lines)
handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
logging.getLogger("owc").addHandler(handler)
logging.getLogger("owc").setLevel(logging.INFO)

from fastapi.routing import APIRoute  # noqa: E402
from open_webui.main import app  # noqa: E402
from open_webui.socket.main import sio  # noqa: E402
from open_webui.utils.auth import create_token  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from owc.owui import intent_hook, page  # noqa: E402
from owc.rules.intent import HEADER  # noqa: E402

client = TestClient(app)
STOP = "/api/tasks/chat/{chat_id:path}/stop"
stop_route = next(r for r in app.router.routes if isinstance(r, APIRoute) and r.path == STOP)
their_stop, their_socket = stop_route.app, sio.handlers["/"]["events:chat"]


def loader() -> dict:
    r = client.get("/static/loader.js")
    return {"status": r.status_code, "body": r.text, "cache": r.headers.get("cache-control")}


def index(path: str, **headers: str) -> dict:
    r = client.get(path, headers=headers)
    return {
        "status": r.status_code,
        "body": r.text,
        "cache": r.headers.get("cache-control"),
        "etag": r.headers.get("etag"),
    }


out["before"] = {"loader": loader(), "index": index("/")}
etag = out["before"]["index"]["etag"]
out["before"]["index_not_modified"] = index("/", **{"If-None-Match": etag or ""})["status"]

book = page.install(app)
out["same_book"] = page.install(app) is book  # a second start (the Pipe's first call): nothing patched twice
out["routes_named_loader"] = sum(1 for r in app.router.routes if getattr(r, "path", None) == "/static/loader.js")
out["after"] = {
    "loader": loader(),
    "home": index("/", **{"If-None-Match": etag or "", "If-Modified-Since": "Wed, 01 Jan 2100 00:00:00 GMT"}),
    "chat_page": index("/c/0b7c2a8e-5d1f-4c6a-9e0b-0123456789ab"),
    "asset": client.get("/manifest.json").status_code,
    "favicon_not_modified": None,
}
favicon = client.get("/favicon.png")
out["after"]["favicon_not_modified"] = client.get(
    "/favicon.png", headers={"If-None-Match": favicon.headers.get("etag", "")}
).status_code  # an asset keeps its 304
out["hook"] = {"script": intent_hook.LOADER_SCRIPT, "version": intent_hook.VERSION}

token = create_token({"id": "user-1"})
bearer = {"Authorization": f"Bearer {token}"}
answers = [
    client.post("/api/tasks/chat/chat-1/stop", headers={**bearer, HEADER: "send_now"}).status_code,
    client.post("/api/tasks/chat/chat-1/stop", headers={**bearer, HEADER: "stop"}).status_code,
    client.post("/api/tasks/chat/chat-1/stop", headers=bearer).status_code,  # no tag: a script, another client
    client.post("/api/tasks/chat/chat-1/stop", headers={HEADER: "stop"}).status_code,  # no session: not recorded
    client.post("/api/tasks/chat/chat-1/stop", headers={HEADER: "stop", "Cookie": f"token={token}"}).status_code,
]
out["stop_answers"] = answers
# The route the question dialogs post to (issue 27): no session, a bad body, and (owc not started in this process)
# the line saying the answer was not sent; each a status and one line, never a traceback.
QUESTION = "/api/owc/questions/ask_0123"
out["question_answers"] = [
    [r.status_code, r.json().get("detail")]
    for r in (
        client.post(QUESTION, json={"cancel": True}),
        client.post(QUESTION, headers=bearer, content=b"not json"),
        client.post(QUESTION, headers=bearer, json={"answers": {"a": "x"}}),
        client.post(QUESTION, headers=bearer, json={"answers": {"a": ["x"]}}),
        client.post(QUESTION, headers={"Cookie": f"token={token}"}, json={"cancel": True}),
        client.post(QUESTION, headers=bearer, content=b'{"answers": {"a": ["' + b"x" * 70_000 + b'"]}}'),
    )
]
# The status view's routes (issue 29): no session, a token naming no user, a chat id that is not one; each a
# status and one line, before anything reaches the Gateway.
STATUS = "/api/owc/status/7c9e6679-7425-40de-944b-e07fc1f90ae7"
out["status_answers"] = [
    [r.status_code, r.json().get("detail")]
    for r in (
        client.get(STATUS),
        client.get(STATUS + "/live", headers=bearer),
        client.post(STATUS + "/compact", headers={"Cookie": f"token={token}"}),
        client.get(STATUS + "/subagents/t1"),
        client.get("/api/owc/status/not%20a%20chat", headers=bearer),
    )
]
out["records"] = [[r.kind.value, r.user_id] for r in asyncio.run(book.records("chat-1"))]
out["socket_wrapped"] = sio.handlers["/"]["events:chat"] is not their_socket
out["stop_wrapped"] = stop_route.app is not their_stop

page.uninstall()
out["undone"] = {
    "loader": loader(),
    "index": index("/"),
    "stop_route": stop_route.app is their_stop,
    "socket": sio.handlers["/"]["events:chat"] is their_socket,
    "question_route": client.post(QUESTION, headers=bearer, json={"cancel": True}).status_code,
}

# An Open WebUI shaped otherwise: no stop route, no SPA mount. Each part says in one line what changed; the rest
# still installs, and Open WebUI's own routes work as before.
app.router.routes.remove(stop_route)
spa = next(r for r in app.router.routes if getattr(r, "name", None) == "spa-static-files")
spa.name = "frontend"
lines.truncate(0)
lines.seek(0)
page.install(app)
out["changed"] = {"log": lines.getvalue().splitlines(), "loader": loader()}
page.uninstall()
print(json.dumps(out))
