"""The Trio Gateway connection, against the simulator over real loopback WebSockets (MockClock where timed)."""

from __future__ import annotations

import logging
import random
import ssl

import orjson
import pytest
import trio
import trio.testing
import trustme

from owc.gateway import (
    Backoff,
    GatewayClient,
    GatewayConfig,
    MissingScopes,
    NotConnected,
    PayloadTooLarge,
    Refused,
    RequestError,
    RequestTimeout,
    SessionClosed,
    open_gateway_connection,
)
from owc.protocol import ChatEvent, SessionsChanged
from owc.sim import Hold, Text, open_simulator

from conftest import TOKEN
from recorder import RecordingHandler

KEY = "agent:main:openwebui-u1-3f0c9f2e-8a51-4b1e-9d7a-0c6f2b1e4a55"
KEY2 = "agent:main:openwebui-u1-9b2d7e10-4c3a-4f6b-8e21-5a7c9d0e1f23"


def no_jitter() -> Backoff:
    return Backoff(jitter=0)


async def test_handshake_subscribe_and_first_resync() -> None:
    handler = RecordingHandler()
    async with open_simulator(token=TOKEN) as sim:
        early = sim.start_run(KEY, "early")  # before owc connects: only the list can tell
        async with open_gateway_connection(sim.url, TOKEN, handler) as client:
            session = await client.wait_connection()
            await handler.until(lambda: handler.resyncs)
            assert session.boot_id == sim.boot_id and session.hello.policy.tick_interval_ms == 30_000
            (hello,) = handler.hellos
            assert hello.first and not hello.boot_changed and hello.notice is None
            resync = handler.resyncs[0]
            assert resync.reason == "hello" and resync.started == ((KEY, "early"),)
            assert sim.requests["sessions.subscribe"] == 1 and sim.requests["sessions.list"] == 0
            # Events of a run after the subscribe reach the handler, typed, in order.
            early.text("Hello").end()
            await handler.until(lambda: handler.of(ChatEvent) and handler.of(ChatEvent)[-1].state == "final")
            assert [e.state for e in handler.of(ChatEvent)] == ["delta", "final"]
            # RPCs correlate by id and return the payload.
            listed = await client.request("sessions.list", {"limit": 10})
            assert listed["sessions"][0]["key"] == KEY


async def test_run_with_hidden_ids_is_active_unknown() -> None:
    handler = RecordingHandler()
    async with open_simulator(token=TOKEN, cli_runtime=True) as sim:
        sim.start_run(KEY, "cli-run")
        async with open_gateway_connection(sim.url, TOKEN, handler):
            resync = await handler.until(lambda: handler.resyncs and handler.resyncs[0])
            assert resync.started == () and resync.active_unknown == (KEY,)


@pytest.mark.parametrize(
    ("sim_kwargs", "token", "code", "detail"),
    [
        ({}, "wrong-token", "INVALID_REQUEST", "AUTH_TOKEN_MISMATCH"),
        ({"protocol": 5}, TOKEN, "INVALID_REQUEST", "PROTOCOL_MISMATCH"),
        ({}, "", "NOT_PAIRED", "DEVICE_IDENTITY_REQUIRED"),
    ],
)
async def test_refusals_are_not_retried(autojump_clock, sim_kwargs, token, code, detail) -> None:
    async with open_simulator(token=TOKEN, **sim_kwargs) as sim:
        client = GatewayClient(sim.url, token, RecordingHandler())
        start = trio.current_time()
        with pytest.raises(Refused) as info:
            await client.run()
        assert (info.value.error.code, info.value.error.detail_code, info.value.retryable) == (code, detail, False)
        assert client.attempts == 1 and trio.current_time() == start  # no retry storm, no waiting
        assert sim.refusals == [(code, detail)]
        assert TOKEN not in str(info.value) and (not token or token not in str(info.value))


async def test_scopeless_connection_is_refused(autojump_clock, monkeypatch) -> None:
    # A Gateway that lets owc in without its scopes (as it does for clients it does not trust) is a
    # configuration error owc reports at once instead of failing every later request.
    import owc.gateway.connection as connection

    original = connection.ConnectParams

    def as_test_client(**kwargs):
        return original(**kwargs, client_id="test", mode="test")

    monkeypatch.setattr(connection, "ConnectParams", as_test_client)
    async with open_simulator(token=TOKEN) as sim:
        with pytest.raises(MissingScopes) as info:
            await GatewayClient(sim.url, TOKEN).run()
    # It says which scopes are missing, what that disables and what to do, never the token.
    text = str(info.value)
    assert info.value.missing == ("operator.read", "operator.write", "operator.admin")
    assert "did not grant operator.read, operator.write, operator.admin" in text and "sessions.subscribe" in text
    assert "chat.send" in text and "--device-dir" in text and TOKEN not in text


