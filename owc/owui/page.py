"""owc in Open WebUI's page and Stop route: what tells a Stop from "Send now" in every tab (issue 25, item 1).

Open WebUI 0.12.4's server cannot tell its Stop button from "Send now": both send the same
``POST /api/tasks/chat/{id}/stop``. The page can, so owc (``owc.owui.intent_hook``) tags each stop request with
the control that made it, and reads the tag here, in the process, before Open WebUI's handler cancels anything
(``owc.rules.intent`` decides). Four patches of Open WebUI's running app, each installed once per process from
owc's start (every worker and instance runs owc's startup Event Function), each undone at shutdown, and each
failure one log line naming what Open WebUI changed (Open WebUI's own Stop works regardless):

* **the hook with every page**: a route for ``/static/loader.js`` in front of the ``/static`` mount, serving Open
  WebUI's own file (empty in 0.12.4) with the hook appended, ``Cache-Control: no-cache``;
* **a versioned loader URL in ``index.html``**: the page's ``<script src="/static/loader.js">`` becomes
  ``/static/loader.js?owc=<hook version>``, because a browser that once cached the empty file keeps using it
  (served with no ``Cache-Control``, its heuristic freshness is a tenth of the server's uptime: measured, a
  profile holding a 10-day-old copy never asked again), while ``index.html`` is revalidated on every load. The
  SPA mount's conditional headers are dropped for pages, so it never answers 304 with the old tag;
* **the stop route's record**: the route's ASGI app is wrapped to record ``(chat, what the tag said, who sent
  it)`` and only then call Open WebUI's handler. With Redis (several workers or instances) the record is written
  to Open WebUI's Redis and awaited first: the handler then publishes the cancel, so the worker holding the task
  reads the record after the write. Without Redis, one process holds every task and the record stays in it;
* **the fallback for a page loaded before owc was**: the Socket.IO ``events:chat`` handler is wrapped, and a
  session's first ``last_read_at`` for a chat (sent once the page has loaded the chat's history) is answered with
  an ``execute`` event installing the hook. Not at ``join``: the page joins before it holds the history and
  drops an ``execute`` about a message it does not hold (measured 1 of 6 answered, against 6 of 6).

None of this is a documented Open WebUI API (like ``EVENT_SINKS``): re-check the route path, the mount names, the
``loader.js`` tag and ``Chat.svelte``'s ``execute`` gating on every Open WebUI upgrade.
"""

from __future__ import annotations

import functools
import logging
import os
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
import attrs

from owc.owui import health, questions, status, trio_host
from owc.owui.intent_hook import LOADER_SCRIPT, VERSION, install_code
from owc.rules.intent import HEADER, KEEP, MAX_ID, Kind, StopLog, StopRecord, kind_of

log = logging.getLogger("owc.owui")

#: Open WebUI 0.12.4's stop endpoint (``main.py``): the page's Stop, Escape and "Send now" all call it.
STOP_ROUTE = "/api/tasks/chat/{chat_id:path}/stop"
LOADER_PATH = "/static/loader.js"
#: How ``index.html`` loads it (``frontend/index.html``).
LOADER_TAG = 'src="/static/loader.js"'
LOADER_URL = f"{LOADER_PATH}?owc={VERSION}"
#: The mounts (``main.py``): the build's static files, and the single-page app (``index.html`` for any page).
STATIC_MOUNT = "static"
SPA_MOUNT = "spa-static-files"
#: Redis drops a chat's records a day after its last stop. Storage upkeep, not a decision: a record is read by the
#: cancel its own request causes, within milliseconds.
RECORD_TTL_S = 86_400
#: (session, chat) pairs sent the hook at their first open, remembered so each is sent it once (bounded: one sent
#: again after being forgotten only installs a hook the tab has).
OPENED_KEEP = 8192
_CONDITIONAL = (b"if-none-match", b"if-modified-since")


class Changed(Exception):
    """Open WebUI is not shaped as 0.12.4 where a patch goes: the message names what changed and what it costs."""


