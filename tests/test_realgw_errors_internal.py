"""Real Gateway tier, issue 24 items 2 and 8: what the real Gateway 2026.9.6 keeps of a failed run for a client
that was not there, and what an operator client sees of an internal run. Shapes in
``docs/reference/gateway-errors-heartbeats-internal.md``.

* A failed run (the fake model's ``FAIL_RUN``: HTTP 400 before any text). Read afterwards by a fresh connection,
  as owc reads after a reconnect: the session row says ``status: "failed"`` with ``lastRunError`` equal to the
  first error terminal's ``errorMessage`` (``lastRunId`` is the run); ``chat.history`` holds the Gateway's terminal
  error record of the run (``<R>:terminal-error``, ``stopReason: "error"``, ``__openclaw.runId``), its text the
  Gateway's copy of the failure in other words, no ``errorMessage``. owc finishes such a run with the live
  words when the row gives them, else with the copy, and never shows the copy as reply text. The simulator
  keeps the same evidence (its copy's words are its own).
* An internal run on an Open WebUI chat's key (``progressCard.put``, then ``progressCard.refresh``: a run
  ``progress-card-refresh:<sha256>`` with ``projectSessionLifecycle: false``). A connection that asked only
  ``sessions.subscribe`` (owc's) is told nothing that names it: no ``chat``, ``agent`` or lifecycle push with its
  run id, only reason pushes and ``phase: "message"`` pushes without a run; ``chat.history`` hides its messages
  (``display: false``) and the row's ``lastRunId`` stays the turn before it. So owc cannot open such a run; the
  run id form is decoded anyway (``owc.protocol.events.is_internal_run_id``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pytest
import trio

from owc.protocol import EventFrame, parse_chat_history
from owc.protocol.events import is_internal_run_id
from owc.render import TurnRenderer, finish
from owc.sim import End, fake_model_responder, open_simulator
from owc.sim.script import Step

from rawclient import RawClient, raw_client
from realgw.fake_model import ANSWER

pytestmark = pytest.mark.realgateway

#: The first error terminal's words for the fake model's HTTP 400 (2026.9.6), the row's ``lastRunError`` too.
LIVE_400 = "LLM request failed: provider rejected the request schema or tool payload."
#: The copy ``chat.history`` shows in the run's terminal error record (2026.9.6).
COPY_400 = "⚠️ LLM request failed (request format rejected, HTTP 400)."
SECOND = "⚠️ Agent failed before reply: "


def _responder(key: str, message: str) -> Sequence[Step]:
    if "FAIL_RUN" in message:
        return [End("error", error=LIVE_400)]
    return fake_model_responder(key, message)


def _terminal(run: str):
    return lambda f: (
        f.event == "chat" and f.payload.get("runId") == run and f.payload.get("state") in ("final", "error")
    )


def _row(listed: dict[str, Any], key: str) -> dict[str, Any]:
    return next(s for s in listed.get("sessions", []) if s.get("key") == key)


async def _failed_run(url: str, token: str) -> dict[str, Any]:
    key = f"agent:main:openwebui-err-{uuid.uuid4()}"
    run = str(uuid.uuid4())
    with trio.fail_after(120):
        async with raw_client(url, token, instance_id="ERR") as sender:
            assert (await sender.request("sessions.subscribe", {"limit": 1000})).ok
            sent = await sender.request(
                "chat.send", {"sessionKey": key, "message": "FAIL_RUN please", "idempotencyKey": run}
            )
            assert sent.ok, sent.error
            events = await sender.events_until(
                lambda f: (
                    f.event == "sessions.changed"
                    and f.payload.get("phase") == "error"
                    and f.payload.get("runId") == run
                )
            )
        # owc was not there: a fresh connection reads what the Gateway kept.
        async with raw_client(url, token, instance_id="AFTER") as after:
            listed = await after.request("sessions.list", {"limit": 1000})
            history = await after.request("chat.history", {"sessionKey": key, "limit": 50, "maxChars": 500_000})
    errors = [f.payload.get("errorMessage") for f in events if _terminal(run)(f)]
    return {"run": run, "errors": errors, "row": _row(listed.payload, key), "history": history.payload}


def test_a_failed_run_read_afterwards_on_the_real_gateway_and_the_simulator(real_gateway) -> None:
    async def sim_side() -> dict[str, Any]:
        async with open_simulator(token="errors", responder=_responder) as sim:
            return await _failed_run(sim.url, "errors")

    sides = {"real": trio.run(_failed_run, real_gateway.url, real_gateway.token), "sim": trio.run(sim_side)}
    for side, got in sides.items():
        run, row = got["run"], got["row"]
        # Two error terminals: the run's words, then the send path's wrapper of them (owc acts on the first).
        assert got["errors"][0] == LIVE_400 and got["errors"][1].startswith(SECOND + LIVE_400), (side, got["errors"])
        assert (row["status"], row["lastRunId"], row["lastRunError"], row["hasActiveRun"]) == (
            "failed", run, LIVE_400, False,
        ), side  # fmt: skip
        messages = got["history"]["messages"]
        record = messages[-1]
        assert record["role"] == "assistant" and record["stopReason"] == "error", (side, record)
        assert record["idempotencyKey"] == f"{run}:terminal-error", side
        assert record["__openclaw"]["runId"] == run and "errorMessage" not in record, side
        history = parse_chat_history(got["history"])
        copy = history.messages[-1].error_copy
        assert copy is not None and copy != LIVE_400, side  # other words than the live ones
        if side == "real":
            assert copy == COPY_400 and history.messages[-1].text == COPY_400
        # How owc finishes it having seen nothing live: with the row's words, else the copy; never as text.
        assert finish(TurnRenderer(run), history, row_error=row["lastRunError"]).error == {"content": LIVE_400}
        without_row = finish(TurnRenderer(run), history)
        assert (without_row.content, without_row.error) == ("", {"content": copy}), side


async def _internal_run(url: str, token: str) -> dict[str, Any]:
    key = f"agent:main:openwebui-int-{uuid.uuid4()}"
    turn = str(uuid.uuid4())
    observed: list[EventFrame] = []
    with trio.fail_after(120):
        async with raw_client(url, token, instance_id="OWC") as owc, raw_client(url, token, instance_id="UI") as ui:
            assert (await owc.request("sessions.subscribe", {"limit": 1000})).ok

            async def settled(client: RawClient, count: int) -> None:
                seen = 0
                while seen < count:
                    frame = await client.event()
                    observed.append(frame)
                    p = frame.payload
                    seen += p.get("sessionKey") == key and p.get("reason") == "agent.input.settled"

            async with trio.open_nursery() as nursery:
                nursery.start_soon(settled, owc, 2)  # the turn's, then the internal run's
                sent = await ui.request("chat.send", {"sessionKey": key, "message": "Hello.", "idempotencyKey": turn})
                assert sent.ok, sent.error
                await ui.events_until(_terminal(turn))
                before = await ui.request("chat.history", {"sessionKey": key, "limit": 50})
                put = await ui.request("progressCard.put", {"sessionKey": key, "markdown": "- [ ] step one"})
                assert put.ok, put.error
                refresh = await ui.request("progressCard.refresh", {"sessionKey": key, "idempotencyKey": "r1"})
                assert refresh.ok, refresh.error
            listed = await ui.request("sessions.list", {"limit": 1000})
            history = await ui.request("chat.history", {"sessionKey": key, "limit": 50})
    return {
        "key": key,
        "turn": turn,
        "internal": refresh.payload["runId"],
        "observed": [{"event": f.event, "payload": f.payload} for f in observed],
        "row": _row(listed.payload, key),
        "before": before.payload,
        "history": history.payload,
    }


def test_an_internal_run_names_itself_to_no_operator_client(real_gateway) -> None:
    got = trio.run(_internal_run, real_gateway.url, real_gateway.token)
    internal = got["internal"]
    assert internal.startswith("progress-card-refresh:") and is_internal_run_id(internal)
    # Nothing owc's connection was told names the internal run ...
    assert not [f for f in got["observed"] if internal in str(f["payload"])]
    runs = {f["payload"].get("runId") for f in got["observed"] if f["payload"].get("sessionKey") == got["key"]}
    assert runs - {None} == {got["turn"]}, runs
    # ... its stored messages are told as ``phase: "message"`` pushes without a run, and chat.history hides them.
    said = [f["payload"] for f in got["observed"] if f["payload"].get("phase") == "message"]
    assert said and all("runId" not in p for p in said)
    assert got["history"]["messages"] == got["before"]["messages"]
    assert got["history"]["totalMessages"] > got["before"]["totalMessages"]
    assert [m["__openclaw"].get("runId") for m in got["history"]["messages"] if m["role"] == "assistant"] == [
        got["turn"]
    ]
    assert got["history"]["messages"][-1]["content"][0]["text"] == ANSWER
    # The row still names the turn before it: nothing there would open the internal run either.
    assert (got["row"]["lastRunId"], got["row"]["hasActiveRun"]) == (got["turn"], False)
