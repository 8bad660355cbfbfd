"""Real Gateway tier, issue 15: device auth, pairing and device tokens on the real Gateway 2026.9.6 and on the
simulator, one flow driven identically against both (one Gateway process for all of it).

What owc depends on is compared: each refusal's code, ``details.code`` / ``reason``, the set of ``details`` keys and
the close code; ``hello-ok.auth`` (method, scopes, a device token) after an approval; the device token alone
reconnecting; a revoke closing the live connection with 4001 "device removed" and the old token then refused
(``AUTH_DEVICE_TOKEN_MISMATCH``); a bad signature and an old ``signedAt``; more scopes than approved (a
``scope-upgrade`` request, or ``AUTH_SCOPE_MISMATCH`` with the device token); and on loopback without an ``Origin``
what is approved at once (``cli``: silently) and what is not paired at all (``gateway-client``/``backend``).

The real side approves, revokes and removes with the Gateway's own CLI, offline, as a person on the Gateway host
does (``openclaw devices approve <requestId>``, ``devices revoke --device <id> --role operator``, ``devices remove
<id>``, ``devices list --json``); the simulator side with ``sim.devices``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from devicewire import ADMIN, CLI, READ_WRITE, attempt, device_connection

from owc.device import DeviceIdentity
from owc.sim import open_simulator

from conftest import secret
from realgw.gateway import CuttableGateway, start_cuttable

pytestmark = pytest.mark.realgateway

SIM_TOKEN = "device-conformance"


@attrs.frozen
class Side:
    """One Gateway under test and its owner's commands."""

    url: str
    token: str
    origin: str  # an ``Origin`` the Gateway allows from loopback: the remote path
    approve: Callable[[str], Awaitable[None]]
    revoke: Callable[[str], Awaitable[None]]
    remove: Callable[[str], Awaitable[None]]
    #: device id -> "pending", "paired:<approvedVia>" or "none"
    states: Callable[[Sequence[str]], Awaitable[dict[str, str]]]