async def test_owc_asks_exactly_the_scopes_it_uses(autojump_clock) -> None:
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN) as client:
            conn = await client.wait_connection()
            (sim_conn,) = sim.conns.values()
            # read and write, and admin for a Stop of another client's run: nothing else
            assert sim_conn.scopes == {"operator.read", "operator.write", "operator.admin"}
            assert set(conn.hello.auth_scopes) == set(sim_conn.scopes) and client.limited is None


async def test_without_write_owc_still_connects_and_says_what_is_off(autojump_clock, monkeypatch, caplog) -> None:
    # A Gateway granting read but not write: owc shows runs, and says at once (not on the first chat.send)
    # that user turns, Stop and model choice are off.
    import owc.gateway.connection as connection

    original = connection.ConnectParams
    scopes = ("operator.read", "operator.admin")
    monkeypatch.setattr(connection, "ConnectParams", lambda **kw: original(**kw, scopes=scopes))
    caplog.set_level(logging.ERROR, "owc.gateway")
    handler = RecordingHandler()
    async with open_simulator(token=TOKEN) as sim:
        sim.start_run(KEY, "seen").text("Shown anyway.").end()
        async with open_gateway_connection(sim.url, TOKEN, handler) as client:
            await client.wait_connection()
            await handler.until(lambda: handler.resyncs)
            assert client.limited is not None and "did not grant operator.write" in client.limited
            assert "chat.send" in client.limited and "chat.abort" in client.limited
            assert (await client.request("sessions.list", {"limit": 10}))["sessions"][0]["key"] == KEY
    lines = [r.getMessage() for r in caplog.records if "gateway.scopes_missing" in r.getMessage()]
    assert len(lines) == 1 and "missing=operator.write" in lines[0] and TOKEN not in lines[0]


async def test_without_admin_owc_works_and_warns_that_a_stop_of_another_clients_run_fails(
    autojump_clock, monkeypatch, caplog
) -> None:
    import owc.gateway.connection as connection

    original = connection.ConnectParams
    scopes = ("operator.read", "operator.write")
    monkeypatch.setattr(connection, "ConnectParams", lambda **kw: original(**kw, scopes=scopes))
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN) as client:
            await client.wait_connection()
            assert client.limited is None  # user turns go on
            sim.start_run(KEY, "sent", owner="another-clients-connection").text("Working.")
            with pytest.raises(RequestError, match="INVALID_REQUEST: unauthorized"):  # the Gateway's own rule
                await client.request("chat.abort", {"sessionKey": KEY, "runId": "sent"})
            sim.start_run(KEY2, "cron").text("Working.")  # no owner (cron, a heartbeat): anyone may stop it
            assert (await client.request("chat.abort", {"sessionKey": KEY2, "runId": "cron"}))["aborted"] is True
    warned = [r for r in caplog.records if "gateway.scopes_missing" in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING
    assert "missing=operator.admin" in warned[0].getMessage() and "another client" in warned[0].getMessage()


async def test_unavailable_while_starting_is_retried(autojump_clock) -> None:
    handler = RecordingHandler()
    async with open_simulator(token=TOKEN) as sim:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: sim.restart("stop", down_seconds=3))
            await sim.wait_for(lambda: sim.starting)
            async with open_gateway_connection(sim.url, TOKEN, handler, backoff=no_jitter()) as client:
                await client.wait_connection()
                assert trio.current_time() >= 3 and client.attempts >= 2
                assert ("UNAVAILABLE", "") in sim.refusals


async def test_subscribe_and_list_on_every_reconnect(autojump_clock) -> None:
    handler = RecordingHandler()
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN, handler, backoff=no_jitter()) as client:
            first = await client.wait_connection()
            await handler.until(lambda: len(handler.resyncs) == 1)
            sim.start_run(KEY, "while-away", steps=[Text("busy"), Hold()])
            sim.disconnect()
            await handler.until(lambda: len(handler.resyncs) == 2)
            second = client.connection
            assert second is not first and first.closed
            assert sim.requests["sessions.subscribe"] == 2
            assert handler.resyncs[1].started == ((KEY, "while-away"),)
            assert [h.first for h in handler.hellos] == [True, False]
            assert handler.hellos[1].boot_changed is False and handler.hellos[1].notice is None
            assert handler.closes[0].code == 1006 and handler.closes[0].notice is None


async def test_gap_triggers_one_resync_per_burst(autojump_clock) -> None:
    handler = RecordingHandler()
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN, handler) as client:
            session = await client.wait_connection()
            await handler.until(lambda: handler.resyncs)
            run = sim.start_run(KEY, "r1")
            await handler.until(lambda: handler.of(SessionsChanged))
            sim.drop(5)  # five droppable events in a row: one burst
            run.text("a b c d e f g")
            await handler.until(lambda: len(handler.resyncs) == 2)
            run.end()
            await handler.until(lambda: any(e.state == "final" for e in handler.of(ChatEvent)))
            assert session.gaps == 5 and session.resyncs == 1  # the drops alternate with kept events
            assert sim.requests["sessions.list"] == 1


