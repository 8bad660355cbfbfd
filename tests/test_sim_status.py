"""The simulator's sub-agents, tasks and compaction (``owc.sim.tasks``, ``owc.sim.compaction``), as the real 2026.9.6
Gateway has them (``docs/measured/status-subagents-2026.9.6.md``).

First owc's status desk against it, the same story ``tests/test_realgw_status.py`` tells on the real Gateway: a
sub-agent listed while it runs its tool (held there by the test, then released), the view's watcher poked by the
Gateway's events only, the drawer, the chat's sub-agent lines said once, Compact refused during a reply and done
after, then "Already compacted". Then the wire itself, on bare connections: who gets the child's frames, the ``task``
events' sequence, ``tasks.list`` filters and closed params, scopes, the announce run, the compaction's answers and
events. Deterministic: Trio's MockClock (``clock``), no sleep; the announce's 0.3 s is checked on the clock alone."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from owc import ids
from owc.emit import RecordingEmitter
from owc.gateway import GatewayConfig
from owc.runs.status import BUSY_LINE
from owc.runtime import RuntimeConfig, open_runtime
from owc.sim import End, Hold, Spawn, Text, Tool, fake_model_responder, open_simulator
from owc.sim.compaction import ALREADY, TOO_SMALL
from owc.sim.script import Step
from owc.store import open_store

from rawclient import RawClient, raw_client

TOKEN = "status-token"
LABEL = "test-child"
TASK = "CHILD_WORK: run a short command and report."
CHILD_DONE = "CHILD DONE: the command ran."
SPAWNED = "PARENT: the sub-agent is on it."
ANNOUNCED = "The sub-agent ran the command."
EXEC_ARGS = {"command": "sleep 3; echo child-ok"}
READ_WRITE = ("operator.read", "operator.write")


def responder(key: str, message: str) -> list[Step]:
    """The parent's model: ``SPAWN`` spawns a child held in its ``exec`` (released by the test), ``SLOW`` holds."""
    if "SPAWN" in message:
        child = (Tool("exec", EXEC_ARGS, "child-ok", hold=True), Text(CHILD_DONE), End())
        return [Spawn(TASK, LABEL, child, (Text(ANNOUNCED), End())), Text(SPAWNED), End()]
    if "SLOW" in message:
        return [Text("Hello"), Hold()]
    return list(fake_model_responder(key, message))


async def _send(client: RawClient, key: str, message: str, run_id: str | None = None) -> str:
    run_id = run_id or str(uuid.uuid4())
    sent = await client.request("chat.send", {"sessionKey": key, "message": message, "idempotencyKey": run_id})
    assert sent.ok, sent.error
    return run_id


# ---------------------------------------------------------------------------------------------- owc's status desk


