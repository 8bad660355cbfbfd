"""``open_runtime`` never ends silently (``owc.runtime.RuntimeEnded``).

A ``trio.Cancelled`` raised outside the cancel scope that was cancelled (kept and raised again later, or let out of
a library's close path) and reaching the runtime's nursery makes the nursery cancel itself and take every
``Cancelled`` in it, the block's own too: ``async with open_runtime(...)`` ended as if the block had finished. The
twelfth session's CI saw that shape (``tests/test_realgw_heartbeat.py``: an ``UnboundLocalError`` for a variable
the block never got to set, its bound not expired; see ``tests/test_bounds.py``). In production it is ``owc run``
exiting 0 mid-service and the Open WebUI guest's runtime gone quiet. These tests let such a ``Cancelled`` out of the
block and out of one of the runtime's tasks, and check that the block's end says so; a cancel from outside still
ends the runtime as a cancel.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio_websocket import open_websocket_url

from owc import ids
from owc.emit import RecordingEmitter
from owc.emit.asker import RecordingAsker
from owc.gateway import GatewayConfig
from owc.protocol.questions import QuestionRecord
from owc.registry import WriterRegistry
from owc.runtime import RuntimeConfig, RuntimeEnded, open_runtime
from owc.sim import open_simulator
from owc.sim.script import ASK_QUESTIONS
from owc.store import open_store

from bounds import bounded
from conftest import TOKEN
from harness import USER, open_env
from rawclient import raw_client
from rawserver import CHALLENGE, accept_with_challenge


async def _stray_cancelled() -> trio.Cancelled:
    """A ``Cancelled`` taken from a scope this code cancelled and left: raised again, no cancelled scope owns it."""
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            return exc
    raise AssertionError("the cancelled scope did not cancel")


class _LeakingAsker(RecordingAsker):
    """Shows the question, then lets a stray ``Cancelled`` out of the questions desk's task (a runtime task)."""

    async def show(self, chat_id: str, user_id: str, record: QuestionRecord, *, session: str | None = None) -> int:
        await super().show(chat_id, user_id, record, session=session)
        raise await _stray_cancelled()


class _LeakingEmitter(RecordingEmitter):
    """Its first event lets a stray ``Cancelled`` out of the writer that emits it (a task of the run table's)."""

    leaked = 0

    async def emit(self, chat_id: str, message_id: str, user_id: str, event: dict[str, Any]) -> None:
        if not self.leaked:
            self.leaked += 1
            raise await _stray_cancelled()
        await super().emit(chat_id, message_id, user_id, event)


def _config(url: str) -> RuntimeConfig:
    return RuntimeConfig(
        url=url, token=TOKEN, gateway=GatewayConfig(instance_id="A"), registry=WriterRegistry(), strict=True
    )


async def test_a_stray_cancel_out_of_the_block_is_reported_not_taken(tmp_path, clock) -> None:
    """The block lets a ``Cancelled`` out that no cancelled scope around it owns (the CI failure's shape)."""
    async with (
        open_simulator(token=TOKEN) as sim,
        open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store,
    ):
        finished = False
        with pytest.raises(
            RuntimeEnded, match=r"^owc's runtime ended before its block did, with no error to show"
        ) as caught:
            async with open_runtime(_config(sim.url), store, RecordingEmitter()) as runtime:
                await runtime.connected()
                raise await _stray_cancelled()
                finished = True  # never reached
            finished = True  # reached before the fix: the block "ended" with nothing raised
        assert not finished
        assert isinstance(caught.value.__cause__, trio.Cancelled)
        # Nothing of the runtime is left running: the simulator sees its connection closed.
        await sim.wait_for(lambda: not any(not conn.closing for conn in sim.conns.values()))


async def test_a_stray_cancel_out_of_a_runtime_task_ends_the_block_loudly(tmp_path, clock) -> None:
    """One of the runtime's own tasks (the questions desk's pump, through the asker) lets a ``Cancelled`` out while
    the block waits: the block is cancelled by the runtime's nursery and the runtime says why, naming the task."""
    async with (
        open_simulator(token=TOKEN) as sim,
        open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store,
    ):
        chat_id = "0b6e8a52-9a43-4d6e-9c59-1d3f0e6b2a11"
        await store.create_chat(chat_id, USER)
        asker = _LeakingAsker()
        waited_out = False
        with pytest.raises(RuntimeEnded) as caught:
            async with open_runtime(_config(sim.url), store, RecordingEmitter(), asker) as runtime:
                await runtime.connected()
                run = sim.start_run(ids.session_key("main", USER, chat_id), "ask-1").text("One question first.")
                run.ask(ASK_QUESTIONS[:1])
                await trio.sleep_forever()  # what a body does (``owc run``, the Open WebUI guest): serve until told
                waited_out = True
        assert not waited_out and len(asker.shown()) == 1
        # Trio (0.31 and later: a Cancelled has a source) names the task whose exception cancelled the nursery: the
        # operator's first clue.
        if getattr(caught.value.__cause__, "source", None) is not None:
            assert "QuestionDesk.run" in str(caught.value), str(caught.value)