@attrs.define(eq=False)
class StopBook:
    """The stop records: in Open WebUI's Redis when it has one (every worker and instance writes and reads the
    same), else in this process (which then serves every stop request and holds every task)."""

    app: Any
    local: StopLog = attrs.field(factory=StopLog)

    @property
    def _redis(self) -> Any:
        return getattr(getattr(self.app, "state", None), "redis", None)

    @staticmethod
    def _key(chat_id: str) -> str:
        from open_webui.env import REDIS_KEY_PREFIX

        return f"{REDIS_KEY_PREFIX}:owc:stops:{chat_id}"

    async def record(self, chat_id: str, kind: Kind, user_id: str) -> StopRecord:
        record = StopRecord(uuid.uuid4().hex, kind, user_id)
        redis = self._redis
        if redis is None:
            self.local.add(chat_id, record)
            return record
        key = self._key(chat_id)
        pipe = redis.pipeline(transaction=False)  # one key: no cross-slot trouble on a Redis cluster
        pipe.rpush(key, record.encode())
        pipe.ltrim(key, -KEEP, -1)
        pipe.expire(key, RECORD_TTL_S)
        await pipe.execute()
        return record

    async def records(self, chat_id: str) -> tuple[StopRecord, ...]:
        redis = self._redis
        if redis is None:
            return self.local.records(chat_id)
        raw = await redis.lrange(self._key(chat_id), 0, -1)
        return tuple(r for r in (StopRecord.decode(x) for x in raw or ()) if r is not None)


@attrs.define(eq=False)
class _Page:
    """What this process patched, and how to undo it."""

    app: Any
    book: StopBook
    parts: list[str] = attrs.field(factory=list)
    undo: list[Callable[[], None]] = attrs.field(factory=list)
    #: Sessions sent the hook at their first open of a chat.
    opened: OrderedDict[tuple[str, str], None] = attrs.field(factory=OrderedDict)
    #: The hook's sends in flight: tasks of the host's task group, held here so ``uninstall`` ends them.
    sends: set[trio_host.OwnedTask] = attrs.field(factory=set)


#: This process's patches (Open WebUI's app is one per process; a Function file re-executed keeps them).
_PAGE: _Page | None = None


def install(app: Any) -> StopBook:
    """Patch Open WebUI's ``app`` (once per process; again for another app, as tests make). Each part that cannot
    be installed is one log line; the rest still are."""
    global _PAGE
    if _PAGE is not None and _PAGE.app is app:
        return _PAGE.book
    if _PAGE is not None:
        uninstall()
    page = _Page(app, StopBook(app))
    for name, part in (
        ("loader", _serve_loader),
        ("index", _version_loader_url),
        ("stop_route", _record_stops),
        ("socket", _hook_on_open),
        ("questions", _answer_questions),
        ("status", _status_routes),
        ("health", _health_route),
    ):
        try:
            page.undo.append(part(page))
            page.parts.append(name)
        except Changed as exc:
            log.warning("owui.page_patch_failed part=%s: %s", name, exc)
        except Exception as exc:  # an Open WebUI shaped in a way nobody foresaw: still one line
            log.warning("owui.page_patch_failed part=%s: %s: %s", name, type(exc).__name__, exc)
    _PAGE = page
    log.info("owui.page_patched parts=%s hook=%s pid=%d", ",".join(page.parts) or "none", VERSION, os.getpid())
    return page.book


def uninstall() -> None:
    """Undo every patch (Open WebUI is stopping); Open WebUI's own routes and handler are back."""
    global _PAGE
    page, _PAGE = _PAGE, None
    if page is None:
        return
    for undo in reversed(page.undo):
        try:
            undo()
        except Exception as exc:
            log.warning("owui.page_unpatch_failed: %s: %s", type(exc).__name__, exc)
    for send in page.sends:
        send.cancel()
    log.info("owui.page_unpatched parts=%s", ",".join(page.parts) or "none")


def stop_book(app: Any) -> StopBook:
    """The stop records ``app``'s stop route writes (a fresh view of Open WebUI's Redis, or an empty log, if owc
    patched nothing here: then nothing is ever recorded and every cancel's intent is unknown)."""
    if _PAGE is not None and _PAGE.app is app:
        return _PAGE.book
    return StopBook(app)


