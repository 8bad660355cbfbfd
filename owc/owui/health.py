"""``GET /api/owc/health``: what owc running inside this Open WebUI process says of itself, for an admin.

Why a route: ``owc owui install`` / ``migrate`` end with a smoke check, and ``owc owui status`` reports the Gateway
and the device, but owc's runtime lives inside Open WebUI's process, which the command line reaches only over HTTP
(it may run on another machine). Open WebUI has no API that shows a Function's runtime state, so owc adds this one
route (``owc.owui.page`` registers it with its other routes when owc starts in the process; before that the path
is Open WebUI's page, which the CLI reads as "owc not running here").

Admin only (a session token whose user is an admin, checked as Open WebUI checks its own API): the answer names the
Gateway's address and the device id. It never holds a token or a key: ``{"running", "connected", "gateway"
(redacted URL), "boot_id", "device_id", "paired", "pairing", "refusal", "pid", "agents"}`` (the Gateway's agents as
last listed, with their avatar URLs, for the install to put on their model rows). Several workers each run their own
owc; the answer is the one of the worker that took the request. ``?wait_s=N`` (at most ``MAX_WAIT_S``) holds the
answer until that owc is connected, waiting for its device's approval or refused, or N seconds passed: the
runtime's own event, so ``owc owui install`` needs no poll for the hello.

The operator's view (issue 31) is served beside it, by the same route object (``owc.owui.page`` adds one route
here): ``/api/owc/status`` (JSON, ``owc.render.operator.as_json``)
and ``/api/owc/metrics`` (Prometheus text), both admin only: no session 401, a user who is not an admin 403. Besides a
session token, the bearer may be an admin's API key (``sk-...``, checked by Open WebUI's own
``get_current_user_by_api_key``: its "API keys enabled" setting and endpoint restrictions apply), so a scraper
needs no session. Each answer is its worker's: it says the pid and the worker (``owc_info`` in the metrics).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from owc import device

log = logging.getLogger("owc.owui")

PATH = "/api/owc/health"
STATUS_PATH = "/api/owc/status"
METRICS_PATH = "/api/owc/metrics"
SIGN_IN = "Sign in to Open WebUI as an admin to see owc's health."
NOT_ADMIN = "owc's health is for Open WebUI's admins."
OPERATOR_SIGN_IN = "Sign in to Open WebUI as an admin (or send an admin's API key) to see owc's status."
OPERATOR_NOT_ADMIN = "owc's status is for Open WebUI's admins."
NOT_RUNNING = "owc is not running in this worker."
#: The longest ``?wait_s=`` one health request is held (below ``owc owui install``'s 30 s per request, and a
#: proxy's usual 60 s idle timeout): a caller that waits longer asks again.
MAX_WAIT_S = 25.0
BAD_WAIT = f"wait_s: a number of seconds from 0 to {MAX_WAIT_S:g}."

#: The request's headers -> True for an admin, False for another user, None without a valid session token.
IsAdmin = Callable[[dict[bytes, bytes]], Awaitable[bool | None]]


def _json(value: Any, status: int = 200) -> Any:
    from starlette.responses import Response

    return Response(
        orjson.dumps(value), status_code=status, media_type="application/json", headers={"Cache-Control": "no-store"}
    )


def _paired(runtime: Any, connected: bool) -> tuple[str | None, str]:
    """The device id and, in words, whether the Gateway has paired it (the same words as ``owc doctor``)."""
    client = runtime.client
    folder = getattr(client.config, "device_dir", None)
    if folder is None:
        return None, "no device (the shared token alone: enough only on the Gateway's own loopback)"
    try:
        identity = device.load(folder)
    except device.DeviceIdentityError as exc:
        return None, f"unknown: {exc}"
    if identity is None:
        return None, "no (no device identity stored yet)"
    if client.pairing is not None:
        return identity.device_id, f"waiting for approval: {client.pairing}"
    if identity.device_token is not None:
        return identity.device_id, "yes (its device token is stored)"
    if connected:
        return identity.device_id, "not needed (the Gateway let owc in as its local backend, without pairing)"
    return identity.device_id, "not yet (no device token stored)"


def snapshot() -> dict[str, Any]:
    """This process's owc, now: ``running: False`` when it is not running here."""
    from owc.owui import trio_host

    host = trio_host.current_host()  # as owc.owui.status reads it: process.py imports page.py, which imports this
    runtime = getattr(host, "started_value", None)
    client = getattr(runtime, "client", None)
    if host is None or client is None:
        return {"running": False, "connected": False, "pid": os.getpid()}
    conn = client.connection
    connected = conn is not None and not conn.closed
    device_id, paired = _paired(runtime, connected)
    refusal = client.refusal
    return {
        "running": True,
        "connected": connected,
        "gateway": client.url,
        "boot_id": conn.boot_id if connected else None,
        "device_id": device_id,
        "paired": paired,
        "pairing": client.pairing,
        "refusal": refusal.line if refusal is not None else None,
        "pid": os.getpid(),
        "agents": _agents(runtime),
    }


