"""Issue 25, items 4 and 6 at the connection: a refusal retrying cannot fix is held (said once, no retry storm, no
traceback) until a person's new attempt or new settings; new settings (a valve saved) close the connection and open
the next with them at once; a retryable refusal keeps its line while owc waits. Against the simulator over real
loopback WebSockets, under MockClock: no attempt is made on a clock that the schedule does not name."""

from __future__ import annotations

import logging

import orjson
import pytest
import trio
import trio.testing

from owc.gateway import Backoff, GatewayClient, GatewayConfig
from owc.protocol.refusals import PIPE, Kind
from owc.sim import open_simulator

from conftest import TOKEN, secret
from recorder import RecordingHandler

NEW_TOKEN = secret("settings-test-new-token-0123456789")
HELD = GatewayConfig(hold_refusals=True, names=PIPE, backoff_jitter=0)


def _refused_lines(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith("gateway.refused ")]


async def test_a_wrong_token_is_held_said_once_and_tried_again_only_when_asked(autojump_clock, caplog) -> None:
    async with open_simulator(token=TOKEN) as sim, trio.open_nursery() as nursery:
        client = GatewayClient(sim.url, NEW_TOKEN, RecordingHandler(), HELD)
        nursery.start_soon(client.run)
        await client.wait_held()
        refusal = client.refusal
        assert refusal is not None and refusal.kind is Kind.TOKEN and "GATEWAY_TOKEN valve" in refusal.line
        assert sim.refusals == [("INVALID_REQUEST", "AUTH_TOKEN_MISMATCH")] and client.backoff_until is None
        await trio.sleep(3600)  # an hour of the Gateway's and owc's time: no timer tries again
        assert client.attempts == 1 and len(sim.refusals) == 1
        (line,) = _refused_lines(caplog)
        assert "AUTH_TOKEN_MISMATCH" in line.getMessage() and "GATEWAY_TOKEN valve" in line.getMessage()
        assert not any(r.exc_info for r in caplog.records)  # one line, never a traceback

        assert client.retry() and not client.retry()  # a person's new message: one attempt, held again
        await client.wait_held()
        assert client.attempts == 2 and len(sim.refusals) == 2 and len(_refused_lines(caplog)) == 2

        sim.token = NEW_TOKEN  # the Gateway's owner set the token owc has: the next message's attempt connects
        start = trio.current_time()
        assert client.retry()
        conn = await client.wait_connection()
        assert not conn.closed and client.refusal is None and not client.held and client.attempts == 3
        assert trio.current_time() == start  # at once: no backoff for a person's attempt
        nursery.cancel_scope.cancel()


async def test_without_holding_a_refusal_ends_the_client_as_before(autojump_clock) -> None:
    """``owc run`` (no hold): the refusal is raised, exit 4, with the same table's line."""
    from owc.gateway import Refused

    async with open_simulator(token=TOKEN) as sim:
        with pytest.raises(Refused) as info:
            await GatewayClient(sim.url, NEW_TOKEN, RecordingHandler()).run()
    assert info.value.refusal.kind is Kind.TOKEN and "--token-file" in info.value.refusal.line


async def test_new_settings_move_a_live_connection_to_the_new_gateway_at_once(autojump_clock, caplog) -> None:
    async with (
        open_simulator(token=TOKEN) as old,
        open_simulator(token=NEW_TOKEN) as new,
        trio.open_nursery() as nursery,
    ):
        client = GatewayClient(old.url, TOKEN, RecordingHandler(), GatewayConfig(backoff_jitter=0))
        nursery.start_soon(client.run)
        first = await client.wait_connection()
        start = trio.current_time()
        client.reconfigure(new.url, NEW_TOKEN, GatewayConfig(backoff_jitter=0, instance_id="moved"))
        assert first.closed and first.close_reason == "owc's settings changed"
        second = await client.wait_connection(newer_than=first)
        assert trio.current_time() == start  # no backoff wait between the two
        await new.wait_for(lambda: any(c.subscribed and c.instance_id == "moved" for c in new.conns.values()))
        await old.wait_for(lambda: all(c.closing for c in old.conns.values()))
        assert client.attempts == 2 and second.hello.boot_id == new.boot_id and client.url == new.url
        assert any("gateway.reconfigured" in r.getMessage() for r in caplog.records)
        nursery.cancel_scope.cancel()