def _mount(app: Any, name: str) -> Any:
    from starlette.routing import Mount

    for route in app.router.routes:
        if isinstance(route, Mount) and route.name == name:
            return route
    raise Changed(f"Open WebUI has no mount named {name!r}")


# ---------------------------------------------------------------------------------------------- the hook served


def _serve_loader(page: _Page) -> Callable[[], None]:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    app = page.app
    static = _mount(app, STATIC_MOUNT)
    directory = getattr(static.app, "directory", None)
    if directory is None:
        raise Changed(f"the {STATIC_MOUNT!r} mount serves no directory: no page gets the hook with it")
    own = Path(directory, "loader.js")
    try:
        theirs = own.read_text(encoding="utf-8")  # Open WebUI's own (0 bytes in 0.12.4; an admin's if customized)
    except FileNotFoundError:
        theirs = ""
    body = ((theirs.rstrip() + "\n") if theirs.strip() else "") + LOADER_SCRIPT

    async def loader(request: Request) -> Response:
        return Response(body, media_type="text/javascript", headers={"Cache-Control": "no-cache"})

    route = Route(LOADER_PATH, loader, methods=["GET"], name="owc-loader")
    app.router.routes.insert(0, route)  # before the /static mount: Starlette matches routes in order

    def undo() -> None:
        if route in app.router.routes:
            app.router.routes.remove(route)

    return undo


def _is_page(path: str) -> bool:
    """A path the single-page app answers with ``index.html`` (``'.'`` is ``/``), not one of its assets."""
    last = path.rstrip("/").rsplit("/", 1)[-1]
    return path in ("", ".") or "." not in last or last.endswith(".html")


def _version_loader_url(page: _Page) -> Callable[[], None]:
    from starlette.responses import FileResponse, Response

    spa = _mount(page.app, SPA_MOUNT).app
    original = spa.get_response
    folders = list(getattr(spa, "all_directories", None) or [getattr(spa, "directory", None)])
    index = next((Path(f, "index.html") for f in folders if f and Path(f, "index.html").is_file()), None)
    if index is None:
        raise Changed(f"the {SPA_MOUNT!r} mount has no index.html: a cached loader.js can keep a page without the hook")
    if LOADER_TAG not in index.read_text(encoding="utf-8"):
        raise Changed(f"index.html has no {LOADER_TAG}: pages get the hook only when they open a chat")
    rewritten: dict[str, bytes] = {}  # per file: Open WebUI's build does not change while it runs

    async def get_response(path: str, scope: Any) -> Any:
        is_page = _is_page(path)
        if is_page:  # never "304 Not Modified" for a page: the browser would keep its copy with the old tag
            scope = {**scope, "headers": [(k, v) for k, v in scope.get("headers", ()) if k.lower() not in _CONDITIONAL]}
        response = await original(path, scope)
        file = str(getattr(response, "path", "") or "")
        if not (is_page and isinstance(response, FileResponse) and file.endswith(".html")):
            return response
        if file not in rewritten:
            # Off the loop; a cancelled request does not wait for the read (as Open WebUI's own page handling).
            read = functools.partial(Path(file).read_text, encoding="utf-8")
            html = await anyio.to_thread.run_sync(read, abandon_on_cancel=True)
            rewritten[file] = html.replace(LOADER_TAG, f'src="{LOADER_URL}"').encode("utf-8")
        return Response(
            rewritten[file],
            status_code=response.status_code,
            media_type="text/html",
            headers={"Cache-Control": "no-cache"},
        )

    spa.get_response = get_response  # an instance attribute over the class's method

    def undo() -> None:
        if spa.__dict__.get("get_response") is get_response:
            del spa.get_response

    return undo


# ---------------------------------------------------------------------------------------------- the stop route