async def test_gap_hides_a_run_start_and_resync_finds_it(autojump_clock) -> None:
    handler = RecordingHandler()
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN, handler):
            await handler.until(lambda: handler.resyncs)
            sim.drop(4)  # chat status x2, agent.run.started and the phase:"start" push
            sim.start_run(KEY2, "unseen", steps=[Text("x"), Hold()])
            resync = await handler.until(lambda: len(handler.resyncs) == 2 and handler.resyncs[1])
            assert resync.reason == "gap" and resync.started == ((KEY2, "unseen"),)
            assert not [e for e in handler.of(SessionsChanged) if e.phase == "start"]


async def test_resync_reports_runs_that_ended_unseen(autojump_clock) -> None:
    handler = RecordingHandler()
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN, handler):
            await handler.until(lambda: handler.resyncs)
            run = sim.start_run(KEY, "r1")
            await handler.until(lambda: [e for e in handler.of(SessionsChanged) if e.phase == "start"])
            sim.mute()  # the terminal is lost ...
            run.end()
            sim.connection().muted = False
            sim.drop(4)  # ... and the next droppable events (r2's start push among them) leave a gap
            sim.start_run(KEY2, "r2")
            resync = await handler.until(lambda: len(handler.resyncs) == 2 and handler.resyncs[1])
            assert resync.ended == ((KEY, "r1"),) and resync.started == ((KEY2, "r2"),)


async def test_three_missed_ticks_reconnect_and_not_before(autojump_clock) -> None:
    handler = RecordingHandler()
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN, handler, backoff=no_jitter()) as client:
            first = await client.wait_connection()
            await handler.until(lambda: handler.resyncs)
            sim.mute()  # a half-open socket: no close, no frame, no tick
            muted_at = trio.current_time()
            await trio.sleep(89)
            assert client.connection is first and not first.closed and client.connections_opened == 1
            await trio.sleep(2)
            assert first.closed and "3 missed ticks" in first.close_reason
            second = await client.wait_connection()
            assert second is not first and trio.current_time() - muted_at >= 90


async def test_ticks_keep_a_quiet_connection_alive(autojump_clock) -> None:
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN) as client:
            first = await client.wait_connection()
            await trio.sleep(600)  # twenty ticks, nothing else
            assert client.connection is first and client.connections_opened == 1


async def test_a_steady_stream_of_frames_never_trips_the_watchdog(autojump_clock) -> None:
    """The watchdog re-arms from the reader's stamp: frames 89 s apart (never three ticks of silence) keep a
    connection whose ticks stopped alive for as long as they come; the bound then runs from the last one."""
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN, backoff=no_jitter()) as client:
            first = await client.wait_connection()
            sim.mute()  # no tick any more: only the frames below
            for _ in range(20):
                await trio.sleep(89)
                sim.inject(orjson.dumps({"type": "event", "event": "tick", "payload": {"ts": 1}}))
                await trio.testing.wait_all_tasks_blocked()
                assert client.connection is first and not first.closed
            last = first.last_frame_at
            await first.wait_closed()
            assert trio.current_time() == last + 90 and "3 missed ticks" in first.close_reason


async def test_silence_trips_the_watchdog_at_exactly_the_bound(autojump_clock, caplog) -> None:
    """No frame for exactly 3 x tickIntervalMs after the last one closes the connection at that instant (not a
    tick later, not a frame's processing later), with the same log line and close reason as ever."""
    caplog.set_level(logging.WARNING, logger="owc.gateway")
    async with open_simulator(token=TOKEN, tick_interval_ms=1_000) as sim:
        async with open_gateway_connection(sim.url, TOKEN, backoff=no_jitter()) as client:
            first = await client.wait_connection()
            await trio.sleep(10.5)  # ticks keep it alive
            assert not first.closed
            sim.mute()
            last = first.last_frame_at
            assert trio.current_time() - last < 1
            await first.wait_closed()
            assert trio.current_time() == last + 3
            assert first.close_code is None and first.close_reason == "no frame for 3 s (3 missed ticks)"
            assert any(
                "gateway.dead_socket" in r.getMessage() and "silent_for=3" in r.getMessage() for r in caplog.records
            )


