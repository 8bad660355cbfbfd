"""The operator's view of a running runtime (``Runtime.snapshot``, issue 31) on the simulator: a run in flight shows
under its chat with its writer, the Gateway's version and boot id come from its hello, the writers are the
registry's, the unsettled runs the ledger's; when the connection drops or the Gateway refuses owc, the snapshot says
why in one line (the close, the refusal's own line); the device's pairing in one word, never a token."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from owc import device
from owc.gateway import GatewayConfig
from owc.render.operator import as_json, lines, prometheus
from owc.runtime import RuntimeConfig, open_runtime
from owc.sim import Hold, Text, open_simulator
from owc.store import open_store

from conftest import TOKEN
from harness import open_env


async def test_a_run_in_flight_shows_under_its_chat_and_leaves_when_settled(tmp_path, clock) -> None:
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        runtime = env.runtimes["A"]
        snap = await runtime.snapshot()
        assert snap.connected and snap.why is None and snap.chats == ()
        assert snap.server_version == "2026.9.6" and snap.boot_id == env.sim.boot_id and snap.protocol == 4
        assert snap.writers == env.registry.live() and len(snap.writers) == 1
        assert snap.process_id == env.registry.process_id and snap.writers[0].startswith(f"{snap.process_id}/")
        assert snap.pairing == "off" and snap.device_id is None  # the harness signs in with the token alone

        run = env.sim.start_run(key, "long", steps=[Text("Working on it"), Hold()])
        await keeper.until(lambda: keeper.totals()[0] == 1)
        await trio.testing.wait_all_tasks_blocked()  # the writer streams and waits for more
        snap = await runtime.snapshot()
        assert [chat.chat_id for chat in snap.chats] == [chat_id]
        (figure,) = snap.chats[0].runs
        assert (figure.run_id, figure.state, figure.ended, figure.writing) == ("long", "STREAMING", False, True)
        assert snap.in_flight == 1 and snap.unsettled == 1 and snap.writing == 1
        assert f'owc_chat_runs_in_flight{{chat="{chat_id}"}} 1\n' in prometheus(snap)
        assert f"  chat {chat_id}: long STREAMING writing" in lines(snap)
        assert json.loads(json.dumps(as_json(snap)))["runs"]["in_flight"] == 1

        run.release()
        run.end()
        await env.settled()
        snap = await runtime.snapshot()
        assert snap.chats == () and snap.in_flight == 0 and snap.lane_waiting == 0 and not snap.lane_busy


@pytest.mark.virtual_seconds(1)  # the reconnect's backoff
async def test_a_dropped_connection_says_why_until_the_next_hello(tmp_path, clock) -> None:
    async with open_env(tmp_path) as env:
        await env.connect()
        runtime = env.runtimes["A"]
        boot = env.sim.boot_id
        env.sim.disconnect()
        await runtime.client.wait_backing_off()
        snap = await runtime.snapshot()
        assert not snap.connected and snap.state == "waiting"
        assert snap.why == "the connection closed (code 1006): no reason given"
        assert snap.boot_id == boot  # the last connection's, said as such
        assert snap.writers == ()  # its writer id left the registry with it
        assert lines(snap)[1].startswith(
            f"gateway {runtime.client.url}: not connected (waiting): the connection closed"
        )
        assert "owc_connected 0\n" in prometheus(snap)
        await runtime.connected()  # the backoff's second, then the next hello
        assert (await runtime.snapshot()).connected


async def test_a_refused_token_is_the_why_in_the_refusals_own_words(tmp_path, clock) -> None:
    async with open_simulator(token=TOKEN) as sim, open_store(f"sqlite:///{tmp_path / 'w.db'}", create=True) as store:
        from owc.emit import RecordingEmitter

        config = RuntimeConfig(
            url=sim.url,
            token="a-wrong-token-0123456789",
            gateway=GatewayConfig(instance_id="A", backoff_jitter=0, hold_refusals=True),
        )
        async with open_runtime(config, store, RecordingEmitter()) as runtime:
            await runtime.client.wait_held()
            snap = await runtime.snapshot()
    assert snap.state == "held" and not snap.connected
    assert runtime.client.refusal is not None and snap.why == runtime.client.refusal.line
    assert "AUTH_TOKEN_MISMATCH" in snap.why and "a-wrong-token" not in json.dumps(as_json(snap))
    assert snap.errors_total >= 1 and any("gateway.refused" in line for line in snap.errors)
    assert 'owc_connection_state{state="held"} 1\n' in prometheus(snap)


async def test_the_device_is_named_with_its_pairing_never_its_token(tmp_path, clock) -> None:
    folder = tmp_path / "device"
    identity = device.load_or_create(folder)
    device.set_device_token(folder, "device-token-secret-0123456789")
    async with open_env(tmp_path) as env:
        await env.connect()
        runtime = env.runtimes["A"]
        runtime.client.config = GatewayConfig(device_dir=folder)  # read by the snapshot only: no reconnect here
        snap = await runtime.snapshot()
    assert (snap.device_id, snap.pairing) == (identity.device_id, "paired")
    text = json.dumps(as_json(snap)) + prometheus(snap) + "\n".join(lines(snap))
    assert "device-token-secret" not in text and identity.public_key_b64 not in text
