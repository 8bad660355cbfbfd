"""The simulated Gateway's state: agent sessions, runs and transcripts, and the payloads built from them. No I/O.

Shapes follow the real Gateway 2026.9.6 (``shared/reference/openclaw``): session rows (``sessions.list``),
``sessions.changed`` snapshots (row fields flattened plus a nested ``session`` row), ``chat`` / ``agent``
payloads with the run's own ``seq``, and ``chat.history`` messages with their exact identities
(``<runId>:user``, ``__openclaw.runId``, ``toolCall`` parts, ``toolResult`` messages, aborted partials
``<runId>:assistant`` with ``openclawAbort``, restart-recovery provenance).

The real payloads carry ~80 more row fields that owc never reads; the simulator leaves them out (NOTES.md,
"Simulator fidelity").
"""

from __future__ import annotations

import uuid
from typing import Any

import attrs

AGENT_ID = "main"
MODEL = "sim-model"
PROVIDER = "sim"

#: The text the CLI runtime's child leaves in ``lastRunError`` when a container stop SIGTERMs it (seed 000 2.7).
CONTAINER_STOP_ERROR = "Claude Code process exited with code 143"
RECOVERY_PROVENANCE = {"kind": "internal_system", "sourceTool": "main_session_restart_recovery"}
#: What the heartbeat runner stores as a heartbeat turn's user message (measured on 2026.9.6: the real
#: prompt is replaced by this placeholder; ``INTERNAL_WAKE_TRANSCRIPT_PROMPTS`` in its source). Cron and
#: exec wakes go through the same runner with their own placeholders.
HEARTBEAT_PROMPTS = {
    "heartbeat": "[OpenClaw heartbeat poll]",
    "cron": "[OpenClaw cron wake]",
    "exec": "[OpenClaw exec completion]",
    "event": "[OpenClaw session event]",
}


#: Assistant texts that are only an acknowledgement: ``chat.history`` and ``session.message`` hide them.
ACKS = ("HEARTBEAT_OK", "NO_REPLY")
#: What the heartbeat runner's ``heartbeat`` event says when a reply had no route to a channel (2026.9.6:
#: ``NO_ROUTE_MESSAGE``, ``system-event-ownership-*.mjs:7``; measured on a wake of an Open WebUI chat's key).
HEARTBEAT_NO_ROUTE = (
    "Heartbeat has no delivery route yet. Message your bot once, or set agents.defaults.heartbeat.target."
)


def _thinking(*levels: str) -> list[dict[str, str]]:
    return [{"id": level, "label": level} for level in levels]


#: The simulator's model catalog, as ``models.list`` answers it (2026.9.6, measured: ``ModelChoice`` rows, the
#: agent's default tagged ``"default"``; see ``owc.owui.models.GatewayModel``). Ids with a slash and a colon, as
#: OpenRouter and Ollama models have. It is also the agent's allowlist (``agents.defaults.models``), so each is
#: tagged ``"configured"`` as measured then, and ``sessions.patch`` refuses any other model with
#: ``model not allowed: <key>`` as the real Gateway does.
MODEL_CATALOG: tuple[dict[str, Any], ...] = (
    {
        "id": MODEL,
        "name": "Sim Model",
        "provider": PROVIDER,
        "contextWindow": 128000,
        "reasoning": False,
        "tags": ["default", "configured"],
        "thinkingLevels": _thinking("off"),
        "thinkingDefault": "off",
        "available": True,
    },
    {
        "id": "qwen3:8b",
        "name": "Qwen3 8B",
        "provider": "ollama",
        "contextWindow": 32768,
        "reasoning": False,
        "tags": ["configured"],
        "thinkingLevels": _thinking("off"),
        "thinkingDefault": "off",
        "available": True,
    },
    {
        "id": "z-ai/glm-5.2",
        "name": "GLM 5.2",
        "provider": "openrouter",
        "alias": "glm",
        "contextWindow": 200000,
        "reasoning": True,
        "tags": ["configured"],
        "thinkingLevels": _thinking("off", "minimal", "low", "medium", "high"),
        "thinkingDefault": "medium",
        "available": True,
    },
)


def agent_id_of(key: str) -> str:
    parts = key.split(":")
    return parts[1] if len(parts) > 2 and parts[0] == "agent" and parts[1] else AGENT_ID


