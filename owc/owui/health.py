"""``GET /api/owc/health``: what owc running inside this Open WebUI process says of itself, for an admin.

Why a route: ``owc owui install`` / ``migrate`` end with a smoke check, and ``owc owui status`` reports the Gateway
and the device, but owc's runtime lives inside Open WebUI's process, which the command line reaches only over HTTP
(it may run on another machine). Open WebUI has no API that shows a Function's runtime state, so owc adds this one
route (``owc.owui.page`` registers it with its other routes when owc starts in the process; before that the path
is Open WebUI's page, which the CLI reads as "owc not running here").

Admin only (a session token whose user is an admin, checked as Open WebUI checks its own API): the answer names the
Gateway's address and the device id. It never holds a token or a key: ``{"running", "connected", "gateway"
(redacted URL), "boot_id", "device_id", "paired", "pairing", "refusal", "pid"}``. Several workers each run their own
owc; the answer is the one of the worker that took the request.
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
SIGN_IN = "Sign in to Open WebUI as an admin to see owc's health."
NOT_ADMIN = "owc's health is for Open WebUI's admins."

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
    }


def route(is_admin: IsAdmin) -> Any:
    """The route, answered on Open WebUI's loop (reads of the runtime's fields and one small file)."""
    from starlette.routing import Route

    async def health(request: Any) -> Any:
        admin = await is_admin(dict(request.headers.raw))
        if admin is None:
            return _json({"detail": SIGN_IN}, 401)
        if not admin:
            return _json({"detail": NOT_ADMIN}, 403)
        import anyio.to_thread

        return _json(await anyio.to_thread.run_sync(snapshot))

    return Route(PATH, health, methods=["GET"])
