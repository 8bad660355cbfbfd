"""Real Gateway tier: a heartbeat's turn in ``chat.history``, pinned on 2026.9.6 and checked against the simulator.

One Open WebUI chat's key gets a turn (A), three heartbeats started with the ``wake`` RPC (H1 answers text, H2
only ``HEARTBEAT_OK``, H3 text again) and another turn (B). Measured on the real Gateway:

* ``chat.history`` hides each heartbeat's stored prompt (``[OpenClaw heartbeat poll]``) and H2's bare
  ``HEARTBEAT_OK``, and marks the next message it shows ``__openclaw.turnBoundary``: H1's reply (one hidden
  message before it) and H3's (three: H2's prompt, H2's ``HEARTBEAT_OK``, H3's prompt). ``__openclaw.seq``
  counts the stored messages, hidden ones too, so the gaps show how many were hidden. The Gateway's own chat
  shows H1's and H3's replies alike; owc does too (issue 24 item 6): each speaking heartbeat gets one message
  with its reply, H2 none (before, owc's ``heartbeat_turn`` hid H1, a marked reply with one hidden message
  before it, and showed H3). ``test_owc_gives_each_speaking_heartbeat_one_message_on_the_real_gateway`` checks
  it end to end, owc connected to the real Gateway, live and while owc is down.
* A page's ``offset`` / ``nextOffset`` count stored messages (hidden ones too), and the mark is the same
  whichever page a message comes in.
* Live, only ``agent`` events say ``isHeartbeat: true`` (a heartbeat run sends ``lifecycle`` ones and one
  ``chat`` final, without the flag), and only to a connection that asked ``sessions.messages.subscribe`` for
  the key. A connection that only asked ``sessions.subscribe`` (as owc does) sees a heartbeat run only as
  ``sessions.changed`` (``phase`` start / end with its ``runId``), the ``session.message`` of a reply it
  shows, ``sessions.changed`` ``phase: "message"`` (a ``messageSeq``, no run) for each hidden prompt and bare
  ``HEARTBEAT_OK``, and the global ``heartbeat`` event after each run (no run, no key): nothing there names
  a run as a heartbeat's.

The simulator is held to all of it, the same flow run on both.

The fake model answers ``HEARTBEAT_OK`` when the wake's text says ``SAY_HEARTBEAT_OK`` (the real runner hands
that text to the model as a system event; ``tests/realgw/fake_model.py``), and the simulator's responder here
does the same with the text its ``wake`` passes on.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pytest
import trio

from owc import ids
from owc.emit import RecordingEmitter
from owc.gateway import GatewayConfig
from owc.protocol import EventFrame, parse_chat_history
from owc.registry import WriterRegistry
from owc.render import output_from_transcript, output_text
from owc.runtime import RuntimeConfig, open_runtime
from owc.sim import End, Text, fake_model_responder, open_simulator
from owc.sim.script import Step
from owc.store import open_store

from bounds import Bound, bounded
from rawclient import RawClient, raw_client
from realgw.fake_model import ANSWER, HEARTBEAT_OK

pytestmark = pytest.mark.realgateway

PROMPT = "[OpenClaw heartbeat poll]"
LABELS = ("A", "H1", "H2", "H3", "B")


def _responder(key: str, message: str) -> Sequence[Step]:
    """The simulator's default model plus the fake model's heartbeat steer, so both sides answer alike."""
    if "SAY_HEARTBEAT_OK" in message:
        return [Text(HEARTBEAT_OK), End()]
    return fake_model_responder(key, message)


def _heartbeat_ended(frame: EventFrame, key: str) -> bool:
    p = frame.payload
    return (
        frame.event == "agent"
        and p.get("sessionKey") == key
        and p.get("isHeartbeat") is True
        and p.get("stream") == "lifecycle"
        and (p.get("data") or {}).get("phase") == "end"
    )


async def _send(client: RawClient, key: str, run_id: str, message: str) -> None:
    sent = await client.request("chat.send", {"sessionKey": key, "message": message, "idempotencyKey": run_id})
    assert sent.ok, sent.error
    await client.events_until(
        lambda f: f.event == "chat" and f.payload.get("runId") == run_id and f.payload.get("state") == "final"
    )


async def _wake(client: RawClient, key: str, text: str) -> tuple[dict[str, Any], list[str]]:
    """Wake a heartbeat on ``key`` and wait for its run's end; its id is known only from its agent events
    (``isHeartbeat``). The next wake waits for that end: wakes still pending on one key may be merged into one
    run (the Gateway's heartbeat-wake queue), and each must be a run of its own here."""
    sent = await client.request("wake", {"mode": "now", "text": text, "sessionKey": key})
    assert sent.ok, sent.error
    events = await client.events_until(lambda f: _heartbeat_ended(f, key))
    runs = {f.payload["runId"] for f in events if f.event == "agent" and f.payload.get("isHeartbeat") is True}
    return sent.payload, sorted(runs)


async def _flow(url: str, token: str) -> dict[str, Any]:
    """A, H1, H2 (``HEARTBEAT_OK``), H3, B on one chat's key; then ``chat.history`` whole and in one-message pages.
    ``observer`` only asks ``sessions.subscribe``, as owc does, to see what such a connection is told."""
    key = f"agent:main:openwebui-hb-{uuid.uuid4()}"
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    observed: list[EventFrame] = []

    async def observe(observer: RawClient) -> None:
        observed.extend(await observer.events_until(lambda f: f.event == "sessions.changed" and _ends(f, b)))

    with bounded(300, "the heartbeat flow on one chat's key"):
        async with raw_client(url, token, instance_id="HB") as client, raw_client(url, token, instance_id="HO") as obs:
            assert (await obs.request("sessions.subscribe", {})).ok
            async with trio.open_nursery() as nursery:
                nursery.start_soon(observe, obs)  # read all along: an unread socket would stall the Gateway
                assert (await client.request("sessions.subscribe", {})).ok
                await _send(client, key, a, "Hello, a first turn.")
                # Without this the connection gets none of a heartbeat run's agent or chat events (measured).
                subscribed = await client.request("sessions.messages.subscribe", {"key": key})
                assert subscribed.ok, subscribed.error
                wakes = [
                    await _wake(client, key, "Event one: please look at the build."),
                    await _wake(client, key, "Event two: nothing new. SAY_HEARTBEAT_OK"),
                    await _wake(client, key, "Event three: please look again."),
                ]
                await _send(client, key, b, "A second turn.")
                whole = await client.request("chat.history", {"sessionKey": key, "maxChars": 500_000})
                assert whole.ok, whole.error
                pages: list[dict[str, Any]] = []
                offset: int | None = 0
                while offset is not None and len(pages) < 12:
                    params = {"sessionKey": key, "limit": 1, **({"offset": offset} if offset else {})}
                    page = await client.request("chat.history", params)
                    assert page.ok, page.error
                    pages.append(page.payload)
                    offset = page.payload.get("nextOffset")
    replies = [reply for reply, _ in wakes]
    runs = dict(zip(LABELS, [[a], *(ids for _, ids in wakes), [b]], strict=True))
    return {
        "runs": runs,
        "replies": replies,
        "whole": whole.payload,
        "pages": pages,
        "frames": client.frames,
        "observed": [{"event": f.event, "payload": f.payload} for f in observed],
    }


def _ends(frame: EventFrame, run_id: str) -> bool:
    return frame.payload.get("phase") == "end" and frame.payload.get("runId") == run_id


def _sides(real_gateway) -> dict[str, dict[str, Any]]:
    async def sim_side() -> dict[str, Any]:
        async with open_simulator(token="heartbeat", responder=_responder) as sim:
            return await _flow(sim.url, "heartbeat")

    return {"real": trio.run(_flow, real_gateway.url, real_gateway.token), "sim": trio.run(sim_side)}


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text") or "") for p in content or [] if isinstance(p, dict))


def _shape(messages: list[dict[str, Any]], label: dict[str, str]) -> list[tuple[str, str | None, int, bool]]:
    """Each shown message as (role, whose run, seq, turnBoundary): a user turn is its run's by its
    idempotency key (``<runId>:user``), a reply by ``__openclaw.runId``."""
    out = []
    for m in messages:
        meta = m.get("__openclaw") or {}
        user_key = str(meta.get("idempotencyKey") or m.get("idempotencyKey") or "")
        run = meta.get("runId") or user_key.removesuffix(":user")
        out.append((m["role"], label.get(run), meta.get("seq"), meta.get("turnBoundary") is True))
    return out


def test_heartbeat_turns_in_history_on_the_real_gateway_and_the_simulator(real_gateway) -> None:
    sides = _sides(real_gateway)
    shapes = {}
    for side, got in sides.items():
        runs = got["runs"]
        for name in LABELS:
            assert len(runs[name]) == 1, (side, name, runs[name])  # one run per wake, each with isHeartbeat
        label = {ids[0]: name for name, ids in runs.items()}
        assert got["replies"] == [{"ok": True}] * 3, side
        messages = got["whole"]["messages"]
        assert not [m for m in messages if _text(m).strip() in (PROMPT, HEARTBEAT_OK)], side
        shape = _shape(messages, label)
        assert shape == [
            ("user", "A", 1, False),
            ("assistant", "A", 2, False),
            # seq 3: H1's prompt, hidden; the mark goes on H1's reply
            ("assistant", "H1", 4, True),
            # seq 5-7: H2's prompt, H2's HEARTBEAT_OK, H3's prompt, all hidden; the mark goes on H3's reply
            ("assistant", "H3", 8, True),
            ("user", "B", 9, False),
            ("assistant", "B", 10, False),
        ], side
        assert [_text(m) for m in messages if m["role"] == "assistant"] == [ANSWER] * 4, side
        history = parse_chat_history(got["whole"])
        said = {name: output_text(output_from_transcript(history, runs[name][0]) or []) for name in LABELS}
        # What owc finalizes each run with: every speaking run's reply, H1's (one hidden message before it) and
        # H3's (three) alike; nothing for H2, whose HEARTBEAT_OK the Gateway hides.
        assert said == {"A": ANSWER, "H1": ANSWER, "H2": "", "H3": ANSWER, "B": ANSWER}, side
        # One message a page, newest first: the mark is the whole transcript's, whichever page shows it.
        paged = [_shape(page["messages"], label) for page in got["pages"]]
        assert paged == [[s] for s in reversed(shape)], side
        shapes[side] = shape
        # totalMessages, offset and nextOffset count the stored messages, the four hidden ones too.
        assert got["whole"]["totalMessages"] == 10, side
        assert [p.get("nextOffset") for p in got["pages"]] == [1, 2, 3, 7, 9, None], side
        _check_live(got, side)
    assert shapes["real"] == shapes["sim"]


def _check_live(got: dict[str, Any], side: str) -> None:
    """What the real Gateway says live about the heartbeat runs (2026.9.6), and the simulator alike."""
    heartbeats = {got["runs"][name][0]: name for name in ("H1", "H2", "H3")}
    mine: dict[str, list[dict[str, Any]]] = {run: [] for run in heartbeats}
    for frame in got["frames"]:
        payload = frame.get("payload") if frame.get("type") == "event" else None
        if isinstance(payload, dict) and payload.get("runId") in mine:
            mine[payload["runId"]].append(frame)
    for run, name in heartbeats.items():
        agent = [f["payload"] for f in mine[run] if f["event"] == "agent"]
        chat = [f["payload"] for f in mine[run] if f["event"] == "chat"]
        # Only lifecycle agent events (no run_status, no assistant stream), every one flagged ...
        assert agent and all(p["isHeartbeat"] is True and p["stream"] == "lifecycle" for p in agent), (side, name)
        # ... and one chat final without the flag; H2's has no message at all.
        assert [p["state"] for p in chat] == ["final"] and "isHeartbeat" not in chat[0], (side, name)
        assert ("message" in chat[0]) == (name != "H2"), (side, name)
    # A connection with only sessions.subscribe (owc's) is told nothing that says heartbeat.
    assert not [f for f in got["observed"] if f["payload"].get("isHeartbeat") is True], side
    told: dict[str, set[tuple[str, Any]]] = {run: set() for run in heartbeats}
    for frame in got["observed"]:
        p = frame["payload"]
        message = p.get("message") if isinstance(p.get("message"), dict) else {}
        run = p.get("runId") or (message.get("__openclaw") or {}).get("runId")
        if run in told:
            told[run].add((frame["event"], p.get("phase") or message.get("role")))
    for run, name in heartbeats.items():
        events = told[run]
        assert {("sessions.changed", "start"), ("sessions.changed", "end")} <= events, (side, name)
        assert (("session.message", "assistant") in events) == (name != "H2"), (side, name)
        assert {e for e, _ in events} <= {"sessions.changed", "session.message"}, (side, name)
    pushed = [_text(f["payload"]["message"]) for f in got["observed"] if f["event"] == "session.message"]
    assert PROMPT not in pushed and HEARTBEAT_OK not in pushed, side  # neither is pushed live
    # Instead, each is told as ``sessions.changed`` ``phase: "message"`` naming its seq (and no run): H1's
    # prompt is seq 3, H2's 5 and its HEARTBEAT_OK 6, H3's prompt 7.
    told = [f["payload"].get("messageSeq") for f in got["observed"] if f["payload"].get("phase") == "message"]
    assert [seq for seq in told if seq in (3, 5, 6, 7)] == [3, 5, 6, 7], (side, told)
    # After each heartbeat run, the runner's global event (no run id): a reply that shows had no route to a
    # channel; a bare HEARTBEAT_OK is "ok-empty".
    beats = [f["payload"] for f in got["observed"] if f["event"] == "heartbeat"]
    # A wake that finds the key's lane still busy (the turn before it still settling) is told as a
    # ``skipped``/``requests-in-flight`` heartbeat and retried by the Gateway's wake queue (2026.9.6,
    # heartbeat-runner-run: skippedBusyStage; heartbeat-wake: retry). Seen once in CI, before H1; it is no run.
    # ``cron-in-progress`` is another of the wake queue's retry reasons (``RETRY_REASONS`` there: active-run,
    # requests-in-flight, cron-in-progress, preempted, channel-not-ready); seen in the suite on three workers, where
    # a retried wake also ran once more after H3 (one more ``no-route``, no run id: a heartbeat with nothing new).
    busy = [b for b in beats if b["status"] == "skipped" and b.get("reason") in RETRY_REASONS]
    assert not [b for b in busy if "runId" in b or "sessionKey" in b], side
    beats = [b for b in beats if b not in busy]
    expected = [("skipped", "no-route"), ("ok-empty", "wake"), ("skipped", "no-route")]
    said = [(b["status"], b.get("reason")) for b in beats]
    if busy and said[len(expected) :] == [("skipped", "no-route")]:
        said = said[: len(expected)]  # the retried wake's run
    assert said == expected, side
    assert not [b for b in beats if "runId" in b or "sessionKey" in b], side


#: The heartbeat wake queue's retry reasons (OpenClaw 2026.9.6, ``heartbeat-wake``): a wake skipped for one of these
#: is tried again, and its ``skipped`` event names no run.
RETRY_REASONS = frozenset({"active-run", "requests-in-flight", "cron-in-progress", "preempted", "channel-not-ready"})


async def _heartbeats_on(
    url: str, token: str, key: str, *, a: str, b: str, between: Any = None, bound: Bound | None = None
) -> dict[str, str]:
    """Turn A, heartbeats H1 (speaks), H2 (``HEARTBEAT_OK``), H3 (speaks), turn B on ``key``; ``between`` (an
    async callable) runs after A. The heartbeats' run ids come from their ``isHeartbeat`` agent events, which
    only a ``sessions.messages.subscribe`` connection gets. ``bound``: told each step, for its failure."""

    def step(what: str) -> None:
        if bound is not None:
            bound.waiting(what)

    async with raw_client(url, token, instance_id="HB") as client:
        assert (await client.request("sessions.subscribe", {})).ok
        step("turn A's final")
        await _send(client, key, a, "Hello, a first turn.")
        if between is not None:
            step("owc's first process to stop")
            await between()
        assert (await client.request("sessions.messages.subscribe", {"key": key})).ok
        runs = {"A": a}
        for name, text in (
            ("H1", "Event one: please look at the build."),
            ("H2", "Event two: nothing new. SAY_HEARTBEAT_OK"),
            ("H3", "Event three: please look again."),
        ):
            step(f"heartbeat {name}'s end")
            _, (run,) = await _wake(client, key, text)
            runs[name] = run
        step("turn B's final")
        await _send(client, key, b, "A second turn.")
        step("the raw client's close")
    runs["B"] = b
    return runs


def _check_owc_messages(messages: dict[str, Any], key: str, runs: dict[str, str]) -> None:
    mid = {name: ids.message_id(key, run) for name, run in runs.items()}
    # One message per run that spoke, the heartbeats H1 and H3 alike, with its reply; none for H2.
    assert set(messages) == {mid[n] for n in ("A", "H1", "H3", "B")}, sorted(messages)
    for name in ("A", "H1", "H3", "B"):
        message = messages[mid[name]]
        assert message["done"] is True and message["content"] == ANSWER, (name, message.get("content"))
        assert (message.get("meta") or {}).get("openclaw_run") == runs[name], name
    # In the order the runs came, one chain.
    assert [messages[mid[n]]["parentId"] for n in ("H1", "H3", "B")] == [mid["A"], mid["H1"], mid["H3"]]
    assert not [m for m in messages.values() if PROMPT in str(m.get("content")) or HEARTBEAT_OK in str(m)]


@pytest.mark.parametrize("away", [False, True], ids=["live", "owc-down"])
async def test_owc_gives_each_speaking_heartbeat_one_message_on_the_real_gateway(
    real_gateway, tmp_path, away: bool
) -> None:
    """Issue 24 item 6, end to end: owc connected to the real Gateway 2026.9.6 (``sessions.subscribe`` only, so
    it sees each heartbeat run as its start and end) gives H1 and H3 each one message with their reply, in their
    place, and H2 (``HEARTBEAT_OK``) none, as the Gateway's own chat shows them. ``owc-down``: owc sees turn A,
    then is stopped; the heartbeats and turn B run with no owc up; the next owc process finds them in the
    transcript (its first pass) and gives the same messages."""
    user, chat_id = "hb", str(uuid.uuid4())
    key = ids.session_key("main", user, chat_id)
    a, b = str(uuid.uuid4()), str(uuid.uuid4())

    def config(name: str) -> RuntimeConfig:
        gateway = GatewayConfig(instance_id=name)
        return RuntimeConfig(
            url=real_gateway.url, token=real_gateway.token, gateway=gateway, registry=WriterRegistry(), strict=True
        )

    async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
        await store.create_chat(chat_id, user)
        # Real seconds: a real external process. ``to_the_end``: the twelfth session's CI ended this block early
        # with no error (an UnboundLocalError for ``runs`` after it); now that fails here, naming the step.
        with bounded(300, f"the heartbeats with owc {'down' if away else 'live'}", to_the_end=True) as bound:
            if not away:
                async with open_runtime(config("owc"), store, RecordingEmitter()) as runtime:
                    bound.waiting("owc's connection")
                    await runtime.client.wait_connection()
                    runs = await _heartbeats_on(real_gateway.url, real_gateway.token, key, a=a, b=b, bound=bound)
                    bound.waiting("owc to settle every run")
                    await runtime.settled()
                    bound.end()
            else:
                stop, closed = trio.Event(), trio.Event()

                async def first_process(task_status=trio.TASK_STATUS_IGNORED) -> None:
                    async with open_runtime(config("owc-1"), store, RecordingEmitter()) as runtime:
                        await runtime.client.wait_connection()
                        task_status.started(runtime)
                        await stop.wait()
                    closed.set()  # its connection is closed: nothing after this reaches it

                async with trio.open_nursery() as nursery:
                    first = await nursery.start(first_process)

                    async def stop_first() -> None:
                        await first.keeper.until(lambda: first.keeper.totals()[1] >= 1)  # A's message finished
                        stop.set()
                        await closed.wait()

                    runs = await _heartbeats_on(
                        real_gateway.url, real_gateway.token, key, a=a, b=b, between=stop_first, bound=bound
                    )
                messages = (await store.read_chat(chat_id))["history"]["messages"]
                assert list(messages) == [ids.message_id(key, a)]  # only A's, before the second process
                async with open_runtime(config("owc-2"), store, RecordingEmitter()) as runtime:
                    bound.waiting("the second owc's connection")
                    await runtime.client.wait_connection()
                    bound.waiting("the second owc to settle every run")
                    await runtime.settled()
                    bound.end()
        chat = await store.read_chat(chat_id)
    _check_owc_messages(chat["history"]["messages"], key, runs)
