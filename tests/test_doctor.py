"""``owc doctor`` (``owc.gateway.doctor.diagnose``): one connect, and the step that fails named with its fix, against
the simulator over real loopback sockets (issue 15)."""

from __future__ import annotations

import hashlib
import ssl
from pathlib import Path

import pytest
import trio
import trustme

from owc import device
from owc.gateway import GatewayConfig
from owc.gateway.doctor import diagnose
from owc.gateway.url import InvalidGatewayUrl
from owc.sim import open_simulator

from conftest import TOKEN, leaked


async def test_a_usable_gateway(tmp_path: Path) -> None:
    async with open_simulator(token=TOKEN) as sim:
        report = await diagnose(sim.url, TOKEN, GatewayConfig(device_dir=tmp_path / "dev"))
        assert report.ok and report.reachable and report.authenticated
        assert report.scopes == ("operator.read", "operator.write", "operator.admin") and report.missing == ()
        assert (report.protocol, report.server_version, report.boot_id) == (4, "2026.9.6", sim.boot_id)
        assert report.device_id == device.load(tmp_path / "dev").device_id
        assert report.lines()[-1] == "status:        ok"
    token_only = await _diagnose_token_only()
    assert token_only.paired.startswith("no device") and token_only.device_id is None


async def _diagnose_token_only():
    async with open_simulator(token=TOKEN) as sim:
        return await diagnose(sim.url, TOKEN, GatewayConfig())


async def test_nothing_listening_is_unreachable_and_a_wrong_token_is_not_authenticated() -> None:
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    report = await diagnose(f"ws://127.0.0.1:{port}/", TOKEN)
    assert not report.reachable and not report.ok and report.problem.startswith("cannot connect")
    async with open_simulator(token=TOKEN) as sim:
        wrong = await diagnose(sim.url, "owc-test-wrong-doctor-token")
    assert wrong.reachable and not wrong.authenticated and "AUTH_TOKEN_MISMATCH" in wrong.problem
    assert not leaked("\n".join(wrong.lines()))
    with pytest.raises(InvalidGatewayUrl):
        await diagnose("http://127.0.0.1:1/", TOKEN)  # the CLI parses pasted forms first; here it is final


async def test_missing_scopes_say_what_they_turn_off(monkeypatch) -> None:
    import owc.gateway.connection as connection

    original = connection.ConnectParams
    scopes = ("operator.read", "operator.admin")
    monkeypatch.setattr(connection, "ConnectParams", lambda **kw: original(**kw, scopes=scopes))
    async with open_simulator(token=TOKEN) as sim:
        report = await diagnose(sim.url, TOKEN)
    assert report.authenticated and report.missing == ("operator.write",) and not report.ok
    assert "chat.send" in report.problem
    assert "scopes:        operator.read, operator.admin (missing operator.write)" in report.lines()
    scopes = ("operator.read", "operator.write")  # without admin owc works: a note says what is off
    async with open_simulator(token=TOKEN) as sim:
        report = await diagnose(sim.url, TOKEN)
    assert report.ok and report.missing == ("operator.admin",)
    assert any(line.startswith("note:") and "another client" in line for line in report.lines())
    monkeypatch.setattr(connection, "ConnectParams", lambda **kw: original(**kw, client_id="test", mode="test"))
    async with open_simulator(token=TOKEN) as sim:
        report = await diagnose(sim.url, TOKEN)
    assert report.missing == ("operator.read", "operator.write", "operator.admin") and "--device-dir" in report.problem


async def test_tls_a_wrong_pin_is_named_and_the_right_one_works(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)
    der = ssl.PEM_cert_to_DER_cert(cert.cert_chain_pems[0].bytes().decode())
    async with open_simulator(token=TOKEN, ssl_context=server_ctx) as sim:
        wrong = await diagnose(sim.url, TOKEN, GatewayConfig(pin_sha256="00" * 32))
        assert not wrong.reachable and wrong.problem.startswith("TLS failed") and "--tls-pin" in wrong.problem
        unknown = await diagnose(sim.url, TOKEN)  # a private CA the system does not trust
        assert not unknown.reachable and "TLS failed" in unknown.problem
        right = await diagnose(sim.url, TOKEN, GatewayConfig(pin_sha256=hashlib.sha256(der).hexdigest()))
        assert right.ok
        ca_file = tmp_path / "ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        assert (await diagnose(sim.url, TOKEN, GatewayConfig(ca_file=ca_file))).ok


async def test_a_device_waiting_for_approval_then_paired(tmp_path: Path) -> None:
    folder = tmp_path / "dev"
    async with open_simulator(token=TOKEN) as sim:
        sim.remote_address = "192.0.2.10"  # a Gateway on another host: the owner approves devices
        waiting = await diagnose(sim.url, TOKEN, GatewayConfig(device_dir=folder))
        (request,) = sim.devices.pending()
        assert waiting.reachable and not waiting.authenticated and not waiting.ok
        assert f"openclaw devices approve {request.request_id}" in waiting.paired
        sim.devices.approve(request.request_id)
        paired = await diagnose(sim.url, TOKEN, GatewayConfig(device_dir=folder))
        assert paired.ok and paired.paired == "yes (its device token is stored)"
        assert paired.device_id == request.device_id and set(paired.scopes) == {
            "operator.read",
            "operator.write",
            "operator.admin",
        }
        assert not leaked("\n".join(waiting.lines() + paired.lines()))


@pytest.mark.parametrize(("status", "reason"), [(200, b"OK"), (404, b"Not Found")])
async def test_a_web_page_at_the_gateway_url_is_named_in_one_line(status: int, reason: bytes) -> None:
    """Issue 24 item 13: a URL that answers with an HTTP page (the Gateway's own web page on a wrong path, another
    server) was reported with trio-websocket's raw tuple, the page inside. One line, the status and its reason."""
    from http_page import answer, http_page_server

    async with http_page_server(answer(status, reason)) as (port, _):
        report = await diagnose(f"ws://127.0.0.1:{port}/", TOKEN)
    assert not report.ok and not report.reachable
    assert report.problem == (
        f"the Gateway URL answered HTTP {status} {reason.decode()} (not a WebSocket endpoint): check --gateway /"
        " OWC_GATEWAY_URL"
    )
    shown = "\n".join(report.lines())
    assert "SECRET-LOOKING" not in shown and "<html" not in shown and "b'" not in shown