def _record_stops(page: _Page) -> Callable[[], None]:
    from fastapi.routing import APIRoute
    from open_webui.utils.auth import decode_token  # Open WebUI's own check of the page's session token

    route = next(
        (
            r
            for r in page.app.router.routes
            if isinstance(r, APIRoute) and r.path == STOP_ROUTE and "POST" in (r.methods or ())
        ),
        None,
    )
    if route is None:
        raise Changed(f"no route POST {STOP_ROUTE}: a Stop cannot be told from Send now (the run goes on)")
    original = route.app

    async def stop_route(scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            await _record(page, scope, decode_token)
        await original(scope, receive, send)  # Open WebUI's own Stop, whatever happened above

    route.app = stop_route

    def undo() -> None:
        if route.app is stop_route:
            route.app = original

    return undo


def _session_token(headers: dict[bytes, bytes]) -> str | None:
    """The session token a request carries, as Open WebUI reads it (the bearer, else the ``token`` cookie); None
    for none or an API key."""
    token = ""
    auth = headers.get(b"authorization", b"").decode("latin-1")
    if auth[:7].lower() == "bearer ":
        token = auth[7:].strip()
    if not token:
        for part in headers.get(b"cookie", b"").decode("latin-1").split(";"):
            name, _, value = part.strip().partition("=")
            if name == "token":
                token = value.strip()
    if not token or token.startswith("sk-"):
        return None
    return token


def _sender(headers: dict[bytes, bytes], decode_token: Callable[[str], Any]) -> str | None:
    """The user whose session token the request carries, checked with Open WebUI's own secret; None for an API key,
    no token or a bad one. (A stop's record is a hint read by its own cancel: the signature is enough there.)"""
    token = _session_token(headers)
    if token is None:
        return None
    decoded = decode_token(token)
    user_id = decoded.get("id") if isinstance(decoded, dict) else None
    return user_id if isinstance(user_id, str) and 0 < len(user_id) <= MAX_ID else None


async def _record(page: _Page, scope: Any, decode_token: Callable[[str], Any]) -> None:
    """Record one stop request before Open WebUI's handler runs. A failure is one line: the stop goes on."""
    chat_id = (scope.get("path_params") or {}).get("chat_id")
    try:
        headers = {k.lower(): v for k, v in scope.get("headers", ())}
        kind = kind_of(headers.get(HEADER.encode()))
        user_id = _sender(headers, decode_token)
        if not (isinstance(chat_id, str) and 0 < len(chat_id) <= MAX_ID) or user_id is None:
            # Nobody's record decides nothing: not stored (an anonymous caller cannot fill the store).
            log.info(
                "owui.stop_sign chat=%s said=%s unrecorded (no session token) pid=%d", chat_id, kind.value, os.getpid()
            )
            return
        record = await page.book.record(chat_id, kind, user_id)
    except Exception as exc:
        log.warning(
            "owui.stop_sign_unrecorded chat=%s: %s: %s (this stop's intent will be unknown)",
            chat_id,
            type(exc).__name__,
            exc,
        )
        return
    log.info("owui.stop_sign chat=%s said=%s record=%s pid=%d", chat_id, kind.value, record.id, os.getpid())


def _verifier(page: _Page) -> Callable[[dict[bytes, bytes]], Awaitable[str | None]]:
    """The user a request's session token names, checked as Open WebUI checks its own API's: signature, session
    stamp (a changed password), revocation (a sign-out), the token's type, the user still existing and verified."""
    from open_webui.utils.auth import get_verified_user_by_token
    from starlette.exceptions import HTTPException

    async def verified(headers: dict[bytes, bytes]) -> str | None:
        token = _session_token(headers)
        if token is None:
            return None
        try:
            user = await get_verified_user_by_token(token, getattr(page.app.state, "redis", None))
        except HTTPException as exc:  # Open WebUI's own refusal of the token (its words name no fix for a person)
            if exc.status_code in (401, 403):
                return None
            raise
        user_id = getattr(user, "id", None)
        return user_id if isinstance(user_id, str) else None

    return verified


def _routes(page: _Page, added: list[Any]) -> Callable[[], None]:
    for route in reversed(added):
        page.app.router.routes.insert(0, route)  # before the single-page app's mount, which takes every other path

    def undo() -> None:
        for route in added:
            if route in page.app.router.routes:
                page.app.router.routes.remove(route)

    return undo


def _answer_questions(page: _Page) -> Callable[[], None]:
    """The route the Gateway's question dialogs post their answers to (``owc.owui.questions``): an answer decides
    for a person, so the token is checked as Open WebUI's own API's."""
    return _routes(page, [questions.answer_route(_verifier(page))])


def _status_routes(page: _Page) -> Callable[[], None]:
    """The status view's routes (``owc.owui.status``): the status Action's panel reads them."""
    return _routes(page, status.routes(_verifier(page)))


def _health_route(page: _Page) -> Callable[[], None]:
    """``GET /api/owc/health`` (``owc.owui.health``, issue 30): for ``owc owui status`` and the smoke check of
    ``owc owui install`` / ``migrate``; an admin's session token only, checked as Open WebUI checks its own API's."""
    from open_webui.utils.auth import get_verified_user_by_token
    from starlette.exceptions import HTTPException

    async def is_admin(headers: dict[bytes, bytes]) -> bool | None:
        token = _session_token(headers)
        if token is None:
            return None
        try:
            user = await get_verified_user_by_token(token, getattr(page.app.state, "redis", None))
        except HTTPException as exc:
            if exc.status_code in (401, 403):
                return None
            raise
        if user is None:  # Open WebUI's answer for a token it does not accept: no sign-in (401), not a user (403)
            return None
        return getattr(user, "role", None) == "admin"

    return _routes(page, [health.route(is_admin)])


# ---------------------------------------------------------------------------------------------- the socket fallback


def _hook_on_open(page: _Page) -> Callable[[], None]:
    from open_webui.socket.main import sio

    handlers = (getattr(sio, "handlers", None) or {}).get("/")
    original = handlers.get("events:chat") if isinstance(handlers, dict) else None
    if original is None:
        raise Changed("Socket.IO has no 'events:chat' handler: a page loaded before owc gets the hook only later")

    async def events_chat(sid: Any, data: Any, *rest: Any) -> Any:
        result = await original(sid, data, *rest)
        try:
            _opened(page, sid, data)
        except Exception as exc:
            log.warning("owui.hook_send_failed: %s: %s", type(exc).__name__, exc)
        return result

    handlers["events:chat"] = events_chat

    def undo() -> None:
        if handlers.get("events:chat") is events_chat:
            handlers["events:chat"] = original

    return undo


def _opened(page: _Page, sid: Any, data: Any) -> None:
    """A session's ``events:chat``: at its first ``last_read_at`` of a chat (the page holds the chat's history
    now), send it the hook."""
    if not isinstance(data, dict) or not isinstance(data.get("data"), dict):
        return
    chat_id = data.get("chat_id")
    if data["data"].get("type") != "last_read_at" or not isinstance(chat_id, str) or not isinstance(sid, str):
        return
    # Every open of a chat (not only the first): a question waiting there is shown (issue 27).
    questions.tab_opened(sid, chat_id, page.sends)
    key = (sid, chat_id)
    if key in page.opened:
        return
    page.opened[key] = None
    while len(page.opened) > OPENED_KEEP:
        page.opened.popitem(last=False)
    # A task of the host's group, held by the page (ended by uninstall); each ends with its one emit.
    host = trio_host.process_host()
    if host is None:
        raise trio_host.HostClosed("owc has not started in this process")
    host.start_asyncio(_send_hook, sid, chat_id, owner=page.sends)


async def _send_hook(sid: str, chat_id: str) -> None:
    """The hook as an ``execute`` event to one session, about the chat's current message (the page runs an
    ``execute`` only for a message it holds), if the session's user may read the chat."""
    from open_webui.models.chats import Chats
    from open_webui.models.users import Users
    from open_webui.socket.main import get_socket_session_user, sio

    try:
        user = await get_socket_session_user(sid, wait_for_disconnect=False)
        reader = await Users.get_user_by_id(user["id"]) if user else None
        chat = await Chats.get_accessible_chat_by_id(chat_id, reader) if reader else None
        history = ((getattr(chat, "chat", None) or {}).get("history") or {}) if chat else {}
        message_id = history.get("currentId")
        if not isinstance(message_id, str):
            return
        hook = {"type": "execute", "data": {"code": install_code()}}
        await sio.emit("events", {"chat_id": chat_id, "message_id": message_id, "data": hook}, to=sid)
    except Exception as exc:
        log.warning("owui.hook_send_failed chat=%s: %s: %s", chat_id, type(exc).__name__, exc)
