"""What owc does on a Gateway that is not the one it was measured on (the README's "Supported versions"): another
OpenClaw release that speaks protocol 4 is used as it is (its version is reported, its runs land); a Gateway that
speaks another protocol is refused at the handshake with the one line that names the fix, and is not retried into
working. Against the simulator over real loopback sockets."""

from __future__ import annotations

from pathlib import Path

import pytest

import owc.sim.server as sim_server
from owc import ids
from owc.gateway import GatewayConfig
from owc.gateway.doctor import diagnose
from owc.sim import open_simulator

from conftest import TOKEN
from harness import open_env


async def test_another_release_on_protocol_4_is_used_as_it_is(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sim_server, "SERVER_VERSION", "2027.3.1")
    async with open_simulator(token=TOKEN) as sim:
        report = await diagnose(sim.url, TOKEN, GatewayConfig(device_dir=tmp_path / "dev"))
    assert report.ok and (report.protocol, report.server_version) == (4, "2027.3.1")
    assert report.lines()[-1] == "status:        ok"
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        env.sim.start_run(key, "r1").text("Answered by a newer Gateway.").end()
        await env.settled()
        message = (await env.messages(chat_id))[ids.message_id(key, "r1")]
    assert message["done"] is True and message["content"] == "Answered by a newer Gateway."


@pytest.mark.parametrize("protocol", [3, 5])
async def test_another_protocol_is_refused_with_the_line_that_names_the_fix(tmp_path: Path, protocol: int) -> None:
    async with open_simulator(token=TOKEN, protocol=protocol) as sim:
        report = await diagnose(sim.url, TOKEN, GatewayConfig(device_dir=tmp_path / "dev"))
    assert report.reachable and not report.authenticated and not report.ok
    assert report.problem == (
        f"The OpenClaw Gateway speaks protocol {protocol}, owc protocol 4 (PROTOCOL_MISMATCH): run a Gateway that"
        " speaks protocol 4 (OpenClaw 2026.9), or an owc release made for it"
    )