class RecordingBackoff(Backoff):
    def __init__(self, until: int = 0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.delays: list[float] = []
        self.until = until
        self.reached = trio.Event()  # set once ``until`` delays were asked for

    def next_delay(self) -> float:
        delay = super().next_delay()
        self.delays.append(delay)
        if len(self.delays) >= self.until:
            self.reached.set()
        return delay


async def test_backoff_sequence_and_reset(autojump_clock) -> None:
    from realgw.gateway import free_port

    port = free_port()
    backoff = RecordingBackoff(until=8, jitter=0)
    async with trio.open_nursery() as nursery:
        client = GatewayClient(f"ws://127.0.0.1:{port}/", TOKEN, backoff=backoff)
        nursery.start_soon(client.run)
        # Nothing listens: every attempt fails at once and the delays double up to the young outage's cap.
        await backoff.reached.wait()
        assert backoff.delays[:8] == [1, 2, 4, 4, 4, 4, 4, 4]
        async with open_simulator(token=TOKEN, port=port) as sim:
            first = await client.wait_connection()
            count = len(backoff.delays)
            sim.disconnect()
            second = await client.wait_connection(newer_than=first)
            assert backoff.delays[count] == 1  # reset by the healthy hello
            assert second.hello.boot_id == sim.boot_id
        nursery.cancel_scope.cancel()


def test_backoff_jitter_bounds() -> None:
    backoff = Backoff(jitter=0.2, rng=random.Random(7))
    delays = [backoff.next_delay() for _ in range(40)]
    bases = [1, 2, 4] + [4] * 29 + [8, 16, 30, 30, 30, 30, 30, 30]
    caps = [4] * 32 + [30] * 8
    assert all(0.8 * b <= d <= min(cap, 1.2 * b) for d, b, cap in zip(delays, bases, caps))
    assert len(set(delays[:3])) == 3


def test_the_backoff_schedule_exactly() -> None:
    """Issue 25, item 7: 1 s doubling to 4 s while the outage is young, so a person watching a reply waits at most
    4 s after the Gateway answers again; once this outage's waits add up to 120 s, doubling on to 30 s. Each delay
    is the base times the injected random source's factor in [0.8, 1.2], never above the cap in force."""
    plain = Backoff(jitter=0)
    delays = [plain.next_delay() for _ in range(38)]
    assert delays == [1, 2, 4] + [4] * 29 + [8, 16, 30, 30, 30, 30]
    assert sum(delays[:31]) == 119 and plain.waited == 119 + 4 + 8 + 16 + 4 * 30
    plain.reset()
    assert [plain.next_delay() for _ in range(4)] == [1, 2, 4, 4] and plain.waited == 11

    class Fixed(random.Random):
        """Hands out the given draws of ``uniform`` in turn: the exact jittered sequence."""

        def __init__(self, draws: list[float]) -> None:
            super().__init__(0)
            self.draws = list(draws)

        def uniform(self, a: float, b: float) -> float:
            assert (a, b) == (-0.2, 0.2)
            return self.draws.pop(0)

    jittered = Backoff(rng=Fixed([0.2, -0.2, 0.1, 0.2, -0.1] + [0.0] * 27 + [0.2, -0.2, 0.2, 0.1]))
    got = [jittered.next_delay() for _ in range(36)]
    assert got[:5] == [1.2, 1.6, 4.0, 4.0, 3.6]  # 4 x 1.1 and 4 x 1.2 are held to the 4 s cap
    assert got[5:32] == [4.0] * 27
    assert got[32:] == [9.6, 12.8, 30.0, 30.0]  # past the patience: 8 x 1.2, 16 x 0.8, then the 30 s cap holds
    # The bounds stay configurable: a larger first delay is never cut by the young cap, a smaller cap wins.
    assert [Backoff(initial=5.0, jitter=0).next_delay() for _ in range(1)] == [5.0]
    small = Backoff(initial=0.5, cap=2.0, jitter=0)
    assert [small.next_delay() for _ in range(5)] == [0.5, 1.0, 2.0, 2.0, 2.0]


@pytest.mark.parametrize(
    ("mode", "restart_expected_ms", "reason"),
    [("restart", 1500, "gateway restarting"), ("stop", None, "gateway stopping")],
)
async def test_boot_change_and_shutdown_notice(autojump_clock, mode, restart_expected_ms, reason) -> None:
    handler = RecordingHandler()
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN, handler, backoff=no_jitter()) as client:
            await client.wait_connection()
            await handler.until(lambda: handler.resyncs)
            old_boot = sim.boot_id
            await sim.restart(mode)
            await handler.until(lambda: len(handler.hellos) == 2)
            close = handler.closes[0]
            assert (close.code, close.boot_id) == (1012, old_boot)
            assert close.notice.reason == reason and close.notice.restart_expected_ms == restart_expected_ms
            hello = handler.hellos[1]
            assert hello.boot_changed and hello.previous_boot_id == old_boot and hello.hello.boot_id == sim.boot_id
            assert hello.notice == close.notice


async def test_crash_has_no_notice_and_a_new_boot(autojump_clock) -> None:
    handler = RecordingHandler()
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN, handler, backoff=no_jitter()):
            await handler.until(lambda: handler.resyncs)
            await sim.restart("crash")
            await handler.until(lambda: len(handler.hellos) == 2)
            assert handler.closes[0].code == 1006 and handler.closes[0].notice is None
            assert handler.hellos[1].boot_changed and handler.hellos[1].notice is None