async def test_a_cancel_from_outside_is_still_a_cancel(tmp_path, clock) -> None:
    """The guard takes nothing from a real cancel: a scope around the runtime that is cancelled catches its own
    ``Cancelled`` (the block ended by it is not reported as the runtime's end), and a block that finishes ends
    without an error."""
    async with (
        open_simulator(token=TOKEN) as sim,
        open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store,
    ):
        with trio.CancelScope() as outside:
            async with open_runtime(_config(sim.url), store, RecordingEmitter()) as runtime:
                await runtime.connected()
                outside.cancel()
                await trio.sleep_forever()
        assert outside.cancelled_caught
        async with open_runtime(_config(sim.url), store, RecordingEmitter()) as runtime:
            await runtime.connected()
        with pytest.raises(ExceptionGroup) as caught:  # a block's own error is its own, unchanged
            async with open_runtime(_config(sim.url), store, RecordingEmitter()) as runtime:
                raise KeyError("x")
        assert [type(leaf) for leaf in caught.value.exceptions] == [KeyError]


async def _read_frame(stream: trio.SocketStream, buffer: bytearray) -> int:
    """The opcode of the client's next frame (masked, as a client's are), its bytes taken from ``buffer``."""

    async def need(count: int) -> None:
        while len(buffer) < count:
            data = await stream.receive_some(4096)
            assert data, "the client closed TCP first"
            buffer.extend(data)

    await need(2)
    opcode, length = buffer[0] & 0x0F, buffer[1] & 0x7F
    head = 2 + {126: 2, 127: 8}.get(length, 0)
    await need(head)
    if length >= 126:
        length = int.from_bytes(buffer[2:head], "big")
    await need(head + 4 + length)
    del buffer[: head + 4 + length]
    return opcode


async def _pings_while_the_client_closes(stream: trio.SocketStream) -> None:
    """A Gateway whose keepalive Ping (the real one pings every connection every 25 s) crosses the client's close
    frame: the Ping is sent after the client's close arrived, the close's answer a second later."""
    await accept_with_challenge(stream)
    buffer = bytearray()
    while await _read_frame(stream, buffer) != 0x8:  # until the client's close frame
        pass
    await stream.send_all(bytes([0x89, 0x00]))  # Ping, empty
    await trio.sleep(1)
    await stream.send_all(bytes([0x88, 0x02, 0x03, 0xE8]))  # the close's answer: 1000
    await trio.sleep_forever()


async def test_the_ci_failures_cause_a_ping_crossing_trio_websockets_close(tmp_path, autojump_clock) -> None:
    """The twelfth session's CI failure, reproduced: the test's own raw client (trio-websocket 0.12.2) closed its
    connection to the real Gateway as the Gateway's keepalive Ping crossed its close frame. trio-websocket's reader
    answers the Ping with a Pong that wsproto refuses after a close was sent (trio-websocket issue 184); that error
    cancels the library's nursery and the close under way, and ``open_websocket`` raises the close's ``Cancelled``
    after its nursery is gone. In ``open_runtime``'s block that ``Cancelled`` ended the block silently; now the
    runtime says so, and its line names the library's reader and its error. ``raw_client`` takes that one shape as
    the finished close it is, so the same block runs to its end. (If trio-websocket stops raising it, the first
    half fails: ``rawclient._open_websocket``'s workaround can go.)"""
    async with (
        open_simulator(token=TOKEN) as sim,
        open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store,
        trio.open_nursery() as nursery,
    ):
        listeners = await nursery.start(trio.serve_tcp, _pings_while_the_client_closes, 0)
        url = f"ws://127.0.0.1:{listeners[0].socket.getsockname()[1]}/"
        ran_on = False
        with pytest.raises(RuntimeEnded) as caught:
            async with open_runtime(_config(sim.url), store, RecordingEmitter()) as runtime:
                await runtime.connected()
                async with open_websocket_url(url) as ws:
                    assert await ws.get_message() == CHALLENGE.decode()
                ran_on = True  # not reached: the library's Cancelled
        assert not ran_on
        cancelled = caught.value.__cause__
        assert isinstance(cancelled, trio.Cancelled)
        assert "Event Pong(" in str(cancelled.__context__) and "LOCAL_CLOSING" in str(cancelled.__context__)
        if getattr(cancelled, "source", None) is not None:  # Trio 0.31 and later: the line names the cause
            assert "_reader_task" in str(caught.value) and "LocalProtocolError" in str(caught.value), str(caught.value)

        async with open_runtime(_config(sim.url), store, RecordingEmitter()) as runtime:
            await runtime.connected()
            async with raw_client(url, TOKEN, first={"type": "req", "id": "1", "method": "health"}):
                pass  # the close crosses the Ping here too
            ran_on = True
        assert ran_on
        nursery.cancel_scope.cancel()


@pytest.mark.virtual_seconds(1)  # the reconnect's backoff, the transport's own timer
async def test_a_stray_cancel_out_of_a_writer_closes_the_connection_and_the_next_takes_the_run(
    tmp_path, clock, caplog
) -> None:
    """One level down, the same shape: a run writer (a task of the run table's nursery, inside the connection's) lets a
    ``Cancelled`` out. The table's nursery took every ``Cancelled`` in it, the connection's own wait too, and the
    connection served on with no table: the run detached, every later run left unclaimed, nothing written, no word,
    until the socket closed. Now the connection closes on it, says so, and the next connection finishes the run."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        emitter = _LeakingEmitter()
        await env.connect(emitter=emitter)
        env.sim.start_run(key, "r1").text("Hello there.").end()
        with bounded(60, "the connection's close"):  # before: it never closed (the Gateway's ticks kept it alive)
            await env.clients["A"].wait_backing_off()
        clock.jump(1)
        await env.settled()
        assert emitter.leaked == 1 and env.clients["A"].connections_opened == 2
        message = (await env.messages(chat_id))[ids.message_id(key, "r1")]
        assert message["done"] and message["content"] == "Hello there."
    assert any("gateway.handler_ended" in r.getMessage() for r in caplog.records)
