"""The status view (issue 29): the Gateway's task records and rows as the status Action shows them (shapes measured
on the real 2026.9.6, ``docs/measured/status-subagents-2026.9.6.md``), and the status desk's reads, watchers and
Compact, against a ``request`` that answers as the real Gateway did (``tests/test_realgw_status.py`` runs the real
one)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from owc.gateway import RequestError, SessionClosed
from owc.protocol import parse_chat_history
from owc.protocol.errors import ErrorShape
from owc.protocol.events import OtherEvent
from owc.protocol.tasks import parse_task, parse_task_event, parse_tasks
from owc.render import status_view, subagents
from owc.runs.status import BUSY_LINE, NO_ADMIN_LINE, NO_SESSION_LINE, StatusDesk

CHAT = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
KEY = f"agent:main:openwebui-u1-{CHAT}"
CHILD = "agent:main:subagent:dfc31e3b-8aa1-4991-85cb-fb1dc18cba39"
#: ``tasks.get`` as measured (trimmed ids).
TASK = {
    "id": "2870d602",
    "taskId": "2870d602",
    "kind": "subagent",
    "runtime": "subagent",
    "status": "running",
    "execution": {"state": "running", "currentTool": {"name": "exec", "startedAt": 1796231001000}},
    "title": "probe-child",
    "agentId": "main",
    "sessionKey": KEY,
    "childSessionKey": CHILD,
    "ownerKey": KEY,
    "createdAt": 1796230998416,
    "startedAt": 1796230999839,
    "toolUseCount": 1,
    "lastToolName": "exec",
    "prompt": "CHILD:work List the workspace",
}
ROW = {
    "key": KEY,
    "modelProvider": "fake",
    "model": "fake-model",
    "contextTokens": 128000,
    "totalTokens": 1050,
    "totalTokensFresh": True,
    "status": "done",
    "goal": {"status": "active", "objective": "Ship  the <b>thing</b>", "tokensUsed": 500, "tokenBudget": 10000},
}
USAGE = {
    "updatedAt": 1796231000000,
    "providers": [
        {"provider": "fake", "windows": [{"label": "5h", "usedPercent": 24, "resetAt": 1796232320000}]},
        {"provider": "other", "windows": [{"label": "week", "usedPercent": 99}]},
    ],
}


def test_a_task_record_reads_what_the_view_needs() -> None:
    task = parse_task(TASK)
    assert task is not None
    assert (task.task_id, task.status, task.title, task.session_key, task.child_key) == (
        "2870d602",
        "running",
        "probe-child",
        KEY,
        CHILD,
    )
    assert (task.current_tool, task.tool_uses, task.started_ms, task.live) == ("exec", 1, 1796230999839, True)
    assert subagents.doing(task) == "Running exec"


@pytest.mark.parametrize(
    "raw",
    [None, [], "x", {}, {"id": 7}, {"title": "no id"}],
)
def test_what_is_not_a_task_is_skipped(raw: Any) -> None:
    assert parse_task(raw) is None


def test_a_list_keeps_what_parses_and_the_view_lists_live_ones_oldest_first() -> None:
    done = {**TASK, "id": "t0", "status": "completed", "startedAt": 1}
    older = {**TASK, "id": "t1", "startedAt": 10, "title": "x" * 500, "execution": {"state": "queued"}}
    tasks = parse_tasks({"tasks": [TASK, "junk", done, older]})
    assert [t.task_id for t in tasks] == ["2870d602", "t0", "t1"]
    listed = subagents.listed(tasks)
    assert [e["id"] for e in listed] == ["t1", "2870d602"]
    other = parse_tasks({"tasks": [{**TASK, "id": "r1", "kind": "recovery", "runtime": "x", "childSessionKey": None}]})
    assert subagents.listed(other) == []  # only sub-agents are a chat's sub-agents
    assert len(listed[0]["title"]) == 300 and listed[0]["title"].endswith("…")
    assert parse_tasks({"tasks": "x"}) == () and parse_tasks(None) == ()


def test_task_events() -> None:
    change = parse_task_event({"action": "upserted", "task": TASK})
    assert change is not None and change.task is not None and change.task_id == "2870d602"
    gone = parse_task_event({"action": "deleted", "taskId": "t9"})
    assert gone is not None and (gone.action, gone.task_id, gone.task) == ("deleted", "t9", None)
    assert parse_task_event({"action": "deleted"}) is None


def test_the_view_from_each_read_and_none_where_a_read_failed() -> None:
    view = status_view.view({"session": ROW}, USAGE, [])
    assert view["context"] == {
        "provider": "fake",
        "model": "fake-model",
        "used": 1050,
        "window": 128000,
        "percent": 0.8,
        "running": False,
        "compactions": None,
    }
    assert view["goal"] == {"objective": "Ship the <b>thing</b>", "tokensUsed": 500, "tokenBudget": 10000}
    assert view["limits"] == {
        "windows": [{"label": "5h", "usedPercent": 24.0, "resetAtMs": 1796232320000}],
        "summary": None,
        "atMs": 1796231000000,
    }
    assert view["subagents"] == []
    failed = status_view.view(None, None, None)
    assert failed == {"context": None, "goal": None, "limits": None, "subagents": None}
    # Not fresh (after a compaction, until the next run): the count is unknown, not zero.
    stale = status_view.view({"session": {**ROW, "totalTokensFresh": False}}, {"providers": []}, [])
    assert stale["context"]["used"] is None and stale["context"]["percent"] is None
    assert stale["limits"] == {"windows": [], "summary": None, "atMs": None}


def test_the_drawer_shows_the_transcript_and_the_tools_with_their_results() -> None:
    history = parse_chat_history(
        {
            "sessionKey": CHILD,
            "messages": [
                {"role": "user", "content": "[Subagent Task] list"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Looking."},
                        {"type": "toolCall", "id": "c1", "name": "exec", "arguments": {"command": "ls"}},
                    ],
                },
                {
                    "role": "toolResult",
                    "toolCallId": "c1",
                    "toolName": "exec",
                    "content": [{"type": "text", "text": "a\nb"}],
                },
                {
                    "role": "assistant",
                    "content": [{"type": "toolCall", "id": "c2", "name": "read", "arguments": {"path": "x"}}],
                },
                {
                    "role": "toolResult",
                    "toolCallId": "c2",
                    "isError": True,
                    "content": [{"type": "text", "text": "ENOENT"}],
                },
                {"role": "assistant", "content": [{"type": "text", "text": "CHILD DONE"}]},
            ],
        }
    )
    task = parse_task(TASK)
    assert task is not None
    view = subagents.drawer(task, {"session": {**ROW, "key": CHILD}}, history)
    assert [(m["role"], m["text"]) for m in view["messages"]] == [
        ("user", "[Subagent Task] list"),
        ("assistant", "Looking."),
        ("assistant", "CHILD DONE"),
    ]
    assert [(t["name"], t["arguments"], t["result"], t["error"]) for t in view["tools"]] == [
        ("exec", '{"command":"ls"}', "a\nb", False),
        ("read", '{"path":"x"}', "ENOENT", True),
    ]
    assert view["prompt"] == "CHILD:work List the workspace" and view["context"]["model"] == "fake-model"


# ---------------------------------------------------------------------------------------------- the desk


class Gateway:
    """Answers the desk's reads as the real Gateway did; records the calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.answers: dict[str, Any] = {
            "sessions.describe": {"session": ROW},
            "usage.status": USAGE,
            "tasks.list": {"tasks": [TASK]},
            "tasks.get": TASK,
            "chat.history": {"sessionKey": CHILD, "messages": []},
            "sessions.compact": {
                "ok": True,
                "key": KEY,
                "compacted": True,
                "result": {"tokensBefore": 1050, "tokensAfter": 732},
            },
        }

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.calls.append((method, params))
        answer = self.answers[method]
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_the_snapshot_reads_the_chats_session_and_its_live_subagents() -> None:
    gateway = Gateway()
    desk = StatusDesk(request=gateway.request)
    view = await desk.snapshot(KEY)
    assert [e["id"] for e in view["subagents"]] == ["2870d602"]
    assert sorted(m for m, _ in gateway.calls) == ["sessions.describe", "tasks.list", "usage.status"]
    assert dict(gateway.calls)["tasks.list"] == {"sessionKey": KEY, "status": ["running", "queued"], "limit": 50}
    gateway.answers["usage.status"] = SessionClosed("usage.status")
    assert (await desk.snapshot(KEY))["limits"] is None  # that part alone says it could not be read