async def test_the_hello_says_when_the_boot_began(autojump_clock) -> None:
    """``HelloOk.booted_at_ms`` (the challenge's ``ts`` less ``snapshot.uptimeMs``): the Gateway's own time of its
    boot. A restart's boot begins after every write of the process before it (a row it settled is dated before),
    which is what tells a row settled before the boot from the boot's recovery (fuzz seed 141731)."""
    handler = RecordingHandler()
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN, handler, backoff=no_jitter()):
            await handler.until(lambda: handler.resyncs)
            first = handler.hellos[0].hello.booted_at_ms
            assert first is not None and first <= sim.now_ms()
            await trio.sleep(5)
            last_write = sim.now_ms()  # the old process's last moment
            await sim.restart("crash")
            await handler.until(lambda: len(handler.hellos) == 2)
            booted = handler.hellos[1].hello.booted_at_ms
            assert booted is not None and last_write < booted <= sim.now_ms()
            assert booted - first >= 5000


async def test_hostile_frames_do_not_kill_the_connection(caplog) -> None:
    handler = RecordingHandler()
    async with open_simulator(token=TOKEN, max_payload=4096) as sim:
        async with open_gateway_connection(sim.url, TOKEN, handler) as client:
            session = await client.wait_connection()
            await handler.until(lambda: handler.resyncs)
            with caplog.at_level(logging.ERROR, logger="owc.gateway"):
                for junk in (
                    "{not json",
                    "[1, 2, 3]",
                    '"a string"',
                    '{"type": "event"}',
                    '{"type": "event", "event": "chat", "payload": {"state": "delta"}, "seq": 999}',
                    '{"type": "event", "event": "agent", "payload": {"runId": "r", "stream": "tool", "data": {}}}',
                    '{"type": "res", "id": "nobody-asked", "ok": true}',
                    '{"type": "req", "id": "1", "method": "x"}',
                    '{"type": "event", "event": "tick", "payload": {"pad": "' + "x" * 5000 + '"}}',
                ):
                    sim.inject(junk)
                run = sim.start_run(KEY, "after-junk").text("still here")
                run.end()
                await handler.until(lambda: any(e.state == "final" for e in handler.of(ChatEvent)))
            assert client.connection is session and client.connections_opened == 1 and not session.closed
            messages = [r.getMessage() for r in caplog.records]
            assert any("not valid JSON" in m for m in messages)
            assert any("exceeds policy.maxPayload of 4096" in m for m in messages)
            assert any("chat event: chat lacks required field 'runId'" in m for m in messages)
            assert [e.text for e in handler.of(ChatEvent) if e.state == "final"] == ["still here"]


async def test_handler_failure_does_not_kill_the_connection(caplog) -> None:
    class Broken(RecordingHandler):
        def on_event(self, session, event):
            super().on_event(session, event)
            if isinstance(event, ChatEvent) and event.run_id == "bad":
                raise RuntimeError("handler bug")

    handler = Broken()
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN, handler) as client:
            session = await client.wait_connection()
            sim.start_run(KEY, "bad").text("boom").end()
            sim.start_run(KEY2, "good").text("fine").end()
            await handler.until(lambda: any(e.run_id == "good" and e.state == "final" for e in handler.of(ChatEvent)))
            assert not session.closed
            assert any("gateway.handler_failed" in r.getMessage() for r in caplog.records)


async def test_request_errors_are_typed(autojump_clock) -> None:
    async with open_simulator(token=TOKEN) as sim:
        client = GatewayClient(sim.url, TOKEN, backoff=no_jitter())
        with pytest.raises(NotConnected) as nc:
            await client.request("sessions.list", {})
        assert nc.value.retryable
        async with trio.open_nursery() as nursery:
            await nursery.start(client.run)
            await client.wait_connection()
            with pytest.raises(RequestError) as bad:
                await client.request("chat.send", {"sessionKey": KEY, "message": "x"})
            assert bad.value.code == "INVALID_REQUEST" and not bad.value.retryable
            sim.stall_replies()
            start = trio.current_time()
            with pytest.raises(RequestTimeout) as slow:
                await client.request("sessions.list", {})
            assert trio.current_time() - start == pytest.approx(60) and slow.value.retryable
            nursery.cancel_scope.cancel()


async def test_chat_send_while_the_gateway_closes_is_retryable(autojump_clock) -> None:
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN, backoff=no_jitter()) as client:
            await client.wait_connection()
            sim.stall_replies()  # the Gateway is shutting down: it reads the send and never answers
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sim.restart, "stop")
                with pytest.raises(SessionClosed) as closed:
                    await client.request("chat.send", {"sessionKey": KEY, "message": "resume", "idempotencyKey": "r-1"})
            assert closed.value.retryable
            with pytest.raises(NotConnected):
                await client.request("chat.send", {"sessionKey": KEY, "message": "resume", "idempotencyKey": "r-1"})
            await client.wait_connection()
            result = await client.request(
                "chat.send", {"sessionKey": KEY, "message": "resume", "idempotencyKey": "r-1"}
            )
            assert result == {"runId": "r-1", "status": "started"}


