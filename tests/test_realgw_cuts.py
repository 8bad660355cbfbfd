"""Real Gateway tier, issue 14 ("M3 on the real thing"): a run cut mid-reply on the real OpenClaw Gateway 2026.9.6,
in each way the Gateway supports here, ends as exactly one assistant message in the Open WebUI database owc writes,
holding its one continuation.

Another client starts a SLOW turn (the fake model: one word a second) with its own idempotency key, so for owc it
is an agent turn and its message is ``ids.message_id(session_key, run_id)``. owc streams it; then the run is cut:

* a forced restart (``gateway.restart.request`` with ``restartIntent: {force: true, drainBudgetMs: 1000}``, what
  ``openclaw gateway restart --force`` sends): the Gateway restarts in its own process (``OPENCLAW_NO_RESPAWN``),
  sends no chat terminal, and at its next boot starts a recovery run;
* a SIGKILL of the Gateway, then a launch on the same state folder, port and token: recovered at boot;
* a container row: the run goes through the ``claude-cli`` runtime (a fake ``claude`` on the Gateway's PATH) and
  its CLI child is killed with SIGTERM: the run fails with ``Claude Code process exited with code 143``, the row is
  ``failed``, nobody at the Gateway continues it, and owc sends one resume that writes into the same message.

* a stop past its drain: SIGTERM to the Gateway's process group under a LONG turn (the fake model: a word every
  2 s, ~400 s), which outlives the stop drain: 315 s without a service manager (``resolveGatewayShutdownBudget`` in
  ``dist/run-*.mjs``: 330 s stop policy minus a 5 s margin minus the 10 s reserve, 2026.9.6). When it expires the
  run is aborted with ``stopReason: "restart"``, the process exits, and a launch on the same state folder, port and
  token recovers it at boot. The longest case here (~6 min).

Each real cut also records what a raw client saw of it, in a normal form (``CutForm``: close, notice, terminals,
row, recovery, stored messages); ``test_the_simulator_cuts_like_the_real_gateway[mode]`` plays the same cut on the
simulator (its ``restart`` / ``crash`` / ``container`` mode) and asserts the two forms are equal, so the simulator's
restart modes are pinned to what the real Gateway produced in the same session.

Waits are on events (owc's keeper, the Gateway's pushes and replies); the only polling is the Gateway's readiness
(its log line: an external process's readiness has no event) inside the harness.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from trio_websocket import ConnectionClosed, HandshakeError

from owc import ids
from owc.gateway import GatewayConfig
from owc.protocol.events import message_text, parse_sessions_changed
from owc.protocol.handshake import boot_started_at
from owc.protocol.results import parse_history_message, parse_session_row
from owc.registry import WriterRegistry
from owc.render import output_text
from owc.render.seam import RECOVERED, RESUMED, SEAM_TEXTS
from owc.render.status import WAIT_RESUME
from owc.runtime import Runtime, RuntimeConfig, open_runtime
from owc.sim import Hold, Text, open_simulator
from owc.store import open_store

from background import OUT_ENV
from conftest import TOKEN, secret
from rawclient import RawClient, Refused, raw_client
from realgw.fake_model import ANSWER, LONG_ANSWER
from realgw.gateway import CuttableGateway, fake_claude_bin, start_cuttable
from realgw.watched import WatchedEmitter

pytestmark = pytest.mark.realgateway

RECOVERY_TOOL = "main_session_restart_recovery"
EXIT_143 = "Claude Code process exited with code 143"
#: What a SLOW reply has streamed when the test cuts it (its third word): mid-reply, well before its end.
MID_REPLY = "Hello from the"
#: owc's log lines about cut runs, kept for the report of a failing case.
CUT_LOGS = ("runs.cut", "runs.linked", "runs.link_checked", "runs.kept_open", "runs.resume", "runs.finalized")


@pytest.fixture
def cuttable(real_gateway_install) -> Any:
    """Start a real Gateway a test may cut (``start_cuttable``'s arguments); every one is stopped afterwards."""
    made: list[CuttableGateway] = []

    def make(**kwargs: Any) -> CuttableGateway:
        gw = start_cuttable(real_gateway_install, **kwargs)
        secret(gw.token)
        made.append(gw)
        return gw

    yield make
    for gw in made:
        gw.stop()


@asynccontextmanager
async def client(gw: CuttableGateway, name: str) -> AsyncIterator[RawClient]:
    """A raw client that may see its Gateway go away: a close from the server is the end of its block, not an error."""
    try:
        async with raw_client(gw.url, gw.token, instance_id=name) as c:
            yield c
    except (ConnectionClosed, HandshakeError):
        pass


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type") == "text")


def _row(listed: Any, key: str) -> dict[str, Any] | None:
    return next((s for s in (listed or {}).get("sessions", []) if s.get("key") == key), None)


async def _history(c: RawClient, key: str) -> list[dict[str, Any]]:
    got = await c.request("chat.history", {"sessionKey": key, "limit": 50, "maxChars": 500_000})
    assert got.ok, got.error
    return got.payload["messages"]


def _recoveries(history: list[dict[str, Any]]) -> list[str]:
    """The recovery runs the transcript holds: their user turns (``<R'>:user`` with the restart-recovery provenance)."""
    return [
        (m.get("idempotencyKey") or "").removesuffix(":user")
        for m in history
        if m.get("role") == "user" and (m.get("provenance") or {}).get("sourceTool") == RECOVERY_TOOL
    ]


async def _recovery_ended(gw: CuttableGateway, key: str, source: str, evidence: list[dict[str, Any]]) -> str:
    """After a boot: until the session's recovery run (a run other than ``source``) has ended at the Gateway; its id.
    Waits on the Gateway's own pushes and ``agent.wait``, no clock."""
    async with client(gw, "cut-observer-after") as c:
        subscribed = await c.request("sessions.subscribe", {"limit": 1000})
        assert subscribed.ok, subscribed.error
        while True:
            listed = await c.request("sessions.list", {"limit": 1000})
            assert listed.ok, listed.error
            row = _row(listed.payload, key) or {}
            active = [r for r in row.get("activeRunIds") or [] if r != source]
            if active:
                # What a client reading the transcript as soon as the list names the recovery finds (owc's link read).
                early = _recoveries(await _history(c, key))
                evidence.append({"listed_active": active, "recovery_user_turn_in_transcript_then": early})
                waited = await c.request("agent.wait", {"runId": active[0], "timeoutMs": 120_000})
                assert waited.ok, waited.error
                return active[0]
            last = row.get("lastRunId")
            if last and last != source and not row.get("hasActiveRun"):
                evidence.append({"recovery_over_at_first_look": last})
                return last
            # Nothing to name yet: the next push about the session (a row change, the recovery's first event).
            await c.event(lambda f: (f.payload or {}).get("sessionKey") == key or (f.payload or {}).get("key") == key)
    raise AssertionError("the observer's connection closed")  # pragma: no cover


async def _until_done(runtime: Runtime, store: Any, chat_id: str, m: str) -> dict[str, Any]:
    """Until owc is quiet and M is ``done`` (each round waits for owc's next change)."""
    while True:
        await runtime.settled()
        message = (await store.read_chat(chat_id))["history"]["messages"].get(m)
        if message is not None and message.get("done"):
            return message
        await runtime.keeper.changed()


def _frames_of(c: RawClient, key: str, run_id: str) -> dict[str, Any]:
    """What the client subscribed before the cut received about it: the run's chat terminals, the session's row
    pushes, the shutdown notice."""
    terminals, rows, shutdown = [], [], []
    for f in c.frames:
        if f.get("type") != "event":
            continue
        p = f.get("payload") or {}
        if f.get("event") == "chat" and p.get("runId") == run_id and p.get("state") in ("final", "aborted", "error"):
            terminals.append(
                {"state": p.get("state"), "stopReason": p.get("stopReason"), "error": p.get("errorMessage")}
            )
        elif f.get("event") == "sessions.changed" and p.get("sessionKey", p.get("key")) == key:
            rows.append(
                {k: p.get(k) for k in ("phase", "reason", "status", "hasActiveRun", "abortedLastRun", "lastRunId")}
            )
        elif f.get("event") == "shutdown":
            shutdown.append(p)
    return {"terminals": terminals, "row_pushes": rows, "shutdown": shutdown}


def _cut_log(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(CUT_LOGS)]


def _report(name: str, **facts: Any) -> None:
    """One JSON line per case (``-s`` shows it): what was measured, for the issue's notes."""
    print(f"\nM3 {name}: " + json.dumps(facts, default=str))


# ---------------------------------------------------------------------------------------------- conformance forms


@dataclasses.dataclass(frozen=True)
class CutForm:
    """What owc reads of one cut, in a form the real Gateway and the simulator must agree on (issue 14: "the
    simulator's restart modes and the real Gateway agree"). Every field is read by the raw client that sent the
    run's ``chat.send`` (subscribed to the sessions before it), or by a reader after the Gateway's boot:

    * ``close_code``: the code the Gateway closed that client's connection with (1012 after a notice, 1006 for a
      dead process; ``None``: the connection stayed open);
    * ``shutdown`` / ``restart_expected``: a ``shutdown`` notice came / it carried ``restartExpectedMs`` (owc keeps
      the cut run open for the Gateway's recovery on it);
    * ``terminal_states``: the chat terminal states (``final`` / ``aborted`` / ``error``) the cut run got, as a
      set; ``terminals``: each one's ``(state, stopReason, errorMessage)`` in arrival order (owc acts on the first
      and must take any later one in its stride);
    * ``lifecycle_end``: an ``agent`` ``lifecycle`` event with ``phase: "end"`` came for the cut run;
    * ``row_status`` / ``row_aborted_last_run`` / ``row_last_run`` / ``row_error``: the session's row once the
      cut is over: ``status``, ``abortedLastRun``, whose run ``lastRunId`` names (``"cut"``, ``"recovery"``,
      ``"other"``, ``None``), ``lastRunError``. After a restart or a kill it is ``sessions.list``'s row after the
      boot and the recovery's end; in the container row the real Gateway stays up and owc resumes at once, so it
      is the row the ``sessions.changed`` push ending the cut run (``phase: "error"``) carries (what owc's cut
      decision reads), on both sides;
    * ``recoveries``: how many restart-recovery runs started (user turns with provenance ``sourceTool``
      ``main_session_restart_recovery``); ``recovery_keyed``: every such user turn is keyed ``<R'>:user`` with
      ``R'`` the recovery run the Gateway reported (``activeRunIds`` / the simulator's run);
    * ``stored``: how many assistant messages ``chat.history`` holds after the cut that owc attributes to the cut
      run (``HistoryMessage.assistant_run_id``: ``__openclaw.runId``, ``cli-assistant:<R>``, ``<R>:assistant``);
      ``stored_partial``: one of them holds text (the cut run's only text is its partial); ``stored_aborted`` /
      ``stored_stop_reason``: the last one's ``openclawAbort`` mark and ``stopReason``.

    Not compared, on purpose: timing-dependent pushes (the debounced ``sessions.changed`` row pushes, the
    ``agent.input.settled`` push a restart sends in about one cut of three, duplicated ``model`` phase pushes),
    ids, timestamps, ``seq`` numbers, the ``tick`` events and the number of deltas before the cut (the fake model
    streams a word a second, so the real cut lands one word later or earlier)."""

    close_code: int | None
    shutdown: bool
    restart_expected: bool
    terminal_states: frozenset[str]
    terminals: tuple[tuple[str, str | None, str | None], ...]
    lifecycle_end: bool
    row_status: str | None
    row_aborted_last_run: bool | None
    row_last_run: str | None
    row_error: str | None
    recoveries: int
    recovery_keyed: bool
    stored: int
    stored_partial: bool
    stored_aborted: bool | None
    stored_stop_reason: str | None

    def differences(self, sim: CutForm) -> list[str]:
        """Field by field, where the simulator's form differs from this (the real Gateway's) one."""
        return [
            f"{f.name}: real={getattr(self, f.name)!r} sim={getattr(sim, f.name)!r}"
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(sim, f.name)
        ]


def _events(frames: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [f.get("payload") or {} for f in frames if f.get("type") == "event" and f.get("event") == event]


def _cut_form(
    frames: list[dict[str, Any]],
    close: tuple[int | None, str | None] | None,
    history: list[dict[str, Any]],
    row: dict[str, Any] | None,
    source: str,
    recovery: str | None,
) -> CutForm:
    """The ``CutForm`` of a cut: ``frames`` the run's sender received (every frame, as JSON), ``close`` its close
    (``None``: still open), ``history`` ``chat.history``'s messages after the cut, ``row`` the session's row (a
    ``sessions.list`` row, or a ``sessions.changed`` payload), ``source`` the cut run, ``recovery`` the Gateway's
    recovery run if any. Read with owc's own parsers, so the form holds what owc reads."""
    terminals = tuple(
        (p["state"], p.get("stopReason"), p.get("errorMessage"))
        for p in _events(frames, "chat")
        if p.get("runId") == source and p.get("state") in ("final", "aborted", "error")
    )
    notices = _events(frames, "shutdown")
    lifecycle_end = any(
        p.get("runId") == source and p.get("stream") == "lifecycle" and (p.get("data") or {}).get("phase") == "end"
        for p in _events(frames, "agent")
    )
    parsed = parse_session_row(row) if row is not None and "key" in row else None
    pushed = parse_sessions_changed(row) if row is not None and parsed is None else None
    got = parsed or pushed
    last = got.last_run_id if got is not None else None
    messages = [parse_history_message(m) for m in history]
    turns = [m for m in messages if m.role == "user" and m.is_restart_recovery_turn]
    mine = [m for m in messages if m.assistant_run_id == source]
    return CutForm(
        close_code=close[0] if close is not None else None,
        shutdown=bool(notices),
        restart_expected=any("restartExpectedMs" in p for p in notices),
        terminal_states=frozenset(t[0] for t in terminals),
        terminals=terminals,
        lifecycle_end=lifecycle_end,
        row_status=got.status if got is not None else None,
        row_aborted_last_run=got.aborted_last_run if got is not None else None,
        row_last_run=None if last is None else "cut" if last == source else "recovery" if last == recovery else "other",
        row_error=got.last_run_error if got is not None else None,
        recoveries=len(turns),
        recovery_keyed=recovery is not None and [m.idempotency_key for m in turns] == [f"{recovery}:user"],
        stored=len(mine),
        stored_partial=any(m.text.strip() for m in mine),
        stored_aborted=mine[-1].aborted if mine else None,
        stored_stop_reason=mine[-1].stop_reason if mine else None,
    )


def _ending_push(frames: list[dict[str, Any]], key: str, source: str) -> dict[str, Any] | None:
    """The ``sessions.changed`` push that ends ``source`` on ``key`` with an error (``phase: "error"``): the row
    the Gateway says the failed run left."""
    ends = [
        p
        for p in _events(frames, "sessions.changed")
        if p.get("sessionKey") == key and p.get("phase") == "error" and p.get("runId") == source
    ]
    return ends[-1] if ends else None


#: The error a turn admitted while a new boot's startup holds the state database's lifecycle coordinator fails with.
CONTENTION = "StateDatabaseCoordinatorContentionError"

#: mode -> the real Gateway's ``CutForm``, recorded by the real cuts above for the conformance tests below.
REAL_CUTS: dict[str, CutForm] = {}


def _record(mode: str, form: CutForm) -> None:
    """Keep the real cut's form for ``test_the_simulator_cuts_like_the_real_gateway[mode]``, and print it. A cut
    played in a background process (tests/background.py) also writes it to its results folder, for
    ``background_finished`` in the session's own process."""
    REAL_CUTS[mode] = form
    _report(f"form {mode} (real Gateway)", **dataclasses.asdict(form))
    out = os.environ.get(OUT_ENV)
    if out:
        fields = {k: sorted(v) if isinstance(v, frozenset) else v for k, v in dataclasses.asdict(form).items()}
        (Path(out) / f"cut-{mode}.json").write_text(json.dumps(fields))


def _form_from_json(fields: dict[str, Any]) -> CutForm:
    fields = dict(fields)
    fields["terminal_states"] = frozenset(fields["terminal_states"])
    fields["terminals"] = tuple(tuple(t) for t in fields["terminals"])
    return CutForm(**fields)


def background_finished(nodeid: str, out: Path) -> None:
    """A cut played in its own process passed (tests/background.py): take the form it recorded."""
    for path in out.glob("cut-*.json"):
        REAL_CUTS[path.stem.removeprefix("cut-")] = _form_from_json(json.loads(path.read_text()))


async def _gateway_recovered_cut(gw: CuttableGateway, *args: Any, **kwargs: Any) -> None:
    """``_recovered_cut``; on any failure, the Gateway's own log is printed with it (a boot that never came, in CI
    once, showed up only as owc's reconnects timing out)."""
    try:
        await _recovered_cut(gw, *args, **kwargs)
    except BaseException:
        print(f"\nthe Gateway's log, last lines:\n{gw.log_tail(80)}")
        raise


async def _recovered_cut(
    gw: CuttableGateway,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    name: str,
    mode: str,
    cut: Callable[[RawClient], Awaitable[None]],
    *,
    message: str = "SLOW reply please",
    answer: str = ANSWER,
    within: float = 170,
) -> None:
    """Start a SLOW agent turn (``message``; the fake model's full answer to it: ``answer``), let owc stream it to
    mid-reply, ``cut`` it, and check the one message after the Gateway's recovery: the source's streamed text, then
    the recovery's, one chain, no resume from owc. Records the cut's ``CutForm`` under ``mode`` (the simulator's
    restart mode it is compared with). ``within``: the bound on the whole case, in real seconds."""
    user, chat_id = "u-cut", str(uuid.uuid4())
    key = ids.session_key("main", user, chat_id)
    run_id = str(uuid.uuid4())
    m = ids.message_id(key, run_id)
    # Reconnect soon after the Gateway is back (the recovery starts 2-4 s after its ready line): a backoff grown to
    # 16-30 s over a 20 s boot would have owc miss the whole recovery live, which is a case of its own.
    gateway = GatewayConfig(instance_id="owc-cut", backoff_initial=0.5, backoff_cap=2.0, backoff_jitter=0)
    config = RuntimeConfig(url=gw.url, token=gw.token, gateway=gateway, registry=WriterRegistry(), strict=True)
    emitter = WatchedEmitter()
    evidence: list[dict[str, Any]] = []
    async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
        await store.create_chat(chat_id, user)
        async with open_runtime(config, store, emitter) as runtime:
            with trio.fail_after(within):  # real seconds: a boot alone takes ~20 s here
                first = await runtime.client.wait_connection()
                boot_before = first.boot_id
                async with client(gw, "other-ui") as other:
                    assert (await other.request("sessions.subscribe", {"limit": 1000})).ok
                    params = {"sessionKey": key, "message": message, "idempotencyKey": run_id}
                    sent = await other.request("chat.send", params)
                    assert sent.ok, sent.error
                    await emitter.until_streamed(chat_id, m, MID_REPLY)
                    run = runtime.ledger.get(key, run_id)
                    assert run is not None
                    shown_at_cut = run.renderer.text
                    await cut(other)
                    close = await other.closed()  # what it got until the Gateway closed it
                    seen = _frames_of(other, key, run_id)
                    frames = list(other.frames)
                second = await runtime.client.wait_connection(newer_than=first)
                recovery = await _recovery_ended(gw, key, run_id, evidence)
                message = await _until_done(runtime, store, chat_id, m)
                async with client(gw, "cut-reader") as reader:
                    history = await _history(reader, key)
                    listed = await reader.request("sessions.list", {"limit": 1000})
                    row = _row(listed.payload, key)
        saved = await store.read_chat(chat_id)
    logged = _cut_log(caplog)
    assistants = [k for k, v in saved["history"]["messages"].items() if v.get("role") == "assistant"]
    _report(
        name,
        close=close,
        seen_by_a_client_before_the_cut=seen,
        recovery=recovery,
        observer_after_boot=evidence,
        message_output_text=output_text(message.get("output") or []),
        transcript=[(h.get("role"), _text(h)[:60], h.get("idempotencyKey")) for h in history],
        row_after=row and {k: row.get(k) for k in ("status", "hasActiveRun", "abortedLastRun", "lastRunId")},
        assistant_messages=len(assistants),
        content=message.get("content"),
        chain=(message.get("meta") or {}).get("openclaw_chain"),
        resumes_sent=runtime.keeper.cuts.resumes_sent,
        connections=runtime.client.connections_opened,
        boots=(boot_before, second.boot_id),
        owc_log=logged,
    )
    # The Gateway's side, for the conformance test (recorded before owc's side is checked: it does not depend on it).
    _record(mode, _cut_form(frames, close, history, row, run_id, recovery))
    # The Gateway recovered it, once, with a run of its own (a plain UUID, no lifecycle start).
    assert _recoveries(history) == [recovery], history
    assert ids.parse_run_id(recovery) is None
    # Exactly one assistant message for the source run, finished, holding the recovery after the source's text.
    assert assistants == [m], (assistants, logged)
    assert message["done"] is True
    assert (message.get("meta") or {}).get("openclaw_chain") == [run_id, recovery], (message.get("meta"), logged)
    content = message["content"]
    # Issue 25 item 3: the seam line, once, exactly between the cut run's text and the recovery's.
    resumed = f"\n{SEAM_TEXTS[RECOVERED]}\n{ANSWER}"
    assert content.startswith(shown_at_cut) and content.endswith(resumed), (content, shown_at_cut, logged)
    assert content.count(SEAM_TEXTS[RECOVERED]) == 1 and SEAM_TEXTS[RESUMED] not in content, content
    streamed = content[: -len(resumed)].rstrip("\n")
    assert streamed.startswith(MID_REPLY) and answer.startswith(streamed) and streamed != answer, content
    # Item 2: the status lines told the tab so, and the finished message keeps none spinning.
    said = [(e["description"], e["done"]) for e in message.get("statusHistory") or []]
    assert said[-1][0].startswith("Context ") and said[-1][1] is True, said  # the usage line, last (issue 28)
    assert _before_usage(said)[-1] == (RECOVERED, True), said
    # No double continuation: owc sent no resume; the ledger holds nothing unsettled and saw no illegal input.
    assert runtime.keeper.cuts.resumes_sent == [], logged
    assert not any("runs.resumed" in t for t in logged), logged
    assert any("runs.linked" in t and f"run={recovery}" in t and f"recovers={run_id}" in t for t in logged), logged
    assert len(runtime.ledger) == 0 and runtime.ledger.illegal == []


async def test_a_forced_restart_mid_reply_is_recovered_into_the_same_message(
    cuttable, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gw = cuttable()

    async def cut(other: RawClient) -> None:
        lock = gw.state_lock()
        params = {
            "reason": "gateway.restart",
            "target": {"pid": gw.gateway.pid, "ownerId": lock["ownerId"], "port": lock["port"]},
            "restartIntent": {"force": True, "drainBudgetMs": 1000},
        }
        gw.expect_boot()  # the process restarts itself (no respawn): its next ready line is the new boot's
        answer = await other.request("gateway.restart.request", params)
        assert answer.ok and answer.payload.get("status") == "emitted", (answer.payload, answer.error)
        # Its new boot, or a failure that names the Gateway's own log (a boot that never came in CI once showed
        # up only as owc's reconnects timing out).
        await trio.to_thread.run_sync(gw.wait_ready, abandon_on_cancel=True)

    await _gateway_recovered_cut(gw, tmp_path, caplog, "forced restart", "restart", cut)
    assert gw.gateway.poll() is None and len(gw.launched) == 1  # the same process booted again
    assert gw.ready_count() == 2


async def test_a_gateway_killed_mid_reply_is_recovered_into_the_same_message(
    cuttable, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gw = cuttable()

    async def cut(other: RawClient) -> None:
        gw.signal(signal.SIGKILL)
        assert await trio.to_thread.run_sync(gw.wait_exit) == -signal.SIGKILL
        gw.launch()  # the same state folder, port and token: the Gateway "came back"
        await trio.to_thread.run_sync(gw.wait_ready)

    await _gateway_recovered_cut(gw, tmp_path, caplog, "SIGKILL + relaunch", "crash", cut)
    assert len(gw.launched) == 2


async def test_a_turn_sent_before_the_boots_recovery_begins_runs_after_the_recovery(cuttable) -> None:
    """Issue 24, item 12 (fuzz seed 30151): what a turn sent to a session between a boot and the start of that boot's
    recovery of it does. SIGKILL under a SLOW turn S, a launch on the same state, and as soon as the Gateway takes a
    connection (before its ready line; the recovery starts 2-4 s after it) another client's ``chat.send`` X on the
    same session. On 2026.9.6 the admission of X finds the row ``running`` + ``abortedLastRun`` (the boot marked it)
    and dispatches the pending recovery first (``get-reply.types-*.mjs``: ``retryRestartAbortedMainSessionRecovery``,
    then ``waitForRecovery``): the recovery R' runs before anything of X (here X itself was not run at all: its chat
    ended ``final`` with no message, its turn never stored), so a session's last run after a boot that is an
    ordinary turn follows the boot's recovery of the session, if it had one. The simulator follows the order
    (``Restarts._admitting``: X queues behind R')."""
    gw = cuttable()
    key = ids.session_key("main", "u-cut", str(uuid.uuid4()))
    source, newer = str(uuid.uuid4()), str(uuid.uuid4())
    facts: dict[str, Any] = {}
    with trio.fail_after(170):
        async with client(gw, "first-ui") as c:
            assert (await c.request("sessions.subscribe", {"limit": 1000})).ok
            params = {"sessionKey": key, "message": "SLOW reply please", "idempotencyKey": source}
            sent = await c.request("chat.send", params)
            assert sent.ok, sent.error
            await c.event(
                lambda f: f.event == "chat" and f.payload.get("runId") == source and f.payload.get("state") == "delta"
            )
            listed = await c.request("sessions.list", {"limit": 1000})
            old_boot_last = (_row(listed.payload, key) or {}).get("updatedAt")  # the old process's clock, under S
            gw.signal(signal.SIGKILL)
            assert await trio.to_thread.run_sync(gw.wait_exit) == -signal.SIGKILL
        gw.launch()
        tries = 0
        while True:  # the first connection the new process takes (an external process's readiness has no event)
            tries += 1
            try:
                async with raw_client(gw.url, gw.token, instance_id="second-ui") as c:
                    answer = await c.request(
                        "chat.send", {"sessionKey": key, "message": "Say hi", "idempotencyKey": newer}
                    )
                    if not answer.ok and (answer.error or {}).get("retryable"):
                        raise OSError(str(answer.error))
                    facts["send"] = (answer.ok, answer.payload, answer.error, tries)
                    # When the new boot began, on its own clock (the snapshot's own presence ``ts`` less the
                    # hello's uptimeMs, ``process.uptime()`` in ``health-state-*.mjs``): ``settled_before_boot``
                    # relies on it lying after every write of the process before it and before anything the boot
                    # runs. The challenge's ts gives an earlier one (read before the uptime).
                    assert c.challenge is not None and c.hello is not None
                    facts["booted_at"] = boot_started_at(c.hello.snapshot_ts, c.hello.uptime_ms)
                    facts["booted_at_by_challenge"] = boot_started_at(c.challenge.payload.get("ts"), c.hello.uptime_ms)
                    listed = await c.request("sessions.list", {"limit": 1000})
                    row = _row(listed.payload, key) or {}
                    facts["row_after_send"] = {
                        k: row.get(k) for k in ("status", "hasActiveRun", "abortedLastRun", "lastRunId", "activeRunIds")
                    }
                    assert (await c.request("sessions.subscribe", {"limit": 1000})).ok
                    ends: list[Any] = []
                    with trio.move_on_after(120):  # the bound on both runs: whatever the Gateway did, report it
                        while True:
                            frame = await c.event("chat")
                            if frame.payload.get("state") in ("final", "error", "aborted"):
                                ends.append(
                                    (
                                        frame.payload.get("runId"),
                                        frame.payload.get("state"),
                                        frame.payload.get("stopReason"),
                                        message_text(frame.payload.get("message"))[:120],
                                        frame.payload.get("errorMessage"),
                                    )
                                )
                                if frame.payload.get("runId") == newer:
                                    break
                    facts["ends"] = ends
                    with trio.move_on_after(90):  # then until the session is idle (the recovery, if it waits)
                        while True:
                            listed = await c.request("sessions.list", {"limit": 1000})
                            if not (_row(listed.payload, key) or {}).get("hasActiveRun"):
                                break
                            await c.event(lambda f: (f.payload or {}).get("sessionKey") == key)
                    listed = await c.request("sessions.list", {"limit": 1000})
                    row = _row(listed.payload, key) or {}
                    facts["row_after"] = {
                        k: row.get(k) for k in ("status", "abortedLastRun", "lastRunId", "startedAt", "endedAt")
                    }
                    history = await _history(c, key)
                break
            except (OSError, HandshakeError, ConnectionClosed, Refused):
                await trio.sleep(0.1)
    users = [
        ((m.get("idempotencyKey") or "").removesuffix(":user"), (m.get("provenance") or {}).get("sourceTool"))
        for m in history
        if m.get("role") == "user"
    ]
    facts["user_turns"] = users
    facts["transcript"] = [(h.get("role"), _text(h)[:50], (h.get("__openclaw") or {}).get("runId")) for h in history]
    facts["gateway_log"] = [line for line in gw.log_tail(400).splitlines() if "ecover" in line][-15:]
    _report("a turn sent before the boot's recovery", **facts)
    recoveries = _recoveries(history)
    assert len(recoveries) == 1, facts
    order = [run for run, _ in users]
    # The recovery's turn comes right after the cut run's: nothing the other client sent ran before it. (Measured
    # on 2026.9.6, 3 plays: X's admission dispatched the recovery, X's chat ended ``final`` with no message and its
    # turn was never stored; the simulator runs X after the recovery instead, which keeps the same order.)
    before = order[: order.index(recoveries[0]) + 1]
    contended = any(e[0] == newer and e[1] == "error" and CONTENTION in (e[4] or "") for e in facts["ends"])
    if contended:
        # Measured once under load (the seventh session, the suite on three workers): X was admitted while the new
        # boot's startup held its state database's lifecycle coordinator; its turn was stored and its run failed at
        # once, saying nothing ("StateDatabaseCoordinatorContentionError: another OpenClaw process owns
        # state-lifecycle"), and the recovery came after it. The Gateway's variant, not owc's.
        assert before == [source, newer, recoveries[0]], facts
    else:
        assert before == [source, recoveries[0]], facts
        assert newer not in order or order.index(newer) > order.index(recoveries[0]), facts
    # The boot's time lies between the killed process's last event and the start of the boot's recovery.
    booted, recovered = facts["booted_at"], facts["row_after"].get("startedAt")
    assert booted is not None and isinstance(old_boot_last, int) and old_boot_last < booted, facts
    assert recovered is None or booted <= recovered, facts
    assert facts["booted_at_by_challenge"] <= booted, facts


#: The stop drain without a service manager (315 s, measured) and the slack past it for the drain to end and the
#: process to exit; the bound on the whole stop case adds two boots and the recovery.
STOP_DRAIN_S = 315
STOP_SLACK_S = 60


@pytest.mark.background  # six minutes of the Gateway's drain: played beside the rest of the session
async def test_a_stop_past_its_drain_mid_reply_is_recovered_into_the_same_message(
    cuttable, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A plain stop (SIGTERM to the Gateway's process group, what a service manager's stop sends) under a LONG turn
    that outlives the Gateway's stop drain (315 s without a service manager, 2026.9.6): the clients keep the run
    streaming for the whole drain; when it expires the Gateway sends ``shutdown`` (no ``restartExpectedMs``), aborts
    the run with ``stopReason: "restart"``, closes with 1012 and exits; a launch on the same state folder, port and
    token recovers the run at boot. owc must not resume it (the Gateway does)."""
    gw = cuttable()
    exits: list[int] = []

    async def cut(other: RawClient) -> None:
        gw.signal_group(signal.SIGTERM)
        # The drain's end is the Gateway's close of this client (the run's abort and the notice come just before);
        # reading meanwhile keeps this client a consumer the Gateway does not have to buffer for.
        with trio.fail_after(STOP_DRAIN_S + STOP_SLACK_S):
            await other.closed()
        exits.append(await trio.to_thread.run_sync(gw.wait_exit, STOP_SLACK_S, abandon_on_cancel=True))
        gw.launch()  # the same state folder, port and token: the Gateway "came back"
        await trio.to_thread.run_sync(gw.wait_ready, abandon_on_cancel=True)

    started = trio.current_time()
    await _gateway_recovered_cut(
        gw,
        tmp_path,
        caplog,
        "SIGTERM past the drain + relaunch",
        "stop",
        cut,
        message="LONG reply please",
        answer=LONG_ANSWER,
        within=STOP_DRAIN_S + STOP_SLACK_S + 170,
    )
    _report("stop timing", wall_s=round(trio.current_time() - started, 1), exit=exits)
    assert len(gw.launched) == 2
    assert len(exits) == 1  # the process exited by itself when its drain expired (code in the report)


async def test_a_cli_child_killed_mid_reply_is_resumed_once_into_the_same_message(
    cuttable, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The container row: the Gateway stays up, the run's CLI child dies of SIGTERM (exit 143), the run fails and
    nobody at the Gateway continues it. owc sends one resume, ``msg-<chat>-<M>-resume-1``, into the same message."""
    home = tmp_path / "gw"
    gw = cuttable(
        home=home,
        config={"agents": {"defaults": {"model": {"primary": "claude-cli/claude-sonnet-5"}}}},
        path=(fake_claude_bin(home),),
    )
    user, chat_id = "u-cut", str(uuid.uuid4())
    key = ids.session_key("main", user, chat_id)
    run_id = str(uuid.uuid4())
    m = ids.message_id(key, run_id)
    resume = ids.resume_run_id(chat_id, m, "1")
    config = RuntimeConfig(url=gw.url, token=gw.token, registry=WriterRegistry(), strict=True)
    emitter = WatchedEmitter()
    async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
        await store.create_chat(chat_id, user)
        async with open_runtime(config, store, emitter) as runtime:
            with trio.fail_after(150):
                await runtime.client.wait_connection()
                async with client(gw, "other-ui") as other:
                    assert (await other.request("sessions.subscribe", {"limit": 1000})).ok
                    params = {"sessionKey": key, "message": "SLOW reply please", "idempotencyKey": run_id}
                    sent = await other.request("chat.send", params)
                    assert sent.ok, sent.error
                    await emitter.until_streamed(chat_id, m, MID_REPLY)
                    shown_at_cut = runtime.ledger.get(key, run_id).renderer.text
                    children = gw.descendants("fake_claude.py")
                    children = [pid for pid in children if "stream-json" in Path(f"/proc/{pid}/cmdline").read_text()]
                    assert len(children) == 1, children
                    os.kill(children[0], signal.SIGTERM)
                    await runtime.keeper.until(lambda: runtime.keeper.cuts.resumes_sent != [])
                    waited = await other.request("agent.wait", {"runId": resume, "timeoutMs": 120_000})
                    assert waited.ok and waited.payload.get("status") == "ok", (waited.payload, waited.error)
                    message = await _until_done(runtime, store, chat_id, m)
                    history = await _history(other, key)
                    listed = await other.request("sessions.list", {"limit": 1000})
                    row = _row(listed.payload, key)
                    seen = _frames_of(other, key, run_id)
                    frames = list(other.frames)
        saved = await store.read_chat(chat_id)
    logged = _cut_log(caplog)
    assistants = [k for k, v in saved["history"]["messages"].items() if v.get("role") == "assistant"]
    _report(
        "CLI child SIGTERM (container row)",
        seen_by_a_client=seen,
        transcript=[(h.get("role"), _text(h)[:60], h.get("idempotencyKey")) for h in history],
        row_after=row and {k: row.get(k) for k in ("status", "hasActiveRun", "lastRunId", "lastRunError")},
        assistant_messages=len(assistants),
        content=message.get("content"),
        meta={k: v for k, v in (message.get("meta") or {}).items() if k.startswith("openclaw_")},
        resumes_sent=runtime.keeper.cuts.resumes_sent,
        owc_log=logged,
    )
    # The Gateway stayed up (no close, no notice); the row is the one the push ending the run carried.
    _record("container", _cut_form(frames, None, history, _ending_push(frames, key, run_id), run_id, None))
    # The Gateway's side: the run failed with the CLI's exit text, and nothing of the Gateway's continued it.
    assert [t["error"] for t in seen["terminals"]][:1] == [EXIT_143], seen
    assert _recoveries(history) == []
    # owc's side: exactly one resume, under M's first resume id, and it wrote into M.
    assert runtime.keeper.cuts.resumes_sent == [resume], logged
    assert assistants == [m], (assistants, logged)
    assert message["done"] is True
    assert (message.get("meta") or {}).get("openclaw_chain") == [run_id, resume], (message.get("meta"), logged)
    content = message["content"]
    # Issue 25 item 3: owc's own resume is marked in its words, once, between the cut run's text and the resume's.
    resumed = f"\n{SEAM_TEXTS[RESUMED]}\n{ANSWER}"
    assert content.startswith(shown_at_cut) and content.endswith(resumed), (content, shown_at_cut, logged)
    assert content.count(SEAM_TEXTS[RESUMED]) == 1 and SEAM_TEXTS[RECOVERED] not in content, content
    streamed = content[: -len(resumed)].rstrip("\n")
    assert streamed.startswith(MID_REPLY) and ANSWER.startswith(streamed) and streamed != ANSWER, content
    said = [(e["description"], e["done"]) for e in message.get("statusHistory") or []]
    assert said[-1][0].startswith("Context ") and said[-1][1] is True, said  # the usage line, last (issue 28)
    assert _before_usage(said)[-2:] == [(WAIT_RESUME, False), (RESUMED, True)], said
    assert len(runtime.ledger) == 0 and runtime.ledger.illegal == []


def _before_usage(said: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """The status lines before the usage line (issue 28: said done, after the reply's own last line; offline, the
    real Gateway reports the context alone, so it is one line)."""
    while said and said[-1][1] is True and said[-1][0].startswith("Context "):
        said = said[:-1]
    return said


# ---------------------------------------------------------------------------------------------- the simulator's cuts


async def _sim_cut(mode: str) -> CutForm:
    """Play the real cut of ``mode`` on the simulator: another client's ``chat.send`` of a SLOW turn (the real fake
    model's first words, then a model still thinking), cut mid-reply with ``sim.restart(mode)``; the ``CutForm`` of
    what the same raw client and a reader after the boot saw. The container row runs on the CLI runtime, as the real
    one does (``claude-cli``); its real cut keeps the Gateway up (its CLI child alone is killed), so the simulator's
    is read up to the stop that follows in its ``container`` mode: the frames before its shutdown notice, no close,
    and the row of the push that ended the run."""
    key = ids.session_key("main", "u-cut", str(uuid.uuid4()))
    run_id = str(uuid.uuid4())
    container = mode == "container"
    async with open_simulator(
        token=TOKEN, responder=lambda _key, _message: [Text(MID_REPLY), Hold()], cli_runtime=container
    ) as sim:
        async with raw_client(sim.url, TOKEN, instance_id="other-ui") as other:
            assert (await other.request("sessions.subscribe", {"limit": 1000})).ok
            params = {"sessionKey": key, "message": "SLOW reply please", "idempotencyKey": run_id}
            sent = await other.request("chat.send", params)
            assert sent.ok, sent.error
            await other.event(
                lambda f: (
                    f.event == "chat"
                    and f.payload.get("runId") == run_id
                    and message_text(f.payload.get("message")) == MID_REPLY
                )
            )
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sim.restart, mode)
                close = await other.closed()
        await sim.wait_for(sim.quiescent)  # the boot's recovery, if any, has ended
        async with raw_client(sim.url, TOKEN, instance_id="cut-reader") as reader:
            history = await _history(reader, key)
            listed = await reader.request("sessions.list", {"limit": 1000})
            assert listed.ok, listed.error
        recoveries = [r.run_id for r in sim.runs.values() if r.origin == "recovery" and r.key == key]
    recovery = recoveries[0] if len(recoveries) == 1 else None
    frames = other.frames
    if container:
        notice = next(i for i, f in enumerate(frames) if f.get("type") == "event" and f.get("event") == "shutdown")
        frames = frames[:notice]
        return _cut_form(frames, None, history, _ending_push(frames, key, run_id), run_id, recovery)
    return _cut_form(frames, close, history, _row(listed.payload, key), run_id, recovery)


@pytest.mark.parametrize(
    "mode",
    [
        "restart",
        "crash",
        "container",
        "stop",
    ],
)
async def test_the_simulator_cuts_like_the_real_gateway(mode: str) -> None:
    """Issue 14, "the simulator's restart modes and the real Gateway agree": the simulator's ``mode`` plays the
    cut the real test above played in this session (``restart``: the forced restart; ``crash``: SIGKILL and a
    launch; ``container``: the CLI child's SIGTERM; ``stop``: SIGTERM past the stop drain and a launch), and the
    two ``CutForm`` must be equal. A difference names the field and both values; it is the simulator's to fix (the
    real Gateway is the reference).

    Normalized: ``abortedLastRun`` is compared only where the real row reports it."""
    real = REAL_CUTS.get(mode)
    if real is None:
        pytest.skip(f"the real {mode} cut did not record its form in this session (run the module whole)")
    with trio.fail_after(30):
        sim = await _sim_cut(mode)
    if real.row_aborted_last_run is None:
        sim = dataclasses.replace(sim, row_aborted_last_run=None)
    _report(f"form {mode} (simulator)", **dataclasses.asdict(sim))
    assert sim == real, f"the simulator's {mode} cut differs from the real Gateway's:\n" + "\n".join(
        real.differences(sim)
    )