async def test_a_drawer_is_only_of_a_task_of_this_chat() -> None:
    gateway = Gateway()
    desk = StatusDesk(request=gateway.request)
    view = await desk.drawer(KEY, "2870d602")
    assert view is not None and view["childKey"] == CHILD and view["title"] == "probe-child"
    assert ("chat.history", {"sessionKey": CHILD, "limit": 100, "maxChars": 4000}) in gateway.calls
    assert await desk.drawer("agent:main:openwebui-u2-c2", "2870d602") is None  # another chat's sub-agent
    gateway.answers["tasks.get"] = RequestError("tasks.get", ErrorShape("INVALID_REQUEST", "task not found: x"))
    assert await desk.drawer(KEY, "x") is None


@pytest.mark.parametrize(
    ("answer", "ok", "line", "code"),
    [
        (
            {"ok": True, "compacted": True, "result": {"tokensBefore": 1050, "tokensAfter": 732}},
            True,
            "Compacted.",
            200,
        ),
        ({"ok": True, "compacted": False, "reason": "no sessionId"}, False, NO_SESSION_LINE, 409),
        (
            RequestError(
                "sessions.compact",
                ErrorShape("INVALID_REQUEST", f"Session {KEY} has an active run; retry after it finishes."),
            ),
            False,
            BUSY_LINE,
            409,
        ),
        (
            RequestError("sessions.compact", ErrorShape("FORBIDDEN", "missing scope: operator.admin")),
            False,
            NO_ADMIN_LINE,
            403,
        ),
        (
            SessionClosed("sessions.compact"),
            False,
            "owc is not connected to the Gateway right now: try again once it is.",
            503,
        ),
    ],
)
async def test_compact_says_what_the_gateway_did(answer: Any, ok: bool, line: str, code: int) -> None:
    gateway = Gateway()
    gateway.answers["sessions.compact"] = answer
    outcome = await StatusDesk(request=gateway.request).compact(KEY)
    assert (outcome.ok, outcome.line, outcome.code) == (ok, line, code)
    if ok:
        assert (outcome.before, outcome.after) == (1050, 732)