@attrs.define
class Run:
    """One agent run. ``owner`` is the connection that sent its ``chat.send`` (it alone gets ``agent`` tool
    events, if it declared ``tool-events``); runs started by other clients have no owner among ours."""

    run_id: str
    key: str
    owner: str | None = None
    #: The device of the connection that sent it, if that connection proved one (``ownerDeviceId``).
    owner_device: str | None = None
    heartbeat: bool = False
    origin: str = "chat.send"
    hide_ids: bool = False
    cli_runtime: bool = False  # a CLI-backend runtime (claude-cli): ``cli-assistant:<R>`` ids
    run_seq: int = 0
    text: str = ""  # the run's visible text so far (the cumulative ``chat`` message)
    segment: int = 0  # assistant items so far (each text segment between tool calls is one)
    parts: list[dict[str, Any]] = attrs.field(factory=list)  # the assistant message being built
    open_tools: dict[str, str] = attrs.field(factory=dict)  # toolCallId -> name, started without a result
    state: str = "active"  # active | ended
    terminal: str | None = None  # the terminal it ended with (final/error/aborted); None if cut without one
    #: A boot's restart recovery: the run it recovers (the simulator's ground truth, for the tests' oracle).
    recovers: str | None = None
    #: The error text it ended with (its ``error`` terminal's ``errorMessage``, as a live client gets it).
    error: str | None = None
    #: The restart mode that cut it (``restart``, ``stop``, ``container``, ``crash``): it was active when the
    #: Gateway went down (ground truth for the oracle: the cut-off note belongs only to such a run).
    cut_by: str | None = None
    #: What it streamed, per receiving client (a connection's ``instanceId``, else its id): the cumulative chat
    #: text of the last ``chat`` event that reached it, and when (Trio's clock). The transcript may keep less (a
    #: cut loses the partial); this is what a client was shown.
    streamed: dict[str, str] = attrs.field(factory=dict)
    streamed_at: dict[str, float] = attrs.field(factory=dict)
    #: The files its answer names (``script.Media`` steps), delivered after its final (``owc.sim.media``).
    media: list[Any] = attrs.field(factory=list)
    #: A sub-agent's run: its parent's session key, which its ``agent`` frames name as ``spawnedBy`` (measured).
    spawned_by: str | None = None

    def next_seq(self) -> int:
        self.run_seq += 1
        return self.run_seq


@attrs.define
class AgentSession:
    """An agent session (a conversation under a session key such as ``agent:main:main``): its row, its
    active run and queue, its transcript. Not a WebSocket connection: that is ``delivery.SimConn``."""

    key: str
    session_id: str = attrs.field(factory=lambda: str(uuid.uuid4()))
    status: str | None = None
    active: Run | None = None
    queued: list[Run] = attrs.field(factory=list)
    aborted_last_run: bool = False
    last_run_id: str | None = None
    last_run_error: str | None = None
    created_at: int = 0
    updated_at: int = 0
    started_at: int | None = None
    ended_at: int | None = None
    transcript: list[dict[str, Any]] = attrs.field(factory=list)
    transcript_seq: int = 0
    #: The model ``sessions.patch`` pinned the session to (provider, model id); None: the agent's default.
    model_override: tuple[str, str] | None = None
    #: A sub-agent's session (``owc.sim.tasks``): the row fields its spawn gave it (``spawnedBy``, ``parentSessionKey``,
    #: ``spawnDepth``, ``label`` ...); None for any other session.
    spawn: dict[str, Any] | None = None
    #: The sub-agents spawned from this session (their keys): the row's ``childSessions`` (measured).
    children: list[str] = attrs.field(factory=list)
    #: The context in use as the row says it after a compaction (``owc.sim.compaction``): ``totalTokens`` (None:
    #: absent) and ``totalTokensFresh`` (None: absent). The simulator's runs report no usage, so both are absent
    #: until a compaction, and again after the next run.
    total_tokens: int | None = None
    tokens_fresh: bool | None = None
    #: The stored seq of the last compaction entry (None: never compacted): what "Already compacted" is judged by.
    compacted_seq: int | None = None

    @property
    def agent_id(self) -> str:
        return agent_id_of(self.key)

    def row(self, *, event: bool = False) -> dict[str, Any]:
        """The session row as ``sessions.list`` shows it. ``lastRunError`` is omitted when absent in list
        rows and ``null`` in event snapshots, as the real Gateway does."""
        active = self.active
        row: dict[str, Any] = {
            "key": self.key,
            "kind": "direct",
            "agentId": self.agent_id,
            "sessionId": self.session_id,
            "updatedAt": self.updated_at,
            "status": "running" if active else self.status,
            "startedAt": self.started_at,
            "endedAt": self.ended_at,
            "abortedLastRun": self.aborted_last_run,
            "lastRunId": self.last_run_id,
            "hasActiveRun": active is not None,
            "activeRunIds": [] if active is None else (None if active.hide_ids else [active.run_id]),
            "model": self.model_override[1] if self.model_override else MODEL,
            "modelProvider": self.model_override[0] if self.model_override else PROVIDER,
        }
        if self.status is None and active is None:
            del row["status"]
        if self.spawn is not None:
            row.update(self.spawn)
            row["subagentRunState"] = "running" if active is not None else "historical"
            row["hasActiveSubagentRun"] = active is not None
        if self.children:
            row["childSessions"] = list(self.children)
        if self.total_tokens is not None:
            row["totalTokens"] = self.total_tokens
        if self.tokens_fresh is not None:
            row["totalTokensFresh"] = self.tokens_fresh
        if self.last_run_error is not None or event:
            row["lastRunError"] = self.last_run_error
        return row

    def append(self, message: dict[str, Any], now_ms: int) -> dict[str, Any]:
        self.transcript_seq += 1
        meta = message.setdefault("__openclaw", {})
        meta.setdefault("id", str(uuid.uuid4()))
        meta["recordTimestampMs"] = now_ms
        meta["seq"] = self.transcript_seq
        message.setdefault("timestamp", now_ms)
        self.transcript.append(message)
        return message