async def test_owcs_status_desk_against_the_simulator(clock, tmp_path: Path) -> None:
    user, chat_id = "u-status", str(uuid.uuid4())
    key = ids.session_key("main", user, chat_id)
    async with (
        open_simulator(token=TOKEN, responder=responder) as sim,
        open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store,
    ):
        sim.tasks.announce_delay = 0
        await store.create_chat(chat_id, user)
        config = RuntimeConfig(url=sim.url, token=TOKEN, gateway=GatewayConfig(instance_id="owc", backoff_jitter=0))
        async with open_runtime(config, store, RecordingEmitter()) as runtime:
            await runtime.connected()
            desk = runtime.keeper.status
            async with raw_client(sim.url, TOKEN, caps=(), instance_id="cron-ish") as other:
                seen_running: dict[str, Any] = {}
                pokes = 0
                async with desk.watching(key) as watcher:
                    sent = False
                    while True:
                        view = await desk.snapshot(key)
                        live = view["subagents"] or []
                        if not sent:  # the first view is before the spawn: every later one is the events' doing
                            assert live == []
                            await _send(other, key, "please SPAWN a child")
                            sent = True
                        if live and live[0]["doing"] == "Running exec" and not seen_running:
                            seen_running = live[0]
                            (task,) = sim.tasks.of(key)
                            sim.tasks.child(task.task_id).release()  # the exec ends: the child answers
                        if seen_running and not live:
                            break
                        await watcher.changed()
                        pokes += 1
                assert seen_running["title"] == LABEL and seen_running["status"] == "running"
                assert isinstance(seen_running["startedAtMs"], int) and seen_running["toolUses"] == 1
                assert pokes >= 2  # the Gateway's events moved the view, each poke one read
                view = await desk.snapshot(key)
                assert view["context"]["provider"] == "sim"
                drawer = await desk.drawer(key, seen_running["id"])
                assert drawer is not None and drawer["status"] == "completed"
                assert [t["name"] for t in drawer["tools"]] == ["exec"]
                assert drawer["tools"][0]["result"] == "child-ok" and drawer["prompt"] == TASK
                assert drawer["result"] == CHILD_DONE
                assert any(CHILD_DONE in m["text"] for m in drawer["messages"] if m["role"] == "assistant")
                assert drawer["childKey"].startswith("agent:main:subagent:")
                assert await desk.drawer(ids.session_key("main", user, str(uuid.uuid4())), seen_running["id"]) is None
                # The spawn's turn and the announce run (a run owc did not start) are two finished messages.
                await runtime.keeper.until(lambda: runtime.keeper.totals()[1] >= 2)
                chat = await store.read_chat(chat_id)
                said = [
                    e["description"]
                    for m in chat["history"]["messages"].values()
                    for e in m.get("statusHistory") or []
                    if e.get("action") == "openclaw_subagent"
                ]
                assert said == [
                    f"Sub-agent {LABEL} is working",
                    f"Sub-agent {LABEL}: running exec",
                    f"Sub-agent {LABEL} finished",
                ], said
                texts = [m.get("content") for m in chat["history"]["messages"].values()]
                assert any(ANNOUNCED in (t or "") for t in texts), texts
                # Compact during a reply: refused by the Gateway, said in a person's words; after it: done.
                await _send(other, key, "SLOW please")
                await runtime.keeper.until(lambda: runtime.keeper.ledger.running_on(key))
                busy = await desk.compact(key)
                assert (busy.ok, busy.line, busy.code) == (False, BUSY_LINE, 409)
                running = sim.active_run(key)
                assert running is not None
                running.end()
                await runtime.keeper.until(lambda: runtime.keeper.totals()[1] >= 3)
                done = await desk.compact(key)
                assert done.ok, done.line
                assert isinstance(done.before, int) and isinstance(done.after, int) and done.after < done.before
                again = await desk.compact(key)
                assert (again.ok, again.code) == (False, 409)
                assert again.line == "This chat was just compacted: there is nothing more to compact."


# ---------------------------------------------------------------------------------------------- the wire


def _tasks(client: RawClient) -> list[dict[str, Any]]:
    return [f.payload["task"] for f in client.backlog if f.event == "task"]


def _step(task: dict[str, Any]) -> tuple[Any, ...]:
    ex = task["execution"]
    return (
        task["status"],
        ex["state"],
        (ex.get("currentTool") or {}).get("name"),
        task.get("toolUseCount"),
        task["deliveryStatus"],
        "flowId" in task,
    )


async def _drain(client: RawClient) -> None:
    """Everything sent to ``client`` so far is in its backlog (a request's answer comes after it)."""
    assert (await client.request("sessions.list", {})).ok


