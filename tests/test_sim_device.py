"""The simulator's device auth, pairing and device tokens (``owc/sim/devices.py``), over real loopback WebSockets.

The shapes are the real Gateway 2026.9.6's (``docs/measured/device-pairing-2026.9.6.md``); the flow that pins them
to it is ``tests/test_realgw_device_conformance.py``, which drives the real Gateway and the simulator with the
helpers below. Devices sign with owc's own ``DeviceIdentity`` (the simulator verifies independently)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
import trio
from devicewire import ADMIN, CLI, READ_WRITE, attempt, connect_params, device_connection
from trio_websocket import ConnectionClosed, open_websocket_url

from owc import device
from owc.device import DeviceIdentity
from owc.gateway import GatewayConfig, open_gateway_connection
from owc.sim import devices as d
from owc.sim import open_simulator

from conftest import TOKEN
from rawclient import RawClient

# --- the simulator's rules, one at a time -----------------------------------------------------------------------


def _origin(sim: Any) -> str:
    return f"http://127.0.0.1:{sim.port}"


async def test_with_an_origin_a_device_waits_for_approval_then_gets_its_device_token() -> None:
    async with open_simulator(token=TOKEN) as sim:
        me = DeviceIdentity.generate()
        first = await attempt(sim.url, me, origin=_origin(sim), auth={"token": TOKEN})
        assert first.shape() == (
            "NOT_PAIRED",
            "PAIRING_REQUIRED",
            "not-paired",
            ("code", "deviceId", "reason", "remediationHint", "requestId", "requestedRole", "requestedScopes"),
            1008,
        )
        request = first.details["requestId"]
        assert first.error["message"] == "pairing required: device is not approved yet"
        assert first.close == (1008, f"pairing required: device is not approved yet (requestId: {request})")
        assert first.details["deviceId"] == me.device_id and first.details["requestedScopes"] == list(READ_WRITE)
        again = await attempt(sim.url, me, origin=_origin(sim), auth={"token": TOKEN})
        assert again.details["requestId"] == request  # the same request until approved
        (pending,) = sim.devices.pending()
        assert (pending.request_id, pending.device_id, pending.scopes) == (request, me.device_id, READ_WRITE)

        paired = sim.devices.approve(request)
        assert paired.approved_via == "owner" and not sim.devices.pending()
        hello = await attempt(sim.url, me, origin=_origin(sim), auth={"token": TOKEN})
        assert hello.shape() == ("hello", "token", READ_WRITE, True)
        token = hello.auth["deviceToken"]
        assert len(token) == 43 and hello.auth["issuedAtMs"] == paired.approved_at_ms
        # The device token alone (the signature's token field is then the device token) is enough, and stable.
        alone = await attempt(sim.url, me, origin=_origin(sim), auth={"deviceToken": token})
        assert alone.shape() == ("hello", "device-token", READ_WRITE, True) and alone.auth["deviceToken"] == token
        fewer = await attempt(sim.url, me, origin=_origin(sim), auth={"deviceToken": token}, scopes=["operator.read"])
        assert fewer.shape() == ("hello", "device-token", ("operator.read",), True)
        # Without a device block a device token is nothing (measured 3d).
        bare = await attempt(sim.url, None, origin=_origin(sim), auth={"deviceToken": token})
        assert (bare.error["code"], bare.details, bare.close) == (
            "NOT_PAIRED",
            {"code": "DEVICE_IDENTITY_REQUIRED"},
            (1008, "device identity required"),
        )


async def test_revoke_closes_live_connections_then_the_old_token_is_refused() -> None:
    async with open_simulator(token=TOKEN) as sim:
        me, origin = DeviceIdentity.generate(), _origin(sim)
        sim.devices.approve((await attempt(sim.url, me, origin=origin, auth={"token": TOKEN})).details["requestId"])
        async with device_connection(sim.url, me, origin=origin, auth={"token": TOKEN}) as (hello, live):
            token = hello.auth["deviceToken"]
            revoked = sim.devices.revoke(me.device_id)
            assert revoked.revoked_at_ms is not None and revoked.token == token
            assert await live.closed() == (4001, "device removed")
        old = await attempt(sim.url, me, origin=origin, auth={"deviceToken": token})
        assert old.shape()[:3] == ("INVALID_REQUEST", "AUTH_DEVICE_TOKEN_MISMATCH", None)
        assert old.details == {
            "code": "AUTH_DEVICE_TOKEN_MISMATCH",
            "authReason": "device_token_mismatch",
            "canRetryWithDeviceToken": False,
            "recommendedNextStep": "update_auth_credentials",
        }
        assert old.close == (1008, "unauthorized: device token mismatch (rotate/reissue device token)")
        # The shared token asks to be let back in: a role upgrade, naming what the device still holds.
        back = await attempt(sim.url, me, origin=origin, auth={"token": TOKEN})
        assert back.details["reason"] == "role-upgrade"
        assert (back.details["approvedRoles"], back.details["approvedScopes"]) == (["operator"], list(READ_WRITE))
        assert len(back.close[1].encode()) == 120  # the close reason is cut; ``details.requestId`` is whole
        sim.devices.approve(back.details["requestId"])
        again = await attempt(sim.url, me, origin=origin, auth={"token": TOKEN})
        assert again.ok and again.auth["deviceToken"] != token  # re-approval issues a new token


async def test_remove_forgets_the_device() -> None:
    async with open_simulator(token=TOKEN) as sim:
        me, origin = DeviceIdentity.generate(), _origin(sim)
        first = await attempt(sim.url, me, origin=origin, auth={"token": TOKEN})
        sim.devices.approve(first.details["requestId"])
        async with device_connection(sim.url, me, origin=origin, auth={"token": TOKEN}) as (hello, live):
            assert hello.ok
            sim.devices.remove(me.device_id)
            assert await live.closed() == (4001, "device removed")
        assert sim.devices.get(me.device_id) is None
        again = await attempt(sim.url, me, origin=origin, auth={"token": TOKEN})
        assert again.details["reason"] == "not-paired" and again.details["requestId"] != first.details["requestId"]
        with pytest.raises(d.PairingRefused):
            sim.devices.remove(me.device_id)


@pytest.mark.parametrize(
    ("kw", "code", "reason", "message"),
    [
        ({"tamper": True}, "DEVICE_AUTH_SIGNATURE_INVALID", "device-signature", "device signature invalid"),
        ({"skew_ms": -130_000}, "DEVICE_AUTH_SIGNATURE_EXPIRED", "device-signature-stale", "device signature expired"),
        ({"skew_ms": 121_000}, "DEVICE_AUTH_SIGNATURE_EXPIRED", "device-signature-stale", "device signature expired"),
        # Signed with an empty token field while ``auth.token`` is sent (measured).
        ({"sign_auth": {}}, "DEVICE_AUTH_SIGNATURE_INVALID", "device-signature", "device signature invalid"),
        ({"sign_auth": {"token": "x"}}, "DEVICE_AUTH_SIGNATURE_INVALID", "device-signature",
         "device signature invalid"),
    ],
)  # fmt: skip
async def test_a_bad_proof_is_refused_before_anything_else(kw, code, reason, message) -> None:
    async with open_simulator(token=TOKEN) as sim:
        # A wrong shared token too: the proof is judged first.
        answer = await attempt(sim.url, DeviceIdentity.generate(), origin=_origin(sim), auth={"token": "wrong"}, **kw)
        assert answer.response["error"] == {"code": "INVALID_REQUEST", "message": message, "details": {
            "code": code, "reason": reason}}  # fmt: skip
        assert answer.close == (1008, message) and not sim.devices.pending()


async def test_proof_details_nonce_id_and_v2() -> None:
    async with open_simulator(token=TOKEN) as sim:
        me, other = DeviceIdentity.generate(), DeviceIdentity.generate()
        async with open_websocket_url(sim.url) as ws:
            client = RawClient(ws)
            challenge = orjson.loads(await ws.get_message())["payload"]
            params = connect_params(me, {**challenge, "nonce": "not-the-challenge"}, auth={"token": TOKEN})
            response = await client.response(await client.send("connect", params))
            assert response.error.details == {"code": "DEVICE_AUTH_NONCE_MISMATCH", "reason": "device-nonce-mismatch"}
        async with open_websocket_url(sim.url) as ws:
            client = RawClient(ws)
            challenge = orjson.loads(await ws.get_message())["payload"]
            params = connect_params(me, challenge, auth={"token": TOKEN})
            params["device"]["id"] = other.device_id
            response = await client.response(await client.send("connect", params))
            assert response.error.message == "device identity mismatch"
            assert response.error.details == {"code": "DEVICE_AUTH_DEVICE_ID_MISMATCH", "reason": "device-id-mismatch"}
        async with open_websocket_url(sim.url) as ws:  # the legacy v2 payload is still accepted
            client = RawClient(ws)
            challenge = orjson.loads(await ws.get_message())["payload"]
            params = connect_params(me, challenge, auth={"token": TOKEN})
            v2 = f"v2|{me.device_id}|gateway-client|backend|operator|operator.read,operator.write|{challenge['ts']}"
            params["device"]["signature"] = me.sign(f"{v2}|{TOKEN}|{challenge['nonce']}")
            response = await client.response(await client.send("connect", params))
            assert response.ok and response.payload["auth"]["scopes"] == list(READ_WRITE)
        async with open_websocket_url(sim.url) as ws:  # the block's schema first
            client = RawClient(ws)
            challenge = orjson.loads(await ws.get_message())["payload"]
            params = connect_params(me, challenge, auth={"token": TOKEN})
            del params["device"]["nonce"]
            response = await client.response(await client.send("connect", params))
            assert response.error.message == "invalid connect params: at /device: must have required property 'nonce'"


async def test_scope_upgrade_is_a_new_request_and_the_device_token_never_widens() -> None:
    async with open_simulator(token=TOKEN) as sim:
        me, origin = DeviceIdentity.generate(), _origin(sim)
        first = await attempt(sim.url, me, origin=origin, auth={"token": TOKEN})
        sim.devices.approve(first.details["requestId"])
        token = (await attempt(sim.url, me, origin=origin, auth={"token": TOKEN})).auth["deviceToken"]
        more = await attempt(sim.url, me, origin=origin, auth={"token": TOKEN}, scopes=ADMIN)
        assert more.shape() == (
            "NOT_PAIRED",
            "PAIRING_REQUIRED",
            "scope-upgrade",
            ("approvedRoles", "approvedScopes", "code", "deviceId", "reason", "remediationHint", "requestId",
             "requestedRole", "requestedScopes"),
            1008,
        )  # fmt: skip
        assert more.details["approvedScopes"] == list(READ_WRITE) and more.details["requestedScopes"] == list(ADMIN)
        assert more.details["requestId"] != first.details["requestId"]
        with_token = await attempt(sim.url, me, origin=origin, auth={"deviceToken": token}, scopes=ADMIN)
        assert with_token.details == {
            "code": "AUTH_SCOPE_MISMATCH",
            "authReason": "scope_mismatch",
            "canRetryWithDeviceToken": False,
            "recommendedNextStep": "review_auth_configuration",
        }
        assert (
            with_token.error["message"]
            == "unauthorized: device token scope mismatch (re-pair or approve scope upgrade)"
        )
        sim.devices.approve(more.details["requestId"])
        wider = await attempt(sim.url, me, origin=origin, auth={"token": TOKEN}, scopes=ADMIN)
        assert wider.shape() == ("hello", "token", ADMIN, True) and wider.auth["deviceToken"] != token


async def test_on_loopback_without_origin_the_backend_skips_pairing_and_others_pair_silently() -> None:
    async with open_simulator(token=TOKEN) as sim:
        backend, cli = DeviceIdentity.generate(), DeviceIdentity.generate()
        answer = await attempt(sim.url, backend, auth={"token": TOKEN})
        assert answer.shape() == ("hello", "token", READ_WRITE, False)  # no device token, nothing recorded
        assert not sim.devices.pending() and sim.devices.get(backend.device_id) is None
        silent = await attempt(sim.url, cli, auth={"token": TOKEN}, client=CLI)
        assert silent.shape() == ("hello", "token", READ_WRITE, True)
        paired = sim.devices.get(cli.device_id)
        assert paired is not None and paired.approved_via == "silent" and not sim.devices.pending()
        upgraded = await attempt(sim.url, cli, auth={"token": TOKEN}, client=CLI, scopes=ADMIN)  # silent too
        assert upgraded.shape() == ("hello", "token", ADMIN, True)
        assert upgraded.auth["deviceToken"] != silent.auth["deviceToken"]
        # With an Origin header there is no silent pairing, whatever the client.
        other = await attempt(
            sim.url, DeviceIdentity.generate(), origin=_origin(sim), auth={"token": TOKEN}, client=CLI
        )
        assert other.details["reason"] == "not-paired"
        # A paired backend device gets its token without Origin, and a new one after a revoke (measured).
        sim.devices.approve(
            (await attempt(sim.url, backend, origin=_origin(sim), auth={"token": TOKEN})).details["requestId"]
        )
        mine = await attempt(sim.url, backend, auth={"token": TOKEN})
        sim.devices.revoke(backend.device_id)
        renewed = await attempt(sim.url, backend, auth={"token": TOKEN})
        assert renewed.ok and renewed.auth["deviceToken"] != mine.auth["deviceToken"]
        beyond = await attempt(sim.url, backend, auth={"token": TOKEN}, scopes=ADMIN)  # unchecked, and no token
        assert beyond.shape() == ("hello", "token", ADMIN, False)


async def test_a_foreign_origin_is_refused_before_any_credential() -> None:
    async with open_simulator(token=TOKEN) as sim:
        for identity, auth in ((None, {"token": "wrong"}), (DeviceIdentity.generate(), {"token": TOKEN})):
            answer = await attempt(sim.url, identity, origin="http://example.test", auth=auth)
            assert answer.response["error"]["details"] == {
                "code": "CONTROL_UI_ORIGIN_NOT_ALLOWED",
                "reason": "origin not allowed",
            }
            assert answer.close == (1008, d.ORIGIN_REFUSED)
        # A loopback Origin from a local client is allowed, but a token-only client then keeps no scope.
        scopeless = await attempt(sim.url, None, origin=_origin(sim), auth={"token": TOKEN})
        assert scopeless.shape() == ("hello", "token", (), False)
        sim.allowed_origins.add("http://example.test")  # ``gateway.controlUi.allowedOrigins``
        listed = await attempt(sim.url, None, origin="http://example.test", auth={"token": TOKEN})
        assert listed.ok


async def test_credential_refusals_with_a_device() -> None:
    async with open_simulator(token=TOKEN) as sim:
        me = DeviceIdentity.generate()
        wrong = await attempt(sim.url, me, auth={"token": "wrong"})
        assert wrong.details == {
            "code": "AUTH_TOKEN_MISMATCH",
            "authReason": "token_mismatch",
            "canRetryWithDeviceToken": True,
            "recommendedNextStep": "retry_with_device_token",
        }
        none = await attempt(sim.url, me, auth={})
        assert none.error["message"] == "unauthorized: gateway token missing (provide gateway auth token)"
        assert none.details["code"] == "AUTH_TOKEN_MISSING" and none.close[0] == 1008
        unknown = await attempt(sim.url, me, auth={"deviceToken": "not-a-token"})
        assert unknown.details["code"] == "AUTH_DEVICE_TOKEN_MISMATCH"


@pytest.mark.virtual_seconds(301)
async def test_a_pending_request_expires_after_five_minutes(clock) -> None:
    async with open_simulator(token=TOKEN) as sim:
        me = DeviceIdentity.generate()
        first = await attempt(sim.url, me, origin=_origin(sim), auth={"token": TOKEN})
        clock.jump(301)
        assert not sim.devices.pending()
        with pytest.raises(d.PairingRefused, match="unknown requestId"):
            sim.devices.approve(first.details["requestId"])
        again = await attempt(sim.url, me, origin=_origin(sim), auth={"token": TOKEN})
        assert again.details["requestId"] != first.details["requestId"]


# --- owc's own client against it ---------------------------------------------------------------------------------


async def _let_backoff_run_out(client: Any, clock: Any) -> None:
    """owc waits its backoff (the transport's own timer): move the clock by exactly that much."""
    until = await client.wait_backing_off()
    clock.jump(until - trio.current_time())


@pytest.mark.virtual_seconds(4)  # owc's backoffs: 1 (pairing), 1 (after the 4001), 2 (pairing again)
async def test_owc_pairs_reconnects_and_pairs_again_after_a_revoke(clock, tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.INFO)
    folder = tmp_path / "device"
    async with open_simulator(token=TOKEN) as sim:
        config = GatewayConfig(device_dir=folder, origin=_origin(sim), backoff_initial=1.0, backoff_jitter=0)
        async with open_gateway_connection(sim.url, TOKEN, config=config) as client:
            await client.wait_backing_off()  # refused for pairing: owc retries on its backoff
            (request,) = sim.devices.pending()
            assert client.pairing is not None and f"openclaw devices approve {request.request_id}" in client.pairing
            sim.devices.approve(request.request_id)
            await _let_backoff_run_out(client, clock)
            conn = await client.wait_connection()
            assert set(conn.hello.auth_scopes or ()) == set(ADMIN) and client.pairing is None
            stored = device.load(folder)
            assert stored is not None and stored.device_token is not None
            token = stored.device_token
            # Revoked: the live connection is closed (4001); owc's next connect (shared token beside the revoked
            # device token, so the shared one decides) is a role upgrade to approve; then a new device token.
            sim.devices.revoke(stored.device_id)
            await _let_backoff_run_out(client, clock)
            await sim.wait_for(lambda: bool(sim.devices.pending()))
            (upgrade,) = sim.devices.pending()
            assert upgrade.is_repair and ("NOT_PAIRED", "PAIRING_REQUIRED") in sim.refusals
            until = await client.wait_backing_off()
            sim.devices.approve(upgrade.request_id)
            clock.jump(until - trio.current_time())
            await client.wait_connection(newer_than=conn)
            renewed = device.load(folder)
            assert renewed is not None and renewed.device_token not in (None, token)
    assert "code=4001 reason=device removed" in caplog.text


@pytest.mark.virtual_seconds(1)  # one backoff: approval comes while owc waits
async def test_a_simulated_remote_gateway_pairs_owc_without_an_origin(clock, tmp_path: Path) -> None:
    """``sim.remote_address``: the simulator judges every client as connecting from another host (as Open WebUI in
    its own container would), so owc's device is paired by the owner even without an ``Origin`` header, and owc with
    the shared token alone is let in without scopes (and says so at once, naming the fix)."""
    from owc.gateway import GatewayClient, MissingScopes

    folder = tmp_path / "device"
    async with open_simulator(token=TOKEN) as sim:
        sim.remote_address = "192.0.2.10"
        with pytest.raises(MissingScopes, match="--device-dir"):
            await GatewayClient(sim.url, TOKEN).run()
        config = GatewayConfig(device_dir=folder, backoff_initial=1.0, backoff_jitter=0)
        async with open_gateway_connection(sim.url, TOKEN, config=config) as client:
            await client.wait_backing_off()
            (request,) = sim.devices.pending()
            assert request.device_id == device.load(folder).device_id and not request.silent
            assert client.pairing is not None and request.request_id in client.pairing
            sim.devices.approve(request.request_id)
            await _let_backoff_run_out(client, clock)
            conn = await client.wait_connection()
            assert set(conn.hello.auth_scopes) == set(ADMIN)
            assert device.load(folder).device_token is not None


async def test_owc_on_loopback_without_origin_keeps_its_scopes_and_no_token(tmp_path: Path) -> None:
    async with open_simulator(token=TOKEN) as sim:
        config = GatewayConfig(device_dir=tmp_path / "device")
        async with open_gateway_connection(sim.url, TOKEN, config=config) as client:
            conn = await client.wait_connection()
            assert set(conn.hello.auth_scopes or ()) == set(ADMIN)
            assert not sim.devices.pending() and not sim.devices.paired()
            stored = device.load(tmp_path / "device")
            assert stored is not None and stored.device_token is None
            (owned,) = sim.device_conns.values()
            assert owned == (stored.device_id, "operator")


# --- the pure rules ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("origin", "host", "local", "allowed"),
    [
        ("http://127.0.0.1:5000", "127.0.0.1:5000", True, True),
        ("http://localhost:8080", None, True, True),
        ("http://[::1]:8080", None, True, True),
        ("http://127.0.0.1:5000", None, False, False),  # a loopback Origin from a remote client
        ("http://example.test", "127.0.0.1:5000", True, False),
        ("http://192.168.1.5:18789", "192.168.1.5:18789", False, True),  # same private host
        ("http://gw.example.com", "gw.example.com", False, False),  # same host, but a public name
        ("http://box.local:80", "box.local", False, True),  # the default port is dropped
        ("null", None, True, False),
        ("http://u:p@127.0.0.1", None, True, False),
        ("http://127.0.0.1/path", None, True, False),
    ],
)
def test_origin_rule(origin: str, host: str | None, local: bool, allowed: bool) -> None:
    assert (d.origin_refusal(origin, request_host=host, local=local) is None) is allowed