def user_message(run_id: str, text: str, now_ms: int, provenance: dict[str, Any] | None = None) -> dict[str, Any]:
    key = f"{run_id}:user"
    msg: dict[str, Any] = {
        "role": "user",
        "content": text,
        "timestamp": now_ms,
        "idempotencyKey": key,
        "__openclaw": {"idempotencyKey": key, "senderIsOwner": True},
    }
    if provenance is not None:
        msg["provenance"] = dict(provenance)  # top level, not under __openclaw (measured on 2026.9.6)
    return msg


def thinking_rejected_message(run_id: str, text: str, now_ms: int) -> dict[str, Any]:
    """The reply the Gateway writes itself for a ``chat.send`` whose ``thinking`` level the session's model does not
    support (2026.9.6, measured, ``docs/measured/usage-thinking-2026.9.6.md`` 3.2): the model is not called."""
    zero = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "timestamp": now_ms,
        "stopReason": "stop",
        "usage": {**zero, "totalTokens": 0, "cost": {**zero, "total": 0}},
        "api": "openai-responses",
        "provider": "openclaw",
        "model": "gateway-injected",
        "idempotencyKey": run_id,
    }


def heartbeat_user_message(source: str, now_ms: int) -> dict[str, Any]:
    """A heartbeat-runner turn's stored user message, as 2026.9.6 stores it (read in its SQLite
    ``transcript_events``): the placeholder prompt, internal provenance, ``senderIsOwner: false``, and an
    idempotency key ``<fresh id>:user``. The id is no run's (the run has an id of its own), and ``chat.history``
    and ``session.message`` never show this message, so no client reads it as a run's user turn."""
    key = f"{uuid.uuid4()}:user"
    return {
        "role": "user",
        "content": HEARTBEAT_PROMPTS.get(source, HEARTBEAT_PROMPTS["event"]),
        "timestamp": now_ms,
        "provenance": {"kind": "internal_system", "sourceTool": source},
        "idempotencyKey": key,
        # As for a chat.send turn, the key is also under ``__openclaw`` where chat.history shows a message.
        "__openclaw": {"idempotencyKey": key, "senderIsOwner": False},
    }


def inbound_user_message(origin: str, now_ms: int) -> dict[str, Any]:
    """The user message a run another client starts begins with (a ``sessions_send``, a sub-agent's announce, a
    scheduled job): its own idempotency key, never ``<runId>:user`` (only ``chat.send`` keys it by run). A
    sub-agent's announce is an inter-session message ``chat.history`` hides; the others are shown."""
    key = str(uuid.uuid4())
    message: dict[str, Any] = {
        "role": "user",
        "timestamp": now_ms,
        "idempotencyKey": key,
        "__openclaw": {"idempotencyKey": key},
    }
    if origin in ("subagent_announce", "sessions_send"):
        message["content"] = f"[Inter-session message] sourceTool={origin}"
        message["provenance"] = {"kind": "inter_session", "sourceTool": origin}
    else:
        message["content"] = f"[{origin}] scheduled turn"
    return message