async def _flow(side: Side) -> dict[str, Any]:
    """The whole flow; every value is comparable across sides (ids and tokens become relations)."""
    seen: dict[str, Any] = {}
    me, origin, shared = DeviceIdentity.generate(), side.origin, {"token": side.token}
    with trio.fail_after(120):
        first = await attempt(side.url, me, origin=origin, auth=shared)
        request = first.details.get("requestId")
        seen["not-paired"] = first.shape()
        seen["not-paired text"] = (first.error.get("message"), first.details.get("remediationHint"))
        seen["not-paired close names the request"] = first.close == (
            1008,
            f"{first.error['message']} (requestId: {request})",
        )
        seen["not-paired asks"] = (first.details.get("requestedRole"), first.details.get("requestedScopes"))
        again = await attempt(side.url, me, origin=origin, auth=shared)
        seen["same request until approved"] = again.details.get("requestId") == request
        bad = await attempt(side.url, me, origin=origin, auth=shared, tamper=True)
        seen["bad signature"] = (bad.shape(), bad.error.get("message"), bad.details.get("reason"))
        stale = await attempt(side.url, me, origin=origin, auth=shared, skew_ms=-130_000)
        seen["signedAt 130 s old"] = (stale.shape(), stale.error.get("message"), stale.details.get("reason"))
        ahead = await attempt(side.url, me, origin=origin, auth=shared, skew_ms=60_000)
        seen["signedAt 60 s ahead"] = (ahead.shape(), ahead.details.get("requestId") == request)
        wrong = await attempt(side.url, me, origin=origin, auth={"token": f"wrong-{side.token}"})
        seen["wrong shared token"] = (wrong.error.get("message"), wrong.details, wrong.close)
        none = await attempt(side.url, me, origin=origin, auth={})
        seen["no credential"] = (none.error.get("message"), none.details, none.close)

        await side.approve(request)
        async with device_connection(side.url, me, origin=origin, auth=shared) as (hello, live):
            token = hello.auth.get("deviceToken")
            seen["approved"] = (hello.shape(), isinstance(hello.auth.get("issuedAtMs"), int))
            alone = await attempt(side.url, me, origin=origin, auth={"deviceToken": token})
            seen["device token alone"] = (alone.shape(), alone.auth.get("deviceToken") == token)
            fewer = await attempt(side.url, me, origin=origin, auth={"deviceToken": token}, scopes=["operator.read"])
            seen["device token, fewer scopes"] = fewer.shape()
            more = await attempt(side.url, me, origin=origin, auth=shared, scopes=ADMIN)
            seen["more scopes"] = more.shape()
            seen["more scopes asks"] = {
                k: more.details.get(k) for k in ("requestedScopes", "approvedScopes", "approvedRoles")
            }
            seen["more scopes is a new request"] = more.details.get("requestId") not in (None, request)
            beyond = await attempt(side.url, me, origin=origin, auth={"deviceToken": token}, scopes=ADMIN)
            seen["device token, more scopes"] = (beyond.error.get("message"), beyond.details, beyond.close)
            await side.revoke(me.device_id)
            seen["revoke closes the live connection"] = await live.closed()
        old = await attempt(side.url, me, origin=origin, auth={"deviceToken": token})
        seen["revoked token"] = (old.error.get("message"), old.details, old.close)
        back = await attempt(side.url, me, origin=origin, auth=shared)
        seen["revoked, shared token"] = back.shape()
        seen["revoked asks"] = {k: back.details.get(k) for k in ("requestedScopes", "approvedScopes", "approvedRoles")}
        seen["revoked refreshes the upgrade request"] = back.details.get("requestId") == more.details.get("requestId")
        seen["close reason cut at 120 bytes"] = len((back.close or (None, ""))[1].encode())

        await side.approve(back.details["requestId"])
        async with device_connection(side.url, me, origin=origin, auth=shared) as (rehello, live):
            seen["re-approved"] = (rehello.shape(), rehello.auth.get("deviceToken") not in (None, token))
            await side.remove(me.device_id)
            seen["remove closes the live connection"] = await live.closed()
        gone = await attempt(side.url, me, origin=origin, auth=shared)
        seen["removed"] = (gone.shape(), gone.details.get("requestId") not in (None, request))

        backend, cli, browser = DeviceIdentity.generate(), DeviceIdentity.generate(), DeviceIdentity.generate()
        seen["backend, no Origin"] = (await attempt(side.url, backend, auth=shared)).shape()
        seen["cli, no Origin"] = (await attempt(side.url, cli, auth=shared, client=CLI)).shape()
        seen["cli, Origin"] = (await attempt(side.url, browser, origin=origin, auth=shared, client=CLI)).shape()
        foreign = await attempt(side.url, backend, origin="http://example.test", auth=shared)
        seen["foreign Origin"] = (foreign.error.get("code"), foreign.details, foreign.close)
        states = await side.states([me.device_id, backend.device_id, cli.device_id, browser.device_id])
        seen["store"] = [states[i] for i in (me.device_id, backend.device_id, cli.device_id, browser.device_id)]
    return seen


# --- the two sides -----------------------------------------------------------------------------------------------


def _real_side(gw: CuttableGateway) -> Side:
    async def run(*args: str) -> str:
        return await trio.to_thread.run_sync(lambda: gw.cli("devices", *args))

    async def approve(request_id: str) -> None:
        said = await run("approve", request_id)
        assert f"({request_id})" in said and said.startswith("Approved "), said

    async def revoke(device_id: str) -> None:
        said = json.loads(await run("revoke", "--device", device_id, "--role", "operator"))
        assert (said["deviceId"], said["role"]) == (device_id, "operator"), said

    async def remove(device_id: str) -> None:
        said = await run("remove", device_id)
        assert said.strip() == f"Removed {device_id}", said

    async def states(device_ids: Sequence[str]) -> dict[str, str]:
        listed = json.loads(await run("list", "--json"))
        out = dict.fromkeys(device_ids, "none")
        for pending in listed["pending"]:
            out[pending["deviceId"]] = "pending"
        for paired in listed["paired"]:
            out[paired["deviceId"]] = f"paired:{paired.get('approvedVia')}"
        return out

    return Side(gw.url, gw.token, f"http://127.0.0.1:{gw.port}", approve, revoke, remove, states)


