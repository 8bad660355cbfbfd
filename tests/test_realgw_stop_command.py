"""Real Gateway tier: what ``chat.send {message: "/stop"}`` does on OpenClaw 2026.9.6.

The old Open WebUI pipe, on the user's Stop, sent ``chat.abort {sessionKey, runId}`` and then
``chat.send {sessionKey, message: "/stop", deliver: false, idempotencyKey: "stop-<uuid4>"}``. Measured here (and
read in the Gateway's source, ``dist/chat-send-handler-*.mjs`` ``runChatSendPreAdmission``): a ``/stop`` chat.send
is a command settled before admission. It is never given to the model, starts no run (its idempotency key is no
run id: no ``chat``/``agent`` frame carries it, ``agent.wait`` on it times out), writes nothing to the transcript
(no ``/stop`` user message, no "Stopped" reply), creates no session, and answers with ``chat.abort``'s shape
``{ok, aborted, runIds}`` instead of ``{runId, status}``. With a run going it aborts every run of the session: the
run ends ``aborted`` with ``stopReason: "stop"`` (``chat.abort`` gives ``"rpc"``) and its partial's
``openclawAbort.origin`` is ``"stop-command"``. After ``chat.abort`` it finds nothing left and answers
``aborted: false``. ``deliver: false`` and an ``owui-action-stop-<chat>-<token>`` key are accepted; the same key
twice is answered twice (no idempotency dedupe). The next ordinary turn on the session runs normally.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
import trio

from owc import ids

from rawclient import RawClient, raw_client
from realgw.fake_model import ANSWER
from realgw.gateway import RealGateway

pytestmark = pytest.mark.realgateway

TERMINAL = ("final", "aborted", "error")


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type") == "text")


async def _stop(c: RawClient, key: str, idem: str) -> dict[str, Any]:
    sent = await c.request(
        "chat.send", {"sessionKey": key, "message": "/stop", "deliver": False, "idempotencyKey": idem}
    )
    assert sent.ok, sent.error
    return sent.payload


async def _session_events(
    c: RawClient, key: str, until: Callable[[str, dict[str, Any]], bool]
) -> list[tuple[str, dict]]:
    """Every ``chat``/``agent``/``session.message`` event of session ``key`` up to and including ``until``'s."""
    seen = []
    while True:
        frame = await c.event(lambda f: f.event in ("chat", "agent", "session.message"))
        if (frame.payload or {}).get("sessionKey") != key:
            continue
        seen.append((frame.event, frame.payload))
        if until(frame.event, frame.payload):
            return seen


def _end_of(run_id: str) -> Callable[[str, dict[str, Any]], bool]:
    return lambda event, p: event == "chat" and p.get("runId") == run_id and p.get("state") in TERMINAL


async def _history(c: RawClient, key: str) -> list[dict[str, Any]]:
    got = await c.request("chat.history", {"sessionKey": key, "limit": 50})
    assert got.ok, got.error
    return got.payload["messages"]


async def _fence(c: RawClient, key: str) -> tuple[str, list[tuple[str, dict]]]:
    """An ordinary turn after the ``/stop``: every event of the session until its end (whatever the ``/stop``
    produced on the session arrives before it), and proof the session still takes turns."""
    run_id = str(uuid.uuid4())
    sent = await c.request("chat.send", {"sessionKey": key, "message": "hi again", "idempotencyKey": run_id})
    assert sent.ok and sent.payload["runId"] == run_id, (sent.payload, sent.error)
    events = await _session_events(c, key, _end_of(run_id))
    return run_id, events


def _run_ids(events: list[tuple[str, dict]]) -> set[str]:
    return {p["runId"] for _, p in events if p.get("runId")}


async def _slow_run(c: RawClient, key: str) -> str:
    run_id = str(uuid.uuid4())
    sent = await c.request("chat.send", {"sessionKey": key, "message": "SLOW reply please", "idempotencyKey": run_id})
    assert sent.ok and sent.payload == {"runId": run_id, "status": "started"}, (sent.payload, sent.error)
    await _session_events(c, key, lambda e, p: e == "chat" and p.get("runId") == run_id and p.get("state") == "delta")
    return run_id