def plain_text(message: dict[str, Any]) -> str | None:
    """A message's text if it holds only text (no tool call, no other part), else None."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or any(not isinstance(p, dict) or p.get("type") != "text" for p in content):
        return None
    return "".join(str(p.get("text") or "") for p in content)


def is_heartbeat_prompt(message: dict[str, Any]) -> bool:
    """The heartbeat runner's stored prompt (``isHeartbeatUserMessage``, ``heartbeat-filter-*.mjs:144-157``)."""
    text = plain_text(message) if message.get("role") == "user" else None
    return text is not None and text.strip() in HEARTBEAT_PROMPTS.values()


def is_ack(message: dict[str, Any]) -> bool:
    """An assistant message that is only an acknowledgement (``isHeartbeatOkResponse``, same file :159-165)."""
    text = plain_text(message) if message.get("role") == "assistant" else None
    return text is not None and text.strip().upper() in ACKS


def is_announce(message: dict[str, Any]) -> bool:
    """A sub-agent's announce: an inter-session user message (``shouldHideProjectedHistoryMessage``)."""
    prov = message.get("provenance")
    return (
        message.get("role") == "user"
        and isinstance(prov, dict)
        and prov.get("kind") == "inter_session"
        and prov.get("sourceTool") in ("subagent_announce", "subagent_settle")
    )


def hidden(message: dict[str, Any]) -> bool:
    """A message the Gateway's display projection leaves out, whether it pages ``chat.history`` or pushes one
    ``session.message`` (``chat-display-projection.history-*.mjs:229-238``)."""
    return is_heartbeat_prompt(message) or is_ack(message) or is_announce(message)


def heartbeat_event(text: str, now_ms: int, duration_ms: int) -> dict[str, Any]:
    """The global ``heartbeat`` event the runner sends when a heartbeat run ends (2026.9.6, measured on a wake
    of an Open WebUI chat's key): a reply that shows text had no route to a channel (``skipped``, its first 200
    characters as ``preview``; ``heartbeat-runner-run-*.mjs:927-938``); a bare acknowledgement is
    ``ok-empty`` (same file :339-342, 796-800). It names no run and no session."""
    if text.strip() and text.strip().upper() not in ACKS:
        return {
            "ts": now_ms,
            "status": "skipped",
            "preview": text.strip()[:200],
            "reason": "no-route",
            "hasMedia": False,
            "durationMs": duration_ms,
            "message": HEARTBEAT_NO_ROUTE,
        }
    return {
        "ts": now_ms,
        "status": "ok-empty",
        "reason": "wake",
        "indicatorType": "ok",
        "silent": True,
        "durationMs": duration_ms,
    }


def assistant_message(run: Run, parts: list[dict[str, Any]], now_ms: int, stop_reason: str) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": parts,
        "api": "openai-completions",
        "provider": PROVIDER,
        "model": MODEL,
        "stopReason": stop_reason,
        "timestamp": now_ms,
    }
    if run.cli_runtime:
        # CLI-backend runtimes key the closing message by run: ``cli-assistant:<runId>`` (cli-runner).
        key = f"cli-assistant:{run.run_id}"
        message["idempotencyKey"] = key
        message["__openclaw"] = {"idempotencyKey": key}
    else:
        message["__openclaw"] = {"runId": run.run_id}
    return message


def aborted_partial(run: Run, text: str, now_ms: int, origin: str) -> dict[str, Any]:
    """What a Stop leaves in the transcript: the run's whole chat buffer (``text``), keyed ``<R>:assistant``."""
    key = f"{run.run_id}:assistant"
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "openai-responses",
        "provider": "openclaw",
        "model": "gateway-injected",
        "stopReason": "stop",  # live: an aborted partial says "stop"; openclawAbort is what marks it
        "timestamp": now_ms,
        "idempotencyKey": key,
        "openclawAbort": {"aborted": True, "origin": origin, "runId": run.run_id},
        "__openclaw": {"runId": run.run_id, "idempotencyKey": key},  # both, as measured
    }


def tool_result_message(run: Run, call_id: str, name: str, result: Any, is_error: bool, now_ms: int) -> dict[str, Any]:
    text = result if isinstance(result, str) else ("" if result is None else str(result))
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": is_error,
        "timestamp": now_ms,
        "__openclaw": {"runId": run.run_id},
    }