async def test_a_sub_agent_on_the_wire(clock) -> None:
    parent, other = "agent:main:openwebui-u-p1", "agent:main:openwebui-u-p2"
    async with (
        open_simulator(token=TOKEN, responder=responder) as sim,
        raw_client(sim.url, TOKEN, caps=("tool-events",)) as a,
        raw_client(sim.url, TOKEN, caps=()) as s,
        raw_client(sim.url, TOKEN, caps=("tool-events",)) as n,
        raw_client(sim.url, TOKEN, caps=(), scopes=("operator.read",)) as r,
    ):
        sim.tasks.announce_delay = 0
        for c in (a, s):
            assert (await c.request("sessions.subscribe", {})).ok
        run_id = await _send(a, parent, "SPAWN please")
        await sim.wait_for(lambda: any(t.current_tool for t in sim.tasks.of(parent)))  # the child holds in exec
        (task,) = sim.tasks.of(parent)
        child = task.child_key
        assert child.startswith("agent:main:subagent:")

        # tasks.list: its filters, while the child runs its tool.
        async def listed(client: RawClient = a, **params: Any) -> list[str]:
            got = await client.request("tasks.list", params)
            assert got.ok, got.error
            return [t["id"] for t in got.payload["tasks"]]

        live = {"status": ["running", "queued"], "limit": 50}
        assert await listed(sessionKey=parent, **live) == [task.task_id]
        assert await listed(sessionKey=child) == [task.task_id]
        assert await listed(sessionKey=other) == []
        assert await listed(agentId="main") == [task.task_id]
        assert await listed(r, sessionKey=parent) == [task.task_id]  # read scope is enough
        running = (await a.request("tasks.list", {"sessionKey": parent})).payload["tasks"][0]
        assert running["execution"]["currentTool"]["name"] == "exec" and running["lastToolName"] == "exec"
        bad = await a.request("tasks.list", {"status": "succeeded"})
        assert not bad.ok and bad.error.code == "INVALID_REQUEST"
        assert bad.error.message.startswith("invalid tasks.list params: at /status: must be equal to constant; ")
        typo = await a.request("tasks.list", {"key": parent})
        assert (typo.error.code, typo.error.message) == (
            "INVALID_REQUEST",
            "invalid tasks.list params: at root: unexpected property 'key'",
        )
        assert not (await a.request("tasks.list", {"limit": 501})).ok
        nope = await r.request("tasks.get", {"taskId": "nope"})
        assert (nope.error.code, nope.error.message) == ("INVALID_REQUEST", "task not found: nope")

        sim.tasks.child(task.task_id).release()
        await sim.wait_for(lambda: task.delivery_status == "delivered")
        await sim.wait_for(sim.quiescent)
        for c in (a, s, n, r):
            await _drain(c)

        # The task events: every read-scope connection, subscribed or not, the measured sequence.
        assert [_step(t) for t in _tasks(n)] == [
            ("running", "unknown", None, None, "pending", False),
            ("running", "unknown", None, None, "pending", True),
            ("running", "running", None, None, "pending", True),
            ("running", "running", "exec", 1, "pending", True),
            ("running", "running", None, 1, "pending", True),
            ("running", "finished", None, 1, "pending", True),
            ("completed", "finished", None, 1, "pending", True),
            ("completed", "finished", None, 1, "delivered", True),
        ]
        finished, completed = _tasks(n)[-3:-1]
        assert finished["lastActivity"] == CHILD_DONE and "endedAt" not in finished
        assert completed["progressSummary"] == CHILD_DONE and "lastActivity" not in completed
        assert isinstance(completed["endedAt"], int) and completed["childSessionKey"] == child
        assert [_step(t) for t in _tasks(r)] == [_step(t) for t in _tasks(n)]

        # The child's tools: session.tool to every subscriber (A too: it started the parent, not the child); agent
        # stream "tool" to nobody; its chat frames to everyone.
        def of_child(client: RawClient, event: str, stream: str | None = None) -> list[Any]:
            return [
                f
                for f in client.backlog
                if f.event == event
                and f.payload.get("sessionKey") == child
                and (stream is None or f.payload.get("stream") == stream)
            ]

        for c in (a, s):
            assert [f.payload["data"]["phase"] for f in of_child(c, "session.tool")] == ["start", "result"]
        start = of_child(s, "session.tool")[0].payload
        assert start["data"]["name"] == "exec" and start["data"]["args"] == EXEC_ARGS and start["spawnedBy"] == parent
        assert start["session"]["spawnedBy"] == parent and start["session"]["spawnDepth"] == 1
        assert of_child(n, "session.tool") == [] and of_child(r, "session.tool") == []
        assert all(of_child(c, "agent", "tool") == [] for c in (a, s, n, r))
        assert all(of_child(c, "chat") for c in (a, s, n, r))
        assert all(f.payload["spawnedBy"] == parent for f in of_child(n, "agent"))
        assert of_child(s, "session.message") and not of_child(n, "session.message")
        assert of_child(s, "sessions.changed") and not of_child(n, "sessions.changed")
        # The parent's own spawn call: A (its sender) gets it as agent "tool", S as session.tool, with the result.
        spawn_results = [
            f.payload["data"]
            for f in a.backlog
            if f.event == "agent"
            and f.payload.get("runId") == run_id
            and f.payload["stream"] == "tool"
            and f.payload["data"]["phase"] == "result"
        ]
        (accepted,) = [d["result"]["details"] for d in spawn_results]
        assert accepted["status"] == "accepted" and accepted["childSessionKey"] == child and accepted["mode"] == "run"
        assert accepted["runId"] == task.run_id

        # The announce run on the parent's key, its input hidden, its reply the parent's.
        announce = f"announce:v1:{child}:{task.run_id}"
        final = [f for f in n.backlog if f.event == "chat" and f.payload["runId"] == announce]
        assert final[-1].payload["state"] == "final" and final[-1].payload["sessionKey"] == parent
        history = (await a.request("chat.history", {"sessionKey": parent})).payload["messages"]
        texts = [str(m.get("content")) for m in history]
        assert not any("A background task completed" in t for t in texts)
        assert any(ANNOUNCED in t for t in texts)

        # tasks.get / tasks.history / the child's row and history.
        got = (await r.request("tasks.get", {"taskId": task.task_id})).payload["task"]
        assert (got["prompt"], got["result"], got["status"]) == (TASK, CHILD_DONE, "completed")
        assert await listed(sessionKey=parent, **live) == []
        assert await listed(sessionKey=parent, status="completed") == [task.task_id]
        steps = (await a.request("tasks.history", {"taskId": task.task_id, "limit": 20})).payload["messages"]
        assert steps[0]["content"].startswith("[Subagent Context]") and "[Subagent Task]" in steps[0]["content"]
        assert [m["role"] for m in steps] == ["user", "assistant", "toolResult", "assistant"]
        assert steps == (await a.request("chat.history", {"sessionKey": child})).payload["messages"]
        row = (await r.request("sessions.describe", {"key": child})).payload["session"]
        assert (row["parentSessionKey"], row["spawnedBy"], row["spawnDepth"], row["label"]) == (
            parent,
            parent,
            1,
            LABEL,
        )
        assert (row["status"], row["subagentRunState"], row["classification"]) == ("done", "historical", "subagent")
        assert (await a.request("sessions.describe", {"key": parent})).payload["session"]["childSessions"] == [child]