def _agents(runtime: Any) -> list[dict[str, str | None]]:
    """The Gateway's agents as this worker last listed them (``agents.list``, kept by ``owc.owui.pipe``): id, name,
    emoji and avatar URL, for ``owc owui install`` to give each agent's model row its avatar (a ``pipes()`` entry
    carries only an id and a name)."""
    roster = getattr(runtime, "gateway_agents", None)
    agents = getattr(roster, "agents", ())
    return [{"id": a.id, "name": a.name, "emoji": a.emoji, "avatar_url": a.avatar_url} for a in agents]


async def _admin_of(request: Any, is_admin: IsAdmin) -> bool | None:
    """True for an admin, False for another user, None for no valid credential: a session token as ``is_admin``
    checks it, or an API key (``sk-...``) as Open WebUI's own API checks it."""
    auth = request.headers.get("authorization", "")
    key = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
    if not key.startswith("sk-"):
        return await is_admin(dict(request.headers.raw))
    from open_webui.utils.auth import get_current_user_by_api_key
    from starlette.exceptions import HTTPException

    try:
        user = await get_current_user_by_api_key(request, key)
    except HTTPException as exc:
        if exc.status_code == 403:
            return False  # a key Open WebUI refuses here (keys disabled, the path not allowed): not a sign-in
        return None
    return getattr(user, "role", None) == "admin"


async def operator_snapshot() -> Any:
    """This worker's runtime's snapshot (``Runtime.snapshot``, on the Trio side), or None when owc is not running
    here."""
    from owc.owui import trio_host

    host = trio_host.current_host()
    runtime = getattr(host, "started_value", None)
    if host is None or runtime is None or not hasattr(runtime, "snapshot"):
        return None
    try:
        return await host.run_in_trio(runtime.snapshot)
    except trio_host.HostError:
        return None


def _operator_endpoints(is_admin: IsAdmin) -> dict[str, Callable[[Any], Awaitable[Any]]]:
    from starlette.responses import Response

    from owc.logs import worker_name
    from owc.render import operator

    async def answer(request: Any, render: Callable[[Any], Any]) -> Any:
        admin = await _admin_of(request, is_admin)
        if admin is None:
            return _json({"detail": OPERATOR_SIGN_IN}, 401)
        if not admin:
            return _json({"detail": OPERATOR_NOT_ADMIN}, 403)
        snap = await operator_snapshot()
        if snap is None:
            return _json({"detail": NOT_RUNNING, "running": False, "pid": os.getpid(), "worker": worker_name()}, 503)
        return render(snap)

    async def status(request: Any) -> Any:
        return await answer(request, lambda snap: _json({"running": True, **operator.as_json(snap)}))

    async def metrics(request: Any) -> Any:
        return await answer(
            request,
            lambda snap: Response(
                operator.prometheus(snap).encode(),
                media_type=operator.PROMETHEUS_CONTENT_TYPE,
                headers={"Cache-Control": "no-store"},
            ),
        )

    return {STATUS_PATH: status, METRICS_PATH: metrics}