def chat_payload(run: Run, state: str, **fields: Any) -> dict[str, Any]:
    payload = {
        "runId": run.run_id,
        "sessionKey": run.key,
        "agentId": agent_id_of(run.key),
        "seq": run.next_seq(),
        "state": state,
    }
    payload.update({k: v for k, v in fields.items() if v is not None})
    return payload


def text_message(text: str, now_ms: int) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": now_ms}


def agent_payload(
    run: Run, stream: str, data: dict[str, Any], now_ms: int, session_id: str | None = None
) -> dict[str, Any]:
    payload: dict[str, Any] = {"runId": run.run_id, "stream": stream, "data": data, "sessionKey": run.key}
    if session_id is not None:
        payload["sessionId"] = session_id
    payload.update({"agentId": agent_id_of(run.key), "seq": run.next_seq(), "ts": now_ms, "isHeartbeat": run.heartbeat})
    if run.spawned_by is not None:
        payload["spawnedBy"] = run.spawned_by  # a sub-agent's frames name its parent at the top level (measured)
    return payload


def sessions_changed_payload(
    session: AgentSession,
    now_ms: int,
    *,
    phase: str | None = None,
    run_id: str | None = None,
    reason: str | None = None,
    message: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``sessions.changed`` push: a run's lifecycle (``phase`` with its ``runId``), a reason push, or (with
    ``message``) ``phase: "message"`` for a stored message no ``session.message`` shows, which names the message
    and no run (2026.9.6, ``server-session-events-*.mjs:204-218``; measured for a heartbeat's prompt and a bare
    ``HEARTBEAT_OK``)."""
    payload: dict[str, Any] = {"sessionKey": session.key, "agentId": session.agent_id}
    if message is not None:
        payload["phase"] = "message"
    elif phase is not None:
        payload["phase"] = phase
        payload["runId"] = run_id
    if reason is not None:
        payload["reason"] = reason
    payload["ts"] = now_ms
    if message is not None:
        meta = message.get("__openclaw") or {}
        payload["messageId"] = meta.get("id")
        payload["messageSeq"] = meta.get("seq")
    row = session.row(event=True)
    if phase == "start" or (message is not None and session.active is not None):
        # Live: these pushes say the session is active but not which runs ("identities unavailable").
        row["activeRunIds"] = None
    payload["session"] = row
    payload.update({k: v for k, v in row.items() if k != "key"})
    return payload


def failed_before_reply(run: Run, error: str, now_ms: int) -> dict[str, Any]:
    """What a CLI runtime's failed turn leaves in the transcript instead of an assistant message (measured on
    2026.9.6: ``chat.history`` shows it; owc reads no ``custom`` message)."""
    return {
        "role": "custom",
        "customType": "run-failed-before-reply",
        "content": f"This turn ended before a reply: {error}",
        "display": True,
        "timestamp": now_ms,
        "__openclaw": {"runId": run.run_id},
    }


def failed_before_reply_text(error: str) -> str:
    """The second error terminal of a failed turn (the send's reply path; measured on 2026.9.6 for a CLI turn,
    ``...code 143.``, and an embedded one, ``...tool payload.``: one full stop, not two)."""
    said = error if error.endswith(".") else f"{error}."
    return f"⚠️ Agent failed before reply: {said}\nTo view logs, run `openclaw logs --follow` in a terminal."


def error_copy(error: str) -> str:
    """The simulator's copy of a failure in ``chat.history``: like the real Gateway's (``renderRecorded
    AssistantFailureCopy``, one paragraph) it is not the live ``errorMessage``'s words, so a test sees which of
    the two a message shows."""
    return "⚠️ LLM request failed (" + " ".join(error.split()) + ")."


def terminal_error_message(run: Run, error: str, text: str, now_ms: int) -> dict[str, Any]:
    """What an embedded run's failure leaves in the transcript, as ``chat.history`` shows it (measured on
    2026.9.6, docs/reference/gateway-errors-heartbeats-internal.md): an assistant message keyed
    ``<R>:terminal-error`` with ``stopReason: "error"``, its text the Gateway's copy of the failure, then a blank
    line and the text the run had written (its partial), if any; ``errorMessage`` is not shown."""
    key = f"{run.run_id}:terminal-error"
    body = error_copy(error) + (f"\n\n{text}" if text.strip() else "")
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": body}],
        "api": "openai-completions",
        "provider": PROVIDER,
        "model": MODEL,
        "stopReason": "error",
        "timestamp": now_ms,
        "idempotencyKey": key,
        "__openclaw": {"runId": run.run_id, "idempotencyKey": key},
    }
