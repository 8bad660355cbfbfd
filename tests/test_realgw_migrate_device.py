"""Real Gateway tier: a device the OLD Pipe paired gets in as owc after ``owc owui migrate`` converts its identity,
with no new approval.

Measured on the real OpenClaw Gateway 2026.9.6 (offline, ``tests/realgw``). The old Pipe connected as client
``webchat`` / mode ``cli``, role ``operator``, scopes ``operator.admin, operator.read, operator.write``, with the
shared token and its Ed25519 device signed in the legacy ``v2`` form (inventory A1, A2). An ``Origin`` header
stands in for the remote Open WebUI host: with it the Gateway auto-approves no device (``test_realgw_device.py``,
``docs/measured/device-pairing-2026.9.6.md``). So the old Pipe's first connect is refused ``NOT_PAIRED`` /
``PAIRING_REQUIRED`` (``reason: not-paired``, the three scopes requested), close 1008; the owner approves the request
with ``openclaw devices approve <requestId>``; the old Pipe then gets its hello with the three scopes and a device
token, which it keeps in ``STATE_DIR/device-token.json`` (A4) beside ``identity.json`` (A3).

``owc.owui.migrate.find_old_identity`` converts that folder (the key and its device token) and ``device.save`` writes
it into a fresh owc device folder, as ``migrate`` does. owc's runtime with that folder (the same Origin) then connects
**at once**: hello on its first attempt with ``operator.read, operator.write, operator.admin``, no pairing refusal,
no scope or role upgrade asked (owc asks exactly the scopes the old Pipe was approved for), no new pending request;
the Gateway lists one paired device, the old one. The client id and mode (``gateway-client`` / ``backend`` instead
of ``webchat`` / ``cli``) and the signature form (``v3`` instead of ``v2``) do not matter to the Gateway's pairing:
it pairs the key, the role and the scopes."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
from old_pipe_fixture import device_identity
from trio_websocket import open_websocket_url

from owc import device
from owc.emit import RecordingEmitter
from owc.gateway import GatewayConfig
from owc.owui import migrate
from owc.protocol.handshake import OWC_SCOPES
from owc.runtime import RuntimeConfig, open_runtime
from owc.store import open_store

from conftest import secret
from rawclient import RawClient
from realgw.gateway import start_cuttable

pytestmark = pytest.mark.realgateway

#: The old Pipe's connect (inventory A1): its client, its scopes in the order it sent them.
OLD_CLIENT = {"id": "webchat", "version": "1", "platform": "linux", "mode": "cli"}
OLD_SCOPES = ["operator.admin", "operator.read", "operator.write"]


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def _old_pipe_connect(url: str, origin: str, old: dict[str, str], token: str) -> tuple[dict[str, Any], Any]:
    """One connect as the old Pipe made it: its params, its device block signed over the legacy ``v2`` string
    (``v2|deviceId|webchat|cli|operator|scopes|ts|token|nonce``) with its key. The response frame, and the close
    when refused."""
    key = migrate.identity_from_old(json.dumps(old), "the old identity")  # only to sign with the same key
    async with open_websocket_url(url, extra_headers=[(b"Origin", origin.encode())]) as ws:
        client = RawClient(ws)
        challenge = orjson.loads(await ws.get_message())
        assert challenge["event"] == "connect.challenge", challenge
        nonce, ts = challenge["payload"]["nonce"], challenge["payload"]["ts"]
        signed = "|".join(
            ["v2", old["id"], OLD_CLIENT["id"], OLD_CLIENT["mode"], "operator", ",".join(OLD_SCOPES), str(ts), token]
            + [nonce]
        )
        params = {
            "minProtocol": 4,
            "maxProtocol": 4,
            "client": OLD_CLIENT,
            "role": "operator",
            "scopes": OLD_SCOPES,
            "auth": {"token": token},
            "device": {
                "id": old["id"],
                "publicKey": old["publicKey"],
                "signature": key.sign(signed),
                "signedAt": ts,
                "nonce": nonce,
            },
            "locale": "en-US",
            "userAgent": "openclaw-owui-pipe/1.0",
            "caps": ["tool-events"],
        }
        response = await client.response(await client.send("connect", params))
        frame = client.frames[-1]
        return frame, (None if response.ok else await client.closed())


async def test_the_old_pipes_paired_device_gets_in_as_owc_after_migrate(real_gateway_install, tmp_path: Path) -> None:
    gw = await trio.to_thread.run_sync(lambda: start_cuttable(real_gateway_install, tmp_path / "gw"))
    secret(gw.token)
    origin = f"http://127.0.0.1:{gw.port}"
    old = device_identity()
    secret(old["privateKey"])
    lines = _Lines()
    logging.getLogger("owc").addHandler(lines)
    try:
        with trio.fail_after(240):
            # (1, 2) The old Pipe asks for pairing; the owner approves it on the Gateway host; it gets in.
            refused, close = await _old_pipe_connect(gw.url, origin, old, gw.token)
            assert refused["ok"] is False, refused
            details = refused["error"]["details"]
            assert (refused["error"]["code"], details["code"], details["reason"]) == (
                "NOT_PAIRED",
                "PAIRING_REQUIRED",
                "not-paired",
            )
            assert details["deviceId"] == old["id"] and details["requestedScopes"] == OLD_SCOPES
            assert close[0] == 1008
            said = await trio.to_thread.run_sync(gw.cli, "devices", "approve", details["requestId"])
            assert f"Approved {old['id']}" in said
            hello, _ = await _old_pipe_connect(gw.url, origin, old, gw.token)
            assert hello["ok"] is True, hello
            auth = hello["payload"]["auth"]
            assert set(auth["scopes"]) == set(OLD_SCOPES)
            old_token = secret(auth["deviceToken"])

            # The old Pipe's state folder as it left it (inventory A3, A4).
            state = tmp_path / "openclaw-bridge"
            state.mkdir()
            (state / "identity.json").write_text(json.dumps(old))
            (state / "device-token.json").write_text(json.dumps({"deviceToken": old_token, "deviceId": old["id"]}))

            # (3) migrate's conversion into a fresh owc device folder.
            notes: list[str] = []
            found = migrate.find_old_identity({"STATE_DIR": str(state)}, state, notes.append)
            assert found is not None and found.identity.device_id == old["id"]
            assert found.identity.device_token == old_token and "device token" in found.source
            folder = tmp_path / "owc-device"
            device.save(folder, found.identity)

            # (4) owc with that folder, the same Origin: in at once, no pairing asked.
            config = RuntimeConfig(
                url=gw.url,
                token=gw.token,
                gateway=GatewayConfig(
                    instance_id="owc-migrated", device_dir=folder, origin=origin, backoff_initial=0.5, backoff_cap=2.0
                ),
            )
            async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
                async with open_runtime(config, store, RecordingEmitter()) as runtime:
                    await runtime.connected()
                    client = runtime.client
                    conn = client.connection
                    assert conn is not None
                    assert set(conn.hello.auth_scopes or ()) == set(OWC_SCOPES) == set(OLD_SCOPES)
                    assert client.pairing is None and client.connections_opened == 1 and client.attempts == 1
                    assert isinstance(await conn.request("sessions.list", {"limit": 5}), dict)
                    stored = device.load(folder)
                    assert stored is not None and stored.device_id == old["id"]
                    if stored.device_token is not None:
                        secret(stored.device_token)
            assert not [line for line in lines.lines if "pairing_required" in line or "scopes_missing" in line]
            listed = json.loads(await trio.to_thread.run_sync(gw.cli, "devices", "list", "--json"))
            assert listed["pending"] == []
            assert [entry["deviceId"] for entry in listed["paired"]] == [old["id"]]
            assert set(listed["paired"][0]["scopes"]) == set(OLD_SCOPES)
    finally:
        logging.getLogger("owc").removeHandler(lines)
        await trio.to_thread.run_sync(gw.stop)
