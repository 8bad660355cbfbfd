"""The Gateway's task records of sub-agents (``tasks.list``, ``tasks.get``, the ``task`` event). Pure.

Measured on the real Gateway 2026.9.6 (``docs/measured/status-subagents-2026.9.6.md``): a sub-agent spawned in a
chat is a task whose ``sessionKey`` is the chat's key and whose ``childSessionKey`` is the sub-agent's own session
(``agent:<agent>:subagent:<uuid>``); ``tasks.list {sessionKey}`` (read scope) lists a chat's tasks, and every change
of one comes to every read-scope connection as a ``task`` event ``{action:"upserted", task}`` (or ``"deleted"`` with
``taskId``). Read defensively: a field that is missing or of the wrong type is unknown, never an error; strings are
bounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

MAX_TEXT = 300
MAX_TASKS = 200
#: What ``status`` may say (``TaskSummarySchema``); ``running`` and ``queued`` are a chat's live sub-agents.
LIVE = ("running", "queued")
#: The part of a sub-agent's session key after the agent: how its events are told from a chat's own.
SUBAGENT_MARK = ":subagent:"


def _text(d: Mapping[str, Any], key: str, cap: int = MAX_TEXT) -> str | None:
    value = d.get(key)
    if not isinstance(value, str):
        return None
    clean = " ".join(value.split())
    if not clean:
        return None
    return clean if len(clean) <= cap else clean[: cap - 1] + "…"


def _ms(d: Mapping[str, Any], key: str) -> int | None:
    value = d.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return int(value)


@attrs.frozen
class Task:
    task_id: str
    status: str
    title: str
    session_key: str | None = None
    child_key: str | None = None
    agent_id: str | None = None
    #: ``execution.state`` (queued, running, waiting, finished, unknown) and the tool running now, if any.
    state: str | None = None
    current_tool: str | None = None
    #: When the tool running now began (epoch ms): what tells one run of a tool from the next.
    current_tool_ms: int | None = None
    last_tool: str | None = None
    tool_uses: int | None = None
    #: What it says it is doing (``lastActivity``) or has done (``progressSummary``).
    activity: str | None = None
    summary: str | None = None
    error: str | None = None
    started_ms: int | None = None
    ended_ms: int | None = None
    #: ``tasks.get`` only.
    prompt: str | None = None
    result: str | None = None
    #: ``kind`` / ``runtime``: ``subagent`` for a sub-agent (measured); the Gateway keeps other work as tasks too
    #: (a restart recovery's turn is one, seen on 2026.9.6, titled with its recovery prompt).
    kind: str | None = None
    runtime: str | None = None

    @property
    def live(self) -> bool:
        return self.status in LIVE

    @property
    def is_subagent(self) -> bool:
        """A sub-agent's task: only these are a chat's sub-agents (never a recovery, a cron job, a background tool)."""
        return self.kind == "subagent" or self.runtime == "subagent" or is_subagent_key(self.child_key)


def parse_task(d: Any) -> Task | None:
    """One task summary; None when it has no id (not a record owc can name)."""
    if not isinstance(d, Mapping):
        return None
    task_id = _text(d, "id", 200) or _text(d, "taskId", 200)
    if task_id is None:
        return None
    execution = d.get("execution") if isinstance(d.get("execution"), Mapping) else {}
    current = execution.get("currentTool") if isinstance(execution.get("currentTool"), Mapping) else {}
    return Task(
        task_id=task_id,
        status=_text(d, "status", 40) or "unknown",
        title=_text(d, "title") or _text(d, "label") or "Sub-agent",
        session_key=_text(d, "sessionKey", 500),
        child_key=_text(d, "childSessionKey", 500),
        agent_id=_text(d, "agentId", 100),
        state=_text(execution, "state", 40),
        current_tool=_text(current, "name", 100),
        current_tool_ms=_ms(current, "startedAt"),
        last_tool=_text(d, "lastToolName", 100),
        tool_uses=_ms(d, "toolUseCount"),
        activity=_text(d, "lastActivity"),
        summary=_text(d, "progressSummary") or _text(d, "terminalSummary"),
        error=_text(d, "error"),
        started_ms=_ms(d, "startedAt") or _ms(d, "createdAt"),
        ended_ms=_ms(d, "endedAt"),
        prompt=_text(d, "prompt", 4000),
        result=_text(d, "result", 4000),
        kind=_text(d, "kind", 40),
        runtime=_text(d, "runtime", 40),
    )


def parse_tasks(payload: Any) -> tuple[Task, ...]:
    """``tasks.list``'s answer: the tasks that parse, at most ``MAX_TASKS``."""
    items = payload.get("tasks") if isinstance(payload, Mapping) else None
    if not isinstance(items, list):
        return ()
    out = [t for t in (parse_task(i) for i in items[:MAX_TASKS]) if t is not None]
    return tuple(out)


@attrs.frozen
class TaskChange:
    """A ``task`` event: ``upserted`` (with the record), ``deleted`` (its id only), or another action."""

    action: str
    task_id: str | None
    task: Task | None = None


def parse_task_event(payload: Any) -> TaskChange | None:
    if not isinstance(payload, Mapping):
        return None
    action = _text(payload, "action", 40) or "upserted"
    task = parse_task(payload.get("task"))
    task_id = task.task_id if task is not None else _text(payload, "taskId", 200)
    if task is None and task_id is None:
        return None
    return TaskChange(action, task_id, task)


def is_subagent_key(session_key: str | None) -> bool:
    return isinstance(session_key, str) and SUBAGENT_MARK in session_key