def _tasks_under(nursery: trio.Nursery) -> set[trio.lowlevel.Task]:
    out: set[trio.lowlevel.Task] = set()
    stack = list(nursery.child_tasks)
    while stack:
        task = stack.pop()
        out.add(task)
        for child in task.child_nurseries:
            stack.extend(child.child_tasks)
    return out


def _all_tasks() -> set[trio.lowlevel.Task]:
    root = trio.lowlevel.current_root_task()
    out = {root}
    for nursery in root.child_nurseries:
        out |= _tasks_under(nursery)
    return out


async def test_closing_leaves_no_task_running(autojump_clock) -> None:
    async with open_simulator(token=TOKEN) as sim:
        before = _all_tasks()
        handler = RecordingHandler()
        async with open_gateway_connection(sim.url, TOKEN, handler) as client:
            gateway_nursery = trio.lowlevel.current_task().child_nurseries[-1]
            session = await client.wait_connection()
            session.nursery.start_soon(trio.sleep_forever)  # stands for a run writer
            sim.start_run(KEY, "r").text("x")
            await handler.until(lambda: handler.of(ChatEvent))
            owned = _tasks_under(gateway_nursery)
            assert len(owned) >= 3  # run loop, reader, the stand-in writer
            closing_at = trio.current_time()
        # Promptly: no wait for a close reply that the cancelled reader could never read (the clock would
        # have jumped by the close timeout).
        assert trio.current_time() == closing_at
        assert session.closed and client.connection is None
        assert owned & _all_tasks() == set()
        # Nothing else was left behind either (a system task, a task in another nursery); the simulator's
        # own tasks (the server side of the socket) are the Gateway's, not owc's.
        assert _all_tasks() - before - _tasks_under(sim._nursery) == set()


async def test_wss_verifies_certificates(autojump_clock, caplog) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)
    async with open_simulator(token=TOKEN, ssl_context=server_ctx) as sim:
        assert sim.url.startswith("wss://")
        untrusting = GatewayClient(sim.url, TOKEN, backoff=no_jitter())
        with caplog.at_level(logging.WARNING, logger="owc.gateway"):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(untrusting.run)
                await trio.sleep(5)
                nursery.cancel_scope.cancel()
        assert untrusting.connections_opened == 0 and untrusting.attempts >= 2
        assert any("CERTIFICATE_VERIFY_FAILED" in r.getMessage() for r in caplog.records)
        client_ctx = ssl.create_default_context()
        ca.configure_trust(client_ctx)
        async with open_gateway_connection(sim.url, TOKEN, config=GatewayConfig(ssl_context=client_ctx)) as client:
            session = await client.wait_connection()
            assert session.boot_id == sim.boot_id


async def test_instance_id_names_the_deploy() -> None:
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN, config=GatewayConfig(instance_id="deploy-A")) as client:
            await client.wait_connection()
            assert sim.connection("deploy-A").client_id == "gateway-client"
            assert "deploy-A" in repr(client) and TOKEN not in repr(client)


def test_resync_ignores_runs_learned_after_the_list() -> None:
    from owc.gateway import ActiveRuns
    from owc.protocol import SessionsChanged
    from owc.protocol.results import SessionRow

    active = ActiveRuns()
    active.observe(SessionsChanged(session_key=KEY, phase="start", run_id="old"), position=3)
    active.observe(SessionsChanged(session_key=KEY2, phase="start", run_id="new"), position=12)
    rows = [
        SessionRow(key=KEY, has_active_run=False, active_run_ids=()),
        SessionRow(key=KEY2, has_active_run=False, active_run_ids=()),
    ]
    resync = active.resync(rows, "gap", position=10)  # the list was built before "new" started
    assert resync.ended == ((KEY, "old"),)
    assert (KEY2, "new") in active.known


def test_a_run_known_only_by_its_events_is_ended_by_a_list_without_it() -> None:
    """A run first heard of by its events (its start push lost, or a phantom run the Gateway never ran) is known
    from them: a later list that does not show it ends it (before, it stayed open for good: found by the
    hostile-Gateway harness)."""
    from owc.gateway import ActiveRuns
    from owc.protocol import ChatEvent
    from owc.protocol.results import SessionRow

    active = ActiveRuns()
    active.observe(ChatEvent(run_id="phantom", session_key=KEY, state="delta"), position=2)
    resync = active.resync([SessionRow(key=KEY, has_active_run=False, active_run_ids=())], "gap", position=5)
    assert resync.ended == ((KEY, "phantom"),)