def test_silent_pairing_rule() -> None:
    base = {"has_origin": False, "client_id": "cli", "mode": "cli", "auth_method": "token", "reason": "not-paired"}
    assert d.silent_pairing(locality="direct_local", **base)
    assert not d.silent_pairing(locality="remote", **base)
    assert not d.silent_pairing(locality="direct_local", **{**base, "has_origin": True})
    # The Control UI and webchat may pair silently from a local browser.
    assert d.silent_pairing(locality="direct_local", **{**base, "has_origin": True, "client_id": "openclaw-control-ui"})
    assert not d.silent_pairing(
        locality="direct_local", **{**base, "reason": "scope-upgrade", "auth_method": "device-token"}
    )
    assert not d.silent_pairing(locality="direct_local", **{**base, "reason": "metadata-upgrade"})


def test_scope_implications() -> None:
    assert d.scopes_allow("operator", ["operator.read", "operator.talk"], ["operator.write"])
    assert d.scopes_allow("operator", ["operator.write"], ["operator.admin"])
    assert not d.scopes_allow("operator", ["operator.admin"], ["operator.read", "operator.write"])
    assert not d.scopes_allow("operator", ["node.x"], ["operator.admin"])
    assert d.auth_scopes([" operator.write ", "operator.write", ""]) == ["operator.read", "operator.write"]