async def test_watchers_are_poked_by_the_events_about_their_chat_coalesced(autojump_clock: Any) -> None:
    desk = StatusDesk()
    async with desk.watching(KEY) as chat, desk.watching(CHILD) as drawer:
        assert desk.open_watch
        # A task event names the chat; the desk learns the child's parent from it.
        desk.on_event(OtherEvent(kind="task", raw={"action": "upserted", "task": TASK}))
        with trio.move_on_after(1) as waited:
            await chat.changed()
        assert not waited.cancelled_caught
        # Two events about the child (its tools, to every subscribed connection) poke both, and one read covers both.
        from owc.protocol import SessionsChanged

        desk.on_event(SessionsChanged(session_key=CHILD))
        desk.on_event(SessionsChanged(session_key=CHILD))
        await chat.changed()
        await drawer.changed()
        with trio.move_on_after(1) as waited:
            await chat.changed()
        assert waited.cancelled_caught  # coalesced: nothing owed any more
        # Another chat's events poke nobody here.
        desk.on_event(SessionsChanged(session_key="agent:main:openwebui-u2-c2"))
        with trio.move_on_after(1) as waited:
            await chat.changed()
        assert waited.cancelled_caught
    assert desk._watchers == {}  # closed with the block


# ---------------------------------------------------------------------------------------------- the chat's lines


@pytest.mark.parametrize(
    ("fields", "text", "step"),
    [
        ({"status": "queued", "execution": {"state": "queued"}}, "Sub-agent probe-child is queued", "queued"),
        ({"execution": {"state": "running"}}, "Sub-agent probe-child is working", "running"),
        ({}, "Sub-agent probe-child: running exec", "tool:1796231001000:exec"),
        ({"status": "completed", "execution": {"state": "finished"}}, "Sub-agent probe-child finished", "end"),
        ({"status": "failed", "error": "boom", "execution": {}}, "Sub-agent probe-child failed: boom", "end"),
        ({"status": "timed_out", "execution": {}}, "Sub-agent probe-child timed out", "end"),
        ({"status": "blocked", "execution": {}}, None, None),
        # Not a sub-agent (seen on 2026.9.6: a restart recovery's turn is a task too, titled with its prompt).
        ({"kind": "recovery", "runtime": "embedded", "childSessionKey": None}, None, None),
    ],
)
def test_the_line_a_chat_gets_about_its_subagent(fields: dict[str, Any], text: str | None, step: str | None) -> None:
    task = parse_task({**TASK, **fields})
    assert task is not None
    said = subagents.line(task)
    if text is None:
        assert said is None
        return
    assert said == {
        "description": text,
        "done": True,
        "action": "openclaw_subagent",
        "openclaw_subagent": f"2870d602:{step}",
    }


async def test_lines_go_to_the_chats_tail_once_whichever_process_says_them(tmp_path: Any) -> None:
    from owc.emit import RecordingEmitter
    from owc.store import open_store

    async with open_store(f"sqlite:///{tmp_path / 'db.sqlite'}", create=True) as store:
        await store.create_chat(CHAT, "u1")
        await store.add_turn(CHAT, "um1", "m1", text="hi")
        emitter = RecordingEmitter()
        desks = [StatusDesk(store=store, emitter=emitter), StatusDesk(store=store, emitter=emitter)]
        async with trio.open_nursery() as nursery:
            for desk in desks:
                await nursery.start(desk.run)
            running = OtherEvent(kind="task", raw={"action": "upserted", "task": TASK})
            for desk in desks:  # two workers' connections get the same event
                desk.on_event(running)
                desk.on_event(running)  # and a repeat of it
            await emitter.until(lambda: len(emitter.events) >= 1)
            await store.add_turn(CHAT, "um2", "m2", text="more")  # the tail moves on
            done = OtherEvent(kind="task", raw={"action": "upserted", "task": {**TASK, "status": "completed"}})
            for desk in desks:
                desk.on_event(done)
                desk.on_event(running)  # late: said already, in m1
            await emitter.until(lambda: len(emitter.events) >= 2)
            nursery.cancel_scope.cancel()
        chat = await store.read_chat(CHAT)
    lines = {
        mid: [e["description"] for e in m.get("statusHistory") or []]
        for mid, m in chat["history"]["messages"].items()
        if m.get("role") == "assistant"
    }
    assert lines == {"m1": ["Sub-agent probe-child: running exec"], "m2": ["Sub-agent probe-child finished"]}
    assert [(e.message_id, e.event["data"]["description"]) for e in emitter.events] == [
        ("m1", "Sub-agent probe-child: running exec"),
        ("m2", "Sub-agent probe-child finished"),
    ]