def route(is_admin: IsAdmin) -> Any:
    """owc's admin routes as one route object (``owc.owui.page`` inserts what this returns): ``/api/owc/health``,
    ``/api/owc/status`` and ``/api/owc/metrics``, each ``GET`` only. Answered on Open WebUI's loop."""
    from starlette.routing import BaseRoute, Match, Route

    class _Paths(BaseRoute):
        """Several exact paths behind one route object: matches only them, so every other path goes on to the
        routes after it."""

        def __init__(self, routes: list[Route]) -> None:
            self.routes = routes

        def _find(self, scope: Any) -> tuple[Any, Any, Any]:
            partial = None
            for sub in self.routes:
                match, child = sub.matches(scope)
                if match is Match.FULL:
                    return sub, match, child
                if match is Match.PARTIAL and partial is None:
                    partial = (sub, match, child)
            return partial if partial is not None else (None, Match.NONE, {})

        def matches(self, scope: Any) -> tuple[Any, Any]:
            _, match, child = self._find(scope)
            return match, child

        def url_path_for(self, name: str, /, **path_params: Any) -> Any:
            from starlette.routing import NoMatchFound

            for sub in self.routes:
                try:
                    return sub.url_path_for(name, **path_params)
                except NoMatchFound:
                    pass
            raise NoMatchFound(name, path_params)

        async def handle(self, scope: Any, receive: Any, send: Any) -> None:
            sub, _, _ = self._find(scope)
            assert sub is not None  # the router calls this only after a match
            await sub.handle(scope, receive, send)

    endpoints = _operator_endpoints(is_admin)
    return _Paths(
        [
            _health_route(is_admin),
            *(Route(path, endpoint, methods=["GET"]) for path, endpoint in endpoints.items()),
        ]
    )


def wait_param(given: str | None) -> float | None:
    """``?wait_s=`` as seconds (0 when absent), or None when it is not a number from 0 to ``MAX_WAIT_S``."""
    if given is None:
        return 0.0
    try:
        wait_s = float(given)
    except ValueError:
        return None
    return wait_s if 0 <= wait_s <= MAX_WAIT_S else None


async def settled_within(wait_s: float) -> None:
    """Hold a health request (``?wait_s=``) until this worker's owc has something to say (``GatewayClient.
    wait_settled``: connected, its device waiting for approval, or refused), at most ``wait_s``. The wait is the
    runtime's own event on the Trio side, so ``owc owui install`` lists the Gateway's models the moment the hello
    arrives instead of polling for it. Returns at once when owc is not running in this worker."""
    import trio

    from owc.owui import trio_host

    host = trio_host.current_host()
    client = getattr(getattr(host, "started_value", None), "client", None)
    if host is None or client is None:
        return

    async def settle() -> None:
        with trio.move_on_after(wait_s):  # timer-ok: the caller's bound on its own wait (install --connect-wait)
            await client.wait_settled()

    try:
        await host.run_in_trio(settle)
    except trio_host.HostError:
        return  # owc closing in this worker: the snapshot that follows says so


def _health_route(is_admin: IsAdmin) -> Any:
    """``/api/owc/health``, answered on Open WebUI's loop (reads of the runtime's fields and one small file)."""
    from starlette.routing import Route

    async def health(request: Any) -> Any:
        admin = await is_admin(dict(request.headers.raw))
        if admin is None:
            return _json({"detail": SIGN_IN}, 401)
        if not admin:
            return _json({"detail": NOT_ADMIN}, 403)
        wait_s = wait_param(request.query_params.get("wait_s"))
        if wait_s is None:
            return _json({"detail": BAD_WAIT}, 400)
        if wait_s > 0:
            await settled_within(wait_s)
        import anyio.to_thread

        return _json(await anyio.to_thread.run_sync(snapshot))

    return Route(PATH, health, methods=["GET"])
