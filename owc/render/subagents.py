"""A chat's sub-agents as the status view shows them: the list, and one sub-agent's drawer. Pure.

The list holds the running and queued tasks of the chat (``tasks.list`` / the ``task`` events, ``owc.protocol.tasks``):
title, status, what it is doing now (the tool running, else its last activity) and when it started (the page counts
the elapsed time in the browser). The drawer is one sub-agent, read-only: its overview (``tasks.get`` and the child
session's row), its transcript (role and text, from ``chat.history`` of the child's key) and its tools (name,
arguments, result, failed or not), in transcript order. Every string is bounded; the page shows them as text.
"""

from __future__ import annotations

from typing import Any

from owc.protocol import ChatHistory, TextPart, ToolCallPart
from owc.protocol.tasks import Task
from owc.render.items import arguments_json
from owc.render.status_view import context_part

#: Bounds of the drawer: a sub-agent's transcript can be long; the drawer shows its newest part.
MAX_ENTRIES = 200
MAX_ENTRY_TEXT = 4000
MAX_TOOL_TEXT = 2000


def _cut(text: str, cap: int) -> str:
    return text if len(text) <= cap else text[: cap - 1] + "…"


def doing(task: Task) -> str | None:
    """What it is doing now, in a reader's words."""
    if task.current_tool:
        return f"Running {task.current_tool}"
    if task.live:
        return task.activity or (f"Last used {task.last_tool}" if task.last_tool else None)
    return task.error or task.summary or task.activity


def entry(task: Task) -> dict[str, Any]:
    return {
        "id": task.task_id,
        "title": task.title,
        "status": task.status,
        "state": task.state,
        "doing": doing(task),
        "agent": task.agent_id,
        "toolUses": task.tool_uses,
        "startedAtMs": task.started_ms,
        "endedAtMs": task.ended_ms,
    }


def listed(tasks: list[Task] | tuple[Task, ...]) -> list[dict[str, Any]]:
    """The running and queued ones, oldest first (the order they were spawned in)."""
    live = [t for t in tasks if t.live and t.is_subagent]
    live.sort(key=lambda t: (t.started_ms or 0, t.task_id))
    return [entry(t) for t in live]


def transcript(history: ChatHistory | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The child's transcript as (messages, tools): each message its role and text; each tool call its name,
    arguments, result and whether it failed, the result matched by call id."""
    if history is None:
        return [], []
    messages: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    by_call: dict[str, dict[str, Any]] = {}
    for m in history.messages:
        if m.role == "toolResult":
            tool = by_call.get(m.tool_call_id or "")
            if tool is not None:
                tool["result"] = _cut(m.text, MAX_TOOL_TEXT)
                tool["error"] = m.is_error
            continue
        text = "".join(p.text for p in m.parts if isinstance(p, TextPart)).strip()
        if text and m.role in ("user", "assistant", "system"):
            messages.append({"role": m.role, "text": _cut(text, MAX_ENTRY_TEXT)})
        for part in m.parts:
            if isinstance(part, ToolCallPart):
                tool = {
                    "id": part.id,
                    "name": part.name,
                    "arguments": _cut(arguments_json(part.arguments), MAX_TOOL_TEXT),
                    "result": None,
                    "error": False,
                }
                by_call[part.id] = tool
                tools.append(tool)
    return messages[-MAX_ENTRIES:], tools[-MAX_ENTRIES:]


def drawer(task: Task, describe: Any, history: ChatHistory | None) -> dict[str, Any]:
    """One sub-agent, read-only. ``describe`` / ``history``: the child session's reads (None: failed or none)."""
    messages, tools = transcript(history)
    return {
        **entry(task),
        "summary": task.summary,
        "error": task.error,
        "prompt": task.prompt,
        "result": task.result,
        "context": context_part(describe),
        "messages": messages,
        "tools": tools,
    }


#: The ends of a sub-agent in a reader's words.
ENDED = {
    "completed": "finished",
    "failed": "failed",
    "timed_out": "timed out",
    "cancelled": "was cancelled",
    "lost": "was lost",
}
#: The key of a sub-agent's status line in a message's ``statusHistory``: the same line is said once, whichever
#: process says it.
LINE_MARK = "openclaw_subagent"


def line(task: Task) -> dict[str, Any] | None:
    """The status line the chat's current message gets about its sub-agent, when there is news: queued, working,
    each tool it starts, its end. ``None``: nothing to say (a state owc does not name)."""
    if not task.is_subagent:
        return None  # a recovery's turn, a cron job: their own runs say what they do
    name = f"Sub-agent {task.title}"
    if task.status == "queued":
        text, step = f"{name} is queued", "queued"
    elif task.status == "running" and task.current_tool:
        text, step = (
            f"{name}: running {task.current_tool}",
            f"tool:{task.current_tool_ms or task.tool_uses or 0}:{task.current_tool}",
        )
    elif task.status == "running":
        text, step = f"{name} is working", "running"
    elif task.status in ENDED:
        why = task.error if task.status != "completed" and task.error else None
        text, step = f"{name} {ENDED[task.status]}" + (f": {why}" if why else ""), "end"
    else:
        return None
    return {"description": text, "done": True, "action": LINE_MARK, LINE_MARK: f"{task.task_id}:{step}"}