@pytest.mark.virtual_seconds(0.3)
async def test_the_announce_starts_0_3_s_after_the_child_on_trios_clock(clock) -> None:
    parent = "agent:main:openwebui-u-p3"
    async with open_simulator(token=TOKEN) as sim:
        clock.autojump_threshold = 0  # no connection: the announce's sleep is the next timer
        run = sim.start_run(parent, "r-parent")
        spawned = run.spawn(TASK, LABEL, steps=[Text(CHILD_DONE), End()])
        run.text(SPAWNED).end()
        await sim.wait_for(lambda: spawned.child.run.state == "ended")
        ended = trio.current_time()
        announce = f"announce:v1:{spawned.child_key}:{spawned.child.run_id}"
        await sim.wait_for(lambda: announce in sim.runs and sim.runs[announce].state == "ended")
        assert trio.current_time() - ended == pytest.approx(0.3)
        hidden = next(m for m in sim.sessions[parent].transcript if m.get("provenance"))
        assert hidden["provenance"]["sourceTool"] == "subagent_announce" and CHILD_DONE in hidden["content"]
        assert sim.tasks.records[spawned.task_id].delivery_status == "delivered"


async def test_compaction_on_the_wire(clock) -> None:
    key, fresh = "agent:main:openwebui-u-c1", "agent:main:openwebui-u-c2"
    async with (
        open_simulator(token=TOKEN, responder=responder) as sim,
        raw_client(sim.url, TOKEN) as a,
        raw_client(sim.url, TOKEN, caps=()) as s,
        raw_client(sim.url, TOKEN, scopes=READ_WRITE) as w,
    ):
        assert (await s.request("sessions.subscribe", {})).ok
        refused = await w.request("sessions.compact", {"key": key})
        assert (refused.error.code, refused.error.message) == ("FORBIDDEN", "missing scope: operator.admin")
        assert refused.error.details == {
            "code": "MISSING_SCOPE",
            "missingScope": "operator.admin",
            "requiredScopes": ["operator.admin"],
        }

        async def compact(**params: Any) -> Any:
            got = await a.request("sessions.compact", {"key": key, **params})
            assert got.ok, got.error
            return got.payload

        assert await compact(key=fresh) == {"ok": True, "key": fresh, "compacted": False, "reason": "no sessionId"}
        await _send(a, key, "hello")
        await sim.wait_for(sim.quiescent)
        assert await compact() == {"ok": False, "key": key, "compacted": False, "reason": TOO_SMALL}
        await _send(a, key, "SLOW please")
        await sim.wait_for(lambda: sim.active_run(key) is not None)
        busy = await a.request("sessions.compact", {"key": key})
        assert (busy.error.code, busy.error.message) == (
            "INVALID_REQUEST",
            f"Session {key} has an active run; retry after it finishes.",
        )
        still = sim.active_run(key)
        assert still is not None and still.active  # the run goes on
        still.end()
        await _send(a, key, "hello again")
        await sim.wait_for(sim.quiescent)
        before = (await a.request("chat.history", {"sessionKey": key})).payload["messages"]
        await _drain(s)
        s.backlog.clear()

        done = await compact()
        assert done["ok"] and done["compacted"] and done["key"] == key
        result = done["result"]
        assert result["tokensAfter"] < result["tokensBefore"] and result["details"] == {
            "readFiles": [],
            "modifiedFiles": [],
        }
        assert result["summary"].startswith("## Latest user request context") and result["firstKeptEntryId"]
        await _drain(s)
        seen = [
            (f.event, f.payload.get("operation"), f.payload.get("phase") or f.payload.get("reason"))
            for f in s.backlog
            if f.event in ("session.operation", "sessions.changed")
        ]
        assert seen == [
            ("session.operation", "compact", "start"),
            ("sessions.changed", None, "message"),
            ("session.operation", "compact", "end"),
            ("sessions.changed", None, "compact"),
        ]
        ops = [f.payload for f in s.backlog if f.event == "session.operation"]
        assert ops[0]["operationId"] == ops[1]["operationId"] and ops[1]["completed"] is True
        changed = [f.payload for f in s.backlog if f.event == "sessions.changed"][-1]
        assert (changed["compacted"], changed["totalTokens"], changed["totalTokensFresh"]) == (
            True,
            result["tokensAfter"],
            True,
        )
        after = (await a.request("chat.history", {"sessionKey": key})).payload["messages"]
        assert after[:-1] == before and after[-1]["role"] == "system"
        assert after[-1]["__openclaw"]["kind"] == "compaction"
        assert after[-1]["__openclaw"]["tokensAfter"] == result["tokensAfter"]
        row = (await a.request("sessions.describe", {"key": key})).payload["session"]
        assert (row["totalTokens"], row["totalTokensFresh"]) == (result["tokensAfter"], True)

        s.backlog.clear()
        assert await compact() == {"ok": False, "key": key, "compacted": False, "reason": ALREADY}
        await _drain(s)
        assert not [f for f in s.backlog if f.event in ("session.operation", "sessions.changed")]
        # A new turn makes it compactable again, and its end puts the row's counters back (none in the simulator).
        await _send(a, key, "one more")
        await sim.wait_for(sim.quiescent)
        assert "totalTokens" not in (await a.request("sessions.describe", {"key": key})).payload["session"]
        trimmed = await compact(maxLines=2)
        assert trimmed == {"ok": True, "key": key, "compacted": True, "kept": 2}
        assert (await a.request("chat.history", {"sessionKey": key})).payload["messages"] == []
        row = (await a.request("sessions.describe", {"key": key})).payload["session"]
        assert row["totalTokensFresh"] is False and "totalTokens" not in row
        unknown = await a.request("sessions.compact", {"key": key, "mode": "x"})
        assert unknown.error.message == "invalid sessions.compact params: at root: unexpected property 'mode'"
