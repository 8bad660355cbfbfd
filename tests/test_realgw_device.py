"""Real Gateway tier, issue 15: owc as a remote client. With an ``Origin`` header the real Gateway 2026.9.6 trusts no
token-only client with scopes and auto-approves no device, even on loopback (measured:
``docs/measured/device-pairing-2026.9.6.md``): owc signs its device, is told to wait for pairing, says exactly what
to run on the Gateway host, keeps retrying on its backoff, connects once the device is approved (with the CLI,
offline), keeps the device token it is given and connects with it again after a reconnect. A user turn sent while
the device waits is refused with that same line. Unpaired on the Gateway host (``openclaw devices remove``), owc is
cut off at once, forgets its dead device token, asks for pairing again on its backoff and connects once approved."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import logging
import re
import ssl
import time
import uuid
from pathlib import Path

import pytest
import trio

from owc import device, ids
from owc.emit import RecordingEmitter
from owc.gateway import GatewayConfig, open_gateway_connection
from owc.registry import WriterRegistry
from owc.runs import RunKeeper
from owc.runs.inline import UserTurnError
from owc.runtime import Runtime
from owc.store import open_store

from conftest import secret
from realgw.gateway import start_cuttable

pytestmark = pytest.mark.realgateway


class _Heard(logging.Handler):
    """Sets an event when a log record with ``text`` arrives (a wait on owc's own report, not a poll)."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.DEBUG)
        self.text = text
        self.records: list[str] = []
        self.event = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if self.text in message:
            self.records.append(message)
            trio.lowlevel.current_trio_token().run_sync_soon(self.event.set)


class _Records(logging.Handler):
    """Every record with the moment it was logged (``perf_counter``: the clock Trio's own reads), and a wait for
    the n-th one holding a text: the test waits on owc's own reports, never on a clock."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[tuple[float, str]] = []
        self._trio = trio.lowlevel.current_trio_token()  # emit may run in a worker thread (owc.device's lines)
        self._changed = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((time.perf_counter(), record.getMessage()))
        self._trio.run_sync_soon(self._wake)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def having(self, text: str, since: int = 0) -> list[tuple[float, str]]:
        return [(at, line) for at, line in self.lines[since:] if text in line]

    def index(self, text: str, since: int = 0) -> int:
        """The position of the first line holding ``text`` from ``since`` on (-1: none)."""
        return next((i for i in range(since, len(self.lines)) if text in self.lines[i][1]), -1)

    async def wait_for(self, text: str, count: int = 1, since: int = 0) -> list[tuple[float, str]]:
        while len(self.having(text, since)) < count:
            await self._changed.wait()
        return self.having(text, since)


async def test_owc_pairs_as_a_remote_client_and_reuses_its_device_token(
    real_gateway_install, tmp_path: Path, caplog
) -> None:
    caplog.set_level(logging.DEBUG)
    gw = await trio.to_thread.run_sync(lambda: start_cuttable(real_gateway_install, tmp_path / "gw"))
    secret(gw.token)
    heard = _Heard("gateway.pairing_required")
    logging.getLogger("owc.gateway").addHandler(heard)
    try:
        async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
            keeper = RunKeeper(store, RecordingEmitter(), WriterRegistry())
            config = GatewayConfig(
                instance_id="owc-remote",
                device_dir=tmp_path / "device",
                origin=f"http://127.0.0.1:{gw.port}",
                backoff_initial=0.5,
                backoff_cap=2.0,
            )
            with trio.fail_after(240):
                async with open_gateway_connection(gw.url, gw.token, keeper, config) as client:
                    await heard.event.wait()
                    request = re.search(r"request=([0-9A-Za-z-]+)", heard.records[0])
                    assert request is not None, heard.records
                    identity = device.load(tmp_path / "device")
                    assert identity is not None and identity.device_token is None
                    assert f"openclaw devices approve {request[1]}" in heard.records[0]
                    assert identity.device_id in heard.records[0]
                    # A user turn meanwhile is refused with the same actionable line (the Pipe's reply).
                    with pytest.raises(UserTurnError, match=f"openclaw devices approve {request[1]}"):
                        await Runtime(client, keeper).user_turn(
                            ids.session_key("main", "u", str(uuid.uuid4())), str(uuid.uuid4()), "hi"
                        )
                    said = await trio.to_thread.run_sync(gw.cli, "devices", "approve", request[1])
                    assert identity.device_id in said
                    conn = await client.wait_connection()  # on owc's own backoff: no restart
                    assert {"operator.read", "operator.write"} <= set(conn.hello.auth_scopes or ())
                    stored = device.load(tmp_path / "device")
                    assert stored is not None and stored.device_token is not None
                    secret(stored.device_token)
                    listed = await conn.request("sessions.list", {"limit": 5})
                    assert isinstance(listed, dict)
                    # A reconnect (the Gateway restarted in-process) needs no new pairing: the device token.
                    heard.records.clear()
                    await trio.to_thread.run_sync(gw.signal, __import__("signal").SIGUSR2)
                    again = await client.wait_connection(newer_than=conn)
                    assert {"operator.read", "operator.write"} <= set(again.hello.auth_scopes or ())
                    assert not heard.records
    finally:
        logging.getLogger("owc.gateway").removeHandler(heard)
        await trio.to_thread.run_sync(gw.stop)
    text = caplog.text
    assert stored.device_token not in text and gw.token not in text


async def test_wss_with_the_gateways_own_certificate_pinned(real_gateway_install, tmp_path: Path, caplog) -> None:
    """The real Gateway serves TLS offline with a generated certificate that has no subjectAltName (measured): owc
    connects over ``wss://`` with that certificate pinned; a wrong pin and a ``ws://`` URL to the TLS port are
    refused, each reported (never a silent downgrade, never a hang: the opening handshake has owc's own bound)."""
    caplog.set_level(logging.INFO)
    tls = {"gateway": {"tls": {"enabled": True, "autoGenerate": True}}}
    gw = await trio.to_thread.run_sync(lambda: start_cuttable(real_gateway_install, tmp_path / "gw", config=tls))
    secret(gw.token)
    cert = next((tmp_path / "gw").rglob("gateway-cert.pem"))
    pin = hashlib.sha256(ssl.PEM_cert_to_DER_cert(cert.read_text())).hexdigest()
    wss = gw.url.replace("ws://", "wss://", 1)
    failed = _Heard("gateway.connect_failed")
    logging.getLogger("owc.gateway").addHandler(failed)
    try:
        async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
            keeper = RunKeeper(store, RecordingEmitter(), WriterRegistry())
            fast = {"backoff_initial": 0.5, "backoff_cap": 2.0, "connect_timeout": 5.0}
            with trio.fail_after(120):
                pinned = GatewayConfig(
                    instance_id="owc-tls", pin_sha256=":".join([pin[i : i + 2] for i in range(0, 64, 2)]), **fast
                )
                async with open_gateway_connection(wss, gw.token, keeper, pinned) as client:
                    conn = await client.wait_connection()
                    assert "operator.read" in conn.hello.auth_scopes
                for url, config, said in (
                    (wss, GatewayConfig(instance_id="owc-tls", pin_sha256="00" * 32, **fast), "not the pinned one"),
                    (wss, GatewayConfig(instance_id="owc-tls", **fast), "CERTIFICATE_VERIFY_FAILED"),
                    (gw.url, GatewayConfig(instance_id="owc-tls", **fast), "connect_failed"),
                ):
                    failed.records.clear()
                    failed.event = trio.Event()
                    async with open_gateway_connection(url, gw.token, keeper, config) as client:
                        await failed.event.wait()
                        assert client.connection is None
                    assert said in failed.records[0], failed.records
    finally:
        logging.getLogger("owc.gateway").removeHandler(failed)
        await trio.to_thread.run_sync(gw.stop)


def _request_of(line: str) -> str:
    """The request id a ``gateway.pairing_required`` line names."""
    found = re.search(r"request=([0-9A-Za-z-]+)", line)
    assert found is not None, line
    return found[1]


def _delay_of(line: str) -> float:
    """The backoff delay a ``gateway.reconnecting`` line announces."""
    found = re.search(r" in=([0-9.]+)", line)
    assert found is not None, line
    return float(found[1])


def _key_forms(folder: Path) -> tuple[str, ...]:
    """The device's private key as stored and in the forms a careless line would print (hex, padded base64), each
    registered as a secret."""
    stored = json.loads(device.identity_path(folder).read_text())["ed25519_seed"]
    seed = device.b64url_decode(stored)
    return tuple(secret(form) for form in (stored, seed.hex(), base64.b64encode(seed).decode()))


async def test_a_device_removed_on_the_gateway_host_pairs_again_without_a_restart(
    real_gateway_install, tmp_path: Path, caplog
) -> None:
    """A person unpairs owc's device on the Gateway host with the Gateway's own CLI, offline:
    ``openclaw devices remove <deviceId>``. ``remove`` rather than ``revoke --device <id> --role operator``: the
    Gateway's docs name ``remove`` to revoke an enrolled machine (``docs/cli/connect.md``, "Revocation behavior") and
    in their token-drift checklist; it takes just the device id owc's pairing line and ``devices list`` show; and it
    unpairs the device, where ``revoke`` revokes one role's token and leaves the device listed as paired
    (``Tokens: operator (revoked)``). Measured with owc, the two act alike: the open connection is closed at once,
    4001 "device removed"; owc's next connect (shared token, old device token, signed device) is refused
    ``NOT_PAIRED`` / ``PAIRING_REQUIRED`` with a new request id (``reason: not-paired``; ``role-upgrade`` after
    ``revoke``), close 1008, and never ``AUTH_DEVICE_TOKEN_MISMATCH``: the shared token decides the auth and the dead
    device token is not even looked at. So that pairing refusal is the only sign owc gets that its device token is
    dead: it drops it (a ``gateway.device_token_dropped`` line, none left on disk to send or export), says how to
    approve the new request, keeps retrying on its backoff (growing delays, never a loop, ``run`` never raising) and
    connects once approved, without a restart, with a new device token. No secret reaches a log record: the shared
    token, either device token, the private key."""
    caplog.set_level(logging.DEBUG)
    gw = await trio.to_thread.run_sync(lambda: start_cuttable(real_gateway_install, tmp_path / "gw"))
    secret(gw.token)
    folder = tmp_path / "device"
    records = _Records()
    logging.getLogger("owc").addHandler(records)
    initial, cap = 0.5, 2.0
    try:
        async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
            keeper = RunKeeper(store, RecordingEmitter(), WriterRegistry())
            config = GatewayConfig(
                instance_id="owc-remote",
                device_dir=folder,
                origin=f"http://127.0.0.1:{gw.port}",
                backoff_initial=initial,
                backoff_cap=cap,
                backoff_jitter=0.0,  # the delays are then exact: the test can hold owc to its backoff, step by step
            )
            with trio.fail_after(240):
                async with open_gateway_connection(gw.url, gw.token, keeper, config) as client:
                    # Paired as a remote client, as above.
                    first = await records.wait_for("gateway.pairing_required")
                    old_request = _request_of(first[0][1])
                    keys = _key_forms(folder)
                    await trio.to_thread.run_sync(gw.cli, "devices", "approve", old_request)
                    conn = await client.wait_connection()
                    old = device.load(folder)
                    assert old is not None and old.device_token is not None
                    old_token = secret(old.device_token)
                    attempts = client.attempts

                    mark = len(records.lines)
                    said = await trio.to_thread.run_sync(gw.cli, "devices", "remove", old.device_id)
                    assert said.strip() == f"Removed {old.device_id}"
                    await conn.wait_closed()  # at once, by the Gateway: not a silence owc notices later
                    assert (conn.close_code, conn.close_reason) == (4001, "device removed")
                    assert records.having("code=4001 reason=device removed", mark)  # owc's gateway.closed line

                    # Four backoff waits: after the close, then after each of three refused attempts.
                    waits = await records.wait_for("gateway.reconnecting", 4, since=mark)
                    made, backing_off = client.attempts - attempts, client.backoff_until is not None  # owc waits now

                    # The refusal said pairing: the device token is dead, dropped before owc says what to approve.
                    dropped = records.index("gateway.device_token_dropped", mark)
                    asked = records.index("gateway.pairing_required", mark)
                    assert 0 <= dropped < asked, "\n".join(
                        line for _, line in records.lines[mark:] if "gateway." in line
                    )
                    assert old.device_id in records.lines[dropped][1]
                    stored = device.load(folder)
                    assert stored is not None and stored.device_id == old.device_id and stored.device_token is None
                    refusals = records.having("gateway.pairing_required", mark)
                    new_request = _request_of(refusals[0][1])
                    assert new_request != old_request
                    assert [_request_of(line) for _, line in refusals] == [new_request] * 3  # one request, unapproved
                    assert f"openclaw devices approve {new_request}" in refusals[0][1]
                    assert client.pairing is not None and f"openclaw devices approve {new_request}" in client.pairing
                    with pytest.raises(UserTurnError, match=f"openclaw devices approve {new_request}"):
                        await Runtime(client, keeper).user_turn(
                            ids.session_key("main", "u", str(uuid.uuid4())), str(uuid.uuid4()), "hi"
                        )

                    # Not a crash loop: from the initial delay (the healthy hello reset it), doubling, held at the
                    # cap; each attempt waited its whole delay, so no two are closer than the initial backoff; one
                    # attempt per wait; nothing fatal.
                    delays = [_delay_of(line) for _, line in waits]
                    assert delays == [initial, 2 * initial, cap, cap]
                    gaps = [after - at for (at, _), (after, _) in itertools.pairwise(waits)]
                    assert all(gap >= delay for gap, delay in zip(gaps, delays, strict=False)), (gaps, delays)
                    assert min(gaps) >= initial
                    assert (made, backing_off) == (len(waits) - 1, True)
                    assert client.connection is None
                    assert not records.having("gateway.refused url=", mark)  # a fatal refusal would end ``run``
                    assert not records.having("gateway.connection_failed", mark)

                    # Approved again on the Gateway host: owc connects on its backoff, no restart, a new token.
                    said = await trio.to_thread.run_sync(gw.cli, "devices", "approve", new_request)
                    assert f"Approved {old.device_id} ({new_request})" in said
                    again = await client.wait_connection(newer_than=conn)
                    assert {"operator.read", "operator.write"} <= set(again.hello.auth_scopes or ())
                    assert client.pairing is None and client.connections_opened == 2
                    renewed = device.load(folder)
                    assert renewed is not None and renewed.device_id == old.device_id
                    assert renewed.device_token is not None
                    new_token = secret(renewed.device_token)
                    assert new_token != old_token
                    assert isinstance(await again.request("sessions.list", {"limit": 5}), dict)
                    assert not records.having("gateway.refused url=", mark)
    finally:
        logging.getLogger("owc").removeHandler(records)
        await trio.to_thread.run_sync(gw.stop)
    shown = {"shared token": gw.token, "old device token": old_token, "new device token": new_token}
    shown |= {f"private key ({i})": key for i, key in enumerate(keys)}
    text = caplog.text + "".join(record.getMessage() for record in caplog.records)
    assert not [name for name, value in shown.items() if value in text]  # names only: never print a secret