async def test_new_settings_end_a_backoff_wait_and_a_hold(autojump_clock) -> None:
    with trio.socket.socket() as sock:  # a port nobody listens on: the old URL
        await sock.bind(("127.0.0.1", 0))
        dead = f"ws://127.0.0.1:{sock.getsockname()[1]}/"

    class Counted(Backoff):
        def __init__(self) -> None:
            super().__init__(jitter=0)
            self.fourth = trio.Event()
            self.given = 0

        def next_delay(self) -> float:
            self.given += 1
            if self.given == 4:
                self.fourth.set()
            return super().next_delay()

    backoff = Counted()
    async with open_simulator(token=TOKEN) as sim, trio.open_nursery() as nursery:
        client = GatewayClient(dead, TOKEN, RecordingHandler(), HELD, backoff=backoff)
        nursery.start_soon(client.run)
        await backoff.fourth.wait()  # after 1, 2, 4 s: the fourth wait, at the young outage's cap
        assert await client.wait_backing_off() == 1 + 2 + 4 + 4
        start = trio.current_time()
        client.reconfigure(sim.url, NEW_TOKEN)  # a valve saved: a new URL and a wrong token
        await client.wait_held()
        assert trio.current_time() == start and client.refusal is not None and client.refusal.kind is Kind.TOKEN
        client.reconfigure(sim.url, TOKEN)  # the token valve fixed: held no longer, connected at once
        await client.wait_connection()
        assert trio.current_time() == start and client.refusal is None
        nursery.cancel_scope.cancel()


async def test_a_reconfigure_during_a_handshake_drops_the_attempt_with_the_old_settings(autojump_clock) -> None:
    """A server that accepts the WebSocket and never speaks: the handshake under way is for the old settings; new
    ones cancel it and connect with the new settings at once, not after the 10 s handshake bound."""
    from trio_websocket import serve_websocket

    async def silent(request) -> None:
        await request.accept()
        await trio.sleep_forever()

    async with open_simulator(token=TOKEN) as sim, trio.open_nursery() as nursery:
        server = await nursery.start(serve_websocket, silent, "127.0.0.1", 0, None)
        client = GatewayClient(f"ws://127.0.0.1:{server.port}", TOKEN, RecordingHandler(), HELD)
        nursery.start_soon(client.run)
        await trio.testing.wait_all_tasks_blocked()
        start = trio.current_time()
        client.reconfigure(sim.url, TOKEN)
        await client.wait_connection()
        assert trio.current_time() == start and client.attempts == 2
        nursery.cancel_scope.cancel()


async def test_a_rate_limited_sign_in_waits_its_retry_after_and_keeps_its_line(autojump_clock) -> None:
    """``AUTH_RATE_LIMITED`` (the real Gateway after 10 failed sign-ins from one address: ``retryable`` with
    ``retryAfterMs``): not held, retried no sooner than the Gateway said, and said as such meanwhile."""
    from trio_websocket import serve_websocket

    async def rate_limited(request) -> None:
        ws = await request.accept()
        await ws.send_message('{"type": "event", "event": "connect.challenge", "payload": {"nonce": "n", "ts": 1}}')
        req = orjson.loads(await ws.get_message())
        error = {
            "code": "INVALID_REQUEST",
            "message": "unauthorized: too many failed authentication attempts (retry later)",
            "retryable": True,
            "retryAfterMs": 300_000,
            "details": {"code": "AUTH_RATE_LIMITED", "authReason": "rate_limited"},
        }
        await ws.send_message(orjson.dumps({"type": "res", "id": req["id"], "ok": False, "error": error}).decode())
        await ws.aclose(1008, "unauthorized: too many failed authentication attempts (retry later)")

    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_websocket, rate_limited, "127.0.0.1", 0, None)
        client = GatewayClient(f"ws://127.0.0.1:{server.port}", TOKEN, RecordingHandler(), HELD)
        nursery.start_soon(client.run)
        until = await client.wait_backing_off()
        assert until - trio.current_time() == 300 and not client.held
        refusal = client.refusal
        assert refusal is not None and refusal.kind is Kind.RATE_LIMITED and refusal.retryable
        assert "tries again in 5 min" in refusal.reply and "GATEWAY_TOKEN valve" in refusal.reply
        nursery.cancel_scope.cancel()


def test_reconfigure_keeps_the_injected_random_source() -> None:
    """New settings bring their own backoff bounds; the jitter's random source stays the one injected."""
    import random

    rng = random.Random(3)
    client = GatewayClient("ws://127.0.0.1:9/", TOKEN, backoff=Backoff(rng=rng))
    client.reconfigure("ws://127.0.0.1:10/", TOKEN, GatewayConfig(backoff_watch_cap=2.0))
    assert client.backoff.rng is rng and client.backoff.watch_cap == 2.0
    with pytest.raises(ValueError):
        client.reconfigure("http-not-ws", TOKEN)
    assert client.url == "ws://127.0.0.1:10/"  # a URL that cannot work changes nothing


