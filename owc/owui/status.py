"""The status view's routes in Open WebUI (issue 29): what the status Action's page panel reads, live, and its Compact.

The panel (``owc.owui.status_panel``) runs in the person's tab and calls these with the page's own session token, on
whichever worker the load balancer picks: every worker's owc has its own Gateway connection, and each answers from
it (no second connection, no second pairing: the runtime's). Each route checks the token as Open WebUI checks its
own API's (``verified``), and that the person owns the chat (the chat's session key is its owner's): the view of a
chat is its owner's alone, as Open WebUI's own Action route requires (``verify_chat_ownership``).

* ``GET  /api/owc/status/{chat}``: the view now (``owc.render.status_view``);
* ``GET  /api/owc/status/{chat}/live``: NDJSON, the view now and again after each change the Gateway reports
  (``StatusDesk.watching``), until the panel closes the request: live without a poll timer;
* ``POST /api/owc/status/{chat}/compact``: ``sessions.compact``; its line for the person and the HTTP status;
* ``GET  /api/owc/status/{chat}/subagents/{task}`` and ``.../live``: one sub-agent's drawer (read-only).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson

from owc import ids
from owc.owui import trio_host
from owc.runs.status import StatusDesk

log = logging.getLogger("owc.owui")

PREFIX = "/api/owc/status/"
SIGN_IN = "Sign in to Open WebUI to see this chat's status."
NOT_YOURS = "This chat is not yours: its status is its owner's to see."
NOT_RUNNING = "owc is not running here: no status to show."
_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")

Verified = Callable[[dict[bytes, bytes]], Awaitable[str | None]]


def _desk() -> tuple[trio_host.TrioHost, Any, StatusDesk]:
    """The running host, its runtime and the status desk; ``HostError`` if owc is not running here."""
    host = trio_host.current_host()
    runtime = getattr(host, "started_value", None)
    desk = getattr(getattr(runtime, "keeper", None), "status", None)
    if host is None or not isinstance(desk, StatusDesk):
        raise trio_host.HostError("owc is not running")
    return host, runtime, desk


def _json(value: Any, status: int = 200) -> Any:
    from starlette.responses import Response

    return Response(orjson.dumps(value), status_code=status, media_type="application/json")


def _line(line: str, status: int) -> Any:
    return _json({"detail": line}, status)


async def _chat_key(request: Any, verified: Verified) -> tuple[str, Any, Any] | Any:
    """The chat's session key, host and desk for a person who owns the chat; else the response that refuses."""
    chat_id = request.path_params.get("chat_id", "")
    if not _ID.match(chat_id):
        return _line("No such chat.", 404)
    user_id = await verified(dict(request.headers.raw))
    if user_id is None:
        return _line(SIGN_IN, 401)
    try:
        host, runtime, desk = _desk()
        owner = await host.run_in_trio(runtime.keeper.store.chat_owner, chat_id)
    except trio_host.HostError:
        return _line(NOT_RUNNING, 503)
    if owner != user_id:
        return _line(NOT_YOURS, 403)
    return ids.session_key(runtime.agent_id, owner, chat_id), host, desk


async def _stream(
    host: Any, desk: StatusDesk, keys: tuple[str, ...], read: Callable[[], Awaitable[Any]]
) -> AsyncIterator[bytes]:
    """One NDJSON line now and one after each change of any of ``keys``; ends when the client goes (Starlette
    cancels the body's iteration, which cancels the Trio wait) or owc stops. The watcher is registered before the
    first read and kept across reads, so a change during a read is not lost (``Watcher`` coalesces pokes)."""
    try:
        watcher = await host.run_in_trio(_open_watch, desk, keys)
    except trio_host.HostError:
        return
    try:
        while True:
            yield orjson.dumps(await read()) + b"\n"
            await host.run_in_trio(watcher.changed)
    except trio_host.HostError:
        return
    finally:
        try:
            host.run_sync_soon(desk.close_watch, watcher)
        except trio_host.HostError:
            pass  # the host has ended: its desk with it


async def _open_watch(desk: StatusDesk, keys: tuple[str, ...]) -> Any:
    return desk.open_watch(*keys)


def routes(verified: Verified) -> list[Any]:
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def snapshot(request: Any) -> Any:
        got = await _chat_key(request, verified)
        if not isinstance(got, tuple):
            return got
        key, host, desk = got
        try:
            return _json(await host.run_in_trio(desk.snapshot, key))
        except trio_host.HostError:
            return _line(NOT_RUNNING, 503)

    async def live(request: Any) -> Any:
        got = await _chat_key(request, verified)
        if not isinstance(got, tuple):
            return got
        key, host, desk = got
        log.info("owui.status_opened pid=%d", os.getpid())
        return StreamingResponse(
            _stream(host, desk, (key,), lambda: host.run_in_trio(desk.snapshot, key)),
            media_type="application/x-ndjson",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def compact(request: Any) -> Any:
        got = await _chat_key(request, verified)
        if not isinstance(got, tuple):
            return got
        key, host, desk = got
        try:
            outcome = await host.run_in_trio(desk.compact, key)
        except trio_host.HostError:
            return _line(NOT_RUNNING, 503)
        log.info("owui.status_compact ok=%s code=%d pid=%d", outcome.ok, outcome.code, os.getpid())
        body = {"ok": outcome.ok, "detail": outcome.line, "tokensBefore": outcome.before, "tokensAfter": outcome.after}
        return _json(body, outcome.code)

    async def drawer_of(request: Any) -> tuple[Any, ...] | Any:
        got = await _chat_key(request, verified)
        if not isinstance(got, tuple):
            return got
        task_id = request.path_params.get("task_id", "")
        if not _ID.match(task_id):
            return _line("No such sub-agent.", 404)
        return (*got, task_id)

    async def drawer(request: Any) -> Any:
        got = await drawer_of(request)
        if not isinstance(got, tuple):
            return got
        key, host, desk, task_id = got
        try:
            view = await host.run_in_trio(desk.drawer, key, task_id)
        except trio_host.HostError:
            return _line(NOT_RUNNING, 503)
        if view is None:
            return _line("The Gateway has no such sub-agent of this chat (any more).", 404)
        return _json(view)

    async def drawer_live(request: Any) -> Any:
        got = await drawer_of(request)
        if not isinstance(got, tuple):
            return got
        key, host, desk, task_id = got
        try:
            first = await host.run_in_trio(desk.drawer, key, task_id)
        except trio_host.HostError:
            return _line(NOT_RUNNING, 503)
        if first is None:
            return _line("The Gateway has no such sub-agent of this chat (any more).", 404)
        keys = (key, first["childKey"]) if first.get("childKey") else (key,)

        async def read() -> Any:
            view = await host.run_in_trio(desk.drawer, key, task_id)
            return view if view is not None else {"gone": True}

        return StreamingResponse(
            _stream(host, desk, keys, read),
            media_type="application/x-ndjson",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    base = PREFIX + "{chat_id}"
    return [
        Route(base, snapshot, methods=["GET"], name="owc-status"),
        Route(base + "/live", live, methods=["GET"], name="owc-status-live"),
        Route(base + "/compact", compact, methods=["POST"], name="owc-status-compact"),
        Route(base + "/subagents/{task_id}", drawer, methods=["GET"], name="owc-status-subagent"),
        Route(base + "/subagents/{task_id}/live", drawer_live, methods=["GET"], name="owc-status-subagent-live"),
    ]