def test_a_finished_run_is_forgotten_once_a_later_list_no_longer_shows_it() -> None:
    """The finished-run set is bounded by what the Gateway still shows, not by the connection's age: a list that
    still shows the run (its row lags the end), or was built before the end, keeps it (and does not start it again);
    the first list after the end that does not show it forgets it. Its late events never make it heard again."""
    from owc.gateway import ActiveRuns
    from owc.protocol import AgentEvent, ChatEvent, SessionsChanged
    from owc.protocol.results import SessionRow

    active = ActiveRuns()
    active.observe(SessionsChanged(session_key=KEY, phase="start", run_id="r1"), position=1)
    active.observe(ChatEvent(run_id="r1", session_key=KEY, state="final"), position=5)
    active.observe(AgentEvent(run_id="r1", stream="lifecycle", data={}, session_key=KEY), position=6)  # late
    assert (KEY, "r1") in active.finished and active.known == {} and active.heard == {}
    lagging = [SessionRow(key=KEY, has_active_run=True, active_run_ids=("r1",))]
    early = active.resync(lagging, "gap", position=4)  # built before the end
    late = active.resync(lagging, "gap", position=7)  # the row has not caught up yet
    assert early.started == late.started == () and early.ended == late.ended == ()
    assert (KEY, "r1") in active.finished
    active.resync([SessionRow(key=KEY2, has_active_run=False, active_run_ids=())], "gap", complete=False, position=8)
    assert (KEY, "r1") in active.finished  # a paged list without its session says nothing about it
    over = active.resync([SessionRow(key=KEY, has_active_run=False, active_run_ids=())], "gap", position=9)
    assert over.ended == () and active.finished == {}  # forgotten, and not reported ended (it was seen ending)


def test_the_finished_run_set_has_a_hard_cap_oldest_first() -> None:
    """A connection that never lists again (no gap, no reconnect) keeps at most ``FINISHED_CAP`` finished runs."""
    from owc.gateway import ActiveRuns
    from owc.protocol import ChatEvent
    from owc.protocol.active import FINISHED_CAP

    active = ActiveRuns()
    for i in range(FINISHED_CAP + 500):
        active.observe(ChatEvent(run_id=f"r{i}", session_key=KEY, state="final"), position=i)
    assert len(active.finished) == FINISHED_CAP
    assert next(iter(active.finished)) == (KEY, "r500") and (KEY, f"r{FINISHED_CAP + 499}") in active.finished
    active.observe(ChatEvent(run_id="r500", session_key=KEY, state="error"), position=FINISHED_CAP + 500)
    assert next(iter(active.finished)) == (KEY, "r501")  # an end seen again is the newest


async def test_a_gap_during_the_resync_lists_once_more(autojump_clock) -> None:
    """A gap whose frames come after the running list's response is not covered by it: one more list."""
    release = trio.Event()

    class SlowResync(RecordingHandler):
        async def on_resync(self, session, resync):
            await super().on_resync(session, resync)
            if resync.reason == "gap" and len(self.resyncs) == 2:
                await release.wait()  # the first gap's list is being handled ...

    handler = SlowResync()
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN, handler) as client:
            session = await client.wait_connection()
            await handler.until(lambda: handler.resyncs)
            run = sim.start_run(KEY, "r1")
            await handler.until(lambda: handler.of(SessionsChanged))
            sim.drop(1)
            run.text("first gap")
            await handler.until(lambda: len(handler.resyncs) == 2)
            sim.drop(1)  # ... when a second gap comes
            run.text(" second gap")
            await handler.until(lambda: session.gaps == 2)
            assert sim.requests["sessions.list"] == 1
            release.set()
            with trio.fail_after(300):
                await handler.until(lambda: len(handler.resyncs) == 3)
            assert sim.requests["sessions.list"] == 2 and session.resyncs == 2


async def test_a_failed_resync_closes_the_session_and_the_next_one_resyncs(autojump_clock, caplog) -> None:
    """Events were lost and the list that would recover them got no answer: only a new session's
    subscribe-and-list can tell what happened, so the session closes and the client reconnects."""
    handler = RecordingHandler()
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN, handler, backoff=no_jitter()) as client:
            first = await client.wait_connection()
            await handler.until(lambda: handler.resyncs)
            run = sim.start_run(KEY, "r1", steps=[Text("x"), Hold()])
            await handler.until(lambda: handler.of(SessionsChanged))
            sim.stall_replies()
            sim.drop(1)
            run.release()
            sim.active_run(KEY).text("after the drop")
            with trio.fail_after(300):
                await handler.until(lambda: len(handler.hellos) == 2)
            assert first.closed and "resync failed" in first.close_reason
            await handler.until(lambda: len(handler.resyncs) == 2)
            assert handler.resyncs[1].reason == "hello" and handler.resyncs[1].started == ((KEY, "r1"),)
            assert any("gateway.resync_failed" in r.getMessage() for r in caplog.records)