# ------------------------------------------------------------------------------------------ through the runtime


async def test_a_message_while_the_token_is_wrong_gets_the_line_and_a_fixed_gateway_takes_the_next(tmp_path) -> None:
    """The Pipe's reply for a wrong token (item 4): the table's line naming the valve, the runtime alive (no
    traceback, no restart); each message is a person's new attempt, so once the Gateway's owner set the token owc
    has, the next message is sent without a restart."""
    from owc import ids
    from owc.runs.inline import UserTurnError
    from owc.runtime import RuntimeConfig, open_runtime

    from harness import open_env

    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        config = RuntimeConfig(url=env.sim.url, token=NEW_TOKEN, gateway=HELD)
        async with open_runtime(config, env.store, env.emitter) as runtime:
            await runtime.client.wait_held()
            with pytest.raises(UserTurnError) as refused:
                await runtime.user_turn(key, ids.input_run_id(chat_id, "m1", "t1"), "hello")
            line = str(refused.value)
            assert line.startswith("The OpenClaw Gateway refused owc's token (AUTH_TOKEN_MISMATCH), so your message")
            assert "GATEWAY_TOKEN valve" in line and "\n" not in line and NEW_TOKEN not in line
            assert len(env.sim.refusals) == 2 and env.sim.requests["chat.send"] == 0  # its attempt, refused again
            env.sim.token = NEW_TOKEN
            turn = await runtime.user_turn(key, ids.input_run_id(chat_id, "m2", "t2"), "hello again")
            assert turn.run.run_id == ids.input_run_id(chat_id, "m2", "t2") and env.sim.requests["chat.send"] == 1


async def test_a_run_streaming_when_the_token_valve_changes_is_carried_to_the_new_connection(tmp_path) -> None:
    """Item 6: new settings close the connection and open the next at once; a run in flight is carried by the
    ledger as across any reconnect, and its message is finished whole, once."""
    from owc import ids

    from harness import open_env

    async with open_env(tmp_path) as env:
        await env.connect()
        chat_id, key = await env.chat()
        run = env.sim.start_run(key, "agent-turn").text("Before the valve changed,")
        message = ids.message_id(key, "agent-turn")
        await env.until(lambda: any(r.writer_live for r in env.keepers["A"].ledger.unsettled()))
        client = env.clients["A"]
        first = client.connection
        env.sim.token = NEW_TOKEN  # the Gateway's token rotated; the admin saves the new one in the valve
        env.runtimes["A"].reconfigure(env.sim.url, NEW_TOKEN, GatewayConfig(instance_id="A", backoff_jitter=0))
        second = await client.wait_connection(newer_than=first)
        assert first is not None and first.closed and second is not first
        run.text(" and after it.").end()
        await env.settled()
        messages = await env.messages(chat_id)
        assert messages[message]["done"] is True
        assert messages[message]["content"] == "Before the valve changed, and after it."
        assert [m for m in messages.values() if m["role"] == "assistant"] == [messages[message]]


async def test_wait_settled_returns_on_the_clients_own_change_never_on_an_unreachable_gateway(autojump_clock) -> None:
    """Issue 31: ``owc owui install`` lists the models once owc has had its hello, through the health route's
    ``?wait_s``, which waits on ``GatewayClient.wait_settled``. It returns when there is something to say
    (connected, refused), at the moment the client changes; a Gateway nobody answers at never settles it."""
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        dead = f"ws://127.0.0.1:{sock.getsockname()[1]}/"
    async with open_simulator(token=TOKEN) as sim, trio.open_nursery() as nursery:
        client = GatewayClient(dead, TOKEN, RecordingHandler(), HELD)
        nursery.start_soon(client.run)
        with trio.move_on_after(600) as waited:  # ten minutes of backing off: nothing to say
            await client.wait_settled()
        assert waited.cancelled_caught and client.attempts > 3 and client.refusal is None
        client.reconfigure(sim.url, NEW_TOKEN)  # a wrong token: refused, said at once
        start = trio.current_time()
        await client.wait_settled()
        assert trio.current_time() == start and client.refusal is not None and client.refusal.kind is Kind.TOKEN
        client.reconfigure(sim.url, TOKEN)
        await client.wait_settled()  # settled by the hello of the new connection, not by the old refusal
        assert client.refusal is None and client.connection is not None and not client.connection.closed
        assert trio.current_time() == start
        nursery.cancel_scope.cancel()