async def _sim_flow() -> dict[str, Any]:
    async with open_simulator(token=SIM_TOKEN) as sim:

        async def approve(request_id: str) -> None:
            sim.devices.approve(request_id)

        async def revoke(device_id: str) -> None:
            sim.devices.revoke(device_id, "operator")

        async def remove(device_id: str) -> None:
            sim.devices.remove(device_id)

        async def states(device_ids: Sequence[str]) -> dict[str, str]:
            out = dict.fromkeys(device_ids, "none")
            for pending in sim.devices.pending():
                out[pending.device_id] = "pending"
            for paired in sim.devices.paired():
                out[paired.device_id] = f"paired:{paired.approved_via}"
            return out

        side = Side(sim.url, SIM_TOKEN, f"http://127.0.0.1:{sim.port}", approve, revoke, remove, states)
        return await _flow(side)


def test_device_pairing_on_the_real_gateway_and_the_simulator(real_gateway_install, tmp_path: Path) -> None:
    gw = start_cuttable(real_gateway_install, tmp_path / "gw")
    secret(gw.token)
    try:
        real = trio.run(_flow, _real_side(gw))
    finally:
        gw.stop()
    sim = trio.run(_sim_flow)

    # The real Gateway, pinned (what owc's client relies on).
    pairing_keys = ("code", "deviceId", "reason", "remediationHint", "requestId", "requestedRole", "requestedScopes")
    upgrade_keys = tuple(sorted((*pairing_keys, "approvedRoles", "approvedScopes")))
    assert real["not-paired"] == ("NOT_PAIRED", "PAIRING_REQUIRED", "not-paired", pairing_keys, 1008)
    assert real["not-paired close names the request"] and real["same request until approved"]
    assert real["bad signature"][0][:3] == ("INVALID_REQUEST", "DEVICE_AUTH_SIGNATURE_INVALID", "device-signature")
    assert real["signedAt 130 s old"][0][1] == "DEVICE_AUTH_SIGNATURE_EXPIRED"
    assert real["signedAt 60 s ahead"] == (real["not-paired"], True)
    assert real["approved"] == (("hello", "token", READ_WRITE, True), True)
    assert real["device token alone"] == (("hello", "device-token", READ_WRITE, True), True)
    assert real["more scopes"] == ("NOT_PAIRED", "PAIRING_REQUIRED", "scope-upgrade", upgrade_keys, 1008)
    assert real["device token, more scopes"][1]["code"] == "AUTH_SCOPE_MISMATCH"
    assert real["revoke closes the live connection"] == (4001, "device removed")
    assert real["revoked token"][1]["code"] == "AUTH_DEVICE_TOKEN_MISMATCH" and real["revoked token"][2][0] == 1008
    assert real["revoked, shared token"][2] == "role-upgrade"
    assert real["re-approved"] == (("hello", "token", READ_WRITE, True), True)
    assert real["remove closes the live connection"] == (4001, "device removed")
    assert real["backend, no Origin"] == ("hello", "token", READ_WRITE, False)  # not paired at all
    assert real["cli, no Origin"] == ("hello", "token", READ_WRITE, True)  # approved silently
    assert real["cli, Origin"][2] == "not-paired"  # never silently with an Origin
    assert real["store"] == ["pending", "none", "paired:silent", "pending"]
    # The simulator, the same in every respect compared.
    for key, value in real.items():
        assert sim[key] == value, key
    assert sim.keys() == real.keys()
