"""Conformance tier: the same interaction against the real OpenClaw Gateway 2026.9.6 and the simulator.

Differences are failures, except the documented ones that ``conformance``'s normal form drops (NOTES.md,
"Conformance: documented differences"). CI runs this tier; it needs Node 24 and openclaw in the cache
(``tests/realgw/gateway.py`` installs them).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio

from owc.protocol import HistoryMessage, parse_chat_history, parse_hello_ok, parse_sessions_list, parse_subscribe
from owc.render import count_cards, output_from_transcript, output_text
from owc.sim import CANNED_ANSWER, open_simulator

from conformance import (
    READ_KEYS,
    aborted_text,
    drive,
    drive_echo_abort,
    history_shape,
    key_sets,
    run_stream,
    run_transcript,
    session_stream,
)
from rawclient import raw_client

pytestmark = pytest.mark.realgateway


@pytest.fixture(scope="module")
def both(real_gateway) -> dict[str, dict[str, Any]]:
    real = trio.run(drive, real_gateway.url, real_gateway.token)

    async def sim_drive() -> dict[str, Any]:
        async with open_simulator(token="conformance") as sim:
            return await drive(sim.url, "conformance")

    return {"real": real, "sim": trio.run(sim_drive)}


@pytest.mark.parametrize("turn", ["tool_turn", "abort_turn"])
@pytest.mark.parametrize("conn", ["A", "B"])
def test_same_event_kinds_in_the_same_order(both, turn: str, conn: str) -> None:
    real, sim = both["real"], both["sim"]
    index = 0 if turn == "tool_turn" else 1
    assert run_stream(sim[turn][conn]) == run_stream(real[turn][conn])
    sim_session = session_stream(sim[turn][conn], sim["runs"][index])
    real_session = session_stream(real[turn][conn], real["runs"][index])
    # The real Gateway does not always push the settled row for an aborted run (measured: absent in 2 of 6
    # aborts, even seconds later); when it does, it comes before phase end, as the simulator's does.
    assert [k for k in sim_session if k != "settled"] == [k for k in real_session if k != "settled"]
    if "settled" in real_session or turn == "tool_turn":
        assert sim_session == real_session


@pytest.mark.parametrize("turn", ["tool_turn", "abort_turn"])
@pytest.mark.parametrize("conn", ["A", "B"])
def test_same_payload_key_sets(both, turn: str, conn: str) -> None:
    assert key_sets(both["sim"][turn][conn]) == key_sets(both["real"][turn][conn])


def test_tool_events_reach_the_sender_as_agent_and_others_as_session_tool(both) -> None:
    for side in ("real", "sim"):
        stream_a, stream_b = run_stream(both[side]["tool_turn"]["A"]), run_stream(both[side]["tool_turn"]["B"])
        assert "agent:tool:start" in stream_a and "session.tool:tool:start" not in stream_a, side
        assert "session.tool:tool:start" in stream_b and "agent:tool:start" not in stream_b, side


def test_same_rpc_result_shapes(both) -> None:
    real, sim = both["real"], both["sim"]
    for side in (real, sim):
        hello = parse_hello_ok(side["hello"])
        assert hello.protocol == 4 and hello.boot_id and hello.policy.tick_interval_ms == 30_000
        assert side["subscribe_plain"] == {"subscribed": True}
        assert parse_subscribe(side["subscribe_list"]).list is not None
        assert side["send"]["status"] == "started" and side["send"]["runId"] == side["runs"][0]
        assert side["abort"] == {"ok": True, "aborted": True, "runIds": [side["runs"][1]]}
    assert parse_hello_ok(real["hello"]).policy.max_payload == parse_hello_ok(sim["hello"]).policy.max_payload
    assert set(sim["subscribe_list"]) == set(real["subscribe_list"])
    assert set(sim["subscribe_list"]["list"]) == set(real["subscribe_list"]["list"])
    assert set(sim["send"]) == set(real["send"])
    assert set(sim["list"]) == set(real["list"])

    def row(side: dict[str, Any]) -> dict[str, Any]:
        return next(r for r in side["list"]["sessions"] if r["key"] == side["key"])

    assert set(row(sim)) & READ_KEYS["row"] == set(row(real)) & READ_KEYS["row"]
    for side in (real, sim):
        parsed = next(r for r in parse_sessions_list(side["list"]).sessions if r.key == side["key"])
        assert (parsed.status, parsed.aborted_last_run, parsed.has_active_run, parsed.last_run_id) == (
            "killed",
            True,
            False,
            side["runs"][1],
        )


def test_same_chat_history(both) -> None:
    real, sim = both["real"], both["sim"]
    assert history_shape(sim["history_tool"], sim["runs"][0]) == history_shape(real["history_tool"], real["runs"][0])
    assert history_shape(sim["history_abort"], sim["runs"][1]) == history_shape(real["history_abort"], real["runs"][1])
    for side in (real, sim):
        history = parse_chat_history(side["history_tool"])
        r1 = side["runs"][0]
        mine = [m for m in history.messages if m.assistant_run_id == r1]
        assert [len(m.tool_calls) for m in mine] == [1, 0] and mine[-1].text == CANNED_ANSWER
        results = [m for m in history.messages if m.role == "toolResult" and m.tool_call_id == mine[0].tool_calls[0].id]
        assert len(results) == 1 and results[0].is_error
        aborted = [m for m in parse_chat_history(side["history_abort"]).messages if m.aborted]
        assert [m.assistant_run_id for m in aborted] == [side["runs"][1]]


def test_same_history_paging(both) -> None:
    """``offset`` counts back from the newest message, each page in transcript order, ``nextOffset`` and
    ``hasMore`` lead to the older page; the pages joined are the whole transcript, on both sides."""

    def pages(side: dict[str, Any]) -> list[tuple[Any, ...]]:
        out = []
        for payload in side["history_pages"]:
            history = parse_chat_history(payload)
            out.append(
                (payload.get("offset"), history.next_offset, history.has_more, [m.role for m in history.messages])
            )
        return out

    assert pages(both["sim"]) == pages(both["real"])
    for side in (both["real"], both["sim"]):
        whole = parse_chat_history(side["history_abort"]).messages
        joined = [m for payload in reversed(side["history_pages"]) for m in parse_chat_history(payload).messages]
        assert [m.raw for m in joined] == [m.raw for m in whole][-len(joined) :]


async def _recovery_turn(url: str, token: str) -> list[HistoryMessage]:
    """A turn sent with the restart-recovery provenance (what the real Gateway's boot recovery attaches),
    read back through ``chat.history``."""
    key = f"agent:main:openwebui-conformance-{uuid.uuid4()}"
    run_id = str(uuid.uuid4())
    with trio.fail_after(180):
        async with raw_client(url, token, instance_id="P") as client:
            await client.request("sessions.subscribe", {})
            provenance = {"kind": "internal_system", "sourceTool": "main_session_restart_recovery"}
            sent = await client.request(
                "chat.send",
                {
                    "sessionKey": key,
                    "message": "Recover",
                    "idempotencyKey": run_id,
                    "systemInputProvenance": provenance,
                },
            )
            assert sent.ok, sent.error
            await client.events_until(
                lambda f: f.event == "chat" and f.payload.get("runId") == run_id and f.payload.get("state") == "final"
            )
            history = await client.request("chat.history", {"sessionKey": key, "limit": 20})
    return [m for m in parse_chat_history(history.payload).messages if m.user_run_id == run_id]


def test_restart_recovery_provenance_lands_where_owc_reads_it(real_gateway) -> None:
    """Pins the provenance field on the real Gateway (the boot recovery's own turn cannot be produced on
    demand; ``systemInputProvenance`` is the field it sets) and checks the simulator stores it the same way."""

    async def sim_side() -> list[HistoryMessage]:
        async with open_simulator(token="conformance") as sim:
            return await _recovery_turn(sim.url, "conformance")

    for side, turns in (
        ("real", trio.run(_recovery_turn, real_gateway.url, real_gateway.token)),
        ("sim", trio.run(sim_side)),
    ):
        (user,) = turns
        assert user.is_restart_recovery_turn, side
        assert user.raw["provenance"] == {"kind": "internal_system", "sourceTool": "main_session_restart_recovery"}, (
            side
        )
        assert "provenance" not in user.raw.get("__openclaw", {}), side


@pytest.fixture(scope="module")
def echo(real_gateway) -> dict[str, dict[str, Any]]:
    async def sim_drive() -> dict[str, Any]:
        async with open_simulator(token="conformance") as sim:
            return await drive_echo_abort(sim.url, "conformance")

    return {"real": trio.run(drive_echo_abort, real_gateway.url, real_gateway.token), "sim": trio.run(sim_drive)}


def test_an_aborted_partial_is_the_run_wide_buffer(echo) -> None:
    """Issue 11: a run says "Hello", calls a tool, starts "Hello from ..." and is aborted. Measured on the real
    Gateway: the aborted partial (``R:assistant``) holds the run-wide chat buffer, earlier items included
    ("Hello\n\nHello from", the same text as the ``chat`` aborted event), not just the item being written.
    The simulator stored only the item being written; owc's finalizer (which keeps what no earlier message
    holds) was right, and finishes the run to the same text on both."""
    real, sim = echo["real"], echo["sim"]
    for name, side in (("real", real), ("sim", sim)):
        assert side["abort"] == {"ok": True, "aborted": True, "runIds": [side["run"]]}, name
        assert aborted_text(side["frames"], side["run"]) == "Hello\n\nHello from", name
        assert run_transcript(side["history"], side["run"]) == [
            ("assistant", "Hello", ("call_fake1",), False),
            ("toolResult", "", ("call_fake1",), False),
            ("assistant", "Hello\n\nHello from", (), True),
        ], name
        output = output_from_transcript(parse_chat_history(side["history"]), side["run"])
        assert output is not None and output_text(output) == "Hello\nHello from" and count_cards(output) == 1, name
    assert run_stream(sim["frames"]) == run_stream(real["frames"])
    assert key_sets(sim["frames"]) == key_sets(real["frames"])