async def test_stop_command_on_the_real_gateway(real_gateway: RealGateway) -> None:
    with trio.fail_after(300):  # real seconds: a real external process (its first turn alone takes ~13 s)
        async with raw_client(real_gateway.url, real_gateway.token, instance_id="stop-probe") as c:
            subscribed = await c.request("sessions.subscribe", {"limit": 1000})
            assert subscribed.ok, subscribed.error

            # 1. /stop alone while a run is active: it aborts the run (stopReason "stop"), starts nothing.
            chat = str(uuid.uuid4())
            key = ids.session_key("main", "u-stop", chat)
            run_id = await _slow_run(c, key)
            idem = f"owui-action-stop-{chat}-{uuid.uuid4().hex[:12]}"
            answer = await _stop(c, key, idem)
            assert answer == {"ok": True, "aborted": True, "runIds": [run_id]}  # chat.abort's shape, no runId/status
            events = await _session_events(c, key, _end_of(run_id))
            end = events[-1][1]
            assert end["state"] == "aborted" and end["stopReason"] == "stop", end
            assert _text(end["message"]) and ANSWER.startswith(_text(end["message"]))  # the partial
            next_run, more = await _fence(c, key)
            assert _run_ids(events + more) == {run_id, next_run}  # nothing with the /stop's key, no other run
            assert more[-1][1]["state"] == "final"
            history = await _history(c, key)
            assert [(m["role"], _text(m)) for m in history] == [
                ("user", "SLOW reply please"),
                ("assistant", _text(end["message"])),
                ("user", "hi again"),
                ("assistant", ANSWER),
            ]  # no "/stop" turn, no command reply
            assert history[1]["openclawAbort"]["origin"] == "stop-command"
            waited = await c.request("agent.wait", {"runId": idem, "timeoutMs": 500})
            assert waited.ok and waited.payload["status"] == "timeout", waited.payload  # the key is no run

            # 2. chat.abort first, then /stop (the old pipe's order): the abort ends the run ("rpc"); /stop finds
            #    nothing left to stop and adds nothing.
            chat = str(uuid.uuid4())
            key = ids.session_key("main", "u-stop", chat)
            run_id = await _slow_run(c, key)
            aborted = await c.request("chat.abort", {"sessionKey": key, "runId": run_id})
            assert aborted.ok and aborted.payload == {"ok": True, "aborted": True, "runIds": [run_id]}, aborted.payload
            answer = await _stop(c, key, f"stop-{uuid.uuid4()}")
            assert answer == {"ok": True, "aborted": False, "runIds": []}
            events = await _session_events(c, key, _end_of(run_id))
            assert events[-1][1]["state"] == "aborted" and events[-1][1]["stopReason"] == "rpc", events[-1]
            next_run, more = await _fence(c, key)
            assert _run_ids(events + more) == {run_id, next_run}
            history = await _history(c, key)
            assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
            assert "/stop" not in [_text(m) for m in history]
            assert history[1]["openclawAbort"]["origin"] == "rpc"

            # 3. Nothing running (a fresh session): accepted, nothing aborted, no session, no transcript; the same
            #    key again is answered again (a /stop is settled before the idempotency dedupe).
            chat = str(uuid.uuid4())
            key = ids.session_key("main", "u-stop", chat)
            idem = f"owui-action-stop-{chat}-{uuid.uuid4().hex[:12]}"
            assert await _stop(c, key, idem) == {"ok": True, "aborted": False, "runIds": []}
            assert await _stop(c, key, idem) == {"ok": True, "aborted": False, "runIds": []}
            assert await _history(c, key) == []
            listed = await c.request("sessions.list", {"limit": 1000})
            assert key not in [s["key"] for s in listed.payload["sessions"]]
            next_run, more = await _fence(c, key)
            assert _run_ids(more) == {next_run}  # the first events of the session are the next turn's
            assert [m["role"] for m in await _history(c, key)] == ["user", "assistant"]