def test_the_store_refreshes_a_covered_request_and_replaces_a_wider_one() -> None:
    now = [1_000]
    store = d.Devices(lambda: now[0])
    ask = d.PendingRequest("", "dev", "key", "cli", "cli", "operator", ("operator",), READ_WRITE)
    first = store.request(ask)
    assert store.request(attrs.evolve(ask, scopes=("operator.read",))).request_id == first.request_id
    wider = store.request(attrs.evolve(ask, scopes=("operator.admin",)))
    assert wider.request_id != first.request_id and wider.scopes == (*READ_WRITE, "operator.admin")
    assert [r.request_id for r in store.pending()] == [wider.request_id]
    paired = store.approve(wider.request_id)
    assert paired.tokens["operator"].scopes == ("operator.admin", "operator.read", "operator.write")
    assert store.ensure_token("dev", "operator", ["operator.read"]) is paired.tokens["operator"]
    assert store.check_token("dev", paired.tokens["operator"].token, "operator", ADMIN) is None
    assert store.check_token("dev", "nope", "operator", ADMIN) == "token-mismatch"
    with pytest.raises(d.PairingRefused):
        store.revoke("dev", "node")


async def test_a_refused_handshake_wakes_waiters() -> None:
    async with open_simulator(token=TOKEN) as sim:
        with pytest.raises(ConnectionClosed):
            async with open_websocket_url(sim.url) as ws:
                await ws.get_message()
                await ws.send_message(orjson.dumps({"type": "req", "id": "x", "method": "nope"}).decode())
                await ws.get_message()
                await ws.get_message()
        await sim.wait_for(lambda: bool(sim.refusals))