async def test_a_malformed_event_counts_as_lost(autojump_clock) -> None:
    """A frame that decodes but whose event does not is dropped unfed to the seq tracker: the next event
    reports a gap, the resync recovers the state, and a bogus seq cannot blind gap detection."""
    handler = RecordingHandler()
    async with open_simulator(token=TOKEN) as sim:
        async with open_gateway_connection(sim.url, TOKEN, handler) as client:
            session = await client.wait_connection()
            await handler.until(lambda: handler.resyncs)
            sim.inject('{"type": "event", "event": "chat", "payload": {"state": "delta"}, "seq": 999}')
            run = sim.start_run(KEY, "r1").text("hello")
            await handler.until(lambda: any(e.state == "delta" for e in handler.of(ChatEvent)))
            assert session.gaps == 0  # 999 was never taken as the last seq seen
            sim.drop(1)
            run.text(" world").end()
            await handler.until(lambda: any(e.state == "final" for e in handler.of(ChatEvent)))
            await client.request("sessions.describe", {"key": KEY})  # a round trip: a resync list went first
            assert session.gaps == 1 and sim.requests["sessions.list"] == 1


async def test_a_refusal_without_a_close_is_still_a_refusal(autojump_clock) -> None:
    """A server that refuses ``connect`` and leaves the socket open: the refusal is reported (not retried as
    a handshake timeout), after a bounded wait for the close."""
    from trio_websocket import serve_websocket

    async def refuse_and_linger(request) -> None:
        ws = await request.accept()
        await ws.send_message('{"type": "event", "event": "connect.challenge", "payload": {"nonce": "n", "ts": 1}}')
        req = orjson.loads(await ws.get_message())
        error = {"code": "INVALID_REQUEST", "message": "unauthorized", "details": {"code": "AUTH_TOKEN_MISMATCH"}}
        await ws.send_message(orjson.dumps({"type": "res", "id": req["id"], "ok": False, "error": error}).decode())
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_websocket, refuse_and_linger, "127.0.0.1", 0, None)
        client = GatewayClient(f"ws://127.0.0.1:{server.port}", TOKEN, backoff=no_jitter())
        start = trio.current_time()
        with pytest.raises(Refused) as info, trio.fail_after(60):
            await client.run()
        assert info.value.error.detail_code == "AUTH_TOKEN_MISMATCH" and not info.value.retryable
        assert client.attempts == 1 and trio.current_time() - start == pytest.approx(GatewayConfig().refusal_close_wait)
        nursery.cancel_scope.cancel()


async def test_backoff_waits_between_attempts(autojump_clock) -> None:
    """The reconnect waits really are 1, 2, 4, 4 ... seconds on the clock (not only what the policy says)."""
    client = GatewayClient("ws://127.0.0.1:9/", TOKEN, backoff=no_jitter())
    attempts: list[float] = []
    seventh = trio.Event()

    async def failing_attempt() -> None:  # every connect fails at once, as against a Gateway that is down
        attempts.append(trio.current_time())
        if len(attempts) == 7:
            seventh.set()
        raise OSError("connection refused")

    client._connection_once = failing_attempt
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.run)
        await seventh.wait()
        nursery.cancel_scope.cancel()
    waits = [round(b - a, 6) for a, b in zip(attempts, attempts[1:])]
    assert waits == [1, 2, 4, 4, 4, 4]


async def test_a_request_over_max_payload_is_refused_before_sending(autojump_clock) -> None:
    async with open_simulator(token=TOKEN, max_payload=4096) as sim:
        async with open_gateway_connection(sim.url, TOKEN) as client:
            session = await client.wait_connection()
            sent_before = sum(sim.requests.values())
            with pytest.raises(PayloadTooLarge) as too_large:
                await client.request("chat.send", {"sessionKey": KEY, "message": "x" * 5000, "idempotencyKey": "big"})
            assert not too_large.value.retryable and "4096" in str(too_large.value)
            assert sum(sim.requests.values()) == sent_before and not session.closed
            assert (await client.request("sessions.list", {"limit": 1}))["sessions"] == []


async def test_a_server_that_never_challenges_times_out_the_handshake_and_is_retried(autojump_clock, caplog) -> None:
    from trio_websocket import serve_websocket

    accepted: list[float] = []
    retried = trio.Event()

    async def silent(request) -> None:
        await request.accept()
        accepted.append(trio.current_time())
        if len(accepted) == 2:
            retried.set()
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_websocket, silent, "127.0.0.1", 0, None)
        client = GatewayClient(f"ws://127.0.0.1:{server.port}", TOKEN, backoff=no_jitter())
        nursery.start_soon(client.run)
        with trio.fail_after(60):
            await retried.wait()
        nursery.cancel_scope.cancel()
    assert accepted[1] - accepted[0] == pytest.approx(GatewayConfig().connect_timeout + 1, abs=0.01)
    assert client.connections_opened == 0
    assert any("handshake not finished within 10 s" in r.getMessage() for r in caplog.records)
